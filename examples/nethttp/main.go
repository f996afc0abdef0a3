// Command nethttp is a server behind httplimit on net/http's ServeMux:
// per client, 10/s with bursts of 20 and 1000/h (a bucket of 1000: up to
// 2000 in a client's first hour); POST /login at
// 5/min with bursts of 2; /healthz never limited (package examples).
//
//	go run ./nethttp -rate 10/s -hourly 1000/h -login 5/m
//	for i in $(seq 4); do curl -si -X POST 127.0.0.1:8080/login | head -1; done
package main

import (
	"io"
	"log"
	"net/http"

	"github.com/lfgrudge/grudge/examples/internal/check"
)

// handler limits every route with api (it skips /healthz), and POST
// /login with login as well: a login counts against both, and its answer
// lists api's policies and login's (each middleware adds its items).
func handler(f check.Flags) http.Handler {
	api, login := check.Middlewares(f)
	mux := http.NewServeMux()
	mux.Handle("POST /login", login.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "welcome\n")
	})))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return api.Handler(mux)
}

func main() {
	f := check.ParseFlags()
	log.Printf("listening on http://%s", f.Addr)
	log.Fatal(http.ListenAndServe(f.Addr, handler(f)))
}
