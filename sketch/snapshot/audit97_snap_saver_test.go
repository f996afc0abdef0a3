package snapshot_test

// Audit 97 (package sketch/snapshot): the Saver and WriteFile.
//
// Contract: snapshot.go, Saver ("Its methods are safe for concurrent
// use"), Save ("writes a snapshot now ... and returns its error, which
// LastError also reports until the next save"), Close ("stops the
// goroutine, writes a final snapshot and returns its error"), WriteFile
// ("On an error, or a panic in src (which goes on up), it closes and
// removes the temporary file, and path keeps what it held").

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func a97Sketch(t *testing.T) *sketch.Sketch {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(a97T0)
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 256, Hi: 1e6, Seed: 5, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func a97Load(t *testing.T, path string) *sketch.Sketch {
	t.Helper()
	d := a97Sketch(t)
	if err := snapshot.Load(path, d); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return d
}

func a97Strays(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.Contains(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// a97PanicOnce panics in its first WriteTo (after writing part of a
// snapshot), then writes s's snapshot.
type a97PanicOnce struct {
	s     *sketch.Sketch
	calls atomic.Int32
}

func (p *a97PanicOnce) WriteTo(w io.Writer) (int64, error) {
	if p.calls.Add(1) == 1 {
		w.Write([]byte("GRDG"))
		panic("a97: source bug")
	}
	return p.s.WriteTo(w)
}

// a97Blocked reports whether a goroutine whose stack holds fn is parked
// on a sync.Mutex (the goroutine header reads "[sync.Mutex.Lock").
func a97Blocked(fn string) bool {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}

// TestAudit97SnapSaverFixedPanicInSaveLocksSaver (audit 97; fixed at
// stop 59, the text below says what was wrong; Save now releases its lock
// on a panic). A Source whose
// WriteTo panics once (a bug in a custom Source or decay law), called
// through Saver.Save by a caller that recovers (an HTTP handler's
// recovery middleware, say). WriteFile lets the panic go on up, as
// documented, and removes its temporary file; but Save took the Saver's
// mutex before WriteFile and releases it only on return, so the mutex
// stays locked: every later LastError, Saves, Save and Close blocks for
// ever (Close never writes its final snapshot). Expected: the Saver's
// methods stay usable ("Its methods are safe for concurrent use"; Close
// "writes a final snapshot and returns its error"); the next save,
// Close's, succeeds, since the Source no longer panics.
func TestAudit97SnapSaverFixedPanicInSaveLocksSaver(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.snap")
	s := a97Sketch(t)
	s.UpdateString("k", 3)
	src := &a97PanicOnce{s: s}
	sv, err := snapshot.NewSaver(path, time.Hour, src)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("Save did not pass the Source's panic on")
			}
		}()
		sv.Save()
	}()
	if st := a97Strays(t, dir); len(st) != 0 {
		t.Errorf("the panicked save left %v", st)
	}
	done := make(chan error, 1)
	go func() { done <- sv.Close() }()
	for deadline := time.Now().Add(time.Minute); ; runtime.Gosched() {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Close after a recovered panic: %v, want its final save to succeed", err)
			}
			if got := a97Load(t, path).QueryString("k"); got != 3 {
				t.Fatalf("Close's final save holds k = %v, want 3", got)
			}
			return
		default:
		}
		if a97Blocked("(*Saver).Save") {
			t.Fatal("after a Save whose Source panicked (recovered by the caller), Close blocks for ever on the Saver's mutex (Save does not release it on a panic)")
		}
		if time.Now().After(deadline) {
			t.Fatal("Close has not returned in a minute")
		}
	}
}

// a97Loops counts the running Saver goroutines.
func a97Loops() int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "snapshot.(*Saver).loop(")
}

// a97Counting is a Source that counts its WriteTo calls.
type a97Counting struct {
	s     *sketch.Sketch
	calls atomic.Int32
}

func (c *a97Counting) WriteTo(w io.Writer) (int64, error) {
	c.calls.Add(1)
	return c.s.WriteTo(w)
}

// TestAudit97SnapSaverBadPaths: a Saver whose path cannot be written
// (its directory missing; the path an existing directory) reports each
// failed save through Save, LastError, OnError and OnSave with an error
// that names the path and wraps the cause (fs.ErrNotExist for the
// missing directory), Saves stays 0, no temporary file is left, the
// directory at the path is untouched, and Close returns the final
// save's error. NewSaver takes such a path (it does not check it), and
// its first save is one interval away: with an interval of an hour,
// nothing is written before Save.
func TestAudit97SnapSaverBadPaths(t *testing.T) {
	dir := t.TempDir()
	isDir := filepath.Join(dir, "adir")
	if err := os.Mkdir(isDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(isDir, "inside"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		notExist   bool
	}{
		{"missing directory", filepath.Join(dir, "nodir", "s.snap"), true},
		{"path is a directory", isDir, false},
	} {
		s := a97Sketch(t)
		s.UpdateString("k", 1)
		src := &a97Counting{s: s}
		var onErr, onSaveErr atomic.Int32
		sv, err := snapshot.NewSaver(c.path, time.Hour, src,
			snapshot.OnError(func(error) { onErr.Add(1) }),
			snapshot.OnSave(func(e error) {
				if e != nil {
					onSaveErr.Add(1)
				}
			}))
		if err != nil {
			t.Fatalf("%s: NewSaver: %v", c.name, err)
		}
		if n := src.calls.Load(); n != 0 || sv.Saves() != 0 || sv.LastError() != nil {
			t.Errorf("%s: before any save: %d encodes, Saves %d, LastError %v", c.name, n, sv.Saves(), sv.LastError())
		}
		err = sv.Save()
		if err == nil || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: Save = %v, want an error naming %s", c.name, err, c.path)
		}
		if c.notExist && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: Save = %v, want it to match fs.ErrNotExist", c.name, err)
		}
		if sv.LastError() == nil || sv.LastError().Error() != fmt.Sprint(err) || sv.Saves() != 0 {
			t.Errorf("%s: LastError %v, Saves %d", c.name, sv.LastError(), sv.Saves())
		}
		cerr := sv.Close()
		if cerr == nil {
			t.Errorf("%s: Close = nil, want the final save's error", c.name)
		}
		if onErr.Load() != 2 || onSaveErr.Load() != 2 {
			t.Errorf("%s: OnError %d, OnSave(err) %d, want 2 each", c.name, onErr.Load(), onSaveErr.Load())
		}
		if st := a97Strays(t, dir); len(st) != 0 {
			t.Errorf("%s: temporary files left: %v", c.name, st)
		}
		if st := a97Strays(t, isDir); len(st) != 0 {
			t.Errorf("%s: temporary files left: %v", c.name, st)
		}
	}
	if b, err := os.ReadFile(filepath.Join(isDir, "inside")); err != nil || string(b) != "x" {
		t.Errorf("the directory at the path was changed: %q, %v", b, err)
	}
}

// TestAudit97SnapWriteFileReplacesKeepsOld: WriteFile over an existing
// good snapshot replaces it whole (the new one loads with the new value);
// a failing second save between them (a Source error after a full
// snapshot's bytes) leaves the first byte for byte; a bare file name
// (no directory: the working directory) works too.
func TestAudit97SnapWriteFileReplacesKeepsOld(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := a97Sketch(t)
	s.UpdateString("k", 2)
	if err := snapshot.WriteFile("bare.snap", s); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile("bare.snap")
	s.UpdateString("k", 5)
	boom := errors.New("a97: after the whole snapshot")
	err := snapshot.WriteFile("bare.snap", a97AfterAll{s, boom})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFile = %v, want it to wrap the Source's error", err)
	}
	if now, _ := os.ReadFile("bare.snap"); !bytes.Equal(now, first) {
		t.Fatal("a failed save changed the file")
	}
	if got := a97Load(t, "bare.snap").QueryString("k"); got != 2 {
		t.Fatalf("k = %v, want 2", got)
	}
	if err := snapshot.WriteFile("bare.snap", s); err != nil {
		t.Fatal(err)
	}
	if got := a97Load(t, filepath.Join(dir, "bare.snap")).QueryString("k"); got != 7 {
		t.Fatalf("k = %v after the second save, want 7", got)
	}
	if st := a97Strays(t, dir); len(st) != 0 {
		t.Fatalf("temporary files left: %v", st)
	}
}

// a97AfterAll writes a complete snapshot, then fails.
type a97AfterAll struct {
	s   *sketch.Sketch
	err error
}

func (a a97AfterAll) WriteTo(w io.Writer) (int64, error) {
	n, err := a.s.WriteTo(w)
	if err != nil {
		return n, err
	}
	return n, a.err
}

// TestAudit97SnapSaverTicks: with no Save call, the Saver's own
// goroutine saves every interval (here 1 ms: three durable saves are
// awaited through OnSave, with a backstop of a minute), each file loads
// with the value the sketch held, and after Close (one more save) Saves
// equals the number of OnSave(nil) calls and the goroutine is gone.
func TestAudit97SnapSaverTicks(t *testing.T) {
	loops0 := a97Loops()
	dir := t.TempDir()
	path := filepath.Join(dir, "tick.snap")
	s := a97Sketch(t)
	s.UpdateString("k", 9)
	var ok atomic.Uint64
	tick := make(chan struct{}, 1)
	sv, err := snapshot.NewSaver(path, time.Millisecond, s, snapshot.OnSave(func(e error) {
		if e == nil {
			ok.Add(1)
			select {
			case tick <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	backstop := time.After(time.Minute)
	for ok.Load() < 3 {
		select {
		case <-tick:
		case <-backstop:
			t.Fatalf("%d saves in a minute at an interval of 1 ms", ok.Load())
		}
	}
	if got := a97Load(t, path).QueryString("k"); got != 9 {
		t.Fatalf("a ticked save holds k = %v, want 9", got)
	}
	s.UpdateString("k", 1)
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	if sv.Saves() != ok.Load() {
		t.Errorf("Saves() = %d, OnSave(nil) called %d times", sv.Saves(), ok.Load())
	}
	if got := a97Load(t, path).QueryString("k"); got != 10 {
		t.Errorf("Close's final save holds k = %v, want 10", got)
	}
	for i := 0; a97Loops() > loops0; i++ {
		if i > 100000 {
			t.Fatal("the Saver's goroutine is still running after Close")
		}
		runtime.Gosched()
	}
}

// TestAudit97SnapSaverTypedNilSource: NewSaver refuses a typed nil
// Source (audit 97: it was accepted, and the Saver's goroutine panicked
// at its first tick, ending the program).
func TestAudit97SnapSaverTypedNilSource(t *testing.T) {
	var sk *sketch.Sketch
	sv, err := snapshot.NewSaver(filepath.Join(t.TempDir(), "nil.snap"), time.Millisecond, sk)
	if err == nil {
		sv.Close()
		t.Fatal("NewSaver took a typed nil *sketch.Sketch")
	}
}
