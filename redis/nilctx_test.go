package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// TestNilContextPanicsNamingIt: every method that takes a context panics
// on a nil one with a message that names it, before any round trip (the
// client points at a port nothing listens on) and before the deny cache.
func TestNilContextPanicsNamingIt(t *testing.T) {
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = gc.Close() })
	sk, err := NewGoRedis(gc, Config{Name: "nilctx", Hi: 10, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "nilctx", Limit: PerSecond(1, 1), ServerCheck: CheckSkip, DenyCacheCells: 64})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Sketch.Update", func() { _ = sk.Update(nilCtx, "k", 1) }},
		{"Sketch.UpdateAndQuery", func() { _, _ = sk.UpdateAndQuery(nilCtx, "k", 1) }},
		{"Sketch.Query", func() { _, _ = sk.Query(nilCtx, "k") }},
		{"Sketch.TryUpdate", func() { _, _ = sk.TryUpdate(nilCtx, "k", 1, 5) }},
		{"Sketch.Check", func() { _ = sk.Check(nilCtx) }},
		{"Limiter.Allow", func() { _, _ = l.Allow(nilCtx, "k") }},
		{"Limiter.AllowN(0)", func() { _, _ = l.AllowN(nilCtx, "k", 0) }},
		{"Limiter.DecideContext", func() { _, _ = l.DecideContext(nilCtx, "k", 1) }},
	} {
		if msg := testpanic.Message(c.f); !strings.Contains(msg, "nil Context") {
			t.Errorf("%s(nil ctx): panic %q; want one naming the nil Context", c.name, msg)
		}
	}
}

// TestTypedNilClockRefused: a typed-nil Config.Clock or LimiterConfig.Clock
// (a nil *sketchtest.FakeClock) is ErrInvalidConfig from the constructors,
// not "no Clock" and not a nil dereference at the first reading.
func TestTypedNilClockRefused(t *testing.T) {
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = gc.Close() })
	var c *sketchtest.FakeClock
	var err error
	if msg := testpanic.Message(func() { _, err = NewGoRedis(gc, Config{Name: "tnc", Hi: 1, Clock: c}) }); msg != "" || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Clock") {
		t.Errorf("NewGoRedis(typed-nil Clock): panic %q, err %v; want ErrInvalidConfig naming Clock", msg, err)
	}
	if msg := testpanic.Message(func() {
		_, err = NewLimiterGoRedis(gc, LimiterConfig{Name: "tnc", Limit: PerSecond(1, 1), ServerCheck: CheckSkip, Clock: c})
	}); msg != "" || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Clock") {
		t.Errorf("NewLimiterGoRedis(typed-nil Clock): panic %q, err %v; want ErrInvalidConfig naming Clock", msg, err)
	}
}
