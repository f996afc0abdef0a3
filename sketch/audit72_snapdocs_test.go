package sketch_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// docs/snapshots.md:34-38: the example error texts.
func TestAudit72SnapshotErrorTexts(t *testing.T) {
	a, _ := sketch.New(sketch.Config{Hi: 100, Seed: 9, Levels: 2, CellsPerLevel: 64})
	b, _ := sketch.New(sketch.Config{Hi: 100, Seed: 0, Levels: 2, CellsPerLevel: 64})
	data, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	err = b.UnmarshalBinary(data)
	if err == nil || err.Error() != "sketch: snapshot Seed differs: got 9, the sketch has 0" || !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("docs/snapshots.md:35: got %v", err)
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 0xff
	c, _ := sketch.New(sketch.Config{Hi: 100, Seed: 9, Levels: 2, CellsPerLevel: 64})
	err = c.UnmarshalBinary(bad)
	if err == nil || !strings.HasPrefix(err.Error(), "sketch: snapshot checksum mismatch: stored 0x") || !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("docs/snapshots.md:36: got %v", err)
	}
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	err = snapshot.Load(path, c)
	want := "snapshot: loading " + path + ": snapshot: file is "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "for the destination's configuration (truncated, or not its snapshot)") {
		t.Errorf("docs/snapshots.md:37: got %v", err)
	}
	var le *snapshot.LoadError
	if !errors.As(err, &le) {
		t.Errorf("docs/snapshots.md:25: Load error %T, want *LoadError", err)
	}
	if err := snapshot.Load(filepath.Join(t.TempDir(), "none"), c); !errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Errorf("docs/snapshots.md:25: missing file: %v", err)
	}
}

// hookWriter runs f once, at its first Write.
type hookWriter struct {
	bytes.Buffer
	f func()
}

func (w *hookWriter) Write(p []byte) (int, error) {
	if w.f != nil {
		f := w.f
		w.f = nil
		f()
	}
	return w.Buffer.Write(p)
}

// docs/snapshots.md:190-206: a cell written during the encode, under
// Linear, is read back to T (b + rate x lead) and recorded at age 0:
// restored on a clock at T it reads at or above the earlier updates.
func TestAudit72SnapshotWriteDuringEncode(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Hi: 1000, Levels: 1, CellsPerLevel: 8, Decay: decay.Linear(10), Clock: clk, Seed: 3}
	s, _ := sketch.New(cfg)
	s.UpdateString("k", 16)
	T := clk.Now()
	w := &hookWriter{f: func() {
		clk.Advance(time.Second)
		s.UpdateString("k", 5) // 16 - 10 + 5 = 11 at T+1s
	}}
	if _, err := s.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.SetTime(T)
	cfg.Clock = clk2
	r, _ := sketch.New(cfg)
	if err := r.UnmarshalBinary(w.Bytes()); err != nil {
		t.Fatal(err)
	}
	t.Logf("restored at T: %v (21 if the write during the encode was read back to T)", r.QueryString("k"))
	if got := r.QueryString("k"); got < 16 {
		t.Errorf("docs/snapshots.md:198: restored at T reads %v, below the 16 written before the encode", got)
	}
	clk2.Advance(time.Second)
	if got := r.QueryString("k"); got < 11 {
		t.Errorf("docs/snapshots.md:200: restored at T+1s reads %v, below the truth 11", got)
	}
}
