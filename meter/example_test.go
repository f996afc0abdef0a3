package meter_test

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Events per second per key: 50 events/s for 10 windows reads 50.
func ExampleRate() {
	clk := sketchtest.NewFakeClock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk))
	for range 500 {
		clk.Advance(20 * time.Millisecond)
		r.Observe("api-key-1")
	}
	fmt.Printf("%.0f %.0f\n", r.PerSecond("api-key-1"), r.PerSecond("api-key-2"))
	// Output: 50 0
}

// Connection limits: at most 2 in flight per client; a refused
// TryAcquire (nil) answers 503. Release is idempotent.
func ExampleInflight() {
	in, _ := meter.NewInflight(0)
	a := in.TryAcquire("10.0.0.1", 2)
	b := in.TryAcquire("10.0.0.1", 2)
	c := in.TryAcquire("10.0.0.1", 2)
	fmt.Println(a != nil, b != nil, c != nil, in.Count("10.0.0.1"))
	a.Release()
	a.Release()
	fmt.Println(in.Count("10.0.0.1"), in.TryAcquire("10.0.0.1", 2) != nil)
	// Output:
	// true true false 2
	// 1 true
}

// Streaming dedup: a message id is "seen" for 10 minutes after its latest
// delivery (every sighting refreshes the mark), then forgotten.
func ExampleNovelty() {
	clk := sketchtest.NewFakeClock()
	n, _ := meter.NewNovelty(10*time.Minute, meter.WithClock(clk))
	fmt.Println(n.Seen("msg-1"), n.Seen("msg-1"))
	clk.Advance(9 * time.Minute)
	fmt.Println(n.Contains("msg-1"))
	clk.Advance(11 * time.Minute)
	fmt.Println(n.Seen("msg-1"))
	// Output:
	// false true
	// true
	// false
}
