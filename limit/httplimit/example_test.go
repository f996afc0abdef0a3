package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// The middleware in five lines: per client IP (IPv6 per /64), 10 requests
// per second with bursts of 2, 429 with Retry-After past that.
func Example() {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })
	l := limit.MustNew(10, 2)
	srv := httptest.NewServer(httplimit.Wrap(l, mux)) // or http.ListenAndServe(addr, ...)
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d %s Retry-After=%q\n", resp.StatusCode, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 "default";q=2;w=1 Retry-After=""
	// 200 "default";q=2;w=1 Retry-After=""
	// 429 "default";q=2;w=1 Retry-After="1"
}

// Per-plan limits on one limiter: a free and a paid Tier behind two
// routes, sharing each client's debt (held as time: the free route's
// burst, 2 s of drain, is half of the paid route's 4 s, so a client who
// spent it on /free still has 20 requests on /paid). The limiter's
// MaxDebt holds the largest burst in time: 40 tokens of its 10/s.
func Example_tiers() {
	l := limit.MustNew(10, 40, limit.WithMaxDebt(40))
	free, err := l.Tier("free", 1, 2)
	if err != nil {
		panic(err)
	}
	paid, err := l.Tier("paid", 10, 40)
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(free)
	if err != nil {
		panic(err)
	}
	mwPaid, err := mw.With(paid) // the same options, another policy
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })
	mux := http.NewServeMux()
	mux.Handle("/free", mw.Handler(hello))
	mux.Handle("/paid", mwPaid.Handler(hello))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/free", "/free", "/free", "/paid"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%s %d %s\n", path, resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	// Output:
	// /free 200 "free";q=2;w=2
	// /free 200 "free";q=2;w=2
	// /free 429 "free";q=2;w=2
	// /paid 200 "paid";q=40;w=4
}
