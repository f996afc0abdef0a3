package promstats_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lfgrudge/grudge/examples/promstats"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a91Gather builds ExampleNew's collector (namespace "myapp", limiters
// "api" and "login") on a fresh registry and returns its series as
// name{limiter} -> value.
func a91Gather(t *testing.T) (map[string]float64, []string) {
	t.Helper()
	clk := limittest.NewFakeClock()
	api := limit.MustNew(10, 20, limit.WithName("api"), limit.WithClock(clk))
	login := limit.MustNew(limit.Every(12*time.Second), 2, limit.WithName("login"), limit.WithClock(clk)) // 5/min
	for i := 0; i < 3; i++ {
		api.Allow("k")
		login.Allow("k")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.New("myapp", map[string]promstats.Source{"api": api, "login": login}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		for _, m := range mf.GetMetric() {
			lim := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "limiter" {
					lim = lp.GetValue()
				}
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			got[mf.GetName()+"{"+lim+"}"] = v
		}
	}
	sort.Strings(names)
	return got, names
}

// ExampleNew's configuration, scraped: the package doc's <ns>_limit_*
// names under the namespace "myapp", one series per limiter, and the
// login limiter at 5/min (Every(12s)) with bursts of 2: 2 of 3 admitted.
func TestAudit91ExamplePromstatsScrape(t *testing.T) {
	got, names := a91Gather(t)
	want := map[string]float64{
		"myapp_limit_admitted_total{api}":   3,
		"myapp_limit_denied_total{api}":     0,
		"myapp_limit_admitted_total{login}": 2,
		"myapp_limit_denied_total{login}":   1,
		"myapp_limit_info{login}":           1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v; names %v", k, g, ok, v, names)
		}
	}
	if l := limit.Every(12 * time.Second); l*60 < 4.999999 || l*60 > 5.000001 {
		t.Errorf("ExampleNew: Every(12s) is %v/s, its comment says 5/min", float64(l))
	}
}

// examples/promstats/example_test.go (ExampleNew's doc): "A server's
// limiters on /metrics under the namespace "myapp":
// myapp_limit_admitted_total{limiter="api"},
// myapp_limit_saturation{limiter="login"}" (audit 91: it named them
// without the namespace the example passes).
func TestAudit91ExampleFixedPromstatsExampleNames(t *testing.T) {
	got, names := a91Gather(t)
	for _, k := range []string{"myapp_limit_admitted_total{api}", "myapp_limit_saturation{login}"} {
		if _, ok := got[k]; !ok {
			t.Errorf("ExampleNew's doc names %s; the example's collector exposes %s", k, strings.Join(names, ", "))
		}
	}
}
