//go:build unix

package snapshot_test

// Audit 145: a review of audits 140 and 144's snapshot changes: the
// refusal of a non-regular path (Lstat: a symbolic link is still
// replaced, never followed), the stray rule and the path check.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func a145Sketch(t *testing.T, v float64) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{Levels: 2, Hi: 1e6, CellsPerLevel: 64, Seed: 145})
	if err != nil {
		t.Fatal(err)
	}
	if v != 0 {
		s.UpdateString("k", v)
	}
	return s
}

// TestAudit145LinkToSpecialReplaced: WriteFile's doc: "a symbolic link at
// path is replaced by the file, not followed. Anything else at path that
// is not a regular file (a named pipe, a device ...) is refused". A link
// to a named pipe or to a character device (/dev/null) at the path is a
// link, so it is replaced by the snapshot (WriteFile neither blocks on
// the pipe nor refuses), and the pipe and the device stay what they were;
// the pipe itself at a path is refused with a *fs.PathError naming it.
func TestAudit145LinkToSpecialReplaced(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal("mkfifo:", err)
	}
	targets := map[string]string{"tofifo": fifo, "todevnull": "/dev/null"}
	for n, to := range targets {
		p := filepath.Join(dir, n)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- snapshot.WriteFile(p, a145Sketch(t, 4)) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WriteFile over a link to %s: %v; want the link replaced", to, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("WriteFile over a link to %s blocked for 10 s (it followed the link to a pipe)", to)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("after WriteFile over a link to %s: %v, %v; want a regular file", to, fi, err)
		}
		if fi, err := os.Lstat(to); err != nil || fi.Mode().IsRegular() {
			t.Errorf("the link's target %s changed: %v, %v", to, fi, err)
		}
	}
	err := snapshot.WriteFile(fifo, a145Sketch(t, 1))
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != fifo {
		t.Errorf("WriteFile(named pipe) = %v; want a *fs.PathError naming it", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("the pipe changed: %v, %v", fi, err)
	}
}

// TestAudit145StrayRule: NewSaver removes path + ".tmp-" + digits (the
// names os.CreateTemp gives WriteFile's temporary files, checked here
// against a real one), files and links only, and nothing else: not
// ".tmp-" alone, not digits with a suffix, not another base's, not a
// directory of that name.
func TestAudit145StrayRule(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.snap")
	f, err := os.CreateTemp(dir, "s.snap.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Base(f.Name())
	f.Close()
	strays := []string{real, "s.snap.tmp-0", "s.snap.tmp-007", "s.snap.tmp-4294967295"}
	keep := []string{"s.snap.tmp-", "s.snap.tmp-12a", "s.snap.tmp-1.tmp-2", "s.snap.tmp--1", "s.snap.tmp-+1", "xs.snap.tmp-1", "s.snap.TMP-1", "s.snap.tmp-١"}
	for _, n := range append(strays[1:], keep...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "s.snap.tmp-55"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, "s.snap.tmp-55")
	sv, err := snapshot.NewSaver(p, time.Hour, a145Sketch(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	want := append([]string{"s.snap"}, keep...)
	sort.Strings(want)
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("after NewSaver+Close the directory holds %q; want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("after NewSaver+Close the directory holds %q; want %q", got, want)
		}
	}
}
