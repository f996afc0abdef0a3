package limit_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a78Start = int64(5_000_000)

func a78Opts(clk *limittest.FakeClock, e limit.Engine, seed uint64, more ...limit.Option) []limit.Option {
	return append([]limit.Option{limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(seed)}, more...)
}

// A Multi of a per-user window and a per-tenant window, raced by
// goroutines that each own one user key and share the tenant key, at a
// frozen clock. Promises (multi.go, Multi): "Every window after the
// first is read before anything is taken, and a request one of them
// denies takes nothing"; "each window in order takes its share as a
// strict ReserveN does (exact under contention)"; and a refund is exact
// "where nothing else touched the key's cells since". A user key is
// touched only by its own goroutine, serially, so:
//   - [user, tenant]: a tenant denial refunds the user's take exactly
//     (nothing else wrote the user key): every user key owes exactly its
//     admitted requests;
//   - [tenant, user]: a user denial is seen by the precheck (the user
//     key is read by its only writer), so the tenant never takes for it:
//     the tenant owes exactly the admitted requests.
//
// Tenant admissions never exceed the tenant's burst (strict), and on the
// count-min equal it (its TryUpdate is exact). Multi.Stats counts each
// call once.
func TestAudit78MultiRacingUserTenantExact(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, tenantFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/tenantFirst=%v", e, tenantFirst), func(t *testing.T) {
				sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
					clk := limittest.NewFakeClock()
					clk.Set(a78Start)
					const users, tries, userBurst, tenantBurst = 6, 14, 8, 30
					user := limit.MustNew(10, userBurst, a78Opts(clk, e, 1)...)
					tenant := limit.MustNew(10, tenantBurst, a78Opts(clk, e, 2)...)
					ws := []*limit.Limiter{user, tenant}
					if tenantFirst {
						ws = []*limit.Limiter{tenant, user}
					}
					m, err := limit.NewMulti(ws...)
					if err != nil {
						t.Fatal(err)
					}
					var admitted [users]int
					var wg sync.WaitGroup
					for g := range users {
						wg.Add(1)
						go func() {
							defer wg.Done()
							uk := fmt.Sprintf("user-%d", g)
							for range tries {
								keys := []string{uk, "tenant"}
								if tenantFirst {
									keys = []string{"tenant", uk}
								}
								if m.DecideKeys(clk.Now(), 1, keys...).Allowed {
									admitted[g]++
								}
							}
						}()
					}
					wg.Wait()
					total := 0
					now := clk.Now()
					for g := range users {
						total += admitted[g]
						if admitted[g] > userBurst {
							t.Errorf("user %d admitted %d > its burst %d", g, admitted[g], userBurst)
						}
						if !tenantFirst {
							want := float64(userBurst - admitted[g])
							if got := user.TokensAt(now, fmt.Sprintf("user-%d", g)); got != want {
								t.Errorf("user %d: tokens %v after %d admissions; want %v (a tenant denial's refund of the user take must be exact: nothing else wrote the user key)", g, got, admitted[g], want)
							}
						}
					}
					if total > tenantBurst || (e == limit.CountMin && total != tenantBurst) {
						t.Errorf("admitted %d in all; tenant burst %d (strict: never past it; exact on the count-min)", total, tenantBurst)
					}
					if tenantFirst {
						if got, want := tenant.TokensAt(now, "tenant"), float64(tenantBurst-total); got != want {
							t.Errorf("tenant tokens %v after %d admissions; want %v (a user denial is caught by the precheck: the tenant takes nothing for it)", got, total, want)
						}
					}
					st := m.Stats()
					if st.Admitted != uint64(total) || st.Admitted+st.Denied != users*tries {
						t.Errorf("Multi.Stats: admitted %d denied %d; want %d and %d", st.Admitted, st.Denied, total, users*tries-total)
					}
					if us := user.Stats(); us.Admitted+us.Denied != 0 {
						t.Errorf("window Stats counted Multi decisions: %+v", us)
					}
				})
			})
		}
	}
}

// A window that denies leaves every other window exactly as it was,
// serially, whichever window denies, with RejectCost charged only by the
// first denier (multi.go: "a request one of them denies takes nothing
// (the first window in order that denies on that read is the one that
// denies, and charges its RejectCost)"). Three windows on either engine,
// and five mixed (count-min windows of 2, 3 and 4 generations, Buckets),
// per-window keys, each window also driven directly between Multi calls.
func TestAudit78MultiDenialLeavesOthersUnchanged(t *testing.T) {
	type win struct {
		e    limit.Engine
		gens uint32
	}
	for _, ws0 := range [][]win{
		{{limit.Buckets, 0}, {limit.Buckets, 0}, {limit.Buckets, 0}},
		{{limit.CountMin, 0}, {limit.CountMin, 0}, {limit.CountMin, 0}},
		{{limit.CountMin, 3}, {limit.Buckets, 0}, {limit.CountMin, 0}, {limit.CountMin, 4}, {limit.Buckets, 0}},
	} {
		t.Run(fmt.Sprint(ws0), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(a78Start)
			bursts := []int{5, 3, 7, 4, 9}[:len(ws0)]
			ws := make([]*limit.Limiter, len(ws0))
			keys := []string{"a", "b", "c", "d", "e"}[:len(ws0)]
			for i, w := range ws0 {
				opts := a78Opts(clk, w.e, uint64(i+10), limit.WithRejectCost(float64(i)+1), limit.WithMaxDebt(float64(4*bursts[i])))
				if w.gens > 0 {
					opts = append(opts, limit.WithGenerations(w.gens))
				}
				ws[i] = limit.MustNew(10, bursts[i], opts...)
			}
			m, _ := limit.NewMulti(ws...)
			for step := 0; step < 400; step++ {
				clk.Advance(time.Duration(step%7*13) * time.Millisecond)
				now := clk.Now()
				// Direct traffic on one window between Multi calls.
				if step%5 == 0 {
					ws[step%len(ws)].AllowN(now, keys[step%len(ws)], 1)
				}
				before := make([]float64, len(ws))
				denies := -1
				n := 1 + step%4
				for i, l := range ws {
					before[i] = l.TokensAt(now, keys[i])
					if denies < 0 && !l.PeekN(now, keys[i], n).Allowed {
						denies = i
					}
				}
				d := m.DecideKeys(now, n, keys...)
				if d.Allowed != (denies < 0) {
					t.Fatalf("step %d: Allowed %v; the windows' Peeks say first denier %d", step, d.Allowed, denies)
				}
				for i, l := range ws {
					got := l.TokensAt(now, keys[i])
					want := before[i]
					switch {
					case denies < 0:
						want -= float64(n)
					case i == denies:
						want -= float64(i) + 1 // its RejectCost
						want = math.Max(want, float64(bursts[i])-float64(4*bursts[i]))
					}
					if math.Abs(got-want) > 1e-9 {
						t.Fatalf("step %d (n=%d, first denier %d): window %d tokens %v -> %v; want %v", step, n, denies, i, before[i], got, want)
					}
				}
			}
		})
	}
}
