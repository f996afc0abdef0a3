package check

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// Flags are the examples' rates, read by limit.ParseLimit (a Limit is a
// flag.TextVar).
type Flags struct {
	Addr                      string
	PerSecond, PerHour, Login limit.Limit
}

// ParseFlags reads the flags of os.Args.
func ParseFlags() Flags {
	var f Flags
	flag.StringVar(&f.Addr, "addr", "127.0.0.1:8080", "listen address")
	flag.TextVar(&f.PerSecond, "rate", limit.Limit(10), `per-client rate ("10/s")`)
	flag.TextVar(&f.PerHour, "hourly", limit.Limit(1000.0/3600), `per-client hourly cap ("1000/h")`)
	flag.TextVar(&f.Login, "login", limit.Every(12*time.Second), `POST /login rate per client ("5/m")`)
	flag.Parse()
	return f
}

// Defaults are the flags' defaults, for tests, but Addr: 127.0.0.1:0
// (any free port) where the flag says 127.0.0.1:8080.
func Defaults() Flags {
	return Flags{Addr: "127.0.0.1:0", PerSecond: 10, PerHour: limit.Limit(1000.0 / 3600), Login: limit.Every(12 * time.Second)}
}

// Middlewares returns the shared middleware (the Multi of two windows,
// /healthz skipped, denials logged, problem+json) and the login one
// (With: the same options, its own limiter).
func Middlewares(f Flags) (api, login *httplimit.Middleware) {
	multi, err := limit.NewMulti(
		limit.MustNew(f.PerSecond, 20, limit.WithName("per-second")),
		limit.MustNew(f.PerHour, 1000, limit.WithName("per-hour")))
	if err != nil {
		log.Fatal(err)
	}
	api, err = httplimit.New(multi,
		httplimit.WithProblemJSON(true),
		// The path as sent: chi and echo route on it, so a skip on the
		// decoded one let /health%7A through unlimited to their 404
		// (audit 128); on net/http and gin such a spelling is a charged
		// "ok".
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.EscapedPath() == "/healthz" }),
		httplimit.WithHook(func(r *http.Request, key string, d limit.Decision) {
			if !d.Allowed {
				log.Printf("denied %s %s by %q: retry after %v", key, r.URL.Path, d.Policy, d.RetryAfter)
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	login, err = api.With(limit.MustNew(f.Login, 2, limit.WithName("login")))
	if err != nil {
		log.Fatal(err)
	}
	return api, login
}
