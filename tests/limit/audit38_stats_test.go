package limit_test

// Audit 38: Stats.Saturation as time passes over an overfull engine
// (debts between the burst and MaxDebt, draining), after SetBurst, and a
// throttled client never forgotten under a flood of other keys.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a38measure returns the share of probes fresh keys denied one token on
// a peek at the clock's reading.
func a38measure(l *limit.Limiter, now time.Time, tag string, probes int) (float64, int) {
	denied := 0
	for i := range probes {
		if !l.PeekN(now, fmt.Sprintf("fresh-%s-%d", tag, i), 1).Allowed {
			denied++
		}
	}
	return float64(denied) / float64(probes), denied
}

// TestAudit38SaturationOverTime: keys held at MaxDebt (40 tokens of
// 10/s, burst 20) in engines past their cliff; at several times as the
// debts drain (a fresh key is denied by an entry still above 19 tokens:
// for 2.1 s), and after SetBurst(10) (denied above 9 tokens),
// Stats.Saturation must be within 20% of the measured fresh-key denial
// rate where 1,000 or more probes are denied, and at most 0.05 where
// fewer are (stats.go: "Saturation is the estimated probability that a
// fresh key ... asking for one token now is denied"; docs/capacity.md:
// TestSaturation asserts 20%).
func TestAudit38SaturationOverTime(t *testing.T) {
	testsize.Serial(t)
	for _, c := range []struct {
		name string
		opts []limit.Option
		keys int
	}{
		{"count-min", []limit.Option{limit.WithSize(4, 8192), limit.WithEngine(limit.CountMin), noAmnesty(limit.CountMin)}, 12000},
		{"buckets", []limit.Option{limit.WithCapacity(10_000, 0.01), limit.WithEngine(limit.Buckets)}, 13_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			now := int64(1 << 36)
			clk.Set(now)
			l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(38)}, c.opts...)...)
			// In 20 batches 100 ms apart: debts staggered over 2 s, so the
			// share of entries that deny falls step by step as they drain.
			for i := range c.keys {
				if i%(c.keys/20) == 0 && i > 0 {
					now += 100
					clk.Set(now)
				}
				k := fmt.Sprint("held-", i)
				l.AllowN(clk.Now(), k, 20)
				l.ReserveN(clk.Now(), k, 20)
			}
			const probes = 30_000
			for _, step := range []struct {
				at    int64 // ms after the flood
				burst int
			}{{0, 20}, {150, 20}, {777, 20}, {1500, 20}, {2099, 20}, {2100, 20}, {2101, 20}, {2250, 20}, {2250, 10}, {2600, 10}, {3000, 10}, {3201, 10}, {5000, 10}} {
				if l.Burst() != step.burst {
					if err := l.SetBurst(step.burst); err != nil {
						t.Fatal(err)
					}
				}
				clk.Set(now + step.at)
				sat := l.Stats().Saturation
				rate, denied := a38measure(l, clk.Now(), fmt.Sprint(step.at, "-", step.burst), probes)
				t.Logf("%s +%d ms burst %d: saturation %.4f, measured %.4f (%d of %d)", c.name, step.at, step.burst, sat, rate, denied, probes)
				if denied >= 1000 && math.Abs(sat-rate) > 0.2*rate {
					t.Errorf("+%d ms burst %d: saturation %.4f, measured %.4f: more than 20%% off", step.at, step.burst, sat, rate)
				}
				if denied < 1000 && sat > 0.05 {
					t.Errorf("+%d ms burst %d: saturation %.4f with %d of %d fresh keys denied", step.at, step.burst, sat, denied, probes)
				}
			}
		})
	}
}

// TestAudit38ThrottledNeverForgotten: a client throttled (at MaxDebt)
// in a small engine, then 50 times the engine's capacity of other keys
// at full debt: the client must still read at least its own debt, drained
// since, on both engines ("a key's read debt is at least its own debt on
// either engine ... eviction floors, which cover every debt ever
// evicted").
func TestAudit38ThrottledNeverForgotten(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			now := int64(1 << 36)
			clk.Set(now)
			opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(8), limit.WithEngine(eng), noAmnesty(eng)}
			if eng == limit.CountMin {
				opts = append(opts, limit.WithSize(2, 64))
			} else {
				opts = append(opts, limit.WithCapacity(20, 0.01))
			}
			l := limit.MustNew(10, 20, opts...)
			capKeys := l.Capacity(0.01)
			victims := []string{"v0", "v1", "v2", "v3"}
			for _, v := range victims {
				if !l.AllowN(clk.Now(), v, 20) || !l.ReserveN(clk.Now(), v, 20).OK() {
					t.Fatal("victim not charged")
				}
			}
			start := now
			for round := range 40 {
				for i := range 50 * max(capKeys, 20) / 40 {
					l.AllowN(clk.Now(), fmt.Sprintf("flood-%d-%d", round, i), 1+i%20)
				}
				now += 50
				clk.Set(now)
				own := max(4000-(now-start), 0) // ms of debt
				for _, v := range victims {
					got := (20 - l.TokensAt(clk.Now(), v)) * 100
					if got < float64(own)-1e-6 {
						t.Fatalf("round %d (capacity %d keys): victim %s reads %v ms of debt, below its own %d ms: forgotten", round, capKeys, v, got, own)
					}
					if own > 1900 && l.PeekN(clk.Now(), v, 1).Allowed {
						t.Fatalf("round %d: throttled victim %s admitted with %d ms of its own debt", round, v, own)
					}
				}
			}
			st := l.Stats()
			t.Logf("%v: capacity(1%%) %d keys, saturation %.3f, bytes %d", eng, capKeys, st.Saturation, st.Bytes)
		})
	}
}

// TestAudit38MultiStats: a Multi's decisions count in its own Stats and
// in no window's; its Saturation, 1 - (1-s1)(1-s2), is within 20% of the
// measured share of fresh keys that at least one window denies (two
// windows with different seeds and loads, both engines).
func TestAudit38MultiStats(t *testing.T) {
	testsize.Serial(t)
	for _, eng := range engines {
		t.Run(eng.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 36)
			opts := func(seed uint64) []limit.Option {
				o := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(eng), noAmnesty(eng)}
				if eng == limit.CountMin {
					return append(o, limit.WithSize(4, 4096))
				}
				return append(o, limit.WithCapacity(5000, 0.01))
			}
			a := limit.MustNew(10, 20, append(opts(1), limit.WithName("a"))...)
			b := limit.MustNew(5, 10, append(opts(2), limit.WithName("b"))...)
			m, _ := limit.NewMulti(a, b)
			var adm, den uint64
			for i := range 300 {
				if m.AllowN(clk.Now(), fmt.Sprint("m", i%40), 1+i%4) {
					adm++
				} else {
					den++
				}
			}
			for _, w := range []*limit.Limiter{a, b} {
				if st := w.Stats(); st.Admitted != 0 || st.Denied != 0 {
					t.Fatalf("window %s counted the Multi's decisions: %+v", w.Name(), st)
				}
			}
			if st := m.Stats(); st.Admitted != adm || st.Denied != den {
				t.Fatalf("Multi.Stats %d/%d, want %d/%d", st.Admitted, st.Denied, adm, den)
			}
			// Load the windows differently, directly.
			na, nb := 9000, 5000
			if eng == limit.CountMin {
				na, nb = 6000, 3500
			}
			for i := range na {
				a.AllowN(clk.Now(), fmt.Sprint("ha", i), 20)
				a.ReserveN(clk.Now(), fmt.Sprint("ha", i), 20)
			}
			for i := range nb {
				b.AllowN(clk.Now(), fmt.Sprint("hb", i), 10)
				b.ReserveN(clk.Now(), fmt.Sprint("hb", i), 10)
			}
			sa, sb, sm := a.Stats().Saturation, b.Stats().Saturation, m.Stats().Saturation
			const probes = 30000
			denied := 0
			for i := range probes {
				k := fmt.Sprint("fresh", i)
				if !a.PeekN(clk.Now(), k, 1).Allowed || !b.PeekN(clk.Now(), k, 1).Allowed {
					denied++
				}
			}
			rate := float64(denied) / probes
			t.Logf("%v: windows %.4f %.4f, Multi %.4f, measured %.4f (%d of %d)", eng, sa, sb, sm, rate, denied, probes)
			// Each reading samples afresh (Buckets: 4096 lines from a new
			// offset), so the Multi's own reading is compared loosely.
			if want := 1 - (1-sa)*(1-sb); math.Abs(sm-want) > 0.05*want {
				t.Fatalf("Multi saturation %v, want about 1-(1-sa)(1-sb) = %v", sm, want)
			}
			if denied >= 1000 && math.Abs(sm-rate) > 0.2*rate {
				t.Fatalf("Multi saturation %.4f, measured %.4f: more than 20%% off", sm, rate)
			}
		})
	}
}

// TestAudit38StatsCountsConcurrent: goroutines decide through the
// Limiter, a Tier, ReserveN (with Cancels), WaitN above the burst and
// WaitN on a done context, and a Multi over the limiter; after they
// return, the limiter's Stats and the Multi's count exactly what the
// callers saw (stats.go "Counting").
func TestAudit38StatsCountsConcurrent(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, eng := range engines {
			t.Run(fmt.Sprintf("P%d/%v", procs, eng), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithMaxDebt(80), noAmnesty(eng))
				tr, err := l.Tier("slow", 5, 10)
				if err != nil {
					t.Fatal(err)
				}
				other := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(eng), noAmnesty(eng))
				m, _ := limit.NewMulti(other)
				done, cancel := context.WithCancel(context.Background())
				cancel()
				var la, ld, ma, md atomic.Uint64
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Go(func() {
						for i := range 300 {
							key := fmt.Sprintf("k%d", (g*7+i)%13)
							tally := func(ok bool) {
								if ok {
									la.Add(1)
								} else {
									ld.Add(1)
								}
							}
							switch i % 7 {
							case 0:
								tally(l.AllowN(clk.Now(), key, 1+i%3))
							case 1:
								tally(tr.DecideN(clk.Now(), key, 1+i%2).Allowed)
							case 2:
								r := l.ReserveN(clk.Now(), key, 1+i%4)
								tally(r.OK())
								r.Cancel()
							case 3:
								tally(l.WaitN(context.Background(), key, 21) == nil) // above the burst: denied
							case 4:
								_ = l.WaitN(done, key, 1) // counts nothing
								_ = l.PeekN(clk.Now(), key, 1)
								_ = l.TokensAt(clk.Now(), key)
							case 5:
								d, _ := tr.DecideContext(context.Background(), key, 1)
								tally(d.Allowed)
							case 6:
								if m.AllowN(clk.Now(), key, 1+i%3) {
									ma.Add(1)
								} else {
									md.Add(1)
								}
							}
						}
					})
				}
				wg.Wait()
				st := l.Stats()
				if st.Admitted != la.Load() || st.Denied != ld.Load() {
					t.Fatalf("limiter Stats %d admitted %d denied, callers saw %d and %d", st.Admitted, st.Denied, la.Load(), ld.Load())
				}
				ms := m.Stats()
				if ms.Admitted != ma.Load() || ms.Denied != md.Load() {
					t.Fatalf("Multi Stats %d/%d, callers saw %d/%d", ms.Admitted, ms.Denied, ma.Load(), md.Load())
				}
				if os := other.Stats(); os.Admitted+os.Denied != 0 {
					t.Fatalf("the Multi's window counted its decisions: %+v", os)
				}
				if ld.Load() == 0 || la.Load() == 0 {
					t.Fatalf("one-sided: %d/%d", la.Load(), ld.Load())
				}
			})
		}
	}
}
