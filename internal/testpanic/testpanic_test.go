package testpanic

import (
	"errors"
	"testing"
)

func TestMessage(t *testing.T) {
	for _, c := range []struct {
		f    func()
		want string
	}{
		{func() {}, ""},
		{func() { panic("x: bad") }, "x: bad"},
		{func() { panic("") }, "<empty panic>"},
		{func() { panic(errors.New("e")) }, "e"},
		{func() {
			var a []int
			_ = a[len(a)] // index 0 of an empty slice
		}, "runtime error: index out of range [0] with length 0"},
	} {
		if got := Message(c.f); got != c.want {
			t.Errorf("Message = %q; want %q", got, c.want)
		}
	}
}
