package limit_test

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a153Pos are clock readings (Unix ms on a clock with Now): both ends of
// int64 ms, the snapshot decoders' bound 2^61 on both sides, and 0.
var a153Pos = []int64{math.MaxInt64, 1<<61 + 5_000, 1 << 61, 0, -1 << 61, -1<<61 - 5_000, math.MinInt64}

// a153Small sizes every limiter here for 1,000 keys: the ends of the ms
// range do not depend on the size, and 98 restores of the default
// (100k-line) limiter took 115 s of make test's race step.
var a153Small = limit.WithCapacity(1000, 0.01)

// a153Elapsed is max(r - w, 0) in ms as a float64, exact in big.Int.
func a153Elapsed(w, r int64) float64 {
	d := new(big.Int).Sub(big.NewInt(r), big.NewInt(w))
	if d.Sign() <= 0 {
		return 0
	}
	f, _ := new(big.Float).SetInt(d).Float64()
	return f
}

// TestAudit153LimitRestoreMatrixBothEngines: a limiter (10/s, burst 20)
// drained on key k at w (clock with Now), snapshot at w, restored on a
// fresh limiter at r, for every pair of a153Pos on both engines: the
// restored Tokens(k) is at least what the snapshot held (0: no debt
// beyond the snapshot's, nothing that had drained comes back)
// and at most what a never-stopped limiter reads at r (min(20,
// 10/s x max(r-w, 0))): downtime is counted at most as the clocks say; a
// restore at or before w reads 0 tokens.
func TestAudit153LimitRestoreMatrixBothEngines(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, w := range a153Pos {
			wc := limittest.NewFakeClock()
			wc.Set(w)
			l, err := limit.New(10, 20, limit.WithClock(wc), limit.WithEngine(eng), limit.WithSeed(153), a153Small)
			if err != nil {
				t.Fatal(err)
			}
			for l.Allow("k") {
			}
			if tk := l.Tokens("k"); tk > 1e-9 {
				t.Fatalf("engine %v at %d: drained k reads %v tokens", eng, w, tk)
			}
			var buf bytes.Buffer
			if _, err := l.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			for _, r := range a153Pos {
				m := a153Restore(t, eng, buf.Bytes(), r, fmt.Sprintf("engine %v w %d r %d", eng, w, r))
				truth := math.Min(20, a153Elapsed(w, r)*10/1000)
				got := m.Tokens("k")
				name := fmt.Sprintf("engine %v, written at %d, restored at %d", eng, w, r)
				if got > truth+1e-6 {
					t.Errorf("%s: Tokens(k) = %v, above a never-stopped limiter's %v (downtime over-counted)", name, got, truth)
				}
				if got < -1e-9 {
					t.Errorf("%s: Tokens(k) = %v, below the snapshot's 0", name, got)
				}
			}
		}
	}
}

// a153Plain is a clock without Now: its Timebase anchors at time.Now().
type a153Plain struct{ ms int64 }

func (c *a153Plain) NowMillis() int64 { return c.ms }

// TestAudit153LimitSaturatedWallRestoredEarlierNoDowntime: a limiter on a
// clock without Now built at MinInt64 ms (today) and drained at MaxInt64
// ms (today + 2^64 ms: the snapshot's wall instant saturates at
// MaxInt64) is restored on clocks with Now at every a153Pos (all at or
// before that instant): no downtime, k reads 0 tokens on both engines.
func TestAudit153LimitSaturatedWallRestoredEarlierNoDowntime(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		clk := &a153Plain{math.MinInt64}
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(153), a153Small)
		if err != nil {
			t.Fatal(err)
		}
		clk.ms = math.MaxInt64
		for l.Allow("k") {
		}
		var buf bytes.Buffer
		if _, err := l.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		for _, r := range a153Pos {
			m := a153Restore(t, eng, buf.Bytes(), r, fmt.Sprintf("engine %v r %d", eng, r))
			if got := m.Tokens("k"); math.Abs(got) > 1e-6 {
				t.Errorf("engine %v: saturated-wall snapshot restored at %d: Tokens(k) = %v, want 0 (no downtime)", eng, r, got)
			}
		}
	}
}

// a153Restore returns a limiter of the matrix's configuration on eng,
// its clock at r, restored from snap; where names the case in a failure.
func a153Restore(t *testing.T, eng limit.Engine, snap []byte, r int64, where string) *limit.Limiter {
	t.Helper()
	rc := limittest.NewFakeClock()
	rc.Set(r)
	m, err := limit.New(10, 20, limit.WithClock(rc), limit.WithEngine(eng), limit.WithSeed(153), a153Small)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return m
}
