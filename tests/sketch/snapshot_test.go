package sketch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// snapLaws are the laws snapshot tests cover.
var snapLaws = []struct {
	name string
	law  decay.Decay
}{
	{"none", decay.None()},
	{"exponential", decay.Exponential(0.01)},
	{"linear", decay.Linear(0.5)},
}

func snapKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	return keys
}

// TestSnapshotRoundTrip: a sketch restored on another process clock (its
// own FakeClock, its own epoch) answers every Query exactly as the
// original does at the same wall time, right after the restore and after
// further idle time, downtime included.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, law := range snapLaws {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			t.Run(law.name+"/"+agg.String(), func(t *testing.T) {
				c1 := sketchtest.NewFakeClock()
				c1.Set(1_000_000)
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 50, Hi: 1e6, Lo: -100, Decay: law.law, Aggregator: agg, Clock: c1}
				orig := mustNewSketch(t, cfg)
				keys := snapKeys(40)
				for i, k := range keys {
					orig.Update(k, float64(i%7)+0.25)
					c1.Advance(time.Duration(i*37) * time.Millisecond)
				}
				orig.Update(keys[3], -50)
				data, err := orig.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(data)) != core.SketchOf(orig).SnapshotSize() {
					t.Fatalf("len %d, SnapshotSize %d", len(data), core.SketchOf(orig).SnapshotSize())
				}
				var buf bytes.Buffer
				if n, err := orig.WriteTo(&buf); err != nil || n != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
					t.Fatalf("WriteTo: n=%d err=%v, equal to MarshalBinary: %v", n, err, bytes.Equal(buf.Bytes(), data))
				}
				// The new process: a clock that started elsewhere; the
				// sketch is built, then the clock moves to the snapshot
				// wall time plus a downtime.
				t0 := c1.NowMillis()
				for _, down := range []time.Duration{0, 20 * time.Second, time.Hour} {
					c2 := sketchtest.NewFakeClock()
					c2.Set(777)
					cfg2 := cfg
					cfg2.Clock = c2
					res := mustNewSketch(t, cfg2)
					c2.Set(t0 + down.Milliseconds())
					if err := res.UnmarshalBinary(data); err != nil {
						t.Fatal(err)
					}
					c1.Set(t0 + down.Milliseconds())
					for step := 0; step < 3; step++ {
						for _, k := range keys {
							if got, want := res.Query(k), orig.Query(k); got != want {
								t.Fatalf("down=%v step %d key %s: restored %v, original %v", down, step, k, got, want)
							}
						}
						c1.Advance(5 * time.Second)
						c2.Advance(5 * time.Second)
					}
				}
			})
		}
	}
}

// TestSnapshotLongDowntime: years of downtime decay as Rules.Decay does
// over the whole int64 age, and a restore clock behind the snapshot counts
// as no downtime.
func TestSnapshotLongDowntime(t *testing.T) {
	c1 := sketchtest.NewFakeClock()
	c1.Set(5_000_000)
	for _, law := range snapLaws {
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e30, Decay: law.law, Clock: c1}
		orig := mustNewSketch(t, cfg)
		orig.Update([]byte("k"), 1e20)
		data, _ := orig.MarshalBinary()
		year := int64(365 * 24 * 3600 * 1000)
		c2 := sketchtest.NewFakeClock()
		cfg.Clock = c2
		c2.Set(c1.NowMillis() + 3*year)
		res := mustNewSketch(t, cfg)
		if err := res.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		want := float64(float32(law.law.Apply(1e20, 3*year)))
		got := res.Query([]byte("k"))
		if !(got >= want && got <= want*(1+1e-6)) {
			t.Errorf("%s: after 3 years got %v, want %v", law.name, got, want)
		}
		// A restore clock behind the snapshot: zero downtime.
		c2.Set(c1.NowMillis() - year)
		res = mustNewSketch(t, cfg)
		if err := res.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if got := res.Query([]byte("k")); got != orig.Query([]byte("k")) {
			t.Errorf("%s: restore clock behind: got %v, want %v", law.name, got, orig.Query([]byte("k")))
		}
	}
}

// TestSnapshotSystemClock restores across two sketches on the default
// (monotonic, process-local) clock, whose epochs differ: nothing is
// mis-aged.
func TestSnapshotSystemClock(t *testing.T) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(1)}
	a := mustNewSketch(t, cfg)
	a.Update([]byte("k"), 1000)
	data, _ := a.MarshalBinary()
	time.Sleep(20 * time.Millisecond)
	b := mustNewSketch(t, cfg)
	if err := b.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	got, want := b.Query([]byte("k")), a.Query([]byte("k"))
	if math.Abs(got-want) > 0.1 || got > 1000 || got < 999 {
		t.Fatalf("restored %v, original %v", got, want)
	}
}

// TestSnapshotMismatch: a snapshot taken under another configuration is
// refused with a *SnapshotError naming the field, and the sketch is left
// as it was.
func TestSnapshotMismatch(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	base := sketch.Config{Levels: 3, CellsPerLevel: 32, Hi: 100, Decay: decay.Exponential(1), Seed: 7, Clock: clock}
	other := func(f func(*sketch.Config)) sketch.Config { c := base; f(&c); return c }
	custom := func(seed uint64) sketch.Hasher { return customHasher(seed) }
	cases := []struct {
		field string
		cfg   sketch.Config
	}{
		{"Levels", other(func(c *sketch.Config) { c.Levels = 4 })},
		{"CellsPerLevel", other(func(c *sketch.Config) { c.CellsPerLevel = 33 })},
		{"Decay", other(func(c *sketch.Config) { c.Decay = decay.Linear(1) })},
		{"Decay parameter", other(func(c *sketch.Config) { c.Decay = decay.Exponential(2) })},
		{"Lo", other(func(c *sketch.Config) { c.Lo = -1 })},
		{"Hi", other(func(c *sketch.Config) { c.Hi = 101 })},
		{"Aggregator", other(func(c *sketch.Config) { c.Aggregator = sketch.Max })},
		{"Hasher", other(func(c *sketch.Config) { c.Hasher = sketch.SipHash() })},
		{"Hasher", other(func(c *sketch.Config) { c.Hasher = custom })},
		{"Seed", other(func(c *sketch.Config) { c.Seed = 8 })},
	}
	for _, tc := range cases {
		src := mustNewSketch(t, tc.cfg)
		src.Update([]byte("x"), 1)
		data, _ := src.MarshalBinary()
		dst := mustNewSketch(t, base)
		dst.Update([]byte("y"), 5)
		err := dst.UnmarshalBinary(data)
		var se *core.SnapshotError
		if !errors.As(err, &se) || !errors.Is(err, sketch.ErrSnapshotMismatch) || se.Field != tc.field {
			t.Errorf("%s: got %v (%#v)", tc.field, err, se)
			continue
		}
		if dst.Query([]byte("y")) != 5 {
			t.Errorf("%s: refused snapshot changed the sketch", tc.field)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(data)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: ReadFrom: %v", tc.field, err)
		}
		if dst.Query([]byte("y")) != 5 {
			t.Errorf("%s: refused header in ReadFrom changed the sketch", tc.field)
		}
	}
	// A custom hasher whose fingerprint differs (another seed mixing).
	c1 := other(func(c *sketch.Config) { c.Hasher = custom })
	c2 := other(func(c *sketch.Config) {
		c.Hasher = func(seed uint64) sketch.Hasher { return customHasher(seed ^ 1) }
		c.Seed = 7
	})
	data, _ := mustNewSketch(t, c1).MarshalBinary()
	err := mustNewSketch(t, c2).UnmarshalBinary(data)
	var se *core.SnapshotError
	if !errors.As(err, &se) || se.Field != "Hasher fingerprint" {
		t.Errorf("custom hasher fingerprint: %v", err)
	}
	if err := mustNewSketch(t, c1).UnmarshalBinary(data); err != nil {
		t.Errorf("same custom hasher: %v", err)
	}
	t.Log(mustNewSketch(t, base).UnmarshalBinary(data))
}

type customHasher uint64

func (h customHasher) Sum64(k []byte) uint64 { return h.Sum64String(string(k)) }
func (h customHasher) Sum64String(k string) uint64 {
	x := uint64(h) ^ 0xcbf29ce484222325
	for i := 0; i < len(k); i++ {
		x = (x ^ uint64(k[i])) * 0x100000001b3
	}
	return x ^ x>>29
}

// TestSnapshotCorrupt: truncations, flipped bits and trailing bytes are
// *SnapshotErrors matching ErrCorruptSnapshot; UnmarshalBinary leaves the
// sketch unchanged, ReadFrom after the header leaves it empty.
func TestSnapshotCorrupt(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Clock: clock}
	src := mustNewSketch(t, cfg)
	for i := range 20 {
		src.Update(fmt.Appendf(nil, "k%d", i), float64(i))
	}
	data, _ := src.MarshalBinary()
	check := func(name string, bad []byte) {
		t.Helper()
		dst := mustNewSketch(t, cfg)
		dst.Update([]byte("mine"), 9)
		err := dst.UnmarshalBinary(bad)
		if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: UnmarshalBinary: %v", name, err)
		}
		if dst.Query([]byte("mine")) != 9 {
			t.Errorf("%s: UnmarshalBinary changed the sketch", name)
		}
		_, err = dst.ReadFrom(bytes.NewReader(bad))
		if err == nil && len(bad) == len(data) {
			t.Errorf("%s: ReadFrom accepted it", name)
		}
		if err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: ReadFrom: %v", name, err)
		}
	}
	for _, n := range []int{0, 3, 50, 87, 88, 89, 100, len(data) - 5, len(data) - 1} {
		check(fmt.Sprintf("truncated to %d", n), data[:n])
	}
	for _, bit := range []int{0, 33, 8 * 12, 8 * 50, 8 * 100, 8*len(data) - 1} {
		bad := bytes.Clone(data)
		bad[bit/8] ^= 1 << (bit % 8)
		check(fmt.Sprintf("bit %d flipped", bit), bad)
	}
	check("trailing byte", append(bytes.Clone(data), 0))
	// A forged, well-checksummed snapshot with a NaN score.
	bad := bytes.Clone(data)
	binary.LittleEndian.PutUint32(bad[88:], math.Float32bits(float32(math.NaN())))
	binary.LittleEndian.PutUint32(bad[len(bad)-4:], crcOf(bad[:len(bad)-4]))
	dst := mustNewSketch(t, cfg)
	dst.Update([]byte("mine"), 9)
	if err := dst.UnmarshalBinary(bad); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("NaN score: %v", err)
	}
	if dst.Query([]byte("mine")) != 0 {
		t.Errorf("NaN score: sketch not reset")
	}
	// ReadFrom that fails after the header leaves the sketch empty.
	dst.Update([]byte("mine"), 9)
	if _, err := dst.ReadFrom(bytes.NewReader(data[:200])); !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated stream: %v", err)
	}
	if dst.Query([]byte("mine")) != 0 {
		t.Errorf("truncated stream: sketch not reset")
	}
	if _, err := decode(data, cfg); err != nil {
		t.Errorf("Decode: %v", err)
	}
}

func crcOf(b []byte) uint32 { return core.CRC32C(b) }

// decode returns a new sketch for cfg restored from data.
func decode(data []byte, cfg sketch.Config) (*sketch.Sketch, error) {
	s, err := sketch.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	return s, nil
}

// TestSnapshotConcurrent: WriteTo under concurrent updates (non-negative
// deltas, no decay) includes every update completed before it started,
// and never more than every update started before it ended.
func TestSnapshotConcurrent(t *testing.T) {
	cfg := sketch.Config{Levels: 4, CellsPerLevel: 1 << 12, Hi: 1e12}
	s := mustNewSketch(t, cfg)
	keys := snapKeys(64)
	var stop atomic.Bool
	var wg sync.WaitGroup
	workers := 2
	var perWorker [4]atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for !stop.Load() {
				for _, k := range keys {
					s.Update(k, 1)
				}
				perWorker[w].Add(1)
			}
		})
	}
	for range 20 {
		var before int64
		for w := range workers {
			before += perWorker[w].Load()
		}
		data, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var after int64
		for w := range workers {
			after += perWorker[w].Load()
		}
		r, err := decode(data, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if v := r.Query(k); v < float64(before) || v > float64(after+int64(workers)) {
				t.Fatalf("key %s: snapshot %v, rounds completed before %d, after %d", k, v, before, after)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestSnapshotRapid: encode, decode on another clock, every Query equal,
// for random configurations and operation sequences.
func TestSnapshotRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		law := rapid.SampledFrom([]decay.Decay{decay.None(), decay.Exponential(0.3), decay.Linear(2)}).Draw(rt, "law")
		c1 := sketchtest.NewFakeClock()
		c1.Set(rapid.Int64Range(0, 1<<40).Draw(rt, "t0"))
		cfg := sketch.Config{
			Levels:        uint32(rapid.IntRange(1, 8).Draw(rt, "L")),
			CellsPerLevel: uint32(rapid.IntRange(1, 40).Draw(rt, "M")),
			Lo:            -10, Hi: 1000, Decay: law,
			Aggregator: sketch.Aggregator(rapid.IntRange(0, 2).Draw(rt, "agg")),
			Seed:       rapid.Uint64().Draw(rt, "seed"),
			Clock:      c1,
		}
		orig := mustNewSketch(rt, cfg)
		keys := snapKeys(10)
		for range rapid.IntRange(0, 60).Draw(rt, "ops") {
			k := keys[rapid.IntRange(0, len(keys)-1).Draw(rt, "k")]
			orig.Update(k, rapid.Float64Range(-5, 50).Draw(rt, "d"))
			c1.Advance(time.Duration(rapid.IntRange(0, 5000).Draw(rt, "dt")) * time.Millisecond)
		}
		data, err := orig.MarshalBinary()
		if err != nil {
			rt.Fatal(err)
		}
		down := rapid.Int64Range(0, 1<<28).Draw(rt, "down")
		c2 := sketchtest.NewFakeClock()
		c2.Set(rapid.Int64Range(0, c1.NowMillis()+down).Draw(rt, "t2")) // the new process starts before it restores
		cfg.Clock = c2
		res := mustNewSketch(rt, cfg)
		c2.Set(c1.NowMillis() + down)
		if err := res.UnmarshalBinary(data); err != nil {
			rt.Fatal(err)
		}
		c1.Advance(time.Duration(down) * time.Millisecond)
		for _, k := range keys {
			if got, want := res.Query(k), orig.Query(k); got != want {
				rt.Fatalf("key %s: restored %v, original %v", k, got, want)
			}
		}
	})
}

// TestSnapshotForgedInstants: a well-checksummed snapshot whose instant
// is at either end of int64 restores without overflow: an instant in the
// far past decays everything for the whole (saturated) downtime, one in
// the future counts as no downtime.
func TestSnapshotForgedInstants(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	clock.Set(1_700_000_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e9, Decay: decay.Exponential(1), Clock: clock}
	src := mustNewSketch(t, cfg)
	src.Update([]byte("k"), 100)
	data, _ := src.MarshalBinary()
	for _, at := range []int64{math.MinInt64, -1 << 62, math.MaxInt64} {
		bad := bytes.Clone(data)
		binary.LittleEndian.PutUint64(bad[72:], uint64(at))
		binary.LittleEndian.PutUint32(bad[len(bad)-4:], crcOf(bad[:len(bad)-4]))
		dst := mustNewSketch(t, cfg)
		if err := dst.UnmarshalBinary(bad); err != nil {
			t.Fatalf("instant %d: %v", at, err)
		}
		got := dst.Query([]byte("k"))
		if want := 100.0; at == math.MaxInt64 && got != want || at != math.MaxInt64 && got != 0 {
			t.Errorf("instant %d: got %v", at, got)
		}
		dst.Update([]byte("k"), 1)
		clock.Advance(time.Second)
		if v := dst.Query([]byte("k")); !(v > 0 && v <= 101) {
			t.Errorf("instant %d: after an update and 1 s: %v", at, v)
		}
	}
}

// halfLife is a custom law (not built by package decay).
type halfLife struct{}

func (halfLife) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1000)
}

// TestSnapshotCustomLaw: a custom law is recorded as custom; a snapshot
// of it restores only into a sketch whose law is custom too (its
// parameters cannot be verified), and is refused by any provided law.
func TestSnapshotCustomLaw(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e6, Decay: halfLife{}, Clock: clock}
	src := mustNewSketch(t, cfg)
	src.Update([]byte("k"), 64)
	data, _ := src.MarshalBinary()
	if err := mustNewSketch(t, cfg).UnmarshalBinary(data); err != nil {
		t.Fatalf("custom into custom: %v", err)
	}
	other := cfg
	other.Decay = decay.Exponential(math.Ln2)
	var se *core.SnapshotError
	if err := mustNewSketch(t, other).UnmarshalBinary(data); !errors.As(err, &se) || se.Field != "Decay" {
		t.Fatalf("custom into exponential: %v", err)
	}
}
