package core

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
	"github.com/lfgrudge/grudge/internal/testchild"
)

// fracClock is a clock with Now whose readings carry a sub-millisecond
// fraction, NowMillis being Now().UnixMilli().
type fracClock struct{ ns int64 }

func (c *fracClock) NowMillis() int64 { return c.Now().UnixMilli() }
func (c *fracClock) Now() time.Time   { return time.Unix(0, c.ns) }

// TestAnchorConvertsToItsMillisecond: whatever the fraction a Timebase is
// built at, a time.Time converts to the millisecond it falls in, after
// the anchor and before it (audit 50: an anchor inside its millisecond
// made a t with a smaller fraction convert one millisecond early).
func TestAnchorConvertsToItsMillisecond(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 1))
	for range 2000 {
		c := &fracClock{ns: 1e15 + r.Int64N(1e9)}
		tb := NewTimebase(c)
		for range 50 {
			at := time.Unix(0, c.ns+r.Int64N(2e9)-1e9)
			if got, want := tb.convert(at), at.UnixMilli(); got != want {
				t.Fatalf("built at %v: convert(%v) = %d, want its Unix millisecond %d", c.Now(), at, got, want)
			}
		}
	}
}

// TestAnchorSystemClockNeverEarly: on the default clock a time.Now()
// read between two readings of the runtime's clock converts to at least
// the first (never early); it is later than the second only within the
// narrow bracket of the anchor's two reads (anchorOf), rarely. Under an
// emulator (make test-arm64) the bracket is wider and the rate of late
// conversions is not checked.
func TestAnchorSystemClockNeverEarly(t *testing.T) {
	late, n := 0, 0
	for range 20000 {
		tb := NewTimebase(nil)
		for range 4 {
			before := hw.Nanotime() / 1e6
			now := time.Now()
			after := hw.Nanotime() / 1e6
			got := tb.convert(now)
			if got < before {
				t.Fatalf("convert(time.Now()) = %d, before the runtime clock's %d read just before it", got, before)
			}
			if got > after {
				late++
			}
			n++
		}
	}
	if late*100 > n && !testchild.Emulated() {
		t.Errorf("convert(time.Now()) was late %d times in %d", late, n)
	}
}
