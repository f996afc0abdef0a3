package limit_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func audit48Lim(t *testing.T, clk *limittest.FakeClock, seed uint64, opts ...limit.Option) *limit.Limiter {
	t.Helper()
	l, err := limit.New(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var audit48Opts = map[string][]limit.Option{
	"buckets":   {limit.WithEngine(limit.Buckets), limit.WithCapacity(300, 0.01)},
	"count-min": {limit.WithEngine(limit.CountMin), limit.WithSize(2, 256)},
}

// TestAudit48SaverCloseFinalWrite: Close "stops it, waits for it, writes
// a final snapshot and returns its error (idempotent; goleak-clean)"
// (docs/snapshots.md, "Periodic saves"). With an hour's interval no
// periodic save runs, so the debts on disk after Close come from the
// final write, which must include everything admitted before Close.
func TestAudit48SaverCloseFinalWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for name, opts := range audit48Opts {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		l := audit48Lim(t, clk, 3, opts...)
		path := filepath.Join(t.TempDir(), "l.snap")
		s, err := snapshot.NewSaver(path, time.Hour, l)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var admitted [4]atomic.Int64
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					if l.Allow(fmt.Sprintf("w%d", w)) {
						admitted[w].Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatalf("%s: Close: %v", name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: second Close: %v", name, err)
		}
		b := audit48Lim(t, clk, 9, opts...)
		if err := snapshot.Load(path, b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for w := range 4 {
			k := fmt.Sprintf("w%d", w)
			if got, want := 20-b.Tokens(k), float64(admitted[w].Load()); got < want {
				t.Errorf("%s: %s restored debt %v, %v admitted before Close", name, k, got, want)
			}
		}
	}
}

// TestAudit48LoadTruncatedOrSwapped: Load of a truncated file, of another
// limiter's file (other engine), and of a meter's file of the very same
// length returns a *LoadError matching the documented sentinel and
// leaves the receiver, which holds a debt, untouched ("refuses a file
// whose size is not the length of the destination's snapshot before
// touching it"; a refused header leaves the limiter unchanged).
func TestAudit48LoadTruncatedOrSwapped(t *testing.T) {
	testsize.Serial(t)
	dir := t.TempDir()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, opts := range audit48Opts {
		src := audit48Lim(t, clk, 3, opts...)
		src.AllowN(clk.Now(), "s", 20)
		var buf bytes.Buffer
		if _, err := src.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		full := buf.Bytes()
		files := map[string]struct {
			path string
			is   error
		}{
			"truncated":     {write(name+".trunc", full[:len(full)-1]), sketch.ErrCorruptSnapshot},
			"header only":   {write(name+".hdr", full[:64]), sketch.ErrCorruptSnapshot},
			"trailing byte": {write(name+".long", append(append([]byte(nil), full...), 0)), sketch.ErrCorruptSnapshot},
			"empty":         {write(name+".empty", nil), sketch.ErrCorruptSnapshot},
		}
		// a meter snapshot of the limiter snapshot's exact length
		for _, other := range audit48Opts {
			o := audit48Lim(t, clk, 5, other...)
			if o.SnapshotSize() != src.SnapshotSize() {
				var ob bytes.Buffer
				o.WriteTo(&ob)
				files["other engine"] = struct {
					path string
					is   error
				}{write(name+".other", ob.Bytes()), sketch.ErrCorruptSnapshot}
			}
		}
		for cells := uint32(1); cells < 4096; cells += uint32(testsize.Sample(1, 1, 7)) {
			m, err := meter.NewRate(time.Second, meter.WithSize(2, cells), meter.WithClock(sketchtest.NewFakeClock()))
			if err != nil {
				continue
			}
			if m.SnapshotSize() == src.SnapshotSize() {
				m.ObserveAt(time.UnixMilli(5), "s", 3)
				var mb bytes.Buffer
				m.WriteTo(&mb)
				files["meter of same length"] = struct {
					path string
					is   error
				}{write(name+".meter", mb.Bytes()), sketch.ErrCorruptSnapshot}
				break
			}
		}
		if _, ok := files["meter of same length"]; !ok {
			t.Logf("%s: no meter of the limiter's length %d", name, src.SnapshotSize())
		}
		for what, f := range files {
			dst := audit48Lim(t, clk, 7, opts...)
			dst.AllowN(clk.Now(), "d", 13)
			before := dst.Tokens("d")
			err := snapshot.Load(f.path, dst)
			var le *snapshot.LoadError
			if !errors.As(err, &le) || !errors.Is(err, f.is) {
				t.Errorf("%s %s: Load: %v, want a *LoadError matching %v", name, what, err, f.is)
			} else {
				t.Logf("%s %s: %v", name, what, err)
			}
			if g := dst.Tokens("d"); g != before {
				t.Errorf("%s %s: the receiver's key read %v tokens before the refused Load, %v after", name, what, before, g)
			}
			if g := dst.Tokens("s"); g != 20 {
				t.Errorf("%s %s: the receiver took the file's key: %v tokens", name, what, g)
			}
		}
	}
}

// TestAudit48NoveltyAcrossRotation: a Novelty saved just before, at and
// just after a rotation and restored (another seed, clock at the
// snapshot + d) answers ContainsAt as the never-saved one at the same
// time for every key, and never says "new" for a key marked within T:
// "a restored meter reads what the never-stopped one would"
// (meter/doc.go, "Saving and restoring").
func TestAudit48NoveltyAcrossRotation(t *testing.T) {
	testsize.Serial(t)
	const T = 10 * time.Second
	for _, k := range []float64{1, 1.5, 3} {
		for _, off := range []time.Duration{-time.Millisecond, 0, time.Millisecond, 700 * time.Millisecond} {
			for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Second, T - time.Millisecond} {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				a, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(4, 4096), meter.WithSeed(1), meter.WithPeriodWindows(k))
				if err != nil {
					t.Fatal(err)
				}
				t0 := clk.Now()
				period := time.Duration(float64(T) * k)
				end := t0.Add(2*period + off)
				last := map[string]time.Time{}
				i := 0
				for tm := t0; !tm.After(end); tm = tm.Add(173 * time.Millisecond) {
					clk.SetTime(tm)
					key := fmt.Sprintf("k%d", i%300)
					a.SeenAt(tm, key)
					last[key] = tm
					i++
				}
				clk.SetTime(end)
				var buf bytes.Buffer
				if _, err := a.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				clk2 := sketchtest.NewFakeClock()
				clk2.SetTime(end.Add(d))
				b, _ := meter.NewNovelty(T, meter.WithClock(clk2), meter.WithSize(4, 4096), meter.WithSeed(99), meter.WithPeriodWindows(k))
				if _, err := b.ReadFrom(&buf); err != nil {
					t.Fatal(err)
				}
				clk.SetTime(end.Add(d))
				now := end.Add(d)
				for key, lt := range last {
					ga, gb := a.ContainsAt(now, key), b.ContainsAt(now, key)
					if ga != gb {
						t.Errorf("k=%v off=%v d=%v: %s (marked %v before): never-saved %v, restored %v", k, off, d, key, now.Sub(lt), ga, gb)
					}
					if now.Sub(lt) < T && !gb {
						t.Errorf("k=%v off=%v d=%v: %s marked %v before the read, within T=%v, restored says new", k, off, d, key, now.Sub(lt), T)
					}
				}
			}
		}
	}
}

// TestAudit48RateAcrossRotation: meter.Rate saved around a rotation and
// restored reads PerSecondAt exactly as the never-saved one.
func TestAudit48RateAcrossRotation(t *testing.T) {
	const W = 5 * time.Second
	for _, off := range []time.Duration{-time.Millisecond, 0, time.Millisecond} {
		for _, d := range []time.Duration{0, 3 * time.Millisecond, time.Second, 3 * W} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			a, err := meter.NewRate(W, meter.WithClock(clk), meter.WithSize(4, 2048), meter.WithSeed(1))
			if err != nil {
				t.Fatal(err)
			}
			t0 := clk.Now()
			end := t0.Add(4*W + off) // PeriodWindows default: see report
			i := 0
			for tm := t0; !tm.After(end); tm = tm.Add(37 * time.Millisecond) {
				clk.SetTime(tm)
				a.ObserveAt(tm, fmt.Sprintf("k%d", i%50), float64(1+i%4))
				i++
			}
			clk.SetTime(end)
			var buf bytes.Buffer
			a.WriteTo(&buf)
			clk2 := sketchtest.NewFakeClock()
			clk2.SetTime(end.Add(d))
			b, _ := meter.NewRate(W, meter.WithClock(clk2), meter.WithSize(4, 2048), meter.WithSeed(42))
			if _, err := b.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			clk.SetTime(end.Add(d))
			for _, e := range []time.Duration{0, W / 2, 2 * W} {
				clk.SetTime(end.Add(d + e))
				clk2.SetTime(end.Add(d + e))
				for j := range 50 {
					key := fmt.Sprintf("k%d", j)
					if ga, gb := a.PerSecondAt(end.Add(d+e), key), b.PerSecondAt(end.Add(d+e), key); ga != gb {
						t.Errorf("off=%v d=%v +%v: %s never-saved %v/s, restored %v/s", off, d, e, key, ga, gb)
					}
				}
			}
		}
	}
}

// TestAudit48LoadSameLengthRefused: a file of exactly the receiver's
// length that is another limiter's (other Period: header mismatch) or
// has a flipped byte in the engine's part is refused with a typed
// *LoadError; the header mismatch leaves the receiver unchanged, the
// corrupt body leaves it unchanged or empty (never half restored, never
// holding the file's key).
func TestAudit48LoadSameLengthRefused(t *testing.T) {
	dir := t.TempDir()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	for name, opts := range audit48Opts {
		src := audit48Lim(t, clk, 3, opts...)
		src.AllowN(clk.Now(), "s", 20)
		var buf bytes.Buffer
		src.WriteTo(&buf)
		full := buf.Bytes()
		type tc struct {
			data []byte
			is   error
			dst  []limit.Option
		}
		cases := map[string]tc{}
		for _, off := range []int{len(full) / 2, len(full) - 30, len(full) - 2} {
			b := append([]byte(nil), full...)
			b[off] ^= 0x10
			cases[fmt.Sprintf("flip@%d", off)] = tc{b, sketch.ErrCorruptSnapshot, opts}
		}
		if name == "count-min" {
			o := audit48Lim(t, clk, 3, append(append([]limit.Option(nil), opts...), limit.WithPeriod(9*time.Second))...)
			var ob bytes.Buffer
			o.WriteTo(&ob)
			if int64(ob.Len()) == src.SnapshotSize() {
				cases["other period"] = tc{ob.Bytes(), sketch.ErrSnapshotMismatch, opts}
			}
		}
		for what, c := range cases {
			p := filepath.Join(dir, name+what)
			if err := os.WriteFile(p, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			dst := audit48Lim(t, clk, 7, c.dst...)
			dst.AllowN(clk.Now(), "d", 13)
			before := dst.Tokens("d")
			err := snapshot.Load(p, dst)
			var le *snapshot.LoadError
			if !errors.As(err, &le) || !errors.Is(err, c.is) {
				t.Errorf("%s %s: Load: %v, want a *LoadError matching %v", name, what, err, c.is)
				continue
			}
			g := dst.Tokens("d")
			t.Logf("%s %s: %v; receiver's key %v -> %v tokens", name, what, err, before, g)
			if g != before && g != 20 {
				t.Errorf("%s %s: receiver half restored: %v tokens (before %v, empty 20)", name, what, g, before)
			}
			if errors.Is(err, sketch.ErrSnapshotMismatch) && g != before {
				t.Errorf("%s %s: refused header changed the receiver: %v -> %v", name, what, before, g)
			}
			if s := dst.Tokens("s"); s != 20 {
				t.Errorf("%s %s: receiver holds the file's key: %v tokens", name, what, s)
			}
		}
	}
}

// TestAudit48FixedDamagedEngineHeaderReadsAsMismatch (fixed in limit/doc.go, which now allows the mismatch error for damage in a compared field): limit/doc.go
// ("Saving and restoring"): "Anything else is refused ... with an error
// matching sketch.ErrSnapshotMismatch; a damaged or truncated snapshot
// with one matching sketch.ErrCorruptSnapshot". A file of the right
// length, written by a limiter of the very same configuration, with one
// bit flipped in the engine's own header (after the limiter's 64-byte
// header, which has its own CRC) is reported through snapshot.Load as
// ErrSnapshotMismatch naming a field with a garbage value ("Law.Kind
// differs: got LawKind(17)"), not as corrupt: the engine header's fields
// are compared before the trailing CRC-32C is checked.
func TestAudit48FixedDamagedEngineHeaderReadsAsMismatch(t *testing.T) {
	dir := t.TempDir()
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	for _, name := range []string{"buckets", "count-min"} {
		opts := audit48Opts[name]
		src := audit48Lim(t, clk, 3, opts...)
		src.AllowN(clk.Now(), "s", 20)
		var buf bytes.Buffer
		src.WriteTo(&buf)
		full := buf.Bytes()
		hdrEnd := 64 + 104 // the bucket snapshot's header
		if name == "count-min" {
			hdrEnd = 64 + 56 + 88 // the rotator's header and generation 0's sketch header
		}
		var mism, corrupt, other int
		var first string
		for off := 64; off < hdrEnd; off += testsize.Sample(1, 1, 3) {
			b := append([]byte(nil), full...)
			b[off] ^= 0x10
			p := filepath.Join(dir, fmt.Sprintf("%s-%d", name, off))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			dst := audit48Lim(t, clk, 7, opts...)
			err := snapshot.Load(p, dst)
			switch {
			case errors.Is(err, sketch.ErrCorruptSnapshot):
				corrupt++
			case errors.Is(err, sketch.ErrSnapshotMismatch):
				mism++
				if first == "" {
					first = fmt.Sprintf("byte %d: %v", off, err)
				}
			default:
				other++
				t.Errorf("%s byte %d: %v", name, off, err)
			}
		}
		t.Logf("%s: %d single-bit flips in the engine header: %d ErrCorruptSnapshot, %d ErrSnapshotMismatch, %d other", name, hdrEnd-64, corrupt, mism, other)
		// Fixed in the doc: damage in a header field the limiter compares
		// may read as ErrSnapshotMismatch naming it (the checksum ends the
		// stream); every damaged file is refused with one of the two.
		if mism > 0 {
			t.Logf("%s: first mismatch-reported damage: %s", name, first)
		}
	}
}

// TestAudit48FixedDamagedMeterHeaderReadsAsMismatch: the same for
// meter.Rate (meter/doc.go, "Saving and restoring": "a damaged or
// truncated snapshot with one matching sketch.ErrCorruptSnapshot").
func TestAudit48FixedDamagedMeterHeaderReadsAsMismatch(t *testing.T) {
	dir := t.TempDir()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(seed uint64) *meter.Rate {
		r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src := mk(3)
	src.ObserveAt(clk.Now(), "s", 5)
	var buf bytes.Buffer
	src.WriteTo(&buf)
	full := buf.Bytes()
	hdrEnd := 32 + 56 + 88
	var mism, corrupt int
	var first string
	for off := 32; off < hdrEnd; off++ {
		b := append([]byte(nil), full...)
		b[off] ^= 0x10
		p := filepath.Join(dir, fmt.Sprint(off))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		err := snapshot.Load(p, mk(7))
		switch {
		case errors.Is(err, sketch.ErrCorruptSnapshot):
			corrupt++
		case errors.Is(err, sketch.ErrSnapshotMismatch):
			mism++
			if first == "" {
				first = fmt.Sprintf("byte %d: %v", off, err)
			}
		default:
			t.Errorf("byte %d: %v", off, err)
		}
	}
	t.Logf("meter.Rate: %d single-bit flips in the rotator header and generation 0's sketch header: %d corrupt, %d mismatch", hdrEnd-32, corrupt, mism)
	// Fixed in the doc (as for the limiter above).
	if mism > 0 {
		t.Logf("first mismatch-reported damage of %d: %s", hdrEnd-32, first)
	}
}
