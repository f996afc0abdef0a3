package sketch_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit84coreFarWrap returns a time about 73 billion years before the
// Unix epoch whose UnixMilli wraps around int64 to exactly ms.
func audit84coreFarWrap(ms int64) time.Time {
	// sec*1000 == ms (mod 2^64) for sec = (ms - 125*2^64)/1000, since
	// 125*2^64 is divisible by 1000 when ms is.
	const twoTo64Div1000Times125 = 2305843009213693952 // 125 * 2^64 / 1000
	return time.Unix(ms/1000-twoTo64Div1000Times125, 0)
}

// TestAudit84CoreFixedFarFutureAt: sketch's package doc: "an At time ahead of
// the clock counts as the clock's reading". A time.Time more than about
// 292 million years ahead (time.Unix(1<<62, 0), the largest time.Time)
// counted, until audit 84's fix, as the sketch's last used time (no decay,
// no time passing): its UnixMilli wrapped. The conversion now saturates.
func TestAudit84CoreFixedFarFutureAt(t *testing.T) {
	far := []time.Time{
		time.Unix(1<<62, 0),
		time.Unix(9_300_000_000_000_000, 0),
		time.Unix(math.MaxInt64-62135596800, 999_999_999), // the largest time.Time
	}
	for _, tt := range far {
		for _, impl := range []string{"lockfree", "reference"} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			cfg := sketch.Config{Levels: 1, CellsPerLevel: 64, Hi: 1000, Decay: decay.Linear(1), Clock: clk}
			var s audit84coreAt
			if impl == "lockfree" {
				s, _ = sketch.New(cfg)
			} else {
				s, _ = reference.New(cfg)
			}
			s.UpdateString("k", 100)
			clk.Advance(5 * time.Second)
			if got := s.QueryAt(tt, "k"); got != 95 {
				t.Errorf("%s: QueryAt(%v) = %v after 5 s of Linear(1) from 100; want 95 (a t ahead of the clock counts as the clock's reading)", impl, tt, got)
			}
			if got := s.UpdateAndQueryAt(tt, "k", 0); got != 95 {
				t.Errorf("%s: UpdateAndQueryAt(%v, 0) = %v; want 95", impl, tt, got)
			}
		}
	}
}

// TestAudit84CoreFixedFarPastAt: sketch's package doc: "a clock step back
// counts as zero elapsed time, never as growth", and core's At rule: a t
// earlier than a time the sketch has already used counts as that time. A
// time tens of billions of years in the past whose UnixMilli wraps to a
// reading between the last used time and the clock counted, until audit
// 84's fix, as that later reading: the key decayed though the time given
// is before every time used.
func TestAudit84CoreFixedFarPastAt(t *testing.T) {
	for _, impl := range []string{"lockfree", "reference"} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		cfg := sketch.Config{Levels: 1, CellsPerLevel: 64, Hi: 1000, Decay: decay.Linear(1), Clock: clk}
		var s audit84coreAt
		if impl == "lockfree" {
			s, _ = sketch.New(cfg)
		} else {
			s, _ = reference.New(cfg)
		}
		s.UpdateString("k", 100) // at 1,000,000
		clk.Advance(5 * time.Second)
		past := audit84coreFarWrap(1_003_000)
		if !past.Before(time.Unix(-1e12, 0)) {
			t.Fatalf("%v is not in the far past", past)
		}
		if got := s.QueryAt(past, "k"); got != 100 {
			t.Errorf("%s: QueryAt(%v) = %v; want 100 (a time before every time used counts as the last one: no decay)", impl, past, got)
		}
	}
}

// TestAudit84CoreAtKinds: the ordinary kinds of explicit time mean what they
// say, on a fake clock and on the default clock.
func TestAudit84CoreAtKinds(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, _ := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1000, Decay: decay.Linear(1), Clock: clk})
	// Before creation: counts as creation.
	s.UpdateAt(time.UnixMilli(0), "a", 10)
	if got := s.QueryString("a"); got != 10 {
		t.Fatalf("a written before creation reads %v at creation; want 10", got)
	}
	clk.Advance(3 * time.Second)
	// A stored wall time 1 s ago, then the clock's own Now, then a sub-ms fraction.
	s.UpdateAt(time.UnixMilli(clk.NowMillis()-1000), "b", 10)
	if got := s.QueryAt(clk.Now(), "b"); got != 9 {
		t.Fatalf("b written 1 s ago reads %v; want 9", got)
	}
	if got := s.QueryString("a"); got != 7 {
		t.Fatalf("a reads %v after 3 s; want 7", got)
	}
	// The same instant in another zone.
	if got := s.QueryAt(clk.Now().In(time.FixedZone("z", -7*3600)), "a"); got != 7 {
		t.Fatalf("a at Now() in another zone reads %v; want 7", got)
	}
	// Backwards: a time before the last used one is no decay and no growth.
	if got := s.QueryAt(time.UnixMilli(clk.NowMillis()-2500), "a"); got != 7 {
		t.Fatalf("a at a time 2.5 s ago reads %v; want 7", got)
	}
	clk.Advance(-2 * time.Second)
	if got := s.QueryString("a"); got != 7 {
		t.Fatalf("a after the clock stepped back reads %v; want 7", got)
	}
	clk.Advance(4 * time.Second) // 2 s past the high-water mark
	if got := s.QueryString("a"); got != 5 {
		t.Fatalf("a reads %v 2 s past the mark; want 5", got)
	}

	// Default clock: time.Now() (monotonic), the same without it, and one
	// an hour ahead (capped at the clock).
	d, _ := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1)})
	d.UpdateAt(time.Now(), "x", 1000)
	d.UpdateAt(time.Now().Round(0), "x", 1000)
	if got := d.QueryAt(time.Now().Add(time.Hour), "x"); got < 1999 || got > 2000 {
		t.Fatalf("x an hour ahead of the default clock reads %v; want about 2000 (capped at now)", got)
	}
	if got := d.QueryAt(time.Now().Add(-time.Hour), "x"); got < 1999 || got > 2000 {
		t.Fatalf("x an hour before reads %v; want about 2000", got)
	}
}
