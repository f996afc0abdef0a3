package meter_test

// Audit 143: a sentence-by-sentence read of meter's godoc (go doc -all
// ./meter), each behaviour it states checked here where earlier audits had
// not.

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a143T0 = 1_780_000_000_000

// TestAudit143MeterDefaultHasherIsSipHash: WithHasher: "default
// sketch.SipHash() under a secret random seed". A snapshot of a meter
// built without WithHasher restores into one built WithHasher(SipHash())
// and is refused (ErrSnapshotMismatch) by one built WithHasher(XXH3())
// (audit 134 checked that one of the two is taken, not which).
func TestAudit143MeterDefaultHasherIsSipHash(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	base := []meter.Option{meter.WithClock(clk), meter.WithSize(2, 64)}
	with := func(h sketch.HasherFactory) []meter.Option {
		return append(append([]meter.Option(nil), base...), meter.WithHasher(h))
	}
	r, err := meter.NewRate(time.Second, base...)
	if err != nil {
		t.Fatal(err)
	}
	n, err := meter.NewNovelty(time.Second, base...)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("k")
	n.Seen("k")
	var rb, nb bytes.Buffer
	if _, err := r.WriteTo(&rb); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WriteTo(&nb); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    sketch.HasherFactory
		ok   bool
	}{{"SipHash", sketch.SipHash(), true}, {"XXH3", sketch.XXH3(), false}} {
		r2, err := meter.NewRate(time.Second, with(c.h)...)
		if err != nil {
			t.Fatal(err)
		}
		n2, err := meter.NewNovelty(time.Second, with(c.h)...)
		if err != nil {
			t.Fatal(err)
		}
		_, rerr := r2.ReadFrom(bytes.NewReader(rb.Bytes()))
		_, nerr := n2.ReadFrom(bytes.NewReader(nb.Bytes()))
		for _, e := range []struct {
			kind string
			err  error
		}{{"Rate", rerr}, {"Novelty", nerr}} {
			if c.ok && e.err != nil {
				t.Errorf("%s: a default meter's snapshot into WithHasher(%s): %v; the doc says SipHash is the default", e.kind, c.name, e.err)
			}
			if !c.ok && !errors.Is(e.err, sketch.ErrSnapshotMismatch) {
				t.Errorf("%s: a default meter's snapshot into WithHasher(%s): %v, want ErrSnapshotMismatch", e.kind, c.name, e.err)
			}
		}
		if c.ok && (r2.PerSecond("k") != r.PerSecond("k") || !n2.Contains("k")) {
			t.Errorf("WithHasher(%s) restore reads %v / %v", c.name, r2.PerSecond("k"), n2.Contains("k"))
		}
	}
}

// TestAudit143MeterDefaultSeedRandom: WithSeed: "default: 8 bytes from
// crypto/rand". Two Rates built alike without WithSeed, fed alike on one
// fake clock, write different snapshots (the seed is in them); with
// WithSeed the same, they write the same bytes.
func TestAudit143MeterDefaultSeedRandom(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	snap := func(opts ...meter.Option) []byte {
		r, err := meter.NewRate(time.Second, append([]meter.Option{meter.WithClock(clk), meter.WithSize(2, 64)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		r.Observe("a")
		var b bytes.Buffer
		if _, err := r.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if bytes.Equal(snap(), snap()) {
		t.Errorf("two default-seeded Rates wrote the same snapshot: the seed is not random")
	}
	if !bytes.Equal(snap(meter.WithSeed(7)), snap(meter.WithSeed(7))) {
		t.Errorf("two Rates WithSeed(7) wrote different snapshots")
	}
}

// TestAudit143RateRoundingRule: Rate's doc: "A rounding comes with ...
// every write whose sum no float32 holds (a fractional n; a +1 on a count
// past 2^24 ...)"; "an exact add later, a whole batch, adds none"; "past
// about 2^24 events per window ... each +1 rounds up by 2 or more"; and
// ObserveAt: "A key's decayed count saturates at MaxFloat32". With a 1 s
// window PerSecond is the count itself (C/window, rounded up: exact for
// these integers).
func TestAudit143RateRoundingRule(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(143))
	if err != nil {
		t.Fatal(err)
	}
	at := clk.Now()
	r.ObserveAt(at, "batch", 5)
	r.ObserveAt(at, "batch", 3)
	r.ObserveAt(at, "batch", 1000)
	if got := r.PerSecondAt(at, "batch"); got != 1008 {
		t.Errorf("5 + 3 + 1000 in one ms read %v, want exactly 1008 (exact adds round nothing)", got)
	}
	r.ObserveAt(at, "big", 1<<24)
	if got := r.PerSecondAt(at, "big"); got != 1<<24 {
		t.Fatalf("2^24 read %v", got)
	}
	for i := 1; i <= 3; i++ {
		r.ObserveAt(at, "big", 1)
		if got, want := r.PerSecondAt(at, "big"), float64(1<<24+2*i); got != want {
			t.Errorf("2^24 + %d x (+1) read %v, want %v (each +1 past 2^24 rounds up to +2)", i, got, want)
		}
	}
	r.ObserveAt(at, "frac", 0.1)
	if got := r.PerSecondAt(at, "frac"); got < 0.1 || got != float64(float32(0.1)) && got != float64(math.Nextafter32(float32(0.1), 1)) {
		t.Errorf("0.1 read %v, want the float32 at or above 0.1", got)
	}
	r.ObserveAt(at, "max", math.MaxFloat32)
	r.ObserveAt(at, "max", math.MaxFloat32)
	if got := r.PerSecondAt(at, "max"); got != math.MaxFloat32 {
		t.Errorf("2 x MaxFloat32 read %v, want MaxFloat32 (saturated)", got)
	}
}

// TestAudit143GuardConcurrentRelease: Guard: "A Guard is safe for
// concurrent use; Release is idempotent"; Release: "only the first call
// does anything". Many goroutines releasing one Guard at once take back
// exactly its 1.
func TestAudit143GuardConcurrentRelease(t *testing.T) {
	in, err := meter.NewInflight(0, meter.WithSize(2, 1024))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		keep := in.Acquire("k")
		g := in.Acquire("k")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				g.Release()
				g.Release()
			}()
		}
		close(start)
		wg.Wait()
		if c := in.Count("k"); c != 1 {
			t.Fatalf("round %d: 16 racing Releases of one Guard left Count %d, want 1", round, c)
		}
		keep.Release()
		if c := in.Count("k"); c != 0 {
			t.Fatalf("round %d: Count %d after every release", round, c)
		}
	}
}

// TestAudit143NoveltyRestoreDowntime: Novelty.ReadFrom: "A key marked
// within T of the snapshot's instant is seen until T after its mark, the
// downtime counted"; Seen: "marks it now either way"; Contains: "without
// marking it: it only reads".
func TestAudit143NoveltyRestoreDowntime(t *testing.T) {
	const T = 10 * time.Second
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(3, 1024))
	if err != nil {
		t.Fatal(err)
	}
	if n.Seen("a") {
		t.Fatal("a fresh key was seen")
	}
	clk.Advance(3 * time.Second)
	if !n.Contains("a") || n.Contains("b") || n.Contains("b") {
		t.Fatal("Contains")
	}
	if n.Seen("b") { // Contains did not mark b
		t.Errorf("b was seen after only Contains calls: Contains marked it")
	}
	clk.Advance(time.Second) // +4 s: snapshot
	var buf bytes.Buffer
	if _, err := n.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	restore := func(at int64) *meter.Novelty {
		c2 := sketchtest.NewFakeClock()
		c2.Set(at)
		m, err := meter.NewNovelty(T, meter.WithClock(c2), meter.WithSize(3, 1024))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// a marked at +0 s, b at +3 s.
	for _, c := range []struct {
		at   int64
		a, b bool
	}{
		{a143T0 + 9_999, true, true},
		{a143T0 + 10_002, false, true},
		{a143T0 + 12_999, false, true},
		{a143T0 + 13_002, false, false},
	} {
		m := restore(c.at)
		if a, b := m.Contains("a"), m.Contains("b"); a != c.a || b != c.b {
			t.Errorf("restored at +%d ms: a %v b %v, want %v %v", c.at-a143T0, a, b, c.a, c.b)
		}
	}
}

// TestAudit143FixedNoveltyWriteToAllocates (audit 143; fixed at stop 65,
// the text below says what was wrong): Novelty's doc said "Safe for
// concurrent use; it does not allocate, but for the call that builds a
// new generation, once per Period", of the whole type. Observed: Seen,
// Contains and SnapshotSize allocate nothing, but every WriteTo allocates
// (9 objects a call to io.Discard, with no generation built; the
// snapshot's encoder), and ReadFrom builds the restored generations. The
// doc now scopes the claim as Rate's does: "Seen and Contains (and their
// At forms) do not allocate, but for the call that builds a new
// generation, once per Period (WriteTo and ReadFrom do)".
func TestAudit143FixedNoveltyWriteToAllocates(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	n, err := meter.NewNovelty(time.Hour, meter.WithClock(clk), meter.WithSize(2, 64))
	if err != nil {
		t.Fatal(err)
	}
	n.Seen("a")
	for name, f := range map[string]func(){
		"Seen":         func() { n.Seen("b") },
		"SeenAt":       func() { n.SeenAt(clk.Now(), "c") },
		"Contains":     func() { n.Contains("a") },
		"ContainsAt":   func() { n.ContainsAt(clk.Now(), "a") },
		"SnapshotSize": func() { n.SnapshotSize() },
		"Within":       func() { n.Within() },
	} {
		if a := testing.AllocsPerRun(50, f); a != 0 {
			t.Errorf("Novelty.%s allocates %v objects a call with no generation built; the doc says Seen and Contains do not", name, a)
		}
	}
	src, err := os.ReadFile("novelty.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", "")), " ")
	if !strings.Contains(doc, "Seen and Contains (and their At forms) do not allocate") || !strings.Contains(doc, "(WriteTo and ReadFrom do)") {
		t.Error("meter/novelty.go: Novelty's allocation claim is no longer scoped to Seen and Contains")
	}
}

// TestAudit143NoveltyShortPeriodNoFalseNegative: Novelty's doc: "With
// rotation (Period = 16 T by default, at least T) a generation becomes the
// primary (Generations-1) x Period >= T after its creation, so the marks
// it missed are older than T anyway: rotation adds no false negative";
// WithPeriodWindows: "at least 1". At the shortest Periods (1 and 1.5
// windows), keys marked at varied offsets in the Period across many
// rotations are told new, are seen less than T later (T - 1 ms, whole
// milliseconds) and are forgotten T + 2 ms later. (The clock is moved
// for every read: an At time ahead of the clock counts as its reading.)
func TestAudit143NoveltyShortPeriodNoFalseNegative(t *testing.T) {
	for _, T := range []time.Duration{7 * time.Millisecond, 10 * time.Millisecond, 1500 * time.Microsecond} {
		for _, k := range []float64{1, 1.5} {
			clk := sketchtest.NewFakeClock()
			clk.Set(a143T0)
			n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(3, 4096), meter.WithPeriodWindows(k))
			if err != nil {
				t.Fatal(err)
			}
			lag := (T - 1) / time.Millisecond * time.Millisecond // whole ms less than T
			for off := range 60 {
				key := "k" + string(rune('A'+off))
				// Monotonic marks T' + 3 ms apart: their offsets in the Period vary.
				clk.Set(a143T0 + int64(off)*(int64((T+time.Millisecond-1)/time.Millisecond)+3))
				at := clk.Now()
				if n.SeenAt(at, key) {
					t.Fatalf("T=%v k=%v: %s new (mark %d) was told seen", T, k, key, off)
				}
				clk.SetTime(at.Add(lag)) // an At form's t is held at the clock's reading
				if !n.ContainsAt(clk.Now(), key) || !n.Contains(key) {
					t.Errorf("T=%v k=%v: %s (mark %d) not seen %v later", T, k, key, off, lag)
				}
				clk.SetTime(at.Add(T + 2*time.Millisecond))
				if n.Contains(key) {
					t.Errorf("T=%v k=%v: %s (mark %d) still seen T + 2 ms later", T, k, key, off)
				}
			}
		}
	}
}

// TestAudit143NoveltyExactlyTPrime: Novelty's model: "each of the key's L
// cells is a saturating latch, Hi = 1, that decays as exp(-t/T'), T'
// being T rounded up to a whole millisecond ... the key counts as seen
// while the Min of its cells is above the threshold theta = exp(-1),
// which the key's own mark stays above for exactly T' of the clock's
// whole milliseconds". A mark made at ms m is seen at m + T' and not at
// m + T' + 1, for whole and fractional T, at several clock origins.
func TestAudit143NoveltyExactlyTPrime(t *testing.T) {
	for _, T := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 7 * time.Millisecond, 999 * time.Millisecond,
		time.Second, 61 * time.Second, time.Hour, 1500 * time.Microsecond, 2*time.Millisecond + 1, 999999 * time.Microsecond} {
		for _, start := range []int64{0, 12345, a143T0 + 777} {
			clk := sketchtest.NewFakeClock()
			clk.Set(start)
			n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(2, 64))
			if err != nil {
				t.Fatal(err)
			}
			n.Seen("k")
			tp := int64((T + time.Millisecond - 1) / time.Millisecond)
			clk.Set(start + tp)
			at := n.Contains("k")
			clk.Set(start + tp + 1)
			after := n.Contains("k")
			if !at || after {
				t.Errorf("T=%v (T' %d ms) from %d: seen at m+T' %v, at m+T'+1 %v; want true, false", T, tp, start, at, after)
			}
		}
	}
}
