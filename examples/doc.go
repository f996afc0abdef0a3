// Package examples holds runnable servers behind limit/httplimit, one per
// router: net/http (nethttp), chi, echo and gin. It is a nested module
// (github.com/lfgrudge/grudge/examples) so that the routers stay out of
// the library's module graph; make test vets and tests it.
//
// Each server has the same policies: every client (by IP, IPv6 per /64)
// gets 10 requests per second with bursts of 20 and 1000 per hour (a
// limit.Multi of two named windows; the hourly one is a bucket of 1000
// that refills over the hour, so a client that starts with it full gets
// up to 2000 in its first hour, then 1000 an hour), and POST /login gets its
// own, tighter limiter (5 per minute, bursts of 2) through
// Middleware.With; /healthz is never limited (WithSkip). The rates are
// flags read by limit.ParseLimit.
//
// Package promstats (examples/promstats) is a Prometheus collector of
// limiters' Stats: admitted, denied and rotation counters, saturation
// and bytes gauges, one series per named limiter; Prometheus's client is
// a dependency of this module only, never of the library's.
package examples
