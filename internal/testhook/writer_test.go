package testhook

import (
	"bytes"
	"testing"
)

// The hook runs once, before the N-th write and not after, and every
// write reaches W (or Buf when W is nil).
func TestWriter(t *testing.T) {
	for _, c := range []struct{ n, at int }{{0, 1}, {1, 1}, {2, 2}, {3, 3}, {9, 0}} {
		var buf bytes.Buffer
		calls, seen := 0, -1
		w := &Writer{W: &buf, N: c.n, Hook: func() { calls++; seen = buf.Len() }}
		for _, s := range []string{"a", "b", "c"} {
			if n, err := w.Write([]byte(s)); n != 1 || err != nil {
				t.Fatalf("N=%d: Write = %d, %v", c.n, n, err)
			}
		}
		if buf.String() != "abc" {
			t.Errorf("N=%d: W got %q", c.n, buf.String())
		}
		wantCalls := 0
		if c.at > 0 {
			wantCalls = 1
		}
		if calls != wantCalls || (c.at > 0 && seen != c.at-1) {
			t.Errorf("N=%d: hook ran %d times with %d bytes written before; want %d times before write %d", c.n, calls, seen, wantCalls, c.at)
		}
		d := &Writer{N: c.n}
		if n, err := d.Write([]byte("xy")); n != 2 || err != nil || d.Buf.String() != "xy" {
			t.Errorf("N=%d: nil W: Write = %d, %v; Buf %q", c.n, n, err, d.Buf.String())
		}
	}
}
