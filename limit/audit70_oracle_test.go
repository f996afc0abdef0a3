package limit_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a70Bucket is the exact token bucket of limit.New(10, 20) at the
// millisecond, as GCRA: tat is the ms at which the key's debt drains to
// 0; a token is 100 ms, the burst 2000 ms.
type a70Bucket struct{ tat int64 }

func (b *a70Bucket) ok(t int64, n int) bool { return max(b.tat, t)+100*int64(n)-t <= 2000 }
func (b *a70Bucket) take(t int64, n int)    { b.tat = max(b.tat, t) + 100*int64(n) }
func (b *a70Bucket) tokens(t int64) float64 { return float64(2000-max(b.tat-t, 0)) / 100 }

// TestAudit70OracleFlooded: tracked keys, each owned by one goroutine,
// ask random n (1..20) in phases at one instant each (the fake clock
// moves 0..400 ms between phases, single-threaded), while flood
// goroutines put fresh keys at full debt, far past the engine's capacity
// (WithCapacity(1500, 1%): about 2,000 keys fit; the flood adds 3,000 a
// phase). Every admission of a tracked key must be one its own exact
// bucket admits (limit/doc.go, "Error side": "a collision can only deny
// a key early, never admit it past its own limit"; internal/bucket
// doc.go: "One-sided: Query(k) >= k's true load, whatever evictions,
// floors, fingerprint collisions, decay, refunds and races"), and
// TokensAt never reads above the oracle's tokens. Both engines,
// GOMAXPROCS 1, 2, 4, 8 (run it under -race).
func TestAudit70OracleFlooded(t *testing.T) {
	phases := 40
	if testsize.Small() {
		phases = 15
	}
	for _, c := range []struct {
		name string
		eng  limit.Engine
		opts []limit.Option
		step int // the clock's largest step between phases, ms
	}{
		{"buckets", limit.Buckets, nil, 400},
		{"count-min", limit.CountMin, nil, 400},
		// rotating every 4 s (MaxDebt/rate): several rotations over the run
		{"count-min-rotating", limit.CountMin, []limit.Option{limit.WithPeriod(4 * time.Second)}, 800},
	} {
		eng := c.eng
		t.Run(c.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(3),
					limit.WithEngine(eng), limit.WithCapacity(1_500, 0.01)}, c.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				const owners, perOwner, floods = 4, 200, 2
				keys := make([][]string, owners)
				orc := make([][]a70Bucket, owners)
				for o := range owners {
					keys[o] = make([]string, perOwner)
					orc[o] = make([]a70Bucket, perOwner)
					for i := range perOwner {
						keys[o][i] = a70Key("own"+string(rune('a'+o))+"-", i)
					}
				}
				rot := c.step > 400
				amn := make([][]float64, owners)
				for o := range amn {
					amn[o] = make([]float64, perOwner)
				}
				rng := rand.New(rand.NewPCG(9, uint64(eng)))
				flood := 0
				var admitted, denied [owners]int
				for p := range phases {
					clk.Advance(time.Duration(rng.IntN(c.step+1)) * time.Millisecond)
					now := clk.Now()
					ms := now.UnixMilli()
					var wg sync.WaitGroup
					errs := make(chan string, owners)
					for o := range owners {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r := rand.New(rand.NewPCG(uint64(p), uint64(o)))
							for range 3 * perOwner {
								i := r.IntN(perOwner)
								n := 1 + r.IntN(20)
								if r.IntN(4) == 0 {
									n = 1
								}
								k := keys[o][i]
								b := &orc[o][i]
								if tk := l.TokensAt(now, k); !rot && tk > b.tokens(ms)+1e-9 {
									errs <- k + ": TokensAt above its own bucket's"
									return
								}
								if l.AllowN(now, k, n) {
									if !b.ok(ms, n) {
										if !rot {
											errs <- k + ": admitted beyond its own bucket"
											return
										}
										// the documented amnesty: count it, and
										// let the oracle follow (debt = burst).
										amn[o][i] += float64(max(b.tat, ms)+100*int64(n)-ms-2000) / 100
										b.tat = ms + 2000
									} else {
										b.take(ms, n)
									}
									admitted[o]++
								} else {
									denied[o]++
								}
							}
						}()
					}
					for f := range floods {
						wg.Add(1)
						base := flood + f*1500
						go func() {
							defer wg.Done()
							for i := range 1500 {
								l.AllowN(now, a70Key("flood", base+i), 20)
							}
						}()
					}
					flood += floods * 1500
					wg.Wait()
					close(errs)
					for e := range errs {
						t.Fatalf("%v phase %d at %d ms: %s", eng, p, ms, e)
					}
				}
				st := l.Stats()
				if rot {
					// "Rotation and amnesty": a key "gains at most that debt,
					// <= MaxDebt, once per (G-1) x Period".
					worst, total := 0.0, 0.0
					for o := range amn {
						for _, a := range amn[o] {
							worst, total = max(worst, a), total+a
						}
					}
					t.Logf("%s: amnesty: worst key %.0f tokens, all keys %.0f, over %d rotations", c.name, worst, total, st.Rotations)
					if worst > l.MaxDebt()*float64(st.Rotations+1) {
						t.Errorf("%s: a key gained %.0f tokens of amnesty over %d rotations, doc: at most MaxDebt (%v) once per (G-1) x Period", c.name, worst, st.Rotations, l.MaxDebt())
					}
				}
				t.Logf("%s: tracked admitted %v denied %v; flood keys %d; Saturation %.3f%%; rotations %d", c.name, admitted, denied, flood, 100*st.Saturation, st.Rotations)
			})
		})
	}
}
