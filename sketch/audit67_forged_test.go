package sketch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a67Law struct {
	name string
	d    decay.Decay
}

// a67Truth is the law's own value of v after dt ms, in float64.
func a67Truth(name string, v float64, dt int64) float64 {
	x := float64(dt) / 1000
	switch name {
	case "none":
		return v
	case "exp0.7", "custom":
		return v * math.Exp(-0.7*x)
	case "exp1e-9":
		return v * math.Exp(-1e-9*x)
	case "exp50":
		return v * math.Exp(-50*x)
	case "lin2", "lin1e6":
		r := 2.0
		if name == "lin1e6" {
			r = 1e6
		}
		if v > 0 {
			return math.Max(v-r*x, 0)
		}
		return math.Min(v+r*x, 0)
	}
	panic(name)
}

var a67Laws = []a67Law{
	{"none", decay.None()},
	{"exp0.7", decay.Exponential(0.7)},
	{"exp1e-9", decay.Exponential(1e-9)},
	{"exp50", decay.Exponential(50)},
	{"lin2", decay.Linear(2)},
	{"lin1e6", decay.Linear(1e6)},
	{"custom", customExp56{0.7}},
}

// a67Forge returns s's snapshot (one cell) with its only record (v, age)
// and instant atWall, checksum fixed.
func a67Forge(t *testing.T, s *sketch.Sketch, v float32, age int32, atWall int64) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 88+8+4 {
		t.Fatalf("snapshot of %d bytes, want one cell", len(b))
	}
	le := binary.LittleEndian
	le.PutUint64(b[72:], uint64(atWall))
	le.PutUint32(b[88:], math.Float32bits(v))
	le.PutUint32(b[92:], uint32(age))
	fixCRC56(b)
	return b
}

// TestAudit67ForgedRecordsRestoreBounded: docs/snapshots.md, "Restoring"
// and "Consistency under concurrent updates": a record with a negative
// total age "is read back to now by the law as WriteTo states such a
// cell since stop 47, or keeps its lead as a stamp after now", a negative
// age capped at 2^24 ms; forged instants near the ends of int64 must not
// overflow. Over laws (None, Exponential slow/fast, Linear slow/fast,
// custom), bounds [0, 100], [-50, 100], [0, +Inf], every in-range score
// (Lo, a credit, 0, a denormal, 1, Hi/2, Hi), ages from MinInt32 to
// MaxInt32 and instants from MinInt64 to MaxInt64 on a restoring clock
// at 10^12 ms: no panic, every read in [Lo, Hi] (never NaN) at instants
// from now to 2^31 ms on; where the instant is sane and the age at least
// -2^24, never below the record's own value at the instant it maps to
// (a twin holding v from then on); and save-restore-save-restore is
// idempotent (the second snapshot's bytes are the first's, and both
// restores read the same). Out-of-range scores and NaN are refused.
func TestAudit67ForgedRecordsRestoreBounded(t *testing.T) {
	testsize.Serial(t)
	const now = int64(1_000_000_000_000)
	bounds := []struct{ lo, hi float64 }{{0, 100}, {-50, 100}, {0, math.Inf(1)}}
	ages := []int32{math.MinInt32, -(1 << 24) - 1, -(1 << 24), -(1 << 24) + 1, -86_400, -1000, -1, 0, 1, 1000, 1<<29 - 1, 1 << 29, math.MaxInt32}
	insts := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, now - 1<<40, now - 1<<30, now - 5000, now - 1, now, now + 1, now + 777, now + 1<<24, now + 1<<33, math.MaxInt64 - 1, math.MaxInt64}
	qs := []int64{0, 1, 500, 999, 1000, 86_400, 1 << 24, 1<<24 + 1, 1 << 29, 1 << 31}
	checked := 0
	for _, lw := range a67Laws {
		for _, bd := range bounds {
			if math.IsInf(bd.hi, 1) && (lw.name == "none" || lw.name == "custom") {
				continue // +Inf only with a law that drains
			}
			cfg := func(c sketch.Clock) sketch.Config {
				return sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: lw.d, Lo: bd.lo, Hi: bd.hi, Clock: c}
			}
			mk := func(at int64) (*sketch.Sketch, *sketchtest.FakeClock) {
				c := sketchtest.NewFakeClock()
				c.Set(at)
				s, err := sketch.New(cfg(c))
				if err != nil {
					t.Fatalf("%s %v: %v", lw.name, bd, err)
				}
				return s, c
			}
			base, _ := mk(now)
			hi := math.Min(bd.hi, math.MaxFloat32)
			scores := []float32{float32(bd.lo), -1, 0, math.SmallestNonzeroFloat32, 1, float32(hi / 2), float32(hi)}
			for _, v := range scores {
				if float64(v) < bd.lo {
					continue
				}
				for _, age := range ages {
					for _, inst := range insts {
						name := fmt.Sprintf("%s [%v,%v] rec (%v, %d) inst %d", lw.name, bd.lo, bd.hi, v, age, inst)
						b := a67Forge(t, base, v, age, inst)
						r, rc := mk(now)
						if err := r.UnmarshalBinary(b); err != nil {
							t.Fatalf("%s: refused: %v", name, err)
						}
						// the instant the record's value maps to
						downtime := int64(0)
						sane := inst > now-1<<41 && inst < now+1<<41
						if sane && now > inst {
							downtime = now - inst
						}
						stamp := now - int64(age) - downtime
						truthOK := sane && age >= -(1<<24)
						for _, q := range qs {
							rc.Set(now + q)
							got := r.QueryString("k")
							if !(got >= bd.lo && got <= bd.hi) {
								t.Fatalf("%s: read %v at now+%d, outside [%v, %v]", name, got, q, bd.lo, bd.hi)
							}
							if truthOK && now+q >= stamp {
								if want := a67Truth(lw.name, float64(v), now+q-stamp); got < want-1e-12*math.Abs(want) {
									t.Errorf("%s: read %v at now+%d, below the record's value %v held from its instant (%d after now)", name, got, q, want, stamp-now)
								}
							}
							checked++
						}
						// idempotence of save-restore chains at one clock
						r1, c1 := mk(now)
						if err := r1.UnmarshalBinary(b); err != nil {
							t.Fatal(err)
						}
						s1, err := r1.MarshalBinary()
						if err != nil {
							t.Fatalf("%s: re-save: %v", name, err)
						}
						r2, c2 := mk(now)
						if err := r2.UnmarshalBinary(s1); err != nil {
							t.Fatalf("%s: re-restore: %v", name, err)
						}
						s2, err := r2.MarshalBinary()
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(s1[88:96], s2[88:96]) {
							t.Errorf("%s: save-restore-save not idempotent: record % x then % x", name, s1[88:96], s2[88:96])
						}
						for _, q := range qs {
							c1.Set(now + q)
							c2.Set(now + q)
							if x, y := r1.QueryString("k"), r2.QueryString("k"); x != y {
								t.Errorf("%s: at now+%d the first restore reads %v, the second %v", name, q, x, y)
							}
						}
					}
				}
			}
			// refused: above Hi, below Lo, NaN
			for _, v := range []float32{float32(math.NaN()), float32(bd.lo) - 1} {
				r, _ := mk(now)
				if err := r.UnmarshalBinary(a67Forge(t, base, v, -5, now)); err == nil {
					t.Errorf("%s [%v,%v]: a record %v accepted", lw.name, bd.lo, bd.hi, v)
				}
			}
			if !math.IsInf(bd.hi, 1) {
				r, _ := mk(now)
				if err := r.UnmarshalBinary(a67Forge(t, base, math.Nextafter32(float32(bd.hi), math.MaxFloat32), -5, now)); err == nil {
					t.Errorf("%s [%v,%v]: a record above Hi accepted", lw.name, bd.lo, bd.hi)
				}
			}
		}
	}
	t.Logf("%d reads checked", checked)
}
