package main

import (
	"testing"

	"github.com/lfgrudge/grudge/examples/internal/check"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit57Server: the nethttp server, as package examples' doc says.
func TestAudit57Server(t *testing.T) { check.Doc(t, handler(check.Defaults())) }

// The examples' shared check (internal/check.Server), run by every
// server's TestServer, still expects a login's answer to carry only the
// login limiter's RateLimit-Policy (`"login";q=2;w=24`), the behaviour
// before commit f432fd7; httplimit's package doc now says stacked
// middlewares "each add their items to the fields the outer ones set, so
// the answer lists every policy that decided it". The examples module's
// tests (make test) fail on all four servers: this test passes once the
// check follows the library.
func TestAudit57FixedSharedCheckStale(t *testing.T) {
	check.Server(t, handler(check.Defaults()))
}

// The flags of the doc's command line (-rate 10/s -hourly 1000/h -login
// 5/m), read by limit.ParseLimit, give the defaults' server.
func TestAudit57FlagsAsDocumented(t *testing.T) {
	f := check.Defaults()
	for _, c := range []struct {
		text string
		dst  *limit.Limit
	}{{"10/s", &f.PerSecond}, {"1000/h", &f.PerHour}, {"5/m", &f.Login}} {
		l, err := limit.ParseLimit(c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.text, err)
		}
		*c.dst = l
	}
	check.Doc(t, handler(f))
	// The defaults' text form reads back as the same limit (flag.TextVar
	// prints the default with MarshalText).
	for _, l := range []limit.Limit{check.Defaults().PerSecond, check.Defaults().PerHour, check.Defaults().Login} {
		b, err := l.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back limit.Limit
		if err := back.UnmarshalText(b); err != nil || back != l {
			t.Errorf("%v: text %q reads back as %v, %v", float64(l), b, float64(back), err)
		}
	}
}
