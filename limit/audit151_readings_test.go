package limit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// docs/readings.md, parity table: "`SetLimitAt`, `SetBurstAt` | — | not
// provided"; Cancel row: "No `CancelAt`"; "`Sometimes` | — | not a limiter";
// Tier row: "a policy of its own ... with the Limiter's decision methods".
func TestAudit151ReadingsAbsentAndTierMethods(t *testing.T) {
	lt := reflect.TypeFor[*limit.Limiter]()
	for _, m := range []string{"SetLimitAt", "SetBurstAt"} {
		if _, ok := lt.MethodByName(m); ok {
			t.Errorf("*Limiter has %s; readings.md: not provided", m)
		}
	}
	if _, ok := reflect.TypeFor[*limit.Reservation]().MethodByName("CancelAt"); ok {
		t.Error("*Reservation has CancelAt; readings.md: No CancelAt")
	}
	// The table's "here" column names these on the Limiter; a Tier has the
	// same decision methods with the same signatures.
	tt := reflect.TypeFor[*limit.Tier]()
	for _, m := range []string{"Allow", "AllowN", "Decide", "DecideN", "Peek", "PeekN",
		"Reserve", "ReserveN", "Tokens", "TokensAt", "Wait", "WaitN", "Limit", "Burst"} {
		lm, ok := lt.MethodByName(m)
		if !ok {
			t.Errorf("*Limiter lacks %s, which readings.md's table names", m)
			continue
		}
		tm, ok := tt.MethodByName(m)
		if !ok {
			t.Errorf("*Tier lacks %s; readings.md: a tier has the Limiter's decision methods", m)
			continue
		}
		// drop the receiver
		if fmt.Sprint(lm.Type)[len("func(*limit.Limiter"):] != fmt.Sprint(tm.Type)[len("func(*limit.Tier"):] {
			t.Errorf("%s: Limiter %v, Tier %v", m, lm.Type, tm.Type)
		}
	}
	// DecideN "also returns RetryAfter, ResetAfter, NextAfter, Remaining"
	dt := reflect.TypeFor[limit.Decision]()
	for _, f := range []string{"Allowed", "Limit", "RetryAfter", "ResetAfter", "NextAfter", "Remaining"} {
		if _, ok := dt.FieldByName(f); !ok {
			if _, ok := dt.MethodByName(f); !ok {
				t.Errorf("Decision has no %s; readings.md: DecideN also returns it", f)
			}
		}
	}
}

// docs/readings.md, "Beyond the bound": "`limit.New` puts this policy on the
// count-min (Buckets refuses a debt that takes 2e6 s to drain)"; "Live
// traffic": "Policy 10/s, burst 20: `limit.New` runs it on Buckets".
func TestAudit151ReadingsForgetEngines(t *testing.T) {
	if e := limit.MustNew(1e-6, 1).Engine(); e != limit.CountMin {
		t.Errorf("New(1e-6, 1) on %v; readings.md: the count-min", e)
	}
	if _, err := limit.New(1e-6, 1, limit.WithEngine(limit.Buckets)); err == nil {
		t.Error("New(1e-6, 1, WithEngine(Buckets)) accepted; readings.md: Buckets refuses a debt that takes 2e6 s to drain")
	}
	if l := limit.MustNew(1e-6, 1, limit.WithEngine(limit.CountMin)); l.MaxDebt()/1e-6 != 2e6 {
		t.Errorf("MaxDebt/rate = %v s; readings.md: 2e6 s", l.MaxDebt()/1e-6)
	}
	if e := limit.MustNew(10, 20).Engine(); e != limit.Buckets {
		t.Errorf("New(10, 20) on %v; readings.md: Buckets", e)
	}
}

// docs/readings.md, "Beyond the bound", the `limit` rows: an abuser then
// 3 x gap fresh clients at 1e-6/s, burst 1: abuser-admits 0 at both gaps,
// fresh-denied 0.50% at gap 16k and 93.4% at gap 1M ("deterministic up to
// the seeds"). Replayed as bench/limit's BenchmarkForget does it (same key
// names) on a few seeds, with a tolerance for the seed.
func TestAudit151ReadingsForgetTable(t *testing.T) {
	gaps := []struct {
		gap    int
		lo, hi float64
	}{{16 << 10, 0.0030, 0.0075}}
	if !testing.Short() && !testsize.Small() {
		gaps = append(gaps, struct {
			gap    int
			lo, hi float64
		}{1 << 20, 0.925, 0.943})
	}
	for _, g := range gaps {
		for seed := uint64(1); seed <= 2; seed++ {
			l := limit.MustNew(1e-6, 1, limit.WithSeed(seed))
			if !l.Allow("abuser") {
				t.Fatal("the abuser's first request denied")
			}
			admits, denied := 0, 0
			buf := make([]byte, 0, 32)
			for r := range 3 {
				for i := range g.gap {
					buf = strconv.AppendUint(append(strconv.AppendUint(append(buf[:0], "fresh-"...), uint64(r), 10), '-'), uint64(i), 10)
					if !l.Allow(string(buf)) {
						denied++
					}
				}
				if l.Allow("abuser") {
					admits++
				}
			}
			share := float64(denied) / float64(3*g.gap)
			t.Logf("gap %d seed %d: abuser-admits %d, fresh-denied %.4f", g.gap, seed, admits, share)
			if admits != 0 || share < g.lo || share > g.hi {
				t.Errorf("gap %d seed %d: abuser-admits %d, fresh-denied %.4f; readings.md: 0, %.4f..%.4f", g.gap, seed, admits, share, g.lo, g.hi)
			}
		}
	}
}

// docs/readings.md, SetLimit row: "The new burst must fit MaxDebt in the new
// tokens (`*MaxDebtError` otherwise; build with `WithMaxDebt(k x b)` for
// limits down to R/k). `SetLimit(Inf)` on a finite limiter, and any finite
// limit on an Inf one, are errors"; "(they return an error)".
func TestAudit151ReadingsSetLimitBounds(t *testing.T) {
	for _, k := range []float64{2, 5} {
		var opts []limit.Option
		if k != 2 {
			opts = append(opts, limit.WithMaxDebt(k*20))
		}
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			l, err := limit.New(10, 20, append(opts, limit.WithEngine(e))...)
			if err != nil {
				t.Fatalf("k=%v %v: %v", k, e, err)
			}
			if err := l.SetLimit(limit.Limit(10 / k)); err != nil {
				t.Errorf("k=%v %v: SetLimit(R/k = %v): %v; readings.md: limits down to R/k", k, e, 10/k, err)
			}
			var me *limit.MaxDebtError
			if err := l.SetLimit(limit.Limit(10/k) * 0.99); !errors.As(err, &me) {
				t.Errorf("k=%v %v: SetLimit(0.99 R/k): %v; readings.md: *MaxDebtError", k, e, err)
			}
			if l.Limit() != limit.Limit(10/k) {
				t.Errorf("k=%v %v: a refused SetLimit changed Limit() to %v", k, e, l.Limit())
			}
			// SetBurst: the new burst must fit MaxDebt in the (current) tokens
			if err := l.SetLimit(10); err != nil {
				t.Fatal(err)
			}
			if err := l.SetBurst(int(k * 20)); err != nil {
				t.Errorf("k=%v %v: SetBurst(MaxDebt): %v", k, e, err)
			}
			if err := l.SetBurst(int(k*20) + 1); !errors.As(err, &me) {
				t.Errorf("k=%v %v: SetBurst(MaxDebt+1): %v; readings.md: *MaxDebtError", k, e, err)
			}
			if err := l.SetLimit(limit.Inf); err == nil {
				t.Errorf("k=%v %v: SetLimit(Inf) on a finite limiter accepted; readings.md: an error", k, e)
			}
		}
	}
	inf := limit.MustNew(limit.Inf, 20)
	if err := inf.SetLimit(10); err == nil {
		t.Error("SetLimit(10) on an Inf limiter accepted; readings.md: an error")
	}
}

// docs/readings.md, Wait row: "n > burst: error; ctx done: `ctx.Err()`" and
// errors "`ErrMaxDebt` (the queue bound above)", nothing debited (the godoc:
// "a *WaitError before waiting ... having debited nothing").
func TestAudit151ReadingsWaitMaxDebt(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_000_000)
		l := limit.MustNew(10, 5, limit.WithClock(clk), limit.WithEngine(e))
		if !l.ReserveN(clk.Now(), "m", 5).OK() || !l.ReserveN(clk.Now(), "m", 4).OK() {
			t.Fatalf("%v: reservations within MaxDebt 10 not OK", e)
		}
		err := l.WaitN(t.Context(), "m", 2)
		var we *limit.WaitError
		if !errors.Is(err, limit.ErrMaxDebt) || !errors.As(err, &we) {
			t.Errorf("%v: WaitN past MaxDebt: %v; readings.md: ErrMaxDebt (*WaitError)", e, err)
		}
		if tk := l.Tokens("m"); tk != -4 {
			t.Errorf("%v: refused WaitN debited: Tokens %v, want -4", e, tk)
		}
	}
}

// docs/readings.md, Allow row: "0 allocations"; the Allow section: "Today's
// `limit`, on Buckets, never rotates and allocates nothing on either path".
func TestAudit151ReadingsAllowAllocs(t *testing.T) {
	if testsize.Race {
		t.Skip("the race detector allocates")
	}
	l := limit.MustNew(1000, 10)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	i := 0
	if a := testing.AllocsPerRun(2000, func() { l.Allow(keys[i%64]); i++ }); a != 0 {
		t.Errorf("Buckets Allow (admitted and denied): %v allocs/op; readings.md: 0", a)
	}
	if l.Engine() != limit.Buckets || l.Period() != 0 {
		t.Errorf("New(1000, 10): engine %v, Period %v; readings.md: Buckets, never rotates", l.Engine(), l.Period())
	}
	if s := l.Stats(); s.Admitted == 0 || s.Denied == 0 {
		t.Errorf("the loop did not take both paths: %+v", s)
	}
}

// a151WallClock is a WithClock clock that runs at real speed (monotonic
// milliseconds of package time) and has no NewTimer.
type a151WallClock struct{ start time.Time }

func (c a151WallClock) NowMillis() int64 { return 1_000_000 + time.Since(c.start).Milliseconds() }

// TestAudit151FixedNoTimerRealSpeedClock (audit 151; fixed at stop 65,
// the text below says what was wrong; the row now says "a WithClock clock
// without NewTimer, whatever its speed"): the Wait row said ErrNoTimer is
// for "a `WithClock` clock that neither has `NewTimer` nor runs at real
// speed", so a real-speed clock without NewTimer would wait. It does not,
// as WithClock's and ErrNoTimer's godocs say: only the default clock (and
// the internal tick clock) waits on real timers. A clock reading
// time.Since(start) in ms, New(10, 1), one Allow, WaitN (a 100 ms wait):
// ErrNoTimer at once.
func TestAudit151FixedNoTimerRealSpeedClock(t *testing.T) {
	l := limit.MustNew(10, 1, limit.WithClock(a151WallClock{start: time.Now()}))
	if !l.Allow("k") {
		t.Fatal("first request denied")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.WaitN(ctx, "k", 1); !errors.Is(err, limit.ErrNoTimer) {
		t.Errorf("WaitN on a real-speed clock without NewTimer: %v; want ErrNoTimer", err)
	}
	doc, err := os.ReadFile("../docs/readings.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "a `WithClock` clock without `NewTimer`, whatever its speed") {
		t.Error("docs/readings.md's Wait row no longer says a WithClock clock without NewTimer gets ErrNoTimer whatever its speed")
	}
}

// TestAudit151FixedTargetsHeapRowStale (audit 151; fixed at stop 65, the
// text below says what was wrong): docs/readings.md, "Targets, at P=1
// on this machine", first row: "`limit` heap flat (within 1%) from 1M to
// 10M keys | 6.164 vs 6.159 MiB (0.08%; the heap table above)". The heap
// table above ("Heap after N distinct keys") no longer has those figures:
// "`limit` (Buckets) | 6.107 MB | 6.107 MB | 1.000 (flat)" and
// "`limit-countmin` | 6.159 MB | 6.159 MB | 1.000 (flat)" (the text: "identical
// to the kilobyte on both engines"). 6.164 is a figure of an earlier run of
// the table (the count-min, before 435d10e) left in the Targets row; the row
// cites a table that contradicts it. Fix: docs/readings.md, the Targets
// table's heap row: "6.107 vs 6.107 MiB on Buckets, 6.159 vs 6.159 on the
// count-min (flat; the heap table above)".
func TestAudit151FixedTargetsHeapRowStale(t *testing.T) {
	doc, err := os.ReadFile("../docs/readings.md")
	if err != nil {
		t.Fatal(err)
	}
	heap := regexp.MustCompile("(?m)^\\| `limit(?:-countmin)?`[^|]*\\| ([0-9.]+) MB \\| ([0-9.]+) MB \\|")
	rows := heap.FindAllSubmatch(doc, -1)
	if len(rows) != 2 {
		t.Fatalf("heap table: %d limit rows found, want 2", len(rows))
	}
	target := regexp.MustCompile("(?m)^\\| `limit` heap flat[^|]*\\| ([0-9.]+) vs ([0-9.]+) MiB")
	m := target.FindSubmatch(doc)
	if m == nil {
		t.Fatal("Targets table: no heap row found")
	}
	for _, r := range rows {
		if bytes.Equal(r[1], m[2]) && bytes.Equal(r[2], m[1]) {
			return
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, string(r[1])+"/"+string(r[2]))
	}
	t.Errorf("Targets row: %s (10M) vs %s (1M) MiB, \"the heap table above\"; the heap table's limit rows (1M/10M): %v", m[1], m[2], got)
}

// docs/readings.md, "Surviving a restart": "`limit.Limiter`, `meter.Rate`
// and `meter.Novelty` save and restore their state (`WriteTo`/`ReadFrom`, so
// `snapshot.Saver` and `snapshot.Load` take them)"; "The snapshot is the
// engine's memory plus a few hundred bytes, whatever the number of keys".
// (Sizes().Cells counts the cells' alignment slack, so the count-min's
// snapshot reads 76 B under it: within a few hundred bytes either way.)
func TestAudit151ReadingsSnapshotOverhead(t *testing.T) {
	var (
		_ snapshot.Source      = (*limit.Limiter)(nil)
		_ snapshot.Destination = (*limit.Limiter)(nil)
		_ snapshot.Source      = (*meter.Rate)(nil)
		_ snapshot.Destination = (*meter.Rate)(nil)
		_ snapshot.Source      = (*meter.Novelty)(nil)
		_ snapshot.Destination = (*meter.Novelty)(nil)
	)
	for _, c := range []struct {
		name string
		r    limit.Limit
		b    int
		opts []limit.Option
	}{
		{"New(10, 20)", 10, 20, nil},
		{"count-min", 10, 20, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"1e-6/s", 1e-6, 1, nil},
		{"small count-min", 3, 5, []limit.Option{limit.WithSize(2, 1000)}},
		{"WithCapacity", 100, 50, []limit.Option{limit.WithCapacity(10_000, 0.01)}},
	} {
		l := limit.MustNew(c.r, c.b, c.opts...)
		empty := l.SnapshotSize()
		for i := range 20_000 {
			l.Allow("client-" + strconv.Itoa(i))
		}
		n, err := l.WriteTo(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		over := n - int64(l.Sizes().Cells)
		if n != empty || n != l.SnapshotSize() || over <= -1000 || over >= 1000 {
			t.Errorf("%s (%v): snapshot %d B empty, %d B after 20k keys, cells %d B (+%d); readings.md: the engine's memory plus a few hundred bytes, whatever the keys", c.name, l.Engine(), empty, n, l.Sizes().Cells, over)
		}
	}
}

// docs/readings.md, "Allow, ns/op": "`denied` ... (every call should deny;
// for `limit` a denial is a read of the primary: nothing is written". The
// limiter's saved state is byte for byte the same before and after denials
// at the same millisecond (both engines, the defaults: strict, no
// RejectCost).
func TestAudit151ReadingsDenialWritesNothing(t *testing.T) {
	for _, c := range []struct {
		r limit.Limit
		b int
	}{{1000, 10}, {1e-6, 1}} {
		clk := limittest.NewFakeClock()
		clk.Set(5_000_000)
		l := limit.MustNew(c.r, c.b, limit.WithClock(clk), limit.WithSeed(151))
		for i := range 64 {
			l.AllowN(clk.Now(), "client-"+strconv.Itoa(i), c.b)
		}
		var before, after bytes.Buffer
		if _, err := l.WriteTo(&before); err != nil {
			t.Fatal(err)
		}
		for i := range 64 {
			if l.Allow("client-" + strconv.Itoa(i)) {
				t.Fatalf("%v/s: an exhausted key admitted", c.r)
			}
		}
		if _, err := l.WriteTo(&after); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before.Bytes(), after.Bytes()) {
			t.Errorf("New(%v, %d) on %v: 64 denials changed the saved state; readings.md: a denial writes nothing", c.r, c.b, l.Engine())
		}
	}
}

// docs/readings.md, Tier row: "a request of n costs n x R/r tokens of the
// limiter's R against a burst of b x R/r"; "Heap": "a promotion replaces a
// generation by one of the same size" and the Allow section's "the
// promotion's new generation (3.2 MB every derived Period of 0.32 s at
// r=1000, b=10)"; "Today's `limit`, on Buckets, never rotates".
func TestAudit151ReadingsTierCostAndPromotion(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1_000_000)
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(e))
		tier, err := l.Tier("half", 5, 4)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		if a, b := tier.AllowN(now, "k", 1), tier.AllowN(now, "k", 1); !a || !b {
			t.Fatalf("%v: tier burst denied", e)
		}
		if tk := l.Tokens("k"); tk != 16 {
			t.Errorf("%v: two tier requests at r = R/2: limiter Tokens %v; readings.md: 2 x R/r = 4 of R, 16", e, tk)
		}
		// the tier's burst is b x R/r = 8 tokens of R: a debt of 6 leaves room for one
		l.AllowN(now, "j", 6)
		first := tier.AllowN(now, "j", 1)
		second := tier.AllowN(now, "j", 1)
		if !first || second {
			t.Errorf("%v: limiter debt 6: tier admits %v then %v; readings.md: one (2 of R fills the burst of 8)", e, first, second)
		}
		if tk := tier.Tokens("j"); tk != 0 {
			t.Errorf("%v: tier Tokens %v at limiter debt 8, want 0 (burst 8 of R = 4 of r)", e, tk)
		}
	}
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	l := limit.MustNew(1000, 10, limit.WithClock(clk), limit.WithEngine(limit.CountMin))
	if p := l.Period(); p != 320*time.Millisecond {
		t.Fatalf("count-min(1000, 10) Period %v; readings.md: 0.32 s", p)
	}
	size := l.Sizes()
	l.Allow("warm")
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	clk.Advance(l.Period())
	l.Allow("k")
	runtime.ReadMemStats(&m1)
	if l.Stats().Rotations != 1 || l.Sizes() != size {
		t.Errorf("after one Period: Rotations %d, Sizes %+v (before %+v); readings.md: a generation replaced by one of the same size", l.Stats().Rotations, l.Sizes(), size)
	}
	if got := m1.TotalAlloc - m0.TotalAlloc; !testsize.Race && (got < 3_200_000 || got > 3_300_000) {
		t.Errorf("one promotion allocated %d B; readings.md: 3.2 MB", got)
	}
	b := limit.MustNew(1000, 10, limit.WithClock(clk))
	b.Allow("k")
	clk.Advance(time.Hour)
	b.Allow("k")
	if b.Period() != 0 || b.Stats().Rotations != 0 {
		t.Errorf("Buckets: Period %v, Rotations %d; readings.md: never rotates", b.Period(), b.Stats().Rotations)
	}
}

// docs/readings.md, "Live traffic: an abuser among 1M clients", the first
// row: "1M/s (period 1 s) | 20/s | `limit` (Buckets) | 119 every run | 0"
// ("At live traffic `limit`'s default is exact: the abuser got its 119 in
// every run and no client was denied"). Replayed as bench/limit's
// BenchmarkAbuser does it (2^20 clients, one request each per second,
// evenly spread; the abuser at 20/s), on a fake clock, for 3 simulated
// seconds instead of 10 (a client's debt lasts 100 ms: the table holds its
// steady state after the first); the abuser must get what its bucket alone
// gives on the same times (119 over 10 s: TestAudit151ReadingsAbuserIdeal
// in tests/limit). About 3M decisions: skipped with -short.
func TestAudit151ReadingsLiveTrafficBuckets(t *testing.T) {
	if testing.Short() || testsize.Small() {
		t.Skip("3M decisions")
	}
	const clients, seconds = 1 << 20, 3
	clk := limittest.NewFakeClock()
	base := time.Unix(1e9, 0)
	clk.SetTime(base)
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(151))
	alone := limit.MustNew(10, 20, limit.WithClock(clk))
	if l.Engine() != limit.Buckets {
		t.Fatalf("New(10, 20) on %v", l.Engine())
	}
	step := time.Second / clients
	var next time.Duration
	admits, ideal, denied, requests := 0, 0, 0, 0
	buf := make([]byte, 0, 32)
	lastMs := int64(-1)
	for s := uint64(0); time.Duration(s)*step < seconds*time.Second; s++ {
		at := time.Duration(s) * step
		if ms := int64(at / time.Millisecond); ms != lastMs {
			lastMs = ms
			clk.SetTime(base.Add(time.Duration(ms) * time.Millisecond))
		}
		now := clk.Now()
		buf = strconv.AppendUint(append(buf[:0], "client-"...), s%clients, 10)
		requests++
		if !l.AllowN(now, unsafe.String(unsafe.SliceData(buf), len(buf)), 1) { // the limiter keeps no key
			denied++
		}
		if at >= next {
			next += time.Second / 20
			if l.AllowN(now, "abuser", 1) {
				admits++
			}
			if alone.AllowN(now, "abuser", 1) {
				ideal++
			}
		}
	}
	if admits != ideal || denied != 0 || ideal < 49 {
		t.Errorf("abuser admitted %d (alone: %d), clients denied %d of %d; readings.md: the abuser's own bucket, no client denied", admits, ideal, denied, requests)
	}
}
