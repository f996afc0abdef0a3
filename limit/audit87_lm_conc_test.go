package limit_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit87LmConcWindow is one window of a concurrent Multi: its kind and
// burst (rate 1/s; the clock is frozen, so nothing drains).
type audit87LmConcWindow struct {
	kind  audit87LmKind
	burst int
}

func audit87LmConcBuild(fc *sketchtest.FakeClock, spec []audit87LmConcWindow) ([]*limit.Limiter, *limit.Multi) {
	var ws []*limit.Limiter
	for i, s := range spec {
		opts := append([]limit.Option{limit.WithSeed(uint64(10 + i)), limit.WithClock(fc), limit.WithName(fmt.Sprint("w", i))}, s.kind.opts...)
		ws = append(ws, limit.MustNew(1, s.burst, append(opts, audit87LmMaxDebtFor(s)...)...))
	}
	m, err := limit.NewMulti(ws...)
	if err != nil {
		panic(err)
	}
	return ws, m
}

// audit87LmMaxDebtFor returns, for the kinds whose MaxDebt is their
// burst, WithMaxDebt(burst) for this window's burst (the kind's own
// WithMaxDebt(2) is for a burst of 2; a later option wins).
func audit87LmMaxDebtFor(s audit87LmConcWindow) []limit.Option {
	if s.kind.name == "Bmd" || s.kind.name == "Cmd" {
		return []limit.Option{limit.WithMaxDebt(float64(s.burst))}
	}
	return nil
}

// TestAudit87LmConcOneKeyAdmitsTightest: goroutines race Multi decisions
// of one key over three or four windows of mixed kinds at a frozen clock
// (GOMAXPROCS 1, 2, 4, 8). Multi's doc: a request is admitted only if
// every window admits it, each window takes "as a strict ReserveN does
// (exact under contention)", and a race can only make the key "denied
// more ..., never admitted more". So the admissions never exceed the
// least burst, and each window reads at least them as debt. With one
// key, a window whose take stays after a denial can only be one taken
// before a window that was full (the precheck read it with room): the
// tightest window fills first, so every take before it fills comes back
// or was an admission. On count-min windows alone (whose strict take is
// exact under contention) the admissions are then exactly the least
// burst, whichever window it is and whatever its kind.
func TestAudit87LmConcOneKeyAdmitsTightest(t *testing.T) {
	k := map[string]audit87LmKind{}
	for _, x := range audit87LmKinds {
		k[x.name] = x
	}
	configs := []struct {
		name string
		spec []audit87LmConcWindow
	}{
		{"C5+Ccu3+Cmd7", []audit87LmConcWindow{{k["C"], 5}, {k["Ccu"], 3}, {k["Cmd"], 7}}},
		{"Ccu3+C5+Cmd4", []audit87LmConcWindow{{k["Ccu"], 3}, {k["C"], 5}, {k["Cmd"], 4}}},
		{"Cmd6+Ccu5+C4", []audit87LmConcWindow{{k["Cmd"], 6}, {k["Ccu"], 5}, {k["C"], 4}}},
		{"Ccu9+Cmd9+Ccu6+C9", []audit87LmConcWindow{{k["Ccu"], 9}, {k["Cmd"], 9}, {k["Ccu"], 6}, {k["C"], 9}}},
		{"Cmd3+Cmd3+C3", []audit87LmConcWindow{{k["Cmd"], 3}, {k["Cmd"], 3}, {k["C"], 3}}},
		{"B5+Bmd3+Ccu6", []audit87LmConcWindow{{k["B"], 5}, {k["Bmd"], 3}, {k["Ccu"], 6}}},
		{"Bmd4+B4+Cmd5+C6", []audit87LmConcWindow{{k["Bmd"], 4}, {k["B"], 4}, {k["Cmd"], 5}, {k["C"], 6}}},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for rep := range 3 {
					fc := sketchtest.NewFakeClock()
					fc.Set(1 << 30)
					ws, m := audit87LmConcBuild(fc, cfg.spec)
					least, buckets := cfg.spec[0].burst, false
					for _, s := range cfg.spec {
						least = min(least, s.burst)
						buckets = buckets || s.kind.name[0] == 'B'
					}
					now := fc.Now()
					const goroutines, tries = 8, 6
					var admitted [goroutines]int
					var wg sync.WaitGroup
					for g := range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range tries {
								if m.DecideKeys(now, 1, "k").Allowed {
									admitted[g]++
								}
							}
						}()
					}
					wg.Wait()
					total := 0
					for _, a := range admitted {
						total += a
					}
					if total > least || (!buckets && total != least) {
						t.Errorf("rep %d: admitted %d; least burst %d (never more; exactly it on count-min windows)", rep, total, least)
					}
					for i, w := range ws {
						if debt := float64(cfg.spec[i].burst) - w.TokensAt(now, "k"); debt < float64(total) {
							t.Errorf("rep %d: window %d reads debt %v after %d admissions", rep, i, debt, total)
						}
					}
					if st := m.Stats(); st.Admitted != uint64(total) || st.Admitted+st.Denied != goroutines*tries {
						t.Errorf("rep %d: Multi.Stats %+v; want %d admitted of %d", rep, st, total, goroutines*tries)
					}
				}
			})
		})
	}
}

// TestAudit87LmConcPerWindowKeysNeverMore: per-window keys that collide
// across goroutines: window 0 per user (3 users), window 1 per tenant (2
// tenants), window 2 one global key; kinds mixed, the unrefundable ones
// first in the windows' order (they take last). Each key of each window
// is admitted at most its burst, the global key at most its burst in
// all, and every key reads at least its admissions as debt.
func TestAudit87LmConcPerWindowKeysNeverMore(t *testing.T) {
	k := map[string]audit87LmKind{}
	for _, x := range audit87LmKinds {
		k[x.name] = x
	}
	specs := [][]audit87LmConcWindow{
		{{k["Ccu"], 3}, {k["C"], 4}, {k["Cmd"], 9}},
		{{k["Cmd"], 3}, {k["Ccu"], 4}, {k["C"], 9}},
		{{k["Bmd"], 3}, {k["B"], 4}, {k["Ccu"], 9}},
		{{k["C"], 3}, {k["Bmd"], 5}, {k["Cmd"], 7}},
	}
	for si, spec := range specs {
		t.Run(fmt.Sprint(si), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				fc := sketchtest.NewFakeClock()
				fc.Set(1 << 30)
				ws, m := audit87LmConcBuild(fc, spec)
				now := fc.Now()
				const goroutines, tries = 12, 5
				var mu sync.Mutex
				byKey := [3]map[string]int{{}, {}, {}}
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						keys := []string{fmt.Sprint("user-", g%3), fmt.Sprint("tenant-", g%2), "global"}
						for range tries {
							if m.DecideKeys(now, 1, keys...).Allowed {
								mu.Lock()
								for i, key := range keys {
									byKey[i][key]++
								}
								mu.Unlock()
							}
						}
					}()
				}
				wg.Wait()
				for i, w := range ws {
					for key, n := range byKey[i] {
						if n > spec[i].burst {
							t.Errorf("window %d key %s admitted %d > burst %d", i, key, n, spec[i].burst)
						}
						if debt := float64(spec[i].burst) - w.TokensAt(now, key); debt < float64(n) {
							t.Errorf("window %d key %s reads debt %v after %d admissions", i, key, debt, n)
						}
					}
				}
			})
		})
	}
}

// TestAudit87LmConcSetBurstRacingDecisions: goroutines race Multi
// decisions of one key while another goroutine flips the first window's
// burst between 2 (refundable: MaxDebt 4) and 4 (its MaxDebt: its take
// may not come back, so it takes last), at a frozen clock. Each decision
// uses one policy per window (SetLimit's doc: "never a mix"), so a take
// never lifts the key's debt above the larger burst: the Multi admits at
// most min(4, the second window's burst 3) in all, each window reads at
// least the admissions as debt, and the first window's debt never
// exceeds 4.
func TestAudit87LmConcSetBurstRacingDecisions(t *testing.T) {
	for _, e := range audit87LmEngines {
		for _, second := range []audit87LmKind{audit87LmKinds[1], audit87LmKinds[4], audit87LmKinds[0]} {
			t.Run(e.name+"/"+second.name, func(t *testing.T) {
				sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
					fc := sketchtest.NewFakeClock()
					fc.Set(1 << 30)
					w := limit.MustNew(1, 2, append([]limit.Option{limit.WithSeed(1), limit.WithClock(fc), limit.WithMaxDebt(4)}, e.opts...)...)
					v := limit.MustNew(1, 3, append([]limit.Option{limit.WithSeed(2), limit.WithClock(fc)}, second.opts...)...)
					m, err := limit.NewMulti(w, v)
					if err != nil {
						t.Fatal(err)
					}
					now := fc.Now()
					const goroutines, tries = 6, 8
					var admitted [goroutines]int
					var wg sync.WaitGroup
					stop := make(chan struct{})
					done := make(chan struct{})
					go func() {
						defer close(done)
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							if err := w.SetBurst(2 + 2*(i%2)); err != nil {
								t.Error(err)
								return
							}
						}
					}()
					for g := range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range tries {
								if m.DecideKeys(now, 1, "k").Allowed {
									admitted[g]++
								}
							}
						}()
					}
					wg.Wait()
					close(stop)
					<-done
					total := 0
					for _, a := range admitted {
						total += a
					}
					if total > 3 {
						t.Errorf("admitted %d; the second window's burst is 3", total)
					}
					if err := w.SetBurst(4); err != nil {
						t.Fatal(err)
					}
					if debt := 4 - w.TokensAt(now, "k"); debt < float64(total) || debt > 4 {
						t.Errorf("the first window reads debt %v after %d admissions; want in [%d, 4]", debt, total, total)
					}
					if debt := 3 - v.TokensAt(now, "k"); debt < float64(total) {
						t.Errorf("the second window reads debt %v after %d admissions", debt, total)
					}
				})
			})
		}
	}
}
