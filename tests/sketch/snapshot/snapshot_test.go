package snapshot_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func cfg() sketch.Config {
	return sketch.Config{Levels: 4, CellsPerLevel: 1 << 12, Hi: 1e12, Decay: decay.None()}
}

func newSketch(t testing.TB) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSaverPeriodicAndClose: the Saver saves every interval and on Close
// (idempotent), leaves no goroutine and no temporary file behind, and
// Load restores what it saved.
func TestSaverPeriodicAndClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "s.snap")
	os.WriteFile(path+".tmp-2718281828", []byte("junk"), 0o644) // a crash's leftover (os.CreateTemp's digits)
	s := newSketch(t)
	var saved atomic.Int64
	sv, err := snapshot.NewSaver(path, 5*time.Millisecond, s, snapshot.OnSave(func(err error) {
		if err == nil {
			saved.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("a"), 3)
	deadline := time.Now().Add(10 * time.Second)
	for saved.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if saved.Load() < 2 {
		t.Fatalf("%d periodic saves in 10 s", saved.Load())
	}
	s.Update([]byte("b"), 4) // only the final save on Close has it
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if sv.LastError() != nil || sv.Saves() < 3 {
		t.Fatalf("LastError %v, Saves %d", sv.LastError(), sv.Saves())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	r := newSketch(t)
	if err := snapshot.Load(path, r); err != nil {
		t.Fatal(err)
	}
	if r.Query([]byte("a")) != 3 || r.Query([]byte("b")) != 4 {
		t.Fatalf("loaded a=%v b=%v", r.Query([]byte("a")), r.Query([]byte("b")))
	}
}

// TestSaverErrors: a save that cannot be written is reported through
// Save, LastError and OnError.
func TestSaverErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	var got atomic.Value
	path := filepath.Join(t.TempDir(), "missing-dir", "s.snap")
	sv, err := snapshot.NewSaver(path, time.Hour, newSketch(t), snapshot.OnError(func(err error) { got.Store(err) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Save(); err == nil || sv.LastError() == nil || got.Load() == nil {
		t.Fatalf("Save %v, LastError %v, OnError %v", err, sv.LastError(), got.Load())
	}
	if err := sv.Close(); err == nil {
		t.Fatal("Close: no error")
	}
	if _, err := snapshot.NewSaver(path, 0, newSketch(t)); err == nil {
		t.Fatal("interval 0 accepted")
	}
}

// TestLoadErrors: a missing, truncated, corrupt, overlong or mismatched
// file is a *LoadError of the right kind, and the destination stays
// empty.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.snap")
	src := newSketch(t)
	src.Update([]byte("a"), 5)
	if err := snapshot.WriteFile(path, src); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	check := func(name string, data []byte, kinds ...error) {
		t.Helper()
		p := filepath.Join(dir, name)
		if data != nil {
			os.WriteFile(p, data, 0o644)
		}
		dst := newSketch(t)
		err := snapshot.Load(p, dst)
		var le *snapshot.LoadError
		if !errors.As(err, &le) {
			t.Errorf("%s: %v is not a *LoadError", name, err)
		}
		for _, k := range kinds {
			if !errors.Is(err, k) {
				t.Errorf("%s: %v does not match %v", name, err, k)
			}
		}
		if dst.Query([]byte("a")) != 0 {
			t.Errorf("%s: destination not empty", name)
		}
		t.Logf("%s: %v", name, err)
	}
	check("missing", nil, snapshot.ErrNoSnapshot, fs.ErrNotExist)
	check("empty", []byte{}, sketch.ErrCorruptSnapshot, io.ErrUnexpectedEOF)
	check("truncated", good[:len(good)/2], sketch.ErrCorruptSnapshot, io.ErrUnexpectedEOF)
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x40
	check("corrupt", bad, sketch.ErrCorruptSnapshot)
	check("overlong", append(append([]byte(nil), good...), 0), sketch.ErrCorruptSnapshot)
	other := cfg()
	other.Seed = 9
	os2, _ := sketch.New(other)
	if err := snapshot.WriteFile(filepath.Join(dir, "other"), os2); err != nil {
		t.Fatal(err)
	}
	check("other", nil, sketch.ErrSnapshotMismatch)
}

// TestRotatorSaveLoad: a rotator is a Source and a Destination too.
func TestRotatorSaveLoad(t *testing.T) {
	rc := rotator.Config{Sketch: cfg(), Period: time.Hour}
	r, err := rotator.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	r.Update([]byte("k"), 2)
	path := filepath.Join(t.TempDir(), "r.snap")
	if err := snapshot.WriteFile(path, r); err != nil {
		t.Fatal(err)
	}
	r2, _ := rotator.New(rc)
	if err := snapshot.Load(path, r2); err != nil {
		t.Fatal(err)
	}
	if r2.Query([]byte("k")) != 2 {
		t.Fatalf("loaded %v", r2.Query([]byte("k")))
	}
}
