package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lfgrudge/grudge/examples/internal/check"
	"github.com/lfgrudge/grudge/limit"
)

// nethttp/main.go:5-6 (and chi, echo, gin): "go run ./nethttp -rate 10/s
// -hourly 1000/h -login 5/m" is the flags' defaults, read as flag.TextVar
// reads them (Limit.UnmarshalText); then the doc's loop of 4 POST /login
// from one client answers 200, 200, 429, 429.
func TestAudit91ExampleNethttpFlagsAndLoginLoop(t *testing.T) {
	d := check.Defaults()
	for _, c := range []struct {
		text string
		want limit.Limit
	}{{"10/s", d.PerSecond}, {"1000/h", d.PerHour}, {"5/m", d.Login}} {
		var l limit.Limit
		if err := l.UnmarshalText([]byte(c.text)); err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if r := float64(l) / float64(c.want); r < 1-1e-9 || r > 1+1e-9 {
			t.Errorf("%q reads %v/s; the default it documents is %v/s", c.text, float64(l), float64(c.want))
		}
	}
	h := handler(d)
	var codes []int
	for i := 0; i < 4; i++ {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/login", nil)
		r.RemoteAddr = "198.51.100.9:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	// 5/min with bursts of 2: the loop runs well within the 12 s a token
	// takes to come back.
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 || codes[3] != 429 {
		t.Errorf("4 POST /login: %v, want [200 200 429 429]", codes)
	}
}
