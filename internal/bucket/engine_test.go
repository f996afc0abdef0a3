package bucket

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestLineLayout(t *testing.T) {
	if got := unsafe.Sizeof(line{}); got != LineBytes {
		t.Fatalf("sizeof(line) = %d, want %d", got, LineBytes)
	}
	if SlotsPerLine != 14 {
		t.Fatalf("SlotsPerLine = %d, want 14", SlotsPerLine)
	}
	for n := 1; n < 200; n++ {
		ls, bytes := allocLines(n)
		if len(ls) != n {
			t.Fatalf("allocLines(%d): %d lines", n, len(ls))
		}
		if a := uintptr(unsafe.Pointer(&ls[0])) % uintptr(cacheLine); a != 0 {
			t.Fatalf("allocLines(%d): first line at %d mod %d", n, a, cacheLine)
		}
		if bytes != (n+1)*LineBytes {
			t.Fatalf("allocLines(%d): %d bytes", n, bytes)
		}
	}
	e := newTest(t, 1000, Linear(10, 40), nil)
	if a := uintptr(unsafe.Pointer(&e.lines[0])) % 64; a != 0 {
		t.Fatalf("engine lines start at %d mod 64", a)
	}
	if e.Bytes() != 1001*LineBytes+int(unsafe.Sizeof(Engine{})) {
		t.Fatalf("Bytes = %d for 1000 lines", e.Bytes())
	}
}

func TestEntryEncoding(t *testing.T) {
	for _, s := range []int{0, 1, 6, 7, 12, 13} {
		j, sh := slotWord(s)
		if j != 1+s/2 || sh != uint(s%2)*32 {
			t.Fatalf("slotWord(%d) = %d, %d", s, j, sh)
		}
	}
	w := withEntry(0xAAAAAAAA_BBBBBBBB, 32, mkEnt(0x1234, 0x15678))
	if w != 0x12345678_BBBBBBBB {
		t.Fatalf("withEntry high: %#x", w)
	}
	w = withEntry(w, 0, 0)
	if w != 0x12345678_00000000 {
		t.Fatalf("withEntry low: %#x", w)
	}
	// interp: every stamp in the window comes back from its residue.
	for _, top := range []uint64{tickBase + 65535, tickBase + 1e6, 1 << 40} {
		for _, st := range []uint64{top, top - 1, top - 32768, top - 65535} {
			if got := interp(uint16(st), top); got != st {
				t.Fatalf("interp(%d, top %d) = %d", st, top, got)
			}
		}
		// Below the window: read higher (the safe side), never lower.
		if got := interp(uint16(top-65536), top); got != top {
			t.Fatalf("interp below window = %d, want %d", got, top)
		}
	}
}

// newTest returns an engine on a fake clock (set to a non-zero time) with
// seed 1.
func newTest(t testing.TB, lines int, law Law, clk *sketchtest.FakeClock) *Engine {
	t.Helper()
	if clk == nil {
		clk = sketchtest.NewFakeClock()
		clk.Set(1_000_000)
	}
	e, err := New(Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{Lines: 1, Law: Linear(1, 1)}, "Lines"},
		{Config{Lines: -5, Law: Linear(1, 1)}, "Lines"},
		{Config{Lines: 2, Law: Linear(1, 1), SaturationSamples: -1}, "SaturationSamples"},
		{Config{Lines: 2, Law: Linear(1, 0)}, "Law.Max"},
		{Config{Lines: 2, Law: Linear(1, math.NaN())}, "Law.Max"},
		{Config{Lines: 2, Law: Linear(1, math.Inf(1))}, "Law.Max"},
		{Config{Lines: 2, Law: Linear(1, 70000)}, "Law.Max"},
		{Config{Lines: 2, Law: Linear(0, 1)}, "Law.Rate"},
		{Config{Lines: 2, Law: Linear(-1, 1)}, "Law.Rate"},
		{Config{Lines: 2, Law: Linear(math.Inf(1), 1)}, "Law.Rate"},
		{Config{Lines: 2, Law: Exponential(0, 1, 0)}, "Law.Lambda"},
		{Config{Lines: 2, Law: Exponential(1, 1, 2)}, "Law.Resolution"},
		{Config{Lines: 2, Law: Exponential(1, 1, -1)}, "Law.Resolution"},
		{Config{Lines: 2, Law: Law{Kind: 9, Max: 1}}, "Law.Kind"},
		{Config{Lines: 2}, "Law.Max"},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, sketch.ErrInvalidConfig) ||
			!strings.HasPrefix(err.Error(), "bucket: ") || !strings.Contains(err.Error(), "; got ") {
			t.Errorf("New(%+v) = %v, want a ConfigError on %s", c.cfg, err, c.field)
		}
	}
	if msg := sketchtest.Panics(func() { MustNew(Config{}) }); !strings.HasPrefix(msg, "bucket: ") {
		t.Fatalf("MustNew(bad) panicked with %q", msg)
	}
}

// TestQuantum checks the tick choice for the laws limit and meter use.
func TestQuantum(t *testing.T) {
	cases := []struct {
		law    Law
		unit   float64
		tick   time.Duration
		rate   float64
		approx bool // the rate is quantized below the law's
	}{
		{Linear(10, 40), 1.0 / 1500, time.Millisecond / 15, 10, false}, // limit.New(10, 20)
		{Linear(1000, 20), 1.0 / 3071, time.Millisecond / 3071, 1000, false},
		{Linear(1, 40), 1.0 / 1000, time.Millisecond, 1, false},         // limit.New(1, 20): 1 ms ticks
		{Linear(0.5, 40), 1.0 / 1000, 2 * time.Millisecond, 0.5, false}, // exact rate, 2 ms ticks
		{Linear(3, 10), 0, 0, 3, true},
		{Linear(1.0/3600, 200), 0, 0, 1.0 / 3600, true}, // 1 per hour
		{Linear(1e9, 2), 0, 0, 1e9, true},               // capped tick rate
		{None(100), 1.0 / 614, 0, 0, false},
	}
	for _, c := range cases {
		e := newTest(t, 2, c.law, nil)
		qu := e.Quantum()
		if c.unit != 0 && math.Abs(qu.Unit-c.unit) > 1e-15 {
			t.Errorf("%+v: Unit = %v, want %v", c.law, qu.Unit, c.unit)
		}
		if c.tick != 0 && qu.Tick != c.tick {
			t.Errorf("%+v: Tick = %v, want %v", c.law, qu.Tick, c.tick)
		}
		if qu.Span > maxSpan || float64(qu.Span) < c.law.Max/qu.Unit-1 && c.law.Kind != KindExponential {
			t.Errorf("%+v: Span = %d", c.law, qu.Span)
		}
		if qu.Rate > c.rate*(1+1e-12) {
			t.Errorf("%+v: Rate %v above the law's %v", c.law, qu.Rate, c.rate)
		}
		if !c.approx && math.Abs(qu.Rate-c.rate) > 1e-9*c.rate {
			t.Errorf("%+v: Rate %v, want exactly %v", c.law, qu.Rate, c.rate)
		}
		if c.approx && c.law.Rate < 1e6 && qu.Rate < c.rate*0.995 {
			t.Errorf("%+v: Rate %v more than 0.5%% below %v", c.law, qu.Rate, c.rate)
		}
	}
	e := newTest(t, 2, Exponential(math.Ln2, 1000, 0), nil)
	qu := e.Quantum()
	if qu.Span > maxSpan || qu.Unit != 0 || qu.Tick <= 0 {
		t.Fatalf("exponential quantum %+v", qu)
	}
}

// TestTokenBucket is the limiter's law on one key, at the millisecond:
// limit 10/s, burst 20, MaxDebt 40.
func TestTokenBucket(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000_000)
	e := newTest(t, 64, Linear(10, 40), clk)
	admitted := 0
	for range 30 {
		if e.TryUpdate("a", 1, 20) {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("burst: admitted %d, want 20", admitted)
	}
	if q := e.Query("a"); q != 20 {
		t.Fatalf("debt after the burst = %v, want 20", q)
	}
	clk.Advance(99 * time.Millisecond)
	if e.TryUpdate("a", 1, 20) {
		t.Fatal("admitted 1 ms before a token is back")
	}
	if q := e.Query("a"); q != 19.01 {
		t.Fatalf("debt after 99 ms = %v, want 19.01", q)
	}
	clk.Advance(time.Millisecond)
	if !e.TryUpdate("a", 1, 20) {
		t.Fatal("denied when a token is back (100 ms)")
	}
	clk.Advance(2 * time.Second)
	if q := e.Query("a"); q != 0 {
		t.Fatalf("debt after 2 s idle = %v, want 0", q)
	}
	if !e.TryUpdate("a", 20, 20) || e.TryUpdate("a", 1, 20) {
		t.Fatal("full burst after the drain")
	}
	// Unconditional writes clamp at Max; fractional loads round up.
	if q := e.UpdateAndQuery("a", 100); q != 40 {
		t.Fatalf("clamped debt = %v, want 40", q)
	}
	if q := e.UpdateAndQuery("b", 0.0001); q != 1.0/1500 {
		t.Fatalf("a fraction of a tick reads %v, want one tick %v", q, 1.0/1500)
	}
}

// TestLongTicks: with 2 ms ticks (rate 0.5/s, burst 20, MaxDebt 40:
// 80 s to drain) a debt can read up to one tick high, never low, and a
// fresh key still takes its whole burst at once.
func TestLongTicks(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(7_000_000)
	e := newTest(t, 64, Linear(0.5, 40), clk)
	clk.Advance(time.Millisecond) // between two ticks
	if !e.TryUpdate("a", 20, 20) {
		t.Fatal("a fresh key's full burst denied between ticks")
	}
	if q := e.Query("a"); q < 20 || q > 20+1.0/1000 {
		t.Fatalf("debt = %v, want 20 up to one tick more", q)
	}
	for ms := 0; ms < 3000; ms++ {
		q := e.Query("a")
		if want := math.Max(20-float64(ms)*0.5/1000, 0); q < want-1e-12 {
			t.Fatalf("after %d ms debt reads %v below the truth %v", ms, q, want)
		}
		clk.Advance(time.Millisecond)
	}
}

func TestExponentialLaw(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	lambda := math.Ln2 // half-life 1 s
	e := newTest(t, 64, Exponential(lambda, 1e6, 0), clk)
	e.Update("a", 1000)
	for _, d := range []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second} {
		clk.Set(1_000_000 + d.Milliseconds())
		want := 1000 * math.Exp(-lambda*d.Seconds())
		got := e.Query("a")
		if got < want || got > want*1.003 {
			t.Fatalf("after %v: %v, want %v (+0.3%%)", d, got, want)
		}
	}
}

func TestPanics(t *testing.T) {
	e := newTest(t, 8, Linear(10, 40), nil)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"TryUpdate NaN", func() { e.TryUpdate("k", math.NaN(), 1) }},
		{"TryUpdate negative", func() { e.TryUpdate("k", -1, 1) }},
		{"TryUpdate Inf", func() { e.TryUpdate("k", math.Inf(1), 1) }},
		{"TryUpdate NaN limit", func() { e.TryUpdate("k", 1, math.NaN()) }},
		{"TryUpdate Inf limit", func() { e.TryUpdate("k", 1, math.Inf(-1)) }},
		{"Update NaN", func() { e.Update("k", math.NaN()) }},
		{"UpdateAndQuery negative", func() { e.UpdateAndQuery("k", -0.5) }},
		{"TryReserve NaN", func() { e.TryReserve("k", math.NaN(), 1) }},
	} {
		msg := sketchtest.Panics(c.f)
		if !strings.HasPrefix(msg, "bucket: ") || !strings.Contains(msg, "got") {
			t.Errorf("%s: panic %q", c.name, msg)
		}
	}
	if q := e.Query("k"); q != 0 {
		t.Fatalf("a panicking call wrote: %v", q)
	}
}

func TestZeroAllocs(t *testing.T) {
	e := newTest(t, 1024, Linear(10, 40), nil)
	now := e.Timebase().Now()
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	i := 0
	next := func() string { i++; return keys[i%len(keys)] }
	for name, f := range map[string]func(){
		"TryUpdate":      func() { e.TryUpdate(next(), 1, 20) },
		"TryUpdateAt":    func() { e.TryUpdateAt(now, next(), 1, 20) },
		"Update":         func() { e.Update(next(), 1) },
		"UpdateAndQuery": func() { e.UpdateAndQuery(next(), 1) },
		"Query":          func() { e.Query(next()) },
		"QueryAt":        func() { e.QueryAt(now, next()) },
		"TryReserve+Refund": func() {
			r, _ := e.TryReserve(next(), 1, 40)
			e.Refund(&r)
		},
		"Saturation": func() { e.Saturation(1, 20) },
	} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s allocates %v per call", name, a)
		}
	}
}

// TestRefund: an exact undo while the entry is untouched; after any other
// write of the key, the debt stays; a write that filled the key to Max
// cannot be refunded; a second Refund does nothing.
func TestRefund(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 64, Linear(10, 40), clk)
	r, ok := e.TryReserve("a", 5, 40)
	if !ok || e.Query("a") != 5 {
		t.Fatal("reserve")
	}
	if !e.Refund(&r) || e.Query("a") != 0 {
		t.Fatalf("exact refund: debt %v", e.Query("a"))
	}
	if e.Refund(&r) {
		t.Fatal("second refund")
	}
	r, _ = e.TryReserve("a", 5, 40)
	e.Update("a", 1)
	if e.Refund(&r) || e.Query("a") != 6 {
		t.Fatalf("refund after another write: debt %v, want 6 kept", e.Query("a"))
	}
	r, ok = e.TryReserve("b", 40, 40)
	if !ok {
		t.Fatal("reserve to Max")
	}
	e.Update("b", 3) // clamped: the entry does not change
	if e.Refund(&r) || e.Query("b") != 40 {
		t.Fatalf("a write that filled the key to Max was refunded: debt %v", e.Query("b"))
	}
	// The time passed since the reservation drains as usual; the refund
	// gives back what the entry held before (here nothing).
	r, _ = e.TryReserve("c", 10, 40)
	clk.Advance(300 * time.Millisecond)
	if !e.Refund(&r) || e.Query("c") != 0 {
		t.Fatalf("late refund: debt %v", e.Query("c"))
	}
	var zero Receipt
	if e.Refund(&zero) {
		t.Fatal("zero Receipt refunded")
	}
}

// TestIdleLine: a line idle for longer than the 16-bit window (here 2^16
// ticks = 4.4 s at 15 ticks/ms, then an hour) reads its expired entries as
// 0, not as a phantom debt, before and after a writer moves its lw.
func TestIdleLine(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	e := newTest(t, 2, Linear(10, 40), clk)
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("idle-%d", i)
		e.TryUpdate(keys[i], 20, 20)
	}
	for _, gap := range []time.Duration{8200 * time.Millisecond, 3 * time.Second, time.Hour, 1000 * time.Hour} {
		clk.Advance(gap)
		for _, k := range keys {
			if q := e.Query(k); q != 0 {
				t.Fatalf("after %v idle: %s reads %v", gap, k, q)
			}
		}
		// A writer revives the line; the others still read 0.
		if !e.TryUpdate("writer", 1, 20) {
			t.Fatalf("after %v idle: a fresh key denied", gap)
		}
		for _, k := range keys {
			if q := e.Query(k); q != 0 {
				t.Fatalf("after %v idle and a write: %s reads %v", gap, k, q)
			}
		}
		for _, k := range keys {
			if !e.TryUpdate(k, 20, 20) {
				t.Fatalf("after %v idle: %s denied its burst", gap, k)
			}
		}
	}
}

// TestTimeEdges: times before the epoch count as the epoch; times 2^48
// ms after it saturate (time stops: loads stop draining, the safe side).
func TestTimeEdges(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1 << 40)
	e := newTest(t, 8, Linear(1000, 40), clk)
	early := time.UnixMilli(1 << 30)
	if !e.TryUpdateAt(early, "a", 10, 40) || e.QueryAt(early, "a") != 10 {
		t.Fatal("a time before the epoch")
	}
	if e.rel(e.base-5) != 0 || e.rel(e.base+lwMask+100) != lwMask {
		t.Fatal("rel does not clamp")
	}
	clk.Set(1<<40 + lwMask - 3)
	if !e.TryUpdate("b", 10, 40) {
		t.Fatal("near the end of the 48-bit range")
	}
	clk.Set(1<<40 + lwMask + 1000)
	if q := e.Query("b"); q != 7 {
		t.Fatalf("past the end: %v, want 7 (drained until the end, then frozen)", q)
	}
}

// TestTryUpdateZero: n = 0 decides without writing.
func TestTryUpdateZero(t *testing.T) {
	e := newTest(t, 8, Linear(10, 40), nil)
	if !e.TryUpdate("a", 0, 0) {
		t.Fatal("0 within a limit of 0")
	}
	e.Update("a", 0)
	if q := e.Query("a"); q != 0 {
		t.Fatalf("a zero update wrote %v", q)
	}
	e.Update("a", 5)
	if e.TryUpdate("a", 0, 4) || !e.TryUpdate("a", 0, 5) {
		t.Fatal("n = 0 against the limit")
	}
}

// TestDivide checks the multiply-shift division against the division
// instruction, for divisors small and large and numerators at the edges
// of the 48-bit range (and of divBits).
func TestDivide(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	divisors := []uint64{2, 3, 5, 7, 10, 125, 1000, 1023, 1024, 1025, 65535, 1 << 20, 61035157, 1<<40 + 1, 1<<47 - 1}
	for range 200 {
		divisors = append(divisors, 2+r.Uint64N(1<<r.UintN(48)))
	}
	for _, d := range divisors {
		q := quant{gn: 1, gd: d}
		q.setDivisor()
		xs := []uint64{0, 1, d - 1, d, d + 1, 2*d - 1, 1<<48 - 1, 1 << 48, 1<<divBits - 1, 1<<divBits - d}
		for range 2000 {
			xs = append(xs, r.Uint64N(1<<divBits))
		}
		for k := uint64(1); k < 50 && k*d < 1<<divBits; k++ {
			xs = append(xs, k*d-1, k*d)
		}
		for _, x := range xs {
			if x >= 1<<divBits {
				continue
			}
			if got, want := q.divide(x), x/d; got != want {
				t.Fatalf("divide(%d) by %d = %d, want %d", x, d, got, want)
			}
		}
	}
}

func TestTryUpdateAndQuery(t *testing.T) {
	e := newTest(t, 64, Linear(10, 40), nil)
	for i := 1; i <= 20; i++ {
		ok, q := e.TryUpdateAndQuery("a", 1, 20)
		if !ok || q != float64(i) {
			t.Fatalf("call %d: (%v, %v), want (true, %d)", i, ok, q, i)
		}
	}
	if ok, q := e.TryUpdateAndQuery("a", 1, 20); ok || q != 20 {
		t.Fatalf("denied: (%v, %v), want (false, 20)", ok, q)
	}
	if ok, q := e.TryUpdateAndQueryAt(e.Timebase().Now(), "b", 5, 20); !ok || q != 5 {
		t.Fatalf("At: (%v, %v)", ok, q)
	}
}

// TestExponentialCounter: why package meter's Rate does not run on the
// engine. A key's exponential load is a stamp of whole ticks, each a
// factor e^kappa (kappa = ln(Max/Resolution)/61437, 5.4e-4 with the
// default Resolution), and every write rounds its stamp up to the next
// tick. One event adds 1/C to a counter of C, so once C passes about
// 1/kappa (1,850) the rounding adds more than the event, and the counter
// runs away to Max. Events at rate r for five windows of 1 s
// (Exponential(1, Max, 0)): with Max 1e4 the counter stays within 1% of
// the truth (above it: one-sided) up to 1,000 events per window; with
// Max 1e6, 10,000 events per window read Max, 100 times the truth.
// meter.Rate's counter has Hi = MaxFloat32 and no bound on a key's
// rate; only the count-min's float32 cells (2^-24 relative) keep it.
func TestExponentialCounter(t *testing.T) {
	run := func(max, rate float64) (est, truth float64) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := MustNew(Config{Lines: 64, Law: Exponential(1, max, 0), Clock: clk, SeedSet: true, Seed: 1})
		last, acc := clk.NowMillis(), 0.0
		for range int(5 * rate) {
			for acc += 1000 / rate; acc >= 1; acc-- {
				clk.Advance(time.Millisecond)
			}
			now := clk.NowMillis()
			truth = truth*math.Exp(-float64(now-last)/1000) + 1
			last = now
			e.Update("k", 1)
		}
		return e.Query("k"), truth
	}
	for _, rate := range []float64{10, 100, 1000} {
		if est, truth := run(1e4, rate); est < truth || est > 1.01*truth {
			t.Errorf("Max 1e4, %v/s: estimate %v, truth %v", rate, est, truth)
		}
	}
	if est, truth := run(1e6, 10_000); est < 50*truth {
		t.Errorf("Max 1e6, 10000/s: estimate %v, truth %v: the rounding no longer runs away?", est, truth)
	}
}

// TestMillisecondFitsWindow: every law's span leaves room in the 2^16-tick
// window for one millisecond of ticks beside it (fitsWindow), so that a
// line can always move its time by a millisecond: the laws of the most
// ticks per ms, linear and exponential, are picked below that edge, and a
// line of them still moves and reads exactly after long idle times.
func TestMillisecondFitsWindow(t *testing.T) {
	for _, law := range []Law{
		Linear(8e6, 60000),   // u = 1 only: 8,000 ticks a ms would not fit beside 60,000
		Linear(4.1e6, 61438), // the widest span
		Linear(16.384e6, 1),  // the most ticks a ms
		Linear(1e6, 4),
		Exponential(5000, 1, 0), // decays 5 per ms
		Exponential(1e6, 10, 0),
		Linear(10, 40),
	} {
		qu, err := QuantumOf(law)
		if err != nil {
			t.Fatalf("%+v: %v", law, err)
		}
		if qu.PerMs > 0 && !fitsWindow(qu.Span, qu.PerMs) {
			t.Errorf("%+v: span %d + %d ticks a ms > %d", law, qu.Span, qu.PerMs, window-2)
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := newTest(t, 2, law, clk)
		for i := range 200 {
			key := fmt.Sprintf("k%d", i%20)
			e.Update(key, law.Max/3)
			if i%7 == 0 {
				clk.Advance(time.Duration(i%5) * time.Millisecond)
			}
		}
		clk.Advance(time.Hour)
		e.Update("y", law.Max/3)
		for i := range 20 {
			if q := e.Query(fmt.Sprintf("k%d", i)); q != 0 {
				t.Errorf("%+v: k%d reads %v an hour later", law, i, q)
			}
		}
	}
}
