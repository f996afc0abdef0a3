package sketch_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a49Law is a law with its closed-form truth for one write of v at age
// ageMs.
type a49Law struct {
	name  string
	d     decay.Decay
	truth func(v float64, ageMs int64) float64
}

func a49Laws() []a49Law {
	const lambda, rate = 1e-6, 1e-5
	return []a49Law{
		{"none", decay.None(), func(v float64, _ int64) float64 { return v }},
		{"exp", decay.Exponential(lambda), func(v float64, a int64) float64 { return v * math.Exp(-lambda*float64(a)/1000) }},
		{"linear", decay.Linear(rate), func(v float64, a int64) float64 { return math.Max(0, v-rate*float64(a)/1000) }},
	}
}

// TestAudit49RestoreHugeGaps: one snapshot restored after downtimes from
// -2^40 ms (a restore clock far behind) to 2^50 ms, across the 2^29 ms
// line where a record stops keeping its stamp and is decayed once, and
// across the 2^31 and 2^32 ms stamp edges. Every key is >= its
// closed-form truth at the restore's wall time (sketch/doc.go: never
// below the truth), and where every record is younger than 2^29 ms the
// restored sketch reads exactly what the never-saved one reads at the
// same wall time (docs/snapshots.md: "equality, not a bound"). A clock
// behind the snapshot reads the snapshot instant's values.
func TestAudit49RestoreHugeGaps(t *testing.T) {
	const t0 = int64(1_700_000_000_000) // a 2023 Unix ms
	const nKeys = 24
	for _, lw := range a49Laws() {
		clk := sketchtest.NewFakeClock()
		clk.Set(t0)
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 4096, Decay: lw.d, Hi: 1e6, Seed: 77, Clock: clk}
		src := mustNewSketch(t, cfg)
		when := make([]int64, nKeys)
		for i := range nKeys {
			clk.Set(t0 + int64(i)*1000)
			when[i] = clk.NowMillis()
			src.UpdateString(fmt.Sprintf("k%d", i), float64(10+i))
		}
		T := clk.NowMillis() + 250
		clk.Set(T)
		snap, err := src.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		oldest := T - when[0]
		for _, dt := range []int64{-1 << 40, -1, 0, 1, 1<<29 - oldest - 1, 1<<29 - oldest, 1<<29 - oldest + 1,
			1<<29 - 1, 1 << 29, 1<<29 + 1, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1 << 40, 1 << 50} {
			rclk := sketchtest.NewFakeClock()
			rclk.Set(T + dt)
			rcfg := cfg
			rcfg.Clock = rclk
			r := mustNewSketch(t, rcfg)
			if err := r.UnmarshalBinary(snap); err != nil {
				t.Fatalf("%s dt=%d: %v", lw.name, dt, err)
			}
			// The never-saved sketch at the same wall time (a copy, as
			// its clock only moves forward): restore at dt=0, then move.
			at := T + max(dt, 0)
			for i := range nKeys {
				k := fmt.Sprintf("k%d", i)
				got := r.QueryString(k)
				truth := lw.truth(float64(10+i), at-when[i])
				if got < truth || math.IsNaN(got) {
					t.Errorf("%s dt=%d key %d: restored %v < truth %v", lw.name, dt, i, got, truth)
				}
				if at-when[0] < 1<<29 {
					// src's clock can go there: it was never read later.
					clk.Set(at)
					if o := src.QueryString(k); o != got {
						t.Errorf("%s dt=%d key %d: restored %v, the never-saved sketch %v (docs/snapshots.md: equality below 2^29 ms)", lw.name, dt, i, got, o)
					}
				}
			}
			clk.Set(T)
		}
	}
}

// a49ErrReader yields data up to n bytes, then fails with err.
type a49ErrReader struct {
	data []byte
	n    int
	err  error
	pos  int
}

func (r *a49ErrReader) Read(p []byte) (int, error) {
	if r.pos >= r.n {
		return 0, r.err
	}
	k := copy(p, r.data[r.pos:min(r.n, len(r.data))])
	r.pos += k
	if k == 0 {
		return 0, r.err
	}
	return k, nil
}

var errA49Disk = errors.New("audit49: disk error")

// TestAudit49ReadFromFailingReaderNeverHalf: a receiver that already held
// data is restored from a stream that fails (an I/O error, or EOF) at
// every interesting offset: inside the header the receiver is unchanged;
// after it, empty (docs/snapshots.md: "a refused header leaves the sketch
// unchanged, any later error leaves it reset (empty), never half
// restored"). The I/O error is the cause (errors.Is), an early EOF
// matches ErrCorruptSnapshot and io.ErrUnexpectedEOF. Also through
// UnmarshalBinary for every truncation length: unchanged.
func TestAudit49ReadFromFailingReaderNeverHalf(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(9_000_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8200, Decay: decay.Exponential(0.01), Hi: 1e6, Seed: 3, Clock: clk}
	src := mustNewSketch(t, cfg)
	for i := range 500 {
		src.UpdateString(fmt.Sprintf("s%d", i), 7)
	}
	snap, _ := src.MarshalBinary()
	size := len(snap)
	if want := 88 + 8*2*8200 + 4; size != want {
		t.Fatalf("snapshot is %d bytes, docs/snapshots.md says 88 + 8*L*M + 4 = %d", size, want)
	}
	fresh := func() *sketch.Sketch {
		d := mustNewSketch(t, cfg)
		for i := range 50 {
			d.UpdateString(fmt.Sprintf("d%d", i), 3)
		}
		return d
	}
	// 88 header, 8192-cell chunks of 8 bytes, 4-byte CRC.
	offsets := []int{0, 1, 87, 88, 89, 88 + 8*8192 - 1, 88 + 8*8192, 88 + 8*8192 + 5, size - 5, size - 4, size - 1}
	for _, off := range offsets {
		for _, e := range []error{errA49Disk, io.EOF} {
			d := fresh()
			n, err := d.ReadFrom(&a49ErrReader{data: snap, n: off, err: e})
			if err == nil {
				t.Fatalf("off %d err %v: ReadFrom succeeded", off, e)
			}
			if e == errA49Disk && !errors.Is(err, errA49Disk) {
				t.Errorf("off %d: error %v does not carry the reader's error", off, err)
			}
			if e == io.EOF && !(errors.Is(err, sketch.ErrCorruptSnapshot) && errors.Is(err, io.ErrUnexpectedEOF)) {
				t.Errorf("off %d: early EOF gave %v, want ErrCorruptSnapshot and io.ErrUnexpectedEOF", off, err)
			}
			if n != int64(off) {
				t.Errorf("off %d: ReadFrom reported %d bytes read", off, n)
			}
			mine := d.QueryString("d7")
			theirs := d.QueryString("s7")
			if off < 88 {
				if mine != 3 || theirs != 0 {
					t.Errorf("off %d (%v): header not read, receiver changed: own key %v (want 3), snapshot key %v (want 0)", off, e, mine, theirs)
				}
			} else if mine != 0 || theirs != 0 {
				t.Errorf("off %d (%v): half restored: own key %v, snapshot key %v, want both 0 (reset)", off, e, mine, theirs)
			}
		}
	}
	for cut := 0; cut < size; cut += 997 {
		d := fresh()
		if err := d.UnmarshalBinary(snap[:cut]); !errors.Is(err, sketch.ErrCorruptSnapshot) {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if d.QueryString("d7") != 3 || d.QueryString("s7") != 0 {
			t.Fatalf("cut %d: UnmarshalBinary changed the receiver", cut)
		}
	}
	// And a good restore after all that reads the snapshot.
	d := fresh()
	if _, err := d.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if d.QueryString("s7") != src.QueryString("s7") || d.QueryString("d7") != src.QueryString("d7") {
		t.Fatalf("restore: s7 %v (want %v), d7 %v (want %v)", d.QueryString("s7"), src.QueryString("s7"), d.QueryString("d7"), src.QueryString("d7"))
	}
}

// TestAudit49MismatchNearMisses: configurations one bit away from the
// snapshot's are refused as mismatches naming the field, and the
// receiver keeps its data: the decay parameter one ulp off, the same
// parameter under the other law, Hi one ulp off, Lo -0.5 against -0.5's
// neighbour, Seed +1, SipHash against XXH3 with the same seed, and
// Levels 3 against 4 at the same total cell count.
func TestAudit49MismatchNearMisses(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	base := sketch.Config{Levels: 4, CellsPerLevel: 96, Decay: decay.Exponential(0.3), Lo: -0.5, Hi: 1000, Seed: 11, Clock: clk}
	src := mustNewSketch(t, base)
	src.UpdateString("x", 5)
	snap, _ := src.MarshalBinary()
	cases := []struct {
		field string
		mod   func(*sketch.Config)
	}{
		{"Decay parameter", func(c *sketch.Config) { c.Decay = decay.Exponential(math.Nextafter(0.3, 1)) }},
		{"Decay", func(c *sketch.Config) { c.Decay = decay.Linear(0.3) }},
		{"Hi", func(c *sketch.Config) { c.Hi = math.Nextafter(1000, 0) }},
		{"Lo", func(c *sketch.Config) { c.Lo = math.Nextafter(-0.5, 0) }},
		{"Seed", func(c *sketch.Config) { c.Seed = 12 }},
		{"Hasher", func(c *sketch.Config) { c.Hasher = sketch.SipHash() }},
		{"Levels", func(c *sketch.Config) { c.Levels, c.CellsPerLevel = 3, 128 }},
		{"Aggregator", func(c *sketch.Config) { c.Aggregator = sketch.Max }},
	}
	for _, c := range cases {
		cfg := base
		c.mod(&cfg)
		dst := mustNewSketch(t, cfg)
		dst.UpdateString("own", 2)
		before := dst.QueryString("own")
		var errs [2]error
		errs[0] = dst.UnmarshalBinary(snap)
		_, errs[1] = dst.ReadFrom(bytes.NewReader(snap))
		for i, err := range errs {
			if cfg.Levels == 3 && i == 0 {
				// A snapshot of another length: UnmarshalBinary may say so
				// either way, but it must be typed.
				if !errors.Is(err, sketch.ErrSnapshotMismatch) && !errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Errorf("%s: UnmarshalBinary error %v is untyped", c.field, err)
				}
				continue
			}
			if !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Errorf("%s (form %d): error %v, want ErrSnapshotMismatch", c.field, i, err)
			} else if !bytes.Contains([]byte(err.Error()), []byte(" "+c.field+" differs")) {
				t.Errorf("%s (form %d): message %q does not name the field", c.field, i, err)
			}
		}
		if got := dst.QueryString("own"); got != before {
			t.Errorf("%s: refused restore changed the receiver: %v, was %v", c.field, got, before)
		}
		if got := dst.QueryString("x"); got != 0 {
			t.Errorf("%s: refused restore planted the snapshot's key: %v", c.field, got)
		}
		// Merge refuses the same.
		o := mustNewSketch(t, cfg)
		o.UpdateString("x", 5)
		if err := src.Merge(o); !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: Merge error %v, want ErrSnapshotMismatch", c.field, err)
		}
	}
	if got := src.QueryString("x"); got != 5 {
		t.Errorf("refused merges changed the receiver: %v, want 5", got)
	}
}
