package promstats_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lfgrudge/grudge/examples/promstats"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit105FixedZeroLimiterPanicsAtNew (audit 105; fixed at stop 61,
// the text below says what was wrong: New now reads each Source's Stats
// once, so the zero Limiter's panic comes from New).
//
// Audit 105 (docs against the code). promstats.New's doc: "It panics on
// a nil Source, a nil pointer in one (a nil *limit.Limiter) included:
// here, not in a scrape." A Source whose Stats panics in every scrape is
// also the zero *limit.Limiter or *limit.Multi (&limit.Limiter{}: its
// Stats panics "limit: zero Limiter; use New"), which New accepts; the
// panic then comes in Collect, i.e. in the scrape (under promhttp, in the
// registry's collector goroutine, which does not recover: the process
// ends). The doc's letter lists only nil; its promise ("here, not in a
// scrape") is what this checks. Fails today: New accepts both.
func TestAudit105FixedZeroLimiterPanicsAtNew(t *testing.T) {
	for name, src := range map[string]promstats.Source{
		"&limit.Limiter{}": &limit.Limiter{},
		"&limit.Multi{}":   &limit.Multi{},
	} {
		var atNew any
		var c *promstats.Collector
		func() {
			defer func() { atNew = recover() }()
			c = promstats.New("a105", map[string]promstats.Source{"z": src})
		}()
		if atNew != nil {
			continue // refused here, as the doc promises
		}
		var inScrape any
		func() {
			defer func() { inScrape = recover() }()
			ch := make(chan prometheus.Metric, 64)
			c.Collect(ch)
		}()
		t.Errorf("promstats.New accepted %s; its Collect (a scrape) then panics: %v; doc: panics here, not in a scrape", name, inScrape)
	}
}
