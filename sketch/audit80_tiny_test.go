package sketch_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit80FixedSketchTinyDeltaUnderestimates: through the public
// sketch, an increment below half a float64 ulp of the key's score was
// absorbed by the float64 add. Documented in stop 48, fixed in stop 49:
// every add keeps the float64 add's exact error and rounds the exact sum
// up, so the estimate is never below the exact sum of the increments
// (and so never below the float64 reference, which still absorbs them).
// TryUpdate's decision stays aggregate + delta <= limit in float64 (the
// reference's and grudge's compare): the first 1e14 against a limit of
// 2^100 is admitted, as the reference admits it, and the cell then holds
// it (one float32 above 2^100), so every later one is denied, where the
// reference, having lost it, admits them all.
func TestAudit80FixedSketchTinyDeltaUnderestimates(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 64, Hi: 3e38, Clock: fc}
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reference.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 0x1p100)
	ref.Update(k, 0x1p100)
	exact := new(big.Float).SetPrec(1000).SetFloat64(0x1p100)
	for range 1000 {
		s.Update(k, 1e14)
		ref.Update(k, 1e14)
		exact.Add(exact, big.NewFloat(1e14))
	}
	if got := s.Query(k); new(big.Float).SetFloat64(got).Cmp(exact) < 0 {
		t.Errorf("Update(k, 2^100), then Update(k, 1e14) x 1000: Query %v below the exact sum %v", got, exact)
	}
	if got, want := s.Query(k), ref.Query(k); got < want {
		t.Errorf("Update(k, 2^100), then Update(k, 1e14) x 1000: Query %v below the float64 reference's %v", got, want)
	}
	k2 := []byte("k2")
	s.Update(k2, 0x1p100)
	ref.Update(k2, 0x1p100)
	limit := s.Query(k2)
	admitted := 0
	for i := range 1000 {
		agg := s.Query(k2)
		ok := s.TryUpdate(k2, 1e14, limit)
		if want := agg+1e14 <= limit; ok != want {
			t.Fatalf("TryUpdate #%d (k2, 1e14, %v) at %v: %v, want aggregate + delta <= limit in float64: %v", i, limit, agg, ok, want)
		}
		if !ref.TryUpdate(k2, 1e14, limit) {
			t.Fatalf("reference TryUpdate #%d denied: it absorbs the delta and stays at the limit", i)
		}
		if ok {
			admitted++
		}
	}
	if admitted != 1 {
		t.Errorf("%d TryUpdates admitted, want 1: the first one's 1e14 stays in the cell", admitted)
	}
	if got := s.Query(k2); !(got > 0x1p100) {
		t.Errorf("after the TryUpdates: Query %v, want above 2^100 (the admitted 1e14 kept)", got)
	}
}

// TestAudit80PublicTwinDigest runs one deterministic workload of Update,
// TryUpdate, UpdateAndQuery and Query (every law, edge deltas, ages at
// the 2^31 edge, colliding keys) through the public sketch and compares
// a digest of every result with the one the pure-Go build (-tags purego,
// no batch assembly) produced, so the two builds agree bit for bit on the
// public results.
func TestAudit80PublicTwinDigest(t *testing.T) {
	// Recorded on amd64 with -tags purego (again in stop 49, when every
	// add began rounding the exact sum up, and in stop 55, when the linear
	// law began rounding its drain up), at GOAMD64=v1 and v3, which
	// fuses multiply-adds (twinDigest, audit80_digest_*_test.go). Only
	// amd64 has the batch assembly this compares against; arm64 fuses
	// more multiply-adds than v3 and runs the pure-Go code in both builds.
	if runtime.GOARCH != "amd64" {
		t.Skip("digest recorded on amd64")
	}
	want := twinDigest
	h := sha256.New()
	put := func(x float64) { h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(x))) }
	laws := []decay.Decay{decay.None(), decay.Exponential(0.5), decay.Linear(7)}
	for li, law := range laws {
		fc := sketchtest.NewFakeClock()
		fc.Set(1<<32 - 3000)
		s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 16, Lo: -50, Hi: 1e7 + 0.1, Decay: law, Clock: fc, Seed: 80})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(80, uint64(li)))
		deltas := []float64{0, 1, -1, 0.1, 1e-9, 3, 1e6, 1e-46, -0.1, 0.30000000000000004, 1e7}
		for i := range 6000 {
			k := fmt.Appendf(nil, "k%d", r.IntN(40))
			d := deltas[r.IntN(len(deltas))]
			switch r.IntN(6) {
			case 0:
				fc.Advance(time.Duration(r.IntN(50)) * time.Millisecond)
			case 1:
				if i%500 == 0 {
					fc.Advance(time.Duration(1<<31-1) * time.Millisecond)
				}
			}
			switch r.IntN(4) {
			case 0:
				s.Update(k, d)
			case 1:
				ok := s.TryUpdate(k, d, float64(r.IntN(100)))
				put(map[bool]float64{true: 1, false: 0}[ok])
			case 2:
				put(s.UpdateAndQuery(k, d))
			case 3:
				put(s.Query(k))
				continue
			}
		}
	}
	got := fmt.Sprintf("%x", h.Sum(nil))
	if got != want {
		t.Errorf("public results digest %s, want %s (the purego build's)", got, want)
	}
}
