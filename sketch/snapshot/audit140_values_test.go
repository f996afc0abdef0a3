package snapshot_test

// Audit 140: special values for snapshot's parameters: paths with no file
// name, extreme intervals, nil callbacks.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func a140Sketch(t *testing.T) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{Hi: 10, CellsPerLevel: 16, Seed: 140})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAudit140FixedSaverDirPathRemovesForeignFiles (audit 140; fixed at stop 65, the text below
// says what was wrong): "Use one Saver per
// path (NewSaver removes the path's stray temporary files)"; "Stray
// temporary files of an earlier crash are removed" (NewSaver doc); "A crash
// may leave a stray temporary file (name + ".tmp-*"), which the next Saver
// on the same path removes" (package doc). A path with no file name, ""
// or "dir/" (a trailing slash), has base name "", so removeStrays
// (snapshot.go:156) deletes every file in the directory whose name starts
// with ".tmp-": files no Saver made (another program's ".tmp-upload",
// say). NewSaver then returns a nil error, and every save fails ("rename
// ... file exists" for "dir/"). Observed: NewSaver(dir+"/") and
// NewSaver("") (in the working directory) delete a foreign ".tmp-foreign".
// Expected: only the path's own strays go; a path with no file name is a
// *ConfigError naming path (or removes nothing). Fix: in NewSaver
// (snapshot.go:94) refuse a path whose base name is "" (filepath.Base
// after splitPath), or return early in removeStrays when base == "".
func TestAudit140FixedSaverDirPathRemovesForeignFiles(t *testing.T) {
	s := a140Sketch(t)
	dir := t.TempDir()
	t.Chdir(dir)
	for _, path := range []string{dir + string(filepath.Separator), ""} {
		foreign := filepath.Join(dir, ".tmp-foreign")
		if err := os.WriteFile(foreign, []byte("not a snapshot"), 0o600); err != nil {
			t.Fatal(err)
		}
		sv, err := snapshot.NewSaver(path, time.Hour, s)
		if sv != nil {
			_ = sv.Close()
		}
		if _, statErr := os.Stat(foreign); statErr != nil {
			t.Errorf("NewSaver(%q) = %v: removed %s, a file no Saver made (%v)", path, err, foreign, statErr)
		}
	}
}

// TestAudit140SaverOddArguments: the extreme intervals a caller may give
// (1 ns: saving back to back; MaxInt64: never before Close) and nil
// callbacks are accepted and work; WriteFile and Load with an empty path
// fail with errors (Load's a *LoadError matching ErrNoSnapshot) and leave
// no temporary file in the working directory.
func TestAudit140SaverOddArguments(t *testing.T) {
	s := a140Sketch(t)
	s.UpdateString("k", 3)
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		interval time.Duration
		opts     []snapshot.Option
		minSaves uint64
	}{
		{"1ns", 1, nil, 2},
		{"MaxInt64", time.Duration(1<<63 - 1), nil, 1},
		{"nil OnError and OnSave", time.Hour, []snapshot.Option{snapshot.OnError(nil), snapshot.OnSave(nil)}, 1},
	} {
		path := filepath.Join(dir, c.name+".snap")
		sv, err := snapshot.NewSaver(path, c.interval, s, c.opts...)
		if err != nil {
			t.Errorf("%s: NewSaver: %v", c.name, err)
			continue
		}
		if c.interval == 1 {
			for i := 0; i < 200 && sv.Saves() == 0; i++ {
				time.Sleep(time.Millisecond)
			}
		}
		if err := sv.Close(); err != nil {
			t.Errorf("%s: Close: %v", c.name, err)
		}
		if got := sv.Saves(); got < c.minSaves {
			t.Errorf("%s: %d saves, want at least %d", c.name, got, c.minSaves)
		}
		d, err := sketch.New(s.Config())
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshot.Load(path, d); err != nil || d.QueryString("k") != 3 {
			t.Errorf("%s: Load = %v, key reads %v; want nil, 3", c.name, err, d.QueryString("k"))
		}
	}
	t.Chdir(dir)
	if err := snapshot.WriteFile("", s); err == nil {
		t.Errorf("WriteFile(\"\") = nil, want an error")
	}
	if err := snapshot.Load("", s); !errors.Is(err, snapshot.ErrNoSnapshot) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(\"\") = %v, want a *LoadError matching ErrNoSnapshot", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(m) != 0 {
		t.Errorf("WriteFile(\"\") left %v", m)
	}
	// The zero meters are refused as sources, as the zero sketch and
	// rotator are (audit 134): their first save would panic in the
	// Saver's goroutine.
	for _, src := range []snapshot.Source{&meter.Rate{}, &meter.Novelty{}} {
		if _, err := snapshot.NewSaver(filepath.Join(dir, "z.snap"), time.Hour, src); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("NewSaver(zero %T) = %v, want ErrInvalidConfig", src, err)
		}
	}
}
