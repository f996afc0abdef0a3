package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit101HttpkeyFixedRetryAfterHTTPDateEarly (audit 101; fixed at
// stop 60, the text below says what was wrong; a kept date's seconds now
// count rounded down). A Retry-After already set as an HTTP-date is kept when it is
// up to a second EARLIER than this denial's own RetryAfter, so the client
// is told to come back before it would be admitted.
//
// Doc (limit/httplimit/middleware.go, SetHeaders): "on a denial,
// Retry-After is the latest of this one's, one already set (seconds or an
// HTTP-date) and the t of every listed item with r=0"; doc.go: "A
// denial's Retry-After is never earlier than ... a Retry-After already
// set" and "429 with Retry-After in whole seconds, RetryAfter rounded up
// (never early for the key's own debt)"; limit/decision.go: "a retry at
// t+RetryAfter is admitted and one 1 ms earlier is denied".
//
// Code (fields.go, retrySeconds): an HTTP-date is read as
// at.Unix()-time.Now().Unix(), i.e. the whole seconds of the date minus
// the whole seconds of now, dropping now's fraction f. A date
// floor(now)+10 s is read as 10, compared with ra = ceil(RetryAfter) = 10
// and kept (kept >= ra), yet it lies 10 s - f after the decision: before
// the limiter admits the key (RetryAfter = 10 s exactly).
//
// Repro: limiter Every(10s), burst 1 (fake clock); spend the token; an
// outer handler sets Retry-After to the HTTP-date floor(now)+10 s and
// calls the middleware: the denial keeps the date; a retry at that date
// (clock advanced by date-now) is denied again. (The test repeats the
// attempt, with no sleeping, until now's whole second did not change
// during the call.)
func TestAudit101HttpkeyFixedRetryAfterHTTPDateEarly(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	lim := limit.MustNew(limit.Every(10*time.Second), 1, limit.WithClock(clk))
	var last limit.Decision
	m, err := httplimit.New(lim, httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { last = d }))
	if err != nil {
		t.Fatal(err)
	}
	inner := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var date string
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if date != "" {
			w.Header().Set("Retry-After", date)
		}
		inner.ServeHTTP(w, r)
	})
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		outer.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec
	}
	if rec := serve(); rec.Code != http.StatusOK {
		t.Fatalf("first request: %d", rec.Code)
	}
	for attempt := 0; attempt < 100; attempt++ {
		t0 := time.Now()
		date = t0.Truncate(time.Second).Add(10 * time.Second).UTC().Format(http.TimeFormat)
		rec := serve()
		t1 := time.Now()
		if t1.Unix() != t0.Unix() {
			continue // now's second changed during the call: inconclusive
		}
		if rec.Code != http.StatusTooManyRequests || last.RetryAfter != 10*time.Second {
			t.Fatalf("want a denial with RetryAfter 10s; got %d %+v", rec.Code, last)
		}
		got := strings.TrimSpace(rec.Header().Get("Retry-After"))
		var wait time.Duration // the longest the client can wait, counted from the decision
		if n, err := strconv.ParseInt(got, 10, 64); err == nil {
			wait = time.Duration(n) * time.Second
		} else if at, err := http.ParseTime(got); err == nil {
			wait = at.Sub(t0) // the decision was at t0 or later
		} else {
			t.Fatalf("Retry-After %q unreadable", got)
		}
		if wait >= last.RetryAfter {
			return // not early
		}
		// Prove it: a retry at that time is denied.
		ra := last.RetryAfter
		clk.Advance(wait)
		rec2 := httptest.NewRecorder()
		inner.ServeHTTP(rec2, httptest.NewRequest("GET", "/", nil))
		t.Errorf("Retry-After %q (an HTTP-date set before, kept) is %v after the decision, earlier than its RetryAfter %v; a retry then is answered %d (want it admitted: SetHeaders says Retry-After is the latest of this one's and one already set; retrySeconds drops now's fraction of a second)",
			got, wait, ra, rec2.Code)
		return
	}
	t.Fatal("inconclusive: every attempt straddled a wall-clock second") // unreachable in practice
}
