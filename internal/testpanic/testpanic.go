package testpanic

import "fmt"

// Message runs f and returns the text of its panic (fmt.Sprint of the
// recovered value, "<empty panic>" for an empty one), or "" when f
// returns normally. A runtime error's text is its message ("runtime
// error: invalid memory address or nil pointer dereference").
func Message(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
			if msg == "" {
				msg = "<empty panic>"
			}
		}
	}()
	f()
	return ""
}
