package sketch_test

// Audit 94: WriteTo's restate of a cell written during the encode whose
// read-back passes Hi now calls hiLead(0, b, lead) (commit 4c32c42 added
// the rest term for Merge). With rest 0 the record must be byte for
// byte what the rule before the change wrote: score Hi, age -a, a the
// least whole ms in (0, lead] with Undecay(b, lead-a) <= Hi (bisection,
// as before), and a read-back within Hi recorded at age 0 as it rounded
// up to float32. The records of the key's cells are read from the
// snapshot bytes (docs/snapshots.md "Format, version 1": per cell u32
// float32 score bits, u32 age at T) and checked against that rule
// computed here with the law's inverse as internal/law.Undecay states it
// (b x e^(lambda x dt) plus 2^-40 of it; b + rate x dt, one float64 up).

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a94RoundUp32(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

func TestAudit94MergeRestateRecordUnchanged(t *testing.T) {
	const hi, m = 10.0, 64
	laws := []struct {
		name    string
		d       decay.Decay
		undecay func(b float64, dt int64) float64
	}{
		{"exp1", decay.Exponential(1), func(b float64, dt int64) float64 { v := b * math.Exp(1*float64(dt)/1000); return v + v/(1<<40) }},
		{"exp0.3", decay.Exponential(0.3), func(b float64, dt int64) float64 { v := b * math.Exp(0.3*float64(dt)/1000); return v + v/(1<<40) }},
		{"lin1000", decay.Linear(1000), func(b float64, dt int64) float64 { return math.Nextafter(b+1000*float64(dt)/1000, math.Inf(1)) }},
		{"lin1", decay.Linear(1), func(b float64, dt int64) float64 { return math.Nextafter(b+1*float64(dt)/1000, math.Inf(1)) }},
	}
	hiRecords := 0
	for _, lw := range laws {
		for _, in := range []float64{2 * hi, hi, 9.99, 8, 5} {
			for _, lead := range []int64{1, 3, 500, 2000, 60_000} {
				name := fmt.Sprintf("%s/write=%v/lead=%d", lw.name, in, lead)
				co := sketchtest.NewFakeClock()
				co.Set(a93T)
				orig := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: m, Decay: lw.d, Lo: 0, Hi: hi, Seed: 7, Clock: co})
				w := &a92Hook{f: func() {
					co.Advance(time.Duration(lead) * time.Millisecond)
					orig.UpdateString("k", in)
				}}
				if _, err := orig.WriteTo(w); err != nil {
					t.Fatalf("%s: WriteTo: %v", name, err)
				}
				data := w.Bytes()
				b := float64(a94RoundUp32(min(in, hi)))
				wantScore, wantAge := float32(0), int32(0)
				if up := lw.undecay(b, lead); up <= hi {
					wantScore = a94RoundUp32(up)
				} else {
					lo, a := int64(0), lead
					for a-lo > 1 {
						mid := lo + (a-lo)/2
						if lw.undecay(b, lead-mid) <= hi {
							a = mid
						} else {
							lo = mid
						}
					}
					wantScore, wantAge = float32(hi), int32(-a)
					hiRecords++
				}
				for _, lv := range orig.QueryDetailed([]byte("k")).Levels {
					off := 88 + 8*(int(lv.Level)*m+int(lv.Index))
					score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
					age := int32(binary.LittleEndian.Uint32(data[off+4:]))
					if score != wantScore || age != wantAge {
						t.Errorf("%s: level %d: record (%v, age %d), want (%v, age %d)", name, lv.Level, score, age, wantScore, wantAge)
					}
				}
			}
		}
	}
	if hiRecords < 20 {
		t.Fatalf("only %d Hi records checked", hiRecords)
	}
}
