package promstats_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lfgrudge/grudge/examples/promstats"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// TestAudit128StatsThroughMiddleware: limiters driven by httplimit (25
// requests of one client on a burst of 20: 20 admitted, 5 denied), then
// one scrape under a namespace: exactly the six metric names of the
// package doc, one series per limiter (a Multi is one limiter), each
// value equal to that limiter's Stats read after the scrape (no
// decision in between; the sampled saturation within 1e-6), the counters at 20 and 5.
func TestAudit128StatsThroughMiddleware(t *testing.T) {
	api := limit.MustNew(10, 20, limit.WithName("api"), limit.WithEngine(limit.Buckets))
	multi, err := limit.NewMulti(limit.MustNew(10, 20, limit.WithName("s")), limit.MustNew(1, 1000, limit.WithName("h")))
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]promstats.Source{"api": api, "multi": multi}
	for _, l := range []httplimit.Limiter{api, multi} {
		h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for range 25 {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1"
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promstats.New("audit", srcs))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{} // name -> limiter -> value
	engines := map[string]string{}
	for _, mf := range mfs {
		got[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			if _, dup := got[mf.GetName()][labels["limiter"]]; dup {
				t.Errorf("%s: two series for %q", mf.GetName(), labels["limiter"])
			}
			got[mf.GetName()][labels["limiter"]] = v
			if mf.GetName() == "audit_limit_info" {
				engines[labels["limiter"]] = labels["engine"]
			}
		}
	}
	if len(got) != 6 {
		t.Errorf("metric families %v, want the doc's six", len(got))
	}
	for name, src := range srcs {
		st := src.Stats()
		if st.Admitted != 20 || st.Denied != 5 {
			t.Errorf("%s: Stats admitted %d denied %d, want 20 and 5", name, st.Admitted, st.Denied)
		}
		for _, c := range []struct {
			metric string
			want   float64
		}{
			{"audit_limit_admitted_total", float64(st.Admitted)},
			{"audit_limit_denied_total", float64(st.Denied)},
			{"audit_limit_rotations_total", float64(st.Rotations)},
			{"audit_limit_saturation", st.Saturation},
			{"audit_limit_bytes", float64(st.Bytes)},
			{"audit_limit_info", 1},
		} {
			v, ok := got[c.metric][name]
			if c.metric == "audit_limit_saturation" && ok && math.Abs(v-c.want) <= 1e-6 {
				continue // a sampled reading (limit.Stats: its offset moves with every call), and time drains debt
			}
			if !ok || v != c.want {
				t.Errorf("%s{limiter=%q} = %v (present %v), want %v", c.metric, name, v, ok, c.want)
			}
		}
		if engines[name] != st.Engine.String() {
			t.Errorf("info engine %q, Stats %q", engines[name], st.Engine)
		}
	}
}
