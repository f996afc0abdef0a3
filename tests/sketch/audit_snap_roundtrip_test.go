package sketch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// auditRestore builds a sketch for cfg on a fresh fake clock set to at
// (Unix ms) and restores data into it.
func auditRestore(t *testing.T, cfg sketch.Config, data []byte, at int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(at - 12345) // built earlier than it restores: another epoch
	cfg.Clock = c
	s := mustNewSketch(t, cfg)
	c.Set(at)
	if err := s.UnmarshalBinary(data); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return s, c
}

// TestAuditSnapRoundTripBounds: Hi (and Lo) values a float32 cannot hold,
// and Hi = +Inf / Lo = -Inf with a draining law: cells at the clamp
// restore (the score check uses the effective bound), and the restored
// sketch answers every Query, and every later Update-to-the-clamp, as
// the original does at the same wall times.
func TestAuditSnapRoundTripBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		law    decay.Decay
		deltas []float64
	}{
		{"hi0.1", -0.1, 0.1, decay.None(), []float64{0.05, 0.2, -0.3, 0.1, 1e-9}},
		{"hi0.1-exp", 0, 0.1, decay.Exponential(0.5), []float64{0.05, 0.2, 0.1, 0.07}},
		{"hi1e9+1", -(1e9 + 1), 1e9 + 1, decay.Linear(3), []float64{6e8, 6e8, -3e9, 1e9 + 1, 7}},
		{"hiInf", 0, math.Inf(1), decay.Exponential(1e-3), []float64{3e38, 3e38, 1e30, 5}},
		{"loInf", math.Inf(-1), math.Inf(1), decay.Linear(10), []float64{-3e38, -3e38, 3e38, 3e38, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c1 := sketchtest.NewFakeClock()
			c1.Set(1_700_000_000_000)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Lo: tc.lo, Hi: tc.hi, Decay: tc.law, Clock: c1}
			orig := mustNewSketch(t, cfg)
			keys := snapKeys(8)
			for i, k := range keys {
				orig.Update(k, tc.deltas[i%len(tc.deltas)])
				c1.Advance(time.Duration(i*13) * time.Millisecond)
			}
			data, err := orig.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			for _, down := range []int64{0, 1, 4000} {
				res, c2 := auditRestore(t, cfg, data, c1.NowMillis()+down)
				o := mustNewSketch(t, cfg) // a copy of orig, advanced alongside
				if err := o.UnmarshalBinary(data); err != nil {
					t.Fatal(err)
				}
				c1.Advance(time.Duration(down) * time.Millisecond)
				for step := range 4 {
					for i, k := range keys {
						if g, w := res.Query(k), orig.Query(k); g != w {
							t.Fatalf("down %d step %d key %d: restored %v, original %v", down, step, i, g, w)
						}
					}
					// the same writes on both, clamps included
					d := tc.deltas[step%len(tc.deltas)]
					res.Update(keys[step], d)
					orig.Update(keys[step], d)
					c1.Advance(700 * time.Millisecond)
					c2.Advance(700 * time.Millisecond)
				}
				// put orig back to the snapshot's state for the next downtime
				orig = o
				data, _ = orig.MarshalBinary()
			}
		})
	}
}

// TestAuditSnapAgeBoundary: a record whose age plus downtime is just
// below 2^29 ms keeps its score and stamp (Query equal, then and later);
// at and past 2^29 it is decayed once and rounded up (never below the
// original, within a float32 ulp of it).
func TestAuditSnapAgeBoundary(t *testing.T) {
	const keep = int64(1) << 29
	for _, law := range []decay.Decay{decay.Exponential(1e-6), decay.Linear(1e-3)} {
		for _, total := range []int64{keep - 2, keep - 1, keep, keep + 1, keep + 5000} {
			c1 := sketchtest.NewFakeClock()
			c1.Set(1_600_000_000_000)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e9, Decay: law, Clock: c1}
			orig := mustNewSketch(t, cfg)
			k := []byte("k")
			orig.Update(k, 123456.789)
			age := int64(1000)
			c1.Advance(time.Duration(age) * time.Millisecond)
			data, _ := orig.MarshalBinary()
			res, c2 := auditRestore(t, cfg, data, c1.NowMillis()+total-age)
			c1.Advance(time.Duration(total-age) * time.Millisecond)
			for step := range 3 {
				g, w := res.Query(k), orig.Query(k)
				if total < keep && g != w {
					t.Errorf("%v total %d step %d: restored %v, original %v", law, total, step, g, w)
				}
				if total >= keep && (g < w || g > w*(1+1e-6)) {
					t.Errorf("%v total %d step %d: restored %v, original %v (want rounded up, within an ulp)", law, total, step, g, w)
				}
				c1.Advance(3 * time.Second)
				c2.Advance(3 * time.Second)
			}
		}
	}
}

// TestAuditSnapLaterThanSweep: a restored sketch answers every later
// Query exactly as the original would at the same wall time until a
// horizon sweep of either re-stamps the cell (2^29 ms after the
// restore, at the earliest), and within one float32 ulp, upward, after
// it (UnmarshalBinary's doc; docs/snapshots.md). A cell younger than
// 2^29 ms, followed over 18.6 days, across both sketches' sweeps.
func TestAuditSnapLaterThanSweep(t *testing.T) {
	c1 := sketchtest.NewFakeClock()
	c1.Set(1_600_000_000_000)
	law := decay.Exponential(1e-7)
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 2, Hi: 1e9, Decay: law, Clock: c1}
	orig := mustNewSketch(t, cfg)
	k := []byte("k")
	orig.Update(k, 1e6)
	c1.Advance(time.Hour)
	data, _ := orig.MarshalBinary()
	res, c2 := auditRestore(t, cfg, data, c1.NowMillis())
	step := time.Duration(1<<25) * time.Millisecond // 9.3 h
	for i := range 48 {                             // 18.6 days: past both sketches' sweeps
		g, w := res.Query(k), orig.Query(k)
		elapsed := time.Duration(i) * step
		if elapsed < time.Duration(1<<29)*time.Millisecond {
			if g != w {
				t.Errorf("t+%v, before any sweep: restored %v, original %v, want equal", elapsed, g, w)
			}
		} else if ulp := float64(math.Nextafter32(float32(max(g, w)), float32(math.Inf(1)))) - float64(float32(max(g, w))); math.Abs(g-w) > ulp {
			t.Errorf("t+%v: restored %v, original %v, more than one float32 ulp (%v) apart", elapsed, g, w, ulp)
		}
		c1.Advance(step)
		c2.Advance(step)
	}
}

// TestAuditSnapOriginalIdleRebased: the original idles for 30 days (its
// next operation, WriteTo, must re-base every cell first); the snapshot
// restores to what the original answers (each record now decayed once,
// rounded up).
func TestAuditSnapOriginalIdleRebased(t *testing.T) {
	for _, law := range []decay.Decay{decay.None(), decay.Exponential(1e-7), decay.Linear(1e-4)} {
		c1 := sketchtest.NewFakeClock()
		c1.Set(1_600_000_000_000)
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 16, Hi: 1e9, Decay: law, Clock: c1}
		orig := mustNewSketch(t, cfg)
		keys := snapKeys(20)
		for i, k := range keys {
			orig.Update(k, float64(1000*i+1))
		}
		c1.Advance(30 * 24 * time.Hour)
		data, _ := orig.MarshalBinary()
		res, c2 := auditRestore(t, cfg, data, c1.NowMillis()+5000)
		c1.Advance(5 * time.Second)
		for step := range 3 {
			for i, k := range keys {
				if g, w := res.Query(k), orig.Query(k); g != w {
					t.Errorf("%v step %d key %d: restored %v, original %v", law, step, i, g, w)
				}
			}
			c1.Advance(time.Minute)
			c2.Advance(time.Minute)
		}
	}
}

// TestAuditSnapReadFromExact: ReadFrom consumes exactly the snapshot's
// bytes whatever the reader's chunking, returns that count, and leaves
// what follows in the reader.
func TestAuditSnapReadFromExact(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(1_000_000)
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 3000, Lo: -5, Hi: 1e6, Decay: decay.Exponential(0.01), Clock: c}
	src := mustNewSketch(t, cfg)
	keys := snapKeys(200)
	for i, k := range keys {
		src.Update(k, float64(i)-3)
	}
	data, _ := src.MarshalBinary()
	tail := []byte("NEXT-RECORD")
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"plain":   func(r io.Reader) io.Reader { return r },
		"onebyte": iotest.OneByteReader,
		"half":    iotest.HalfReader,
	} {
		r := bytes.NewReader(append(bytes.Clone(data), tail...))
		dst := mustNewSketch(t, cfg)
		n, err := dst.ReadFrom(wrap(r))
		if err != nil || n != int64(len(data)) {
			t.Fatalf("%s: n=%d err=%v, want %d", name, n, err, len(data))
		}
		rest, _ := io.ReadAll(r)
		if !bytes.Equal(rest, tail) {
			t.Fatalf("%s: ReadFrom consumed past the snapshot: left %q", name, rest)
		}
		for _, k := range keys {
			if dst.Query(k) != src.Query(k) {
				t.Fatalf("%s: key %s differs", name, k)
			}
		}
	}
	// Two snapshots back to back in one stream.
	other := mustNewSketch(t, cfg)
	other.Update([]byte("x"), 77)
	data2, _ := other.MarshalBinary()
	r := bytes.NewReader(append(bytes.Clone(data), data2...))
	a, b := mustNewSketch(t, cfg), mustNewSketch(t, cfg)
	if _, err := a.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if b.Query([]byte("x")) != 77 || a.Query(keys[10]) != src.Query(keys[10]) {
		t.Fatal("back-to-back snapshots restored wrong")
	}
}

// TestAuditSnapForgedValidCRC: forgeries with a correct checksum are
// typed errors naming the field, and UnmarshalBinary leaves the sketch as
// it was (except an invalid score: reset).
func TestAuditSnapForgedValidCRC(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(1_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: -0.1, Hi: 0.1, Clock: c}
	src := mustNewSketch(t, cfg)
	src.Update([]byte("a"), 0.07)
	data, _ := src.MarshalBinary()
	le := binary.LittleEndian
	fix := func(b []byte) []byte {
		le.PutUint32(b[len(b)-4:], crcOf(b[:len(b)-4]))
		return b
	}
	mod := func(f func(b []byte) []byte) []byte { return fix(f(bytes.Clone(data))) }
	hiEff := math.Nextafter32(float32(0.1), 1) // the first float32 above 0.1
	if float64(float32(0.1)) >= 0.1 {
		hiEff = float32(0.1)
	}
	for _, tc := range []struct {
		name, field string
		kind        error
		data        []byte
		resets      bool
	}{
		{"version", "Version", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte { b[4] = 2; return b }), false},
		{"kind", "Kind", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte { b[5] = 2; return b }), false},
		{"reserved", "Reserved", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte { b[21] = 1; return b }), false},
		{"cells", "Cells", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte { le.PutUint64(b[80:], 15); return b }), false},
		{"extra cell", "Length", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte {
			return append(b[:len(b)-4:len(b)-4], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		}), false},
		{"one cell short", "Length", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte {
			return append(b[:len(b)-12:len(b)-12], 0, 0, 0, 0)
		}), false},
		{"agg", "Aggregator", sketch.ErrSnapshotMismatch, mod(func(b []byte) []byte { b[7] = 1; return b }), false},
		{"hashkind", "Hasher", sketch.ErrSnapshotMismatch, mod(func(b []byte) []byte { b[8] = 2; return b }), false},
		{"fingerprint", "Hasher fingerprint", sketch.ErrSnapshotMismatch, mod(func(b []byte) []byte { b[56] ^= 1; return b }), false},
		{"hi as float32", "Hi", sketch.ErrSnapshotMismatch, mod(func(b []byte) []byte {
			le.PutUint64(b[40:], math.Float64bits(float64(float32(0.1))))
			return b
		}), false},
		{"score above Hi", "Cell", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte {
			le.PutUint32(b[88+8*5:], math.Float32bits(math.Nextafter32(hiEff, 1)))
			return b
		}), true},
		{"score +Inf", "Cell", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte {
			le.PutUint32(b[88+8*5:], math.Float32bits(float32(math.Inf(1))))
			return b
		}), true},
		{"score below Lo", "Cell", sketch.ErrCorruptSnapshot, mod(func(b []byte) []byte {
			le.PutUint32(b[88+8*15:], math.Float32bits(-0.2))
			return b
		}), true},
	} {
		dst := mustNewSketch(t, cfg)
		dst.Update([]byte("mine"), 0.05)
		err := dst.UnmarshalBinary(tc.data)
		var se *core.SnapshotError
		if !errors.As(err, &se) || !errors.Is(err, tc.kind) || se.Field != tc.field {
			t.Errorf("%s: got %v (field %v), want %v naming %s", tc.name, err, func() any {
				if se != nil {
					return se.Field
				}
				return nil
			}(), tc.kind, tc.field)
			continue
		}
		want := 0.05
		if tc.resets {
			want = 0
		}
		if got := dst.Query([]byte("mine")); float32(got) != float32(want) {
			t.Errorf("%s: after the refusal the sketch reads %v, want %v", tc.name, got, want)
		}
	}
	// The effective bound itself is a valid score.
	ok := mod(func(b []byte) []byte { le.PutUint32(b[88+8*5:], math.Float32bits(hiEff)); return b })
	if err := mustNewSketch(t, cfg).UnmarshalBinary(ok); err != nil {
		t.Errorf("score at the effective Hi %v refused: %v", hiEff, err)
	}
}

// TestAuditSnapReceiptVoid: a Receipt issued before a snapshot load (or
// a load that failed after the header, which resets) is void: Refund
// reports false and changes nothing, even in the same millisecond.
func TestAuditSnapReceiptVoid(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(1_000_000)
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e6, Clock: c}
	s := mustNewSketch(t, cfg)
	e := core.SketchOf(s)
	k := []byte("k")
	rc, ok := e.TryReserveAt(c.Now(), k, 10, 100)
	if !ok {
		t.Fatal("not admitted")
	}
	data, _ := s.MarshalBinary() // includes the reservation
	if err := s.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if e.Refund(&rc) {
		t.Error("Refund after a load reported success")
	}
	if got := s.Query(k); got != 10 {
		t.Errorf("Refund after a load changed the key: %v, want 10", got)
	}
	// A ReadFrom that fails after the header resets: void too.
	rc2, _ := e.TryReserveAt(c.Now(), k, 5, 100)
	if _, err := s.ReadFrom(bytes.NewReader(data[:len(data)-1])); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("truncated: %v", err)
	}
	s.Update(k, 5)
	if e.Refund(&rc2) || s.Query(k) != 5 {
		t.Errorf("Refund after a failed load: key %v, want 5", s.Query(k))
	}
}

// TestAuditSnapConcurrentWriteMerge: WriteTo runs concurrently with
// Merge and TryUpdate (documented: "any other operation, Merge
// included"): every snapshot decodes, and each key lies between its value
// before and after (no decay, non-negative deltas).
func TestAuditSnapConcurrentWriteMerge(t *testing.T) {
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 512, Hi: 1e12}
	s := mustNewSketch(t, cfg)
	o := mustNewSketch(t, cfg)
	keys := snapKeys(32)
	for _, k := range keys {
		o.Update(k, 1)
	}
	var wg sync.WaitGroup
	const merges = 40
	wg.Go(func() {
		for range merges {
			if err := s.Merge(o, 0); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for range 200 {
			for _, k := range keys {
				s.TryUpdate(k, 1, 1e9)
			}
		}
	})
	for range 10 {
		before := make([]float64, len(keys))
		for i, k := range keys {
			before[i] = s.Query(k)
		}
		data, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		r, err := decode(data, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if v := r.Query(k); v < before[i] || v > merges+200 {
				t.Fatalf("key %s: snapshot %v, before %v", k, v, before[i])
			}
		}
	}
	wg.Wait()
	for _, k := range keys {
		if got := s.Query(k); got != merges+200 {
			t.Fatalf("key %s: %v, want %d", k, got, merges+200)
		}
	}
}
