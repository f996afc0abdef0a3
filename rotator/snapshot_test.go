package rotator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func snapCfg(clk sketch.Clock) Config {
	return Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(1), Seed: 42, Clock: clk},
		Generations: 3,
		Period:      10 * time.Second,
	}
}

// TestRotatorSnapshotRoundTrip: a rotator restored on another clock keeps
// its generations (same seeds, same cells), its creation counter and its
// deadline (as a wall time): queries agree with the original at the same
// wall times, through the promotions that follow.
func TestRotatorSnapshotRoundTrip(t *testing.T) {
	c1 := sketchtest.NewFakeClock()
	c1.Set(1_000_000)
	orig := newRotator(t, snapCfg(c1))
	keys := make([][]byte, 30)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%d", i)
	}
	for step := range 50 { // 25 s: two promotions, next = 5
		for i, k := range keys {
			if (i+step)%3 == 0 {
				orig.Update(k, float64(i))
			}
		}
		c1.Advance(500 * time.Millisecond)
	}
	data, err := orig.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != core.RotatorOf(orig).SnapshotSize() {
		t.Fatalf("len %d, SnapshotSize %d", len(data), core.RotatorOf(orig).SnapshotSize())
	}
	t0 := c1.NowMillis()
	for _, down := range []int64{0, 3_000, 70_000} {
		c2 := sketchtest.NewFakeClock()
		c2.Set(5)
		res := newRotator(t, snapCfg(c2))
		c2.Set(t0 + down)
		if err := res.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		c1.Set(t0 + down) // the original, idle for the same downtime
		if g, w := core.RotatorOf(res).Current().Next, core.RotatorOf(orig).Current().Next; down == 0 && g != w {
			t.Fatalf("next %d, want %d", g, w)
		}
		for step := range 30 {
			for _, k := range keys {
				if got, want := res.Query(k), orig.Query(k); got != want {
					t.Fatalf("down=%dms step %d key %s: restored %v, original %v", down, step, k, got, want)
				}
			}
			c1.Advance(time.Second)
			c2.Advance(time.Second)
		}
		if g, w := core.RotatorOf(res).Current().Next, core.RotatorOf(orig).Current().Next; g != w {
			t.Fatalf("down=%dms: after promotions next %d, want %d", down, g, w)
		}
		// Continue from the restored state in the original's place.
		orig = res
		c1 = c2
		t0 = c2.NowMillis()
		data, _ = res.MarshalBinary()
	}
}

// TestRotatorSnapshotRefuses: another Generations, Period, seed or sketch
// config is refused naming the field; corrupt input is ErrCorruptSnapshot;
// the rotator is unchanged either way.
func TestRotatorSnapshotRefuses(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	base := snapCfg(clk)
	src := newRotator(t, base)
	src.Update([]byte("x"), 7)
	for _, tc := range []struct {
		field string
		f     func(*Config)
	}{
		{"Generations", func(c *Config) { c.Generations = 2 }},
		{"Period", func(c *Config) { c.Period = time.Second }},
		{"Seed", func(c *Config) { c.Sketch.Seed = 1 }},
		{"Hi", func(c *Config) { c.Sketch.Hi = 5 }},
		{"CellsPerLevel", func(c *Config) { c.Sketch.CellsPerLevel = 65 }},
	} {
		c := base
		tc.f(&c)
		s := newRotator(t, c)
		data, _ := s.MarshalBinary()
		dst := newRotator(t, base)
		dst.Update([]byte("y"), 3)
		err := dst.UnmarshalBinary(data)
		var se *core.SnapshotError
		if !errors.As(err, &se) || !errors.Is(err, sketch.ErrSnapshotMismatch) || se.Field != tc.field {
			t.Errorf("%s: %v", tc.field, err)
		}
		if dst.Query([]byte("y")) != 3 {
			t.Errorf("%s: refused snapshot changed the rotator", tc.field)
		}
	}
	data, _ := src.MarshalBinary()
	for _, n := range []int{0, 10, 56, 57, 200, len(data) - 1} {
		dst := newRotator(t, base)
		if err := dst.UnmarshalBinary(data[:n]); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("truncated to %d: %v", n, err)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(data[:n])); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("ReadFrom truncated to %d: %v", n, err)
		}
	}
	for _, i := range []int{0, 5, 9, 20, 60, 200, len(data) - 1} {
		bad := bytes.Clone(data)
		bad[i] ^= 0x10
		dst := newRotator(t, base)
		if err := dst.UnmarshalBinary(bad); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("byte %d flipped: %v", i, err)
		}
		if _, err := dst.ReadFrom(bytes.NewReader(bad)); !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("ReadFrom byte %d flipped: %v", i, err)
		}
		if dst.Query([]byte("x")) != 0 {
			t.Errorf("byte %d flipped: rotator changed", i)
		}
	}
	if err := newRotator(t, base).UnmarshalBinary(append(bytes.Clone(data), 0)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("trailing byte accepted")
	}
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	dst := newRotator(t, base)
	if n, err := dst.ReadFrom(&buf); err != nil || n != core.RotatorOf(src).SnapshotSize() || dst.Query([]byte("x")) != 7 {
		t.Fatalf("stream round trip: n=%d err=%v q=%v", n, err, dst.Query([]byte("x")))
	}
}

// TestRotatorSnapshotForgedDeadline: a well-checksummed snapshot whose
// deadline is at either end of int64 restores without overflow; a
// deadline in the far past promotes on the next access.
func TestRotatorSnapshotForgedDeadline(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	src := newRotator(t, snapCfg(clk))
	src.Update([]byte("k"), 5)
	data, _ := src.MarshalBinary()
	for _, dl := range []int64{math.MinInt64, math.MaxInt64} {
		bad := bytes.Clone(data)
		binary.LittleEndian.PutUint64(bad[32:], uint64(dl))
		binary.LittleEndian.PutUint32(bad[len(bad)-4:], core.CRC32C(bad[:len(bad)-4]))
		dclk := sketchtest.NewFakeClock()
		dclk.Set(1_700_000_000_000)
		dst := newRotator(t, snapCfg(dclk))
		if err := dst.UnmarshalBinary(bad); err != nil {
			t.Fatalf("deadline %d: %v", dl, err)
		}
		got := dst.Query([]byte("k"))
		if dl == math.MinInt64 && got != 0 || dl == math.MaxInt64 && got != 5 {
			t.Errorf("deadline %d: got %v", dl, got)
		}
		// A deadline forged far ahead is at most one Period away: a write
		// is still forgotten within N x Period (Generations 3, Period 10 s).
		dst.Update([]byte("j"), 1e6)
		dclk.Advance(30 * time.Second)
		if got := dst.Query([]byte("j")); got != 0 {
			t.Errorf("deadline %d: a write made after the restore reads %v after N x Period", dl, got)
		}
	}
}
