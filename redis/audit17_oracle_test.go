package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a17Model is an exact model of the server limiter for keys that share no
// cell: integer units (rate 10/s, burst 10: 100 units a token, 1 unit
// drains each ms). A key's debt D was last written at T (absolute ms);
// the generation's header time H (creation or last rebase) and the
// clock c give the call's time tm = max(c, H), and a cell stamped after
// tm is not decayed (docs/distributed.md, "The server's clock").
type a17Model struct {
	created  bool
	H        int64
	rebaseAt int64
	burst    int64
	keys     map[string]*a17Key
}

type a17Key struct{ D, T int64 }

func (m *a17Model) key(k string) *a17Key {
	if m.keys[k] == nil {
		m.keys[k] = &a17Key{}
	}
	return m.keys[k]
}

// debtAt is the key's debt read at clock c'.
func (m *a17Model) debtAt(k *a17Key, c int64) int64 {
	tm := max(c, m.H)
	if k.D == 0 || tm <= k.T {
		return k.D
	}
	return max(k.D-(tm-k.T), 0)
}

// least returns the least w >= 0 with ok(c+w) (monotone), or -1 past 2^50.
func a17Least(c int64, ok func(int64) bool) int64 {
	if ok(c) {
		return 0
	}
	hi := int64(1)
	for !ok(c + hi) {
		hi *= 2
		if hi > 1<<50 {
			return -1
		}
	}
	lo := hi / 2 // !ok(c+lo) (lo may be 0)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok(c + mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

type a17Decision struct {
	allowed      bool
	remaining    int64 // units
	retry, reset int64 // ms; -1 none
}

func (m *a17Model) allow(k string, c, nU int64) a17Decision {
	if nU == 0 {
		// AllowN(0) only reads (audit 46): no write, no rebase, and a
		// sketch nobody wrote is not created.
		if !m.created {
			return a17Decision{allowed: true, remaining: m.burst, retry: -1}
		}
		kk := m.key(k)
		return a17Decision{allowed: true, remaining: m.burst - m.debtAt(kk, c), retry: -1,
			reset: a17Least(c, func(x int64) bool { return m.debtAt(kk, x) == 0 })}
	}
	if !m.created {
		m.created, m.H = true, c
	}
	tm := max(c, m.H)
	kk := m.key(k)
	debt := m.debtAt(kk, c)
	resetOf := func() int64 { return a17Least(c, func(x int64) bool { return m.debtAt(kk, x) == 0 }) }
	if debt+nU > m.burst {
		d := a17Decision{remaining: m.burst - debt, retry: -1, reset: resetOf()}
		if nU <= m.burst {
			d.retry = a17Least(c, func(x int64) bool { return m.debtAt(kk, x)+nU <= m.burst })
		}
		return d
	}
	if tm-m.H >= m.rebaseAt { // rebase: every cell decayed to tm
		for _, o := range m.keys {
			if o.T < tm {
				o.D, o.T = m.debtAt(o, tm), tm
			}
		}
		m.H = tm
		debt = m.debtAt(kk, c)
	}
	kk.D, kk.T = debt+nU, max(kk.T, tm)
	return a17Decision{allowed: true, remaining: m.burst - kk.D, retry: -1, reset: resetOf()}
}

// a17Step moves the clock as the random sequences do: forward or back,
// small and huge, behind the creation, behind the last write.
func a17Step(r *rand.Rand, c, created, lastWrite int64) int64 {
	switch r.IntN(12) {
	case 0, 1, 2:
		return c + r.Int64N(200)
	case 3:
		return c + r.Int64N(1200)
	case 4:
		return c + int64(r.IntN(5)+1)*3_600_000 + r.Int64N(1000)
	case 5:
		return c - r.Int64N(200)
	case 6:
		return c - r.Int64N(1200)
	case 7:
		return c - int64(r.IntN(3)+1)*3_600_000
	case 8:
		return created - r.Int64N(2000)
	case 9:
		return lastWrite - r.Int64N(300)
	case 10:
		return lastWrite + r.Int64N(300)
	default:
		return c + (int64(1)<<31+r.Int64N(1<<20))*int64(r.IntN(2))
	}
}

func TestAudit17OracleRandom(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for seed := uint64(1); seed <= 12; seed++ {
		for _, rebaseAt := range []int64{1 << 31, 5_000} {
			name := fmt.Sprintf("seed%d/rebase%d", seed, rebaseAt)
			t.Run(name, func(t *testing.T) {
				a17RunOracle(t, e, seed, rebaseAt, LimiterConfig{CellsPerLevel: 4096})
			})
		}
	}
}

func a17RunOracle(t *testing.T, e *env, seed uint64, rebaseAt int64, cfg LimiterConfig) {
	r := rand.New(rand.NewPCG(seed, 17))
	clk := sketchtest.NewFakeClock()
	const start = int64(1_000_000_000_000)
	clk.Set(start)
	cfg.Name = fmt.Sprintf("a17o:%d:%d:%d:%v", seed, rebaseAt, cfg.DenyCacheCells, cfg.PreCheck)
	cfg.Limit, cfg.Clock = PerSecond(10, 10), clk
	l := e.limiter(t, cfg)
	if l.unit != 100 {
		t.Fatalf("unit %v, want 100", l.unit)
	}
	if rebaseAt != 1<<31 {
		l.Sketch().setRebaseAt(rebaseAt)
	}
	m := &a17Model{rebaseAt: rebaseAt, burst: 1000, keys: map[string]*a17Key{}}
	ctx := context.Background()
	ns := []int64{0, 1, 2, 10, 11}
	keys := []string{"a", "b"}
	c, lastWrite := start, start
	var hist []string
	for step := 0; step < 400; step++ {
		if step > 0 {
			c = max(a17Step(r, c, start, lastWrite), 1)
			clk.Set(c)
		}
		k := keys[r.IntN(len(keys))]
		n := ns[r.IntN(len(ns))]
		want := m.allow(k, c, n*100)
		if want.allowed {
			lastWrite = c
		}
		got, err := l.AllowN(ctx, k, float64(n))
		hist = append(hist, fmt.Sprintf("c=%d(%+d) %s n=%d -> %+v", c, c-start, k, n, got))
		if len(hist) > 12 {
			hist = hist[1:]
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		wr := time.Duration(want.retry) * time.Millisecond
		if want.allowed || want.retry < 0 {
			wr = -1
		}
		if got.Allowed != want.allowed || got.RetryAfter != wr || got.ResetAfter != time.Duration(want.reset)*time.Millisecond ||
			got.Remaining != float64(want.remaining)/100 {
			t.Fatalf("step %d (seed %d): AllowN(%s, %d) at %d = %+v; the model says %+v (H %+d, key %+v)\nlast calls:\n%s",
				step, seed, k, n, c-start, got, want, m.H-start, *m.key(k), joinLines(hist))
		}
	}
}

func joinLines(s []string) string {
	out := ""
	for _, x := range s {
		out += "  " + x + "\n"
	}
	return out
}

// TestAudit17OracleRandomDenyCache: the same sequences with the deny
// cache (and PreCheck). Failed before the fix (audit17, finding 1: the
// cache held the server's debt as of the clock's high-water mark, which
// can lie after the server's tm); a regression test now.
func TestAudit17FixedOracleRandomDenyCache(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for seed := uint64(1); seed <= 12; seed++ {
		for _, pre := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/precheck=%v", seed, pre), func(t *testing.T) {
				a17RunOracle(t, e, seed, 1<<31, LimiterConfig{CellsPerLevel: 4096, DenyCacheCells: 4096, PreCheck: pre})
			})
		}
	}
}
