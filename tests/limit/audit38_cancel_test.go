package limit_test

// Audit 38: Reservation.Cancel. A cancelled reservation gives back at
// most its own debit: every key reads at least the debt of its history
// replayed without the cancelled reservations (the truth), alone in its
// cells or crowded; a key alone gets exactly that back when nothing
// touched it since, also after time passed; a second Cancel and the
// Cancel of a refused reservation change nothing.

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a38ev is one debit of a key: at ms, ms of debt (100 a token at 10/s).
type a38ev struct {
	at, ms    int64
	cancelled bool
}

// a38truth replays evs (skipping the cancelled ones) up to now, in ms of
// debt at 10/s.
func a38truth(evs []*a38ev, now int64) int64 {
	var debt, at int64
	for _, e := range evs {
		if e.cancelled {
			continue
		}
		debt = min(max(debt-(e.at-at), 0)+e.ms, 6000) // MaxDebt 60 tokens
		at = e.at
	}
	if len(evs) > 0 {
		debt = max(debt-(now-at), 0)
	}
	return debt
}

// a38debtMs reads l's debt for key in ms at 10/s (100 ms a token).
func a38debtMs(l *limit.Limiter, t time.Time, key string) float64 {
	return (float64(l.Burst()) - l.TokensAt(t, key)) * 100
}

// a38cfgs are the engines of the crowded tests: Buckets, the count-min,
// and the conservative count-min.
var a38cfgs = []string{"buckets", "count-min", "count-min-cu"}

func a38crowded(cfg string, clk *sketchtest.FakeClock, seed uint64, extra ...limit.Option) (*limit.Limiter, error) {
	eng := limit.Buckets
	if cfg != "buckets" {
		eng = limit.CountMin
	}
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(eng), noAmnesty(eng), limit.WithMaxDebt(60)}
	if cfg == "count-min-cu" {
		opts = append(opts, limit.WithConservativeUpdate(true))
	}
	opts = append(opts, extra...)
	if eng == limit.CountMin {
		opts = append(opts, limit.WithSize(2, 16))
	} else {
		opts = append(opts, limit.WithCapacity(4, 0.5))
	}
	return limit.New(10, 20, opts...)
}

// TestAudit38CancelNeverBelowTruthCrowded: a tiny engine (count-min 2 x
// 16 cells, Buckets sized for 4 keys) shared by 60 keys; random
// ReserveN, AllowN, Cancel (some twice, some of refused reservations) and
// time steps; after every step every key touched reads at least its
// truth. reserve.go: "a key is never given back more than its own
// reservation, nor anything of another key's".
func TestAudit38CancelNeverBelowTruthCrowded(t *testing.T) {
	testsize.Serial(t)
	for _, eng := range a38cfgs {
		for seed := range uint64(testsize.Pick(6, 2)) {
			reject := int64(seed % 2) // a denied AllowN charges a token on odd seeds
			t.Run(fmt.Sprintf("%s/seed%d", eng, seed), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				now := int64(1 << 36)
				clk.Set(now)
				l, err := a38crowded(eng, clk, seed, limit.WithRejectCost(float64(reject)))
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(seed, 380))
				evs := map[string][]*a38ev{}
				type held struct {
					r   *limit.Reservation
					key string
					ev  *a38ev
				}
				var hs []held
				var cancels, refusedCancels int
				for step := range 3000 {
					key := fmt.Sprintf("k%d", rng.IntN(60))
					switch op := rng.IntN(10); {
					case op < 4:
						n := 1 + rng.IntN(6)
						if rng.IntN(4) == 0 {
							n = 10 + rng.IntN(11)
						}
						r := l.ReserveN(clk.Now(), key, n)
						if r.OK() {
							ev := &a38ev{at: now, ms: int64(n) * 100}
							evs[key] = append(evs[key], ev)
							hs = append(hs, held{r, key, ev})
						} else {
							before := a38debtMs(l, clk.Now(), key)
							r.Cancel()
							refusedCancels++
							if after := a38debtMs(l, clk.Now(), key); after != before {
								t.Fatalf("step %d: Cancel of a refused reservation moved %s's debt %v -> %v ms", step, key, before, after)
							}
						}
					case op < 7:
						n := 1 + rng.IntN(3)
						if l.AllowN(clk.Now(), key, n) {
							evs[key] = append(evs[key], &a38ev{at: now, ms: int64(n) * 100})
						} else if reject > 0 {
							evs[key] = append(evs[key], &a38ev{at: now, ms: reject * 100})
						}
					case op < 9 && len(hs) > 0:
						i := rng.IntN(len(hs))
						h := hs[i]
						h.r.Cancel()
						h.ev.cancelled = true
						cancels++
						if rng.IntN(3) == 0 {
							before := a38debtMs(l, clk.Now(), h.key)
							h.r.Cancel()
							if after := a38debtMs(l, clk.Now(), h.key); after != before {
								t.Fatalf("step %d: a second Cancel moved %s's debt %v -> %v ms (\"Only the first call does anything\")", step, h.key, before, after)
							}
						}
						hs = append(hs[:i], hs[i+1:]...)
					default:
						now += int64(rng.IntN(120))
						clk.Set(now)
					}
					for k, e := range evs {
						truth := a38truth(e, now)
						if got := a38debtMs(l, clk.Now(), k); got < float64(truth)-1e-6 {
							t.Fatalf("step %d key %s: reads %v ms of debt, below its truth %d ms (history without its cancelled reservations): a Cancel gave back more than its own", step, k, got, truth)
						}
					}
				}
				t.Logf("engine bytes %d, saturation %.3f, cancels %d, refused %d", l.Sizes().Total, l.Stats().Saturation, cancels, refusedCancels)
				if cancels < 300 || refusedCancels < 20 {
					t.Fatalf("too few cancels: %d, refused %d", cancels, refusedCancels)
				}
			})
		}
	}
}

// TestAudit38CancelAloneExact: a key alone in a large engine: reserve
// n at t0 on top of an earlier debt, let dt pass (less than, equal to, and
// more than the reservation's drain), Cancel: the key reads its history
// without the reservation, exactly ("the key reads as if the reservation
// had never been taken, the part drained since included"); on the
// conservative count-min it keeps the debit whole, as its option says.
func TestAudit38CancelAloneExact(t *testing.T) {
	for _, cfg := range a38cfgs {
		t.Run(cfg, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			now := int64(1 << 36)
			clk.Set(now)
			eng := limit.Buckets
			if cfg != "buckets" {
				eng = limit.CountMin
			}
			l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(eng), noAmnesty(eng), limit.WithMaxDebt(60), limit.WithConservativeUpdate(cfg == "count-min-cu"))
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for _, pre := range []int{0, 1, 5, 19, 20, 30} {
				for _, n := range []int{1, 2, 3, 4, 7, 20} {
					for _, dt := range []int64{0, 1, 99, 100, 250, 700, 2000, 6000} {
						i++
						key := fmt.Sprintf("k%d", i)
						var evs []*a38ev
						for p := pre; p > 0; p -= min(p, 20) {
							r := l.ReserveN(clk.Now(), key, min(p, 20))
							if !r.OK() {
								t.Fatalf("pre %d refused", pre)
							}
							evs = append(evs, &a38ev{at: now, ms: int64(min(p, 20)) * 100})
						}
						now += 37
						clk.Set(now)
						r := l.ReserveN(clk.Now(), key, n)
						if !r.OK() {
							continue // beyond MaxDebt
						}
						ev := &a38ev{at: now, ms: int64(n) * 100}
						evs = append(evs, ev)
						full := a38truth(evs, now) >= 6000
						now += dt
						clk.Set(now)
						r.Cancel()
						ev.cancelled = true
						got := a38debtMs(l, clk.Now(), key)
						want := a38truth(evs, now)
						if full || cfg == "count-min-cu" {
							// Filled to MaxDebt: never given back; and a
							// conservative count-min gives nothing back
							// (WithConservativeUpdate: "a Cancel, WaitN's
							// cancel and a Multi's refund give nothing
							// back").
							ev.cancelled = false
							want = a38truth(evs, now)
						}
						if got < float64(want)-1e-6 || got > float64(want)+1e-6 {
							t.Errorf("pre %d n %d dt %d ms: after Cancel reads %v ms, want %d ms", pre, n, dt, got, want)
						}
					}
				}
			}
		})
	}
}

// TestAudit38CancelConcurrentNeverBelow: goroutines reserve and cancel on
// keys of a crowded engine with a frozen clock; at the end, every key
// reads at least the reservations it still holds (never below truth),
// and one that cancelled everything reads at least 0. -race, GOMAXPROCS 1,
// 2, 8.
func TestAudit38CancelConcurrentNeverBelow(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, eng := range a38cfgs {
			t.Run(fmt.Sprintf("P%d/%s", procs, eng), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				l, err := a38crowded(eng, clk, 3)
				if err != nil {
					t.Fatal(err)
				}
				kept := make([]map[string]int64, 4)
				var wg sync.WaitGroup
				for g := range 4 {
					kept[g] = map[string]int64{}
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 9))
						for i := range 400 {
							key := fmt.Sprintf("g%d-%d", g, rng.IntN(8))
							n := 1 + rng.IntN(4)
							r := l.ReserveN(clk.Now(), key, n)
							if !r.OK() {
								continue
							}
							if i%3 != 0 {
								r.Cancel()
								if i%2 == 0 {
									r.Cancel()
								}
							} else {
								kept[g][key] += int64(n) * 100
							}
						}
					})
				}
				wg.Wait()
				for g := range kept {
					for k, ms := range kept[g] {
						if got := a38debtMs(l, clk.Now(), k); got < float64(ms)-1e-6 {
							t.Errorf("key %s reads %v ms of debt, below the %d ms of reservations it kept", k, got, ms)
						}
					}
				}
			})
		}
	}
}

// TestAudit38CancelRacesOwnKey: on a frozen clock, one goroutine
// reserves and cancels large reservations of a key (given back in steps
// on Buckets) while two others admit single tokens of the same key: the
// tokens admitted never exceed the burst, and the key's final debt is at
// least them ("a request of the key ... that lands between two of them
// keeps the part not yet given back, on the safe side").
func TestAudit38CancelRacesOwnKey(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, cfg := range a38cfgs {
			t.Run(fmt.Sprintf("P%d/%s", procs, cfg), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				eng := limit.Buckets
				if cfg != "buckets" {
					eng = limit.CountMin
				}
				for round := range 30 {
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(eng), noAmnesty(eng), limit.WithConservativeUpdate(cfg == "count-min-cu"))
					var admitted [2]int
					var wg sync.WaitGroup
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(round), 1))
						for range 60 {
							r := l.ReserveN(clk.Now(), "k", 1+rng.IntN(20))
							runtime.Gosched()
							r.Cancel()
						}
					})
					for g := range 2 {
						wg.Go(func() {
							for range 150 {
								if l.AllowN(clk.Now(), "k", 1) {
									admitted[g]++
								}
							}
						})
					}
					wg.Wait()
					got := admitted[0] + admitted[1]
					if got > 20 {
						t.Fatalf("round %d: %d tokens admitted on a frozen clock, above the burst 20: a Cancel gave back tokens the admissions had used", round, got)
					}
					if debt := 20 - l.Tokens("k"); debt < float64(got)-1e-9 {
						t.Fatalf("round %d: debt %v below the %d tokens admitted", round, debt, got)
					}
				}
			})
		}
	}
}
