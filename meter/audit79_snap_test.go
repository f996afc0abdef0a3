package meter_test

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79RateSnapshotClockAheadBehind: a Rate snapshot restored into
// a fresh Rate (another seed) on a clock at, ahead of and behind the
// snapshot's instant reads what the never-stopped one would (ahead: the
// decay of the gap; behind: none). meter/doc.go: "Every counter and mark
// decays by the wall time elapsed since the snapshot (none if the
// restoring clock's time is earlier)".
func TestAudit79RateSnapshotClockAheadBehind(t *testing.T) {
	const T0 = 5_000_000
	window := 100 * time.Millisecond
	for _, gap := range []int64{0, 1, 37, 250, 1600, 5000, -1, -4000, -T0 + 10} {
		clk := sketchtest.NewFakeClock()
		clk.Set(T0 - 3000)
		r, _ := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(4, 512))
		truth := 0.0
		for ms := int64(0); ms < 3000; ms++ {
			truth = truth*math.Exp(-1.0/100) + 2
			r.ObserveAt(clk.Now(), "k", 2)
			clk.Advance(time.Millisecond)
		}
		truth *= math.Exp(-1.0 / 100) // now at T0
		before := r.PerSecond("k") * window.Seconds()
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if int64(buf.Len()) != r.SnapshotSize() {
			t.Fatalf("SnapshotSize %d, wrote %d", r.SnapshotSize(), buf.Len())
		}
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(T0 + gap)
		r2, _ := meter.NewRate(window, meter.WithClock(clk2), meter.WithSeed(999), meter.WithSize(4, 512))
		if n, err := r2.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil || n != int64(buf.Len()) {
			t.Fatalf("gap %d: ReadFrom %d, %v", gap, n, err)
		}
		got := r2.PerSecond("k") * window.Seconds()
		want := truth
		if gap > 0 {
			want = truth * math.Exp(-float64(gap)/100)
		}
		rotated := gap >= 1600 && got == 0 // the rotation term: past a Period the primary may hold none of it
		if !rotated && (got < want*(1-1e-6) || got > want*(1+1e-4)) {
			t.Errorf("gap %d ms: restored count %v, want %v (before the save %v, truth %v)", gap, got, want, before, truth)
		}
		// keeps counting on the restoring clock: an event adds 2
		r2.Observe("k")
		r2.Observe("k")
		if g := r2.PerSecond("k") * window.Seconds(); g < want+2-1e-4 || g > (want+2)*(1+1e-4) {
			t.Errorf("gap %d ms: after 2 more events %v, want %v", gap, g, want+2)
		}
		// and through later rotations the new events stay (lower bound)
		clk2.Advance(40 * window)
		r2.Observe("k")
		if g := r2.PerSecond("k") * window.Seconds(); g < 1 {
			t.Errorf("gap %d ms: after 40 windows and 1 event: %v < 1", gap, g)
		}
	}
}

// TestAudit79NoveltySnapshotClockAheadBehind: a key marked a ms before
// the snapshot is seen on the restored Novelty until T after its mark,
// the downtime counted (novelty ReadFrom: "A key marked within T of the
// snapshot's instant is seen until T after its mark, the downtime
// counted"); on a clock behind, no downtime.
func TestAudit79NoveltySnapshotClockAheadBehind(t *testing.T) {
	const T0 = 9_000_000
	T := 100 * time.Millisecond
	for _, gap := range []int64{0, 10, 50, 99, -10, -100000} {
		clk := sketchtest.NewFakeClock()
		clk.Set(T0 - 60)
		n, _ := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(4, 1024))
		n.Seen("a") // age 60 at T0
		clk.Set(T0 - 20)
		n.Seen("b") // age 20 at T0
		clk.Set(T0)
		var buf bytes.Buffer
		if _, err := n.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(T0 + gap)
		n2, _ := meter.NewNovelty(T, meter.WithClock(clk2), meter.WithSeed(77), meter.WithSize(4, 1024))
		if _, err := n2.ReadFrom(&buf); err != nil {
			t.Fatal(err)
		}
		down := max(gap, 0)
		for _, c := range []struct {
			k   string
			age int64
		}{{"a", 60}, {"b", 20}} {
			left := 100 - c.age - down // ms of T left at restore
			if left > 0 {
				if !n2.Contains(c.k) {
					t.Errorf("gap %d: %s (age %d + down %d < T) not contained", gap, c.k, c.age, down)
				}
				clk2.Advance(time.Duration(left-1) * time.Millisecond)
				if !n2.Contains(c.k) {
					t.Errorf("gap %d: %s at age T-1 not contained", gap, c.k)
				}
				clk2.Advance(time.Duration(-(left - 1)) * time.Millisecond)
				clk2.Set(T0 + gap)
			} else if n2.Contains(c.k) {
				t.Errorf("gap %d: %s (age %d + down %d >= T) still contained", gap, c.k, c.age, down)
			}
		}
		if n2.Contains("never") {
			t.Errorf("unseen key contained")
		}
	}
}

// TestAudit79SnapshotMismatch: a snapshot taken under another window,
// PeriodWindows, size or kind is refused with ErrSnapshotMismatch and the
// meter is left as it was; a truncated one with ErrCorruptSnapshot.
func TestAudit79SnapshotMismatch(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1000)
	src, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 64))
	src.Observe("x")
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	nsrc, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 64))
	nsrc.Seen("x")
	var nbuf bytes.Buffer
	if _, err := nsrc.WriteTo(&nbuf); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts []meter.Option
		w    time.Duration
	}{
		{"window", []meter.Option{meter.WithSize(2, 64)}, 2 * time.Second},
		{"period", []meter.Option{meter.WithSize(2, 64), meter.WithPeriodWindows(8)}, time.Second},
		{"levels", []meter.Option{meter.WithSize(3, 64)}, time.Second},
		{"cells", []meter.Option{meter.WithSize(2, 72)}, time.Second},
		{"hasher", []meter.Option{meter.WithSize(2, 64), meter.WithHasher(sketch.XXH3())}, time.Second},
	}
	for _, c := range cases {
		opts := append([]meter.Option{meter.WithClock(clk), meter.WithSeed(5)}, c.opts...)
		r, err := meter.NewRate(c.w, opts...)
		if err != nil {
			t.Fatal(err)
		}
		r.ObserveAt(clk.Now(), "mine", 7)
		_, err = r.ReadFrom(bytes.NewReader(snap))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("Rate %s: ReadFrom err %v, want ErrSnapshotMismatch", c.name, err)
		}
		if g := r.PerSecond("mine") * c.w.Seconds(); math.Abs(g-7) > 1e-3 || r.PerSecond("x") != 0 {
			t.Errorf("Rate %s: meter changed by a refused ReadFrom: mine %v, x %v", c.name, g, r.PerSecond("x"))
		}
		n, _ := meter.NewNovelty(c.w, opts...)
		n.Seen("mine")
		_, err = n.ReadFrom(bytes.NewReader(nbuf.Bytes()))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("Novelty %s: ReadFrom err %v, want ErrSnapshotMismatch", c.name, err)
		}
		if !n.Contains("mine") || n.Contains("x") {
			t.Errorf("Novelty %s: changed by a refused ReadFrom", c.name)
		}
	}
	// kind: a Rate snapshot into a Novelty and back
	n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	if _, err := n.ReadFrom(bytes.NewReader(snap)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("Rate snapshot into Novelty: %v", err)
	}
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	if _, err := r.ReadFrom(bytes.NewReader(nbuf.Bytes())); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("Novelty snapshot into Rate: %v", err)
	}
	// truncations at every length (sampled), and a flipped byte in the body
	for _, cut := range []int{0, 1, 16, 31, 32, 33, 64, len(snap) / 2, len(snap) - 1} {
		r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
		r.ObserveAt(clk.Now(), "mine", 7)
		_, err := r.ReadFrom(bytes.NewReader(snap[:cut]))
		if !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Errorf("cut %d: err %v, want ErrCorruptSnapshot", cut, err)
		}
		if g := r.PerSecond("mine"); math.Abs(g-7) > 1e-3 {
			t.Errorf("cut %d: meter changed (%v)", cut, g)
		}
	}
	bad := bytes.Clone(snap)
	bad[len(bad)/2] ^= 0x40
	r, _ = meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64))
	if _, err := r.ReadFrom(bytes.NewReader(bad)); !errors.Is(err, sketch.ErrCorruptSnapshot) {
		t.Errorf("flipped body byte: err %v, want ErrCorruptSnapshot", err)
	}
}
