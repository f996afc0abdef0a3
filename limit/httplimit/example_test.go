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
