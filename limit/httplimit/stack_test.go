package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// stacked returns a global middleware (100/s, burst 100) around a
// per-route one (1/s, burst 2) around ok, both with legacy fields.
func stacked(t *testing.T, innerName string) http.Handler {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	outer, err := httplimit.New(limit.MustNew(100, 100, limit.WithName("global"), limit.WithClock(clk)), httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.With(limit.MustNew(1, 2, limit.WithName(innerName), limit.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	return outer.Handler(inner.Handler(ok))
}

// The package doc: stacked middlewares each add their items, so the
// answer lists every policy that decided it; the legacy fields keep the
// least Remaining, Retry-After the latest. (Before, the inner one's
// fields replaced the outer one's, and the outer one's legacy fields
// could disagree with what was left: audit 52.)
func TestStackedMiddlewaresListEveryPolicy(t *testing.T) {
	h := stacked(t, "route")
	const remote = "192.0.2.7:1"
	wantPolicy := `"global";q=100;w=1, "route";q=2;w=2`
	for i, want := range []struct {
		code      int
		rateLimit string
		remaining string
		retry     string
	}{
		{200, `"global";r=99;t=1, "route";r=1;t=1`, "1", ""},
		{200, `"global";r=98;t=1, "route";r=0;t=1`, "0", ""},
		{429, `"global";r=97;t=1, "route";r=0;t=1`, "0", "1"},
	} {
		w := get(h, remote)
		hd := w.Header()
		if w.Code != want.code {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want.code)
		}
		if got := hd.Values("RateLimit-Policy"); len(got) != 1 || got[0] != wantPolicy {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, wantPolicy)
		}
		if got := hd.Values("RateLimit"); len(got) != 1 || got[0] != want.rateLimit {
			t.Errorf("request %d: RateLimit %q, want %q", i, got, want.rateLimit)
		}
		if got := hd.Get("X-RateLimit-Remaining"); got != want.remaining || hd.Get("X-RateLimit-Limit") != "2" {
			t.Errorf("request %d: X-RateLimit-Remaining %q of %q, want %q of 2 (the least)", i, got, hd.Get("X-RateLimit-Limit"), want.remaining)
		}
		if got := hd.Get("Retry-After"); got != want.retry {
			t.Errorf("request %d: Retry-After %q, want %q", i, got, want.retry)
		}
	}
}

// A stacked limiter whose policy has the outer one's name replaces its
// items (documented: give stacked limiters distinct names).
func TestStackedSameNameReplaces(t *testing.T) {
	w := get(stacked(t, "global"), "192.0.2.8:1")
	if got := w.Header().Get("RateLimit-Policy"); got != `"global";q=2;w=2` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"global";r=1;t=1` {
		t.Errorf("RateLimit %q", got)
	}
}

// SetHeaders again on the same header replaces its own items, keeps
// other members (an sf-string holding a comma or a semicolon, a token,
// members spread over two lines) in order, and takes the later
// Retry-After.
func TestSetHeadersKeepsOtherMembers(t *testing.T) {
	m, err := httplimit.New(limit.MustNew(1, 3, limit.WithName("mine")))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Add("RateLimit", `"a,b;c";r=1`)
	h.Add("RateLimit", ` tok;r=2 ,"q\"m";r=3`)
	h.Set("Retry-After", "7")
	d := limit.Decision{Limit: 1, Burst: 3, Remaining: 0, Policy: "mine", NextAfter: time.Second, RetryAfter: 2 * time.Second}
	m.SetHeaders(h, d)
	d.Remaining, d.RetryAfter = 1, 9*time.Second
	m.SetHeaders(h, d)
	want := `"a,b;c";r=1, tok;r=2, "q\"m";r=3, "mine";r=1;t=1`
	if got := h.Values("RateLimit"); len(got) != 1 || got[0] != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != `"mine";q=3;w=3` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := h.Get("Retry-After"); got != "9" {
		t.Errorf("Retry-After %q, want 9 (the later of 7, 2 and 9)", got)
	}
}
