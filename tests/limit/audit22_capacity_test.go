package limit_test

// audit22: the Buckets engine's capacity promise under concurrency
// (limit/doc.go, "Engines" and "Error side"; docs/design.md, section 8,
// "One-sided: the argument" and "Saturation and sizing"). The limiter
// says it is full through Stats().Saturation (there is no error: a
// decision never fails, and a key past capacity inherits a line's
// eviction floor, on the safe side). Checked, with 4 goroutines racing
// two to a key on a frozen clock, then after a drain, up to 5 times the
// capacity WithCapacity asked for:
//
//   - no key is ever admitted past its burst, and every key's read debt
//     is at least its true debt (what it was admitted, drained since):
//     no throttled client is forgotten, within capacity or past it;
//   - within capacity nearly every key gets its burst, fresh keys are
//     denied at most about the deny rate asked for, and Saturation says
//     so; past it (1.15 x, where about 18% of fresh keys are denied, and
//     5 x), Saturation rises above the deny rate and agrees with the
//     measured fresh-key denial rate within 25% (it is within 1% here);
//   - Stats counts every decision.

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func TestAudit22BucketsCapacityConcurrent(t *testing.T) {
	const (
		burst   = 20
		deny    = 0.01
		asked   = 2000
		workers = 4
		drainMs = 500 // 5 tokens at 10/s
	)
	clk := limittest.NewFakeClock()
	S := int64(1_700_000_000_000)
	clk.Set(S)
	l, err := limit.New(10, burst, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithCapacity(asked, deny), limit.WithSeed(2222))
	if err != nil {
		t.Fatal(err)
	}
	capKeys := l.Capacity(deny)
	if capKeys < asked {
		t.Fatalf("Capacity(%v) = %d < %d asked", deny, capKeys, asked)
	}
	total := 5 * capKeys
	keys := make([]string, total)
	for i := range keys {
		keys[i] = fmt.Sprintf("client-%d", i)
	}
	var calls atomic.Int64
	// fill: for each key in [from, to), two goroutines race up to 15
	// one-token requests each at tm; returns the admissions per key.
	fill := func(tm time.Time, from, to int, got []atomic.Int64) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w/2; i < to; i += workers / 2 {
					for range 15 {
						calls.Add(1)
						if l.AllowN(tm, keys[i], 1) {
							got[i].Add(1)
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	fresh := func(tm time.Time, n int) float64 {
		denied := 0
		for i := range n {
			if !l.PeekN(tm, fmt.Sprintf("fresh-%d", i), 1).Allowed {
				denied++
			}
		}
		return float64(denied) / float64(n)
	}
	// oneSided checks every key's read debt against its true debt.
	oneSided := func(tm time.Time, n int, truth func(i int) int64, phase string) {
		t.Helper()
		low := 0
		for i := range n {
			tk := l.TokensAt(tm, keys[i])
			if want := float64(burst - truth(i)); tk > want+1e-9 {
				if low++; low <= 5 {
					t.Errorf("%s: %s reads %v tokens; its true debt leaves %v: a throttled client forgotten", phase, keys[i], tk, want)
				}
			}
		}
		if low > 5 {
			t.Errorf("%s: %d keys read below their true debt", phase, low)
		}
	}

	// Phase 1: the capacity, on a frozen clock.
	t1 := time.UnixMilli(S)
	got1 := make([]atomic.Int64, total)
	fill(t1, 0, capKeys, got1)
	short := 0
	for i := range capKeys {
		a := got1[i].Load()
		if a > burst {
			t.Fatalf("%s admitted %d tokens on a frozen clock, burst %d", keys[i], a, burst)
		}
		if a < burst {
			short++
		}
	}
	oneSided(t1, capKeys, func(i int) int64 { return got1[i].Load() }, "at capacity")
	rate1, sat1 := fresh(t1, 20000), l.Stats().Saturation
	t.Logf("at capacity (%d keys, %d lines of 64 B): %d short of their burst, fresh denied %.4f, Saturation %.4f", capKeys, l.Sizes().Cells/64, short, rate1, sat1)
	if float64(short) > 2*deny*float64(capKeys) {
		t.Errorf("at capacity: %d of %d keys did not get their burst", short, capKeys)
	}
	if rate1 > 1.5*deny || sat1 > 1.5*deny {
		t.Errorf("at capacity: fresh keys denied %.4f, Saturation %.4f: above the %v asked", rate1, sat1, deny)
	}

	// Phase 2: 500 ms later (5 tokens drained), up to 5 x capacity, the
	// first keys asking again.
	clk.Set(S + drainMs)
	t2 := time.UnixMilli(S + drainMs)
	got2 := make([]atomic.Int64, total)
	mid := capKeys * 23 / 20 // 1.15 x capacity
	fill(t2, 0, mid, got2)
	truth2 := func(i int) int64 { return max(got1[i].Load()-drainMs/100, 0) + got2[i].Load() }
	oneSided(t2, mid, truth2, "at 1.15x capacity")
	rateH, satH := fresh(t2, 20000), l.Stats().Saturation
	t.Logf("at 1.15x capacity: fresh denied %.4f, Saturation %.4f", rateH, satH)
	if satH <= deny || math.Abs(satH-rateH) > 0.25*rateH {
		t.Errorf("at 1.15x capacity: Saturation %.4f vs measured %.4f: not saying how full it is", satH, rateH)
	}
	fill(t2, mid, total, got2)
	for i := range total {
		if a, room := got2[i].Load(), burst-max(got1[i].Load()-drainMs/100, 0); a > room {
			t.Fatalf("%s admitted %d tokens after the drain; its room was %d", keys[i], a, room)
		}
	}
	oneSided(t2, total, truth2, "at 5x capacity")
	rate2, sat2 := fresh(t2, 20000), l.Stats().Saturation
	t.Logf("at 5x capacity: fresh denied %.4f, Saturation %.4f", rate2, sat2)
	if sat2 < 10*deny || rate2 < 10*deny {
		t.Errorf("at 5x capacity: Saturation %.4f, fresh denied %.4f: not saying it is full", sat2, rate2)
	}
	if math.Abs(sat2-rate2) > 0.25*rate2 {
		t.Errorf("at 5x capacity: Saturation %.4f vs measured %.4f: beyond 25%%", sat2, rate2)
	}
	st := l.Stats()
	if int64(st.Admitted+st.Denied) != calls.Load() {
		t.Errorf("Stats: %d + %d decisions, want %d", st.Admitted, st.Denied, calls.Load())
	}
}
