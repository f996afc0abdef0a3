package tests

// Audit 3 (docs): the promises README.md makes with numbers and code,
// checked against the code. Every limiter runs on a frozen fake clock,
// so nothing here depends on timing.

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit3MiB = 1 << 20

// README.md: `l := limit.MustNew(10, 20) // 10 per second per key, bursts
// of 20`, `l.Allow(clientIP) // zero allocations`; "Its default memory
// (6.1 MiB) ..." and "`limit.New` runs on a bucketed table wherever it is
// exact".
func TestAudit3DocsReadmeLimiter(t *testing.T) {
	l := limit.MustNew(10, 20)
	if got := l.Engine(); got != limit.Buckets {
		t.Errorf("limit.MustNew(10, 20).Engine() = %v, want Buckets (README: bucketed table wherever it is exact)", got)
	}
	if mib := float64(l.Sizes().Total) / audit3MiB; math.Abs(mib-6.1) > 0.05 {
		t.Errorf("default limiter holds %.3f MiB, README says 6.1 MiB", mib)
	}
	if a := testing.AllocsPerRun(200, func() { l.Allow("203.0.113.7") }); a != 0 {
		t.Errorf("Allow allocates %v per call, README says zero allocations", a)
	}

	clk := sketchtest.NewFakeClock()
	lf := limit.MustNew(10, 20, limit.WithClock(clk))
	admitted := 0
	for range 25 {
		if lf.Allow("198.51.100.1") {
			admitted++
		}
	}
	if admitted != 20 {
		t.Errorf("MustNew(10, 20) admitted %d of 25 at one instant, want the burst of 20", admitted)
	}
	clk.Advance(time.Second)
	admitted = 0
	for range 25 {
		if lf.Allow("198.51.100.1") {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("one second later: admitted %d, want 10 (10 per second)", admitted)
	}
}

// README.md's table: "keys at their limit | fresh keys denied at most |
// Buckets (limit.Suggest) | count-min (2 generations)", the figures as
// printed, to their last printed digit.
func TestAudit3DocsReadmeCapacityTable(t *testing.T) {
	rows := []struct {
		keys            int
		deny            float64
		bucketsMiB, tol float64 // Buckets column
		countMinMiB, cm float64 // count-min column (2 generations)
	}{
		{100_000, 0.01, 0.49, 0.005, 14.6, 0.05},
		{1_000_000, 0.01, 4.9, 0.05, 146, 0.5},
		{1_000_000, 0.001, 5.1, 0.05, 223, 0.5},
		{10_000_000, 0.01, 49, 0.5, 1.4 * 1024, 0.05 * 1024}, // 1.4 GiB
	}
	for _, r := range rows {
		s, err := limit.Suggest(r.keys, r.deny)
		if err != nil {
			t.Fatalf("Suggest(%d, %v): %v", r.keys, r.deny, err)
		}
		if got := float64(s.Buckets.Bytes) / audit3MiB; math.Abs(got-r.bucketsMiB) > r.tol {
			t.Errorf("Suggest(%d, %v).Buckets = %.3f MiB, README says %v MiB", r.keys, r.deny, got, r.bucketsMiB)
		}
		if s.CountMin.Generations != 2 {
			t.Errorf("Suggest(%d, %v).CountMin.Generations = %d, README's column is for 2", r.keys, r.deny, s.CountMin.Generations)
		}
		if got := float64(s.CountMin.Bytes) / audit3MiB; math.Abs(got-r.countMinMiB) > r.cm {
			t.Errorf("Suggest(%d, %v).CountMin = %.1f MiB, README says %v MiB", r.keys, r.deny, got, r.countMinMiB)
		}
	}
}

// README.md's rotator snippet (with a fake clock added to Config so the
// test is deterministic): Linear(10) "drains 10 per second",
// TryUpdateString(clientIP, 1, 20) "admit while the debt stays within 20".
func TestAudit3DocsReadmeRotatorSnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{
		Sketch: sketch.Config{
			Decay:  decay.Linear(10),
			Hi:     100,
			Hasher: sketch.SipHash(),
			Seed:   sketch.RandomSeed(),
			Clock:  clk,
		},
		Period: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	serve := func() int {
		n := 0
		for range 30 {
			if r.TryUpdateString("203.0.113.7", 1, 20) {
				n++
			}
		}
		return n
	}
	if n := serve(); n != 20 {
		t.Errorf("admitted %d of 30 at one instant, want 20 (debt within 20)", n)
	}
	clk.Advance(time.Second)
	if n := serve(); n != 10 {
		t.Errorf("one second later admitted %d, want 10 (drains 10 per second)", n)
	}
}

// README.md's middleware snippet: httplimit.Wrap(l, mux,
// httplimit.WithProblemJSON(true)): "429 with Retry-After and the IETF
// RateLimit-Policy / RateLimit fields".
func TestAudit3DocsReadmeMiddlewareSnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	h := httplimit.Wrap(l, mux, httplimit.WithProblemJSON(true))
	var w *httptest.ResponseRecorder
	for i := range 21 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if i < 20 && w.Code != http.StatusOK {
			t.Fatalf("request %d: %d, want 200 within the burst", i, w.Code)
		}
	}
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("21st request: %d, want 429", w.Code)
	}
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", got)
	}
	if w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
		t.Errorf("429 without Retry-After or RateLimit: %v", w.Header())
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"default";q=20;w=2`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
}
