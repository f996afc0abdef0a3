package limit_test

// Audit 3, capacity: shared helpers of the audit3_cap_*_test.go files
// (package limit's capacity claims and its Buckets engine, through the
// public API only).

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a3capConf is a limiter the Buckets engine holds exactly, and its token
// in whole milliseconds of drain, so that an exact oracle is integer
// arithmetic in ms.
type a3capConf struct {
	name    string
	lim     limit.Limit
	burst   int
	tokenMs int64 // 1000 / lim, exactly
	maxDebt int   // WithMaxDebt, in tokens; 0: the default, 2 x burst
}

// a3capConfs: the docs' own examples of limiters on Buckets (limit/doc.go,
// "Engines"; docs/capacity.md's table), one of them with MaxDebt next to
// the engine's 61,438-tick span.
var a3capConfs = []a3capConf{
	{"10ps-b20", 10, 20, 100, 0},
	{"1ps-b30", 1, 30, 1000, 0}, // MaxDebt 60 s: close to the 16-bit span
	{"1000ps-b1000", 1000, 1000, 1, 0},
	{"every7ms-b100", limit.Every(7 * time.Millisecond), 100, 7, 0},
	// MaxDebt at the engine's whole span: 61,438 ticks of 1 ms.
	{"1000ps-b30000-md61438", 1000, 30000, 1, 61438},
}

func (c a3capConf) burstMs() int64 { return int64(c.burst) * c.tokenMs }
func (c a3capConf) maxDebtMs() int64 {
	if c.maxDebt != 0 {
		return int64(c.maxDebt) * c.tokenMs
	}
	return 2 * c.burstMs() // the default MaxDebt: 2 x burst
}

// a3capNew builds a limiter of c on a fake clock (at a non-zero time)
// with seed seed, and checks that it runs on Buckets and is exact.
func a3capNew(t testing.TB, c a3capConf, seed uint64, opts ...limit.Option) (*limit.Limiter, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	base := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}
	if c.maxDebt != 0 {
		base = append(base, limit.WithMaxDebt(float64(c.maxDebt)))
	}
	l, err := limit.New(c.lim, c.burst, append(base, opts...)...)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if l.Engine() != limit.Buckets || !l.Exact() {
		t.Fatalf("%s: engine %v, exact %v: want an exact Buckets limiter", c.name, l.Engine(), l.Exact())
	}
	if l.MaxDebt()*float64(c.tokenMs) != float64(c.maxDebtMs()) {
		t.Fatalf("%s: MaxDebt %v, want %d ms", c.name, l.MaxDebt(), c.maxDebtMs())
	}
	return l, clk
}

// a3capOracle is the exact token bucket of one key in debt form, in ms:
// the key's debt is max(zero - now, 0) ms of drain.
type a3capOracle struct{ zero int64 }

func (o *a3capOracle) debt(now int64) int64 { return max(o.zero-now, 0) }

func (o *a3capOracle) add(now, ms, capMs int64) {
	o.zero = min(max(o.zero, now)+ms, now+capMs)
}

// a3capKeys returns n distinct keys "prefix-i".
func a3capKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + "-" + strconv.Itoa(i)
	}
	return keys
}

// a3capBinom returns a generous upper bound for a count of Bernoulli(p)
// events in n trials: the mean plus 4 standard deviations plus 3.
func a3capBinom(n int, p float64) float64 {
	m := float64(n) * p
	return m + 4*math.Sqrt(m*(1-p)) + 3
}

func a3capPct(x float64) string { return fmt.Sprintf("%.4f%%", 100*x) }
