package httplimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// a141Merge runs SetHeaders on a fresh copy of in, many times, and
// returns the distinct outputs (every field, every key spelling).
func a141Merge(t *testing.T, in http.Header, d limit.Decision, runs int) map[string]int {
	t.Helper()
	l := limit.MustNew(1, 5, limit.WithName("in"))
	m, err := httplimit.New(l, httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range runs {
		h := in.Clone()
		m.SetHeaders(h, d)
		var b strings.Builder
		if err := h.WriteSubset(&b, nil); err != nil { // sorted by key
			t.Fatal(err)
		}
		seen[b.String()]++
	}
	return seen
}

var a141Deny = limit.Decision{Limit: 1, Burst: 5, Policy: "in", RetryAfter: 1500 * time.Millisecond, NextAfter: time.Second, ResetAfter: 5 * time.Second}

// Same input, same bytes: an outer layer's fields under their canonical
// key, several lines, plus one other spelling each (taken after the
// canonical lines), merged 300 times, give one output.
func TestAudit141MergeDeterministicOneSpelling(t *testing.T) {
	in := http.Header{
		"Ratelimit":             {`"a";r=0;t=4`, `"b";r=3`},
		"ratelimit":             {`"c";r=1;t=2`},
		"Ratelimit-Policy":      {`"a";q=1;w=4`},
		"RATELIMIT-POLICY":      {`"b";q=9;w=9`, `"c";q=2;w=2`},
		"Retry-After":           {"3"},
		"retry-after":           {"Wed, 21 Oct 2015 07:28:00 GMT"},
		"X-Ratelimit-Remaining": {"4"},
		"x-ratelimit-remaining": {" 2 "},
		"X-RateLimit-Limit":     {"10"},
	}
	for _, d := range []limit.Decision{a141Deny, {Allowed: true, Limit: 1, Burst: 5, Policy: "in", Remaining: 4, NextAfter: time.Second, ResetAfter: time.Second}} {
		seen := a141Merge(t, in, d, 300)
		if len(seen) != 1 {
			t.Errorf("allowed=%v: %d distinct outputs: %q", d.Allowed, len(seen), seen)
		}
		for out := range seen {
			// The fields the middleware merges end under their canonical
			// key (on an admission Retry-After is not its business: an
			// outer layer's lines stay as they were set).
			if strings.Contains(out, "ratelimit:") || strings.Contains(out, "RATELIMIT") || strings.Contains(out, "x-ratelimit") ||
				!d.Allowed && strings.Contains(out, "retry-after") {
				t.Errorf("a non-canonical spelling survived:\n%s", out)
			}
			if !d.Allowed && !strings.Contains(out, "Ratelimit: \"a\";r=0;t=4, \"b\";r=3, \"c\";r=1;t=2, \"in\";r=0;t=1\r\n") {
				t.Errorf("merged RateLimit:\n%s", out)
			}
			if !d.Allowed && !strings.Contains(out, "Retry-After: 4\r\n") {
				t.Errorf("Retry-After not the listed r=0 item's t=4:\n%s", out)
			}
		}
	}
}

// TestAudit141FixedMergeOrderFollowsMapIteration (audit 141; fixed at
// stop 65, the text below says what was wrong; fieldLines now takes the
// other spellings in sorted key order): with two spellings of a field
// other than the canonical one
// (an outer layer writing h["ratelimit"] and another h["RATELIMIT"]),
// the merged List's member order follows Go's map iteration order, so
// the same input gives different bytes from run to run.
//
// The brief of this audit asks for "same input, same bytes"; fields.go's
// fieldLines doc says the lines are "the canonical key's first, then
// those set under another spelling", which it takes in map order
// (fields.go:156, `for k, vs := range h`). Observed: up to four distinct
// RateLimit / RateLimit-Policy values over 200 runs of one input. Fix:
// collect the other spellings' keys, sort them (slices.Sorted), then
// append in that order.
func TestAudit141FixedMergeOrderFollowsMapIteration(t *testing.T) {
	in := http.Header{
		"ratelimit":        {`"a";r=1`},
		"RATELIMIT":        {`"b";r=2`},
		"ratelimit-policy": {`"a";q=1;w=1`},
		"RateLimit-policy": {`"b";q=2;w=2`},
	}
	seen := a141Merge(t, in, a141Deny, 300)
	if len(seen) != 1 {
		var outs []string
		for o, n := range seen {
			outs = append(outs, strconv.Itoa(n)+"x: "+strings.ReplaceAll(o, "\r\n", " | "))
		}
		t.Errorf("one input merged 300 times gave %d distinct outputs:\n%s", len(seen), strings.Join(outs, "\n"))
	}
}

// TestAudit141FixedMergeKeepsOuterItemsByMapOrder (audit 141; fixed at
// stop 65, the text below says what was wrong; now one RateLimit line and
// one Retry-After line, the same in every run): the same map-order
// dependence decided whether an outer layer's items
// survive at all: an sf-string split over two lines of two spellings
// closes when they are joined one way round and not the other, so the
// merged RateLimit either keeps the outer member or (an unclosed String:
// the whole old field dropped, fields.go:137) holds only this
// middleware's item, and the outer item's t=9 (r=0) then binds
// Retry-After (9) or not (2). Same input, two answers. SetHeaders'
// doc: "Retry-After is the latest of this one's, one already set ...
// and the t of every listed item with r=0"; which items are listed
// follows map order. Observed: "Ratelimit: \"in\";r=0;t=1" with
// Retry-After 2, or "\"outer, x\";r=0;t=9, \"in\";r=0;t=1" with
// Retry-After 9. Fix: fieldLines (fields.go:154) takes the other
// spellings in sorted key order.
func TestAudit141FixedMergeKeepsOuterItemsByMapOrder(t *testing.T) {
	in := http.Header{
		"ratelimit": {`"outer`},
		"RATELIMIT": {`x";r=0;t=9`},
	}
	seen := map[string]int{}
	for out := range a141Merge(t, in, a141Deny, 300) {
		for _, line := range strings.Split(out, "\r\n") {
			if strings.HasPrefix(line, "Ratelimit: ") || strings.HasPrefix(line, "Retry-After: ") {
				seen[line]++
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("one input gave %d distinct RateLimit / Retry-After lines (want one of each): %q", len(seen), seen)
	}
}
