package promstats_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lfgrudge/grudge/examples/promstats"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestCollector: after known decisions on a Buckets limiter, a count-min
// limiter rotated once on a fake clock, and a Multi, a scrape reports
// exactly their counts, rotations, bytes and engines, a saturation of 0
// on the idle ones and above 0 on one filled past its capacity; and
// the metrics pass the Prometheus linter.
func TestCollector(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	opt := limit.WithClock(clk)
	api := limit.MustNew(10, 5, opt, limit.WithEngine(limit.Buckets))
	cm := limit.MustNew(10, 5, opt, limit.WithEngine(limit.CountMin))
	small := limit.MustNew(10, 5, opt, limit.WithCapacity(1000, 0.01), limit.WithEngine(limit.Buckets))
	m, err := limit.NewMulti(limit.MustNew(10, 3, opt), limit.MustNew(1, 10, opt))
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		api.Allow("203.0.113.7") // 5 admitted, 3 denied
		m.Allow("203.0.113.7")   // 3 admitted, 5 denied
	}
	api.Peek("203.0.113.7") // a read: counts nothing
	cm.Allow("a")
	clk.Advance(cm.Period())
	cm.Allow("a") // rotates once, then admits
	smallYes := 0 // past its capacity: some fresh keys are denied
	for i := range 3000 {
		if small.AllowN(clk.Now(), fmt.Sprint("client-", i), 5) {
			smallYes++
		}
	}
	if smallYes == 0 || smallYes == 3000 {
		t.Fatalf("small: %d of 3000 admitted; the test wants both answers", smallYes)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promstats.New("", map[string]promstats.Source{"api": api, "cm": cm, "login": m, "small": small}))
	want := fmt.Sprintf(`
# HELP limit_admitted_total Decisions that admitted the request, since the limiter was built.
# TYPE limit_admitted_total counter
limit_admitted_total{limiter="api"} 5
limit_admitted_total{limiter="cm"} 2
limit_admitted_total{limiter="login"} 3
limit_admitted_total{limiter="small"} %d
# HELP limit_denied_total Decisions that denied the request, since the limiter was built.
# TYPE limit_denied_total counter
limit_denied_total{limiter="api"} 3
limit_denied_total{limiter="cm"} 0
limit_denied_total{limiter="login"} 5
limit_denied_total{limiter="small"} %d
# HELP limit_info The limiter's engine (always 1).
# TYPE limit_info gauge
limit_info{engine="buckets",limiter="api"} 1
limit_info{engine="buckets",limiter="login"} 1
limit_info{engine="buckets",limiter="small"} 1
limit_info{engine="count-min",limiter="cm"} 1
# HELP limit_rotations_total Rotation periods of the count-min engine since the limiter was built (0 on the Buckets engine).
# TYPE limit_rotations_total counter
limit_rotations_total{limiter="api"} 0
limit_rotations_total{limiter="cm"} 1
limit_rotations_total{limiter="login"} 0
limit_rotations_total{limiter="small"} 0
`, smallYes, 3000-smallYes)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "limit_admitted_total", "limit_denied_total", "limit_rotations_total", "limit_info"); err != nil {
		t.Fatal(err)
	}

	// The gauges: bytes exactly, saturation by its range.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]promstats.Source{"api": api, "cm": cm, "login": m, "small": small}
	seen := 0
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mt.GetLabel()[len(mt.GetLabel())-1].GetValue() // "limiter" sorts after "engine"
			v := mt.GetGauge().GetValue()
			switch mf.GetName() {
			case "limit_bytes":
				seen++
				if st := src[name].Stats(); v != float64(st.Bytes) || v <= 0 {
					t.Errorf("%s: limit_bytes %v, Stats().Bytes %d", name, v, st.Bytes)
				}
			case "limit_saturation":
				seen++
				if name == "small" && (v < 0.05 || v > 1) || name != "small" && v != 0 {
					t.Errorf("%s: limit_saturation %v", name, v)
				}
			}
		}
	}
	if seen != 8 {
		t.Fatalf("%d gauge samples, want 8", seen)
	}

	// A scrape over HTTP, as Prometheus makes it.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{`limit_admitted_total{limiter="api"} 5`, `limit_denied_total{limiter="login"} 5`, `limit_rotations_total{limiter="cm"} 1`} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("scrape lacks %q:\n%s", line, body)
		}
	}

	if problems, err := testutil.CollectAndLint(promstats.New("myapp", src)); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
	if n := testutil.CollectAndCount(promstats.New("myapp", src), "myapp_limit_admitted_total"); n != 4 {
		t.Fatalf("namespaced: %d series, want 4", n)
	}
}
