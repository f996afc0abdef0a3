package meter_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type snapper interface {
	io.WriterTo
	io.ReaderFrom
	SnapshotSize() int64
}

func auditSnap(t *testing.T, m snapper) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := m.WriteTo(&b)
	if err != nil || n != int64(b.Len()) || n != m.SnapshotSize() {
		t.Fatalf("WriteTo: %d bytes (buffer %d, SnapshotSize %d), %v", n, b.Len(), m.SnapshotSize(), err)
	}
	return b.Bytes()
}

// TestAuditRestoreLongDowntime: "every counter and mark decays by the
// wall time elapsed since the snapshot": downtimes of 10, 40 (past the
// 32-bit stamp horizon) and 400 days, on a Rate with a 30-day window,
// read C exp(-(age+downtime)/window) within float32 rounding (never
// below), as the never-saved meter does; a Novelty with T = 40 days
// saved a day after a mark sees it after a 30-day downtime and not after
// a 45-day one.
func TestAuditRestoreLongDowntime(t *testing.T) {
	const day = 24 * time.Hour
	window := 30 * day
	for _, down := range []time.Duration{10 * day, 40 * day, 400 * day} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a, _ := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(2, 256))
		a.ObserveAt(clk.Now(), "k", 1e6)
		clk.Advance(day)
		snap := auditSnap(t, a)
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(clk.NowMillis() + down.Milliseconds())
		b, _ := meter.NewRate(window, meter.WithClock(clk2), meter.WithSize(2, 256))
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(down)
		want := 1e6 * math.Exp(-float64(day+down)/float64(window)) / window.Seconds()
		gb, ga := b.PerSecond("k"), a.PerSecond("k")
		for name, got := range map[string]float64{"restored": gb, "never saved": ga} {
			if got < want*(1-1e-9) || got > want*(1+1e-5) {
				t.Errorf("down %v: %s reads %v, want %v", down, name, got, want)
			}
		}
	}
	for _, c := range []struct {
		down time.Duration
		seen bool
	}{{30 * day, true}, {45 * day, false}} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a, _ := meter.NewNovelty(40*day, meter.WithClock(clk), meter.WithSize(2, 256))
		a.Seen("k")
		clk.Advance(day)
		snap := auditSnap(t, a)
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(clk.NowMillis() + c.down.Milliseconds())
		b, _ := meter.NewNovelty(40*day, meter.WithClock(clk2), meter.WithSize(2, 256))
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := b.Contains("k"); got != c.seen {
			t.Errorf("Novelty T=40d, marked 1d before the snapshot, down %v: seen %v, want %v", c.down, got, c.seen)
		}
	}
}

// TestAuditRestoreEarlierClock: a restoring clock behind the snapshot's
// instant counts as no downtime ("none if the restoring clock's time is
// earlier"): the restored meter reads exactly what the saved one read at
// the snapshot, never more.
func TestAuditRestoreEarlierClock(t *testing.T) {
	for _, behind := range []time.Duration{time.Millisecond, time.Hour, 3 * 365 * 24 * time.Hour} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 256))
		n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 256))
		for i := range 50 {
			a.ObserveAt(clk.Now(), fmt.Sprint("k", i%5), 1)
			n.SeenAt(clk.Now(), fmt.Sprint("k", i%5))
			clk.Advance(7 * time.Millisecond)
		}
		snapA, snapN := auditSnap(t, a), auditSnap(t, n)
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(clk.NowMillis() - behind.Milliseconds())
		b, _ := meter.NewRate(time.Second, meter.WithClock(clk2), meter.WithSize(2, 256))
		m, _ := meter.NewNovelty(time.Second, meter.WithClock(clk2), meter.WithSize(2, 256))
		if _, err := b.ReadFrom(bytes.NewReader(snapA)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.ReadFrom(bytes.NewReader(snapN)); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			k := fmt.Sprint("k", i)
			if ga, gb := a.PerSecond(k), b.PerSecond(k); ga != gb {
				t.Errorf("behind %v: %s restored %v, saved %v", behind, k, gb, ga)
			}
			if !m.Contains(k) {
				t.Errorf("behind %v: %s not seen after restore", behind, k)
			}
		}
	}
}

// TestAuditRestoreExactBytes: ReadFrom reads exactly the snapshot's
// bytes (bytes after it stay in the reader) and accepts a reader that
// returns one byte at a time; WriteTo reports a writer's error with the
// bytes written.
func TestAuditRestoreExactBytes(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	a, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	a.ObserveAt(clk.Now(), "k", 42)
	snap := auditSnap(t, a)
	rd := bytes.NewReader(append(bytes.Clone(snap), "TRAILER"...))
	b, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	n, err := b.ReadFrom(iotest.OneByteReader(rd))
	if err != nil || n != int64(len(snap)) {
		t.Fatalf("ReadFrom: %d of %d bytes, %v", n, len(snap), err)
	}
	if rest, _ := io.ReadAll(rd); string(rest) != "TRAILER" {
		t.Fatalf("ReadFrom consumed past the snapshot: %q left", rest)
	}
	if got := b.PerSecond("k"); got != 42 {
		t.Fatalf("restored %v, want 42", got)
	}
	boom := errors.New("disk full")
	for _, limit := range []int{0, 10, 32, 100, len(snap) - 1} {
		w := &failWriter{left: limit, err: boom}
		n, err := a.WriteTo(w)
		if !errors.Is(err, boom) || n != int64(w.wrote) || n > int64(limit) {
			t.Fatalf("WriteTo failing after %d bytes: n=%d (wrote %d), %v", limit, n, w.wrote, err)
		}
	}
	// An I/O error while reading is returned as is and leaves the meter.
	if _, err := b.ReadFrom(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("ReadFrom of a failing reader: %v", err)
	}
	if got := b.PerSecond("k"); got != 42 {
		t.Fatalf("after a failed read: %v, want 42", got)
	}
}

type failWriter struct {
	left, wrote int
	err         error
}

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left, w.wrote = 0, w.wrote+n
		return n, w.err
	}
	w.left -= len(p)
	w.wrote += len(p)
	return len(p), nil
}

// TestAuditRestoreRefusedKeepsState: a refused restore leaves a meter
// that is in use as it was ("either way r is left unchanged"), not only
// a fresh one: truncations and flipped bytes anywhere (header, cells,
// checksums) into a Rate and a Novelty holding their own keys.
func TestAuditRestoreRefusedKeepsState(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	src, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
	srcN, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
	for i := range 20 {
		src.ObserveAt(clk.Now(), fmt.Sprint(i), float64(i))
		srcN.SeenAt(clk.Now(), fmt.Sprint(i))
	}
	snap, snapN := auditSnap(t, src), auditSnap(t, srcN)
	dst, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
	dstN, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
	dst.ObserveAt(clk.Now(), "mine", 7)
	dstN.SeenAt(clk.Now(), "mine")
	before := dst.PerSecond("mine")
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("%s: %v, want a typed error", what, err)
		}
		if got := dst.PerSecond("mine"); got != before {
			t.Fatalf("%s: the refused Rate now reads %v, was %v", what, got, before)
		}
		if !dstN.Contains("mine") || dstN.Contains("0") {
			t.Fatalf("%s: the refused Novelty changed", what)
		}
	}
	for i := 0; i < len(snap); i += 5 {
		_, err := dst.ReadFrom(bytes.NewReader(snap[:i]))
		check(fmt.Sprintf("Rate truncated at %d", i), err)
		bad := bytes.Clone(snap)
		bad[i] ^= 0x40
		_, err = dst.ReadFrom(bytes.NewReader(bad))
		check(fmt.Sprintf("Rate byte %d flipped", i), err)
		badN := bytes.Clone(snapN)
		badN[i] ^= 0x40
		_, err = dstN.ReadFrom(bytes.NewReader(badN))
		check(fmt.Sprintf("Novelty byte %d flipped", i), err)
	}
	// Each into the other kind.
	_, err := dst.ReadFrom(bytes.NewReader(snapN))
	check("Novelty into Rate", err)
	_, err = dstN.ReadFrom(bytes.NewReader(snap))
	check("Rate into Novelty", err)
}

// TestAuditSnapshotUnderTraffic: WriteTo runs concurrently with
// Observe (under -race) and, on a frozen clock (no decay) and roomy
// cells, "every update that completed before WriteTo was called is fully
// included": each key restored reads at least the events completed
// before the save began and at most those begun before it ended.
func TestAuditSnapshotUnderTraffic(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	opts := []meter.Option{meter.WithClock(clk), meter.WithSize(4, 4096), meter.WithSeed(12)}
	r, _ := meter.NewRate(time.Second, opts...)
	const keys = 8
	var begun, done [keys]atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := (g + i) % keys
				begun[k].Add(1)
				r.Observe(fmt.Sprint("k", k))
				done[k].Add(1)
			}
		})
	}
	for done[0].Load() < 1000 {
		time.Sleep(time.Millisecond)
	}
	var lo, hi [keys]int64
	for k := range keys {
		lo[k] = done[k].Load()
	}
	snap := auditSnap(t, r)
	for k := range keys {
		hi[k] = begun[k].Load()
	}
	stop.Store(true)
	wg.Wait()
	b, _ := meter.NewRate(time.Second, opts...)
	if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		got := b.PerSecond(fmt.Sprint("k", k))
		if got < float64(lo[k]) || got > float64(hi[k]) {
			t.Errorf("k%d restored %v, want within [%d, %d]", k, got, lo[k], hi[k])
		}
	}
}
