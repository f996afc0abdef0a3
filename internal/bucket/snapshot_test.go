package bucket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// snapOps runs a deterministic mix of operations on e at the clock's
// reading, advancing clk between them: enough keys on few lines that
// lines fill, entries are evicted and floors rise.
func snapOps(e *Engine, clk *sketchtest.FakeClock, rng *rand.Rand, keys, ops int) {
	for range ops {
		k := fmt.Sprintf("k%d", rng.IntN(keys))
		switch rng.IntN(4) {
		case 0:
			e.Update(k, float64(1+rng.IntN(5)))
		case 1:
			e.TryUpdate(k, float64(1+rng.IntN(3)), 20)
		case 2:
			rc, ok := e.TryReserve(k, 2, 30)
			if ok && rng.IntN(2) == 0 {
				e.Refund(&rc)
			}
		default:
			e.Query(k)
		}
		if rng.IntN(8) == 0 {
			clk.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
		}
	}
}

func snapOf(t testing.TB, e *Engine) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := e.WriteTo(&b)
	if err != nil || n != int64(b.Len()) || n != e.SnapshotSize() {
		t.Fatalf("WriteTo: %d bytes (buffer %d, SnapshotSize %d), %v", n, b.Len(), e.SnapshotSize(), err)
	}
	return b.Bytes()
}

// TestSnapshotRestoreDifferential saves an engine at t0 and restores it,
// under another seed (adopted) and on another clock reading t0+d, into a
// fresh engine; the never-saved engine is advanced to t0+d. From there
// both must agree on every key's load and, after the same operations on
// both, line for line, word for word (the restored engine is on the old
// scale: same lw values, same stamps).
func TestSnapshotRestoreDifferential(t *testing.T) {
	testsize.Serial(t)
	laws := []Law{Linear(10, 40), Linear(1000, 2000), Linear(3, 90), None(100)}
	for li, law := range laws {
		for _, d := range []time.Duration{0, time.Millisecond, 777 * time.Millisecond, 5 * time.Second, 100 * time.Second, 24 * time.Hour * 365 * 3} {
			t.Run(fmt.Sprintf("law=%d/down=%v", li, d), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(li), uint64(d)))
				clk := sketchtest.NewFakeClock()
				clk.Set(5_000_000)
				a := newTest(t, 16, law, clk)
				snapOps(a, clk, rng, 400, 3000)
				snap := snapOf(t, a)
				t0 := clk.NowMillis()

				clk2 := sketchtest.NewFakeClock()
				clk2.Set(t0 + d.Milliseconds())
				b, err := New(Config{Lines: 16, Law: law, Clock: clk2, SeedSet: true, Seed: 99})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.ReadFrom(bytes.NewReader(snap)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("ReadFrom under another seed: %v, want a mismatch", err)
				}
				n, err := b.ReadFromAdopt(bytes.NewReader(snap))
				if err != nil || n != int64(len(snap)) {
					t.Fatalf("ReadFromAdopt: %d of %d bytes, %v", n, len(snap), err)
				}
				clk.Set(t0 + d.Milliseconds())
				for k := range 400 {
					key := fmt.Sprintf("k%d", k)
					if qa, qb := a.Query(key), b.Query(key); qa != qb {
						t.Fatalf("%s: restored %v, never saved %v", key, qb, qa)
					}
				}
				// Same operations on both, each on its own clock.
				seed := rng.Uint64()
				snapOps(a, clk, rand.New(rand.NewPCG(seed, 1)), 400, 2000)
				snapOps(b, clk2, rand.New(rand.NewPCG(seed, 1)), 400, 2000)
				for i := range 16 {
					if sa, sb := StateOf(a, i), StateOf(b, i); sa != sb {
						t.Fatalf("line %d differs after the same operations:\nnever saved %+v\nrestored    %+v", i, sa, sb)
					}
				}
				if sa, sb := a.Saturation(1, 20), b.Saturation(1, 20); sa != sb {
					t.Fatalf("Saturation: restored %v, never saved %v", sb, sa)
				}
			})
		}
	}
}

// TestSnapshotMismatch: an engine of another configuration refuses the
// snapshot with a mismatch naming the field, and keeps its own state.
func TestSnapshotMismatch(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	a := newTest(t, 16, Linear(10, 40), clk)
	a.Update("x", 5)
	snap := snapOf(t, a)
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{Lines: 17, Law: Linear(10, 40)}, "Lines"},
		{Config{Lines: 16, Law: Linear(20, 40)}, "Ticks.Num"},
		{Config{Lines: 16, Law: Linear(10, 50)}, ""}, // another unit: Ticks.Num or Unit, whichever differs first
		{Config{Lines: 16, Law: None(40)}, "Law.Kind"},
		{Config{Lines: 16, Law: Linear(10, 40), Hasher: core.XXH3()}, "Hasher"},
	}
	for _, c := range cases {
		c.cfg.Clock, c.cfg.SeedSet, c.cfg.Seed = clk, true, 1
		b, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		b.Update("y", 3)
		before := b.Query("y")
		_, err = b.ReadFromAdopt(bytes.NewReader(snap))
		var se *core.SnapshotError
		if !errors.Is(err, sketch.ErrSnapshotMismatch) || !errors.As(err, &se) || c.field != "" && se.Field != c.field {
			t.Fatalf("%s: got %v, want a mismatch on %s", c.field, err, c.field)
		}
		if b.Query("y") != before {
			t.Fatalf("%s: a refused header changed the engine", c.field)
		}
	}
}

// TestSnapshotCorrupt: every truncation and every flipped byte is refused
// with a corrupt-snapshot error, and the engine is left empty.
func TestSnapshotCorrupt(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	a := newTest(t, 4, Linear(10, 40), clk)
	snapOps(a, clk, rand.New(rand.NewPCG(1, 2)), 100, 500)
	snap := snapOf(t, a)
	b := newTest(t, 4, Linear(10, 40), clk)
	empty := func(what string) {
		t.Helper()
		for i := range 4 {
			if s := StateOf(b, i); s != (LineState{}) {
				t.Fatalf("%s: line %d not empty: %+v", what, i, s)
			}
		}
	}
	for n := range len(snap) {
		_, err := b.ReadFromAdopt(bytes.NewReader(snap[:n]))
		if !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("truncated at %d of %d: %v", n, len(snap), err)
		}
		empty(fmt.Sprintf("truncated at %d", n))
	}
	for i := range snap {
		bad := bytes.Clone(snap)
		bad[i] ^= 0x40
		_, err := b.ReadFromAdopt(bytes.NewReader(bad))
		if err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
		if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("byte %d flipped: untyped error %v", i, err)
		}
		empty(fmt.Sprintf("byte %d flipped", i))
	}
	if _, err := b.ReadFromAdopt(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	// A well-checksummed line out of bounds: lw after the instant.
	bad := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(bad[snapHeaderBytes:], lwMask)
	fixCRC(bad)
	if _, err := b.ReadFromAdopt(bytes.NewReader(bad)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Fatalf("lw after the instant: %v", err)
	}
	empty("lw after the instant")
}

func fixCRC(b []byte) {
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crcTable))
}

// FuzzReadFrom feeds arbitrary bytes (seeded with real snapshots) to
// ReadFromAdopt, with the checksum repaired when fix is set so that the
// line checks are reached: it must never panic, must return a typed
// error or restore an engine whose every load is within [0, Max] and
// that keeps working.
func FuzzReadFrom(f *testing.F) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	for _, law := range []Law{Linear(10, 40), None(100)} {
		a := newTest(f, 2, law, clk)
		snapOps(a, clk, rand.New(rand.NewPCG(3, 4)), 60, 300)
		s := snapOf(f, a)
		f.Add(s, false, uint8(law.Kind))
		f.Add(s, true, uint8(law.Kind))
		f.Add(s[:len(s)/2], false, uint8(law.Kind))
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool, kind uint8) {
		law := Linear(10, 40)
		if kind%2 == 0 {
			law = None(100)
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(2_000_000)
		e := newTest(t, 2, law, clk)
		if fix && len(data) >= 4 {
			data = bytes.Clone(data)
			fixCRC(data)
		}
		_, err := e.ReadFromAdopt(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("untyped error: %v", err)
			}
			for i := range 2 {
				if s := StateOf(e, i); s != (LineState{}) {
					t.Fatalf("refused, but line %d is not empty: %+v", i, s)
				}
			}
		}
		for k := range 50 {
			key := fmt.Sprintf("k%d", k)
			if v := e.Query(key); !(v >= 0 && v <= law.Max) {
				t.Fatalf("%s reads %v, outside [0, %v]", key, v, law.Max)
			}
			e.TryUpdate(key, 1, 20)
			clk.Advance(3 * time.Millisecond)
		}
	})
}

// TestSnapshotConcurrent snapshots an engine while writers run (under
// -race: the encode reads every word atomically) and restores it: every
// key's load is at least what it was before the snapshot began, less the
// drain since.
func TestSnapshotConcurrent(t *testing.T) {
	e := MustNew(Config{Lines: 64, Law: Linear(1, 1000)}) // real clock, slow drain
	for k := range 200 {
		e.Update(fmt.Sprintf("k%d", k), 500)
	}
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e.Update(fmt.Sprintf("w%d", i%300), 1)
		}
	}()
	var b bytes.Buffer
	if _, err := e.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	r := MustNew(Config{Lines: 64, Law: Linear(1, 1000)})
	if _, err := r.ReadFromAdopt(&b); err != nil {
		t.Fatal(err)
	}
	for k := range 200 {
		// 500 at most a few seconds ago, draining 1 per second.
		if v := r.Query(fmt.Sprintf("k%d", k)); v < 490 {
			t.Fatalf("k%d restored at %v, below its load at the snapshot", k, v)
		}
	}
}
