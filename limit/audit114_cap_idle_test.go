package limit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a114oracle is the exact bucket of limit.New(10, 20) (MaxDebt 40) per
// key, in ms of drain: a token is 100 ms, the burst 2000, MaxDebt 4000.
type a114oracle struct {
	debt map[string]int64 // ms of drain owed at at[key]
	at   map[string]int64
}

func (o *a114oracle) read(key string, now int64) int64 {
	d := o.debt[key] - (now - o.at[key])
	return max(d, 0)
}

func (o *a114oracle) set(key string, now, d int64) { o.debt[key], o.at[key] = d, now }

// TestAudit114OverfullIdleJumpsNeverEarly: limit/doc.go, "Error side": "A
// key's read debt is at least its own debt on either engine ... So a
// collision can only deny a key early, never admit it past its own
// limit", and "The durations of a Decision and a Reservation ... are
// exact for a key alone in its cells and only late, never early"; the
// Buckets engine "inherits a line's eviction floor once the table is
// past its capacity". An engine sized for 100 keys at 1% (WithCapacity)
// takes 1,500 keys, nine requests in ten on 400 hot ones, so that
// hundreds of keys sit at full debt at once (far past its capacity:
// floors on every line; Saturation reads 61-100%), under a fake clock
// that steps 0-2 ms on a fifth of the operations, three times jumps
// 2^31 ms or 2^31-1 ms forward, and sometimes steps back by up to 10 s;
// requests are AllowN, DecideN, ReserveN
// (a third cancelled at once) of 1-3 tokens. Every admission is checked
// against the exact bucket (no admission where the key's own debt + n >
// burst, no reservation past MaxDebt or with a Delay shorter than the
// bucket's), and every denial's RetryAfter against the bucket's (never
// shorter). After each long jump, Stats.Saturation reads 0 and every key
// is admitted. Passes on both engines.
func TestAudit114OverfullIdleJumpsNeverEarly(t *testing.T) {
	ops := testsize.Sample(30_000, 8_000, 3_000)
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprint(eng, seed), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(seed),
					limit.WithEngine(eng), limit.WithCapacity(100, 0.01))
				if err != nil {
					t.Fatal(err)
				}
				o := &a114oracle{debt: map[string]int64{}, at: map[string]int64{}}
				r := rand.New(rand.NewPCG(seed, 114))
				hw := clk.NowMillis() // the limiter's time: never goes back
				const keys, hot = 1500, 400
				denied, sat := 0, 0.0
				defer func() { t.Logf("denied %d of %d, last saturation read %.3f", denied, ops, sat) }()
				for i := range ops {
					if i%1000 == 999 {
						sat = l.Stats().Saturation
					}
					switch x := r.IntN(1000); {
					case i%(ops/4) == ops/4-1:
						d := int64(1) << 31
						if i/(ops/4) == 1 {
							d--
						}
						clk.Advance(time.Duration(d) * time.Millisecond)
						hw = max(hw, clk.NowMillis())
						if s := l.Stats().Saturation; s != 0 {
							t.Fatalf("op %d: Saturation %v right after a %d ms jump", i, s, d)
						}
						for k := 0; k < 50; k++ {
							key := fmt.Sprint("k", r.IntN(keys))
							if dd := l.Peek(key); !dd.Allowed || dd.Remaining != 19 {
								t.Fatalf("op %d: after a %d ms jump, Peek(%s) = %+v", i, d, key, dd)
							}
						}
					case x < 10:
						clk.Advance(-time.Duration(r.IntN(10_000)) * time.Millisecond)
					case x < 200:
						clk.Advance(time.Duration(r.IntN(3)) * time.Millisecond)
						hw = max(hw, clk.NowMillis())
					}
					key := fmt.Sprint("k", r.IntN(keys))
					if r.IntN(10) != 0 {
						key = fmt.Sprint("k", r.IntN(hot)) // hot keys: at full debt
					}
					n := 1 + r.IntN(3)
					now := hw
					truth := o.read(key, now)
					switch r.IntN(3) {
					case 0:
						ok := l.AllowN(l.Now(), key, n)
						if !ok {
							denied++
						}
						if ok {
							if truth+100*int64(n) > 2000 {
								t.Fatalf("op %d: %s admitted %d with a true debt of %d ms", i, key, n, truth)
							}
							o.set(key, now, truth+100*int64(n))
						}
					case 1:
						d := l.DecideN(l.Now(), key, n)
						if d.Allowed {
							if truth+100*int64(n) > 2000 {
								t.Fatalf("op %d: %s admitted %d with a true debt of %d ms", i, key, n, truth)
							}
							o.set(key, now, truth+100*int64(n))
						} else {
							want := time.Duration(max(truth+100*int64(n)-2000, 1)) * time.Millisecond
							// a clock behind the limiter's time adds its lag
							if d.RetryAfter < want {
								t.Fatalf("op %d: %s RetryAfter %v, the bucket's %v (debt %d ms)", i, key, d.RetryAfter, want, truth)
							}
						}
					case 2:
						rv := l.ReserveN(l.Now(), key, n)
						if rv.OK() {
							nd := truth + 100*int64(n)
							if nd > 4000 {
								t.Fatalf("op %d: %s reserved %d past MaxDebt, true debt %d ms", i, key, n, truth)
							}
							want := time.Duration(max(nd-2000, 0)) * time.Millisecond
							if got := rv.DelayFrom(time.UnixMilli(now).Add(l.Now().Sub(time.UnixMilli(clk.NowMillis())))); got < want {
								t.Fatalf("op %d: %s Delay %v, the bucket's %v", i, key, got, want)
							}
							if r.IntN(3) == 0 {
								rv.Cancel()
							} else {
								o.set(key, now, nd)
							}
						}
					}
				}
			})
		}
	}
}
