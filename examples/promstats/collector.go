// Package promstats exports limiters' Stats (limit.Limiter.Stats,
// limit.Multi.Stats) as Prometheus metrics: a prometheus.Collector that
// reads every limiter's Stats once per scrape. It lives in the examples
// module so that the library's module graph stays free of Prometheus;
// copy it, or build on it.
//
// For each limiter, labelled limiter="<name>":
//
//	<ns>_limit_admitted_total   counter  decisions that admitted
//	<ns>_limit_denied_total     counter  decisions that denied
//	<ns>_limit_rotations_total  counter  the count-min's rotations (0 on Buckets)
//	<ns>_limit_saturation       gauge    the share of fresh keys it would deny now
//	<ns>_limit_bytes            gauge    the memory its engine holds
//	<ns>_limit_info             gauge    1, with the engine as a label
//
// Alert on saturation (an innocent-denial rate, see limit.Stats), graph
// rate(<ns>_limit_denied_total[5m]).
package promstats

import (
	"maps"
	"reflect"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lfgrudge/grudge/limit"
)

// Source is what the collector reads: *limit.Limiter and *limit.Multi
// implement it.
type Source interface{ Stats() limit.Stats }

// Collector is a prometheus.Collector over a fixed set of named
// limiters. It is safe for concurrent scrapes (Stats is).
type Collector struct {
	names []string // sorted: a scrape lists the limiters in one order
	srcs  []Source

	admitted, denied, rotations, saturation, bytes, info *prometheus.Desc
}

// New returns a collector of the given limiters, by name (the limiter
// label). namespace prefixes every metric name ("" for none). It panics
// on a nil Source, a nil pointer in one (a nil *limit.Limiter) included,
// and on one whose Stats panics (the zero limit.Limiter or Multi, which
// were never built: it reads each Stats once): here, not in a scrape.
func New(namespace string, limiters map[string]Source) *Collector {
	c := &Collector{names: slices.Sorted(maps.Keys(limiters))}
	for _, n := range c.names {
		if src := limiters[n]; src == nil || isNilPointer(src) {
			panic("promstats: nil Source for limiter " + n)
		}
		limiters[n].Stats() // a zero Limiter's panic, here rather than in a scrape
		c.srcs = append(c.srcs, limiters[n])
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "limit", name), help, append([]string{"limiter"}, labels...), nil)
	}
	c.admitted = desc("admitted_total", "Decisions that admitted the request, since the limiter was built.")
	c.denied = desc("denied_total", "Decisions that denied the request, since the limiter was built.")
	c.rotations = desc("rotations_total", "Rotation periods of the count-min engine since the limiter was built (0 on the Buckets engine).")
	c.saturation = desc("saturation", "Estimated probability that a key the limiter has never seen is denied one token now.")
	c.bytes = desc("bytes", "Memory held by the limiter's engine, in bytes.")
	c.info = desc("info", "The limiter's engine (always 1).", "engine")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.admitted, c.denied, c.rotations, c.saturation, c.bytes, c.info} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Stats reading per limiter.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for i, name := range c.names {
		st := c.srcs[i].Stats()
		ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.CounterValue, float64(st.Admitted), name)
		ch <- prometheus.MustNewConstMetric(c.denied, prometheus.CounterValue, float64(st.Denied), name)
		ch <- prometheus.MustNewConstMetric(c.rotations, prometheus.CounterValue, float64(st.Rotations), name)
		ch <- prometheus.MustNewConstMetric(c.saturation, prometheus.GaugeValue, st.Saturation, name)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.Bytes), name)
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, name, st.Engine.String())
	}
}

// isNilPointer reports whether src holds a nil pointer (an interface
// holding one is not == nil).
func isNilPointer(src Source) bool {
	v := reflect.ValueOf(src)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
