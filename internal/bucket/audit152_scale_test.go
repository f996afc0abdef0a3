package bucket

import (
	"bytes"
	"math"
	"math/big"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a152Ends are clock readings at both ends of int64 ms and in between.
var a152Ends = []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 5, -1, 0, 1, math.MaxInt64 - 5, math.MaxInt64 - 1, math.MaxInt64}

// a152WantRel is the model of rel: off + (ms - base), exact, clamped to
// [0, lwMask].
func a152WantRel(base int64, off uint64, ms int64) uint64 {
	v := new(big.Int).Sub(big.NewInt(ms), big.NewInt(base))
	v.Add(v, new(big.Int).SetUint64(off))
	switch {
	case v.Sign() <= 0:
		return 0
	case v.Cmp(big.NewInt(lwMask)) >= 0:
		return lwMask
	}
	return v.Uint64()
}

// TestAudit152EngineSizeKept: 0038162 moved quant.sealShift to a byte
// beside kind "so the Engine struct keeps its size": unsafe.Sizeof(Engine)
// is 4480 on amd64 and 4608 on arm64 (its lines' padding is larger), as
// at e39a3f7 (measured there; quant was 112 bytes there, at most that
// now: the byte took kind's padding).
func TestAudit152EngineSizeKept(t *testing.T) {
	want := map[string]uintptr{"amd64": 4480, "arm64": 4608}[runtime.GOARCH]
	if got := unsafe.Sizeof(Engine{}); want != 0 && got != want {
		t.Errorf("unsafe.Sizeof(Engine) = %d on %s, want %d (e39a3f7)", got, runtime.GOARCH, want)
	}
	if got := unsafe.Sizeof(quant{}); got > 112 {
		t.Errorf("unsafe.Sizeof(quant) = %d, want at most 112 (e39a3f7)", got)
	}
}

// TestAudit152SealShiftFitsByte: sealShift is a uint8 now; for every
// law kind and a spread of rates, seal == 1 << sealShift and sealShift
// is log2 of the largest power of two at or below slack/8 (no byte
// truncation: it is well below 64).
func TestAudit152SealShiftFitsByte(t *testing.T) {
	laws := []Law{Linear(1, 1), Linear(1e-3, 100), Linear(1e6, 1e4), Linear(10, 65535), None(1), None(60000),
		Exponential(1, 100, 0), Exponential(1e-6, 1e4, 0), Exponential(100, 1, 0)}
	for _, law := range laws {
		q, err := newQuant(law)
		if err != nil {
			continue
		}
		if q.sealShift >= 64 || q.seal != 1<<q.sealShift {
			t.Errorf("%+v: sealShift %d, seal %d", law, q.sealShift, q.seal)
		}
		if q.seal > q.slack/8 || 2*q.seal <= q.slack/8 {
			t.Errorf("%+v: seal %d not the largest power of two <= slack/8 = %d", law, q.seal, q.slack/8)
		}
	}
}

// TestAudit152RelMsOfModel: rel against the exact model for bases at
// both ends and in between, off at 0, 1, 2^46, lwMask-1 and lwMask
// (ReadFrom caps target at lwMask), at ms = MinInt64, MaxInt64, base-1,
// base, base+1, base±off, base±2^47; msOf inverts rel wherever rel is
// strictly inside (0, lwMask), and rel(msOf(r)) == r for every r the
// clock can reach (msOf not saturated).
func TestAudit152RelMsOfModel(t *testing.T) {
	e := newTest(t, 2, Linear(1, 100), nil)
	offs := []uint64{0, 1, 1 << 46, lwMask - 1, lwMask}
	for _, base := range a152Ends {
		for _, off := range offs {
			e.base, e.off = base, off
			mss := []int64{math.MinInt64, math.MaxInt64}
			for _, d := range []int64{-1, 0, 1, -int64(off), int64(off), -lwMask, lwMask, -lwMask - 1, lwMask + 1} {
				mss = append(mss, subSatT(base, -d))
			}
			for _, ms := range mss {
				got, want := e.rel(ms), a152WantRel(base, off, ms)
				if got != want {
					t.Errorf("base %d off %d: rel(%d) = %d, want %d", base, off, ms, got, want)
				}
				if got > 0 && got < lwMask {
					if back := e.msOf(got); back != ms {
						t.Errorf("base %d off %d: msOf(rel(%d) = %d) = %d", base, off, ms, got, back)
					}
				}
			}
			for _, r := range []uint64{0, 1, off - min(off, 1), off, off + 1, lwMask - 1, lwMask} {
				if r > lwMask {
					continue
				}
				ms := e.msOf(r)
				exact := new(big.Int).Add(big.NewInt(base), new(big.Int).Sub(new(big.Int).SetUint64(r), new(big.Int).SetUint64(off)))
				if !exact.IsInt64() {
					continue // saturated: r is not reachable on this scale
				}
				if ms != exact.Int64() {
					t.Errorf("base %d off %d: msOf(%d) = %d, want %v", base, off, r, ms, exact)
				}
				if got := e.rel(ms); got != r {
					t.Errorf("base %d off %d: rel(msOf(%d)) = %d", base, off, r, got)
				}
			}
		}
	}
}

// subSatT is a - b saturated (the test's own, not core's).
func subSatT(a, b int64) int64 {
	v := new(big.Int).Sub(big.NewInt(a), big.NewInt(b))
	switch {
	case v.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case v.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return v.Int64()
}

// a152Save returns e's snapshot.
func a152Save(t *testing.T, e *Engine) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := e.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAudit152SaveRestoreChain: on a fake clock at each end of int64 ms
// and in between, engine A takes 50 of 100 for "k", is saved; B (on
// another clock at the same reading) restores it, is saved, C restores
// B's snapshot; then A itself restores C's snapshot and then B's (base
// and off replaced twice). No downtime: each engine's now() on the
// scale is A's (rel(now) round-trips through the chain) and "k" reads 50
// in every engine. Where the clock can move 2 s (not at MaxInt64), every
// engine then reads 30 (Linear(10): 20 drained), and A, B, C all still
// agree.
func TestAudit152SaveRestoreChain(t *testing.T) {
	law := Linear(10, 100)
	for _, base := range a152Ends {
		clocks := make([]*sketchtest.FakeClock, 3)
		engs := make([]*Engine, 3)
		for i := range clocks {
			clocks[i] = sketchtest.NewFakeClock()
			clocks[i].Set(base)
			engs[i] = newTest(t, 64, law, clocks[i])
		}
		a, b, c := engs[0], engs[1], engs[2]
		if !a.TryUpdate("k", 50, 100) {
			t.Fatalf("clock %d: A denied 50 of 100", base)
		}
		snapA := a152Save(t, a)
		if _, err := b.ReadFrom(bytes.NewReader(snapA)); err != nil {
			t.Fatalf("clock %d: B restore: %v", base, err)
		}
		snapB := a152Save(t, b)
		if _, err := c.ReadFrom(bytes.NewReader(snapB)); err != nil {
			t.Fatalf("clock %d: C restore: %v", base, err)
		}
		for _, snap := range [][]byte{a152Save(t, c), snapB} {
			if _, err := a.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatalf("clock %d: A re-restore: %v", base, err)
			}
		}
		wantNow := a.now()
		for i, e := range engs {
			if got := e.now(); got != wantNow {
				t.Errorf("clock %d: engine %d now() = %d, want %d (A's)", base, i, got, wantNow)
			}
			if got := e.Query("k"); math.Abs(got-50) > 0.01 {
				t.Errorf("clock %d: engine %d reads %v, want 50", base, i, got)
			}
		}
		if base > math.MaxInt64-2000 {
			continue
		}
		for _, clk := range clocks {
			clk.Advance(2 * time.Second)
		}
		for i, e := range engs {
			if got := e.Query("k"); math.Abs(got-30) > 0.01 {
				t.Errorf("clock %d, 2 s later: engine %d reads %v, want 30", base, i, got)
			}
		}
	}
}

// TestAudit152RestoreDowntimeAtEnds: a snapshot taken at wall 0 ms
// (50 of 100 for "k", Linear(10)), restored on clocks 1 s, 2 s, 5 s
// later: the key reads 50 less the downtime's drain (40, 30, 0); and on
// a clock before the snapshot (MinInt64, -1 s): no downtime, 50. The
// restored engine's off is the snapshot instant plus the downtime.
func TestAudit152RestoreDowntimeAtEnds(t *testing.T) {
	law := Linear(10, 100)
	ca := sketchtest.NewFakeClock()
	a := newTest(t, 64, law, ca)
	if !a.TryUpdate("k", 50, 100) {
		t.Fatal("denied")
	}
	atRel := a.now()
	snap := a152Save(t, a)
	for _, c := range []struct {
		at   int64
		want float64
	}{{math.MinInt64, 50}, {math.MinInt64 + 1, 50}, {-1000, 50}, {0, 50}, {1000, 40}, {2000, 30}, {5000, 0}, {math.MaxInt64, 0}} {
		cb := sketchtest.NewFakeClock()
		cb.Set(c.at)
		b := newTest(t, 64, law, cb)
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatalf("at %d: %v", c.at, err)
		}
		if got := b.Query("k"); math.Abs(got-c.want) > 0.01 {
			t.Errorf("restored at %d: reads %v, want %v", c.at, got, c.want)
		}
		wantOff := atRel + uint64(min(max(c.at, 0), lwMask))
		wantOff = min(wantOff, lwMask)
		if b.base != c.at || b.off != wantOff {
			t.Errorf("restored at %d: base %d off %d, want %d, %d", c.at, b.base, b.off, c.at, wantOff)
		}
	}
}

// TestAudit152ReservedAcrossRestore: a Receipt taken before a restore is
// void for Refund, as documented ("A Receipt issued before a snapshot
// load ... gives back nothing"), and a Receipt taken after a restore on a
// clock near MinInt64 reports its own clock reading from Reserved (msOf
// of the write's ms on the restored scale), at base and after the clock
// moved 1 s; its load is the key's.
func TestAudit152ReservedAcrossRestore(t *testing.T) {
	law := Linear(10, 100)
	ca := sketchtest.NewFakeClock()
	ca.Set(10_000)
	a := newTest(t, 64, law, ca)
	if !a.TryUpdate("k", 20, 100) {
		t.Fatal("denied")
	}
	snap := a152Save(t, a)
	for _, at := range []int64{math.MinInt64, math.MinInt64 + 1, 0, 20_000} {
		cb := sketchtest.NewFakeClock()
		cb.Set(at)
		b := newTest(t, 64, law, cb)
		old, ok := b.TryReserve("r", 10, 100)
		if !ok {
			t.Fatalf("at %d: denied", at)
		}
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if b.Refund(&old) {
			t.Errorf("at %d: a Receipt from before the restore gave its write back", at)
		}
		for _, step := range []time.Duration{0, time.Second} {
			cb.Advance(step)
			rc, ok := b.TryReserve("k", 5, 100)
			if !ok {
				t.Fatalf("at %d: denied after restore", at)
			}
			ms, load := b.Reserved(&rc)
			if want := cb.NowMillis(); ms != want {
				t.Errorf("restored at %d, +%v: Reserved ms = %d, want the clock's %d", at, step, ms, want)
			}
			if q := b.Query("k"); math.Abs(load-q) > 0.01 {
				t.Errorf("restored at %d, +%v: Reserved load %v, Query %v", at, step, load, q)
			}
		}
	}
}

// TestAudit152RestoreLongDowntimeContinuesHorizon: ReadFrom sets the
// restored scale at the snapshot's instant plus the downtime (e.base,
// e.off = ms, target; target capped at lwMask). A downtime that reaches
// 2^47 ms puts the restored engine at its horizon at once: no load
// written after the restore drains (a fresh key's 100 still reads 100
// 2 s later), where a New engine on the same clock drains (80). That is
// what the never-stopped engine (A, its clock moved to the restore's
// reading) does too, which limit/doc.go promises ("the restored limiter
// decides as the never-stopped one would at the same wall time"), and
// its horizon is documented ("It counts time in 47 bits of milliseconds
// after New ... debts stop draining"): "after New" means the original
// New, not the restoring limiter's (a doc sharpening, not a finding).
// The same held before 0038162 (epoch = ms - lwMask).
func TestAudit152RestoreLongDowntimeContinuesHorizon(t *testing.T) {
	law := Linear(10, 100)
	for _, c := range []struct{ save, restore int64 }{
		{0, 1 << 47}, {0, math.MaxInt64 - 2000}, {math.MinInt64 + 10, 0},
	} {
		ca := sketchtest.NewFakeClock()
		ca.Set(c.save)
		a := newTest(t, 64, law, ca)
		a.TryUpdate("k", 50, 100)
		snap := a152Save(t, a)
		cb := sketchtest.NewFakeClock()
		cb.Set(c.restore)
		ca.Set(c.restore)
		b := newTest(t, 64, law, cb)
		fresh := newTest(t, 64, law, cb)
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if q := b.Query("k"); q != 0 {
			t.Errorf("saved at %d, restored at %d: k reads %v, want 0 (drained by the downtime)", c.save, c.restore, q)
		}
		for _, e := range []*Engine{a, b, fresh} {
			if !e.TryUpdate("new", 100, 100) {
				t.Fatalf("saved at %d, restored at %d: a fresh key was denied", c.save, c.restore)
			}
		}
		cb.Advance(2 * time.Second)
		ca.Advance(2 * time.Second)
		if q := fresh.Query("new"); math.Abs(q-80) > 0.01 {
			t.Errorf("New engine at %d: reads %v 2 s after 100, want 80", c.restore, q)
		}
		qa, qb := a.Query("new"), b.Query("new")
		if qa != 100 || qb != 100 {
			t.Errorf("saved at %d, restored at %d: 2 s after 100, the never-stopped engine reads %v, the restored one %v; want both 100 (at the horizon)", c.save, c.restore, qa, qb)
		}
	}
}
