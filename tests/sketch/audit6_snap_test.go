package sketch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit6T0 = int64(1_750_000_000_000)

func audit6Keys(n int) [][]byte {
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = []byte(fmt.Sprintf("a6-key-%d", i))
	}
	return ks
}

// audit6New builds a sketch on its own fake clock set at ms.
func audit6New(t testing.TB, cfg sketch.Config, ms int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(ms)
	cfg.Clock = c
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatalf("sketch.New: %v", err)
	}
	return s, c
}

// TestAudit6RoundTripDowntime: a snapshot restored on another clock (another
// epoch) after a downtime answers each key as the original would at the same
// wall time (docs/snapshots.md "Time across restarts": equality below 2^29 ms),
// never below the key's exact decayed truth (Min, non-negative deltas); a
// restore clock behind the snapshot counts as zero downtime (no growth);
// a downtime beyond 2^29 ms still decays as int64 ages do.
func TestAudit6RoundTripDowntime(t *testing.T) {
	laws := []struct {
		name  string
		law   decay.Decay
		truth func(v float64, ms int64) float64
	}{
		{"none", decay.None(), func(v float64, ms int64) float64 { return v }},
		{"exp", decay.Exponential(0.01), func(v float64, ms int64) float64 { return v * math.Exp(-0.01*float64(ms)/1000) }},
		{"lin", decay.Linear(0.5), func(v float64, ms int64) float64 { return math.Max(0, v-0.5*float64(ms)/1000) }},
	}
	for _, lw := range laws {
		for _, down := range []int64{-60_000, 0, 1, 20_000, 3_600_000, 10 * 24 * 3_600_000} {
			t.Run(fmt.Sprintf("%s/down=%d", lw.name, down), func(t *testing.T) {
				cfg := sketch.Config{Levels: 4, CellsPerLevel: 4096, Hi: 1e12, Decay: lw.law, Seed: 77}
				keys := audit6Keys(200)
				truth := make([]float64, len(keys))
				last := make([]int64, len(keys))
				orig2, oc2 := audit6New(t, cfg, audit6T0)
				for i := range truth {
					truth[i], last[i] = 0, audit6T0
				}
				rng := rand.New(rand.NewPCG(7, 7))
				for step := 0; step < 2000; step++ {
					i := rng.IntN(len(keys))
					oc2.Advance(time.Duration(rng.IntN(50)) * time.Millisecond)
					now := oc2.NowMillis()
					d := float64(1 + rng.IntN(5))
					truth[i] = lw.truth(truth[i], now-last[i]) + d
					last[i] = now
					orig2.Update(keys[i], d)
				}
				T := oc2.NowMillis()
				var buf bytes.Buffer
				if _, err := orig2.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				restoreAt := T + down
				rs, rc := audit6New(t, cfg, restoreAt-999_999) // another epoch
				rc.Set(restoreAt)
				if err := rs.UnmarshalBinary(buf.Bytes()); err != nil {
					t.Fatalf("restore: %v", err)
				}
				eff := down
				if eff < 0 {
					eff = 0
				}
				oc2.Set(T + eff) // the original at the same (effective) instant
				for i, k := range keys {
					got := rs.Query(k)
					want := orig2.Query(k)
					tr := lw.truth(truth[i], T+eff-last[i])
					if got < tr*(1-1e-12)-1e-12 {
						t.Fatalf("key %d: restored %v below truth %v", i, got, tr)
					}
					if eff < 1<<29 && got != want {
						t.Fatalf("key %d: restored %v, original at same instant %v", i, got, want)
					}
					if eff >= 1<<29 {
						// decayed once over the int64 age, rounded up: close to
						// the original (which decays its own way), never below truth.
						if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
							t.Fatalf("key %d: long downtime restored %v, original %v", i, got, want)
						}
					}
				}
			})
		}
	}
}

// TestAudit6ReadFromStreams: ReadFrom reads exactly the snapshot's bytes
// (what follows stays in the reader) and returns their count; a second
// snapshot in the same stream restores too.
func TestAudit6ReadFromStreams(t *testing.T) {
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(1), Seed: 3}
	a, _ := audit6New(t, cfg, audit6T0)
	keys := audit6Keys(20)
	for i, k := range keys {
		a.Update(k, float64(i+1))
	}
	var stream bytes.Buffer
	n1, err := a.WriteTo(&stream)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(88 + 8*3*64 + 4); n1 != want {
		t.Fatalf("WriteTo wrote %d bytes, docs say %d", n1, want)
	}
	stream.WriteString("TRAILER")
	b, _ := audit6New(t, cfg, audit6T0)
	n2, err := b.ReadFrom(&stream)
	if err != nil || n2 != n1 {
		t.Fatalf("ReadFrom = %d, %v; want %d, nil", n2, err, n1)
	}
	if rest := stream.String(); rest != "TRAILER" {
		t.Fatalf("ReadFrom consumed past the snapshot: left %q", rest)
	}
	for _, k := range keys {
		if b.Query(k) != a.Query(k) {
			t.Fatalf("key %s: %v vs %v", k, b.Query(k), a.Query(k))
		}
	}
}

// audit6Fix rewrites the trailing CRC-32C of a sketch snapshot.
func audit6Fix(data []byte) []byte {
	out := append([]byte(nil), data...)
	if len(out) >= 4 {
		binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crc32.MakeTable(crc32.Castagnoli)))
	}
	return out
}

// TestAudit6CorruptTyped: truncations, bit flips (with and without the
// checksum repaired), a trailing byte and forged scores give errors matching
// ErrCorruptSnapshot or ErrSnapshotMismatch (docs/snapshots.md "What is
// checked"); UnmarshalBinary refused leaves s unchanged (except a
// well-checksummed invalid score: reset); ReadFrom leaves s unchanged or
// reset, never half restored.
func TestAudit6CorruptTyped(t *testing.T) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -50, Hi: 50, Decay: decay.Exponential(0.1), Seed: 11}
	src, _ := audit6New(t, cfg, audit6T0)
	keys := audit6Keys(10)
	for i, k := range keys {
		src.Update(k, float64(i)-3)
	}
	good, _ := src.MarshalBinary()
	if len(good) != 88+8*2*16+4 {
		t.Fatalf("snapshot len %d", len(good))
	}
	prep := func() (*sketch.Sketch, []float64) {
		d, _ := audit6New(t, cfg, audit6T0)
		pre := make([]float64, len(keys))
		for _, k := range keys {
			d.Update(k, 7)
		}
		for i, k := range keys {
			pre[i] = d.Query(k)
		}
		return d, pre
	}
	check := func(name string, bad []byte, unmarshalMustKeep bool) {
		t.Helper()
		for _, mode := range []string{"unmarshal", "readfrom"} {
			d, pre := prep()
			var err error
			if mode == "unmarshal" {
				err = d.UnmarshalBinary(bad)
			} else {
				_, err = d.ReadFrom(bytes.NewReader(bad))
			}
			if err == nil {
				t.Fatalf("%s/%s: accepted", name, mode)
			}
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("%s/%s: untyped error %v", name, mode, err)
			}
			same, zero := true, true
			for i, k := range keys {
				q := d.Query(k)
				if q != pre[i] {
					same = false
				}
				if q != 0 {
					zero = false
				}
			}
			if mode == "unmarshal" && unmarshalMustKeep && !same {
				t.Fatalf("%s/%s: refused snapshot changed the sketch", name, mode)
			}
			if !same && !zero {
				t.Fatalf("%s/%s: half restored", name, mode)
			}
		}
	}
	for _, n := range []int{0, 3, 4, 50, 87, 88, 89, 200, len(good) - 5, len(good) - 1} {
		check(fmt.Sprintf("trunc%d", n), good[:n], true)
	}
	// a trailing byte: UnmarshalBinary refuses it; ReadFrom reads exactly the
	// snapshot's bytes, so it is not ReadFrom's concern.
	{
		d, _ := prep()
		if err := d.UnmarshalBinary(append(append([]byte(nil), good...), 0)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("trailing byte: UnmarshalBinary = %v", err)
		}
	}
	for _, off := range []int{0, 4, 5, 6, 7, 8, 9, 12, 16, 20, 24, 32, 40, 48, 56, 80, 90, len(good) - 2} {
		b := append([]byte(nil), good...)
		b[off] ^= 0x10
		check(fmt.Sprintf("flip%d", off), b, true)
		if off < 88 && off != 64 && off != 72 {
			check(fmt.Sprintf("flipfixed%d", off), audit6Fix(b), true)
		}
	}
	// forged scores with a valid checksum: NaN, +Inf, above Hi, below Lo.
	for _, bits := range []uint32{0x7fc00000, 0x7f800000, math.Float32bits(51), math.Float32bits(-51)} {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[88+8*5:], bits)
		check(fmt.Sprintf("score%#x", bits), audit6Fix(b), false)
	}
}

// FuzzAudit6ReadFrom: arbitrary bytes into ReadFrom and UnmarshalBinary,
// raw and with the checksum repaired: never a panic, every error typed, an
// accepted input leaves finite scores within [Lo, Hi], a refused one leaves
// the sketch as it was or empty.
func FuzzAudit6ReadFrom(f *testing.F) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: -10, Hi: 10, Decay: decay.Linear(2), Seed: 5}
	src, sc := audit6New(f, cfg, audit6T0)
	keys := audit6Keys(12)
	for i, k := range keys {
		src.Update(k, float64(i%7)-2)
	}
	sc.Advance(time.Second)
	good, _ := src.MarshalBinary()
	f.Add(good, false)
	f.Add(good[:len(good)-1], true)
	f.Add(good[:88], true)
	f.Add([]byte("GRDG\x01\x01"), false)
	f.Add([]byte{}, false)
	b := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(b[72:], math.MaxUint64)
	f.Add(b, true)
	b = append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(b[88+4:], math.MaxUint32)
	f.Add(b, true)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = audit6Fix(data)
		}
		for _, mode := range []int{0, 1} {
			d, _ := audit6New(t, cfg, audit6T0+5000)
			pre := make([]float64, len(keys))
			for _, k := range keys {
				d.Update(k, 1)
			}
			for i, k := range keys {
				pre[i] = d.Query(k)
			}
			var err error
			if mode == 0 {
				err = d.UnmarshalBinary(data)
			} else {
				_, err = d.ReadFrom(bytes.NewReader(data))
			}
			if err != nil {
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("mode %d: untyped error %v", mode, err)
				}
				same, zero := true, true
				for i, k := range keys {
					q := d.Query(k)
					same = same && q == pre[i]
					zero = zero && q == 0
				}
				if !same && !zero {
					t.Fatalf("mode %d: refused but half restored", mode)
				}
				continue
			}
			for _, k := range keys {
				q := d.Query(k)
				if math.IsNaN(q) || q < -10 || q > 10 {
					t.Fatalf("mode %d: accepted snapshot yields score %v", mode, q)
				}
				det := d.QueryDetailed(k)
				for _, l := range det.Levels {
					if math.IsNaN(l.Score) || l.Score < -10 || l.Score > 10 {
						t.Fatalf("mode %d: accepted snapshot yields cell %v", mode, l.Score)
					}
				}
			}
		}
	})
}

// TestAudit6MergeBounds: merged estimates are >= each input's own estimate
// for every key (Min, non-negative deltas), equal to the union for the None
// law with integer deltas, and >= the union for Linear with an overlap at
// least the time both ran (docs/snapshots.md, "Merge").
func TestAudit6MergeBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		law     decay.Decay
		overlap time.Duration
	}{
		{"none", decay.None(), 0},
		{"exp", decay.Exponential(0.2), 0},
		{"lin", decay.Linear(3), 0},
		{"lin-overlap", decay.Linear(3), 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sketch.Config{Levels: 3, CellsPerLevel: 32, Hi: 1e9, Decay: tc.law, Seed: 21}
			a, ca := audit6New(t, cfg, audit6T0)
			b, cb := audit6New(t, cfg, audit6T0)
			u, cu := audit6New(t, cfg, audit6T0)
			keys := audit6Keys(64)
			rng := rand.New(rand.NewPCG(1, 2))
			for step := 0; step < 3000; step++ {
				dt := time.Duration(rng.IntN(7)) * time.Millisecond
				ca.Advance(dt)
				cb.Advance(dt)
				cu.Advance(dt)
				k := keys[rng.IntN(len(keys))]
				d := float64(rng.IntN(4))
				if rng.IntN(2) == 0 {
					a.Update(k, d)
				} else {
					b.Update(k, d)
				}
				u.Update(k, d)
			}
			qa := make([]float64, len(keys))
			qb := make([]float64, len(keys))
			for i, k := range keys {
				qa[i], qb[i] = a.Query(k), b.Query(k)
			}
			if err := a.Merge(b, tc.overlap); err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				m, un := a.Query(k), u.Query(k)
				if m < qa[i] || m < qb[i] {
					t.Fatalf("key %d: merged %v below an input (%v, %v)", i, m, qa[i], qb[i])
				}
				switch tc.name {
				case "none":
					if m != un {
						t.Fatalf("key %d: None merge %v, union %v", i, m, un)
					}
				case "exp":
					if math.Abs(m-un) > 1e-5*math.Max(1, un) {
						t.Fatalf("key %d: Exponential merge %v, union %v", i, m, un)
					}
				case "lin":
					if m > un*(1+1e-6)+1e-6 {
						t.Fatalf("key %d: Linear merge %v above union %v", i, m, un)
					}
				case "lin-overlap":
					if m < un {
						t.Fatalf("key %d: Linear merge with overlap %v below union %v", i, m, un)
					}
				}
			}
		})
	}
}

// TestAudit6MergeRefuses: another Seed, Levels, CellsPerLevel, Lo, Hi, law,
// law parameter, aggregator or hasher, and s itself, are refused with
// ErrSnapshotMismatch, leaving s unchanged.
func TestAudit6MergeRefuses(t *testing.T) {
	base := sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -1, Hi: 100, Decay: decay.Exponential(1), Seed: 9}
	mods := map[string]func(*sketch.Config){
		"Seed":          func(c *sketch.Config) { c.Seed = 10 },
		"Levels":        func(c *sketch.Config) { c.Levels = 3 },
		"CellsPerLevel": func(c *sketch.Config) { c.CellsPerLevel = 17 },
		"Lo":            func(c *sketch.Config) { c.Lo = -2 },
		"Hi":            func(c *sketch.Config) { c.Hi = 101 },
		"law":           func(c *sketch.Config) { c.Decay = decay.Linear(1) },
		"param":         func(c *sketch.Config) { c.Decay = decay.Exponential(1.0000001) },
		"agg":           func(c *sketch.Config) { c.Aggregator = sketch.Max },
		"hasher":        func(c *sketch.Config) { c.Hasher = sketch.SipHash() },
	}
	keys := audit6Keys(8)
	for name, mod := range mods {
		s, _ := audit6New(t, base, audit6T0)
		for _, k := range keys {
			s.Update(k, 5)
		}
		pre := make([]float64, len(keys))
		for i, k := range keys {
			pre[i] = s.Query(k)
		}
		oc := base
		mod(&oc)
		o, _ := audit6New(t, oc, audit6T0)
		for _, k := range keys {
			o.Update(k, 5)
		}
		err := s.Merge(o, 0)
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("%s: Merge = %v, want ErrSnapshotMismatch", name, err)
		}
		for i, k := range keys {
			if q := s.Query(k); q != pre[i] {
				t.Fatalf("%s: refused merge changed key from %v to %v", name, pre[i], q)
			}
		}
	}
	s, _ := audit6New(t, base, audit6T0)
	s.Update(keys[0], 5)
	if err := s.Merge(s, 0); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("self Merge = %v", err)
	}
	if q := s.Query(keys[0]); q != 5 {
		t.Fatalf("self merge changed key to %v", q)
	}
}

// TestAudit6RotatorSnapshotConcurrent: a rotator snapshot taken under
// concurrent writers includes every update completed before WriteTo was
// called (docs/snapshots.md, "Consistency under concurrent updates"), and the
// restore answers at least that.
func TestAudit6RotatorSnapshotConcurrent(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(audit6T0)
	cfg := rotator.Config{Sketch: sketch.Config{Levels: 4, CellsPerLevel: 1 << 12, Hi: 1e9, Seed: 4, Clock: c}, Generations: 3, Period: time.Hour}
	r, err := rotator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const W = 4
	keys := audit6Keys(W)
	var done [W]atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < W; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for !stop.Load() {
				r.Update(keys[w], 1)
				done[w].Add(1)
			}
		}(w)
	}
	var snaps [][]byte
	var floors [][W]int64
	for i := 0; i < 5; i++ {
		var fl [W]int64
		for w := range fl {
			fl[w] = done[w].Load()
		}
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, buf.Bytes())
		floors = append(floors, fl)
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	for i, data := range snaps {
		rc := sketchtest.NewFakeClock()
		rc.Set(audit6T0)
		cfg2 := cfg
		cfg2.Sketch.Clock = rc
		r2, err := rotator.New(cfg2)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.UnmarshalBinary(data); err != nil {
			t.Fatalf("snap %d: %v", i, err)
		}
		for w, k := range keys {
			if q := r2.Query(k); q < float64(floors[i][w]) {
				t.Fatalf("snap %d key %d: restored %v < %d updates completed before WriteTo", i, w, q, floors[i][w])
			}
		}
	}
}

// TestAudit6RotatorRoundTripPromotions: a rotator restored after a downtime
// of several periods answers as the original advanced by the same time, and
// forgets everything after a downtime of N x Period; a refused rotator
// snapshot (other N, Period, seed; truncated; flipped) leaves it unchanged.
func TestAudit6RotatorRoundTripPromotions(t *testing.T) {
	const period = 10 * time.Second
	mk := func(ms int64, n uint32, p time.Duration, seed uint64) (*rotator.Rotator, *sketchtest.FakeClock) {
		c := sketchtest.NewFakeClock()
		c.Set(ms)
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 3, CellsPerLevel: 128, Hi: 1e6, Decay: decay.Linear(0.1), Seed: seed, Clock: c}, Generations: n, Period: p})
		if err != nil {
			t.Fatal(err)
		}
		return r, c
	}
	keys := audit6Keys(30)
	for _, down := range []time.Duration{0, 7 * time.Second, 13 * time.Second, 25 * time.Second, 29*time.Second + 999*time.Millisecond, 31 * time.Second, 400 * time.Second} {
		orig, oc := mk(audit6T0, 3, period, 8)
		for step := 0; step < 40; step++ {
			oc.Advance(700 * time.Millisecond)
			orig.Update(keys[step%len(keys)], float64(step%5+1))
		}
		data, err := orig.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		T := oc.NowMillis()
		r2, c2 := mk(T-5555, 3, period, 8)
		c2.Set(T + down.Milliseconds())
		if err := r2.UnmarshalBinary(data); err != nil {
			t.Fatalf("down %v: %v", down, err)
		}
		oc.Set(T + down.Milliseconds())
		for step := 0; step < 4; step++ {
			for i, k := range keys {
				if a, b := r2.Query(k), orig.Query(k); a != b {
					t.Fatalf("down %v step %d key %d: restored %v, original %v", down, step, i, a, b)
				}
			}
			oc.Advance(6 * time.Second)
			c2.Advance(6 * time.Second)
		}
	}
	// forgetting through the downtime: everything written before T is gone
	// once N x Period have passed.
	orig, oc := mk(audit6T0, 2, period, 1)
	for _, k := range keys {
		orig.Update(k, 50)
	}
	data, _ := orig.MarshalBinary()
	r2, c2 := mk(oc.NowMillis(), 2, period, 1)
	c2.Set(oc.NowMillis() + (2 * period).Milliseconds())
	if err := r2.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if q := r2.Query(k); q != 0 {
			t.Fatalf("key %d survives N x Period of downtime: %v", i, q)
		}
	}
	// refused snapshots leave the rotator unchanged.
	src, _ := mk(audit6T0, 3, period, 8)
	for _, k := range keys {
		src.Update(k, 3)
	}
	good, _ := src.MarshalBinary()
	bads := map[string][]byte{"trunc": good[:len(good)-1], "trunc-header": good[:40]}
	for _, off := range []int{0, 5, 8, 16, 24, 48, 60, 56 + 90, len(good) - 1} {
		b := append([]byte(nil), good...)
		b[off] ^= 4
		bads[fmt.Sprintf("flip%d", off)] = b
	}
	check := func(name string, dst *rotator.Rotator, data []byte) {
		t.Helper()
		pre := make([]float64, len(keys))
		for i, k := range keys {
			pre[i] = dst.Query(k)
		}
		err1 := dst.UnmarshalBinary(data)
		_, err2 := dst.ReadFrom(bytes.NewReader(data))
		for _, err := range []error{err1, err2} {
			if err == nil || !(errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, sketch.ErrSnapshotMismatch)) {
				t.Fatalf("%s: err %v", name, err)
			}
		}
		for i, k := range keys {
			if q := dst.Query(k); q != pre[i] {
				t.Fatalf("%s: refused snapshot changed key %d: %v -> %v", name, i, pre[i], q)
			}
		}
	}
	for name, b := range bads {
		dst, _ := mk(audit6T0, 3, period, 8)
		dst.Update(keys[0], 9)
		check(name, dst, b)
	}
	for name, dst := range map[string]*rotator.Rotator{
		"N":      func() *rotator.Rotator { r, _ := mk(audit6T0, 2, period, 8); return r }(),
		"Period": func() *rotator.Rotator { r, _ := mk(audit6T0, 3, period+time.Millisecond, 8); return r }(),
		"Seed":   func() *rotator.Rotator { r, _ := mk(audit6T0, 3, period, 9); return r }(),
	} {
		dst.Update(keys[1], 4)
		check(name, dst, good)
		_, err := dst.ReadFrom(bytes.NewReader(good))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("%s: want ErrSnapshotMismatch, got %v", name, err)
		}
	}
}

// TestAudit6RotatorRestoreIntoUsed: restoring into a rotator that has already
// promoted many times (its own creation counter ahead) adopts the snapshot's
// generations, counter and deadline: every key answers as the original, and
// keeps doing so through later promotions.
func TestAudit6RotatorRestoreIntoUsed(t *testing.T) {
	const period = 4 * time.Second
	mk := func(ms int64) (*rotator.Rotator, *sketchtest.FakeClock) {
		c := sketchtest.NewFakeClock()
		c.Set(ms)
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(0.05), Seed: 12, Clock: c}, Generations: 3, Period: period})
		if err != nil {
			t.Fatal(err)
		}
		return r, c
	}
	keys := audit6Keys(40)
	orig, oc := mk(audit6T0)
	for step := 0; step < 60; step++ {
		oc.Advance(300 * time.Millisecond)
		orig.Update(keys[step%len(keys)], float64(step%3+1))
	}
	data, _ := orig.MarshalBinary()
	T := oc.NowMillis()
	r2, c2 := mk(T - 200_000)
	for i := 0; i < 30; i++ { // many promotions on the receiver
		c2.Advance(period)
		r2.Update(keys[i%len(keys)], 100)
	}
	if r2.Stats().Promotions == 0 {
		t.Fatal("receiver did not promote")
	}
	c2.Set(T)
	if err := r2.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 12; step++ {
		for i, k := range keys {
			if a, b := r2.Query(k), orig.Query(k); a != b {
				t.Fatalf("step %d key %d: restored %v, original %v", step, i, a, b)
			}
		}
		oc.Advance(1500 * time.Millisecond)
		c2.Advance(1500 * time.Millisecond)
	}
}

// TestAudit6RotatorRestoreClockBehind: a rotator restored on a clock whose
// wall time is behind the snapshot instant (downtime counted as 0, per
// docs/snapshots.md) must still forget: rotator doc, "Forgetting: a write is
// gone from every generation at most N x Period after it was made". A key
// written on the restored rotator, right after the restore, must read 0
// N x Period later.
func TestAudit6RotatorRestoreClockBehind(t *testing.T) {
	const period = 10 * time.Second
	mk := func(ms int64) (*rotator.Rotator, *sketchtest.FakeClock) {
		c := sketchtest.NewFakeClock()
		c.Set(ms)
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Seed: 2, Clock: c}, Generations: 2, Period: period})
		if err != nil {
			t.Fatal(err)
		}
		return r, c
	}
	for _, back := range []time.Duration{0, time.Second, time.Minute, time.Hour} {
		orig, oc := mk(audit6T0)
		orig.Update([]byte("old"), 1)
		oc.Advance(3 * time.Second)
		data, _ := orig.MarshalBinary()
		r2, c2 := mk(oc.NowMillis() - back.Milliseconds() - 1000)
		c2.Advance(time.Second)
		if err := r2.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		k := []byte("written-after-restore")
		r2.Update(k, 5)
		c2.Advance(2 * period)
		if q := r2.Query(k); q != 0 {
			t.Errorf("clock %v behind the snapshot: a write made after the restore still reads %v after N x Period (Promotions %d)",
				back, q, r2.Stats().Promotions)
		}
		if q := r2.Query([]byte("old")); q != 0 {
			t.Errorf("clock %v behind: the snapshot's key still reads %v after N x Period more", back, q)
		}
	}
}

// TestAudit6MergeNoneSigned: under the None law a merged cell is a + b, exact
// for integer deltas (docs/snapshots.md, Merge table), negative ones
// included when no clamp is reached; every aggregator then reads the union.
func TestAudit6MergeNoneSigned(t *testing.T) {
	for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
		cfg := sketch.Config{Levels: 4, CellsPerLevel: 16, Lo: -1e6, Hi: 1e6, Aggregator: agg, Seed: 31}
		a, ca := audit6New(t, cfg, audit6T0)
		b, cb := audit6New(t, cfg, audit6T0+123_456) // another clock, another epoch
		u, _ := audit6New(t, cfg, audit6T0)
		keys := audit6Keys(50)
		rng := rand.New(rand.NewPCG(3, 4))
		for step := 0; step < 2000; step++ {
			ca.Advance(time.Millisecond)
			cb.Advance(time.Millisecond)
			k := keys[rng.IntN(len(keys))]
			d := float64(rng.IntN(7) - 3)
			if rng.IntN(2) == 0 {
				a.Update(k, d)
			} else {
				b.Update(k, d)
			}
			u.Update(k, d)
		}
		if err := a.Merge(b, 0); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if m, w := a.Query(k), u.Query(k); m != w {
				t.Fatalf("%v key %d: merged %v, union %v", agg, i, m, w)
			}
		}
	}
}
