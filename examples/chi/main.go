// Command chi is the example server (package examples) on go-chi/chi:
// httplimit's Middleware.Handler is a chi middleware as it is.
//
//	go run ./chi -rate 10/s -hourly 1000/h -login 5/m
package main

import (
	"io"
	"log"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/lfgrudge/grudge/examples/internal/check"
)

func handler(f check.Flags) http.Handler {
	api, login := check.Middlewares(f)
	r := chi.NewRouter()
	r.Use(api.Handler) // every route (api skips /healthz)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	r.With(login.Handler).Post("/login", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "welcome\n") })
	return r
}

func main() {
	f := check.ParseFlags()
	log.Printf("listening on http://%s", f.Addr)
	log.Fatal(http.ListenAndServe(f.Addr, handler(f)))
}
