package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func a136Panic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestAudit136ZeroValueWriteFileLoadPanic: snapshot.go (b1b0b9f):
// WriteFile: "a zero value (one not made by its constructor) panics, as
// its own methods do, and leaves no temporary file"; Load: "a zero value
// ... panics, as its own methods do". Checked for the zero sketch.Sketch,
// rotator.Rotator, limit.Limiter, meter.Rate and meter.Novelty: WriteFile
// panics (no error return), with the text its own WriteTo panics with;
// no temporary file is left; a file already at path keeps its bytes, and
// a missing path is not created; Load into the zero value panics (the
// file, not a snapshot, would otherwise be an error) and leaves the file
// unchanged.
func TestAudit136ZeroValueWriteFileLoadPanic(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		zero snapshot.Source
		own  func()
	}{
		{"sketch.Sketch", &sketch.Sketch{}, func() { _, _ = (&sketch.Sketch{}).WriteTo(os.Stderr) }},
		{"rotator.Rotator", &rotator.Rotator{}, func() { _, _ = (&rotator.Rotator{}).WriteTo(os.Stderr) }},
		{"limit.Limiter", &limit.Limiter{}, func() { _, _ = (&limit.Limiter{}).WriteTo(os.Stderr) }},
		{"meter.Rate", &meter.Rate{}, func() { _, _ = (&meter.Rate{}).WriteTo(os.Stderr) }},
		{"meter.Novelty", &meter.Novelty{}, func() { _, _ = (&meter.Novelty{}).WriteTo(os.Stderr) }},
	}
	for i, c := range cases {
		own := a136Panic(c.own)
		if own == "" {
			t.Errorf("%s: its own WriteTo did not panic", c.name)
			continue
		}
		kept := filepath.Join(dir, fmt.Sprintf("kept%d", i))
		if err := os.WriteFile(kept, []byte("previous"), 0o600); err != nil {
			t.Fatal(err)
		}
		missing := filepath.Join(dir, fmt.Sprintf("missing%d", i))
		for _, p := range []string{kept, missing} {
			var err error
			msg := a136Panic(func() { err = snapshot.WriteFile(p, c.zero) })
			if msg != own || err != nil {
				t.Errorf("%s: WriteFile panic %q, error %v; want the panic %q", c.name, msg, err, own)
			}
		}
		if b, err := os.ReadFile(kept); err != nil || string(b) != "previous" {
			t.Errorf("%s: the file at path became %q, %v", c.name, b, err)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Errorf("%s: WriteFile created %s: %v", c.name, missing, err)
		}
		var err error
		msg := a136Panic(func() { err = snapshot.Load(kept, c.zero.(snapshot.Destination)) })
		if msg == "" {
			t.Errorf("%s: Load into the zero value did not panic (error %v)", c.name, err)
		}
		if b, _ := os.ReadFile(kept); string(b) != "previous" {
			t.Errorf("%s: Load changed the file: %q", c.name, b)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}
