package snapshot_test

// Audit 134: a count-min limiter's snapshot with EVERY checksum repaired
// (the limiter header's, each generation's, the rotator's), so forged
// cells reach the cell checks; limit's own FuzzLimiterReadFrom repairs
// only the header's and the last one, so a forged count-min cell stops
// at its generation's checksum. The receiver holds a state of its own.
//
// Contract: limit.Limiter.ReadFrom (a refused restore leaves the limiter
// empty, or "unchanged, when the header is refused"; never half
// restored: docs/snapshots.md "What a failed restore leaves", "A rotator
// builds new generations and publishes them only on success: a failed
// restore never changes it"); "Every score must be finite and within
// [Lo, Hi], else the snapshot is corrupt"; every refusal matches
// ErrCorruptSnapshot or ErrSnapshotMismatch. An accepted restore holds
// every key within [burst - MaxDebt, burst] tokens and keeps deciding.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit134LimT0 = 1_780_000_000_000

func audit134Lim(t testing.TB, clk *sketchtest.FakeClock) *limit.Limiter {
	l, err := limit.New(10, 20, limit.WithEngine(limit.CountMin), limit.WithSize(2, 8), limit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func audit134LimSeeds(t testing.TB) [][]byte {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit134LimT0)
	l := audit134Lim(t, clk)
	for i := range 40 {
		l.AllowN(clk.Now(), fmt.Sprint("k", i%9), 1+i%5)
		clk.Advance(3 * time.Millisecond)
	}
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	s := buf.Bytes()
	out := [][]byte{s}
	// Offsets of the generations' cells: limiter header 64, rotator
	// header 56, each generation 88 + 8*2*8 + 4.
	gs := 88 + 8*2*8 + 4
	n := int(binary.LittleEndian.Uint32(s[64+8:]))
	for g := 0; g < n; g++ {
		c := 64 + 56 + g*gs + 88
		for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), 1e30, -1e30, -1, 0} {
			f := bytes.Clone(s)
			binary.LittleEndian.PutUint32(f[c+8:], math.Float32bits(v))
			out = append(out, f)
		}
		for _, age := range []uint32{0x80000000, 0x7fffffff, 0xff000000, 0} {
			f := bytes.Clone(s)
			binary.LittleEndian.PutUint32(f[c+12:], age)
			out = append(out, f)
		}
	}
	return out
}

func audit134LimCheck(t *testing.T, data []byte) {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit134LimT0 + 500)
	data = bytes.Clone(data)
	if len(data) >= 64+56+4 && data[6] == 2 {
		_, fix := audit134VersionSites("limiter", data)
		func() {
			defer func() { _ = recover() }() // odd lengths: leave the checksums as they are
			fix(data)
		}()
	}
	l := audit134Lim(t, clk)
	l.AllowN(clk.Now(), "own", 15)
	keys := []string{"own"}
	for i := range 9 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	before := map[string]float64{}
	for _, k := range keys {
		before[k] = l.TokensAt(clk.Now(), k)
	}
	burst := float64(l.Burst())
	_, err := l.ReadFrom(bytes.NewReader(data))
	if err != nil {
		if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("untyped error: %v", err)
		}
		same, empty := true, true
		for _, k := range keys {
			v := l.TokensAt(clk.Now(), k)
			same = same && v == before[k]
			empty = empty && v == burst
		}
		if !same && !empty {
			got := map[string]float64{}
			for _, k := range keys {
				got[k] = l.TokensAt(clk.Now(), k)
			}
			t.Fatalf("refused (%v) and left the limiter neither unchanged nor empty: %v, was %v", err, got, before)
		}
		return
	}
	for round := range 2 {
		for _, k := range keys {
			v := l.TokensAt(clk.Now(), k)
			if math.IsNaN(v) || v > burst || v < burst-l.MaxDebt() {
				t.Fatalf("round %d: %s holds %v tokens after an accepted restore, outside [%v, %v]", round, k, v, burst-l.MaxDebt(), burst)
			}
			l.DecideN(clk.Now(), k, 1)
		}
		clk.Advance(5 * time.Hour)
	}
}

func FuzzAudit134LimiterAllCRCs(f *testing.F) {
	for _, s := range audit134LimSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(audit134LimCheck)
}

func TestAudit134LimiterAllCRCsSeeds(t *testing.T) {
	seeds := audit134LimSeeds(t)
	refused := 0
	for i, s := range seeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			audit134LimCheck(t, s)
		})
		clk := sketchtest.NewFakeClock()
		clk.Set(audit134LimT0 + 500)
		d := bytes.Clone(s)
		_, fix := audit134VersionSites("limiter", d)
		fix(d)
		if _, err := audit134Lim(t, clk).ReadFrom(bytes.NewReader(d)); err != nil {
			refused++
		}
	}
	// NaN, +Inf, 1e30 and -1e30 (below Lo) in each generation at least.
	if refused < 4 {
		t.Fatalf("only %d forged seeds refused: the checksum repair does not reach the cells", refused)
	}
}
