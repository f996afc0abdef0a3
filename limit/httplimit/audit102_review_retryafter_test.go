package httplimit_test

import (
	"encoding/json"
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

// audit102Stack is an inner middleware (limiter of interval every,
// burst 1, fake clock, problem+json) behind an outer handler that sets
// the Retry-After lines in pre before calling it; the key's one token is
// already spent, so every serve is a denial.
type audit102Stack struct {
	t    *testing.T
	pre  []string
	last limit.Decision
	h    http.Handler
}

func newAudit102Stack(t *testing.T, every time.Duration, opts ...httplimit.Option) *audit102Stack {
	t.Helper()
	s := &audit102Stack{t: t}
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	lim := limit.MustNew(limit.Every(every), 1, limit.WithClock(clk))
	opts = append([]httplimit.Option{
		httplimit.WithProblemJSON(true),
		httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { s.last = d }),
	}, opts...)
	m, err := httplimit.New(lim, opts...)
	if err != nil {
		t.Fatal(err)
	}
	inner := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.pre != nil {
			w.Header()["Retry-After"] = append([]string(nil), s.pre...)
		}
		inner.ServeHTTP(w, r)
	})
	if rec := s.serve(); rec.Code != http.StatusOK {
		t.Fatalf("first request: %d", rec.Code)
	}
	return s
}

func (s *audit102Stack) serve() *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	return rec
}

// audit102Answer is a denial's Retry-After header and problem+json
// retryAfter.
type audit102Answer struct {
	header string
	body   *int64
	code   int
}

func (s *audit102Stack) deny() audit102Answer {
	s.t.Helper()
	rec := s.serve()
	if rec.Code != http.StatusTooManyRequests {
		s.t.Fatalf("want a denial; got %d", rec.Code)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		s.t.Fatalf("problem+json body %q: %v", rec.Body.String(), err)
	}
	if n := len(rec.Header().Values("Retry-After")); n != 1 {
		s.t.Fatalf("want one Retry-After line; got %q", rec.Header().Values("Retry-After"))
	}
	return audit102Answer{header: rec.Header().Get("Retry-After"), body: p.RetryAfter, code: rec.Code}
}

// audit102Instant is the instant a Retry-After value sent at sent
// denotes: sent + delay-seconds, or the HTTP-date itself.
func audit102Instant(t *testing.T, v string, sent time.Time) time.Time {
	t.Helper()
	v = strings.Trim(v, " \t")
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return sent.Add(time.Duration(n) * time.Second)
	}
	at, err := http.ParseTime(v)
	if err != nil {
		t.Fatalf("Retry-After %q unreadable", v)
	}
	return at
}

// audit102SameSecond runs try until one attempt starts and ends within
// one wall-clock second with now past its whole second (the cases the
// fix's rounding depends on); try gets the attempt's start and returns
// its end. No sleeping: an attempt that straddles a second is redone.
func audit102SameSecond(t *testing.T, try func(t0 time.Time) (t1 time.Time, done func())) {
	t.Helper()
	for attempt := 0; attempt < 200; attempt++ {
		t0 := time.Now()
		if t0.Nanosecond() == 0 {
			continue
		}
		t1, done := try(t0)
		if t1.Unix() != t0.Unix() {
			continue
		}
		done()
		return
	}
	t.Fatal("inconclusive: every attempt straddled a wall-clock second")
}

// TestAudit102ReviewFixedRetryAfterSecondsLineBeatsLaterDate (audit 102;
// fixed at stop 60, the text below says what was wrong; lines now
// compare by the instant they stand for, parseRetryAfter): (fix A,
// commit 503fb5f). Of several Retry-After lines already set, a
// delay-seconds line n and an HTTP-date line D with floor(D - now) == n
// tie (the date is now read rounded DOWN, the seconds exactly), and the
// tie goes to the first line: with the seconds line first, "n" is kept,
// though D is later than now + n by now's fraction of a second. The
// answer's Retry-After is then earlier than a Retry-After already set.
//
// Doc (middleware.go, SetHeaders): "on a denial, Retry-After is the latest
// of this one's, one already set (seconds or an HTTP-date, which stays
// only if it is no earlier than now plus this one's seconds) ..."; the
// code's own comment: "Every spelling and line of the field is one: the
// latest readable value stays if it is not earlier"; doc.go: "A denial's
// Retry-After is never earlier than ... a Retry-After already set".
//
// Code: the loop keeps the line with the largest retrySeconds(v, false)
// by n > kept; a date floor(now)+11 reads 11-1 = 10 when now is past its
// whole second, the same as "10", so the earlier "10" stays. (Before the
// fix the date read 11 and won; the rounding down, meant only for the
// kept >= ra test, now also decides between lines.)
//
// Repro: Every(1s), burst 1, token spent (RetryAfter 1 s, ra = 1); the
// outer handler sets Retry-After lines ["10", floor(now)+11 as an
// HTTP-date]. Answer: "Retry-After: 10", i.e. now+10 < floor(now)+11.
//
// Suggested fix: choose between lines by the instant each denotes (a
// date by its own time, delay-seconds as now + n, or compare a date's
// seconds rounded up against delay-seconds, preferring the date on a
// tie), and use the rounded-down seconds only for the kept >= ra test.
func TestAudit102ReviewFixedRetryAfterSecondsLineBeatsLaterDate(t *testing.T) {
	s := newAudit102Stack(t, time.Second)
	audit102SameSecond(t, func(t0 time.Time) (time.Time, func()) {
		date := t0.Truncate(time.Second).Add(11 * time.Second)
		s.pre = []string{"10", date.UTC().Format(http.TimeFormat)}
		a := s.deny()
		t1 := time.Now()
		return t1, func() {
			if s.last.RetryAfter != time.Second {
				t.Fatalf("want RetryAfter 1s; got %+v", s.last)
			}
			// The answer was sent by t1: its retry instant is at most
			// t1 + n for delay-seconds.
			if got := audit102Instant(t, a.header, t1); got.Before(date) {
				t.Errorf("Retry-After lines already set %q; answer %q (retry by %v) is earlier than the line %q (%v), by %v: SetHeaders says it is the latest of the ones already set",
					s.pre, a.header, got.Format(time.RFC3339Nano), s.pre[1], date.Format(time.RFC3339), date.Sub(got))
			}
		}
	})
}

// TestAudit102ReviewRetryAfterDateFirstTieKept (passing check): the same
// two lines with the date first keep the date (the tie goes to the
// first line), and the body's retryAfter is the date's seconds rounded
// up: the answer is not earlier than either line.
func TestAudit102ReviewRetryAfterDateFirstTieKept(t *testing.T) {
	s := newAudit102Stack(t, time.Second)
	audit102SameSecond(t, func(t0 time.Time) (time.Time, func()) {
		date := t0.Truncate(time.Second).Add(11 * time.Second)
		s.pre = []string{date.UTC().Format(http.TimeFormat), "10"}
		a := s.deny()
		t1 := time.Now()
		return t1, func() {
			if a.header != s.pre[0] {
				t.Errorf("want the date %q kept; got %q", s.pre[0], a.header)
			}
			if a.body == nil || *a.body != 11 {
				t.Errorf("body retryAfter %v; want 11 (the date's seconds rounded up)", a.body)
			}
		}
	})
}

// TestAudit102ReviewRetryAfterDateBoundary (passing check): with
// RetryAfter 10 s, a date floor(now)+10 (less than 10 s away) is
// replaced by "10", and the body says 10; a date floor(now)+11 (more
// than 10 s away) is kept, and the body says 11, its seconds rounded up:
// header and body never earlier than RetryAfter, and they agree to the
// second.
func TestAudit102ReviewRetryAfterDateBoundary(t *testing.T) {
	s := newAudit102Stack(t, 10*time.Second)
	for _, c := range []struct {
		add      time.Duration
		keep     bool
		wantBody int64
	}{{10 * time.Second, false, 10}, {11 * time.Second, true, 11}} {
		audit102SameSecond(t, func(t0 time.Time) (time.Time, func()) {
			date := t0.Truncate(time.Second).Add(c.add)
			s.pre = []string{date.UTC().Format(http.TimeFormat)}
			a := s.deny()
			t1 := time.Now()
			return t1, func() {
				if s.last.RetryAfter != 10*time.Second {
					t.Fatalf("want RetryAfter 10s; got %+v", s.last)
				}
				want := "10"
				if c.keep {
					want = s.pre[0]
				}
				if a.header != want {
					t.Errorf("date floor(now)+%v: Retry-After %q; want %q", c.add, a.header, want)
				}
				if a.body == nil || *a.body != c.wantBody {
					t.Errorf("date floor(now)+%v: body retryAfter %v; want %d", c.add, a.body, c.wantBody)
				}
				if got := audit102Instant(t, a.header, t0); got.Sub(t0) < s.last.RetryAfter {
					t.Errorf("Retry-After %q is early: %v after the decision", a.header, got.Sub(t0))
				}
			}
		})
	}
}

// TestAudit102ReviewRetryAfterPastAndFarDates (passing checks): a date in
// the past is replaced by the denial's own seconds; the latest date an
// HTTP-date can spell (year 9999, about 2.5e11 s away: below the
// 999999999999999 clamp, which a date cannot reach) is kept, and the
// body's retryAfter is its seconds rounded up (not clamped); a
// delay-seconds beyond int64 is written as 999999999999999 and the body
// says the same.
func TestAudit102ReviewRetryAfterPastAndFarDates(t *testing.T) {
	s := newAudit102Stack(t, 3*time.Second)
	s.pre = []string{"Sun, 06 Nov 1994 08:49:37 GMT"}
	if a := s.deny(); a.header != "3" || a.body == nil || *a.body != 3 {
		t.Errorf("past date: Retry-After %q, body %v; want 3 and 3", a.header, a.body)
	}
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	audit102SameSecond(t, func(t0 time.Time) (time.Time, func()) {
		s.pre = []string{far.Format(http.TimeFormat)}
		a := s.deny()
		t1 := time.Now()
		return t1, func() {
			want := far.Unix() - t0.Unix() // rounded up: now is past its second
			if a.header != s.pre[0] || a.body == nil || *a.body != want {
				t.Errorf("year-9999 date: Retry-After %q, body %v; want the date and %d", a.header, a.body, want)
			}
		}
	})
	s.pre = []string{"99999999999999999999999"}
	if a := s.deny(); a.header != "999999999999999" || a.body == nil || *a.body != 999999999999999 {
		t.Errorf("huge seconds: Retry-After %q, body %v; want 999999999999999 twice", a.header, a.body)
	}
}

// TestAudit102ReviewRetryAfterHugeListedTClamped (passing check): an
// outer RateLimit item with r=0 and a t beyond int64 makes ra the clamp:
// header and body both 999999999999999 (before the fix the header was
// 9223372036854775807, past what the body said).
func TestAudit102ReviewRetryAfterHugeListedTClamped(t *testing.T) {
	clk := limittest.NewFakeClock()
	lim := limit.MustNew(limit.Every(time.Second), 1, limit.WithClock(clk), limit.WithName("inner"))
	m, err := httplimit.New(lim, httplimit.WithProblemJSON(true), httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	inner := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		rec.Header().Set("RateLimit", `"outer";r=0;t=99999999999999999999`)
		inner.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec
	}
	serve()
	rec := serve()
	var p httplimit.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get("Retry-After"); got != "999999999999999" || p.RetryAfter == nil || *p.RetryAfter != 999999999999999 {
		t.Errorf("Retry-After %q, body %v; want 999999999999999 twice", got, p.RetryAfter)
	}
}
