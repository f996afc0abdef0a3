package snapshot_test

// Audit 134: the snapshot and merge methods of zero values (not built by
// New), and the snapshot package's handling of them.
//
// Contract: the module's rule for zero values, as audit 125 settled it for
// sketch.Sketch's other methods ("a panic starting "sketch: zero
// Sketch""; the other packages' zero values "panic with a clear
// "<pkg>: zero X; use New""); snapshot.NewSaver ("src not nil, nor a typed
// nil, nor the zero value of a provided source ... Misuse ... is a
// *sketch.ConfigError matching sketch.ErrInvalidConfig").
//
// Checked: MarshalBinary, WriteTo, UnmarshalBinary, ReadFrom and Merge
// (either side) of a zero sketch.Sketch, and the four of a zero
// rotator.Rotator, panic with a message naming the zero value (never a
// raw runtime error); NewSaver refuses both zero values with a
// ConfigError.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func audit134Panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestAudit134ZeroValuesSnapshotMethods(t *testing.T) {
	built, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 10})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := built.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rb, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 10}, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rsnap, err := rb.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var zs sketch.Sketch
	var zr rotator.Rotator
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Sketch.MarshalBinary", "sketch: zero Sketch", func() { _, _ = zs.MarshalBinary() }},
		{"Sketch.WriteTo", "sketch: zero Sketch", func() { _, _ = zs.WriteTo(io.Discard) }},
		{"Sketch.UnmarshalBinary", "sketch: zero Sketch", func() { _ = zs.UnmarshalBinary(snap) }},
		{"Sketch.ReadFrom", "sketch: zero Sketch", func() { _, _ = zs.ReadFrom(bytes.NewReader(snap)) }},
		{"zero Sketch.Merge(built)", "sketch: zero Sketch", func() { _ = zs.Merge(built) }},
		{"Rotator.MarshalBinary", "rotator: zero Rotator", func() { _, _ = zr.MarshalBinary() }},
		{"Rotator.WriteTo", "rotator: zero Rotator", func() { _, _ = zr.WriteTo(io.Discard) }},
		{"Rotator.UnmarshalBinary", "rotator: zero Rotator", func() { _ = zr.UnmarshalBinary(rsnap) }},
		{"Rotator.ReadFrom", "rotator: zero Rotator", func() { _, _ = zr.ReadFrom(bytes.NewReader(rsnap)) }},
	} {
		got := audit134Panic(c.f)
		if got == "" {
			t.Errorf("%s on the zero value did not panic", c.name)
			continue
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s on the zero value: panic %q, want one naming %q", c.name, got, c.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ok.snap")
	if err := snapshot.WriteFile(path, built); err != nil {
		t.Fatal(err)
	}
	rpath := filepath.Join(dir, "rot.snap")
	if err := snapshot.WriteFile(rpath, rb); err != nil {
		t.Fatal(err)
	}
	// Load and WriteFile of a zero value: an error, or a clear panic
	// naming it; never a raw runtime error.
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"Load(zero Sketch)", func() error { return snapshot.Load(path, &zs) }},
		{"Load(zero Rotator)", func() error { return snapshot.Load(rpath, &zr) }},
		{"WriteFile(zero Sketch)", func() error { return snapshot.WriteFile(filepath.Join(dir, "w1"), &zs) }},
		{"WriteFile(zero Rotator)", func() error { return snapshot.WriteFile(filepath.Join(dir, "w2"), &zr) }},
	} {
		var err error
		msg := audit134Panic(func() { err = c.f() })
		switch {
		case msg != "" && strings.Contains(msg, "runtime error"):
			t.Errorf("%s: raw panic %q", c.name, msg)
		case msg == "" && err == nil:
			t.Errorf("%s: no error", c.name)
		}
		t.Logf("%s: panic %q, error %v", c.name, msg, err)
	}
	// WriteFile: "On an error, or a panic in src (which goes on up), it
	// closes and removes the temporary file".
	if m, _ := filepath.Glob(filepath.Join(dir, "w*.tmp-*")); len(m) > 0 {
		t.Errorf("WriteFile's panics left temporary files: %v", m)
	}
	for _, src := range []snapshot.Source{&zs, &zr} {
		_, err := snapshot.NewSaver(filepath.Join(dir, "z.snap"), time.Hour, src)
		if !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("NewSaver(zero %T) = %v, want ErrInvalidConfig", src, err)
		}
	}
}
