package meter_test

// Audit 92 (meter snapshots over idle gaps and downtimes).
//
// Contract: meter/doc.go, "Saving and restoring" ("Every counter and
// mark decays by the wall time elapsed since the snapshot (none if the
// restoring clock's time is earlier), so a restored meter reads what the
// never-stopped one would"; "ReadFrom takes it into a meter freshly
// built with the same window, PeriodWindows and size, whatever that
// meter's seed"; "a damaged or truncated snapshot [is refused] with one
// matching sketch.ErrCorruptSnapshot ... and the meter is then left as
// it was"; "Inflight has none"), Rate.ReadFrom ("reading exactly its
// bytes"), Novelty.ReadFrom ("A key marked within T of the snapshot's
// instant is seen until T after its mark, the downtime counted").
// Earlier audits restored across one deadline (79) and under traffic
// (40, 58); these save after idle gaps of 0 to 3 Periods (the rotator
// overdue, nothing promoted yet) and restore after downtimes of 0 to a
// day, against the never-stopped meter, and cut the stream at every
// length.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a92MeterT0 = int64(1_810_000_000_000)

// TestAudit92SnapMeterRateIdleGaps: a Rate (window 100 ms, PeriodWindows
// 1 and 16) observes eight keys for three Periods, sits idle for a gap
// (0 to 3 Periods: its deadline passes unseen), is saved, and restored
// into a Rate built with another seed on another clock after a downtime;
// at the restore and at later instants (across the next promotions)
// every key's PerSecond equals the never-stopped Rate's, and so do the
// readings after both observe the same new events.
func TestAudit92SnapMeterRateIdleGaps(t *testing.T) {
	const w = int64(100)
	for _, pw := range []float64{1, 16} {
		period := int64(pw) * w
		for _, gap := range []int64{0, 1, period / 2, period, period + 1, 2*period + 7, 3 * period} {
			for _, down := range []int64{0, 1, w - 1, period, 5 * period, 86_400_000} {
				name := fmt.Sprintf("pw=%v/gap=%d/down=%d", pw, gap, down)
				c1 := sketchtest.NewFakeClock()
				c1.Set(a92MeterT0)
				orig, err := meter.NewRate(time.Duration(w)*time.Millisecond, meter.WithClock(c1), meter.WithSeed(3), meter.WithSize(2, 64), meter.WithPeriodWindows(pw))
				if err != nil {
					t.Fatal(err)
				}
				end := a92MeterT0 + 3*period
				for at := a92MeterT0; at < end; at += 7 {
					c1.Set(at)
					orig.Observe(fmt.Sprint("k", (at/7)%8))
				}
				save := end + gap
				c1.Set(save)
				var buf bytes.Buffer
				if _, err := orig.WriteTo(&buf); err != nil {
					t.Fatalf("%s: WriteTo: %v", name, err)
				}
				c2 := sketchtest.NewFakeClock()
				c2.Set(save + down)
				res, err := meter.NewRate(time.Duration(w)*time.Millisecond, meter.WithClock(c2), meter.WithSeed(12345), meter.WithSize(2, 64), meter.WithPeriodWindows(pw))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := res.ReadFrom(&buf); err != nil {
					t.Fatalf("%s: ReadFrom: %v", name, err)
				}
				for _, after := range []int64{0, 1, w / 2, w, period, period + w/3, 2 * period} {
					at := save + down + after
					c1.Set(at)
					c2.Set(at)
					if after == w {
						orig.Observe("k3")
						res.Observe("k3")
					}
					for i := range 8 {
						k := fmt.Sprint("k", i)
						if g, x := res.PerSecond(k), orig.PerSecond(k); g != x {
							t.Fatalf("%s: at restore+%dms %s reads %v/s restored, %v/s never stopped", name, after, k, g, x)
						}
					}
				}
			}
		}
	}
}

// TestAudit92SnapMeterNoveltyIdleGaps: the Novelty analogue (T = 50 ms,
// PeriodWindows 1 and 16): marks for three Periods, an idle gap, a save,
// a restore after a downtime into a Novelty with another seed; Contains
// agrees with the never-stopped Novelty at every later instant, Seen
// decides alike, and every key marked less than T before a read (the
// downtime counted) is contained.
func TestAudit92SnapMeterNoveltyIdleGaps(t *testing.T) {
	const tm = int64(50)
	for _, pw := range []float64{1, 16} {
		period := int64(pw) * tm
		for _, gap := range []int64{0, 1, tm - 1, period, 2*period + 3, 3 * period} {
			for _, down := range []int64{0, 1, tm / 2, tm - 1, period, 86_400_000} {
				name := fmt.Sprintf("pw=%v/gap=%d/down=%d", pw, gap, down)
				c1 := sketchtest.NewFakeClock()
				c1.Set(a92MeterT0)
				opts := func(c sketch.Clock, seed uint64) []meter.Option {
					return []meter.Option{meter.WithClock(c), meter.WithSeed(seed), meter.WithSize(3, 512), meter.WithPeriodWindows(pw)}
				}
				orig, err := meter.NewNovelty(time.Duration(tm)*time.Millisecond, opts(c1, 8)...)
				if err != nil {
					t.Fatal(err)
				}
				end := a92MeterT0 + 3*period
				marked := map[string]int64{}
				for at, i := a92MeterT0, 0; at < end; at, i = at+3, i+1 {
					c1.Set(at)
					k := fmt.Sprint("m", i%40)
					orig.Seen(k)
					marked[k] = at
				}
				save := end + gap
				c1.Set(save)
				var buf bytes.Buffer
				if _, err := orig.WriteTo(&buf); err != nil {
					t.Fatalf("%s: WriteTo: %v", name, err)
				}
				c2 := sketchtest.NewFakeClock()
				c2.Set(save + down)
				res, err := meter.NewNovelty(time.Duration(tm)*time.Millisecond, opts(c2, 99)...)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := res.ReadFrom(&buf); err != nil {
					t.Fatalf("%s: ReadFrom: %v", name, err)
				}
				for _, after := range []int64{0, 1, tm / 2, tm, period, 2 * period} {
					at := save + down + after
					c1.Set(at)
					c2.Set(at)
					for i := range 40 {
						k := fmt.Sprint("m", i)
						g, x := res.Contains(k), orig.Contains(k)
						if g != x {
							t.Fatalf("%s: at restore+%dms Contains(%s) = %v restored, %v never stopped", name, after, k, g, x)
						}
						if at-marked[k] < tm && !g {
							t.Fatalf("%s: at restore+%dms %s, marked %d ms before, is not contained (T = %d ms)", name, after, k, at-marked[k], tm)
						}
					}
					if after == tm/2 {
						for i := 35; i < 45; i++ {
							k := fmt.Sprint("m", i)
							if g, x := res.Seen(k), orig.Seen(k); g != x {
								t.Fatalf("%s: at restore+%dms Seen(%s) = %v restored, %v never stopped", name, after, k, g, x)
							}
							marked[k] = at
						}
					}
				}
			}
		}
	}
}

func a92MeterPair(t *testing.T) (src, dst *meter.Rate, snap []byte) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(a92MeterT0)
	mk := func(seed uint64) *meter.Rate {
		r, err := meter.NewRate(time.Second, meter.WithClock(c), meter.WithSeed(seed), meter.WithSize(2, 8))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src = mk(1)
	for range 5 {
		src.Observe("a")
	}
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap = buf.Bytes()
	if int64(len(snap)) != src.SnapshotSize() {
		t.Fatalf("WriteTo wrote %d bytes, SnapshotSize says %d", len(snap), src.SnapshotSize())
	}
	dst = mk(2)
	for range 9 {
		dst.Observe("z")
	}
	return src, dst, snap
}

// TestAudit92SnapMeterEveryTruncation: every prefix of a Rate snapshot
// is refused with an error matching ErrCorruptSnapshot and
// io.ErrUnexpectedEOF, the meter left as it was; the whole snapshot
// followed by a trailer is read exactly (one byte at a time too) and the
// trailer left in the stream; a reader failing midway gives its error
// and leaves the meter as it was.
func TestAudit92SnapMeterEveryTruncation(t *testing.T) {
	src, _, snap := a92MeterPair(t)
	_, probe, _ := a92MeterPair(t)
	zWas := probe.PerSecond("z")
	for n := range len(snap) {
		_, dst, _ := a92MeterPair(t)
		m, err := dst.ReadFrom(bytes.NewReader(snap[:n]))
		if !errors.Is(err, sketch.ErrCorruptSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadFrom of %d of %d bytes: %v, want ErrCorruptSnapshot wrapping io.ErrUnexpectedEOF", n, len(snap), err)
		}
		if m != int64(n) {
			t.Fatalf("ReadFrom of %d bytes reports %d read", n, m)
		}
		if g, a := dst.PerSecond("z"), dst.PerSecond("a"); g != zWas || a != 0 {
			t.Fatalf("ReadFrom of %d bytes refused: z=%v a=%v, want %v and 0 (unchanged)", n, g, a, zWas)
		}
	}
	trailer := []byte("more")
	for name, wrap := range map[string]func(io.Reader) io.Reader{"plain": func(r io.Reader) io.Reader { return r }, "one-byte": iotest.OneByteReader} {
		_, dst, _ := a92MeterPair(t)
		rest := bytes.NewReader(append(append([]byte(nil), snap...), trailer...))
		n, err := dst.ReadFrom(wrap(rest))
		if err != nil || n != int64(len(snap)) {
			t.Fatalf("%s: ReadFrom = %d, %v; want %d, nil", name, n, err, len(snap))
		}
		if left, _ := io.ReadAll(rest); !bytes.Equal(left, trailer) {
			t.Fatalf("%s: the stream holds %q after ReadFrom, want %q", name, left, trailer)
		}
		if g, w := dst.PerSecond("a"), src.PerSecond("a"); g != w {
			t.Fatalf("%s: a reads %v restored, %v in the source", name, g, w)
		}
	}
	boom := errors.New("gone")
	for _, cut := range []int{10, 40, 300, len(snap) - 1} {
		_, dst, _ := a92MeterPair(t)
		if _, err := dst.ReadFrom(io.MultiReader(bytes.NewReader(snap[:cut]), iotest.ErrReader(boom))); !errors.Is(err, boom) {
			t.Fatalf("reader failing after %d bytes: %v, want its error", cut, err)
		}
		if g := dst.PerSecond("z"); g != zWas {
			t.Fatalf("reader failing after %d bytes: z reads %v, want %v (unchanged)", cut, g, zWas)
		}
	}
}

// TestAudit92SnapMeterInflightHasNoSnapshot: docs/snapshots.md
// "meter.Inflight has no snapshot on purpose".
func TestAudit92SnapMeterInflightHasNoSnapshot(t *testing.T) {
	var in any = (*meter.Inflight)(nil)
	if _, ok := in.(io.WriterTo); ok {
		t.Error("*meter.Inflight implements io.WriterTo; the doc says it has no snapshot")
	}
	if _, ok := in.(io.ReaderFrom); ok {
		t.Error("*meter.Inflight implements io.ReaderFrom; the doc says it has no snapshot")
	}
	for _, x := range []any{(*meter.Rate)(nil), (*meter.Novelty)(nil)} {
		_, w := x.(io.WriterTo)
		_, r := x.(io.ReaderFrom)
		if !w || !r {
			t.Errorf("%T: io.WriterTo %v, io.ReaderFrom %v; the doc says both", x, w, r)
		}
	}
}

// TestAudit92SnapMeterAdoptChain: a Rate restored into a meter of
// another seed (which adopts the snapshot's), promoted several times
// there, saved and restored again into a third seed, and so on for five
// hops with downtimes across deadlines: every key reads as the
// never-stopped Rate fed the same events at the same wall times.
func TestAudit92SnapMeterAdoptChain(t *testing.T) {
	const w = int64(50)
	c0 := sketchtest.NewFakeClock()
	c0.Set(a92MeterT0)
	mk := func(c sketch.Clock, seed uint64) *meter.Rate {
		r, err := meter.NewRate(time.Duration(w)*time.Millisecond, meter.WithClock(c), meter.WithSeed(seed), meter.WithSize(2, 64), meter.WithPeriodWindows(2))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	twin := mk(c0, 1)
	cc := sketchtest.NewFakeClock()
	cc.Set(a92MeterT0)
	cur := mk(cc, 1)
	wall := a92MeterT0
	for hop := range 5 {
		for i := range 60 {
			wall += int64(1 + (i*7+hop)%11)
			c0.Set(wall)
			cc.Set(wall)
			k := fmt.Sprint("k", (i+hop)%9)
			twin.Observe(k)
			cur.Observe(k)
		}
		for i := range 9 {
			k := fmt.Sprint("k", i)
			if g, x := cur.PerSecond(k), twin.PerSecond(k); g != x {
				t.Fatalf("hop %d at t0+%d: %s reads %v/s, never stopped %v/s", hop, wall-a92MeterT0, k, g, x)
			}
		}
		var buf bytes.Buffer
		if _, err := cur.WriteTo(&buf); err != nil {
			t.Fatalf("hop %d: WriteTo: %v", hop, err)
		}
		wall += []int64{0, 37, 2*w*2 + 13, 1, 5 * w}[hop]
		c0.Set(wall)
		cc = sketchtest.NewFakeClock()
		cc.Set(wall)
		cur = mk(cc, uint64(1000+hop))
		if _, err := cur.ReadFrom(&buf); err != nil {
			t.Fatalf("hop %d: ReadFrom: %v", hop, err)
		}
	}
}
