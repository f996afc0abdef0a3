package rotator

import (
	"bytes"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a153Pos are clock readings (Unix ms, clocks with Now): both ends of
// int64 ms, the decoders' bound 2^61 on both sides, and 0.
var a153Pos = []int64{math.MaxInt64, math.MaxInt64 - 30_000, 1<<61 + 5_000, 1 << 61, 1<<61 - 5_000, 0,
	-1<<61 + 5_000, -1 << 61, -1<<61 - 5_000, math.MinInt64 + 30_000, math.MinInt64}

// a153Elapsed is r - w in ms, clamped to [0, MaxInt64].
func a153Elapsed(w, r int64) int64 {
	d := new(big.Int).Sub(big.NewInt(r), big.NewInt(w))
	if d.Sign() <= 0 {
		return 0
	}
	if !d.IsInt64() {
		return math.MaxInt64
	}
	return d.Int64()
}

// a153Plain is a clock without Now (anchored at time.Now()).
type a153Plain struct{ ms int64 }

func (c *a153Plain) NowMillis() int64 { return c.ms }

// TestAudit153RotRestoreMatrix: a rotator (N = 3, Period 10 s, no decay)
// holding k = 5 written at w, snapshot at w, restored at r for every pair
// of a153Pos: k reads at most 5 and, where a never-stopped rotator still
// holds it (r - w < (N-1) x Period, r at or before w included), 5; a
// snapshot whose wall instant saturated (clock without Now built at
// MinInt64 ms, written at MaxInt64 ms: today + 2^64 ms) restored at any
// a153Pos reads 5 (no downtime); a k rotated out before the snapshot
// reads 0 wherever it is restored.
func TestAudit153RotRestoreMatrix(t *testing.T) {
	testchild.Isolate(t, "GRUDGE_A153_ROT_CHILD", func(t *testing.T) {
		const n, p = 3, 10 * time.Second
		check := func(name string, snap []byte, alive func(r int64) bool) {
			for _, r := range a153Pos {
				rc := sketchtest.NewFakeClock()
				rc.Set(r)
				m := a99Rot(t, rc, n, p)
				if _, err := m.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatalf("%s, restored at %d: %v", name, r, err)
				}
				got := m.QueryString("k")
				if got > 5 {
					t.Errorf("%s, restored at %d: k = %v, above the snapshot's 5", name, r, got)
				}
				if alive(r) && got != 5 {
					t.Errorf("%s, restored at %d: k = %v, want 5 (a never-stopped rotator still holds it)", name, r, got)
				}
			}
		}
		for _, w := range a153Pos {
			wc := sketchtest.NewFakeClock()
			wc.Set(w)
			s := a99Rot(t, wc, n, p)
			s.UpdateString("k", 5)
			var buf bytes.Buffer
			if _, err := s.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			check("written at "+big.NewInt(w).String(), buf.Bytes(), func(r int64) bool {
				return a153Elapsed(w, r) < int64((n-1)*p/time.Millisecond)
			})
		}
		for _, w := range a153Pos {
			u := w - int64(n*p/time.Millisecond) - 1
			if u > w {
				continue // w - 30 s underflows
			}
			wc := sketchtest.NewFakeClock()
			wc.Set(u)
			s := a99Rot(t, wc, n, p)
			s.UpdateString("k", 5)
			wc.Set(w)
			if got := s.QueryString("k"); got != 0 {
				t.Fatalf("written at %d, read at %d: k = %v, want 0", u, w, got)
			}
			var buf bytes.Buffer
			if _, err := s.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			for _, r := range a153Pos {
				rc := sketchtest.NewFakeClock()
				rc.Set(r)
				m := a99Rot(t, rc, n, p)
				if _, err := m.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
					t.Fatal(err)
				}
				if got := m.QueryString("k"); got != 0 {
					t.Errorf("k rotated out before the snapshot at %d, restored at %d: k = %v, want 0", w, r, got)
				}
			}
		}
		pc := &a153Plain{math.MinInt64}
		r0, err := New(Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: decay.None(), Seed: 99, Clock: pc}, Generations: n, Period: p})
		if err != nil {
			t.Fatal(err)
		}
		pc.ms = math.MaxInt64
		r0.UpdateString("k", 5)
		var buf bytes.Buffer
		if _, err := r0.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		check("saturated wall (today + 2^64 ms)", buf.Bytes(), func(int64) bool { return true })
	})
}
