package snapshot

import "testing"

// TestIsStray: a stray of base is base + ".tmp-" + digits (os.CreateTemp's
// "*"), nothing else: not another path's final file or temporary file
// whose name starts with base + ".tmp-", not base itself.
func TestIsStray(t *testing.T) {
	for _, c := range []struct {
		name, base string
		want       bool
	}{
		{"a.tmp-123", "a", true},
		{"a.tmp-0", "a", true},
		{"a.tmp-", "a", false},
		{"a", "a", false},
		{"a.tmp-x", "a", false},
		{"a.tmp-x.tmp-123", "a", false}, // path "a.tmp-x"'s temporary file
		{"a.tmp-x.tmp-123", "a.tmp-x", true},
		{"a.tmp-12a", "a", false},
		{"ab.tmp-1", "a", false},
		{"state[1].snap.tmp-42", "state[1].snap", true},
	} {
		if got := isStray(c.name, c.base); got != c.want {
			t.Errorf("isStray(%q, %q) = %v; want %v", c.name, c.base, got, c.want)
		}
	}
}
