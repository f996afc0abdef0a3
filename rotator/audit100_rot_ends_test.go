package rotator

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a100Env = "GRUDGE_A100_ROT_CHILD"

// a100Child runs body in a child process (this test binary again, only
// the calling test, with a 60 s timeout, killed after testchild.Bound
// if it hangs past that), so that a rotator promoting
// for ever near the end of int64 time fails the test instead of hanging
// the run. In the child it runs body itself.
func a100Child(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	testchild.Isolate(t, a100Env, body)
}

// TestAudit100RotEndsFixedExactMaxDeadlineNeverCrossed (audit 100; fixed at stop 59, the text below says
// what was wrong): a deadline that
// lands on MaxInt64 ms exactly (start + N x Period == MaxInt64, on the
// grid: not saturated) is never crossed, since settle cannot tell it from
// a saturated one. rotator/doc.go says only "A deadline saturated at the
// largest int64 millisecond is never crossed"; its Guarantees also say
// "Exactly one promotion per deadline crossed" and "a write is gone from
// every generation at most N x Period after it was made" (config.go: "A
// score lives at most Generations x Period after its last write"). A
// write at MaxInt64 - N x Period, the clock then read at each deadline up
// to MaxInt64, still reads 1 at MaxInt64 (N x Period after it) and for
// ever after; the same clock jumping straight from the write to MaxInt64
// forgets it (one promotion of N periods), so the two paths disagree.
func TestAudit100RotEndsFixedExactMaxDeadlineNeverCrossed(t *testing.T) {
	a100Child(t, func(t *testing.T) {
		const p = 10
		for _, n := range []uint32{2, 3} {
			s := int64(math.MaxInt64) - int64(n)*p
			clk := sketchtest.NewFakeClock()
			clk.Set(s)
			r := a99Rot(t, clk, n, p*time.Millisecond)
			r.UpdateString("k", 1)
			for d := s + p; d < math.MaxInt64; d += p {
				clk.Set(d)
				r.QueryString("x")
			}
			clk.Set(math.MaxInt64)
			got := r.QueryString("k")
			st := r.Stats()
			if got != 0 || st.Periods != uint64(n) {
				t.Errorf("N=%d: write at MaxInt64-%d ms, clock stepped through every deadline to MaxInt64: Query %v, Stats %+v (deadline %d); want 0 (N x Period after the write) and %d periods (the deadline MaxInt64 is on the grid, not saturated)",
					n, n*p, got, st, r.e.Current().Deadline, n)
			}
		}
	})
}

// TestAudit100RotEndsGridJumps: one forward jump anywhere in the int64
// range (clocks before 1970, MinInt64, across 2^63 ms of difference)
// counts exactly the grid deadlines it passes (math/big oracle), keeps
// the next deadline on the grid (or saturates it at MaxInt64 when the
// grid's next point is past it), forgets a write iff k >= N, and the
// next deadline (when not at MaxInt64) is one more promotion of one
// period; a step back to MinInt64 then rotates nothing.
func TestAudit100RotEndsGridJumps(t *testing.T) {
	a100Child(t, func(t *testing.T) {
		maxP := int64(math.MaxInt64 / int64(time.Millisecond))
		starts := []int64{math.MinInt64, math.MinInt64 + 7, -1 << 62, -86_400_000, -1, 0, a99T0}
		periods := []int64{1, 7, 1000, maxP}
		bigMax := big.NewInt(math.MaxInt64)
		for _, s := range starts {
			for _, pm := range periods {
				for _, to := range []int64{s + pm - 1, s + pm, s + 3*pm + 1, -1, 0, 1 << 62, math.MaxInt64 - 2*pm - 1, math.MaxInt64 - 1, math.MaxInt64} {
					if to < s+pm-1 || (s == math.MaxInt64-pm && to == math.MaxInt64) {
						continue
					}
					for _, n := range []uint32{2, 3} {
						name := fmt.Sprintf("N=%d P=%dms start %d -> %d", n, pm, s, to)
						clk := sketchtest.NewFakeClock()
						clk.Set(s)
						r := a99Rot(t, clk, n, time.Duration(pm)*time.Millisecond)
						r.UpdateString("k", 1)
						// Oracle: deadlines D0 + j*p, D0 = s + p; those <= to are crossed.
						d0 := new(big.Int).Add(big.NewInt(s), big.NewInt(pm))
						var k uint64
						wantDl := new(big.Int).Set(d0)
						if d0.Cmp(big.NewInt(to)) <= 0 {
							q := new(big.Int).Sub(big.NewInt(to), d0)
							q.Quo(q, big.NewInt(pm))
							k = q.Uint64() + 1
							wantDl.Add(d0, new(big.Int).Mul(new(big.Int).SetUint64(k), big.NewInt(pm)))
						}
						if wantDl.Cmp(bigMax) > 0 {
							wantDl.Set(bigMax)
						}
						clk.Set(to)
						want := 1.0
						if k >= uint64(n) {
							want = 0
						}
						if got := r.QueryString("k"); got != want {
							t.Fatalf("%s: Query %v, want %v (%d periods)", name, got, want, k)
						}
						st := r.Stats()
						wantProm := uint64(0)
						if k > 0 {
							wantProm = 1
						}
						if st.Periods != k || st.Promotions != wantProm {
							t.Fatalf("%s: Stats %+v, want one promotion of %d periods", name, st, k)
						}
						dl := r.e.Current().Deadline
						if dl != wantDl.Int64() {
							t.Fatalf("%s: deadline %d, want %v", name, dl, wantDl)
						}
						if dl != math.MaxInt64 {
							clk.Set(dl)
							r.QueryString("x")
							if st2 := r.Stats(); st2.Periods != k+1 || st2.Promotions != wantProm+1 {
								t.Fatalf("%s: at the next deadline %d: Stats %+v, want one more promotion of one period", name, dl, st2)
							}
						}
						before := r.Stats()
						clk.Set(math.MinInt64)
						r.UpdateString("k", 1)
						if st3 := r.Stats(); st3 != before {
							t.Fatalf("%s: a step back to MinInt64 changed Stats %+v -> %+v", name, before, st3)
						}
					}
				}
			}
		}
	})
}

// TestAudit100RotEndsSaturatedStays: with the deadline saturated (built
// within a Period of MaxInt64), writes at MaxInt64 - Period/2 and at
// MaxInt64 are kept (their N x Period window ends past the end of int64
// time: doc.go, "A deadline saturated at the largest int64 millisecond
// is never crossed"), and many operations at MaxInt64 promote nothing
// and build nothing.
func TestAudit100RotEndsSaturatedStays(t *testing.T) {
	a100Child(t, func(t *testing.T) {
		const p = 1000
		clk := sketchtest.NewFakeClock()
		clk.Set(math.MaxInt64 - p/2)
		r := a99Rot(t, clk, 2, p*time.Millisecond)
		if dl := r.e.Current().Deadline; dl != math.MaxInt64 {
			t.Fatalf("deadline %d, want saturated", dl)
		}
		r.UpdateString("a", 2)
		clk.Set(math.MaxInt64)
		r.UpdateString("b", 3)
		for range 100 {
			r.QueryString("x")
			r.TryUpdateString("y", 1, 1e6)
		}
		if a, b := r.QueryString("a"), r.QueryString("b"); a != 2 || b != 3 {
			t.Fatalf("at MaxInt64: a %v, b %v; want 2 and 3", a, b)
		}
		if st := r.Stats(); st.Promotions != 0 || st.Periods != 0 || st.Allocated != 2 {
			t.Fatalf("Stats %+v, want nothing promoted or built", st)
		}
	})
}

// TestAudit100RotEndsManualAtMax: Rotate (the Manual/ticker mode) at the
// end of int64 time rotates exactly once per call, concurrent calls
// included ("concurrent calls each rotate once"), a write is gone after
// N Rotates and kept after N-1, the deadline saturates, and access never
// promotes.
func TestAudit100RotEndsManualAtMax(t *testing.T) {
	a100Child(t, func(t *testing.T) {
		for _, n := range []uint32{2, 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(math.MaxInt64 - 3)
			r := a99Rot(t, clk, n, 10*time.Millisecond)
			r.e.SetManual()
			clk.Set(math.MaxInt64)
			r.UpdateString("k", 1)
			for range n - 1 {
				r.e.Rotate()
			}
			if got := r.QueryString("k"); got != 1 {
				t.Fatalf("N=%d: after N-1 Rotates: %v, want 1", n, got)
			}
			r.e.Rotate()
			if got := r.QueryString("k"); got != 0 {
				t.Fatalf("N=%d: after N Rotates: %v, want 0", n, got)
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						r.e.Rotate()
						r.UpdateString("z", 1)
					}
				}()
			}
			wg.Wait()
			want := uint64(n) + 20
			if st := r.Stats(); st.Promotions != want || st.Periods != want || st.Allocated != uint64(n)+want {
				t.Fatalf("N=%d: Stats %+v, want %d promotions and periods, %d sketches", n, st, want, uint64(n)+want)
			}
			if dl := r.e.Current().Deadline; dl != math.MaxInt64 {
				t.Fatalf("N=%d: deadline %d after Rotate at MaxInt64, want saturated", n, dl)
			}
		}
	})
}

// TestAudit100RotEndsTryExact: TryUpdate stays exact (doc.go) while the
// clock sits on or moves onto a saturated deadline: 6 goroutines race
// TryUpdateString("k", 1, 30) while a mover sets the clock to MaxInt64
// part-way through. Either no deadline is crossed (built within a Period
// of MaxInt64) or one is, into a saturated one (k = 1 < N: the new
// primary holds every admission); each goroutine stops on a denial
// decided after the move, so exactly 30 are admitted and the primary
// reads 30.
func TestAudit100RotEndsTryExact(t *testing.T) {
	a100Child(t, func(t *testing.T) {
		const limit, p = 30, 10
		sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
			for round := range 6 {
				start := int64(math.MaxInt64 - 3)
				wantProm := uint64(0)
				if round%2 == 1 {
					start = math.MaxInt64 - p - 3 // deadline MaxInt64-3, crossed by the move
					wantProm = 1
				}
				clk := sketchtest.NewFakeClock()
				clk.Set(start)
				r := a99Rot(t, clk, 2, p*time.Millisecond)
				var admitted, calls atomic.Int64
				var moved atomic.Bool
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for calls.Load() < int64(4*round+2) {
						clk.NowMillis()
						runtime.Gosched() // a call-free spin loop can go unpreempted for ever under qemu-user
					}
					clk.Set(math.MaxInt64)
					moved.Store(true)
				}()
				for range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							after := moved.Load()
							ok := r.TryUpdateString("k", 1, limit)
							calls.Add(1)
							if ok {
								admitted.Add(1)
							} else if after {
								return
							}
						}
					}()
				}
				wg.Wait()
				if a, q := admitted.Load(), r.QueryString("k"); a != limit || q != limit {
					t.Fatalf("round %d: %d admitted, primary reads %v; want exactly %d", round, a, q, limit)
				}
				if st := r.Stats(); st.Promotions != wantProm || st.Periods != wantProm {
					t.Fatalf("round %d: Stats %+v, want %d promotion(s)", round, st, wantProm)
				}
			}
		})
	})
}

// TestAudit100RotEndsFixedRestoreFarClockRetiresEarly (audit 100; fixed at stop 59, the text below says
// what was wrong): a snapshot taken
// and restored on clocks past 2^61 ms (the end of int64 time included)
// loses the deadline's time left: the decoder bounds wall times to
// +-2^61 ms (internal/core/snapshot.go farWall), so the snapshot instant
// and the deadline both read 2^61 and "left" is 0. The restored primary
// then retires on the next access, with no downtime at all, and a write
// that the never-stopped rotator still reads is gone. docs/snapshots.md
// ("A restored rotator's primary retires after the time its deadline had
// left at the snapshot instant, at most one Period, less the downtime")
// and ReadFrom's doc ("a deadline that passed during the downtime
// promotes on the next access, as it would have"). N = 2, Period 10 ms:
// built at s, a write at s + 9 (in both generations), the clock at s +
// 10 promotes (the write now in the primary only), snapshot at s + 11,
// restore on a clock at s + 11: the original reads 1 until s + 20.
// Checked for s a 2026 time (passes), 2^62, and MaxInt64 - 15 (the
// deadline after the promotion saturated: the original keeps the write
// for ever).
func TestAudit100RotEndsFixedRestoreFarClockRetiresEarly(t *testing.T) {
	a100Child(t, func(t *testing.T) {
		const p = 10
		for _, s := range []int64{a99T0, 1 << 62, math.MaxInt64 - 15} {
			clk := sketchtest.NewFakeClock()
			clk.Set(s)
			r := a99Rot(t, clk, 2, p*time.Millisecond)
			clk.Set(s + 9)
			r.UpdateString("k", 1)
			clk.Set(s + 10)
			r.QueryString("x")
			clk.Set(s + 11)
			var b bytes.Buffer
			if _, err := r.WriteTo(&b); err != nil {
				t.Fatal(err)
			}
			clk2 := sketchtest.NewFakeClock()
			clk2.Set(s + 11)
			r2 := a99Rot(t, clk2, 2, p*time.Millisecond)
			if _, err := r2.ReadFrom(bytes.NewReader(b.Bytes())); err != nil {
				t.Fatal(err)
			}
			wantDl := r.e.Current().Deadline
			dl := r2.e.Current().Deadline
			got, orig := r2.QueryString("k"), r.QueryString("k")
			if got != orig || dl != wantDl {
				t.Errorf("clock %d: restored with no downtime: deadline %d (the original's %d), Query %v (the original reads %v); Stats %+v",
					s, dl, wantDl, got, orig, r2.Stats())
			}
		}
	})
}
