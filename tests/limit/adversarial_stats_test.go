package limit_test

// Adversarial acceptance tests of Stats' counting rules (the Stats type's
// "Counting" paragraph) and of ParseLimit / Limit's text forms.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"pgregory.net/rapid"
)

// TestAdvStatsExact: goroutines call every decision method of a Limiter
// and of two of its Tiers (and Peek, PeekN, Tokens, TokensAt, which count
// nothing), on a frozen fake clock, and tally what each call returned by
// the documented rule; Stats must equal the tallies exactly, at
// GOMAXPROCS 1, 2 and 8, on both engines, and on an Inf limiter (all
// admitted). A Multi counts its own calls, not its windows'.
func TestAdvStatsExact(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, e := range []string{"buckets", "count-min", "inf"} {
			t.Run(fmt.Sprintf("P%d/%s", procs, e), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := limittest.NewFakeClock()
				// An hour ahead of the wall clock: a context deadline at the
				// fake clock's reading is not yet done in real time.
				clk.SetTime(time.Now().Add(time.Hour))
				var l *limit.Limiter
				var err error
				switch e {
				case "buckets":
					l, err = limit.New(10, 5, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithMaxDebt(50))
				case "count-min":
					l, err = limit.New(10, 5, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithMaxDebt(50))
				default:
					l, err = limit.New(limit.Inf, 5, limit.WithClock(clk))
				}
				if err != nil {
					t.Fatal(err)
				}
				type api interface {
					AllowN(time.Time, string, int) bool
					Allow(string) bool
					DecideN(time.Time, string, int) limit.Decision
					Decide(string) limit.Decision
					DecideContext(context.Context, string, int) (limit.Decision, error)
					ReserveN(time.Time, string, int) *limit.Reservation
					Reserve(string) *limit.Reservation
					WaitN(context.Context, string, int) error
					Wait(context.Context, string) error
					PeekN(time.Time, string, int) limit.Decision
					Peek(string) limit.Decision
					Tokens(string) float64
					TokensAt(time.Time, string) float64
				}
				apis := []api{l}
				if e != "inf" {
					a, err := l.Tier("a", 5, 3)
					if err != nil {
						t.Fatal(err)
					}
					b, err := l.Tier("b", 2, 10)
					if err != nil {
						t.Fatal(err)
					}
					apis = append(apis, a, b)
				}
				done, cancel := context.WithCancel(context.Background())
				cancel()
				past, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
				defer cancel2()
				var adm, den [8]uint64
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						for i := range 400 {
							x := apis[(g+i)%len(apis)]
							k := fmt.Sprintf("k%d", (g*31+i)%13)
							n := 1 + i%4
							tally := func(ok bool) {
								if ok {
									adm[g]++
								} else {
									den[g]++
								}
							}
							switch i % 13 {
							case 0:
								tally(x.AllowN(clk.Now(), k, n))
							case 1:
								tally(x.Allow(k))
							case 2:
								tally(x.DecideN(clk.Now(), k, n).Allowed)
							case 3:
								tally(x.Decide(k).Allowed)
							case 4:
								d, _ := x.DecideContext(context.Background(), k, n)
								tally(d.Allowed)
							case 5:
								tally(x.ReserveN(clk.Now(), k, n).OK())
							case 6:
								r := x.Reserve(k)
								tally(r.OK())
								r.Cancel() // gives back, uncounts nothing
							case 7:
								// A wait that needs no waiting returns nil (admitted);
								// one that would wait is refused before a deadline
								// at the clock's reading (denied: ErrPastDeadline);
								// n above the burst is ErrAboveBurst (denied).
								ctx, c := context.WithDeadline(context.Background(), clk.Now())
								err := x.WaitN(ctx, k, n)
								c()
								switch {
								case err == nil:
									adm[g]++
								case errors.Is(err, limit.ErrPastDeadline), errors.Is(err, limit.ErrAboveBurst), errors.Is(err, limit.ErrMaxDebt):
									den[g]++
								default:
									t.Errorf("WaitN: %v", err)
								}
							case 8:
								// A context already done, or a deadline already
								// past: nothing asked, nothing counted.
								if err := x.Wait(done, k); err == nil {
									t.Error("Wait on a done context returned nil")
								}
								if e != "inf" {
									if err := x.WaitN(past, k, 1); err == nil {
										t.Error("WaitN past its deadline returned nil")
									}
								}
							case 9:
								x.Peek(k)
								x.PeekN(clk.Now(), k, n)
								x.PeekN(clk.Now(), k, 1000)
							case 10:
								x.Tokens(k)
								x.TokensAt(clk.Now(), k)
							case 11:
								tally(x.DecideN(clk.Now(), k, 1000).Allowed) // Never: denied
							case 12:
								tally(x.AllowN(clk.Now(), k, 1000)) // above burst: denied
							}
						}
					})
				}
				wg.Wait()
				var wa, wd uint64
				for g := range 8 {
					wa += adm[g]
					wd += den[g]
				}
				st := l.Stats()
				if st.Admitted != wa || st.Denied != wd {
					t.Fatalf("Stats Admitted %d Denied %d, the calls returned %d admitted, %d denied", st.Admitted, st.Denied, wa, wd)
				}
				if e == "inf" && wd != 2*8*400/13 && st.Denied != wd {
					t.Fatalf("inf: denied %d", st.Denied)
				}
			})
		}
	}
}

// TestAdvMultiStats: a Multi counts each of its calls once (admitted only
// if every window admitted); its windows count only their own direct
// calls.
func TestAdvMultiStats(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("P", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := limittest.NewFakeClock()
			w1 := limit.MustNew(10, 4, limit.WithClock(clk), limit.WithEngine(limit.Buckets))
			w2 := limit.MustNew(1, 6, limit.WithClock(clk), limit.WithEngine(limit.CountMin))
			m, err := limit.NewMulti(w1, w2)
			if err != nil {
				t.Fatal(err)
			}
			var adm, den, direct [8]uint64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 300 {
						k := fmt.Sprintf("k%d", (g+i)%7)
						var ok bool
						switch i % 4 {
						case 0:
							ok = m.Allow(k)
						case 1:
							ok = m.AllowN(clk.Now(), k, 1+i%3)
						case 2:
							ok = m.DecideKeys(clk.Now(), 1, k, "t"+k).Allowed
						default:
							d, _ := m.DecideContext(context.Background(), k, 1+i%7)
							ok = d.Allowed
						}
						if ok {
							adm[g]++
						} else {
							den[g]++
						}
						if i%10 == 0 {
							w1.Allow("direct")
							direct[g]++
						}
					}
				})
			}
			wg.Wait()
			var wa, wd, dd uint64
			for g := range 8 {
				wa, wd, dd = wa+adm[g], wd+den[g], dd+direct[g]
			}
			if st := m.Stats(); st.Admitted != wa || st.Denied != wd {
				t.Fatalf("Multi Stats %d/%d, calls %d/%d", st.Admitted, st.Denied, wa, wd)
			}
			if st := w1.Stats(); st.Admitted+st.Denied != dd {
				t.Fatalf("window 1 counted %d+%d, direct calls %d", st.Admitted, st.Denied, dd)
			}
			if st := w2.Stats(); st.Admitted+st.Denied != 0 {
				t.Fatalf("window 2 counted %d+%d, no direct calls", st.Admitted, st.Denied)
			}
		})
	}
}

// TestAdvParseLimitRoundTrip: every finite positive Limit up to 1e22 (any
// bit pattern) that New takes marshals to text that ParseLimit reads back bit for bit,
// and through UnmarshalText and UnmarshalJSON (as a JSON string) too.
func TestAdvParseLimitRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var r float64
		switch rapid.IntRange(0, 3).Draw(rt, "kind") {
		case 0:
			r = math.Float64frombits(rapid.Uint64Range(1, math.Float64bits(1e22)).Draw(rt, "bits"))
		case 1:
			r = float64(limit.Every(time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(rt, "every"))))
		case 2:
			r = float64(rapid.IntRange(1, 1e6).Draw(rt, "p")) / float64(rapid.IntRange(1, 1e6).Draw(rt, "q"))
		default:
			r = float64(rapid.IntRange(1, 1e9).Draw(rt, "n")) / []float64{1, 60, 3600, 86400, 1e-3}[rapid.IntRange(0, 4).Draw(rt, "unit")]
		}
		if !(r > 0 && r <= 1e22) {
			rt.Skip()
		}
		l := limit.Limit(r)
		b, err := l.MarshalText()
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := limit.New(l, 1, limit.WithMaxDebt(1), limit.WithSize(1, 1)); err != nil {
			// Slower than any burst New takes (below about 2.9e-36 per
			// second): ParseLimit refuses it too since stop 64 (audit 130).
			if _, perr := limit.ParseLimit(string(b)); perr == nil {
				rt.Fatalf("%v: New refuses it at burst 1 (%v), ParseLimit(%q) accepts it", r, err, b)
			}
			return
		}
		got, err := limit.ParseLimit(string(b))
		if err != nil || math.Float64bits(float64(got)) != math.Float64bits(r) {
			rt.Fatalf("%v (%#x) -> %q -> %v (%#x), %v", r, math.Float64bits(r), b, float64(got), math.Float64bits(float64(got)), err)
		}
		var u limit.Limit
		if err := u.UnmarshalJSON([]byte(`"` + string(b) + `"`)); err != nil || u != l {
			rt.Fatalf("UnmarshalJSON(%q): %v, %v", b, float64(u), err)
		}
	})
}

// TestAdvParseLimitGarbage: strings that are not a rate are refused with
// a *sketch.ConfigError prefixed "limit: ", naming the field Limit and
// quoting the input; the Limit behind UnmarshalText is unchanged.
func TestAdvParseLimitGarbage(t *testing.T) {
	for _, s := range []string{
		"", " ", "/", "/s", "1/", "s", "-1/s", "+1/s", "0/s", "0x10/s", "1_000/s", "1e400/s", "1e-400/s", "1/0s",
		"1/-1s", "1/0.0000001ns", "NaN/s", "nan", "Inf/s", "infinity", "1/s/s", "1//s", "1/ s s", "1 0/s", "1/1 s",
		"1e22/ms", "1/1e3s", "1-X", "-H", "1000-", "1000-HH", "1/μs μs", "１/s", "1/sec", "1/mo", "1/y", "1/2dd",
		"1/1e400d", "1/106752d", "1..0/s", "1e/s", ".e1/s", "1/.d", "∞", "1/\x00",
	} {
		l := limit.Limit(42)
		_, err := limit.ParseLimit(s)
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("ParseLimit(%q): %v, want a *sketch.ConfigError", s, err)
			continue
		}
		if ce.Field != "Limit" || !strings.HasPrefix(err.Error(), "limit: ") || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("ParseLimit(%q): field %q, message %q", s, ce.Field, err)
		}
		if err := l.UnmarshalText([]byte(s)); err == nil || l != 42 {
			t.Errorf("UnmarshalText(%q) changed the Limit to %v (%v)", s, float64(l), err)
		}
	}
}

// TestAdvParseLimitValues: documented forms read as count / period.
func TestAdvParseLimitValues(t *testing.T) {
	for s, want := range map[string]limit.Limit{
		"100/s": 100, "1000/h": limit.Limit(1000) / 3600, "5/m": limit.Limit(5) / 60, "10/250ms": 40,
		"1/250ms": limit.Every(250 * time.Millisecond), "2/1m30s": limit.Limit(2) / 90, "10000/d": limit.Limit(10000) / 86400,
		"100": 100, "inf": limit.Inf, " INF ": limit.Inf, "1000-H": limit.Limit(1000) / 3600, "5-m": limit.Limit(5) / 60,
		"1e-3": 1e-3, ".5/s": 0.5, "3 / 7s": limit.Limit(3) / 7, "1/us": 1e6, "1/µs": 1e6, "2/.5d": limit.Limit(2) / 43200,
		"1/S": 1, "1/MS": 1000, "1/3s": limit.Every(3 * time.Second), "1e22/s": 1e22, "1/2D": limit.Limit(1) / 172800,
	} {
		got, err := limit.ParseLimit(s)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v", s, float64(got), err, float64(want))
		}
	}
}
