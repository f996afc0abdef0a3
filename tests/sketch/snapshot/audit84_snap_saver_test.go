package snapshot_test

// Audit 84: snapshot.Saver, WriteFile and Load. A failed save keeps the
// previous complete file and leaves no temporary file; Close is
// idempotent (also when called from several goroutines, and when its
// final save fails); NewSaver removes exactly its path's stray temporary
// files; Load of a missing, empty, truncated, overlong, corrupt or
// foreign file, or of a directory, is a *LoadError with the documented
// matches, and leaves the destination empty as built.

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func audit84snapSketch(t testing.TB, clk sketch.Clock) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 128, Decay: decay.Exponential(0.01), Hi: 1e6, Seed: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func audit84snapList(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// audit84snapFailing writes half a snapshot of s, then fails.
type audit84snapFailing struct{ s *sketch.Sketch }

var errAudit84snapBoom = errors.New("audit84: boom")

func (f audit84snapFailing) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	if _, err := f.s.WriteTo(&b); err != nil {
		return 0, err
	}
	n, _ := w.Write(b.Bytes()[:b.Len()/2])
	return int64(n), errAudit84snapBoom
}

// TestAudit84SnapFailedSaveKeepsPrevious: a save whose source fails
// midway leaves the previous snapshot in place, byte for byte, and no
// temporary file (package doc: "the target holds either the previous
// complete snapshot or the new complete one, never a mix").
func TestAudit84SnapFailedSaveKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.snap")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	s := audit84snapSketch(t, clk)
	s.UpdateString("k", 42)
	if err := snapshot.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	prev, _ := os.ReadFile(path)
	s.UpdateString("k", 1000)
	err := snapshot.WriteFile(path, audit84snapFailing{s})
	if !errors.Is(err, errAudit84snapBoom) {
		t.Fatalf("WriteFile of a failing source: %v, want it to wrap the cause", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(prev, now) {
		t.Fatal("a failed save changed the previous snapshot")
	}
	if names := audit84snapList(t, dir); len(names) != 1 || names[0] != "state.snap" {
		t.Fatalf("a failed save left %v", names)
	}
	// Through a Saver: LastError reports it, Saves does not count it,
	// OnError and OnSave see it, the file stays.
	var mu sync.Mutex
	var onErr, onSave []error
	sv, err := snapshot.NewSaver(path, time.Hour, audit84snapFailing{s},
		snapshot.OnError(func(e error) { mu.Lock(); onErr = append(onErr, e); mu.Unlock() }),
		snapshot.OnSave(func(e error) { mu.Lock(); onSave = append(onSave, e); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Save(); !errors.Is(err, errAudit84snapBoom) || !errors.Is(sv.LastError(), errAudit84snapBoom) || sv.Saves() != 0 {
		t.Fatalf("Save = %v, LastError = %v, Saves = %d", err, sv.LastError(), sv.Saves())
	}
	cerr := sv.Close()
	if !errors.Is(cerr, errAudit84snapBoom) {
		t.Fatalf("Close = %v, want the final save's error", cerr)
	}
	if again := sv.Close(); again != cerr {
		t.Fatalf("second Close = %v, want the same error %v", again, cerr)
	}
	mu.Lock()
	if len(onErr) != 2 || len(onSave) != 2 {
		t.Fatalf("OnError called %d times, OnSave %d, want 2 each (Save, Close)", len(onErr), len(onSave))
	}
	mu.Unlock()
	if now, _ := os.ReadFile(path); !bytes.Equal(prev, now) {
		t.Fatal("failed saves changed the previous snapshot")
	}
	if names := audit84snapList(t, dir); len(names) != 1 {
		t.Fatalf("failed saves left %v", names)
	}
	dst := audit84snapSketch(t, clk)
	if err := snapshot.Load(path, dst); err != nil {
		t.Fatal(err)
	}
	if got := dst.QueryString("k"); got != 42 {
		t.Fatalf("restored %v, want the previous snapshot's 42", got)
	}
}

// TestAudit84SnapCloseIdempotentConcurrent: Close from 8 goroutines at
// once, then again: one final save, every call the same nil error,
// Saves counts it once.
func TestAudit84SnapCloseIdempotentConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.snap")
	s := audit84snapSketch(t, nil)
	s.UpdateString("k", 5)
	var saves sync.Map
	n := 0
	var mu sync.Mutex
	sv, err := snapshot.NewSaver(path, time.Hour, s, snapshot.OnSave(func(e error) { mu.Lock(); n++; mu.Unlock(); saves.Store(n, e) }))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = sv.Close() }()
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			t.Fatalf("Close #%d = %v", i, e)
		}
	}
	if e := sv.Close(); e != nil {
		t.Fatal(e)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 1 || sv.Saves() != 1 {
		t.Fatalf("%d saves reported, Saves() = %d, want 1", n, sv.Saves())
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// TestAudit84SnapStrayRemoval: NewSaver removes path + ".tmp-*" files of
// its own path only: not another path's, not a directory, not the
// target, and a path with glob metacharacters works (package doc: "A
// crash may leave a stray temporary file (name + ".tmp-*"), which the
// next Saver on the same path removes").
func TestAudit84SnapStrayRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "st[a]*?.snap")
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("st[a]*?.snap.tmp-123")
	write("st[a]*?.snap.tmp-")    // no digits: not os.CreateTemp's name, kept since stop 65
	write("sta.snap.tmp-1")       // a glob of path would match it
	write("st[a]*?.snap.tmp")     // no dash: not a temporary file
	write("other.snap.tmp-9")     // another path's
	write("st[a]*?.snapX.tmp-1")  // another path's
	write("xst[a]*?.snap.tmp-77") // another path's
	if err := os.Mkdir(filepath.Join(dir, "st[a]*?.snap.tmp-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := audit84snapSketch(t, nil)
	sv, err := snapshot.NewSaver(path, time.Hour, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	got := audit84snapList(t, dir)
	want := []string{"other.snap.tmp-9", "sta.snap.tmp-1", "st[a]*?.snap", "st[a]*?.snap.tmp", "st[a]*?.snap.tmp-", "st[a]*?.snap.tmp-dir", "st[a]*?.snapX.tmp-1", "xst[a]*?.snap.tmp-77"}
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("after NewSaver and Close: %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("after NewSaver and Close: %v, want %v", got, want)
		}
	}
	dst := audit84snapSketch(t, nil)
	if err := snapshot.Load(path, dst); err != nil {
		t.Fatal(err)
	}
}

// TestAudit84SnapLoadErrors: every refusal a *LoadError with the
// documented matches, and the destination empty as built, for a sketch,
// a rotator, a limiter and a meter.
func TestAudit84SnapLoadErrors(t *testing.T) {
	dir := t.TempDir()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	type dest struct {
		name  string
		mk    func() snapshot.Destination
		fill  func(d snapshot.Destination)
		empty func(d snapshot.Destination) bool
	}
	dests := []dest{
		{"sketch", func() snapshot.Destination { return audit84snapSketch(t, clk) },
			func(d snapshot.Destination) { d.(*sketch.Sketch).UpdateString("k", 9) },
			func(d snapshot.Destination) bool { return d.(*sketch.Sketch).QueryString("k") == 0 }},
		{"rotator", func() snapshot.Destination {
			r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Clock: clk}, Period: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
			func(d snapshot.Destination) { d.(*rotator.Rotator).UpdateString("k", 9) },
			func(d snapshot.Destination) bool { return d.(*rotator.Rotator).QueryString("k") == 0 }},
		{"limiter", func() snapshot.Destination {
			return limit.MustNew(1, 3, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(2, 64))
		},
			func(d snapshot.Destination) { l := d.(*limit.Limiter); l.Allow("k"); l.Allow("k") },
			func(d snapshot.Destination) bool { return d.(*limit.Limiter).Tokens("k") == 3 }},
		{"limiter-buckets", func() snapshot.Destination {
			return limit.MustNew(1, 3, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithCapacity(50, 0.01))
		},
			func(d snapshot.Destination) { l := d.(*limit.Limiter); l.Allow("k"); l.Allow("k") },
			func(d snapshot.Destination) bool { return d.(*limit.Limiter).Tokens("k") == 3 }},
		{"novelty", func() snapshot.Destination {
			n, err := meter.NewNovelty(time.Minute, meter.WithClock(clk), meter.WithSize(2, 64))
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
			func(d snapshot.Destination) { d.(*meter.Novelty).Seen("k") },
			func(d snapshot.Destination) bool { return !d.(*meter.Novelty).Contains("k") }},
	}
	for _, d := range dests {
		t.Run(d.name, func(t *testing.T) {
			src := d.mk()
			d.fill(src)
			path := filepath.Join(dir, d.name+".snap")
			if err := snapshot.WriteFile(path, src.(snapshot.Source)); err != nil {
				t.Fatal(err)
			}
			good, _ := os.ReadFile(path)
			// The good file loads, and holds the fill.
			if dst := d.mk(); snapshot.Load(path, dst) != nil || d.empty(dst) {
				t.Fatal("the good snapshot does not load")
			}
			cases := []struct {
				name    string
				data    []byte // nil: no file
				dir     bool
				corrupt bool
				eof     bool
			}{
				{name: "missing"},
				{name: "empty", data: []byte{}, corrupt: true, eof: true},
				{name: "truncated", data: good[:len(good)-1], corrupt: true, eof: true},
				{name: "half", data: good[:len(good)/2], corrupt: true, eof: true},
				{name: "trailing", data: append(bytes.Clone(good), 0), corrupt: true},
				{name: "flipped-last", data: func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 1; return b }(), corrupt: true},
				{name: "flipped-middle", data: func() []byte { b := bytes.Clone(good); b[len(b)/2+3] ^= 0x10; return b }(), corrupt: true},
				{name: "directory", dir: true},
			}
			for _, c := range cases {
				p := filepath.Join(dir, d.name+"-"+c.name)
				switch {
				case c.dir:
					if err := os.Mkdir(p, 0o755); err != nil {
						t.Fatal(err)
					}
				case c.data != nil:
					if err := os.WriteFile(p, c.data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				dst := d.mk()
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("%s: Load panicked: %v", c.name, r)
						}
					}()
					err = snapshot.Load(p, dst)
				}()
				var le *snapshot.LoadError
				if !errors.As(err, &le) || le.Path != p {
					t.Fatalf("%s: Load = %v (%T), want a *LoadError for %s", c.name, err, err, p)
				}
				missing := c.data == nil && !c.dir
				if errors.Is(err, snapshot.ErrNoSnapshot) != missing || errors.Is(err, fs.ErrNotExist) != missing {
					t.Fatalf("%s: %v: ErrNoSnapshot %v, fs.ErrNotExist %v", c.name, err, errors.Is(err, snapshot.ErrNoSnapshot), errors.Is(err, fs.ErrNotExist))
				}
				if c.corrupt && !errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Fatalf("%s: %v does not match ErrCorruptSnapshot", c.name, err)
				}
				if c.eof && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("%s: %v does not match io.ErrUnexpectedEOF", c.name, err)
				}
				if !d.empty(dst) {
					t.Fatalf("%s: Load refused (%v), and the destination is not empty as built", c.name, err)
				}
			}
		})
	}
}
