package sketch_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
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
// sketch, an increment below half a float64 ulp of the key's score is
// absorbed by the float64 add. Fixed as a doc (stop 48: sketch's doc and
// precision.md say the add and TryUpdate's compare are float64, as in the
// reference and grudge): the lock-free sketch reads at or above the
// float64 mutex reference fed the same history, and decides as it does.
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
	for range 1000 {
		s.Update(k, 1e14)
		ref.Update(k, 1e14)
	}
	if got, want := s.Query(k), ref.Query(k); got < want {
		t.Errorf("Update(k, 2^100), then Update(k, 1e14) x 1000: Query %v below the float64 reference's %v", got, want)
	}
	k2 := []byte("k2")
	s.Update(k2, 0x1p100)
	ref.Update(k2, 0x1p100)
	limit := s.Query(k2)
	for i := range 1000 {
		a, b := s.TryUpdate(k2, 1e14, limit), ref.TryUpdate(k2, 1e14, limit)
		if a != b {
			t.Fatalf("TryUpdate #%d (k2, 1e14, %v): lock-free %v, reference %v; both decide aggregate + delta <= limit in float64", i, limit, a, b)
		}
	}
	if got, want := s.Query(k2), ref.Query(k2); got < want {
		t.Errorf("after the TryUpdates: Query %v below the reference's %v", got, want)
	}
}

// TestAudit80PublicTwinDigest runs one deterministic workload of Update,
// TryUpdate, UpdateAndQuery and Query (every law, edge deltas, ages at
// the 2^31 edge, colliding keys) through the public sketch and compares
// a digest of every result with the one the pure-Go build (-tags purego,
// no batch assembly) produced, so the two builds agree bit for bit on the
// public results.
func TestAudit80PublicTwinDigest(t *testing.T) {
	// Recorded on amd64 with -tags purego; other architectures may fuse
	// multiply-adds (FMA) and round differently, so only amd64 compares.
	if runtime.GOARCH != "amd64" {
		t.Skip("digest recorded on amd64")
	}
	const want = "b30b3fdfae68d0adbc1f684a6285916f81b4e3e9d23c9b2b3dc5bfc3ebd63d18"
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
