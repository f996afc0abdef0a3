package grudge_test

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit62TickerRotatorSnapshot: a grudge Rotator (3 generations,
// Exponential(0.5), a FakeTicker) saved through Native().WriteTo:
//   - a tick before any write N of the encode makes it fail with an error
//     matching sketch.ErrTakeAgain (docs/snapshots.md: "If the set is
//     promoted during the encode (a Period ends, or a grudge Ticker
//     ticks) ... WriteTo fails with an error saying to take the snapshot
//     again"), and the next call succeeds;
//   - an encode during which the fake clock moves 40 ms forward (or an
//     hour back) and k is updated, restored into the same Rotator after
//     an hour more, reads k at least at its exact decayed sum through two
//     ticks (the tick rotations promote the initial generations, which
//     hold every update).
func TestAudit62TickerRotatorSnapshot(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	mk := func() (*grudge.Rotator, *grudgetest.FakeClock, *grudgetest.FakeTicker) {
		c := grudgetest.NewFakeClock()
		c.Set(t0)
		tk := grudgetest.NewFakeTicker()
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 1024, Decay: grudge.Exponential(0.5), Hi: 1e9, Clock: c},
			Generations: 3,
			Ticker:      tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r, c, tk
	}
	for N := 1; N <= 10; N++ { // write 11, the sum, comes after the check
		r, c, tk := mk()
		r.Update([]byte("k"), 10)
		hw := &testhook.Writer{N: N, Hook: tk.Tick}
		_, err := r.Native().WriteTo(hw)
		if !errors.Is(err, sketch.ErrTakeAgain) {
			t.Errorf("a tick before write %d of the encode: WriteTo = %v; want an error matching sketch.ErrTakeAgain", N, err)
		}
		if _, err := r.Native().WriteTo(&bytes.Buffer{}); err != nil {
			t.Errorf("the next WriteTo after a refused one: %v", err)
		}
		_ = c
	}
	for _, move := range []time.Duration{40 * time.Millisecond, -time.Hour} {
		for N := 1; N <= 11; N++ {
			r, c, tk := mk()
			c.Set(t0.Add(100 * time.Millisecond))
			r.Update([]byte("k"), 10)
			S := t0.Add(200 * time.Millisecond)
			c.Set(S)
			at := S
			extra := false
			hw := &testhook.Writer{N: N, Hook: func() {
				c.Set(S.Add(move))
				if move > 0 {
					at = S.Add(move)
				}
				r.Update([]byte("k"), 5)
				extra = N <= 2 // in the primary and every later generation
			}}
			if _, err := r.Native().WriteTo(hw); err != nil {
				t.Fatalf("move %v N=%d: WriteTo: %v", move, N, err)
			}
			// restore into the same rotator an hour after the instant
			c.Set(S.Add(time.Hour))
			if _, err := r.Native().ReadFrom(bytes.NewReader(hw.Buf.Bytes())); err != nil {
				t.Fatalf("ReadFrom: %v", err)
			}
			now := S.Add(time.Hour)
			for step := 0; step < 3; step++ {
				c.Set(now)
				truth := 10 * math.Exp(-0.5*now.Sub(t0.Add(100*time.Millisecond)).Seconds())
				if extra && step == 0 || N <= 5 && step > 0 {
					truth += 5 * math.Exp(-0.5*now.Sub(at).Seconds())
				}
				if got := r.Query([]byte("k")); got < truth*(1-1e-6) {
					t.Errorf("move %v N=%d after %d ticks: Query(k) = %v, below the exact %v", move, N, step, got, truth)
				}
				if step < 2 {
					tk.Tick()
				}
				now = now.Add(10 * time.Millisecond)
			}
		}
	}
}
