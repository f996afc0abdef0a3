package promstats_test

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lfgrudge/grudge/examples/promstats"
	"github.com/lfgrudge/grudge/limit"
)

// A server's limiters on /metrics under the namespace "myapp":
// myapp_limit_admitted_total{limiter="api"},
// myapp_limit_saturation{limiter="login"}, and so on, read at every
// scrape.
func ExampleNew() {
	api := limit.MustNew(10, 20, limit.WithName("api"))
	login := limit.MustNew(limit.Every(12*time.Second), 2, limit.WithName("login")) // 5/min
	prometheus.MustRegister(promstats.New("myapp", map[string]promstats.Source{"api": api, "login": login}))
	http.Handle("/metrics", promhttp.Handler())
	// http.ListenAndServe(":9090", nil)
}
