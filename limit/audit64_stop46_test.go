package limit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/lfgrudge/grudge/sketch"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// migrating.md, Stop 46: "a rotator reservation holds its first two
// generations' receipts inline: no allocation for a Multi of up to four
// windows with the default two generations ...; `ReserveN` allocates only
// its `*Reservation`, as x/time/rate's".
func TestAudit64Stop46MultiNoAlloc(t *testing.T) {
	for nw := 1; nw <= 4; nw++ {
		for _, mixed := range []bool{false, true} {
			t.Run(fmt.Sprintf("windows=%d/mixed=%v", nw, mixed), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				var ws []*limit.Limiter
				for i := 0; i < nw; i++ {
					opts := []limit.Option{limit.WithClock(clk), limit.WithName(fmt.Sprintf("w%d", i))}
					if !mixed || i%2 == 0 {
						opts = append(opts, limit.WithEngine(limit.CountMin), limit.WithSize(4, 4096))
					}
					ws = append(ws, limit.MustNew(limit.Limit(10*(i+1)), 5*(i+1), opts...))
				}
				m, err := limit.NewMulti(ws...)
				if err != nil {
					t.Fatal(err)
				}
				keys := make([]string, 64)
				for i := range keys {
					keys[i] = fmt.Sprintf("key-%d", i)
				}
				i := 0
				ctx := context.Background()
				// admitted and (once keys are spent) denied decisions
				for _, c := range []struct {
					name string
					f    func()
				}{
					{"Allow", func() { m.Allow(keys[i%len(keys)]); i++ }},
					{"AllowN", func() { m.AllowN(clk.Now(), keys[i%len(keys)], 2); i++ }},
					{"DecideContext", func() { _, _ = m.DecideContext(ctx, keys[i%len(keys)], 1); i++ }},
					{"DecideKeys", func() { m.DecideKeys(clk.Now(), 1, keys[i%len(keys)]); i++ }},
				} {
					if a := testing.AllocsPerRun(500, c.f); a != 0 {
						t.Errorf("Multi.%s with %d windows allocated %v per call; migrating.md Stop 46: no allocation up to four windows", c.name, nw, a)
					}
					clk.Advance(137 * time.Millisecond)
				}
			})
		}
	}
}

func TestAudit64Stop46CountMinReserveOneAlloc(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin))
	i := 0
	keys := []string{"a", "b", "c", "d"}
	a := testing.AllocsPerRun(500, func() {
		r := l.ReserveN(clk.Now(), keys[i%4], 1)
		_ = r
		i++
	})
	if a != 1 {
		t.Fatalf("count-min ReserveN allocated %v per call; migrating.md Stop 46: only its *Reservation", a)
	}
	b := testing.AllocsPerRun(500, func() {
		r := l.Reserve("k")
		r.Cancel()
	})
	if b != 1 {
		t.Fatalf("count-min Reserve+Cancel allocated %v per call; want 1", b)
	}
}

type audit64HookWriter struct {
	bytes.Buffer
	calls, at int
	f         func()
}

func (w *audit64HookWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.calls == w.at && w.f != nil {
		w.f()
	}
	return w.Buffer.Write(p)
}

// Stop 46: "`sketch.ErrTakeAgain` (the same value) ... a caller of `WriteTo`
// can match it": a count-min limiter's WriteTo across a promotion.
func TestAudit64Stop46LimiterTakeAgain(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(2, 512))
	l.Allow("k")
	p := l.Period()
	w := &audit64HookWriter{at: 2, f: func() {
		clk.Advance(p)
		l.Allow("k")
	}}
	_, err := l.WriteTo(w)
	t.Logf("count-min: %v (writes %d)", err, w.calls)
	if !errors.Is(err, sketch.ErrTakeAgain) {
		t.Fatalf("count-min WriteTo across a promotion: %v; want an error matching sketch.ErrTakeAgain", err)
	}
	// Buckets: a clock jump past 2^24 ms with a write during the encode
	lb := limit.MustNew(10, 20, limit.WithClock(clk))
	lb.Allow("k")
	w = &audit64HookWriter{at: 2, f: func() {
		clk.Advance((1<<24 + 100) * time.Millisecond)
		lb.Allow("k")
	}}
	_, err = lb.WriteTo(w)
	t.Logf("buckets: %v (writes %d)", err, w.calls)
}
