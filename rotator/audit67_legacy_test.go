package rotator

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a67Cfg: a slow law and a long Period, so that a legacy encode across a
// clock jump of hours promotes nothing.
func a67Cfg(c sketch.Clock) Config {
	return Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 1024, Decay: decay.Exponential(1e-5), Hi: 1e12, Seed: 7, Clock: c},
		Generations: 3,
		Period:      30 * time.Hour,
	}
}

func a67State(t *testing.T) ([]byte, int64) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	r, err := New(a67Cfg(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Set(a62T0 + 100)
	r.UpdateString("k", 40)
	c.Set(a62T0 + 4500)
	r.UpdateString("j", 9)
	S := a62T0 + 5000
	c.Set(S)
	snap, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return snap, S
}

// TestAudit67LegacyGenerationsWithinCap: pre-stop-46 rotator snapshots
// whose later generations were stated up to 2^24 ms after the rotator's
// instant (an encode across a clock step of that much, nothing written)
// read, on clocks behind, between and ahead of the instants, what the
// current snapshot of the same state reads (docs/snapshots.md: "a
// generation stated after it has its cells' ages shifted by the
// difference (at most 2^24 ms)").
func TestAudit67LegacyGenerationsWithinCap(t *testing.T) {
	snap, S := a67State(t)
	for _, delta := range [][]int64{{0, 1, 2}, {0, 1 << 23, 1 << 24}, {0, 0, 1 << 24}, {0, 1<<24 - 1, 1<<24 - 1}} {
		old := a62Legacy(t, snap, 2, 1024, delta)
		for _, off := range []int64{-86_400_000, -1, 0, 1 << 23, 1<<24 + 1, 86_400_000} {
			c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
			c1.Set(S + off)
			c2.Set(S + off)
			a, _ := New(a67Cfg(c1))
			b, _ := New(a67Cfg(c2))
			if err := a.UnmarshalBinary(snap); err != nil {
				t.Fatal(err)
			}
			if err := b.UnmarshalBinary(old); err != nil {
				t.Fatalf("legacy %v refused: %v", delta, err)
			}
			for _, q := range []int64{0, 1000, 3_600_000, 31 * 3_600_000, 50 * 3_600_000} {
				c1.Set(S + off + q)
				c2.Set(S + off + q)
				for _, key := range []string{"k", "j"} {
					if x, y := a.QueryString(key), b.QueryString(key); math.Abs(x-y) > 1e-6*math.Max(1, x) {
						t.Errorf("legacy %v, restore off %d +%d: Query(%s) current snapshot %v, legacy %v", delta, off, q, key, x, y)
					}
				}
			}
		}
	}
}

// TestAudit67FindingLegacyGenerationPastCapAgedOnClockAhead:
// docs/snapshots.md (rotator format): "A snapshot written before the
// change is mapped by the rotator's instant too: a generation stated
// after it has its cells' ages shifted by the difference (at most 2^24
// ms) ... on a clock at or ahead of every instant it restores as it
// always did"; docs/migrating.md, Stop 47: "older snapshots restore never
// below the truth too". A pre-audit-58 encoder read each generation's
// own instant, so an encode across a clock step of 5.66 h (a VM resumed,
// an NTP step; nothing written, so nothing refused) stated generations
// 1 and 2 that much after the rotator's instant, their ages relative to
// it. Before stop 47 a restore on a clock ahead of every instant aged
// each generation by its own downtime (exact). Now the generation's
// instant is taken as at most 2^24 ms after the rotator's
// (Sketch.readFrom: at := min(max(h.atWall, inst), inst+maxAhead)), so
// its cells are aged by the excess (1 h) more than the truth: below the
// current snapshot of the same state, on a clock a day ahead. (Fixed in
// stop 47: on a clock at or past a generation's own instant its downtime
// is counted from it, whatever the skew.)
func TestAudit67FixedLegacyGenerationPastCapAgedOnClockAhead(t *testing.T) {
	snap, S := a67State(t)
	step := int64(1<<24 + 3_600_000)
	old := a62Legacy(t, snap, 2, 1024, []int64{0, step, step})
	// the generations' own instants, as the pre-stop-47 decoder used them
	le := binary.LittleEndian
	genSize := 88 + 8*2*1024 + 4
	for g := 0; g < 3; g++ {
		if got := int64(le.Uint64(old[56+g*genSize+72:])) - S; g > 0 && got != step {
			t.Fatalf("generation %d stated %d ms after the rotator's instant, want %d", g, got, step)
		}
	}
	off := int64(86_400_000)
	c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	c1.Set(S + off)
	c2.Set(S + off)
	a, _ := New(a67Cfg(c1))
	b, _ := New(a67Cfg(c2))
	if err := a.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalBinary(old); err != nil {
		t.Fatalf("legacy refused: %v", err)
	}
	var msg string
	for _, q := range []int64{0, 7 * 3_600_000} { // the primary, then generation 1 after the promotion
		c1.Set(S + off + q)
		c2.Set(S + off + q)
		for _, key := range []string{"k", "j"} {
			x, y := a.QueryString(key), b.QueryString(key)
			if y < x*(1-1e-6) {
				msg += fmt.Sprintf(" +%d h: Query(%s) legacy %v, current snapshot of the same state %v (%.2f%% low);", q/3_600_000, key, y, x, 100*(1-y/x))
			}
		}
	}
	if msg != "" {
		t.Errorf("a pre-stop-46 snapshot whose generations 1, 2 were stated %d ms after the rotator's instant, restored a day ahead of every instant:%s want the same reads (\"on a clock at or ahead of every instant it restores as it always did\")", step, msg)
	}
}

// TestAudit67ForgedRotatorInstantsBounded: a rotator snapshot whose
// rotator instant, deadline and generation instants are forged anywhere
// in int64 (checksums fixed) restores without a panic or an overflow on
// clocks behind, at and ahead of the state's time: every read in [0, Hi]
// (Sketch.readFrom: "a generation stated after it has its ages shifted,
// capped at 2^24 ms; one stated before it is taken at it"; Rotator.decode
// bounds wall times to +-2^61 ms), and rotation goes on: 4 Periods after
// the restore every generation holding the state has retired (0).
func TestAudit67ForgedRotatorInstantsBounded(t *testing.T) {
	testsize.Serial(t)
	snap, S := a67State(t)
	le := binary.LittleEndian
	tab := crc32.MakeTable(crc32.Castagnoli)
	genSize := 88 + 8*2*1024 + 4
	vals := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 61, -1, 0, S - 1<<40, S - 1, S, S + 1, S + 1<<24, S + 1<<40, 1 << 61, math.MaxInt64 - 1, math.MaxInt64}
	period := int64(30 * 3_600_000)
	n := 0
	for i, inst := range vals {
		for j, dl := range vals {
			if (i+j)%4 != 0 && j != 0 && j != len(vals)-1 {
				continue // a sample of the pairs, keeping the ends
			}
			for _, gi := range []int64{math.MinInt64, inst - 5, inst + 5, inst + 1<<24 + 1, math.MaxInt64} {
				out := append([]byte(nil), snap...)
				le.PutUint64(out[40:], uint64(inst))
				le.PutUint64(out[32:], uint64(dl))
				for g := 0; g < 3; g++ {
					base := 56 + g*genSize
					le.PutUint64(out[base+72:], uint64(gi))
					le.PutUint32(out[base+genSize-4:], crc32.Checksum(out[base:base+genSize-4], tab))
				}
				le.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], tab))
				for _, off := range []int64{-86_400_000, 0, 86_400_000} {
					c := sketchtest.NewFakeClock()
					c.Set(S + off)
					r, _ := New(a67Cfg(c))
					name := fmt.Sprintf("inst %d deadline %d gen %d, off %d", inst, dl, gi, off)
					if err := r.UnmarshalBinary(out); err != nil {
						t.Fatalf("%s: refused: %v", name, err)
					}
					for _, q := range []int64{0, 1, 1 << 24, period, 4 * period} {
						c.Set(S + off + q)
						for _, key := range []string{"k", "j"} {
							v := r.QueryString(key)
							if !(v >= 0 && v <= 1e12) {
								t.Fatalf("%s +%d: Query(%s) = %v outside [0, Hi]", name, q, key, v)
							}
							if q == 4*period && v != 0 {
								t.Errorf("%s: 4 Periods after the restore Query(%s) = %v: rotation stopped", name, key, v)
							}
						}
					}
					n++
				}
			}
		}
	}
	t.Logf("%d restores", n)
}

// TestAudit67RestoreChainIdempotent: a legacy (pre-stop-46) snapshot and
// the current one, restored on clocks behind, at and ahead of their
// instants, saved at once and restored again on the same clock, read the
// same as the first restore at every instant through three Periods
// (promotions included): a save-restore-save-restore chain neither loses
// nor gains.
func TestAudit67RestoreChainIdempotent(t *testing.T) {
	snap, S := a67State(t)
	per := int64(30 * 3_600_000)
	for _, delta := range [][]int64{{0, 0, 0}, {0, 1 << 23, 1 << 24}, {7, 1000, 1<<24 - 1}} {
		in := a62Legacy(t, snap, 2, 1024, delta)
		for _, off := range []int64{-86_400_000, -1000, 0, 1 << 23, 86_400_000} {
			c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
			c1.Set(S + off)
			c2.Set(S + off)
			a, _ := New(a67Cfg(c1))
			b, _ := New(a67Cfg(c2))
			if err := a.UnmarshalBinary(in); err != nil {
				t.Fatal(err)
			}
			mid, err := a.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if err := b.UnmarshalBinary(mid); err != nil {
				t.Fatal(err)
			}
			for q := int64(0); q < 3*per; q += per / 7 {
				c1.Set(S + off + q)
				c2.Set(S + off + q)
				for _, key := range []string{"k", "j"} {
					if x, y := a.QueryString(key), b.QueryString(key); math.Abs(x-y) > 1e-6*math.Max(1, x) {
						t.Errorf("delta %v off %d +%d: Query(%s) first restore %v, after save-restore %v", delta, off, q, key, x, y)
					}
				}
			}
		}
	}
}
