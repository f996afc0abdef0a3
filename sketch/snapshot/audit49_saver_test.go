package snapshot_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func a49Sketch(t *testing.T) *sketch.Sketch {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Seed: 9, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("k", 4)
	return s
}

func a49Touch(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("stray"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func a49Exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestAudit49FixedSaverStrayCleanupGlobsPath (fixed: strays are matched by
// name in the directory, removeStrays): sketch/snapshot/snapshot.go
// (package doc): "A crash may leave a stray temporary file (name +
// ".tmp-*"), which the next Saver on the same path removes"; Saver doc:
// "NewSaver removes the path's stray temporary files". NewSaver passes
// path + ".tmp-*" to filepath.Glob, so glob metacharacters in the path
// ('[', '*', '?', in the file name or in any directory) are patterns:
// for the path "dir/state[1].snap" the Saver keeps its own stray
// "dir/state[1].snap.tmp-1" and deletes "dir/state1.snap.tmp-2", the
// temporary file of another path, which may be another Saver's save in
// progress.
func TestAudit49FixedSaverStrayCleanupGlobsPath(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "state[1].snap")
	mine := own + ".tmp-111"
	other := filepath.Join(dir, "state1.snap.tmp-222") // another path's temporary file
	a49Touch(t, mine)
	a49Touch(t, other)
	sv, err := snapshot.NewSaver(own, time.Hour, a49Sketch(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	if a49Exists(mine) {
		t.Errorf("NewSaver(%q) left its own stray temporary file %q (package doc: \"which the next Saver on the same path removes\")", own, filepath.Base(mine))
	}
	if !a49Exists(other) {
		t.Errorf("NewSaver(%q) removed %q, the temporary file of another path (filepath.Glob reads '[1]' as a pattern)", own, filepath.Base(other))
	}
	// A directory with brackets: the same.
	sub := filepath.Join(dir, "inst[a]")
	subTwin := filepath.Join(dir, "insta")
	for _, d := range []string{sub, subTwin} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mine2 := filepath.Join(sub, "s.snap.tmp-1")
	other2 := filepath.Join(subTwin, "s.snap.tmp-2")
	a49Touch(t, mine2)
	a49Touch(t, other2)
	sv2, err := snapshot.NewSaver(filepath.Join(sub, "s.snap"), time.Hour, a49Sketch(t))
	if err != nil {
		t.Fatal(err)
	}
	sv2.Close()
	if a49Exists(mine2) || !a49Exists(other2) {
		t.Errorf("NewSaver(%q): own stray kept %v (want false), other directory's file kept %v (want true)", filepath.Join(sub, "s.snap"), a49Exists(mine2), a49Exists(other2))
	}
}

// TestAudit49SaverStrayCleanupPlainPath: the control. With a plain path
// NewSaver removes its own stray temporary files and leaves a sibling
// path's (state.snap2.tmp-*) alone.
func TestAudit49SaverStrayCleanupPlainPath(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "state.snap")
	mine := own + ".tmp-111"
	sibling := filepath.Join(dir, "state.snap2.tmp-222")
	a49Touch(t, mine)
	a49Touch(t, sibling)
	sv, err := snapshot.NewSaver(own, time.Hour, a49Sketch(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	if a49Exists(mine) || !a49Exists(sibling) {
		t.Errorf("own stray kept %v (want false), sibling's kept %v (want true)", a49Exists(mine), a49Exists(sibling))
	}
}

// a49FailingSource writes part of a real snapshot, then fails.
type a49FailingSource struct {
	s *sketch.Sketch
	n int64
}

var errA49Source = errors.New("audit49: source failed")

func (f a49FailingSource) WriteTo(w io.Writer) (int64, error) {
	b, err := f.s.MarshalBinary()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b[:f.n])
	if err != nil {
		return int64(n), err
	}
	return int64(n), errA49Source
}

// TestAudit49WriteFileFailureKeepsPrevious: a save whose Source fails
// half way leaves the previous complete snapshot at the path, no
// temporary file behind, and an error that wraps the Source's; Load then
// restores the previous snapshot. A Saver reports the failure through
// LastError, OnError and OnSave, and Saves does not count it.
func TestAudit49WriteFileFailureKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.snap")
	good := a49Sketch(t)
	if err := snapshot.WriteFile(path, good); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	for _, n := range []int64{0, 10, 100, int64(len(before)) - 1, int64(len(before))} {
		err := snapshot.WriteFile(path, a49FailingSource{good, n})
		if !errors.Is(err, errA49Source) {
			t.Fatalf("n=%d: error %v does not wrap the source's", n, err)
		}
		after, _ := os.ReadFile(path)
		if string(after) != string(before) {
			t.Fatalf("n=%d: a failed save changed the file", n)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "s.snap.tmp-*")); len(m) != 0 {
			t.Fatalf("n=%d: temporary files left: %v", n, m)
		}
	}
	var onErr, onSave int
	sv, err := snapshot.NewSaver(path, time.Hour, a49FailingSource{good, 50},
		snapshot.OnError(func(error) { onErr++ }), snapshot.OnSave(func(e error) {
			if e != nil {
				onSave++
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Save(); !errors.Is(err, errA49Source) {
		t.Fatalf("Save: %v", err)
	}
	if !errors.Is(sv.LastError(), errA49Source) || sv.Saves() != 0 {
		t.Fatalf("LastError %v, Saves %d", sv.LastError(), sv.Saves())
	}
	if err := sv.Close(); !errors.Is(err, errA49Source) {
		t.Fatalf("Close: %v", err)
	}
	if err2 := sv.Close(); err2 == nil || err2.Error() != sv.LastError().Error() {
		t.Fatalf("second Close: %v", err2)
	}
	if onErr != 2 || onSave != 2 {
		t.Fatalf("OnError called %d times, OnSave(err) %d, want 2 each", onErr, onSave)
	}
	dst, _ := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Seed: 9, Clock: sketchtest.NewFakeClock()})
	if err := snapshot.Load(path, dst); err != nil {
		t.Fatal(err)
	}
	if got := dst.QueryString("k"); got != 4 {
		t.Fatalf("Load after failed saves: k = %v, want 4", got)
	}
}
