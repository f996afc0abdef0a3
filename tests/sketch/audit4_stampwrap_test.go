package sketch_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit4RollbackAfterStampWrap: the package promises "Never below the
// truth: ... with Min aggregation and non-negative deltas Query(k) >= the
// key's true score, whatever the collisions, clamps, roll-backs, rotations
// or clock jumps", and that a roll-back gives an increment back "only
// where that cannot take another key's mass (it still holds the very word
// the call stored, or was written since only within the same
// millisecond, below Hi)". A TryUpdate of A =
// (x, y) is held between its CAS on x and its CAS on y; the clock jumps
// forward (exactly 2^32 ms, 49.7 days, in the failing case) and B = (x, v)
// and D = (u, y) are updated, so A's CAS on y fails and its undo finds x
// written since. 49.7 days of Linear(1) decay have drained every earlier
// score to 0, so B's true score is the 2 it just received; the roll-back
// must not take A's (long drained) 1 out of x. The control jumps 2^32+1 ms.
func TestAudit4RollbackAfterStampWrap(t *testing.T) {
	for _, c := range []struct {
		name string
		jump int64
	}{{"2^32ms", 1 << 32}, {"2^32+1ms/control", 1<<32 + 1}, {"3x2^32ms", 3 << 32}} {
		jump := c.jump
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 1e9, Decay: decay.Linear(1), Clock: clk}
			a, b, d := conflictKeys(t, cfg)
			s := mustNewSketch(t, cfg)
			gate := newCommitGate(t, s, 1)
			s.Update(b, 10)  // x = 10, v = 10
			s.Update(a, 0.5) // x = 10.5, y = 0.5
			done := make(chan bool, 1)
			go func() { done <- s.TryUpdate(a, 1, 1.5) }() // min(10.5, 0.5) + 1 <= 1.5: admitted, x = 11.5
			gate.wait(t)
			clk.Set(clk.NowMillis() + jump)
			s.Update(b, 2) // everything drained: x = 2, v = 2; B's truth is 2
			s.Update(d, 3) // y = 3: A's CAS on y fails
			gate.open()
			ok := <-done
			// Whatever A's outcome, B's estimate may not fall below its
			// truth (2); A's own truth is 0 or 1.
			if q := s.Query(b); q < 2 {
				lv := s.QueryDetailed(b).Levels
				t.Errorf("after a %d ms jump: Query(B) = %v < B's true score 2 (cells %v, %v; A admitted %v): the roll-back took B's mass",
					jump, q, lv[0].Score, lv[1].Score, ok)
			}
			want := 0.0
			if ok {
				want = 1
			}
			if q := s.Query(a); q < want {
				t.Errorf("Query(A) = %v < its true score %v", q, want)
			}
		})
	}
}

// TestAudit4RefundAfterStampWrap: the same roll-back rule reached through
// a receipt ("a cancelled reservation" in the package's roll-back
// guarantee; Sketch.Refund: a cell "written since, in the same
// millisecond, has the increment subtracted", "any other cell (time has
// passed ...) keeps the increment"). A reserves 1 (or 5) at T0; at T0 + jump,
// when every earlier score has drained, B writes the shared cell x; then
// the reservation is refunded. B's estimate must stay at or above its
// truth. Two forms: x written since with another word (B had 10 there:
// the subtraction case; with A's 5 against B's 2 the subtraction
// empties x, clamped at Lo = 0), and x holding the very word A stored (B's 1 on
// a drained cell packs to the same float32 and the same 32-bit stamp:
// the exact-undo case).
func TestAudit4RefundAfterStampWrap(t *testing.T) {
	for _, c := range []struct {
		name   string
		jump   int64
		before float64 // B's score at T0
		after  float64 // B's write at T0 + jump: its truth then
		inc    float64 // A's reservation
	}{
		{"subtract/2^32", 1 << 32, 10, 2, 1},
		{"subtract/2^32+1/control", 1<<32 + 1, 10, 2, 1},
		{"empties/2^32", 1 << 32, 10, 2, 5},
		{"empties/2^32+1/control", 1<<32 + 1, 10, 2, 5},
		{"sameword/2^32", 1 << 32, 0, 1, 1},
		{"sameword/2^32+1/control", 1<<32 + 1, 0, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Hi: 1e9, Decay: decay.Linear(1), Clock: clk}
			a, b, _ := conflictKeys(t, cfg)
			s := mustNewSketch(t, cfg)
			e := core.SketchOf(s)
			if c.before != 0 {
				s.Update(b, c.before)
			}
			rc, ok := e.TryReserveAt(clk.Now(), a, c.inc, 100)
			if !ok {
				t.Fatal("reservation denied")
			}
			clk.Set(clk.NowMillis() + c.jump)
			s.Update(b, c.after)
			full := e.Refund(&rc)
			if q := s.Query(b); q < c.after {
				t.Errorf("after Refund (reported complete: %v) Query(B) = %v < B's true score %v", full, q, c.after)
			}
			a4CheckFinite(t, s, [][]byte{a, b}, 0, 1e9)
		})
	}
}

// TestAudit4LimiterCancelAfterStampWrap: the roll-back above through
// limit's public API. limit.Reservation.Cancel promises "a key is never
// given back more than its own reservation, nor anything of another
// key's", and gives back a cell written since only "within the same
// millisecond". A count-min limiter of 1 token a day, burst 100, every
// key in one cell (WithSize(2, 1)), Period long enough for the
// generations to outlive 49.7 days (a slow rate needs one: New refuses a
// Period under MaxDebt / rate). A reserves 60 at T0; exactly 2^32 ms
// later (49.7 tokens drained from A's debt) B takes 50; then A cancels.
// B's debt is 50, so B may take at most 50 more; with the control jump
// (2^32 + 1 ms) it is held to that.
func TestAudit4LimiterCancelAfterStampWrap(t *testing.T) {
	for _, c := range []struct {
		name string
		jump int64
	}{{"2^32ms", 1 << 32}, {"2^32+1ms/control", 1<<32 + 1}} {
		jump := c.jump
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l, err := limit.New(limit.Every(24*time.Hour), 100, limit.WithEngine(limit.CountMin), limit.WithSize(2, 1),
				limit.WithPeriod(400*24*time.Hour), limit.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			res := l.ReserveN(clk.Now(), "a", 60)
			if !res.OK() {
				t.Fatal("reservation refused")
			}
			clk.Set(clk.NowMillis() + jump)
			now := clk.Now()
			if !l.AllowN(now, "b", 50) {
				t.Fatal("B's first 50 refused")
			}
			res.Cancel()
			if l.AllowN(now, "b", 51) {
				t.Errorf("jump %d ms: after A's Cancel, B (debt 50, burst 100) was allowed 51 more: Cancel gave back B's debit (B's tokens now %v)", jump, l.TokensAt(now, "b"))
			}
		})
	}
}
