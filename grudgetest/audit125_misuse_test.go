package grudgetest_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit125FixedFakeClockWrapsAtInt64 (audit 125; fixed at stop 63, the text below says what was wrong): grudgetest.FakeClock wraps
// sketchtest's (grudgetest/clock.go:31), whose Advance adds with no overflow
// check: Set(time.UnixMilli(MaxInt64 - 10)) then Advance(time.Second) reads
// NowMillis -9223372036854774819 - a step forward becomes 292 million years
// back, read by every sketch as no time passing. Expected: a monotone
// (saturated) reading or a "grudgetest:" panic. Fix: saturate in
// sketch/sketchtest/clock.go:68.
func TestAudit125FixedFakeClockWrapsAtInt64(t *testing.T) {
	c := grudgetest.NewFakeClock()
	c.Set(time.UnixMilli(math.MaxInt64 - 10))
	before := c.NowMillis()
	c.Advance(time.Second)
	if got := c.NowMillis(); got < before {
		t.Errorf("Set(UnixMilli(MaxInt64-10)); Advance(1s): NowMillis = %d, below %d: wrapped backwards", got, before)
	}
}

// TestAudit125FixedZeroFakeTickerStopPanics (audit 125; fixed at stop 63, the text below says what was wrong): the zero FakeClock is
// usable (it reads the epoch), but the zero FakeTicker's Stop - which
// Rotator.Close calls - panics with the runtime's "close of nil channel"
// (grudgetest/ticker.go:40), and its Tick silently waits a second and drops
// the tick (C() is a nil channel no rotator can receive from). Expected:
// either a usable zero FakeTicker (lazily made channels) or a clear
// "grudgetest: zero FakeTicker; use NewFakeTicker" panic, as the module's
// other zero values give. Fix: make the channels lazily under t.mu, or
// check t.c == nil in Stop/Tick/C.
func TestAudit125FixedZeroFakeTickerStopPanics(t *testing.T) {
	var tk grudgetest.FakeTicker
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		tk.Stop()
	}()
	if msg != "" && !strings.HasPrefix(msg, "grudgetest:") {
		t.Errorf("zero FakeTicker.Stop: panic %q, want no panic or a clear \"grudgetest: zero FakeTicker\"", msg)
	}
}
