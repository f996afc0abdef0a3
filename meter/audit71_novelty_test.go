package meter

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a71Base = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

var a71Ts = []time.Duration{
	time.Millisecond, time.Millisecond + 1, 1500 * time.Microsecond, 2*time.Millisecond - 1,
	2 * time.Millisecond, 3300 * time.Microsecond, 7 * time.Millisecond, time.Second + 1,
	time.Second, time.Hour, time.Hour - 1,
}

var a71Offs = []time.Duration{0, 1, 300 * time.Microsecond, 999999}

func a71Whole(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// No false negatives within T (novelty.go: "no false negatives within
// T"), and a lone mark gone by T' + 1 ms (+T'/1e6 for float32), for
// whole-ms and sub-ms T, marks and reads anywhere within their ms.
func TestAudit71NoveltyAroundT(t *testing.T) {
	for _, T := range a71Ts {
		Tw := a71Whole(T)
		for _, off := range a71Offs {
			for _, d := range []time.Duration{0, 1, T / 2, T - time.Millisecond, T - 999999, T - 1} {
				if d < 0 {
					continue
				}
				t0 := a71Base.Add(off)
				ac := sketchtest.NewFakeClock()
				ac.SetTime(t0)
				n, err := NewNovelty(T, WithSize(4, 1<<12), WithSeed(11), WithClock(ac))
				if err != nil {
					t.Fatal(err)
				}
				if n.Within() != T {
					t.Fatalf("Within() = %v, want %v", n.Within(), T)
				}
				if n.SeenAt(t0, "k") {
					t.Fatalf("T=%v: first SeenAt = true", T)
				}
				tc := t0.Add(d)
				ac.SetTime(tc)
				if !n.ContainsAt(tc, "k") {
					t.Errorf("T=%v off=%v: ContainsAt(mark+%v) = false, want true (no false negatives within T)", T, off, d)
				}
				if !n.SeenAt(tc, "k") {
					t.Errorf("T=%v off=%v: SeenAt(mark+%v) = false, want true (no false negatives within T)", T, off, d)
				}
				// refreshed at tc: gone by tc + T' + 1 ms (+ float32's hair)
				late := tc.Add(Tw + time.Millisecond + Tw/1000000 + 1)
				ac.SetTime(late)
				if n.ContainsAt(late, "k") {
					t.Errorf("T=%v (T'=%v) off=%v: refreshed mark still contained %v after the refresh", T, Tw, off, late.Sub(tc))
				}
				if n.SeenAt(late, "k") {
					t.Errorf("T=%v off=%v: SeenAt %v after the refresh = true, want new", T, off, late.Sub(tc))
				}
			}
		}
	}
}

// Seen is exact under contention: of N goroutines racing Seen on a key
// not seen within T, exactly one is told new; also for a key whose mark
// just expired, at sub-ms T, at several GOMAXPROCS.
func TestAudit71NoveltySeenExactRace(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, T := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, time.Second + 1} {
			ac := sketchtest.NewFakeClock()
			ac.SetTime(a71Base)
			n, err := NewNovelty(T, WithSize(4, 1<<10), WithSeed(5), WithClock(ac), WithPeriodWindows(1))
			if err != nil {
				t.Fatal(err)
			}
			at := a71Base
			for round := 0; round < 20; round++ {
				const G = 8
				var news atomic.Int32
				var wg sync.WaitGroup
				for g := 0; g < G; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k := 0; k < 4; k++ {
							if !n.SeenAt(at, fmt.Sprintf("key%d", k)) {
								news.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if got := news.Load(); got != 4 {
					t.Fatalf("T=%v round %d: %d of %d racing Seen told new over 4 fresh keys, want exactly 4", T, round, got, 4*G)
				}
				at = at.Add(a71Whole(T) + 2*time.Millisecond + 1)
				ac.SetTime(at)
			}
		}
	})
}

// Snapshot round trip keeps marks within T (downtime 0 and within T),
// for sub-ms T; Within survives.
func TestAudit71NoveltySnapshotRoundTrip(t *testing.T) {
	for _, T := range []time.Duration{1500 * time.Microsecond, 2*time.Millisecond - 1, 3 * time.Millisecond, time.Second + 1} {
		ac := sketchtest.NewFakeClock()
		ac.SetTime(a71Base.Add(999999))
		n, err := NewNovelty(T, WithSize(4, 1<<10), WithSeed(5), WithClock(ac))
		if err != nil {
			t.Fatal(err)
		}
		t0 := ac.Now()
		n.SeenAt(t0, "k")
		var buf bytes.Buffer
		if _, err := n.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		for _, down := range []time.Duration{0, 1, T - time.Millisecond, T - 1} {
			if down < 0 {
				continue
			}
			bc := sketchtest.NewFakeClock()
			bc.SetTime(t0.Add(down))
			m, err := NewNovelty(T, WithSize(4, 1<<10), WithSeed(5), WithClock(bc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
				t.Fatalf("T=%v: ReadFrom: %v", T, err)
			}
			if !m.ContainsAt(t0.Add(down), "k") {
				t.Errorf("T=%v: restored %v after the mark: ContainsAt false, want true (ReadFrom: seen until T after its mark, downtime counted)", T, down)
			}
			if m.Within() != T {
				t.Errorf("Within %v", m.Within())
			}
			late := t0.Add(a71Whole(T) + 2*time.Millisecond)
			bc.SetTime(late)
			if m.ContainsAt(late, "k") {
				t.Errorf("T=%v: restored mark still contained %v after it", T, late.Sub(t0))
			}
		}
		// A snapshot of another T is refused (or at least does not panic).
		other, _ := NewNovelty(a71Whole(T)+time.Millisecond, WithSize(4, 1<<10), WithSeed(5), WithClock(ac))
		if _, err := other.ReadFrom(bytes.NewReader(buf.Bytes())); err == nil {
			t.Errorf("T=%v snapshot restored into a Novelty of %v without error", T, other.Within())
		}
	}
}
