package limit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// limit/reserve.go, Cancel: "nor, on the count-min, one cancelled once the
// limiter's time has moved 2^31 ms (24.8 days) or more past the
// reservation's (any call moves it, Delay and calls on other keys
// included): ... the debit stays (only debts that outlast 24.8 days meet
// this: Every(24h) with a burst of 25 or more, a monthly quota)".
// Below 2^31 ms the debit comes back; at 2^31 ms, moved by a call on
// another key, it stays.
func TestAudit56CancelAfter2p31Ms(t *testing.T) {
	const horizon = time.Duration(1<<31) * time.Millisecond
	if d := horizon.Hours() / 24; d < 24.8 || d >= 24.9 {
		t.Fatalf("2^31 ms = %.3f days, reserve.go says 24.8", d)
	}
	run := func(gap time.Duration, move func(l *limit.Limiter, c *sketchtest.FakeClock)) (admitted bool) {
		c := sketchtest.NewFakeClock()
		l, err := limit.New(limit.Every(24*time.Hour), 25, limit.WithClock(c), limit.WithEngine(limit.CountMin), limit.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		r := l.ReserveN(c.Now(), "k", 25)
		if !r.OK() || r.Delay() != 0 {
			t.Fatalf("full burst reservation: ok %v delay %v", r.OK(), r.Delay())
		}
		c.Advance(gap)
		move(l, c)
		r.Cancel()
		return l.AllowN(c.Now(), "k", 25)
	}
	moves := map[string]func(l *limit.Limiter, c *sketchtest.FakeClock){
		"Allow(other)": func(l *limit.Limiter, c *sketchtest.FakeClock) { l.Allow("other") },
		"Delay":        func(l *limit.Limiter, c *sketchtest.FakeClock) { l.Reserve("other2").Delay() },
		"none":         func(l *limit.Limiter, c *sketchtest.FakeClock) {},
	}
	for name, mv := range moves {
		if !run(horizon-time.Hour, mv) {
			t.Errorf("%s: cancel 2^31 ms - 1 h after: the debit stayed; reserve.go: given back below 24.8 days", name)
		}
	}
	for _, name := range []string{"Allow(other)"} {
		if run(horizon+time.Hour, moves[name]) {
			t.Errorf("%s: cancel 2^31 ms + 1 h after the reservation: AllowN(25) admitted, so the debit came back; reserve.go says it stays", name)
		}
	}
}

// docs/migrating.md (audits 49-51): "a configuration with several errors
// may now name a rate-independent one first (a too-large limit with
// WithGenerations(1) names Generations, not Limit)".
func TestAudit56TooLargeLimitWithGenerations1NamesGenerations(t *testing.T) {
	_, err := limit.New(1e30, 10, limit.WithGenerations(1))
	if err == nil {
		t.Fatal("limit.New(1e30, 10, WithGenerations(1)) succeeded")
	}
	if !strings.Contains(err.Error(), "Generations") || strings.Contains(err.Error(), "limit must be") {
		t.Errorf("error %q; migrating.md: names Generations, not Limit", err)
	}
	// and an Inf limit is refused alike (one check for every limit)
	if _, err := limit.New(limit.Inf, 10, limit.WithGenerations(1)); err == nil || !strings.Contains(err.Error(), "Generations") {
		t.Errorf("limit.New(Inf, 10, WithGenerations(1)): %v; migrating.md: the rate-independent options are checked for every limit", err)
	}
}

// limit/multi.go DecideKeys and docs/migrating.md (audits 49-51): on a
// tie for the least Remaining, "NextAfter 0 when a window holding the
// least is full (the least never grows)"; a Never decision naming a full
// window carries no other window's next token.
func TestAudit56MultiTieWithFullWindowNextAfter0(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		c := sketchtest.NewFakeClock()
		a, err := limit.New(1, 5, limit.WithClock(c), limit.WithEngine(eng), limit.WithSeed(1), limit.WithName("a"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := limit.New(10, 10, limit.WithClock(c), limit.WithEngine(eng), limit.WithSeed(2), limit.WithName("b"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := limit.NewMulti(a, b)
		if err != nil {
			t.Fatal(err)
		}
		now := c.Now()
		if !b.AllowN(now, "kb", 5) {
			t.Fatal("b denied 5 of 10")
		}
		d := m.DecideKeys(now, 6, "ka", "kb") // 6 > a's burst: Never
		if d.Allowed || d.Remaining != 5 {
			t.Fatalf("%v: decision %+v, want denied with Remaining 5 (a full at 5, b at 5)", eng, d)
		}
		if d.NextAfter != 0 {
			t.Errorf("%v: NextAfter %v on a tie with the full window a; multi.go: 0 when one of them is full", eng, d.NextAfter)
		}
	}
}
