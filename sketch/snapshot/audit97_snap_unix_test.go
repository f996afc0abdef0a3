//go:build linux

package snapshot_test

// Audit 97 (package sketch/snapshot), Linux only: a full disk (the file
// size limit, RLIMIT_FSIZE, makes a write fail with EFBIG as ENOSPC
// would: Go ignores SIGXFSZ), the mode of the file, and Load from
// devices and named pipes.
//
// Contract: snapshot.go package doc ("after a crash at any point the
// target holds either the previous complete snapshot or the new complete
// one"), WriteFile ("On an error ... it closes and removes the temporary
// file, and path keeps what it held"), Load ("a file that is not a
// regular one, a named pipe, is read whole into memory first to check
// it"; "On any error it returns a *LoadError and dst is left empty, as
// built"); docs/snapshots.md "What a failed restore leaves" ("From a file
// that is not a regular one (a named pipe, a device) it reads the stream
// whole, that length and one byte more, before touching the destination,
// so a short or overlong stream leaves it unchanged").

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// TestAudit97SnapWriteFileDiskFull: with the process's file size limit
// below the snapshot's size, WriteFile and a Saver's Save fail with an
// error wrapping EFBIG; the previous snapshot stays byte for byte and
// loads, no temporary file is left, LastError reports it and Saves does
// not count it. Once the limit is lifted, the next Save succeeds.
func TestAudit97SnapWriteFileDiskFull(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "full.snap")
	clk := sketchtest.NewFakeClock()
	clk.Set(a97T0)
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 32768, Hi: 1e6, Seed: 5, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("k", 4)
	if err := snapshot.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	prev, err := os.ReadFile(path)
	if err != nil || len(prev) < 500_000 {
		t.Fatalf("the first snapshot: %d bytes, %v", len(prev), err)
	}
	s.UpdateString("k", 10)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal("no RLIMIT_FSIZE:", err)
	}
	if old.Cur != ^uint64(0) && old.Cur < 1<<30 {
		t.Fatalf("RLIMIT_FSIZE already %d: the test needs room to lower it", old.Cur)
	}
	lim := old
	lim.Cur = 64 << 10
	sv, err := snapshot.NewSaver(path, time.Hour, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		sv.Close()
		t.Fatal("cannot set RLIMIT_FSIZE:", err)
	}
	werr := snapshot.WriteFile(path, s)
	serr := sv.Save()
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatalf("cannot restore RLIMIT_FSIZE: %v", err)
	}
	for name, err := range map[string]error{"WriteFile": werr, "Save": serr} {
		if !errors.Is(err, syscall.EFBIG) {
			t.Errorf("%s on a full disk: %v, want an error wrapping EFBIG", name, err)
		}
	}
	if sv.LastError() == nil || sv.Saves() != 0 {
		t.Errorf("after a failed Save: LastError %v, Saves %d", sv.LastError(), sv.Saves())
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, prev) {
		t.Fatal("a save that hit the full disk changed the previous snapshot")
	}
	if st := a97Strays(t, dir); len(st) != 0 {
		t.Errorf("temporary files left: %v", st)
	}
	d, _ := sketch.New(s.Config())
	if err := snapshot.Load(path, d); err != nil || d.QueryString("k") != 4 {
		t.Fatalf("Load after the failed saves: %v, k = %v, want 4", err, d.QueryString("k"))
	}
	if err := sv.Save(); err != nil || sv.Saves() != 1 || sv.LastError() != nil {
		t.Fatalf("Save with room again: %v, Saves %d, LastError %v", err, sv.Saves(), sv.LastError())
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	d, _ = sketch.New(s.Config())
	if err := snapshot.Load(path, d); err != nil || d.QueryString("k") != 14 {
		t.Fatalf("Load after Close: %v, k = %v, want 14", err, d.QueryString("k"))
	}
}

// TestAudit97SnapWriteFileModePrivate: a snapshot holds the hash seed
// (limit/doc.go: "users never see it"), so the file must not be readable
// by others: WriteFile's file is mode 0600 (os.CreateTemp's), also when
// it replaces a file of mode 0644. (No doc states the mode: see the
// audit's report.)
func TestAudit97SnapWriteFileModePrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.snap")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s := a97Sketch(t)
	if err := snapshot.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		t.Errorf("the snapshot's mode is %v: readable by others (it holds the hash seed)", m)
	}
}

// TestAudit97SnapLoadDevices: Load from character devices, which are
// not regular files: /dev/null (an empty stream) is corrupt and
// io.ErrUnexpectedEOF; /dev/zero (endless) is corrupt, read only up to
// the snapshot's length and one byte more. Either way the rotator
// destination keeps what it held.
func TestAudit97SnapLoadDevices(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a97T0)
	for _, c := range []struct {
		dev string
		eof bool
	}{{"/dev/null", true}, {"/dev/zero", false}} {
		if fi, err := os.Stat(c.dev); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Logf("no %s here", c.dev)
			continue
		}
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Clock: clk}, Period: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		r.UpdateString("mine", 3)
		err = snapshot.Load(c.dev, r)
		var le *snapshot.LoadError
		if !errors.As(err, &le) || !errors.Is(err, sketch.ErrCorruptSnapshot) || errors.Is(err, io.ErrUnexpectedEOF) != c.eof {
			t.Errorf("Load(%s) = %v: want a *LoadError matching ErrCorruptSnapshot, io.ErrUnexpectedEOF %v", c.dev, err, c.eof)
		}
		if got := r.QueryString("mine"); got != 3 {
			t.Errorf("Load(%s) refused, and the rotator's key reads %v, was 3", c.dev, got)
		}
	}
}

// TestAudit97SnapLoadFIFOExact: a named pipe carrying exactly a
// rotator's snapshot loads (the stream path, read whole first), and one
// carrying all but its last byte is refused as corrupt with the
// destination unchanged.
func TestAudit97SnapLoadFIFOExact(t *testing.T) {
	dir := t.TempDir()
	clk := sketchtest.NewFakeClock()
	clk.Set(a97T0)
	mk := func() *rotator.Rotator {
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Seed: 8, Clock: clk}, Period: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src := mk()
	src.UpdateString("k", 6)
	data := a97Bytes(t, src)
	for i, c := range []struct {
		data []byte
		ok   bool
	}{{data, true}, {data[:len(data)-1], false}} {
		p := filepath.Join(dir, "fifo"+string(rune('0'+i)))
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal("no named pipes here:", err)
		}
		done := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				done <- err
				return
			}
			_, err = f.Write(c.data)
			f.Close()
			done <- err
		}()
		dst := mk()
		dst.UpdateString("mine", 2)
		err := snapshot.Load(p, dst)
		if werr := <-done; werr != nil {
			t.Fatal(werr)
		}
		if c.ok {
			if err != nil || dst.QueryString("k") != 6 {
				t.Errorf("Load of the exact snapshot from a pipe: %v, k = %v, want 6", err, dst.QueryString("k"))
			}
			continue
		}
		if !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Load of a short pipe: %v, want ErrCorruptSnapshot and io.ErrUnexpectedEOF", err)
		}
		if dst.QueryString("mine") != 2 || dst.QueryString("k") != 0 {
			t.Errorf("a refused pipe changed the rotator: mine %v (was 2), k %v", dst.QueryString("mine"), dst.QueryString("k"))
		}
	}
}
