package sketch_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
)

// a43CountClock counts every reading (NowMillis and Now).
type a43CountClock struct {
	ms    atomic.Int64
	reads atomic.Int64
}

func (c *a43CountClock) NowMillis() int64 { c.reads.Add(1); return c.ms.Load() }
func (c *a43CountClock) Now() time.Time {
	c.reads.Add(1)
	return time.UnixMilli(c.ms.Load())
}

func a43Counter(t *testing.T, c *a43CountClock, fail *[]string) func(string, func()) {
	return func(name string, f func()) {
		f() // warm (first use may build state)
		before := c.reads.Load()
		f()
		if n := c.reads.Load() - before; n > 1 {
			*fail = append(*fail, name+": "+strconv.FormatInt(n, 10)+" reads")
		}
	}
}

// sketch/doc.go, "Guarantees": "Every operation ... reads the clock once
// ... These hold for Sketch, rotator.Rotator, ... and the readings built
// on them (packages limit and meter)". The operations that keep it.
func TestAudit43ClockReadOncePerOperation(t *testing.T) {
	c := &a43CountClock{}
	c.ms.Store(1_000_000)
	var fail []string
	count := a43Counter(t, c, &fail)
	s, _ := sketch.New(sketch.Config{Hi: 100, Decay: decay.Linear(1), Clock: c, Levels: 2, CellsPerLevel: 64})
	count("Sketch.Update", func() { s.UpdateString("k", 1) })
	count("Sketch.Query", func() { s.QueryString("k") })
	count("Sketch.TryUpdate", func() { s.TryUpdateString("k", 1, 50) })
	count("Sketch.UpdateAndQuery", func() { s.UpdateAndQueryString("k", 1) })
	r, _ := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, Decay: decay.Linear(1), Clock: c, Levels: 2, CellsPerLevel: 64}, Period: time.Minute, Generations: 3})
	count("Rotator.Update", func() { r.UpdateString("k", 1) })
	count("Rotator.Query", func() { r.QueryString("k") })
	count("Rotator.TryUpdate", func() { r.TryUpdateString("k", 1, 50) })
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithClock(c), limit.WithEngine(e))
		count(e.String()+" Limiter.Allow", func() { l.Allow("k") })
		count(e.String()+" Limiter.AllowN", func() { l.AllowN(time.UnixMilli(1_000_000), "k", 1) })
		count(e.String()+" Limiter.DecideN", func() { l.DecideN(time.UnixMilli(1_000_000), "k", 1) })
	}
	rt, _ := meter.NewRate(time.Second, meter.WithClock(c))
	count("Rate.Observe", func() { rt.Observe("k") })
	count("Rate.PerSecond", func() { rt.PerSecond("k") })
	nv, _ := meter.NewNovelty(time.Second, meter.WithClock(c))
	count("Novelty.Contains", func() { nv.Contains("k") })
	in, _ := meter.NewInflight(0, meter.WithClock(c))
	count("Inflight.TryAcquire", func() { in.TryAcquire("k", 10) })
	if len(fail) > 0 {
		t.Errorf("operations reading the clock more than once: %v", fail)
	}
}

// TestAudit43FixedClockReadTwice: limit's short decision forms and
// meter.Novelty.Seen of a key already seen read the clock twice, which
// sketch/doc.go's "reads the clock once" did not allow. Fixed in the doc,
// which now names them (a reading, then the time-first path that bounds
// a time ahead of the clock; two operations); this pins that they read
// it at most twice.
func TestAudit43FixedClockReadTwice(t *testing.T) {
	c := &a43CountClock{}
	c.ms.Store(1_000_000)
	var fail []string
	count := func(name string, f func()) {
		f() // warm (first use may build state)
		before := c.reads.Load()
		f()
		if n := c.reads.Load() - before; n > 2 {
			fail = append(fail, name+": "+strconv.FormatInt(n, 10)+" reads")
		}
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		l := limit.MustNew(10, 20, limit.WithClock(c), limit.WithEngine(e))
		count(e.String()+" Limiter.Decide", func() { l.Decide("k") })
		count(e.String()+" Limiter.Peek", func() { l.Peek("k") })
		count(e.String()+" Limiter.Reserve", func() { l.Reserve("k") })
		count(e.String()+" Limiter.Tokens", func() { l.Tokens("k") })
		count(e.String()+" Limiter.DecideContext", func() { _, _ = l.DecideContext(context.Background(), "k", 1) })
	}
	nv, _ := meter.NewNovelty(time.Second, meter.WithClock(c))
	count("Novelty.Seen (a seen key)", func() { nv.Seen("k") })
	if len(fail) > 0 {
		t.Errorf("sketch/doc.go, Guarantees: these read the clock more than the two reads the doc names: %v", fail)
	}
}
