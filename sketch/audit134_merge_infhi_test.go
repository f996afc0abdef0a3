package sketch_test

// Audit 134: Merge and snapshots with Hi = +Inf (allowed "only with a
// decay that drains", API.md) where the law's read-back of a replica's
// lead overflows float64.
//
// Contract: API.md "no cell is ever left holding NaN or Inf";
// docs/snapshots.md "Merge" (a positive score of a replica ahead "is now
// read back to the instant by the law's inverse (b x e^(lambda x
// ahead) ...)"; "A cell clamped at Hi reads back above Hi: it is merged
// as Hi stamped ..."; "Either way the stamp is at most 2^24 ms (4.66
// hours) after the instant"), "Guarantees" ("Every score must be finite").

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit134MergeInfHiReplicaFarAhead(t *testing.T) {
	const t0 = int64(1_790_000_000_000)
	for _, tc := range []struct {
		name   string
		law    decay.Decay
		leadMs int64
	}{
		{"exp1-1000s", decay.Exponential(1), 1000_000},
		{"exp1-100s", decay.Exponential(1), 100_000},
		{"exp1e-3-4h", decay.Exponential(1e-3), 4 * 3600_000},
		{"exp1e-3-5h", decay.Exponential(1e-3), 5 * 3600_000},
		{"exp50-20s", decay.Exponential(50), 20_000},
		{"linear-1y", decay.Linear(1e9), 365 * 24 * 3600_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
			ca.Set(t0)
			cb.Set(t0 + tc.leadMs) // B's clock is ahead
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: tc.law, Hi: math.Inf(1)}
			cfg.Clock = ca
			a, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Clock = cb
			b, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a.UpdateString("x", 5)
			b.UpdateString("x", 10)
			b.UpdateString("y", 1e30)
			if err := a.Merge(b); err != nil {
				t.Fatal(err)
			}
			for _, at := range []int64{0, tc.leadMs / 2, tc.leadMs, tc.leadMs + 1000} {
				ca.Set(t0 + at)
				for _, k := range []string{"x", "y", "z"} {
					v := a.QueryString(k)
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("%s reads %v %d ms after the merge", k, v, at)
					}
				}
				// x at or above B's 10 at B's stamp ("at or above its
				// value then"; "the union's exactly from its stamp on").
				if at == tc.leadMs {
					if v := a.QueryString("x"); v < 10*(1-1e-6) {
						t.Fatalf("x reads %v at B's stamp, where B alone read 10", v)
					}
					if v := a.QueryString("y"); v < 1e30*(1-1e-6) {
						t.Errorf("y reads %v at B's stamp, where B alone read 1e30", v)
					}
				}
			}
			snap, err := a.MarshalBinary()
			if err != nil {
				t.Logf("snapshot after the merge: %v", err)
				return
			}
			cfg.Clock = ca
			r, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.UnmarshalBinary(snap); err != nil {
				t.Fatalf("the merged sketch's own snapshot is refused: %v", err)
			}
		})
	}
}

// TestAudit134RestoreInfHiLeadRecord: a record stated after the snapshot
// instant (a negative age, as WriteTo writes a credit's or a custom law's
// cell written during the encode, or a forged one, capped at 2^24 ms on
// restore) holding a score near float32's largest, under Exponential with
// Hi = +Inf, restored on clocks at, before and after T: every key reads
// finite, and at the record's stamp at or above the record ("keeps its
// lead as a stamp after now", docs/snapshots.md "Time across restarts").
func TestAudit134RestoreInfHiLeadRecord(t *testing.T) {
	const t0 = int64(1_790_000_000_000)
	for _, lambda := range []float64{1, 1e-3} {
		for _, lead := range []uint32{1000, 100_000, 1 << 24} {
			for _, score := range []float32{3e38, 1e30, 1} {
				clk := sketchtest.NewFakeClock()
				clk.Set(t0)
				cfg := sketch.Config{Levels: 1, CellsPerLevel: 4, Decay: decay.Exponential(lambda), Hi: math.Inf(1), Clock: clk}
				s, err := sketch.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				snap, err := s.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				for c := range 4 {
					o := 88 + 8*c
					binary.LittleEndian.PutUint32(snap[o:], math.Float32bits(score))
					binary.LittleEndian.PutUint32(snap[o+4:], uint32(-int32(lead)))
				}
				a88FixCRC(snap)
				for _, skew := range []int64{0, -5000, 5000, int64(lead)} {
					rc := sketchtest.NewFakeClock()
					rc.Set(t0 + skew)
					rcfg := cfg
					rcfg.Clock = rc
					r, err := sketch.New(rcfg)
					if err != nil {
						t.Fatal(err)
					}
					if err := r.UnmarshalBinary(snap); err != nil {
						t.Logf("lambda %v lead %d score %v: refused: %v", lambda, lead, score, err)
						continue
					}
					// The record's stamp: T + lead on a clock at or after
					// T (downtime counted), the restore's now + lead on a
					// clock behind T (downtime 0).
					stamp := t0 + int64(lead)
					if skew < 0 {
						stamp = t0 + skew + int64(lead)
					}
					start := t0 + skew
					for _, at := range []int64{start, (start + stamp) / 2, stamp, stamp + 1000} {
						rc.Set(max(at, start))
						v := r.QueryString("x")
						if math.IsNaN(v) || math.IsInf(v, 0) {
							t.Fatalf("lambda %v lead %d score %v skew %d: reads %v at %d", lambda, lead, score, skew, v, at-t0)
						}
						if at == stamp && stamp >= start && v < float64(score)*(1-1e-6) {
							t.Errorf("lambda %v lead %d score %v skew %d: reads %v at the record's stamp, below the record %v", lambda, lead, score, skew, v, score)
						}
					}
				}
			}
		}
	}
}

// TestAudit134MergeOverlapHugeSlackInfHi: Linear with Hi = +Inf and an
// overlap whose rate x overlap passes float32's (and float64's) range:
// API.md "no cell is ever left holding NaN or Inf"; MergeWithin's slack
// is "clamped at Hi", and Hi is +Inf here, so only the cell's own
// representation bounds it. Every key must read finite, and at or above
// what it read before the merge.
func TestAudit134MergeOverlapHugeSlackInfHi(t *testing.T) {
	for _, rate := range []float64{1, 1e30, 1e300, math.MaxFloat64} {
		for _, overlap := range []time.Duration{time.Hour, time.Duration(math.MaxInt64)} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_790_000_000_000)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: decay.Linear(rate), Hi: math.Inf(1), Clock: clk}
			a, err := sketch.New(cfg)
			if err != nil {
				t.Logf("Linear(%g): %v", rate, err)
				continue
			}
			b, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a.UpdateString("x", 3e38)
			before := a.QueryString("x")
			if err := a.Merge(b, overlap); err != nil {
				t.Fatalf("Linear(%g) overlap %v: %v", rate, overlap, err)
			}
			for _, k := range []string{"x", "cold"} {
				v := a.QueryString(k)
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("Linear(%g) overlap %v: %s reads %v after the merge", rate, overlap, k, v)
				}
			}
			if v := a.QueryString("x"); v < before {
				t.Errorf("Linear(%g) overlap %v: x reads %v after the merge, %v before", rate, overlap, v, before)
			}
			if _, err := a.MarshalBinary(); err != nil {
				t.Errorf("Linear(%g) overlap %v: snapshot after the merge: %v", rate, overlap, err)
			}
		}
	}
}
