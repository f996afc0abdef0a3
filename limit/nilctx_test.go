package limit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/sketch"
)

// TestWaitNilContextPanicsNamingIt: WaitN (a Limiter's and a Tier's)
// panics on a nil context with a message that names it, having debited
// nothing, whatever n (above the burst too).
func TestWaitNilContextPanicsNamingIt(t *testing.T) {
	l, err := New(Every(time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l.Tier("t", Every(time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Limiter.Wait", func() { _ = l.Wait(nilCtx, "k") }},
		{"Limiter.WaitN", func() { _ = l.WaitN(nilCtx, "k", 2) }},
		{"Limiter.WaitN above the burst", func() { _ = l.WaitN(nilCtx, "k", 3) }},
		{"Tier.Wait", func() { _ = tier.Wait(nilCtx, "k") }},
	} {
		if msg := testpanic.Message(c.f); !strings.Contains(msg, "nil Context") {
			t.Errorf("%s(nil ctx): panic %q; want one naming the nil Context", c.name, msg)
		}
	}
	if got := l.Tokens("k"); got != 2 {
		t.Errorf("Tokens after the panics = %v; want 2 (nothing debited)", got)
	}
}

// TestTypedNilClockRefused: WithClock given a typed nil (a nil
// *limittest-style clock) is a *ConfigError naming Clock, for every
// engine and for Inf, not a nil dereference in New.
func TestTypedNilClockRefused(t *testing.T) {
	var c *nilClock
	for _, opts := range [][]Option{{WithClock(c)}, {WithClock(c), WithEngine(CountMin)}, {WithClock(c), WithEngine(Buckets)}} {
		for _, lim := range []Limit{10, Inf} {
			var err error
			msg := testpanic.Message(func() { _, err = New(lim, 2, opts...) })
			var ce *sketch.ConfigError
			if msg != "" || !errors.As(err, &ce) || ce.Field != "Clock" {
				t.Errorf("New(%v, typed-nil clock): panic %q, err %v; want a *ConfigError naming Clock", lim, msg, err)
			}
		}
	}
}

// nilClock is a clock whose methods read their receiver.
type nilClock struct{ ms int64 }

func (c *nilClock) NowMillis() int64 { return c.ms }
