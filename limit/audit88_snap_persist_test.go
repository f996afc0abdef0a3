package limit_test

// Audit 88 (snapshots and merge): a limiter's snapshot, both engines.
//
// Contract: limit/persist.go ReadFrom ("the engine, its base units (set by
// the limit and MaxDebt), MaxDebt, the size ... must match"; "On any error
// the limiter is left empty, as built (or unchanged, when the header is
// refused)"), limit/doc.go "Saving and restoring" ("the restored limiter
// decides as the never-stopped one would at the same wall time"),
// docs/snapshots.md "Limiters and meters" ("The limit and the burst are
// not compared: they are configuration (another limit changes unit or
// drain and is refused through them ...)"), Reservation.Cancel ("nor, on
// either engine, a reservation taken before the limiter was restored").

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

const a88T0 = 1_790_000_000_000

func a88Engines() map[string][]limit.Option {
	return map[string][]limit.Option{
		"buckets":  {limit.WithEngine(limit.Buckets), limit.WithCapacity(64, 0.01)},
		"countmin": {limit.WithEngine(limit.CountMin), limit.WithSize(2, 256)},
	}
}

func a88New(t testing.TB, lim limit.Limit, burst int, clk *limittest.FakeClock, seed uint64, opts []limit.Option) *limit.Limiter {
	t.Helper()
	all := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, opts...)
	l, err := limit.New(lim, burst, all...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAudit88SnapPersistUnitsAliasLimits: another limit is refused
// through unit or drain only when its base units differ. For a rate with
// no short fraction whose MaxDebt tokens fit (the "other rates" rule of
// internal/units: unit = 1000/r rounded up to m bits, drain 1), nearby
// limits share unit and drain, so a snapshot of limit.New(1.4142135, 20)
// restores without error into limit.New(1.4142136, 20) on the count-min
// engine, and the two then decide alike (audit 88 found docs/snapshots.md
// saying any other limit is refused; it now names this case).
func TestAudit88SnapPersistUnitsAliasLimits(t *testing.T) {
	// CountMin only: the Buckets engine takes exact rates only (short
	// fractions), whose units differ from limit to limit.
	opts := a88Engines()["countmin"]
	clk := limittest.NewFakeClock()
	clk.Set(a88T0)
	a := a88New(t, 1.4142135, 20, clk, 1, opts)
	b := a88New(t, 1.4142136, 20, clk, 2, opts)
	a.Allow("k")
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFrom(&buf); err != nil {
		t.Fatalf("snapshot of New(%v, 20) restored into New(%v, 20), which share unit and drain: %v", a.Limit(), b.Limit(), err)
	}
	// Accepted: the restored limiter decides as the original does.
	for step := range 200 {
		g, w := b.Decide("k"), a.Decide("k")
		if g.Allowed != w.Allowed || g.RetryAfter != w.RetryAfter || g.Remaining != w.Remaining {
			t.Fatalf("step %d: restored %+v, original %+v", step, g, w)
		}
		clk.Advance(97 * time.Millisecond)
	}
}

// TestAudit88SnapPersistDecisionsMatch: keys at several debts (one at
// MaxDebt through reservations, one over the burst, one partial, one
// untouched) on both engines; restored on another seed's limiter, on a
// clock at the instant plus 0, 1 ms, 137 ms, 2.5 s and 1 h, every
// Decision (Allowed, Remaining, RetryAfter, ResetAfter, NextAfter) and
// Tokens equals the never-saved original's at the same instant: first
// TokensAt for every key, then a run of DecideN calls on both.
func TestAudit88SnapPersistDecisionsMatch(t *testing.T) {
	for name, opts := range a88Engines() {
		for _, down := range []time.Duration{0, time.Millisecond, 137 * time.Millisecond, 2500 * time.Millisecond, time.Hour} {
			for _, lim := range []limit.Limit{10, 3, limit.Every(7 * time.Millisecond)} {
				t.Run(fmt.Sprintf("%s/limit=%v/down=%v", name, lim, down), func(t *testing.T) {
					c1 := limittest.NewFakeClock()
					c1.Set(a88T0)
					orig := a88New(t, lim, 8, c1, 11, opts)
					keys := []string{"full", "over", "part", "one", "none"}
					for range 30 {
						orig.ReserveN(c1.Now(), "full", 1)
					}
					for range 12 {
						orig.Allow("over")
					}
					orig.AllowN(c1.Now(), "part", 5)
					c1.Advance(33 * time.Millisecond)
					orig.Allow("one")
					c1.Advance(4 * time.Millisecond)
					var buf bytes.Buffer
					if _, err := orig.WriteTo(&buf); err != nil {
						t.Fatal(err)
					}
					c2 := limittest.NewFakeClock()
					c2.Set(1000)
					res := a88New(t, lim, 8, c2, 99, opts)
					c1.Advance(down)
					c2.Set(c1.NowMillis())
					if _, err := res.ReadFrom(&buf); err != nil {
						t.Fatal(err)
					}
					for _, k := range keys {
						if g, w := res.TokensAt(c2.Now(), k), orig.TokensAt(c1.Now(), k); g != w {
							t.Errorf("%s: restored %v tokens, original %v", k, g, w)
						}
					}
					for step := range 60 {
						k := keys[step%len(keys)]
						n := 1 + step%3
						g, w := res.DecideN(c2.Now(), k, n), orig.DecideN(c1.Now(), k, n)
						if g.Allowed != w.Allowed || g.Remaining != w.Remaining || g.RetryAfter != w.RetryAfter ||
							g.ResetAfter != w.ResetAfter || g.NextAfter != w.NextAfter {
							t.Fatalf("step %d %s n=%d: restored %+v, original %+v", step, k, n, g, w)
						}
						adv := time.Duration(step%4) * 23 * time.Millisecond
						c1.Advance(adv)
						c2.Advance(adv)
					}
				})
			}
		}
	}
}

// a88FailReader returns the first n bytes of b, then fails.
type a88FailReader struct {
	b []byte
	n int
}

func (r *a88FailReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("a88: disk read error")
	}
	k := copy(p, r.b[:min(len(r.b), r.n)])
	r.b, r.n = r.b[k:], r.n-k
	return k, nil
}

// TestAudit88SnapPersistFailedLoadAndCancel: a limiter holding debts
// (built with the snapshot's configuration), with a Reservation taken
// before a restore that fails past the header (a read error, a
// truncation, a checksum flipped at the end), then cancelled: the
// limiter is as the doc says (CountMin: unchanged, so the Cancel gives
// the reservation back; Buckets: emptied, so every key has its burst and
// the Cancel gives nothing: never more than the burst), and afterwards
// the limiter still decides (a burst of 8 admits 8, then denies).
func TestAudit88SnapPersistFailedLoadAndCancel(t *testing.T) {
	for name, opts := range a88Engines() {
		for _, how := range []string{"readerr", "truncated", "crc"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(a88T0)
				src := a88New(t, 10, 8, clk, 5, opts)
				src.AllowN(clk.Now(), "k", 6)
				var buf bytes.Buffer
				if _, err := src.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				snap := buf.Bytes()
				dst := a88New(t, 10, 8, clk, 6, opts)
				dst.AllowN(clk.Now(), "other", 2)
				r := dst.ReserveN(clk.Now(), "k", 3)
				if !r.OK() {
					t.Fatal("reservation refused")
				}
				var rd interface{ Read([]byte) (int, error) }
				switch how {
				case "readerr":
					rd = &a88FailReader{b: snap, n: len(snap) - 30}
				case "truncated":
					rd = bytes.NewReader(snap[:len(snap)-9])
				case "crc":
					bad := bytes.Clone(snap)
					bad[len(bad)-1] ^= 1
					rd = bytes.NewReader(bad)
				}
				_, err := dst.ReadFrom(rd)
				if err == nil {
					t.Fatal("a damaged restore was accepted")
				}
				if how != "readerr" && !errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Errorf("err = %v, want ErrCorruptSnapshot", err)
				}
				k, other := dst.Tokens("k"), dst.Tokens("other")
				switch name {
				case "countmin": // unchanged
					if k != 5 || other != 6 {
						t.Errorf("after a refused restore: k %v (want 5), other %v (want 6): not unchanged", k, other)
					}
				case "buckets": // empty, as built
					if k != 8 || other != 8 {
						t.Errorf("after a refused restore: k %v, other %v; want 8 and 8 (empty, as built)", k, other)
					}
				}
				r.Cancel()
				if got := dst.Tokens("k"); got > 8 || (name == "countmin" && got != 8) {
					t.Errorf("after Cancel: k has %v tokens (burst 8)", got)
				}
				admitted := 0
				for range 12 {
					if dst.Allow("fresh") {
						admitted++
					}
				}
				if admitted != 8 {
					t.Errorf("a fresh key admitted %d of 12 with burst 8", admitted)
				}
				if math.IsNaN(dst.Tokens("k")) {
					t.Error("NaN tokens")
				}
			})
		}
	}
}
