package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit17ProbeWaits checks every wait against the server itself, with
// no model: the strings are saved, the clock is set to the answer's
// RetryAfter (and 1 ms before it), the same request is asked, and the
// strings are restored. "At clock+RetryAfter the same request fits if
// nothing else was admitted; 1 ms earlier it does not", and likewise
// ResetAfter with the key's debt. Tiny sketches (2 levels of 2 or 3
// cells) make the keys share cells, so a key's cells carry different
// stamps, some ahead of the call's time (the bisection path).
func TestAudit17ProbeWaits(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	for _, lim := range []Limit{PerSecond(10, 10), PerSecond(3, 7), PerSecond(math.Pi, 5), PerSecond(0.001, 3), PerSecond(1e-3, 9000), PerSecond(1e6, 1e9), PerSecond(7, 1e6)} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("%v/seed%d", lim, seed), func(t *testing.T) {
				a17Probe(t, e, lim, seed)
			})
		}
	}
}

func a17Probe(t *testing.T, e *env, lim Limit, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xA17))
	clk := sketchtest.NewFakeClock()
	const start = int64(1_000_000_000_000)
	clk.Set(start)
	l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a17p:%v:%v:%d", lim.Rate, lim.Burst, seed), Limit: lim, Clock: clk,
		Levels: 2, CellsPerLevel: uint32(2 + seed%2)})
	if seed%3 == 0 {
		l.Sketch().setRebaseAt(7_000)
	}
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d"}
	ns := []float64{0, 1, 2, lim.Burst, lim.Burst + 1, 0.5}
	// A drain of the whole burst, in ms: the probes' scale.
	drain := int64(lim.Burst / lim.Rate * 1000)
	c, lastWrite := start, start
	save := func() map[string]string {
		m := map[string]string{}
		for _, k := range l.Sketch().Keys() {
			v, err := e.admin.Do(ctx, e.admin.B().Get().Key(k).Build()).ToString()
			if err == nil {
				m[k] = v
			}
		}
		return m
	}
	restore := func(m map[string]string) {
		for _, k := range l.Sketch().Keys() {
			if v, ok := m[k]; ok {
				if err := e.admin.Do(ctx, e.admin.B().Set().Key(k).Value(v).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			} else {
				e.admin.Do(ctx, e.admin.B().Del().Key(k).Build())
			}
		}
	}
	allowAt := func(at int64, k string, n float64) Decision {
		clk.Set(at)
		d, err := l.AllowN(ctx, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	debtAt := func(at int64, k string) float64 {
		clk.Set(at)
		q, err := l.debtTokens(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	for step := 0; step < 150; step++ {
		if step > 0 {
			switch r.IntN(10) {
			case 0, 1, 2:
				c += r.Int64N(drain/3 + 1)
			case 3:
				c -= r.Int64N(drain/3 + 1)
			case 4:
				c -= 3_600_000 * int64(1+r.IntN(3))
			case 5:
				c = start - r.Int64N(5000)
			case 6:
				c = lastWrite - r.Int64N(drain+1)
			case 7:
				c += 3_600_000
			case 8:
				c -= int64(1) << (20 + r.IntN(11)) // up to 2^30 ms behind
			default:
				c += r.Int64N(20)
			}
			c = max(c, 1)
		}
		k, n := keys[r.IntN(len(keys))], ns[r.IntN(len(ns))]
		snap := save()
		d := allowAt(c, k, n)
		if d.Allowed {
			lastWrite = c
			snap = save()
		}
		ctxt := fmt.Sprintf("step %d: AllowN(%s, %v) at %+d = %+v", step, k, n, c-start, d)
		if !d.Allowed && d.RetryAfter > 0 {
			w := d.RetryAfter.Milliseconds()
			if d.RetryAfter != time.Duration(w)*time.Millisecond {
				t.Fatalf("%s: RetryAfter not a whole ms", ctxt)
			}
			// Late by at most the server's rebase slack (rebaseLate: never
			// early across rebases that may come), else exact.
			if d2 := allowAt(c+w-1-rebaseLateAt(d.RetryAfter, l.Sketch().rebaseAt).Milliseconds(), k, n); d2.Allowed {
				t.Fatalf("%s: admitted 1 ms + rebaseLate before RetryAfter (%+v): RetryAfter late", ctxt, d2)
			}
			if d2 := allowAt(c+w, k, n); !d2.Allowed {
				t.Fatalf("%s: denied at RetryAfter (%+v): RetryAfter early", ctxt, d2)
			}
			restore(snap)
		} else if !d.Allowed && n <= lim.Burst {
			t.Fatalf("%s: denied a request within Burst with no wait", ctxt)
		}
		if w := d.ResetAfter.Milliseconds(); w > 0 {
			if q := debtAt(c+w, k); q != 0 {
				t.Fatalf("%s: debt %v at ResetAfter: early", ctxt, q)
			}
			if q := debtAt(c+w-1-rebaseLateAt(d.ResetAfter, l.Sketch().rebaseAt).Milliseconds(), k); q == 0 {
				t.Fatalf("%s: debt already 0 1 ms + rebaseLate before ResetAfter: late", ctxt)
			}
		} else if q := debtAt(c, k); q != 0 {
			t.Fatalf("%s: ResetAfter 0 with debt %v", ctxt, q)
		}
		restore(snap)
	}
}
