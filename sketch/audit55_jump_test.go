package sketch_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55WriteToJumpDuringEncode: during a sketch's encode (after
// its header) the clock jumps by j ms and k is written (Exponential
// decay, 16 x 4096 cells so the encode spans several writes). For j up to
// 2^24 ms WriteTo succeeds and the restored sketch, at the original's
// time, reads k at or above the original (never below the truth); past
// 2^24 ms (and past 2^31, the urgent re-base) it fails with the "take the
// snapshot again" error, or succeeds with the same guarantee (k's cells
// may have been encoded before the write).
func TestAudit55WriteToJumpDuringEncode(t *testing.T) {
	const t0 = 1_700_000_000_000
	refused := 0
	defer func() { t.Logf("%d of 24 encodes refused", refused) }()
	for _, j := range []int64{1, 1 << 20, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1 << 30, 1<<31 + 7, 1 << 33} {
		for _, at := range []int{1, 2, 3} {
			oc := sketchtest.NewFakeClock()
			oc.Set(t0)
			cfg := sketch.Config{Levels: 4, CellsPerLevel: 4096, Decay: decay.Exponential(1e-7), Hi: 1e9, Seed: 55, Clock: oc}
			o, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			o.UpdateString("k", 100)
			o.UpdateString("z", 5)
			var buf bytes.Buffer
			_, err = o.WriteTo(&testhook.Writer{W: &buf, N: at, Hook: func() {
				oc.Set(t0 + j)
				o.UpdateString("k", 100)
			}})
			if err != nil {
				if !strings.Contains(err.Error(), "take the snapshot again") {
					t.Fatalf("jump %d at write %d: WriteTo: %v", j, at, err)
				}
				refused++
				if j <= 1<<24 {
					t.Errorf("jump %d (<= 2^24) at write %d: WriteTo failed: %v", j, at, err)
				}
				continue
			}
			rc := sketchtest.NewFakeClock()
			rc.Set(t0 + j)
			cfg.Clock = rc
			r, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.UnmarshalBinary(buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			// k: its 100 written before WriteTo, decayed over the jump,
			// at least (the write during the encode may be in or out).
			if lo, got := 100*math.Exp(-1e-7*float64(j)/1000)*(1-1e-6), r.QueryString("k"); got < lo {
				t.Errorf("jump %d at write %d: restored k = %v below the pre-WriteTo mass decayed, %v", j, at, got, lo)
			}
			if got, want := r.QueryString("z"), o.QueryString("z"); got < want {
				t.Errorf("jump %d at write %d: restored z = %v below the original's %v", j, at, got, want)
			}
		}
	}
}
