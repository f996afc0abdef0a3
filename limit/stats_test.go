package limit_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestSaturation: Stats().Saturation, read after keys took their whole
// burst at one instant, is within 20% of the share of 100,000 fresh keys
// that would be denied one token (Peek), on both engines, wherever that
// share rests on 1,000 denials or more; and both are 0 on an empty
// limiter.
func TestSaturation(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []limit.Option
		keys []int
	}{
		// 4 x 8192 cells: a fresh key is denied 2% to 92% of the time.
		{"count-min", []limit.Option{limit.WithSize(4, 8192)}, []int{4000, 8000, 16000, 32000}},
		// Sized for 10,000 keys at 1%: below, at and past the cliff.
		{"buckets", []limit.Option{limit.WithCapacity(10_000, 0.01), limit.WithEngine(limit.Buckets)}, []int{10_000, 12_000, 13_000, 14_000, 20_000}},
	} {
		for _, n := range c.keys {
			t.Run(fmt.Sprintf("%s/keys=%d", c.name, n), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(5)}, c.opts...)...)
				if s := l.Stats().Saturation; s != 0 {
					t.Fatalf("empty limiter: saturation %v", s)
				}
				for i := range n {
					l.AllowN(clk.Now(), fmt.Sprint("held-", i), 20)
				}
				st := l.Stats()
				const fresh = 100_000
				denied := 0
				for i := range fresh {
					if !l.PeekN(clk.Now(), fmt.Sprint("fresh-", i), 1).Allowed {
						denied++
					}
				}
				rate := float64(denied) / fresh
				t.Logf("%s, %d keys: saturation %.4f, measured %.4f (%d denied)", c.name, n, st.Saturation, rate, denied)
				if denied >= 1000 && math.Abs(st.Saturation-rate) > 0.2*rate {
					t.Fatalf("saturation %.4f, measured %.4f: more than 20%% off", st.Saturation, rate)
				}
				if denied < 1000 && st.Saturation > 0.05 {
					t.Fatalf("saturation %.4f with %d of %d fresh keys denied", st.Saturation, denied, fresh)
				}
			})
		}
	}
}

// TestStats: the fields and their JSON (what expvar serves).
func TestStats(t *testing.T) {
	l := limit.MustNew(10, 20)
	st := l.Stats()
	if st.Engine != limit.Buckets || st.Bytes != l.Sizes().Total || st.Saturation != 0 {
		t.Fatalf("Stats %+v", st)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"Engine":"buckets"`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithEngine(e))
		if a := testing.AllocsPerRun(10, func() { l.Stats() }); a != 0 {
			t.Errorf("%v: Stats allocates %v", e, a)
		}
	}
	if st := limit.MustNew(limit.Inf, 1).Stats(); st != (limit.Stats{}) {
		t.Fatalf("Inf: %+v", st)
	}
	if st := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin)).Stats(); st.Engine != limit.CountMin || st.Saturation != 0 {
		t.Fatalf("count-min: %+v", st)
	}
}

// TestCapacity: Capacity reads Suggest's models the other way. The
// default Buckets limiter holds 1.2M to 1.3M keys at full debt at 1%
// (its cliff, docs/capacity.md), and Suggest for that many fits in it;
// the default count-min holds the Bloom formula's 38,000 (4 levels of
// 100,000 cells); Inf is unbounded; a rate outside (0, 1) panics.
func TestCapacity(t *testing.T) {
	b := limit.MustNew(10, 20)
	c := b.Capacity(0.01)
	s, err := limit.Suggest(c, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	more, err := limit.Suggest(c+c/200, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	lines := b.Sizes().Cells/64 - 1
	if c < 1_200_000 || c > 1_300_000 || s.Buckets.Lines > lines || more.Buckets.Lines <= lines {
		t.Fatalf("Buckets: Capacity(1%%) = %d; Suggest for it %d lines, for 0.5%% more %d; the limiter has %d", c, s.Buckets.Lines, more.Buckets.Lines, lines)
	}
	cm := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin))
	k := cm.Capacity(0.01)
	bloom := func(k int) float64 { return math.Pow(-math.Expm1(-float64(k)/100_000), 4) }
	if bloom(k) > 0.01 || bloom(k+1) <= 0.01 || k < 37_000 || k > 39_000 {
		t.Fatalf("count-min: Capacity(1%%) = %d (formula %v, one more %v)", k, bloom(k), bloom(k+1))
	}
	if got := limit.MustNew(limit.Inf, 1).Capacity(0.5); got != math.MaxInt {
		t.Fatalf("Inf: %d", got)
	}
	defer func() {
		if r, _ := recover().(string); !strings.HasPrefix(r, "limit: Capacity") {
			t.Fatalf("Capacity(0) panicked with %q", r)
		}
	}()
	b.Capacity(0)
}
