package grudge_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit77TickerSubMsPeriodUnused: with a Ticker, a Period in (0, 1ms)
// is accepted (stop 48) and, as RotatorConfig.Period says, unused: the
// fake clock moving by hours rotates nothing, each Tick rotates once,
// Rotations counts the ticks, and a snapshot of the native rotator
// restores into itself (the header's Period is the stand-in, read back
// unchanged). Period 0 and 1ms behave the same; a negative one is refused.
func TestAudit77TickerSubMsPeriodUnused(t *testing.T) {
	for _, p := range []time.Duration{0, 1, 500 * time.Microsecond, time.Millisecond - 1, time.Millisecond} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			clk := grudgetest.NewFakeClock()
			tk := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch:      grudge.Config{Levels: 3, CellsPerLevel: 256, Hi: 1e9, Clock: clk},
				Generations: 2, Period: p, Ticker: tk,
			})
			if err != nil {
				t.Fatalf("NewRotator(Ticker, Period %v): %v; want accepted", p, err)
			}
			defer r.Close()
			r.Update([]byte("k"), 3)
			clk.Advance(5 * time.Hour)
			if got := r.Query([]byte("k")); got != 3 {
				t.Fatalf("after 5h of clock and no tick, Query = %v, want 3 (the ticks alone rotate)", got)
			}
			if n := r.Rotations(); n != 0 {
				t.Fatalf("Rotations = %d with no tick, want 0", n)
			}
			snap, err := r.Native().MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Native().UnmarshalBinary(snap); err != nil {
				t.Fatalf("self-restore: %v", err)
			}
			var buf bytes.Buffer
			if _, err := r.Native().WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 2; i++ {
				tk.Tick()
				if n := r.Rotations(); n != int64(i) {
					t.Fatalf("Rotations = %d after %d ticks", n, i)
				}
			}
			if got := r.Query([]byte("k")); got != 0 {
				t.Fatalf("after 2 ticks with 2 generations, Query = %v, want 0", got)
			}
			t.Logf("Period %v: Native().Config().Period = %v", p, r.Native().Config().Period)
		})
	}
	if _, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: -1, Ticker: grudgetest.NewFakeTicker()}); err == nil {
		t.Fatal("Period -1 with a Ticker accepted; want an error")
	}
}
