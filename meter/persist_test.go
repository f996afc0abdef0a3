package meter_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// persisted is Rate or Novelty as the tests drive them.
type persisted interface {
	io.WriterTo
	io.ReaderFrom
	SnapshotSize() int64
}

type meterCase struct {
	name string
	mk   func(clk *sketchtest.FakeClock, window time.Duration) persisted
	op   func(m persisted, t time.Time, key string) float64 // one write, and a reading
	read func(m persisted, t time.Time, key string) float64
}

var meterCases = []meterCase{
	{
		"rate",
		func(clk *sketchtest.FakeClock, w time.Duration) persisted {
			r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSize(2, 64))
			if err != nil {
				panic(err)
			}
			return r
		},
		func(m persisted, t time.Time, k string) float64 {
			m.(*meter.Rate).ObserveAt(t, k, 1)
			return m.(*meter.Rate).PerSecondAt(t, k)
		},
		func(m persisted, t time.Time, k string) float64 { return m.(*meter.Rate).PerSecondAt(t, k) },
	},
	{
		"novelty",
		func(clk *sketchtest.FakeClock, w time.Duration) persisted {
			n, err := meter.NewNovelty(w, meter.WithClock(clk), meter.WithSize(2, 64))
			if err != nil {
				panic(err)
			}
			return n
		},
		func(m persisted, t time.Time, k string) float64 {
			if m.(*meter.Novelty).SeenAt(t, k) {
				return 1
			}
			return 0
		},
		func(m persisted, t time.Time, k string) float64 {
			if m.(*meter.Novelty).ContainsAt(t, k) {
				return 1
			}
			return 0
		},
	},
}

func meterSnap(t testing.TB, m persisted) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := m.WriteTo(&b)
	if err != nil || n != int64(b.Len()) || n != m.SnapshotSize() {
		t.Fatalf("WriteTo: %d bytes (buffer %d, SnapshotSize %d), %v", n, b.Len(), m.SnapshotSize(), err)
	}
	return b.Bytes()
}

// TestMeterRestoreDifferential: a meter saved at t0 and restored (under
// another random seed, adopted) on a clock reading t0+d reads and
// answers exactly as the meter that was never saved, at t0+d and after.
func TestMeterRestoreDifferential(t *testing.T) {
	for _, c := range meterCases {
		for _, d := range []time.Duration{0, 3 * time.Millisecond, 800 * time.Millisecond, 4 * time.Second, 30 * time.Second, time.Hour} {
			t.Run(fmt.Sprintf("%s/down=%v", c.name, d), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(d)))
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				a := c.mk(clk, time.Second)
				for range 2000 {
					c.op(a, clk.Now(), fmt.Sprintf("k%d", rng.IntN(100)))
					clk.Advance(time.Duration(rng.IntN(5)) * time.Millisecond)
				}
				snap := meterSnap(t, a)
				clk2 := sketchtest.NewFakeClock()
				clk2.Set(clk.NowMillis() + d.Milliseconds())
				clk.Advance(d)
				b := c.mk(clk2, time.Second)
				if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				for k := range 100 {
					key := fmt.Sprintf("k%d", k)
					if ra, rb := c.read(a, clk.Now(), key), c.read(b, clk2.Now(), key); ra != rb {
						t.Fatalf("%s: restored %v, never saved %v", key, rb, ra)
					}
				}
				for i := range 2000 {
					key := fmt.Sprintf("k%d", rng.IntN(100))
					if ra, rb := c.op(a, clk.Now(), key), c.op(b, clk2.Now(), key); ra != rb {
						t.Fatalf("op %d on %s: restored %v, never saved %v", i, key, rb, ra)
					}
					step := time.Duration(rng.IntN(5)) * time.Millisecond
					clk.Advance(step)
					clk2.Advance(step)
				}
			})
		}
	}
}

// TestMeterRestoreRefused: another window, another kind of meter, another
// size are mismatches; truncations and flipped bytes are corrupt; either
// way the meter is left as it was, and Load refuses a truncated file.
func TestMeterRestoreRefused(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	rate := meterCases[0].mk(clk, time.Second)
	rate.(*meter.Rate).ObserveAt(clk.Now(), "x", 5)
	snap := meterSnap(t, rate)
	others := []persisted{
		meterCases[0].mk(clk, 2*time.Second),
		meterCases[1].mk(clk, time.Second),
		func() persisted {
			r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 65))
			return r
		}(),
		func() persisted {
			r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithPeriodWindows(4))
			return r
		}(),
	}
	for i, o := range others {
		if _, err := o.ReadFrom(bytes.NewReader(snap)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("other %d: %v, want a mismatch", i, err)
		}
	}
	b := meterCases[0].mk(clk, time.Second).(*meter.Rate)
	for n := 0; n < len(snap); n += 7 {
		if _, err := b.ReadFrom(bytes.NewReader(snap[:n])); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
	for i := 0; i < len(snap); i += 3 {
		bad := bytes.Clone(snap)
		bad[i] ^= 1
		if _, err := b.ReadFrom(bytes.NewReader(bad)); !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if v := b.PerSecondAt(clk.Now(), "x"); v != 0 {
		t.Fatalf("refused restores left x at %v", v)
	}
	path := filepath.Join(t.TempDir(), "rate.snap")
	if err := snapshot.WriteFile(path, rate); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(path, b); err != nil {
		t.Fatal(err)
	}
	if v := b.PerSecondAt(clk.Now(), "x"); v != rate.(*meter.Rate).PerSecondAt(clk.Now(), "x") || v == 0 {
		t.Fatalf("loaded x at %v", v)
	}
}

// FuzzMeterReadFrom feeds arbitrary bytes, seeded with real snapshots,
// to Rate's and Novelty's ReadFrom (with the outer checksums repaired when
// fix is set): never a panic, only typed errors, and a restored meter
// that keeps answering within its bounds.
func FuzzMeterReadFrom(f *testing.F) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(i int, clk *sketchtest.FakeClock) persisted {
		c := meterCases[i%2]
		var m persisted
		switch c.name {
		case "rate":
			m, _ = meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(1, 4))
		default:
			m, _ = meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(1, 4))
		}
		return m
	}
	for i := range 2 {
		m := mk(i, clk)
		for k := range 20 {
			meterCases[i].op(m, clk.Now(), fmt.Sprint(k))
		}
		s := meterSnap(f, m)
		f.Add(s, uint8(i), false)
		f.Add(s, uint8(i), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, fix bool) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_500)
		i := int(which % 2)
		m := mk(i, clk)
		if fix && len(data) >= 36 {
			data = bytes.Clone(data)
			le, tab := binary.LittleEndian, crc32.MakeTable(crc32.Castagnoli)
			le.PutUint32(data[28:], crc32.Checksum(data[:28], tab))
			le.PutUint32(data[len(data)-4:], crc32.Checksum(data[32:len(data)-4], tab))
		}
		if _, err := m.ReadFrom(bytes.NewReader(data)); err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("untyped error: %v", err)
		}
		for k := range 20 {
			v := meterCases[i].op(m, clk.Now(), fmt.Sprint(k))
			if !(v >= 0) || v > 3.5e38 {
				t.Fatalf("key %d reads %v", k, v)
			}
			clk.Advance(time.Millisecond)
		}
	})
}
