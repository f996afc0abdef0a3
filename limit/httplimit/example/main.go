// Command example is a runnable server behind httplimit: 5 requests per
// second per client IP, bursts of 10, problem+json denials.
//
//	go run ./limit/httplimit/example -addr 127.0.0.1:8080
//	for i in $(seq 12); do curl -si 127.0.0.1:8080 | head -1; done
package main

import (
	"flag"
	"io"
	"log"
	"net/http"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	l := limit.MustNew(5, 10, limit.WithName("per-ip"))
	h := httplimit.Wrap(l, mux, httplimit.WithProblemJSON(true),
		httplimit.WithHook(func(r *http.Request, key string, d limit.Decision) {
			if !d.Allowed {
				log.Printf("denied %s (%s): retry after %v", key, r.URL.Path, d.RetryAfter)
			}
		}))
	log.Printf("listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, h))
}
