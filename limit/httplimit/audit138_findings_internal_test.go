package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit138FixedMergedListInvalid (audit 138; fixed at stop 64, the
// text below says what was wrong): an outer layer's
// RateLimit / RateLimit-Policy value that is not an RFC 9651 List, but
// whose strings and inner lists all close, is kept and the middleware's
// item appended to it, so the field SetHeaders writes is not a List
// either and a recipient discards all of it, the middleware's own item
// included.
//
// addItem's doc (fields.go:122-124) gives the reason for dropping an old
// value: "a field not set yet is just add, and so is one whose strings
// or inner lists do not close (a recipient would discard the whole
// field, and the added item with it: RFC 9651 §4.2)", and the package
// doc (doc.go:81-83): "Stacked middlewares ... each add their items to
// the fields the outer ones set, so the answer lists every policy that
// decided it". The same discard happens for any member that is not an
// Item: RFC 9651 §4.2, "If parsing fails, the entire field value MUST be
// ignored"; with the value below no policy at all is listed.
//
// Observed: RateLimit `foo bar, "mine";r=4;t=1` (a space inside a
// member), `1.2.3, "mine";...` (not a number), `"a";r=1 junk, ...`,
// `tok;=1, ...` (an empty parameter key), `é, ...` (not ASCII): each
// fails the strict parser of audit 63 (a63ParseList).
//
// Suggested fix: in addItem (fields.go:131-135) treat an old value that
// does not parse as a List (a full RFC 9651 parse, not listMembers'
// closing check) as one that does not close: h.Set(field, add). Or, to
// keep what can be kept, drop just the members that are not Items.
func TestAudit138FixedMergedListInvalid(t *testing.T) {
	m, err := New(limit.MustNew(1, 5, limit.WithName("mine")))
	if err != nil {
		t.Fatal(err)
	}
	d := limit.Decision{Allowed: true, Limit: 1, Burst: 5, Policy: "mine", Remaining: 4, NextAfter: 400 * time.Millisecond, ResetAfter: time.Second}
	for _, old := range []string{`foo bar`, `1.2.3`, `"a";r=1 junk`, `tok;=1`, "\u00e9"} {
		for _, field := range []string{"RateLimit", "RateLimit-Policy"} {
			h := http.Header{}
			h.Set(field, old)
			m.SetHeaders(h, d)
			if _, err := a63ParseList(h.Get(field)); err != nil {
				t.Errorf("%s over %q: %q is not an RFC 9651 List (%v): a recipient discards it, %q included",
					field, old, h.Get(field), err, `"mine"`)
			}
		}
	}
}
