package httplimit

import (
	"net/http"
	"strings"
	"testing"
)

// addItem on any field value already there: it never panics, the field
// ends with the added item, holds no member naming the middleware's own
// policy but that one, and keeps every other member that is an Item or
// an Inner List whole, in order (listMembers of the result is the old
// members less its own and those sfMember refuses, then the added one;
// an old value whose sf-strings do not close is dropped).
func FuzzAddItem(f *testing.F) {
	for _, s := range []string{``, `"a";r=1`, `"a,b";r=1, tok`, `"mine";r=2, x`, `"\"`, `",`, `;,;`, " \t,\"mine\"", `"mine"x;r=1`} {
		f.Add(s)
	}
	own := []policy{{name: "mine", quoted: `"mine"`}}
	const add = `"mine";r=1;t=1`
	f.Fuzz(func(t *testing.T, old string) {
		h := http.Header{}
		h.Set("RateLimit", old)
		addItem(h, "RateLimit", own, add)
		got := h.Get("RateLimit")
		if !strings.HasSuffix(got, add) {
			t.Fatalf("%q -> %q: does not end with the added item", old, got)
		}
		var want []string
		members, ok := listMembers(old)
		for _, m := range members {
			if ok && bareItem(m) != `"mine"` && sfMember(m) { // audit 138: a non-Item member is dropped
				want = append(want, m)
			}
		}
		want = append(want, add)
		gm, gok := listMembers(got)
		if !gok || strings.Join(gm, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("%q -> %q: members %q, want %q", old, got, gm, want)
		}
	})
}
