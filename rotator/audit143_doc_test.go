package rotator_test

// Audit 143: a sentence-by-sentence read of the rotator's godoc
// (go doc -all ./rotator), each behaviour it states checked here where
// earlier audits had not.

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a143T0 = 1_780_000_000_000

func a143Rot(t *testing.T, clk sketch.Clock, n uint32, p time.Duration) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 256, Hi: 1e9, Decay: decay.None(), Seed: 143, Clock: clk},
		Generations: n, Period: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit143RotSurface: Rotator's doc: "It has sketch.Sketch's Scorer
// methods, with their String twins and At forms, Config, Sizes and the
// snapshot methods (no Merge or Reset), plus Close and Stats". Every method
// of *sketch.Sketch but Merge and Reset is on *Rotator with the same
// signature (Config returns rotator.Config), Merge and Reset are not, and
// Close and Stats are.
func TestAudit143RotSurface(t *testing.T) {
	var (
		_ sketch.Scorer              = (*rotator.Rotator)(nil)
		_ io.WriterTo                = (*rotator.Rotator)(nil)
		_ io.ReaderFrom              = (*rotator.Rotator)(nil)
		_ encoding.BinaryMarshaler   = (*rotator.Rotator)(nil)
		_ encoding.BinaryUnmarshaler = (*rotator.Rotator)(nil)
	)
	st, rt := reflect.TypeOf((*sketch.Sketch)(nil)), reflect.TypeOf((*rotator.Rotator)(nil))
	for i := range st.NumMethod() {
		m := st.Method(i)
		rm, ok := rt.MethodByName(m.Name)
		switch m.Name {
		case "Merge", "Reset":
			if ok {
				t.Errorf("*Rotator has %s; the doc says it has no Merge or Reset", m.Name)
			}
			continue
		case "Config":
			if !ok || rm.Type.NumOut() != 1 || rm.Type.Out(0) != reflect.TypeOf(rotator.Config{}) {
				t.Errorf("*Rotator.Config: %v", rm.Type)
			}
			continue
		}
		if !ok {
			t.Errorf("*Rotator lacks sketch.Sketch's %s", m.Name)
			continue
		}
		// Compare the signatures without the receiver.
		if a, b := fmt.Sprint(m.Type)[len("func(*sketch.Sketch"):], fmt.Sprint(rm.Type)[len("func(*rotator.Rotator"):]; a != b {
			t.Errorf("%s: sketch %v, rotator %v", m.Name, m.Type, rm.Type)
		}
	}
	for _, name := range []string{"Close", "Stats"} {
		if _, ok := rt.MethodByName(name); !ok {
			t.Errorf("*Rotator lacks %s", name)
		}
	}
}

// TestAudit143RotSizesSum: Sizes' doc: "the sum of the live generations'
// sizes, plus the rotator's own structs in Total". Each generation is a
// sketch of Config.Sketch, so Cells is N times a lone sketch's Cells, and
// Total is above N times a lone sketch's Total.
func TestAudit143RotSizesSum(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	for _, n := range []uint32{2, 3, 5} {
		r := a143Rot(t, clk, n, 10*time.Millisecond)
		s, err := sketch.New(r.Config().Sketch)
		if err != nil {
			t.Fatal(err)
		}
		rs, ss := r.Sizes(), s.Sizes()
		if rs.Cells != int(n)*ss.Cells {
			t.Errorf("N=%d: Sizes().Cells = %d, want %d x %d", n, rs.Cells, n, ss.Cells)
		}
		if rs.Total <= int(n)*ss.Total {
			t.Errorf("N=%d: Sizes().Total = %d, want above %d x %d (the generations plus the rotator's structs)", n, rs.Total, n, ss.Total)
		}
	}
}

// TestAudit143RotDeadlinesAndStats: New: "the first rotation due one
// Period from now"; Guarantees: "Exactly one promotion per deadline
// crossed; a forward clock jump of k periods is one promotion ..., and a
// backwards step rotates nothing"; the pseudo-code: k = (now -
// deadline)/Period + 1 periods, "append N-len(gens) fresh sketches";
// Stats: Allocated counts "the N built by New included"; "Counters only
// grow".
func TestAudit143RotDeadlinesAndStats(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	r := a143Rot(t, clk, 3, 10*time.Millisecond)
	want := func(step string, p, k, a uint64) {
		t.Helper()
		if s := r.Stats(); s != (rotator.Stats{Promotions: p, Periods: k, Allocated: a}) {
			t.Fatalf("%s: Stats %+v, want {%d %d %d}", step, s, p, k, a)
		}
	}
	want("after New", 0, 0, 3)
	clk.Set(a143T0 + 9)
	r.UpdateString("a", 1)
	want("1 ms before the first deadline", 0, 0, 3)
	clk.Set(a143T0 + 10)
	r.QueryString("a")
	r.QueryString("a")
	want("at the first deadline", 1, 1, 4) // one retires, one newborn
	clk.Set(a143T0 + 80)                   // deadline was +20: k = 60/10 + 1 = 7
	r.UpdateString("a", 1)
	want("a jump of 7 periods", 2, 8, 7) // k >= N: all three replaced
	clk.Set(a143T0)                      // backwards 8 periods
	for range 5 {
		r.UpdateString("a", 1)
		r.TryUpdateString("a", 1, 1e9)
	}
	want("after a backwards step", 2, 8, 7)
	clk.Set(a143T0 + 90) // the deadline after +80 is +90: crossed once
	r.QueryString("a")
	want("the next deadline", 3, 9, 8)
}

// TestAudit143RotStatsGrowAcrossRestore: Stats: "Stats counts what the
// rotator has done since New. Counters only grow." A successful restore
// of a snapshot taken by a rotator that never rotated leaves the
// restoring rotator's promotions and periods as they were (it does not
// take the snapshot's counters) and grows Allocated by the generations it
// built.
func TestAudit143RotStatsGrowAcrossRestore(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	src := a143Rot(t, clk, 3, 10*time.Millisecond)
	dst := a143Rot(t, clk, 3, 10*time.Millisecond)
	clk.Set(a143T0 + 35)
	dst.UpdateString("x", 1) // 3 periods, one promotion
	src2 := a143Rot(t, clk, 3, 10*time.Millisecond)
	src2.UpdateString("k", 5)
	_ = src
	var buf bytes.Buffer
	if _, err := src2.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	before := dst.Stats()
	if _, err := dst.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	after := dst.Stats()
	if after.Promotions < before.Promotions || after.Periods < before.Periods || after.Allocated < before.Allocated {
		t.Errorf("Stats went down across a restore: %+v -> %+v (\"Counters only grow\")", before, after)
	}
	if got := dst.QueryString("k"); got != 5 {
		t.Errorf("restored k = %v, want 5", got)
	}
}

// TestAudit143RotForgettingBound: Guarantees: "a write is gone from every
// generation at most N x Period after it was made, in the rotator's time
// (its high-water mark: a write made after the clock stepped back b
// Periods counts at the mark, so on the clock's own readings it lives up
// to (N+b) x Period)". And Config.Period: "A score lives at most
// Generations x Period after its last write."
func TestAudit143RotForgettingBound(t *testing.T) {
	for _, n := range []uint32{2, 3, 4} {
		const p = 10
		for off := int64(0); off < p; off += 3 {
			clk := sketchtest.NewFakeClock()
			clk.Set(a143T0)
			r := a143Rot(t, clk, n, p*time.Millisecond)
			key := fmt.Sprint("k", off)
			clk.Set(a143T0 + 100*p + off)
			r.UpdateString(key, 1)
			clk.Set(a143T0 + 100*p + off + int64(n)*p)
			if got := r.QueryString(key); got != 0 {
				t.Errorf("N=%d: a write at +%d ms reads %v at N x Period later; want 0", n, off, got)
			}
		}
		// Backwards by b = 2 periods from the high-water mark, then a write.
		clk := sketchtest.NewFakeClock()
		clk.Set(a143T0)
		r := a143Rot(t, clk, n, p*time.Millisecond)
		hw := int64(a143T0 + 300*p + 5)
		clk.Set(hw)
		r.QueryString("x")
		clk.Set(hw - 2*p)
		r.UpdateString("back", 1)
		clk.Set(hw - 2*p + (int64(n)+2)*p)
		if got := r.QueryString("back"); got != 0 {
			t.Errorf("N=%d: a write 2 Periods behind the mark reads %v (N+2) x Period later on the clock; want 0", n, got)
		}
	}
}

// TestAudit143RotBadInputPanics: Update: "It panics if delta is NaN or
// ±Inf, before touching any cell"; TryUpdate: "It panics if delta or
// limit is NaN or ±Inf". Every form (bytes, String, At) panics, and the
// key's score is unchanged after.
func TestAudit143RotBadInputPanics(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	r := a143Rot(t, clk, 3, time.Second)
	r.UpdateString("k", 4)
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	panics := func(name string, f func()) {
		t.Helper()
		defer func() {
			p := recover()
			if p == nil {
				t.Errorf("%s: no panic", name)
			} else if m := fmt.Sprint(p); !strings.Contains(m, "NaN") && !strings.Contains(m, "Inf") && !strings.Contains(m, "finite") {
				t.Errorf("%s: panic %q does not say what is wrong", name, m)
			}
		}()
		f()
	}
	at := clk.Now()
	for _, v := range bad {
		panics(fmt.Sprint("Update ", v), func() { r.Update([]byte("k"), v) })
		panics(fmt.Sprint("UpdateString ", v), func() { r.UpdateString("k", v) })
		panics(fmt.Sprint("UpdateAt ", v), func() { r.UpdateAt(at, "k", v) })
		panics(fmt.Sprint("UpdateAndQuery ", v), func() { r.UpdateAndQueryString("k", v) })
		panics(fmt.Sprint("TryUpdate delta ", v), func() { r.TryUpdateString("k", v, 10) })
		panics(fmt.Sprint("TryUpdate limit ", v), func() { r.TryUpdateString("k", 1, v) })
		panics(fmt.Sprint("TryUpdateAt limit ", v), func() { r.TryUpdateAt(at, "k", 1, v) })
	}
	if got := r.QueryString("k"); got != 4 {
		t.Errorf("after the panics k = %v, want 4", got)
	}
}

// TestAudit143RotQueryDetailed: QueryDetailed: "the primary's per-level
// view of the key"; sketch.Detail: Score "is the aggregate, what Query
// would have returned", Levels "one entry per level".
func TestAudit143RotQueryDetailed(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a143T0)
	r := a143Rot(t, clk, 3, 10*time.Millisecond)
	for i := range 50 {
		r.UpdateString(fmt.Sprint("k", i%7), float64(i))
		if i%10 == 0 {
			clk.Advance(4 * time.Millisecond)
		}
	}
	for i := range 7 {
		k := fmt.Sprint("k", i)
		d := r.QueryDetailed([]byte(k))
		if q := r.QueryString(k); d.Score != q || len(d.Levels) != 3 {
			t.Errorf("%s: Detail %+v, Query %v", k, d, q)
		}
	}
}

// TestAudit143RotRestoreDowntimeRotates: docs/snapshots.md: "A restored
// rotator's primary retires after the time its deadline had left at the
// snapshot instant, at most one Period, less the downtime", and the
// forgetting guarantee. A rotator (N = 2, Period 100 ms, no decay) written
// 70 ms before its deadline, saved and restored after downtimes around
// each boundary, reads what the never-stopped rotator reads at the same
// time, and counts the same Periods.
func TestAudit143RotRestoreDowntimeRotates(t *testing.T) {
	for _, down := range []int64{0, 69, 70, 71, 169, 170, 171, 970, 100_000} {
		clk := sketchtest.NewFakeClock()
		clk.Set(a143T0)
		src := a143Rot(t, clk, 2, 100*time.Millisecond)
		clk.Set(a143T0 + 30)
		src.UpdateString("k", 1)
		var buf bytes.Buffer
		if _, err := src.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		c2 := sketchtest.NewFakeClock()
		c2.Set(a143T0 + 30 + down)
		dst := a143Rot(t, c2, 2, 100*time.Millisecond)
		if _, err := dst.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		clk.Set(a143T0 + 30 + down)
		got, want := dst.QueryString("k"), src.QueryString("k")
		if got != want || dst.Stats().Periods != src.Stats().Periods {
			t.Errorf("downtime %d ms: restored reads %v (Periods %d), the live rotator %v (Periods %d)",
				down, got, dst.Stats().Periods, want, src.Stats().Periods)
		}
		if wantLive := down < 170; (want == 1) != wantLive {
			t.Errorf("downtime %d ms: the live rotator reads %v", down, want)
		}
	}
}

// TestAudit143RotConfigErrorFields: Config: "An invalid Config is a
// *sketch.ConfigError naming the field ("rotator: ", or "sketch: " for a
// field of Sketch)"; New: "or a *sketch.ConfigError naming the first
// invalid field"; sketch.ConfigError.Field: "a rotator's Sketch fields by
// their own names". Several fields wrong at once: the first in Config's
// order is named.
func TestAudit143RotConfigErrorFields(t *testing.T) {
	good := sketch.Config{Hi: 10, CellsPerLevel: 16}
	inf := math.Inf(1)
	for _, c := range []struct {
		name   string
		cfg    rotator.Config
		prefix string
		field  string
	}{
		{"Hi NaN, Generations 1, Period 0", rotator.Config{Sketch: sketch.Config{Hi: math.NaN()}, Generations: 1}, "sketch: ", "Hi"},
		{"Hi +Inf without a draining law", rotator.Config{Sketch: sketch.Config{Hi: inf}, Period: time.Second}, "sketch: ", "Hi"},
		{"Levels 9, Period 0", rotator.Config{Sketch: sketch.Config{Hi: 1, Levels: 9}}, "sketch: ", "Levels"},
		{"Generations 1, Period 0", rotator.Config{Sketch: good, Generations: 1}, "rotator: ", "Generations"},
		{"Generations 1025", rotator.Config{Sketch: good, Generations: 1025, Period: time.Second}, "rotator: ", "Generations"},
		{"Period 999999 ns", rotator.Config{Sketch: good, Period: time.Millisecond - 1}, "rotator: ", "Period"},
		{"Period -1 ms", rotator.Config{Sketch: good, Period: -time.Millisecond}, "rotator: ", "Period"},
	} {
		r, err := rotator.New(c.cfg)
		var ce *sketch.ConfigError
		if r != nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, %v; want a *sketch.ConfigError", c.name, r, err)
			continue
		}
		if ce.Field != c.field || !strings.HasPrefix(err.Error(), c.prefix) {
			t.Errorf("%s: Field %q, error %q; want Field %q and prefix %q", c.name, ce.Field, err, c.field, c.prefix)
		}
	}
}

// TestAudit143FixedRotatorNotGrudgeDropIn (audit 143; fixed at stop 65,
// the text below says what was wrong): rotator/doc.go said "It is a
// drop-in, lock-free alternative to grudge's rotator (same Config
// fields, ...)" and rotator/rotator.go "... plus Close and Stats, so it
// replaces grudge's rotator without other changes". grudge's rotator (the
// root package's RotatorConfig, "as grudge v0.1.0 has it"; API.md) has a
// Ticker field and a Rotations method, which package rotator lacks (it
// has Prefetch and Stats), so grudge code that uses either did not
// compile against it. The docs now name the root package as the drop-in
// and say what differs: Config's Ticker, and Stats().Periods for
// Rotations. The test holds the differences to exactly those two.
func TestAudit143FixedRotatorNotGrudgeDropIn(t *testing.T) {
	var missing []string
	gc, rc := reflect.TypeOf(grudge.RotatorConfig{}), reflect.TypeOf(rotator.Config{})
	for i := range gc.NumField() {
		if f := gc.Field(i); f.IsExported() {
			if _, ok := rc.FieldByName(f.Name); !ok {
				missing = append(missing, "Config."+f.Name)
			}
		}
	}
	gr, rr := reflect.TypeOf((*grudge.Rotator)(nil)), reflect.TypeOf((*rotator.Rotator)(nil))
	for i := range gr.NumMethod() {
		name := gr.Method(i).Name
		if name == "Native" {
			continue // the face's own way to the native rotator
		}
		if _, ok := rr.MethodByName(name); !ok {
			missing = append(missing, name)
		}
	}
	if got := strings.Join(missing, ", "); got != "Config.Ticker, Rotations" {
		t.Errorf("grudge's rotator has %q that package rotator lacks; its docs name Config.Ticker and Rotations", got)
	}
	for _, f := range []string{"doc.go", "rotator.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", "")), " ")
		if strings.Contains(doc, "drop-in, lock-free alternative to grudge's rotator") || strings.Contains(doc, "replaces grudge's rotator without other changes") {
			t.Errorf("rotator/%s still calls package rotator a drop-in for grudge's rotator", f)
		}
	}
}

// TestAudit143ZeroRotatorEveryMethod: Rotator: "the zero Rotator is not
// usable (its methods but Close, Config and Stats panic with "rotator:
// zero Rotator; use New")". Audit 125 checked three methods; here every
// method, by reflection, with valid arguments (a key, a finite delta, an
// empty reader or a buffer): Close, Config and Stats return (zero Config
// and Stats), every other one panics with that message.
func TestAudit143ZeroRotatorEveryMethod(t *testing.T) {
	var z rotator.Rotator
	rv := reflect.ValueOf(&z)
	rt := rv.Type()
	for i := range rt.NumMethod() {
		m := rt.Method(i)
		args := []reflect.Value{}
		for j := 1; j < m.Type.NumIn(); j++ {
			in := m.Type.In(j)
			switch {
			case in == reflect.TypeOf([]byte(nil)):
				args = append(args, reflect.ValueOf([]byte("k")))
			case in.Kind() == reflect.String:
				args = append(args, reflect.ValueOf("k"))
			case in.Kind() == reflect.Float64:
				args = append(args, reflect.ValueOf(1.0))
			case in == reflect.TypeOf(time.Time{}):
				args = append(args, reflect.ValueOf(time.UnixMilli(a143T0)))
			case in == reflect.TypeOf((*io.Writer)(nil)).Elem():
				args = append(args, reflect.ValueOf(io.Writer(new(bytes.Buffer))))
			case in == reflect.TypeOf((*io.Reader)(nil)).Elem():
				args = append(args, reflect.ValueOf(io.Reader(bytes.NewReader([]byte{1, 2, 3}))))
			default:
				t.Fatalf("%s: no argument for %v", m.Name, in)
			}
		}
		var p any
		var out []reflect.Value
		func() {
			defer func() { p = recover() }()
			out = rv.Method(i).Call(args)
		}()
		switch m.Name {
		case "Close":
			if p != nil {
				t.Errorf("zero Rotator.Close panicked: %v", p)
			}
		case "Config", "Stats":
			if p != nil || !out[0].IsZero() {
				t.Errorf("zero Rotator.%s = %v, panic %v; want the zero value", m.Name, out, p)
			}
		default:
			if m := fmt.Sprint(p); p == nil || !strings.HasPrefix(m, "rotator: zero Rotator; use New") {
				t.Errorf("zero Rotator.%s: panic %v; want \"rotator: zero Rotator; use New\"", rt.Method(i).Name, p)
			}
		}
	}
}
