package rotator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A rotator snapshot of 3 generations of 2 x 1024 cells (one chunk
// each): write 1 the rotator header (its instant already read), then
// generation g's header at 2+3g, its cells at 3+3g, its sum at 4+3g, and
// the rotator's sum at 11. A hook before write N runs after the cells of
// every generation whose header came before N were loaded: a write made
// there reaches generation g of the snapshot iff N <= 2+3g.
const (
	a62T0     = int64(1_700_000_000_000)
	a62Period = 1000
	a62Lambda = 0.7 // per second
)

func a62Cfg(c sketch.Clock) Config {
	return Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 1024, Decay: decay.Exponential(a62Lambda), Hi: 1e12, Seed: 7, Clock: c},
		Generations: 3,
		Period:      a62Period * time.Millisecond,
	}
}

type a62Upd struct {
	key  string
	at   int64
	v    float64
	from int64 // the first wall ms at which the primary holds it
}

func a62Truth(ups []a62Upd, key string, tau, shift int64) float64 {
	s := 0.0
	for _, u := range ups {
		a := u.at + shift
		if u.key != key || tau < a || tau < u.from+shift {
			continue
		}
		s += u.v * math.Exp(-a62Lambda*float64(tau-a)/1000)
	}
	return s
}

// TestAudit62RotatorEncodeMovesNeverBelowOracle: a rotator (3
// generations, Period 1 s, Exponential(0.7)) updated at +100 and +400,
// saved at +500; before every write N of the encode the clock moves by d
// (1, 250, 499 ms forward, 5 ms or 2 days back) and w is updated there,
// reaching the generations loaded after the hook. Restored on clocks 1 h
// and 1 ms behind, at, and 1 ms, 400 ms and 1.6 s ahead of the instant
// (the last past the deadline: it promotes on the first access), and
// walked across both promotions to the initial generations (until the
// first generation born after the snapshot becomes the primary), every
// key reads at least its exact decayed sum on the restore's time line,
// and w from the promotion of the first generation holding it.
// docs/snapshots.md: "every generation is stated at the rotator's one
// snapshot instant ... so a restore maps all of them to the same times";
// a count-min Min estimate never falls below the truth.
func TestAudit62RotatorEncodeMovesNeverBelowOracle(t *testing.T) {
	S := a62T0 + 500
	for _, d := range []int64{1, 250, 499, -5, -2 * 86_400_000} {
		for N := 1; N <= 11; N++ {
			c := sketchtest.NewFakeClock()
			c.Set(a62T0)
			r, err := New(a62Cfg(c))
			if err != nil {
				t.Fatal(err)
			}
			ups := []a62Upd{{"k", a62T0 + 100, 40, 0}, {"j", a62T0 + 400, 7, 0}, {"k", a62T0 + 400, 3, 0}}
			for _, u := range ups {
				c.Set(u.at)
				r.UpdateString(u.key, u.v)
			}
			c.Set(S)
			hw := &testhook.Writer{N: N, Hook: func() {
				c.Set(S + d)
				r.UpdateString("w", 11)
				for g := 0; g < 3; g++ {
					if N <= 2+3*g {
						ups = append(ups, a62Upd{"w", max(S, S+d), 11, a62T0 + int64(g)*a62Period})
						break
					}
				}
			}}
			if _, err := r.WriteTo(hw); err != nil {
				t.Fatalf("d=%d N=%d: WriteTo: %v", d, N, err)
			}
			for _, off := range []int64{-3_600_000, -1, 0, 1, 400, 1600} {
				c2 := sketchtest.NewFakeClock()
				r0 := S + off
				c2.Set(r0)
				m, err := New(a62Cfg(c2))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.ReadFrom(bytes.NewReader(hw.Buf.Bytes())); err != nil {
					t.Fatalf("ReadFrom: %v", err)
				}
				shift := min(off, 0)
				bad := false
				for tau := r0; tau < a62T0+3*a62Period+shift && !bad; tau += 3 {
					c2.Set(tau)
					for _, key := range []string{"k", "j", "w"} {
						truth := a62Truth(ups, key, tau, shift)
						if got := m.QueryString(key); got < truth*(1-1e-6) {
							t.Errorf("d=%d N=%d restore off %d: Query(%s) at +%d on the restore's line = %v, below the exact %v (ratio %.4f)",
								d, N, off, key, tau-shift-a62T0, got, truth, got/truth)
							bad = true
						}
					}
				}
			}
		}
	}
}

// TestAudit62RotatorJumpRefusedExactly: the same rotator with a Period
// of 60 days saved while the clock jumps forward by d (2^20 ms to 2^32 +
// 5 ms, past the horizon sweep and the 32-bit stamp wrap) before write N,
// with or without an update there: WriteTo fails, with an error matching
// sketch.ErrTakeAgain, exactly when the update reached a generation not
// yet loaded (N <= 8) and its cell cannot be stated within 2^24 ms of
// the instant: read back to the instant it exceeds Hi (1e12), so it is
// stated at Hi as far after it as Hi takes to decay to 11, d - 36.04 s
// (since stop 47; before, every d > 2^24 ms was refused). sketch/errors.go:
// ErrTakeAgain "a cell written after the jump that can only be stated
// more than 2^24 ms after the instant". Then the same call an instant
// later succeeds ("Nothing is wrong with the receiver: the same call an
// instant later succeeds").
func TestAudit62RotatorJumpRefusedExactly(t *testing.T) {
	S := a62T0 + 500
	for _, d := range []int64{1 << 20, 1<<24 - 1, 1 << 24, 1<<24 + 1, 86_400_000, 1<<29 + 5, 1<<30 + 5, 1 << 31, 1 << 32, 1<<32 + 5} {
		for N := 1; N <= 11; N++ {
			for _, write := range []bool{false, true} {
				c := sketchtest.NewFakeClock()
				c.Set(a62T0)
				cfg := a62Cfg(c)
				cfg.Period = 60 * 24 * time.Hour
				r, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				c.Set(a62T0 + 100)
				r.UpdateString("k", 40)
				c.Set(S)
				hw := &testhook.Writer{N: N, Hook: func() {
					c.Set(S + d)
					if write {
						r.UpdateString("w", 11)
					}
				}}
				_, err = r.WriteTo(hw)
				hiLead := int64(math.Log(1e12/11) / a62Lambda * 1000) // 36043 ms
				want := write && N <= 8 && d-hiLead > 1<<24
				if (err != nil) != want || (err != nil && !errors.Is(err, sketch.ErrTakeAgain)) {
					t.Errorf("d=%d N=%d write=%v: WriteTo = %v; want an error matching ErrTakeAgain: %v", d, N, write, err, want)
				}
				if err != nil {
					if _, err := r.MarshalBinary(); err != nil {
						t.Errorf("d=%d N=%d: the same call an instant later: %v", d, N, err)
					}
				}
			}
		}
	}
}

// a62Legacy rewrites a rotator snapshot as the code before audit 58
// wrote it when the clock moved by delta[g] ms between the rotator's
// instant and generation g's encode with no write in between: generation
// g's instant is delta[g] later and each of its cells' ages delta[g]
// more; every checksum is fixed.
func a62Legacy(t *testing.T, snap []byte, levels, m int, delta []int64) []byte {
	t.Helper()
	out := append([]byte(nil), snap...)
	le := binary.LittleEndian
	tab := crc32.MakeTable(crc32.Castagnoli)
	genSize := 88 + 8*levels*m + 4
	for g, dl := range delta {
		base := 56 + g*genSize
		le.PutUint64(out[base+72:], uint64(int64(le.Uint64(out[base+72:]))+dl))
		for i := 0; i < levels*m; i++ {
			p := base + 88 + 8*i + 4
			age := int64(int32(le.Uint32(out[p:])))
			le.PutUint32(out[p:], uint32(int32(min(age+dl, math.MaxInt32))))
		}
		le.PutUint32(out[base+genSize-4:], crc32.Checksum(out[base:base+genSize-4], tab))
	}
	le.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], tab))
	return out
}

// TestAudit62LegacySnapshotRestoresAsBefore: a snapshot as the code
// before audit 58 wrote it (generation g's instant 20 g ms after the
// rotator's: a 20 ms encode per generation, nothing written meanwhile)
// is accepted. Restored on a clock at or ahead of every instant it reads
// exactly what the new snapshot of the same state reads (each generation
// ages by its own downtime: the same times); docs/migrating.md: "older
// snapshots restore as before". Since stop 47 it does on a clock behind
// or between those instants too (the decoder maps every generation by
// the rotator's instant); before, the later generations kept their skew
// as extra age (21.24 read 20.95 a day behind).
func TestAudit62LegacySnapshotRestoresAsBefore(t *testing.T) {
	S := a62T0 + 500
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	r, err := New(a62Cfg(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Set(a62T0 + 100)
	r.UpdateString("k", 40)
	c.Set(a62T0 + 450)
	r.UpdateString("j", 9)
	c.Set(S)
	snap, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	old := a62Legacy(t, snap, 2, 1024, []int64{0, 20, 40})
	for _, off := range []int64{-86_400_000, -3_600_000, -1, 0, 10, 20, 39, 40, 41, 300, 1600, 86_400_000} {
		c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		c1.Set(S + off)
		c2.Set(S + off)
		a, _ := New(a62Cfg(c1))
		b, _ := New(a62Cfg(c2))
		if err := a.UnmarshalBinary(snap); err != nil {
			t.Fatal(err)
		}
		if err := b.UnmarshalBinary(old); err != nil {
			t.Fatalf("a legacy snapshot refused: %v", err)
		}
		for tau := S + off; tau < S+off+3*a62Period; tau += 7 {
			c1.Set(tau)
			c2.Set(tau)
			for _, key := range []string{"k", "j"} {
				if x, y := a.QueryString(key), b.QueryString(key); math.Abs(x-y) > 1e-6*math.Max(1, x) {
					t.Fatalf("restore off %d, +%d: Query(%s) new snapshot %v, legacy %v", off, tau-S, key, x, y)
				}
			}
		}
	}
}

// TestAudit62GenerationInstantsEqualRotatorInstant: docs/snapshots.md's
// rotator table: generations are "sketch snapshots, each with the
// rotator's snapshot instant as its T": with a fake clock moved before
// every write of the encode, and with the runtime's clock, every
// generation's header instant (offset 72) equals the rotator's (offset
// 40).
func TestAudit62GenerationInstantsEqualRotatorInstant(t *testing.T) {
	genSize := 88 + 8*2*1024 + 4
	check := func(name string, b []byte) {
		le := binary.LittleEndian
		inst := le.Uint64(b[40:])
		for g := 0; g < 3; g++ {
			if gi := le.Uint64(b[56+g*genSize+72:]); gi != inst {
				t.Errorf("%s: generation %d's instant %d, the rotator's %d", name, g, gi, inst)
			}
		}
	}
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	r, err := New(a62Cfg(c))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	w := &a62Every{f: func() { n++; c.Set(a62T0 + int64(n)*37) }}
	if _, err := r.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	check("fake clock moving", w.buf.Bytes())
	cfg := a62Cfg(nil)
	sys, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sys.UpdateString("k", 1)
	b, err := sys.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	check("runtime clock", b)
}

// a62Every runs f before every write.
type a62Every struct {
	buf bytes.Buffer
	f   func()
}

func (w *a62Every) Write(p []byte) (int, error) { w.f(); return w.buf.Write(p) }
