package limit_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit42SaturationSaysFull: past its capacity each engine's
// Saturation reads near 1 and agrees with the measured fresh-key denial
// rate; while filling, it rises monotonically with the measured rate
// (Stats.Saturation: "the estimated probability that a fresh key ...
// asking for one token now is denied").
func TestAudit42SaturationSaysFull(t *testing.T) {
	testsize.Serial(t)
	for _, c := range []struct {
		name string
		opts []limit.Option
	}{
		{"buckets", []limit.Option{limit.WithCapacity(2_000, 0.01)}},
		{"count-min", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithCapacity(2_000, 0.01)}},
	} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(3)}, c.opts...)...)
		now := clk.Now()
		filled, prev := 0, -1.0
		for _, n := range []int{1_000, 2_000, 4_000, 8_000, 16_000, 64_000} {
			audit42FillFrom(l, now, filled, n)
			filled = n
			sat := l.Stats().Saturation
			fresh := audit42Fresh(l, now, fmt.Sprintf("f%d-", n), 20_000)
			t.Logf("%s: %d keys at full debt: Saturation %.4f, measured %.4f", c.name, n, sat, fresh)
			if sat < prev-0.01 {
				t.Errorf("%s: Saturation fell from %.4f to %.4f as keys were added", c.name, prev, sat)
			}
			prev = sat
			if d := sat - fresh; d > 0.05 || d < -0.05 {
				t.Errorf("%s at %d keys: Saturation %.4f against %.4f measured", c.name, n, sat, fresh)
			}
		}
		if prev < 0.99 {
			t.Errorf("%s at 32x capacity: Saturation %.4f, want near 1", c.name, prev)
		}
	}
}

func audit42FillFrom(l *limit.Limiter, now time.Time, from, to int) {
	for i := from; i < to; i++ {
		l.AllowN(now, fmt.Sprintf("held%d", i), 20)
	}
}

// TestAudit42ThrottledSurvivesFloodAndRotation: clients driven to
// MaxDebt (40 tokens at 10/s, 4 s of drain) are then flooded, every
// 100 ms, by thousands of new keys each at full debt, 100x the engine's
// capacity over the run; the count-min rotates every 100 ms (its
// shortest Period). A throttled client's debt must never read below its
// true debt (the one-sided rule, limit/doc.go "Error side"; "Rotation
// and amnesty": never amnestied), so it is denied one token until its
// own debt is at most burst - 1.
func TestAudit42ThrottledSurvivesFloodAndRotation(t *testing.T) {
	testsize.Serial(t)
	for _, c := range []struct {
		name string
		opts []limit.Option
	}{
		{"buckets", []limit.Option{limit.WithCapacity(200, 0.01)}},
		{"count-min min period", []limit.Option{limit.WithSize(3, 256), limit.WithPeriod(4 * time.Second)}},
		{"count-min 3 gens", []limit.Option{limit.WithSize(3, 256), limit.WithGenerations(3), limit.WithPeriod(2 * time.Second)}},
		{"count-min cu", []limit.Option{limit.WithSize(3, 256), limit.WithConservativeUpdate(true), limit.WithPeriod(4 * time.Second)}},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, c.opts...)...)
			t0 := clk.Now()
			const victims = 8
			for v := range victims {
				k := fmt.Sprintf("victim%d", v)
				if !l.AllowN(t0, k, 20) {
					t.Fatalf("%s: %s's first burst denied", c.name, k)
				}
				r := l.ReserveN(t0, k, 20) // queue to MaxDebt 40
				if !r.OK() {
					t.Fatalf("%s: %s's reservation to MaxDebt refused", c.name, k)
				}
			}
			flood := 0
			for step := 1; step <= 50; step++ {
				clk.Advance(100 * time.Millisecond)
				now := clk.Now()
				for range 400 {
					l.AllowN(now, fmt.Sprintf("flood%d", flood), 20)
					flood++
				}
				el := now.Sub(t0)
				truth := 40 - float64(el.Milliseconds())/100 // tokens of debt
				for v := range victims {
					k := fmt.Sprintf("victim%d", v)
					debt := 20 - l.TokensAt(now, k)
					if debt < truth-1e-9 {
						t.Fatalf("%s seed %d: at +%v %s reads %.3f tokens of debt, below its own %.3f (Stats %+v)", c.name, seed, el, k, debt, truth, l.Stats())
					}
					if truth > 19 && l.PeekN(now, k, 1).Allowed {
						t.Fatalf("%s seed %d: at +%v %s with %.1f tokens of its own debt was admitted", c.name, seed, el, k, truth)
					}
				}
			}
			st := l.Stats()
			fresh := audit42Fresh(l, clk.Now(), "fresh", 20_000)
			t.Logf("%s seed %d: %d flood keys; Stats %+v; fresh one-token denials measured %.4f", c.name, seed, flood, st, fresh)
			if d := st.Saturation - fresh; d > 0.05 || d < -0.05 {
				t.Errorf("%s seed %d: after the flood Saturation %.4f against %.4f measured", c.name, seed, st.Saturation, fresh)
			}
		}
	}
}

// TestAudit42ConcurrentFloodStatsSnapshot: while goroutines flood a small
// engine with new keys at full debt (frozen clock), others read Stats and
// take snapshots. Throttled victims (at MaxDebt) are denied throughout,
// Stats never panics or reads outside [0, 1], its counts add up at the
// end, and every snapshot restores with each victim still at a debt of
// at least 40 tokens (WriteTo under traffic: "every key's restored debt
// is at least its debt when its cells were read"). Run at GOMAXPROCS 1,
// 2, 4, 8 (and under -race).
func TestAudit42ConcurrentFloodStatsSnapshot(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []limit.Option
	}{
		{"buckets", []limit.Option{limit.WithCapacity(200, 0.01)}},
		{"count-min", []limit.Option{limit.WithSize(3, 256)}},
	} {
		sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(11)}, c.opts...)...)
			now := clk.Now()
			const victims = 6
			for v := range victims {
				k := fmt.Sprintf("victim%d", v)
				l.AllowN(now, k, 20)
				l.ReserveN(now, k, 20)
			}
			var wg sync.WaitGroup
			var admitted, denied atomic.Uint64
			var bad atomic.Value
			const floods, per = 3, 3000
			for g := range floods {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						if l.AllowN(now, fmt.Sprintf("f%d-%d", g, i), 20) {
							admitted.Add(1)
						} else {
							denied.Add(1)
						}
						if i%50 == 0 {
							k := fmt.Sprintf("victim%d", i%victims)
							if l.PeekN(now, k, 1).Allowed {
								bad.Store(fmt.Sprintf("%s admitted during the flood", k))
							}
						}
					}
				}()
			}
			var snaps [][]byte
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					st := l.Stats()
					if !(st.Saturation >= 0 && st.Saturation <= 1) {
						bad.Store(fmt.Sprintf("Saturation %v", st.Saturation))
					}
					var b bytes.Buffer
					if _, err := l.WriteTo(&b); err != nil {
						bad.Store(err.Error())
					}
					snaps = append(snaps, b.Bytes())
				}
			}()
			wg.Wait()
			if v := bad.Load(); v != nil {
				t.Fatalf("%s: %v", c.name, v)
			}
			st := l.Stats()
			// 12 victim calls (AllowN + ReserveN) plus the flood's.
			if st.Admitted+st.Denied != 2*victims+floods*per || st.Admitted != admitted.Load()+2*victims {
				t.Errorf("%s: Stats counts %d admitted, %d denied; callers saw %d and %d (+%d victims)", c.name, st.Admitted, st.Denied, admitted.Load(), denied.Load(), 2*victims)
			}
			for i, s := range snaps {
				r := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk)}, c.opts...)...)
				if _, err := r.ReadFrom(bytes.NewReader(s)); err != nil {
					t.Fatalf("%s: snapshot %d: %v", c.name, i, err)
				}
				for v := range victims {
					k := fmt.Sprintf("victim%d", v)
					if d := 20 - r.TokensAt(now, k); d < 40 {
						t.Fatalf("%s: snapshot %d restores %s at %v tokens of debt, had 40", c.name, i, k, d)
					}
				}
			}
			t.Logf("%s: %d admitted, %d denied of the flood; Saturation %.4f", c.name, admitted.Load(), denied.Load(), st.Saturation)
		})
	}
}
