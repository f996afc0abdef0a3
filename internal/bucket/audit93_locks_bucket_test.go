package bucket

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit93LocksBucketHeldOperationNeverBlocksOthers: doc.go says the
// engine is "Lock-free: 64-bit loads and CAS on the line's words, no
// lock", engine.go that it "takes no lock". An operation on a key is
// held at each of its hook points (a writer after its decision, before
// its entry's CAS; after its last header check; a reader between its
// entries and its header's second read), as a preempted goroutine
// would be; meanwhile writes and reads of the same key and of another
// key on the same two lines return, across a clock jump past 2^31 ms
// (the floors' sweep and a line move run while the operation is held).
// A minute is only the failure bound of a hung test. After the release
// the held operation returns, and the key reads at least the token
// admitted after the jump (one-sided).
func TestAudit93LocksBucketHeldOperationNeverBlocksOthers(t *testing.T) {
	cases := []struct {
		name  string
		hooks func(h func()) *testHooks
		held  func(e *Engine)
	}{
		{"beforeCAS", func(h func()) *testHooks { return &testHooks{beforeCAS: h} }, func(e *Engine) { e.TryUpdate("k", 1, 100) }},
		{"afterCheck", func(h func()) *testHooks { return &testHooks{afterCheck: h} }, func(e *Engine) { e.Update("k", 2) }},
		{"afterLoad", func(h func()) *testHooks { return &testHooks{afterLoad: h} }, func(e *Engine) { e.Query("k") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, Linear(10, 100), clk)
			e.Update("k", 5)
			reached, release := make(chan struct{}), make(chan struct{})
			var first atomic.Bool // not a sync.Once: its Do makes later callers wait
			e.setHooks(c.hooks(func() {
				if first.CompareAndSwap(false, true) {
					close(reached)
					<-release
				}
			}))
			held := make(chan struct{})
			go func() { c.held(e); close(held) }()
			<-reached
			done := make(chan struct{})
			go func() {
				defer close(done)
				if !e.TryUpdate("k", 1, 100) {
					t.Error("TryUpdate(k, 1, 100) denied at a load of 5")
				}
				e.Update("x", 3)
				if got := e.Query("k"); got < 6 {
					t.Errorf("Query(k) = %v while held; want >= 6", got)
				}
				clk.Advance((1<<31 + 10) * time.Millisecond)
				if !e.TryUpdate("k", 1, 100) {
					t.Error("TryUpdate(k, 1, 100) denied after the jump (every debt drained)")
				}
				_ = e.UpdateAndQuery("x", 1)
				_ = e.Saturation(1, 100)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("operations did not return within a minute while another was held; doc.go: \"no lock\"")
			}
			close(release)
			<-held
			e.setHooks(nil)
			if got := e.Query("k"); got < 1 {
				t.Errorf("Query(k) after the release = %v; want >= 1 (the token admitted after the jump)", got)
			}
		})
	}
}
