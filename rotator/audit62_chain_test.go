package rotator

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit62SaveRestoreChainOracle: a random chain of 12 save/restore
// cycles of a rotator (3 generations, Period 1000 h: no promotion,
// Exponential(0.7 per hour)).
// Each cycle updates random keys at random times, then saves while the
// clock moves (forward up to 2^24 + 1000 ms, or back up to a day) before
// a random write of the encode, with a write of a fresh key there; a
// refused save (matching sketch.ErrTakeAgain, only past 2^24 ms) is
// taken again at once; the snapshot is restored into a new rotator on a
// clock up to 2 h behind or ahead of its instant. After each restore,
// every key updated before a save reads at least its exact decayed sum
// on the chain's time line (each restore behind maps the instant to the
// restore: downtime 0). Restored cells written during an encode
// (negative ages) are carried through the later saves.
func TestAudit62SaveRestoreChainOracle(t *testing.T) {
	testsize.Serial(t)
	const lambda = 0.7 / 3600 // per second: 0.7 per hour
	rng := rand.New(rand.NewSource(62))
	type up struct {
		at int64
		v  float64
	}
	refused := 0
	defer func() { t.Logf("%d saves refused and taken again", refused) }()
	for trial := 0; trial < 12; trial++ {
		c := sketchtest.NewFakeClock()
		now := a62T0
		c.Set(now)
		mk := func(c sketch.Clock) *Rotator {
			cfg := a62Cfg(c)
			cfg.Period = 1000 * time.Hour
			cfg.Sketch.CellsPerLevel = 4096
			cfg.Sketch.Decay = decay.Exponential(lambda)
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		r := mk(c)
		hist := map[string][]up{}
		for cycle := 0; cycle < 12; cycle++ {
			for i := 0; i < 20; i++ {
				now += int64(rng.Intn(5000))
				c.Set(now)
				k := fmt.Sprintf("k%d", rng.Intn(15))
				v := float64(1 + rng.Intn(9))
				r.UpdateString(k, v)
				hist[k] = append(hist[k], up{now, v})
			}
			S := now
			var move int64
			switch rng.Intn(4) {
			case 0:
				move = rng.Int63n(1 << 24)
			case 1:
				move = []int64{1<<24 - 1, 1 << 24, 1<<24 + 1, 2 * 86_400_000}[rng.Intn(4)]
			default:
				move = -rng.Int63n(86_400_000)
			}
			N := 1 + rng.Intn(11)
			hw := &testhook.Writer{N: N, Hook: func() {
				c.Set(S + move)
				r.UpdateString(fmt.Sprintf("fresh%d-%d", trial, cycle), 3)
			}}
			_, err := r.WriteTo(hw)
			snap := hw.Buf.Bytes()
			if err != nil {
				if !errors.Is(err, sketch.ErrTakeAgain) || move <= 1<<24 {
					t.Fatalf("trial %d cycle %d: move %d N %d: WriteTo = %v", trial, cycle, move, N, err)
				}
				refused++
				b, err := r.MarshalBinary()
				if err != nil {
					t.Fatalf("retake: %v", err)
				}
				snap = b
				S = c.NowMillis()
			}
			// the instant of the snapshot actually taken
			inst := int64(binaryInstant(snap))
			off := rng.Int63n(4*3_600_000) - 2*3_600_000
			c = sketchtest.NewFakeClock()
			c.Set(inst + off)
			r = mk(c)
			if _, err := r.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatalf("ReadFrom: %v", err)
			}
			if off < 0 { // the chain's line moves back by -off
				for k, ups := range hist {
					for i := range ups {
						ups[i].at += off
					}
					hist[k] = ups
				}
			}
			now = inst + off
			for _, dt := range []int64{0, 1, 60_000} {
				c.Set(now + dt)
				for k, ups := range hist {
					truth := 0.0
					for _, u := range ups {
						truth += u.v * math.Exp(-lambda*float64(now+dt-u.at)/1000)
					}
					if got := r.QueryString(k); got < truth*(1-1e-5) {
						t.Fatalf("trial %d cycle %d (move %d, N %d, off %d), %d ms after the restore: Query(%s) = %v, below the exact %v",
							trial, cycle, move, N, off, dt, k, got, truth)
					}
				}
			}
			now += 60_000
		}
	}
}
