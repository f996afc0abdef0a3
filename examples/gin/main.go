// Command gin is the example server (package examples) on gin-gonic/gin:
// a gin middleware calls httplimit's Middleware.Allow, which answers the
// request itself when it must not go on.
//
//	go run ./gin -rate 10/s -hourly 1000/h -login 5/m
package main

import (
	"log"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lfgrudge/grudge/examples/internal/check"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// limited is m as a gin middleware.
func limited(m *httplimit.Middleware) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !m.Allow(c.Writer, c.Request) {
			c.Abort()
			return
		}
		c.Next()
	}
}

func handler(f check.Flags) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	api, login := check.Middlewares(f)
	r := gin.New()
	// gin answers a path with or without a trailing slash by a redirect
	// before any middleware runs: uncharged, so a client could send as
	// many as it liked (audit 128). Without the redirect it is a 404,
	// which the middleware charges.
	r.RedirectTrailingSlash = false
	r.Use(limited(api)) // every route (api skips /healthz)
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	r.POST("/login", limited(login), func(c *gin.Context) { c.String(http.StatusOK, "welcome\n") })
	return r
}

func main() {
	f := check.ParseFlags()
	log.Printf("listening on http://%s", f.Addr)
	log.Fatal(http.ListenAndServe(f.Addr, handler(f)))
}
