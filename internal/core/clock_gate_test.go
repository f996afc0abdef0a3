package core

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
)

// gateSim drives a tickGate as the gated Timebase.NowMillis does, on a
// simulated runtime clock (ns) and counter (ticks(ns)), and checks every
// reading: never ahead of the runtime clock's millisecond, and behind it
// only by the gate's early bias (a reading in the last 1% of a
// millisecond may still be given that millisecond) or, with skewed
// counters, by at most one millisecond.
type gateSim struct {
	t     *testing.T
	g     tickGate
	hw    int64 // the high-water mark: the largest millisecond read
	reads int   // runtime clock reads
}

// now is one gated reading at runtime clock ns with the counter at tick.
func (s *gateSim) now(ns int64, tick uint64) int64 {
	if s.g.within(tick) {
		return s.hw
	}
	s.reads++
	s.hw = max(s.hw, ns/1e6)
	s.g.refreshed(tick, tick+100, ns)
	return s.hw
}

func (s *gateSim) check(ns, got int64, slack int64) {
	s.t.Helper()
	if got > ns/1e6 {
		s.t.Fatalf("at %d ns the gate gave ms %d: ahead of the clock's %d", ns, got, ns/1e6)
	}
	if lag := ns - (got+1)*1e6; lag > slack {
		s.t.Fatalf("at %d ns the gate gave ms %d: %d ns after that millisecond ended (slack %d)", ns, got, lag, slack)
	}
}

// TestTickGate: a counter at 3 ticks/ns, readings every 0 to 300 µs over
// 2 s: the rate is learned after 10 ms, readings are never ahead and at
// most 1% of a millisecond late, and the runtime clock is read about once
// per millisecond once the rate is known.
func TestTickGate(t *testing.T) {
	s := &gateSim{t: t}
	r := rand.New(rand.NewPCG(1, 2))
	ns := int64(5e9) + 123_456
	ticks := func(ns int64) uint64 { return uint64(ns)*3 + 77 }
	n := 0
	for end := ns + 2e9; ns < end; ns += r.Int64N(300_000) {
		got := s.now(ns, ticks(ns))
		s.check(ns, got, 1e6/100+1000)
		n++
	}
	if s.g.perMs.Load() == 0 {
		t.Fatal("the rate was never learned")
	}
	if want := 0.99 * 3e6; float64(s.g.perMs.Load()) < want*0.999 || float64(s.g.perMs.Load()) > 3e6 {
		t.Errorf("learned %d ticks/ms; want about %.0f (3e6 biased 1%% low)", s.g.perMs.Load(), want)
	}
	// 2 s of readings: at most about 2000 milliseconds, plus the learning.
	if s.reads > 2200 {
		t.Errorf("%d runtime clock reads for %d readings over 2 s; want about one per millisecond", s.reads, n)
	}
	t.Logf("%d readings, %d runtime clock reads, %d ticks/ms", n, s.reads, s.g.perMs.Load())
}

// TestTickGateCounterJumps: a counter that jumps back by a second, or
// forward, or runs on two CPUs 0.4 ms apart, never makes a reading ahead
// of the clock nor more than a millisecond late, and the gate recovers.
func TestTickGateCounterJumps(t *testing.T) {
	s := &gateSim{t: t}
	ns := int64(1e9)
	off := uint64(1e12)
	ticks := func(ns int64) uint64 { return uint64(ns)*2 + off }
	for ; ns < 1.05e9; ns += 7_000 { // learn
		s.check(ns, s.now(ns, ticks(ns)), 1e6/100+1000)
	}
	reads := s.reads
	for end := ns + 50e6; ns < end; ns += 7_000 {
		s.check(ns, s.now(ns, ticks(ns)), 1e6/100+1000)
	}
	steady := s.reads - reads // about 2 per ms: one, and the last 1% of each
	// Back by one second of ticks.
	off -= 2e9
	reads = s.reads
	for end := ns + 50e6; ns < end; ns += 7_000 {
		s.check(ns, s.now(ns, ticks(ns)), 1e6/100+1000)
	}
	if s.reads-reads > steady+5 {
		t.Errorf("after the counter went back: %d clock reads in 50 ms, %d before; the gate did not recover", s.reads-reads, steady)
	}
	// Forward by an hour.
	off += 2 * 3600e9
	for end := ns + 50e6; ns < end; ns += 7_000 {
		s.check(ns, s.now(ns, ticks(ns)), 1e6/100+1000)
	}
	// Two CPUs whose counters differ by 0.4 ms: late by at most 1 ms.
	for end := ns + 50e6; ns < end; ns += 3_000 {
		tk := ticks(ns)
		if (ns/3_000)%2 == 0 {
			tk += 2 * 400_000
		}
		s.check(ns, s.now(ns, tk), 1e6+1000)
	}
}

// TestTickGateLearning: samples whose counter bracket is wide (a
// preempted read) are not used, and nothing passes the gate before the
// rate is known.
func TestTickGateLearning(t *testing.T) {
	var g tickGate
	for i := range 100 {
		ns := int64(1e9) + int64(i)*1e6
		tk := uint64(ns) * 3
		g.refreshed(tk, tk+maxBracket+1, ns)
		if g.within(tk + 1) {
			t.Fatal("the gate passed a reading before the rate was known")
		}
	}
	if g.perMs.Load() != 0 {
		t.Fatalf("learned %d ticks/ms from preempted samples", g.perMs.Load())
	}
	g.refreshed(3e9, 3e9+10, 1e9)
	g.refreshed(3e9+30e6, 3e9+30e6+10, 1e9+5e6) // 5 ms: too soon
	if g.perMs.Load() != 0 {
		t.Fatal("learned a rate from samples 5 ms apart")
	}
	g.refreshed(3e9+60e6, 3e9+60e6+10, 1e9+20e6)
	if p := g.perMs.Load(); p < 2.9e6 || p > 3e6 {
		t.Fatalf("learned %d ticks/ms; want 3e6 less 1%%", p)
	}
}

// TestGatedTimebase: the default clock's Timebase, gated or not (it is
// gated where hw.FastTicks), reads within a millisecond of the runtime's
// clock, never ahead of it, over 30 ms of readings.
func TestGatedTimebase(t *testing.T) {
	tb := NewTimebase(nil)
	if tb.gated != hw.FastTicks() {
		t.Fatalf("gated = %v on a machine with FastTicks = %v", tb.gated, hw.FastTicks())
	}
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
		before := hw.Nanotime() / 1e6
		got := tb.NowMillis()
		after := hw.Nanotime() / 1e6
		if got > after || got < before-1 {
			t.Fatalf("NowMillis = %d between runtime clock readings %d and %d", got, before, after)
		}
	}
	t.Logf("gated %v, %d ticks/ms learned", tb.gated, tb.gate.perMs.Load())
	if a := testing.AllocsPerRun(1000, func() { _ = tb.NowMillis() }); a != 0 {
		t.Fatalf("NowMillis allocates %v per call", a)
	}
}
