package rotator_test

// Audit 88 (snapshots and merge): rotator snapshots.
//
// Contract: Rotator.ReadFrom ("The rotation deadline moves to the
// rotator's clock through its wall time: a deadline that passed during
// the downtime promotes on the next access, as it would have. On any
// error the rotator is left unchanged"), docs/snapshots.md ("A restored
// rotator's primary retires after the time its deadline had left at the
// snapshot instant, at most one Period, less the downtime"; "A rotator
// builds new generations and publishes them only on success: a failed
// restore never changes it").

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a88T0 = time.UnixMilli(1_780_000_000_000)

var a88Castagnoli = crc32.MakeTable(crc32.Castagnoli)

func a88Rot(t testing.TB, clk sketch.Clock, d decay.Decay, n uint32, seed uint64) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 16, Decay: d, Lo: -10, Hi: 100, Seed: seed, Clock: clk},
		Generations: n, Period: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit88SnapRotatorSavedOverdue: a rotator left idle past its
// deadline (no access promotes it: WriteTo does not either) is saved
// with its stale generation set, the deadline already behind the
// snapshot instant. Restored (both decoders) on another process's clock
// at the instant plus a downtime (0, 1 ms, 400 ms, 1.3 s, 1 h), it must
// read every key as the never-saved twin idle as long does, at the
// restore and at several later instants (the promotions that catch up
// happen on the next access in both).
func TestAudit88SnapRotatorSavedOverdue(t *testing.T) {
	laws := map[string]decay.Decay{"none": decay.None(), "exp": decay.Exponential(0.2)}
	for name, d := range laws {
		for _, n := range []uint32{2, 3} {
			for _, idle := range []time.Duration{1200 * time.Millisecond, 2700 * time.Millisecond, 3 * time.Second} {
				for _, down := range []time.Duration{0, time.Millisecond, 400 * time.Millisecond, 1300 * time.Millisecond, time.Hour} {
					for _, stream := range []bool{false, true} {
						label := fmt.Sprintf("%s/N=%d/idle=%v/down=%v/stream=%v", name, n, idle, down, stream)
						c1 := sketchtest.NewFakeClock()
						c1.SetTime(a88T0)
						orig := a88Rot(t, c1, d, n, 21)
						// Writes in the first Period (some keys again later).
						for i := range 10 {
							c1.SetTime(a88T0.Add(time.Duration(i*90) * time.Millisecond))
							orig.UpdateString(fmt.Sprint("k", i), float64(i+1))
						}
						// Idle: the deadline (T0 + 1 s) passes unseen.
						saveAt := a88T0.Add(900*time.Millisecond + idle)
						c1.SetTime(saveAt)
						var buf bytes.Buffer
						if _, err := orig.WriteTo(&buf); err != nil {
							t.Fatalf("%s: WriteTo: %v", label, err)
						}
						c2 := sketchtest.NewFakeClock()
						c2.SetTime(a88T0.Add(-40 * time.Hour))
						res := a88Rot(t, c2, d, n, 21)
						restoreAt := saveAt.Add(down)
						c2.SetTime(restoreAt)
						var err error
						if stream {
							_, err = res.ReadFrom(bytes.NewReader(buf.Bytes()))
						} else {
							err = res.UnmarshalBinary(buf.Bytes())
						}
						if err != nil {
							t.Fatalf("%s: restore: %v", label, err)
						}
						for _, after := range []time.Duration{0, 1, 100, 999, 1000, 1001, 2500, 4000} {
							at := restoreAt.Add(after * time.Millisecond)
							c1.SetTime(at)
							c2.SetTime(at)
							for i := range 10 {
								k := fmt.Sprint("k", i)
								if g, w := res.QueryString(k), orig.QueryString(k); g != w {
									t.Fatalf("%s: at restore+%dms %s reads %v restored, %v in the idle twin", label, after, k, g, w)
								}
							}
						}
					}
				}
			}
		}
	}
}

// a88FixRotCRCs repairs the checksum of every complete generation (each
// sketch snapshot of gsize bytes after the 56-byte header) and the outer
// one, so that mutated cells and header fields reach the decoder's
// checks.
func a88FixRotCRCs(b []byte, gsize, n int) {
	for i := range n {
		lo, hi := 56+i*gsize, 56+(i+1)*gsize
		if hi > len(b) {
			break
		}
		binary.LittleEndian.PutUint32(b[hi-4:], crc32.Checksum(b[lo:hi-4], a88Castagnoli))
	}
	if len(b) >= 4 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], a88Castagnoli))
	}
}

// FuzzAudit88SnapRotatorDecoders: any input (and the same input with
// every generation's checksum and the outer one repaired): every error is
// typed; a refused restore leaves the rotator byte for byte as it was
// (its own snapshot, on a frozen clock, is unchanged) with both
// UnmarshalBinary and ReadFrom; UnmarshalBinary accepted implies ReadFrom
// accepted with the same state; an accepted restore reads every key
// within [Lo, Hi], snapshots again, and its deadline is at most one
// Period after its instant.
func FuzzAudit88SnapRotatorDecoders(f *testing.F) {
	clk := sketchtest.NewFakeClock()
	clk.SetTime(a88T0)
	src := a88Rot(f, clk, decay.Exponential(0.3), 3, 8)
	for i := range 20 {
		clk.SetTime(a88T0.Add(time.Duration(i*120) * time.Millisecond))
		v := float64(i%6) + 1
		if i%5 == 0 {
			v = -4
		}
		src.UpdateString(fmt.Sprint("s", i), v)
	}
	snap, err := src.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap, false)
	f.Add(snap, true)
	f.Add(snap[:len(snap)/2], true)
	dl := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(dl[32:], uint64(math.MaxInt64)) // deadline far ahead
	f.Add(dl, true)
	nx := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(nx[16:], 2) // next below N
	f.Add(nx, true)
	inst := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(inst[40:], 1<<63)
	f.Add(inst, true)
	gi := bytes.Clone(snap)
	binary.LittleEndian.PutUint64(gi[56+72:], 0) // generation 0's instant at 1970
	f.Add(gi, true)
	gsize := (len(snap) - 56 - 4) / 3
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = bytes.Clone(data)
			a88FixRotCRCs(data, gsize, 3)
		}
		clk := sketchtest.NewFakeClock()
		clk.SetTime(a88T0.Add(5 * time.Second))
		mk := func() *rotator.Rotator {
			r := a88Rot(t, clk, decay.Exponential(0.3), 3, 8)
			r.UpdateString("mine", 7)
			return r
		}
		r1, r2 := mk(), mk()
		before, err := r1.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		err1 := r1.UnmarshalBinary(data)
		_, err2 := r2.ReadFrom(bytes.NewReader(data))
		after1, e1 := r1.MarshalBinary()
		after2, e2 := r2.MarshalBinary()
		if e1 != nil || e2 != nil {
			t.Fatalf("snapshot after the restore: %v / %v", e1, e2)
		}
		for i, c := range []struct {
			err   error
			after []byte
		}{{err1, after1}, {err2, after2}} {
			if c.err == nil {
				continue
			}
			if !errors.Is(c.err, sketch.ErrCorruptSnapshot) && !errors.Is(c.err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("decoder %d: untyped error %v", i, c.err)
			}
			if !bytes.Equal(c.after, before) {
				t.Fatalf("decoder %d refused (%v) but changed the rotator", i, c.err)
			}
		}
		if err1 == nil {
			if err2 != nil {
				t.Fatalf("UnmarshalBinary accepted, ReadFrom refused: %v", err2)
			}
			if !bytes.Equal(after1, after2) {
				t.Fatal("UnmarshalBinary and ReadFrom restored different states")
			}
		}
		for i, c := range []struct {
			err   error
			r     *rotator.Rotator
			after []byte
		}{{err1, r1, after1}, {err2, r2, after2}} {
			if c.err != nil {
				continue
			}
			inst := int64(binary.LittleEndian.Uint64(c.after[40:]))
			dead := int64(binary.LittleEndian.Uint64(c.after[32:]))
			if dead-inst > time.Second.Milliseconds() {
				t.Fatalf("decoder %d: restored deadline %d ms after the instant, more than one Period", i, dead-inst)
			}
			for j := range 20 {
				v := c.r.QueryString(fmt.Sprint("s", j))
				if math.IsNaN(v) || v < -10 || v > 100 {
					t.Fatalf("decoder %d: a key reads %v, outside [Lo, Hi]", i, v)
				}
			}
		}
	})
}
