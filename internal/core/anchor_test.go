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

// TestFarMillisSaturates: past 292 years convert counts on the wall
// clock; past about 292 million years UnixMilli wraps, and the reading
// saturates instead (audit 84: time.Unix(1<<62, 0) converted to a reading
// in the past, so an At time that far ahead was not capped at the
// clock's reading). The reading saturates, not the difference (audit
// 146: an anchor at MinInt64 ms read a time near MaxInt64 ms as -1).
func TestFarMillisSaturates(t *testing.T) {
	const maxI, minI = int64(1<<63 - 1), int64(-1 << 63)
	a := time.Unix(1_700_000_000, 123_456_789)
	for _, c := range []struct {
		name string
		t    time.Time
		want int64
	}{
		{"same", a, 0},
		{"1 ms later", a.Add(time.Millisecond), 1},
		{"floors the difference", time.Unix(1_700_000_001, 0), 876},
		{"before", time.Unix(1_699_999_999, 999_999_999), -124}, {"a second before", time.Unix(1_699_999_999, 0), -1124},
		{"300 years ahead", time.Unix(1_700_000_000+300*365*86400, 123_456_789), 300 * 365 * 86400 * 1000},
		{"2^62 s ahead", time.Unix(1<<62, 0), maxI},
		{"max seconds", time.Unix(maxI, 999_999_999), maxI},
		{"2^62 s before", time.Unix(-1<<62, 0), minI},
		{"min seconds", time.Unix(minI, 0), minI},
	} {
		if got := farMillis(0, c.t, a); got != c.want {
			t.Errorf("%s: farMillis = %d, want %d", c.name, got, c.want)
		}
	}
	// Anchors at the ends of the scale: the reading of a time at the
	// other end is exact where it fits.
	lo, hi := time.UnixMilli(minI+10), time.UnixMilli(maxI-1000)
	for _, c := range []struct {
		anchorMs int64
		a, t     time.Time
		want     int64
	}{
		{minI + 10, lo, hi, maxI - 1000},
		{maxI - 1000, hi, lo, minI + 10},
		{minI + 10, lo, time.Unix(maxI, 0), maxI},
		{maxI - 1000, hi, time.Unix(minI, 0), minI},
	} {
		if got := farMillis(c.anchorMs, c.t, c.a); got != c.want {
			t.Errorf("farMillis(%d, %v, %v) = %d, want %d", c.anchorMs, c.t, c.a, got, c.want)
		}
	}
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3}, {maxI, 1, maxI}, {minI, -1, minI}, {maxI, minI, -1}, {-5, maxI, maxI - 5},
	} {
		if got := addSat(c.a, c.b); got != c.want {
			t.Errorf("addSat(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
