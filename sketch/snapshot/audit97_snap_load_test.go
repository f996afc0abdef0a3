package snapshot_test

// Audit 97 (package sketch/snapshot): Load.
//
// Contract: snapshot.go, Load ("On any error it returns a *LoadError and
// dst is left empty, as built: a file whose size is not the length of
// dst's snapshot is refused before dst is touched ..., as is a refused
// header; a rotator or meter is never changed by a failed restore");
// docs/snapshots.md "Guarantees" ("Magic, version, kind, reserved bytes
// and the cell count (an error matching ErrCorruptSnapshot)"; "a refused
// header leaves the sketch unchanged"; "A rotator builds new generations
// and publishes them only on success"), limit.Limiter.ReadFrom ("or
// unchanged, when the header is refused"), meter.Rate.ReadFrom ("either
// way r is left unchanged"), and "Left for later" (a Destination of your
// own without SnapshotSize: only "from a file that is not a regular one"
// is a trailing byte found after the restore).

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

const a97T0 = 1_700_000_000_000

// a97Obj is one provided Source/Destination with a way to mark a key and
// to read it back (0 for a key it never saw).
type a97Obj struct {
	name string
	mk   func(t *testing.T, clk *sketchtest.FakeClock) any
	mark func(o any, key string)
	read func(o any, key string) float64
}

func a97SketchObj(name string, levels, cells uint32) a97Obj {
	return a97Obj{name: name,
		mk: func(t *testing.T, clk *sketchtest.FakeClock) any {
			s, err := sketch.New(sketch.Config{Levels: levels, CellsPerLevel: cells, Hi: 1e6, Seed: 3, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		mark: func(o any, key string) { o.(*sketch.Sketch).UpdateString(key, 7) },
		read: func(o any, key string) float64 { return o.(*sketch.Sketch).QueryString(key) },
	}
}

func a97RotatorObj(name string, levels, cells uint32) a97Obj {
	return a97Obj{name: name,
		mk: func(t *testing.T, clk *sketchtest.FakeClock) any {
			r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: levels, CellsPerLevel: cells, Hi: 1e6, Seed: 3, Clock: clk}, Generations: 2, Period: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		mark: func(o any, key string) { o.(*rotator.Rotator).UpdateString(key, 7) },
		read: func(o any, key string) float64 { return o.(*rotator.Rotator).QueryString(key) },
	}
}

func a97LimiterObj(name string, levels, cells uint32) a97Obj {
	return a97Obj{name: name,
		mk: func(t *testing.T, clk *sketchtest.FakeClock) any {
			return limit.MustNew(1, 10, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(levels, cells), limit.WithGenerations(2), limit.WithSeed(3))
		},
		mark: func(o any, key string) { o.(*limit.Limiter).AllowN(time.UnixMilli(a97T0), key, 7) },
		read: func(o any, key string) float64 { return 10 - o.(*limit.Limiter).Tokens(key) },
	}
}

func a97RateObj(name string, levels, cells uint32) a97Obj {
	return a97Obj{name: name,
		mk: func(t *testing.T, clk *sketchtest.FakeClock) any {
			r, err := meter.NewRate(time.Minute, meter.WithClock(clk), meter.WithSize(levels, cells), meter.WithSeed(3))
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		mark: func(o any, key string) { o.(*meter.Rate).ObserveAt(time.UnixMilli(a97T0), key, 7) },
		read: func(o any, key string) float64 { return o.(*meter.Rate).PerSecond(key) },
	}
}

func a97NoveltyObj(name string, levels, cells uint32) a97Obj {
	return a97Obj{name: name,
		mk: func(t *testing.T, clk *sketchtest.FakeClock) any {
			n, err := meter.NewNovelty(time.Minute, meter.WithClock(clk), meter.WithSize(levels, cells), meter.WithSeed(3))
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
		mark: func(o any, key string) { o.(*meter.Novelty).Seen(key) },
		read: func(o any, key string) float64 {
			if o.(*meter.Novelty).Contains(key) {
				return 1
			}
			return 0
		},
	}
}

func a97Bytes(t *testing.T, src any) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := src.(snapshot.Source).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestAudit97SnapLoadCrossKindSameSize: a snapshot of one kind of Source
// whose file has exactly the length of another kind of Destination's
// snapshot (so Load's size check passes and the Destination's own header
// check must refuse it): sketch into rotator and back, limiter into meter
// and back, rotator into limiter and back, a Rate into a Novelty and
// back, and a sketch into a sketch of another shape (L=2 x 64 as 4 x 32).
// Every one is a *LoadError naming the path that matches
// ErrCorruptSnapshot (another kind) or ErrSnapshotMismatch (another
// meter, another shape), and the Destination is unchanged: a key it held
// before the Load still reads the same, and the source's key reads 0.
func TestAudit97SnapLoadCrossKindSameSize(t *testing.T) {
	dir := t.TempDir()
	// Sizes: sketch 92 + 8LM; rotator (N=2) 56 + 2(92 + 8LM) + 4 = 244 +
	// 16LM; limiter 64 + rotator; meter 32 + rotator.
	cases := []struct {
		src, dst a97Obj
		corrupt  bool // else a mismatch
	}{
		{a97SketchObj("sketch 5x55", 5, 55), a97RotatorObj("rotator 2x64", 2, 64), true},
		{a97RotatorObj("rotator 2x64", 2, 64), a97SketchObj("sketch 5x55", 5, 55), true},
		{a97LimiterObj("limiter 2x64", 2, 64), a97RateObj("rate 2x65", 2, 65), true},
		{a97RateObj("rate 2x65", 2, 65), a97LimiterObj("limiter 2x64", 2, 64), true},
		{a97LimiterObj("limiter 2x64", 2, 64), a97NoveltyObj("novelty 2x65", 2, 65), true},
		{a97NoveltyObj("novelty 2x65", 2, 65), a97LimiterObj("limiter 2x64", 2, 64), true},
		{a97RotatorObj("rotator 2x66", 2, 66), a97LimiterObj("limiter 2x64", 2, 64), true},
		{a97LimiterObj("limiter 2x64", 2, 64), a97RotatorObj("rotator 2x66", 2, 66), true},
		{a97RateObj("rate 2x64", 2, 64), a97NoveltyObj("novelty 2x64", 2, 64), false},
		{a97NoveltyObj("novelty 2x64", 2, 64), a97RateObj("rate 2x64", 2, 64), false},
		{a97SketchObj("sketch 2x64", 2, 64), a97SketchObj("sketch 4x32", 4, 32), false},
	}
	for i, c := range cases {
		name := c.src.name + " into " + c.dst.name
		clk := sketchtest.NewFakeClock()
		clk.Set(a97T0)
		src := c.src.mk(t, clk)
		c.src.mark(src, "theirs")
		data := a97Bytes(t, src)
		dst := c.dst.mk(t, clk)
		c.dst.mark(dst, "mine")
		before := c.dst.read(dst, "mine")
		if before == 0 {
			t.Fatalf("%s: the mark does not read", name)
		}
		if want := int64(len(a97Bytes(t, dst))); int64(len(data)) != want {
			t.Fatalf("%s: test setup: snapshot of %d bytes, the destination's is %d", name, len(data), want)
		}
		path := filepath.Join(dir, "x"+string(rune('a'+i))+".snap")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := snapshot.Load(path, dst.(snapshot.Destination))
		var le *snapshot.LoadError
		if !errors.As(err, &le) || le.Path != path {
			t.Errorf("%s: Load = %v (%T), want a *LoadError for the path", name, err, err)
			continue
		}
		if c.corrupt && !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("%s: %v does not match ErrCorruptSnapshot (another kind)", name, err)
		}
		if !c.corrupt && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: %v does not match ErrSnapshotMismatch", name, err)
		}
		if errors.Is(err, snapshot.ErrNoSnapshot) {
			t.Errorf("%s: %v matches ErrNoSnapshot", name, err)
		}
		if got := c.dst.read(dst, "mine"); got != before {
			t.Errorf("%s: refused (%v), the destination's own key reads %v, was %v: changed", name, err, got, before)
		}
		if got := c.dst.read(dst, "theirs"); got != 0 {
			t.Errorf("%s: refused (%v), the source's key reads %v in the destination", name, err, got)
		}
	}
}

// a97OwnDest is a Destination of a user's own: it restores a rotator and
// has neither SnapshotSize nor Reset.
type a97OwnDest struct{ r *rotator.Rotator }

func (d a97OwnDest) ReadFrom(r io.Reader) (int64, error) { return d.r.ReadFrom(r) }

// TestAudit97SnapLoadOwnDestinationExactFile: the control of the finding
// below: a Destination of one's own without SnapshotSize loads a regular
// file of exactly the snapshot, and refuses a truncated one unchanged
// (the rotator publishes only on success).
func TestAudit97SnapLoadOwnDestinationExactFile(t *testing.T) {
	dir := t.TempDir()
	clk := sketchtest.NewFakeClock()
	clk.Set(a97T0)
	o := a97RotatorObj("rotator", 2, 64)
	src := o.mk(t, clk)
	o.mark(src, "k")
	data := a97Bytes(t, src)
	path := filepath.Join(dir, "own.snap")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := o.mk(t, clk).(*rotator.Rotator)
	if err := snapshot.Load(path, a97OwnDest{dst}); err != nil {
		t.Fatal(err)
	}
	if got := dst.QueryString("k"); got != 7 {
		t.Fatalf("restored k = %v, want 7", got)
	}
	short := filepath.Join(dir, "short.snap")
	if err := os.WriteFile(short, data[:len(data)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	dst2 := o.mk(t, clk).(*rotator.Rotator)
	if err := snapshot.Load(short, a97OwnDest{dst2}); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("Load of a truncated file: %v, want ErrCorruptSnapshot", err)
	}
	if got := dst2.QueryString("k"); got != 0 {
		t.Fatalf("a refused truncated file restored k = %v", got)
	}
}

// TestAudit97SnapLoadDocumentedOwnDestinationTrailingRegularFile (audit
// 97; documented at stop 59, the text below says what was wrong; Load's
// doc and docs/snapshots.md now state it, and the test asserts it). Load's
// doc: "On any error it returns a *LoadError and dst is left empty, as
// built"; docs/snapshots.md "Left for later" confines the exception to
// "`Load` into a `Destination` of your own without `SnapshotSize`, from a
// file that is not a regular one (a stream)". From a regular file with
// one trailing byte after a rotator's snapshot, Load into such a
// Destination (wrapping a rotator: no Reset) returns ErrCorruptSnapshot
// ("file has trailing bytes") and the rotator is restored (k reads 7):
// the size check needs SnapshotSize, so a regular file is no better
// than a stream here.
func TestAudit97SnapLoadDocumentedOwnDestinationTrailingRegularFile(t *testing.T) {
	dir := t.TempDir()
	clk := sketchtest.NewFakeClock()
	clk.Set(a97T0)
	o := a97RotatorObj("rotator", 2, 64)
	src := o.mk(t, clk)
	o.mark(src, "k")
	data := append(a97Bytes(t, src), 0)
	path := filepath.Join(dir, "trailing.snap")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := o.mk(t, clk).(*rotator.Rotator)
	err := snapshot.Load(path, a97OwnDest{dst})
	if !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("Load of a snapshot with a trailing byte: %v, want ErrCorruptSnapshot", err)
	}
	if got := dst.QueryString("k"); got != 7 {
		t.Errorf("Load refused a regular file (%v); a Destination without SnapshotSize or Reset stays restored (Load's doc): k = %v, want 7", err, got)
	}
}

// TestAudit97SnapChainAdoptsSeed: three processes, each built with its
// own seed: A writes, B loads (adopting A's seed), adds keys and saves
// through a Saver's Close, C loads B's file. The snapshot's seed is the
// one B adopted (limit/doc.go: "the snapshot's seed replaces the
// limiter's ... so every key maps to the cells it had"; meter/doc.go the
// same), so C reads every key, A's and B's, exactly as B does, on the
// Buckets and count-min limiters and both meters (the clock does not
// move).
func TestAudit97SnapChainAdoptsSeed(t *testing.T) {
	dir := t.TempDir()
	type proc struct {
		name  string
		mk    func(seed uint64, clk *sketchtest.FakeClock) any
		mark  func(o any, key string)
		read  func(o any, key string) float64
		fresh float64 // what a key never seen reads
	}
	at := time.UnixMilli(a97T0)
	procs := []proc{
		{"buckets", func(seed uint64, clk *sketchtest.FakeClock) any {
			return limit.MustNew(1, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithCapacity(500, 0.01), limit.WithSeed(seed))
		}, func(o any, k string) { o.(*limit.Limiter).AllowN(at, k, 1+len(k)%7) },
			func(o any, k string) float64 { return o.(*limit.Limiter).Tokens(k) }, 20},
		{"countmin", func(seed uint64, clk *sketchtest.FakeClock) any {
			return limit.MustNew(1, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(3, 512), limit.WithSeed(seed))
		}, func(o any, k string) { o.(*limit.Limiter).AllowN(at, k, 1+len(k)%7) },
			func(o any, k string) float64 { return o.(*limit.Limiter).Tokens(k) }, 20},
		{"rate", func(seed uint64, clk *sketchtest.FakeClock) any {
			r, _ := meter.NewRate(time.Minute, meter.WithClock(clk), meter.WithSize(3, 512), meter.WithSeed(seed))
			return r
		}, func(o any, k string) { o.(*meter.Rate).ObserveAt(at, k, float64(1+len(k)%7)) },
			func(o any, k string) float64 { return o.(*meter.Rate).PerSecond(k) }, 0},
		{"novelty", func(seed uint64, clk *sketchtest.FakeClock) any {
			n, _ := meter.NewNovelty(time.Minute, meter.WithClock(clk), meter.WithSize(3, 512), meter.WithSeed(seed))
			return n
		}, func(o any, k string) { o.(*meter.Novelty).Seen(k) },
			func(o any, k string) float64 {
				if o.(*meter.Novelty).Contains(k) {
					return 1
				}
				return 0
			}, 0},
	}
	keys := func(prefix string) []string {
		var ks []string
		for i := range 40 {
			ks = append(ks, prefix+string(rune('a'+i%26))+string(rune('a'+i/26)))
		}
		return ks
	}
	for _, p := range procs {
		clk := sketchtest.NewFakeClock()
		clk.Set(a97T0)
		path := filepath.Join(dir, p.name+".snap")
		a := p.mk(1, clk)
		for _, k := range keys("a-") {
			p.mark(a, k)
		}
		if err := snapshot.WriteFile(path, a.(snapshot.Source)); err != nil {
			t.Fatal(err)
		}
		b := p.mk(2, clk)
		if err := snapshot.Load(path, b.(snapshot.Destination)); err != nil {
			t.Fatalf("%s: B's Load: %v", p.name, err)
		}
		sv, err := snapshot.NewSaver(path, time.Hour, b.(snapshot.Source))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys("b-") {
			p.mark(b, k)
		}
		if err := sv.Close(); err != nil {
			t.Fatalf("%s: Close: %v", p.name, err)
		}
		c := p.mk(3, clk)
		if err := snapshot.Load(path, c.(snapshot.Destination)); err != nil {
			t.Fatalf("%s: C's Load: %v", p.name, err)
		}
		for _, k := range append(keys("a-"), keys("b-")...) {
			want := p.read(b, k)
			if want == p.fresh {
				t.Fatalf("%s: B reads %s as never seen", p.name, k)
			}
			if got := p.read(c, k); got != want {
				t.Errorf("%s: C reads %s as %v, B as %v", p.name, k, got, want)
			}
		}
	}
}
