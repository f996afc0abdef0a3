// Command echo is the example server (package examples) on
// labstack/echo v4: echo.WrapMiddleware turns httplimit's
// Middleware.Handler into an echo middleware.
//
//	go run ./echo -rate 10/s -hourly 1000/h -login 5/m
package main

import (
	"log"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lfgrudge/grudge/examples/internal/check"
)

func handler(f check.Flags) http.Handler {
	api, login := check.Middlewares(f)
	e := echo.New()
	e.HideBanner = true
	e.Use(echo.WrapMiddleware(api.Handler)) // every route (api skips /healthz)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome\n") },
		echo.WrapMiddleware(login.Handler))
	return e
}

func main() {
	f := check.ParseFlags()
	log.Printf("listening on http://%s", f.Addr)
	log.Fatal(http.ListenAndServe(f.Addr, handler(f)))
}
