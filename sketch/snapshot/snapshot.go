// Package snapshot keeps a running service's sketch (or rotator, limiter
// or meter) on disk: a Saver writes a snapshot atomically every interval
// and on Close, and Load restores the last one, or reports why it could
// not and leaves the destination as it was built (empty).
//
// Atomic write: the snapshot goes to a temporary file in the same
// directory, which is fsynced, renamed over the target and the directory
// fsynced, so after a crash at any point the target holds either the
// previous complete snapshot or the new complete one, never a mix (POSIX
// rename is atomic; the fsyncs order the data before the name). A crash
// may leave a stray temporary file (name + ".tmp-" + digits), which the next
// Saver on the same path removes.
//
// What a crash loses: updates since the start of the last save that
// completed, so at most one interval plus one save's duration.
package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
)

// Source is what a Saver snapshots: *sketch.Sketch, *rotator.Rotator,
// *limit.Limiter, *meter.Rate and *meter.Novelty (each one's WriteTo
// runs alongside its other methods and never stops them; a Multi is
// saved window by window).
type Source interface {
	WriteTo(w io.Writer) (int64, error)
}

// Destination is what Load restores: *sketch.Sketch, *rotator.Rotator,
// *limit.Limiter, *meter.Rate and *meter.Novelty, freshly built with the
// snapshot's configuration (a limiter or meter adopts the snapshot's hash
// seed; a sketch or rotator must be built with it).
type Destination interface {
	ReadFrom(r io.Reader) (int64, error)
}

// Option configures a Saver.
type Option func(*Saver)

// OnError sets a function called with every failed save (from the
// Saver's goroutine, Save or Close, after the save, so two saves' calls
// may run at once and out of order). It must not call the Saver.
func OnError(f func(error)) Option { return func(s *Saver) { s.onError = f } }

// OnSave sets a function called after every save, nil error on success,
// once the snapshot is durable (renamed and the directory fsynced); as
// OnError's, its calls are not serialized. It must not call the Saver.
func OnSave(f func(error)) Option { return func(s *Saver) { s.onSave = f } }

// Saver writes src's snapshot to a path every interval, from one
// goroutine it starts, and once more on Close. Create one with NewSaver.
// Its methods are safe for concurrent use; saves never overlap. Use one
// Saver per path (NewSaver removes the path's stray temporary files). A
// panic in src's WriteTo goes on up, as WriteFile's: to the caller of
// Save or Close (the Saver stays usable), and from the Saver's goroutine,
// which does not recover it, it ends the program.
type Saver struct {
	path     string
	interval time.Duration
	src      Source
	onError  func(error)
	onSave   func(error)

	mu      sync.Mutex // held during a save; guards lastErr, saves
	lastErr error
	saves   uint64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// NewSaver starts saving src to path every interval (> 0; src not nil,
// nor a typed nil, nor the zero value of a provided source, such as a
// zero limit.Limiter, whose first save would panic in the Saver's
// goroutine). The first save happens one interval from now; call Save
// for one at once. Stray temporary files of an earlier crash are
// removed (path + ".tmp-" + digits, as WriteFile names them). Close stops
// it. Misuse (those, a nil Option, a path that names no file: "", one
// ending in a separator, "." or "..") is a *sketch.ConfigError matching
// sketch.ErrInvalidConfig.
func NewSaver(path string, interval time.Duration, src Source, opts ...Option) (*Saver, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if interval <= 0 {
		return nil, core.ConfigErr("snapshot", "interval", interval, "interval must be > 0; got %v", interval)
	}
	if err := checkSource(src, "source"); err != nil {
		return nil, err
	}
	if msg := unusable(src); msg != "" {
		return nil, core.ConfigErr("snapshot", "source", src, "the source is not usable: %s", msg)
	}
	s := &Saver{path: path, interval: interval, src: src, stop: make(chan struct{}), done: make(chan struct{})}
	for i, o := range opts {
		if o == nil {
			return nil, core.ConfigErr("snapshot", "Option", i, "option %d is nil", i)
		}
		o(s)
	}
	removeStrays(path)
	go s.loop()
	return s, nil
}

// checkPath refuses a path that names no file: an empty base name ("",
// "dir/") or "." or "..". Its stray temporary files would be every
// ".tmp-*" file of the directory, other programs' too (audit 140).
func checkPath(path string) error {
	if _, base := splitPath(path); base == "" || base == "." || base == ".." {
		return core.ConfigErr("snapshot", "path", path, "path must name a file, not a directory; got %q", path)
	}
	return nil
}

// checkSource refuses a nil or typed-nil source or destination (what
// names it in the message).
func checkSource(src any, what string) error {
	if core.IsNil(src) {
		return core.ConfigErr("snapshot", what, nil, "%s must not be nil", what)
	}
	return nil
}

// unusable returns the panic message of src's snapshot size (a provided
// source's zero value panics there: "limit: zero Limiter; use New"), or
// "" when src answers it or has none. The size is computed, nothing
// encoded.
func unusable(src any) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	snapshotSize(src)
	return ""
}

// tmpInfix follows path's base name in the name of WriteFile's temporary
// file (base + tmpInfix + random), which removeStrays matches.
const tmpInfix = ".tmp-"

// splitPath returns path's directory ("." for a bare name) and base name.
func splitPath(path string) (dir, base string) {
	dir, base = filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, base
}

// isStray reports whether name is one of WriteFile's temporary files
// for base: base + tmpInfix + the decimal digits os.CreateTemp puts for
// its "*". Digits only, so that path "a" does not take "a.tmp-x.tmp-123",
// a temporary file of the path "a.tmp-x".
func isStray(name, base string) bool {
	rest, ok := strings.CutPrefix(name, base+tmpInfix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// removeStrays removes path's stray temporary files (path + ".tmp-" +
// digits, what a crash in the middle of WriteFile leaves), matched by
// name: not a glob of path, whose metacharacters ("state[1].snap") would
// match another path's files and miss its own (audit 49).
func removeStrays(path string) {
	dir, base := splitPath(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if isStray(e.Name(), base) && !e.IsDir() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func (s *Saver) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Save()
		}
	}
}

// Save writes a snapshot now (atomically, see the package doc) and
// returns its error, which LastError also reports until the next save. A
// source that refuses a snapshot its encode could not capture (a
// rotator promoted during it, a clock that jumped hours: the error says
// "take the snapshot again") is asked up to three more times at once.
func (s *Saver) Save() error {
	s.built()
	err := s.save()
	if err != nil && s.onError != nil {
		s.onError(err)
	}
	if s.onSave != nil {
		s.onSave(err)
	}
	return err
}

// built panics on the zero Saver, which NewSaver never started.
func (s *Saver) built() {
	if s.stop == nil {
		panic("snapshot: zero Saver; use NewSaver")
	}
}

// save writes the snapshot holding s.mu, released on a panic in the
// source too (the Saver stays usable).
func (s *Saver) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := WriteFile(s.path, s.src)
	// A snapshot that met a promotion or a clock jump during its encode
	// is refused (take it again): a few immediate tries, then the error.
	for try := 0; try < 3 && errors.Is(err, core.ErrTakeAgain); try++ {
		err = WriteFile(s.path, s.src)
	}
	s.lastErr = err
	if err == nil {
		s.saves++
	}
	return err
}

// LastError returns the error of the latest save, nil if it succeeded or
// none happened yet.
func (s *Saver) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Saves returns the number of successful saves.
func (s *Saver) Saves() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// Close stops the goroutine, writes a final snapshot and returns its
// error. Further calls return the same error and do nothing else.
func (s *Saver) Close() error {
	s.built()
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.closeErr = s.Save()
	})
	return s.closeErr
}

// WriteFile writes src's snapshot to path atomically: a temporary file in
// path's directory, fsync, rename over path, fsync of the directory. On
// an error, or a panic in src (which goes on up), it closes and removes
// the temporary file, and path keeps what it held; the one exception is a
// failed fsync of the directory, which can only come after the rename
// (the new file is then in place, perhaps not yet durable). The file is
// created with mode 0600 less the umask (a snapshot holds the hash seed),
// whatever path's mode was; a symbolic link at path is replaced by the
// file, not followed. Anything else at path that is not a regular file (a
// named pipe, a device such as /dev/null, a socket, a directory) is
// refused with a *fs.PathError, untouched. A
// nil or typed-nil src, or a path that names no file (as for NewSaver),
// is a *sketch.ConfigError, and path is untouched;
// a zero value (one not made by its constructor) panics, as its own
// methods do, and leaves no temporary file.
func WriteFile(path string, src Source) (err error) {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := checkSource(src, "source"); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
		// The rename would replace a pipe, a device (a service run as
		// root with path /dev/null replaced the system's) or a socket
		// with a regular file (audit 144).
		return fmt.Errorf("snapshot: %w", &fs.PathError{Op: "write", Path: path,
			Err: fmt.Errorf("not a regular file (%v): refused, so that it is not replaced", fi.Mode().Type())})
	}
	dir, base := splitPath(path)
	f, err := os.CreateTemp(dir, base+tmpInfix+"*")
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		// On an error, and on a panic in src.WriteTo (which goes on up:
		// audit 88 found the file left open and the temporary file
		// left until the next Saver), the temporary file goes.
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
		if err != nil {
			err = fmt.Errorf("snapshot: writing %s: %w", path, err)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err = src.WriteTo(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	// The directory is opened before the rename: a directory the process
	// may write but not read (mode 0300) fails here, with path as it was,
	// not after the new file replaced it (audit 144).
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	return d.Sync()
}

// ErrNoSnapshot is matched by Load's error when the file does not exist
// (errors.Is(err, fs.ErrNotExist) matches too): a first start.
var ErrNoSnapshot = errors.New("snapshot: no snapshot")

// LoadError is Load's error: the path and the cause. errors.Is matches
// ErrNoSnapshot for a missing file, sketch.ErrCorruptSnapshot for a
// truncated or corrupt one, sketch.ErrSnapshotMismatch for a snapshot of
// another configuration, and the cause's own errors (fs.ErrNotExist,
// io.ErrUnexpectedEOF, ...).
type LoadError struct {
	Path string
	Err  error
}

func (e *LoadError) Error() string { return "snapshot: loading " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// Is matches ErrNoSnapshot for a missing file.
func (e *LoadError) Is(target error) bool {
	return target == ErrNoSnapshot && errors.Is(e.Err, fs.ErrNotExist)
}

// Load restores dst (a freshly built Destination, under the configuration
// of the snapshot) from the file at path. On any error it returns a
// *LoadError and dst is left empty, as built: a file whose size is not
// the length of dst's snapshot is refused before dst is touched (every
// provided Destination knows its length; a file that is not a regular
// one, a named pipe, is read whole into memory first to check it; opening
// a named pipe waits, as open(2) does, until a writer opens it), as is
// a refused header; a
// rotator or meter is never changed by a failed restore, and a sketch or
// limiter whose cells were bad is emptied by its ReadFrom. The caller
// carries on with the empty dst and reports the error. A Destination of
// your own without SnapshotSize is the exception: its length is known
// only after its ReadFrom, so trailing bytes are found after the restore,
// and without Reset it stays restored (the error says so all the same).
// A nil or typed-nil dst is a *LoadError wrapping a *sketch.ConfigError;
// a zero value (one not made by its constructor) panics, as its own
// methods do.
func Load(path string, dst Destination) error {
	if err := checkSource(dst, "destination"); err != nil {
		return &LoadError{Path: path, Err: err}
	}
	f, err := os.Open(path)
	if err != nil {
		return &LoadError{Path: path, Err: err}
	}
	defer f.Close()
	var src io.Reader = f
	if want, ok := snapshotSize(dst); ok {
		// Every provided destination knows its exact size: a truncated
		// or overlong file is refused before dst is touched. A regular
		// file's size says so at once; a pipe or device is read whole
		// (want bytes and one more) first.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if fi.Size() != want {
				return lengthError(path, fi.Size(), want, "file is %d bytes")
			}
		} else {
			b, err := io.ReadAll(io.LimitReader(f, want+1))
			if err != nil {
				return &LoadError{Path: path, Err: err}
			}
			if int64(len(b)) != want {
				return lengthError(path, int64(len(b)), want, "stream holds %d bytes or more")
			}
			src = bytes.NewReader(b)
		}
	}
	r := bufio.NewReaderSize(src, 1<<20)
	if _, err := dst.ReadFrom(r); err != nil {
		return &LoadError{Path: path, Err: err}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		if rs, ok := dst.(interface{ Reset() }); ok {
			rs.Reset()
		}
		if err != nil {
			return &LoadError{Path: path, Err: err}
		}
		return &LoadError{Path: path, Err: core.NewSnapshotError(core.ErrCorruptSnapshot, "snapshot", "Length", nil, nil, nil, "file has trailing bytes after the snapshot")}
	}
	return nil
}

// lengthError is Load's refusal of a source of got bytes (what says so,
// with got's verb) where dst's snapshot is want bytes.
func lengthError(path string, got, want int64, what string) error {
	var cause error
	if got < want {
		cause = io.ErrUnexpectedEOF
	}
	return &LoadError{Path: path, Err: core.NewSnapshotError(core.ErrCorruptSnapshot, "snapshot", "Length", got, want, cause,
		what+", want %d for the destination's configuration (truncated, or not its snapshot)", got, want)}
}

// snapshotSize returns the exact snapshot length of dst when it knows it:
// a *sketch.Sketch or *rotator.Rotator (through the engine underneath),
// or any Destination with a SnapshotSize method (*limit.Limiter,
// *meter.Rate, *meter.Novelty).
func snapshotSize(dst any) (int64, bool) {
	if s := core.SketchOf(dst); s != nil {
		return s.SnapshotSize(), true
	}
	if r := core.RotatorOf(dst); r != nil {
		return r.SnapshotSize(), true
	}
	if sz, ok := dst.(interface{ SnapshotSize() int64 }); ok {
		return sz.SnapshotSize(), true
	}
	return 0, false
}
