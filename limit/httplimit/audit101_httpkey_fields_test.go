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

// Passing check. On a denial SetHeaders writes one Retry-After that, as
// delay-seconds, is never earlier than: the Decision's RetryAfter rounded
// up (at least 1), the RateLimit field's own t, a delay-seconds value
// already set (clamped to the largest sf-Integer), and the t of every
// listed outer item with r=0 (middleware.go, SetHeaders: "Retry-After in
// whole seconds rounded up, at least 1, so never earlier than the
// RateLimit field's t"; "on a denial, Retry-After is the latest of this
// one's, one already set (seconds or an HTTP-date) and the t of every
// listed item with r=0"). The own item carries r = Remaining and
// t = ceil(NextAfter). An HTTP-date already set is only checked to be
// kept verbatim here (its timing is TestAudit101HttpkeyFixedRetryAfterHTTPDateEarly).
func FuzzAudit101HttpkeyRetryAfterFloor(f *testing.F) {
	f.Add(int64(1), int64(1), uint16(0), "", uint8(0), int64(0), int64(0))
	f.Add(int64(999), int64(1), uint16(3), "5", uint8(1), int64(0), int64(7))
	f.Add(int64(1001), int64(1001), uint16(0), " 0002 ", uint8(2), int64(1), int64(3))
	f.Add(int64(59_999), int64(1000), uint16(0), "99999999999999999999", uint8(1), int64(0), int64(1<<40))
	f.Add(int64(1)<<62, int64(1)<<62, uint16(1), "-4", uint8(3), int64(0), int64(-1))
	f.Add(int64(10_000), int64(5_000), uint16(0), "Mon, 07 Dec 2026 04:25:58 GMT", uint8(1), int64(0), int64(12))
	f.Add(int64(2_500), int64(400), uint16(2), "1.5", uint8(2), int64(0), int64(999_999_999_999_999))
	f.Fuzz(func(t *testing.T, raMs, naMs int64, rem uint16, preRA string, outer uint8, outerR, outerT int64) {
		if raMs <= 0 || naMs < 0 {
			return
		}
		ra := time.Duration(min(raMs, int64(1)<<62/int64(time.Millisecond))) * time.Millisecond
		na := min(time.Duration(min(naMs, int64(1)<<62/int64(time.Millisecond)))*time.Millisecond, ra)
		m, err := httplimit.New(limit.MustNew(limit.Every(time.Second), 100, limit.WithSize(1, 64)))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if strings.ContainsAny(preRA, "\r\n\x00") {
			preRA = ""
		}
		if preRA != "" {
			h.Set("Retry-After", preRA)
		}
		var wantT int64 // the largest t of an outer r=0 item
		for i := range int(outer % 4) {
			// t a valid sf-Integer (15 digits; a longer one is
			// TestAudit101HttpkeyFixedListedTBeyondSFInteger)
			r, tt := (outerR+int64(i))%3, outerT%999_999_999_999_990+int64(i)
			if r < 0 {
				r = -r
			}
			item := `"outer` + strconv.Itoa(i) + `";r=` + strconv.FormatInt(r, 10)
			if tt >= 0 {
				item += ";t=" + strconv.FormatInt(tt, 10)
				if r == 0 {
					wantT = max(wantT, tt)
				}
			}
			h.Add("RateLimit", item)
		}
		d := limit.Decision{Limit: limit.Every(time.Second), Burst: 100, Policy: "default",
			Remaining: int(rem) % 101, RetryAfter: ra, NextAfter: na, ResetAfter: ra}
		m.SetHeaders(h, d)
		ceil := func(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
		own := `"default";r=` + strconv.Itoa(d.Remaining)
		if na > 0 {
			own += ";t=" + strconv.FormatInt(min(ceil(na), 999_999_999_999_999), 10)
		}
		if got := h.Values("RateLimit"); len(got) != 1 || !strings.HasSuffix(got[0], own) {
			t.Fatalf("RateLimit %q, want one line ending in %q", got, own)
		}
		lines := h.Values("Retry-After")
		if len(lines) != 1 {
			t.Fatalf("Retry-After lines %q, want one", lines)
		}
		v := strings.Trim(lines[0], " \t")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || strings.Trim(v, "0123456789") != "" {
			if _, derr := http.ParseTime(v); derr == nil && lines[0] == preRA {
				return // a date already set, kept
			}
			t.Fatalf("Retry-After %q (preset %q) is neither delay-seconds nor the date already set", lines[0], preRA)
		}
		floor := max(min(ceil(ra), 999_999_999_999_999), 1, wantT)
		if p := strings.Trim(preRA, " \t"); p != "" && strings.Trim(p, "0123456789") == "" {
			pn, perr := strconv.ParseInt(p, 10, 64)
			if perr != nil {
				pn = 999_999_999_999_999
			}
			floor = max(floor, min(pn, 999_999_999_999_999))
		}
		if n < floor {
			t.Fatalf("Retry-After %q < %d (RetryAfter %v, NextAfter %v, preset %q, outer r=0 t %d)", v, floor, ra, na, preRA, wantT)
		}
		if n > 999_999_999_999_999 {
			t.Fatalf("Retry-After %q beyond the largest sf-Integer", v)
		}
	})
}

// TestAudit101HttpkeyFixedListedTBeyondSFInteger (audit 101; fixed at
// stop 60, the text below says what was wrong; the denial's own value is
// clamped as a kept one is). Minor: reached only through an invalid
// outer field. An outer
// RateLimit item with r=0 and a t beyond the largest sf-Integer (16
// digits) makes the denial's Retry-After that number verbatim, past the
// largest Integer, while the problem+json body says 999999999999999: the
// body no longer says the header's value.
//
// Doc: middleware.go (SetHeaders, comment on the Retry-After merge):
// "one beyond the largest Integer a field holds is written as that (the
// problem+json body says the same)"; middleware.go (deny): the body's
// retryAfter is "The Retry-After field SetHeaders set"; docs/migrating.md
// (audit 64 row): "a kept Retry-After beyond the largest Integer is
// written as 999999999999999, as the body says ... the body says the
// header's value".
//
// Code: SetHeaders computes ra = max(ceilSeconds(d.RetryAfter), 1,
// listedT, exhaustedT(h)) where exhaustedT returns the outer t unclamped
// (param parses up to int64), and writes ra with FormatInt: only a kept
// value is clamped to maxSFInteger; deny clamps its reading with
// min(v, maxSFInteger).
//
// Repro: an outer handler sets RateLimit: "outer";r=0;t=1000000000000000
// and calls a WithProblemJSON middleware whose limiter denies:
// Retry-After "1000000000000000", body retryAfter 999999999999999.
func TestAudit101HttpkeyFixedListedTBeyondSFInteger(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	lim := limit.MustNew(limit.Every(time.Second), 1, limit.WithClock(clk))
	m, err := httplimit.New(lim, httplimit.WithProblemJSON(true))
	if err != nil {
		t.Fatal(err)
	}
	inner := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit", `"outer";r=0;t=1000000000000000`)
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
	rec := serve()
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429", rec.Code)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.RetryAfter == nil {
		t.Fatalf("problem body %q: %v", rec.Body.String(), err)
	}
	ra := rec.Header().Get("Retry-After")
	if ra != strconv.FormatInt(*p.RetryAfter, 10) || len(strings.Trim(ra, " ")) > 15 {
		t.Errorf("Retry-After %q, problem body retryAfter %d: want the same value, at most the largest sf-Integer 999999999999999 (SetHeaders: \"one beyond the largest Integer a field holds is written as that (the problem+json body says the same)\")", ra, *p.RetryAfter)
	}
}
