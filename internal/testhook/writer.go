package testhook

import (
	"bytes"
	"io"
)

// Writer passes every write to W, or to Buf when W is nil, and calls
// Hook once, just before the N-th write (N <= 1: the first). It is not
// safe for concurrent use (an encode writes from one goroutine).
type Writer struct {
	W     io.Writer
	Buf   bytes.Buffer
	N     int
	Hook  func()
	calls int
}

// Write calls Hook if this is the N-th write, then writes p on.
func (w *Writer) Write(p []byte) (int, error) {
	w.calls++
	if w.calls == max(w.N, 1) && w.Hook != nil {
		w.Hook()
	}
	if w.W == nil {
		return w.Buf.Write(p)
	}
	return w.W.Write(p)
}
