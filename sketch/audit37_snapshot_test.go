package sketch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// TestAudit37HostileSnapshotTyped: a valid snapshot mutated (random bytes,
// with and without a recomputed CRC-32C, truncated, extended) must either
// restore a sketch whose every score is finite and within [Lo, Hi], or
// fail with an error matching ErrCorruptSnapshot or ErrSnapshotMismatch;
// never panic. Both UnmarshalBinary and ReadFrom.
func TestAudit37HostileSnapshotTyped(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000_000)
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: decay.Exponential(0.1), Lo: -10, Hi: 1000, Clock: clk}
	src := mustNewSketch(t, cfg)
	for i := range 40 {
		src.UpdateString(fmt.Sprintf("k%d", i), float64(i*7%50)-5)
		clk.Set(clk.NowMillis() + 13)
	}
	good, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	crcTab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(37, 3))
	typed := func(err error) bool {
		return errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch)
	}
	check := func(i int, data []byte, how string) {
		for _, stream := range []bool{false, true} {
			dst := mustNewSketch(t, cfg)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("case %d (%s, stream=%v): panic %v", i, how, stream, r)
					}
				}()
				if stream {
					_, err = dst.ReadFrom(bytes.NewReader(data))
				} else {
					err = dst.UnmarshalBinary(data)
				}
			}()
			if err != nil {
				if !typed(err) {
					t.Fatalf("case %d (%s, stream=%v): untyped error %T %v", i, how, stream, err, err)
				}
				continue
			}
			for k := range 200 {
				q := dst.QueryString(fmt.Sprintf("p%d", k))
				if math.IsNaN(q) || q < -10 || q > 1000 {
					t.Fatalf("case %d (%s): restored Query = %v outside [Lo, Hi]", i, how, q)
				}
			}
		}
	}
	for i := range 3000 {
		data := bytes.Clone(good)
		how := ""
		switch i % 4 {
		case 0, 1:
			for range 1 + rng.IntN(4) {
				p := rng.IntN(len(data) - 4)
				data[p] = byte(rng.Uint32())
			}
			how = "mutated"
			if i%4 == 1 {
				binary.LittleEndian.PutUint32(data[len(data)-4:], crc32.Checksum(data[:len(data)-4], crcTab))
				how = "mutated+crc"
			}
		case 2:
			data = data[:rng.IntN(len(data))]
			how = "truncated"
		case 3:
			data = append(data, byte(rng.Uint32()))
			how = "extended"
		}
		check(i, data, how)
	}
}

// TestAudit37FixedMergeAheadReplicaReadsBelowUnion: replica B's
// clock is 3 s ahead of A's (wall clocks of two hosts). B saw
// Update(k, 10) at its reading 1,000,000 and Update(k, 0) at 1,003,000
// (a zero add: the key's truth is unchanged, the cell is re-stamped with
// its decayed value); A, whose clock reads 1,000,000, merges B. Merge
// promises to read B "at the same instant of other's own time scale"
// ("if ahead, they are read at an earlier point of its scale") and, for
// Exponential, "the merged cell is exactly the cell a single sketch fed
// the union would hold" (internal/core/merge.go, Sketch.Merge; sketch/doc.go:
// never below the truth). A single sketch fed that union reads 10 at
// 1,000,000 and 10*e^-0.6 = 5.49 at 1,002,000. The merged A reads B's
// cell as stored, already decayed to B's later stamp 1,003,000
// (10*e^-0.9 = 4.07), and stamps it ahead so it does not decay until
// then: 4.07 at 1,000,000 and at 1,002,000, below the union's 10 and 5.49.
func TestAudit37FixedMergeAheadReplicaReadsBelowUnion(t *testing.T) {
	const lambda = 0.3
	ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	ca.Set(1_000_000)
	cb.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Exponential(lambda), Hi: 1e6, Seed: 5}
	cfg.Clock = ca
	a := mustNewSketch(t, cfg)
	cfg.Clock = cb
	b := mustNewSketch(t, cfg)
	b.UpdateString("k", 10)
	cb.Set(1_003_000)
	b.UpdateString("k", 0)
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{1_000_000, 1_002_000} {
		ca.Set(at)
		union := 10 * math.Exp(-lambda*float64(at-1_000_000)/1000)
		if got := a.QueryString("k"); got < union*(1-1e-9) {
			t.Errorf("A at %d after Merge(B, 3 s ahead): Query(k) = %.4f, want >= %.4f, the estimate of a single sketch fed the union (10 written at 1,000,000, nothing added since): Merge reads B's cell at its own later stamp, not at the merge instant, and so under-reads (internal/core/merge.go: \"read at the same instant of other's own time scale\"; \"never below the truth\")", at, got, union)
		}
	}
}

// TestAudit37MergeDifferentTimesNeverBelowUnion: replicas whose clocks
// agree or lag behind s (0 and -40 s) see disjoint parts of one stream;
// after Merge each key's estimate is never below its union truth
// (closed form on the absolute timeline), read now and later.
func TestAudit37MergeDifferentTimesNeverBelowUnion(t *testing.T) {
	for _, c := range []struct {
		name   string
		law    decay.Decay
		lambda float64
	}{{"none", decay.None(), 0}, {"exp", decay.Exponential(0.3), 0.3}} {
		t.Run(c.name, func(t *testing.T) {
			base := int64(1_700_000_000_000)
			offs := []int64{0, 0, -40_000}
			var clks []*sketchtest.FakeClock
			var sks []*sketch.Sketch
			for _, o := range offs {
				clk := sketchtest.NewFakeClock()
				clk.Set(base + o)
				clks = append(clks, clk)
				sks = append(sks, mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 8, Decay: c.law, Hi: 1e6, Clock: clk, Seed: 9}))
			}
			type ev struct {
				at int64 // the replica's clock reading at the write
				d  float64
			}
			truth := map[string][]ev{}
			rng := rand.New(rand.NewPCG(1, 2))
			for step := range 600 {
				r := rng.IntN(3)
				k := fmt.Sprintf("k%d", rng.IntN(30))
				d := float64(1 + rng.IntN(9))
				sks[r].UpdateString(k, d)
				truth[k] = append(truth[k], ev{clks[r].NowMillis(), d})
				if step%5 == 0 {
					adv := int64(rng.IntN(300))
					for _, cl := range clks {
						cl.Set(cl.NowMillis() + adv)
					}
				}
			}
			for _, o := range sks[1:] {
				if err := sks[0].Merge(o); err != nil {
					t.Fatal(err)
				}
			}
			for _, later := range []int64{0, 1, 1000, 60_000} {
				clks[0].Set(clks[0].NowMillis() + later)
				T := clks[0].NowMillis()
				for k, evs := range truth {
					var want float64
					for _, e := range evs {
						want += e.d * math.Exp(-c.lambda*float64(max(0, T-e.at))/1000)
					}
					if got := sks[0].QueryString(k); got < want*(1-1e-12) {
						t.Errorf("%s +%dms: Query(%s) = %v < union truth %v", c.name, later, k, got, want)
					}
				}
			}
		})
	}
}

// TestAudit37HostileSnapshotFileLoad: hostile files through
// snapshot.Load (random byte changes with a recomputed CRC-32C, truncated,
// extended): each either loads (every estimate finite and within [Lo,
// Hi]) or fails with a *snapshot.LoadError matching ErrCorruptSnapshot or
// ErrSnapshotMismatch, leaving the destination empty.
func TestAudit37HostileSnapshotFileLoad(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(9_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 32, Decay: decay.Linear(2), Lo: -3, Hi: 500, Clock: clk}
	src := mustNewSketch(t, cfg)
	for i := range 30 {
		src.UpdateString(fmt.Sprintf("k%d", i), float64(i*11%60)-3)
	}
	good, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	crcTab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(7, 37))
	for i := range 400 {
		data := bytes.Clone(good)
		switch i % 3 {
		case 0:
			for range 1 + rng.IntN(3) {
				data[rng.IntN(len(data)-4)] = byte(rng.Uint32())
			}
			binary.LittleEndian.PutUint32(data[len(data)-4:], crc32.Checksum(data[:len(data)-4], crcTab))
		case 1:
			data = data[:rng.IntN(len(data))]
		case 2:
			data = append(data, 0)
		}
		path := filepath.Join(dir, fmt.Sprintf("s%d.snap", i))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		dst := mustNewSketch(t, cfg)
		err := snapshot.Load(path, dst)
		if err == nil {
			for k := range 64 {
				if q := dst.QueryString(fmt.Sprintf("k%d", k)); math.IsNaN(q) || q < -3 || q > 500 {
					t.Fatalf("case %d: loaded Query = %v outside [Lo, Hi]", i, q)
				}
			}
			continue
		}
		var le *snapshot.LoadError
		if !errors.As(err, &le) || !(errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch)) {
			t.Fatalf("case %d: error %T %v: want a *LoadError matching ErrCorruptSnapshot or ErrSnapshotMismatch", i, err, err)
		}
		for k := range 64 {
			if q := dst.QueryString(fmt.Sprintf("k%d", k)); q != 0 {
				t.Fatalf("case %d: failed Load left Query(k%d) = %v, want an empty sketch (%v)", i, k, q, err)
			}
		}
	}
}
