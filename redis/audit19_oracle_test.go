package redis

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a19Bucket is an exact rational model of one server key (no collisions:
// one key per sketch) for a rate p/q tokens per second: the string's
// header time H (its creation: no rebase is reached here unless asked),
// the key's debt D (tokens) last written at S (ms). A call at clock c runs
// at tm = max(c, H); a cell stamped after tm is not decayed; its waits
// count from c (docs/distributed.md, "The server's clock", "Waits from a
// clock that stepped back").
type a19Bucket struct {
	rate    *big.Rat // tokens per ms
	burst   *big.Rat
	created bool
	H, S    int64
	D       *big.Rat
}

func newA19Bucket(p, q int64, burst float64) *a19Bucket {
	b := &a19Bucket{rate: big.NewRat(p, q*1000), burst: new(big.Rat).SetFloat64(burst), D: new(big.Rat)}
	return b
}

func (b *a19Bucket) value(t int64) *big.Rat {
	if b.D.Sign() == 0 || t <= b.S {
		return new(big.Rat).Set(b.D)
	}
	v := new(big.Rat).Sub(b.D, new(big.Rat).Mul(b.rate, big.NewRat(t-b.S, 1)))
	if v.Sign() < 0 {
		return new(big.Rat)
	}
	return v
}

// ceilRat returns ceil(x) for x >= 0.
func ceilRat(x *big.Rat) int64 {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// wait returns the least r >= 0 with value(tm+r) + n <= limit, from tm.
func (b *a19Bucket) wait(tm int64, n, limit *big.Rat) int64 {
	v := b.value(tm)
	if new(big.Rat).Add(v, n).Cmp(limit) <= 0 {
		return 0
	}
	// value(tm + r) = D - rate (tm + r - S) for tm + r >= S: need
	// tm + r - S >= (D + n - limit) / rate.
	x := ceilRat(new(big.Rat).Quo(new(big.Rat).Sub(new(big.Rat).Add(b.D, n), limit), b.rate))
	return max(b.S+x-tm, 0)
}

type a19Dec struct {
	allowed      bool
	remaining    *big.Rat
	retry, reset int64 // ms; -1 none
}

func (b *a19Bucket) allow(c int64, n *big.Rat) a19Dec {
	if n.Sign() == 0 && !b.created {
		// AllowN(0) only reads (audit 46): it creates nothing.
		return a19Dec{allowed: true, remaining: new(big.Rat).Set(b.burst), retry: -1}
	}
	if !b.created {
		b.created, b.H, b.S = true, c, c
	}
	tm := max(c, b.H)
	lag := tm - c
	later := func(w int64) int64 {
		if w <= 0 {
			return w
		}
		return w + lag
	}
	zero := new(big.Rat)
	v := b.value(tm)
	if new(big.Rat).Add(v, n).Cmp(b.burst) > 0 {
		retry := int64(-1)
		if n.Cmp(b.burst) <= 0 {
			retry = later(b.wait(tm, n, b.burst))
		}
		return a19Dec{remaining: new(big.Rat).Sub(b.burst, v), retry: retry, reset: later(b.wait(tm, zero, zero))}
	}
	if n.Sign() == 0 { // a read: nothing written
		return a19Dec{allowed: true, remaining: new(big.Rat).Sub(b.burst, v), retry: -1, reset: later(b.wait(tm, zero, zero))}
	}
	b.D = new(big.Rat).Add(v, n)
	b.S = max(b.S, tm)
	return a19Dec{allowed: true, remaining: new(big.Rat).Sub(b.burst, b.D), retry: -1, reset: later(b.wait(tm, zero, zero))}
}

type a19Conf struct {
	name  string
	p, q  int64 // rate p/q per second
	burst float64
}

// a19ExactConfs: rates and bursts that package units counts exactly
// (checked), odd ones: 3/s, 7/10 per s, 1 per hour, 1000/7 per s, Burst 1,
// huge rates, the 2^24-unit bound.
var a19ExactConfs = []a19Conf{
	{"3/s b7", 3, 1, 7},
	{"0.7/s b13", 7, 10, 13},
	{"1/h b4", 1, 3600, 4},
	{"1000/7 b100", 1000, 7, 100},
	{"1/s b1", 1, 1, 1},
	{"5001/s b3", 5001, 1, 3},
	{"1e6/s b1e6", 1_000_000, 1, 1_000_000},
	{"1e9/s b1e7", 1_000_000_000, 1, 10_000_000},
	{"1000/s b2^24", 1000, 1, 1 << 24},
	{"1/60 b250", 1, 60, 250},
}

// TestAudit19OracleOddRates: random requests (0, whole tokens up to
// Burst+1, a full Burst) at random clock steps (forward ms to hours,
// back ms to seconds) on one key per configuration: every decision,
// Remaining, RetryAfter and ResetAfter equals the rational bucket's, for
// the exact configurations of doc.go ("every decision, RetryAfter and
// ResetAfter for whole-token requests is exactly the rational token
// bucket's at millisecond resolution").
func TestAudit19OracleOddRates(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for ci, cf := range a19ExactConfs {
		t.Run(cf.name, func(t *testing.T) {
			rate := float64(cf.p) / float64(cf.q)
			if _, _, exact, _ := units.Units(rate, cf.burst); !exact {
				t.Fatalf("setup: PerSecond(%v, %v) is not exact", rate, cf.burst)
			}
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a19or%d", ci), Limit: PerSecond(rate, cf.burst), Clock: clk,
				Levels: 2, CellsPerLevel: 64})
			m := newA19Bucket(cf.p, cf.q, cf.burst)
			r := rand.New(rand.NewPCG(uint64(ci), 19))
			burst := int64(cf.burst)
			// one token lasts 1000 q / p ms
			tok := max(1000*cf.q/cf.p, 1)
			var lastRetry int64 = -1
			var denied, lagged, admitted int
			defer func() { t.Logf("admitted %d, denied %d (with a lag %d)", admitted, denied, lagged) }()
			for step := range 300 {
				switch x := r.IntN(20); {
				case x < 8:
					clk.Advance(time.Duration(r.Int64N(tok*2+1)) * time.Millisecond)
				case x < 10 && lastRetry > 0: // exactly at, or 1 ms before, the last RetryAfter
					clk.Advance(time.Duration(lastRetry-int64(r.IntN(2))) * time.Millisecond)
				case x < 12:
					clk.Advance(-time.Duration(r.Int64N(3*tok+1)) * time.Millisecond)
				case x < 13:
					clk.Advance(time.Duration(r.Int64N(4*3600_000)) * time.Millisecond)
				}
				var n int64
				switch y := r.IntN(10); {
				case y == 0:
					n = 0
				case y == 1:
					n = burst
				case y == 2:
					n = burst + 1
				default:
					n = 1 + r.Int64N(min(burst, 1+r.Int64N(8)))
				}
				now := clk.NowMillis()
				want := m.allow(now, big.NewRat(n, 1))
				d, err := l.AllowN(ctx, "k", float64(n))
				if err != nil {
					t.Fatalf("step %d: AllowN(%d) at %d: %v", step, n, now, err)
				}
				wantRem, _ := want.remaining.Float64()
				wantRetry, wantReset := time.Duration(-1), msDuration(want.reset)
				if !want.allowed && want.retry >= 0 {
					wantRetry = msDuration(want.retry)
				}
				if d.Allowed != want.allowed || d.RetryAfter != wantRetry || d.ResetAfter != wantReset || !a19Close(d.Remaining, wantRem) {
					t.Fatalf("step %d: AllowN(%d) at %d (header %d, debt %v at %d) = %+v; want allowed %v, Remaining %v, RetryAfter %v, ResetAfter %v",
						step, n, now, m.H, m.D.FloatString(6), m.S, d, want.allowed, wantRem, wantRetry, wantReset)
				}
				if d.Allowed {
					admitted++
				} else {
					denied++
					if max(now, m.H) > now || m.S > now {
						lagged++
					}
				}
				if !d.Allowed && d.RetryAfter > 0 {
					lastRetry = d.RetryAfter.Milliseconds()
				}
			}
		})
	}
}

// a19Close: Remaining is units converted to tokens in float64.
func a19Close(got, want float64) bool {
	d := got - want
	return d <= 1e-9*max(1, want) && -d <= 1e-9*max(1, want)
}
