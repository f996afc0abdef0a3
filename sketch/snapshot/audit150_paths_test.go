package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// a150Names lists dir's entries, sorted.
func a150Names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	sort.Strings(got)
	return got
}

// TestAudit150CheckPathEdges: checkPath (59e24f5) refuses only a path
// whose base names no file: "a/.", "a/..", "a/./", "a/.//", "/" and "";
// it takes "a/./b", "a/../b" (the file b in a and in a's parent), a base
// of three dots "..." and a base of digits only, each written, loaded and
// saved by a Saver; nothing else lands in the directory.
func TestAudit150CheckPathEdges(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := a145Sketch(t, 7)
	for _, p := range []string{dir + "/a/.", dir + "/a/..", dir + "/a/./", dir + "/a/.//", "/", "", dir + "/a/"} {
		if err := snapshot.WriteFile(p, s); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("WriteFile(%q) = %v, want ErrInvalidConfig", p, err)
		}
		if sv, err := snapshot.NewSaver(p, time.Hour, s); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("NewSaver(%q) = %v, want ErrInvalidConfig", p, err)
			if sv != nil {
				sv.Close()
			}
		}
	}
	for _, p := range []string{dir + "/a/./b", dir + "/a/../b", dir + "/a/...", dir + "/a/0123", dir + "/a/..b", dir + "/a/ ."} {
		if err := snapshot.WriteFile(p, s); err != nil {
			t.Errorf("WriteFile(%q): %v", p, err)
			continue
		}
		sv, err := snapshot.NewSaver(p, time.Hour, s)
		if err != nil {
			t.Fatalf("NewSaver(%q): %v", p, err)
		}
		if err := sv.Close(); err != nil {
			t.Errorf("Saver(%q).Close: %v", p, err)
		}
		d, err := sketch.New(sketch.Config{Levels: 2, Hi: 1e6, CellsPerLevel: 64, Seed: 145})
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshot.Load(p, d); err != nil || d.QueryString("k") != 7 {
			t.Errorf("Load(%q): %v, k = %v", p, err, d.QueryString("k"))
		}
	}
	want := []string{" .", "...", "..b", "0123", "b"}
	if got := a150Names(t, filepath.Join(dir, "a")); len(got) != len(want) {
		t.Errorf("a holds %q, want %q", got, want)
	} else {
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("a holds %q, want %q", got, want)
				break
			}
		}
	}
	if got := a150Names(t, dir); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("dir holds %q, want [a b]", got)
	}
}

// TestAudit150DigitsBaseStrays: for a path whose base is digits only
// ("123") or three dots, NewSaver removes base + ".tmp-" + digits and
// nothing else: not "1234", "12", "123.tmp", "123tmp-1", "1.tmp-123",
// "....tmp-1x", "...tmp-1".
func TestAudit150DigitsBaseStrays(t *testing.T) {
	dir := t.TempDir()
	strays := []string{"123.tmp-9", "123.tmp-00", "....tmp-4", "....tmp-0"}
	keep := []string{"1234", "12", "123.tmp", "123tmp-1", "1.tmp-123", "....tmp-1x", "...tmp-1", "123.tmp-9.tmp-1", "0"}
	for _, n := range append(append([]string{}, strays...), keep...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := a145Sketch(t, 1)
	for _, base := range []string{"123", "..."} {
		sv, err := snapshot.NewSaver(filepath.Join(dir, base), time.Hour, s)
		if err != nil {
			t.Fatalf("NewSaver(%q): %v", base, err)
		}
		if err := sv.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := append([]string{"123", "..."}, keep...)
	sort.Strings(want)
	got := a150Names(t, dir)
	if len(got) != len(want) {
		t.Fatalf("the directory holds %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("the directory holds %q, want %q", got, want)
		}
	}
}
