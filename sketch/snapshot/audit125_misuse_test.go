package snapshot_test

import (
	"errors"
	"path/filepath"
	"time"

	"fmt"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"

	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// TestAudit125FixedZeroSaverRawPanic (audit 125; fixed at stop 63, the text below says what was wrong): a Saver is made with NewSaver
// (sketch/snapshot/snapshot.go:71); the zero Saver's Save crashes with
// "runtime error: invalid memory address or nil pointer dereference" and its
// Close with "close of nil channel". limit's, meter's and httplimit's zero
// values panic with a clear "<pkg>: zero X; use New" (the team rule: "a clear
// panic"). Expected: a panic starting "snapshot: zero Saver". Observed: the
// runtime's messages. Fix: check s.src (or the stop channel) at the top of
// Save (snapshot.go:167) and Close (snapshot.go:213).
func TestAudit125FixedZeroSaverRawPanic(t *testing.T) {
	var s snapshot.Saver
	for name, f := range map[string]func(){
		"Save":  func() { _ = s.Save() },
		"Close": func() { _ = s.Close() },
	} {
		var msg string
		func() {
			defer func() { msg = fmt.Sprint(recover()) }()
			f()
		}()
		if !strings.HasPrefix(msg, "snapshot: zero Saver") {
			t.Errorf("zero Saver.%s: panic %q, want one starting \"snapshot: zero Saver\"", name, msg)
		}
	}
}

func audit125Sketch(t *testing.T) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{Hi: 10, CellsPerLevel: 16})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAudit125FixedNewSaverMisuseNotTyped (audit 125; fixed at stop 63, the text below says what was wrong): every other constructor of the
// core module answers misuse with a *sketch.ConfigError matching
// sketch.ErrInvalidConfig, a nil Option included ("limit: option 0 is nil",
// "meter: option 0 is nil", "httplimit: option 0 is nil"; httplimit.New
// also refuses a zero limit.Limiter). NewSaver
// (sketch/snapshot/snapshot.go:92-106):
//   - a nil Option crashes with "runtime error: invalid memory address or
//     nil pointer dereference" (snapshot.go:101 calls o(s) unchecked);
//   - interval <= 0 and a nil source are plain errors.New/fmt.Errorf values
//     that match neither *sketch.ConfigError nor ErrInvalidConfig;
//   - a zero limit.Limiter source is accepted, and its first save panics
//     "limit: zero Limiter" - from the Saver's goroutine that ends the
//     program (the doc: a panic there is not recovered).
//
// Expected: a *sketch.ConfigError prefixed "snapshot: " for each, as the
// other constructors do. Fix: check o != nil in the loop at snapshot.go:100,
// return &sketch.ConfigError-based errors at :94 and :97, and refuse a
// source whose SnapshotSize/WriteTo would panic (or document it).
func TestAudit125FixedNewSaverMisuseNotTyped(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "snap")
	s := audit125Sketch(t)
	var zero limit.Limiter
	for _, c := range []struct {
		name     string
		interval time.Duration
		src      snapshot.Source
		opts     []snapshot.Option
	}{
		{"nil option", time.Hour, s, []snapshot.Option{nil}},
		{"interval 0", 0, s, nil},
		{"interval -1", -1, s, nil},
		{"nil source", time.Hour, nil, nil},
		{"zero limit.Limiter", time.Hour, &zero, nil},
	} {
		var sv *snapshot.Saver
		var err error
		msg := testpanic.Message(func() { sv, err = snapshot.NewSaver(p, c.interval, c.src, c.opts...) })
		if sv != nil {
			testpanic.Message(func() { _ = sv.Close() })
		}
		var ce *sketch.ConfigError
		if msg != "" || sv != nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: NewSaver = (saver %v, %v), panic %q; want a *sketch.ConfigError matching ErrInvalidConfig", c.name, sv != nil, err, msg)
		}
	}
}

// TestAudit125FixedWriteFileLoadNilRawPanic (audit 125; fixed at stop 63, the text below says what was wrong): NewSaver refuses a nil or
// typed-nil source with an error ("src not nil, nor a typed nil",
// snapshot.go:96), but WriteFile(path, nil) (snapshot.go:228) and
// Load(path, nil) (snapshot.go:310), and Load with a typed-nil
// *sketch.Sketch, crash with "runtime error: invalid memory address or nil
// pointer dereference". Same misuse, different response, and not a clear
// one. Expected: an error (WriteFile's, and Load's *LoadError) saying the
// source/destination is nil, or at least a panic starting "snapshot:".
// Fix: the isNil check of NewSaver at the top of WriteFile and Load.
func TestAudit125FixedWriteFileLoadNilRawPanic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "snap")
	if err := snapshot.WriteFile(p, audit125Sketch(t)); err != nil {
		t.Fatal(err)
	}
	var typedNil *sketch.Sketch
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"WriteFile(nil)", func() error { return snapshot.WriteFile(filepath.Join(dir, "w"), nil) }},
		{"WriteFile(typed nil)", func() error { return snapshot.WriteFile(filepath.Join(dir, "w"), typedNil) }},
		{"Load(nil)", func() error { return snapshot.Load(p, nil) }},
		{"Load(typed nil)", func() error { return snapshot.Load(p, typedNil) }},
	} {
		var err error
		msg := testpanic.Message(func() { err = c.f() })
		if msg != "" && !strings.HasPrefix(msg, "snapshot:") || msg == "" && err == nil {
			t.Errorf("%s: err %v, panic %q; want an error or a panic starting \"snapshot:\"", c.name, err, msg)
		}
	}
}
