package rotator_test

import (
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a93gateLaw halves a score per second. Once armed, its first call with
// dt > 0 blocks until released (a slow or preempted custom law); calls
// counts those with dt > 0 made while armed or after.
type a93gateLaw struct {
	mu      sync.Mutex
	armed   bool
	block   bool
	calls   int
	reached chan struct{}
	release chan struct{}
}

func newA93GateLaw(block bool) *a93gateLaw {
	return &a93gateLaw{block: block, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *a93gateLaw) arm() {
	g.mu.Lock()
	g.armed = true
	g.calls = 0
	g.mu.Unlock()
}

func (g *a93gateLaw) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

func (g *a93gateLaw) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	g.mu.Lock()
	hit := g.armed && g.block
	if g.armed {
		g.calls++
	}
	if hit {
		g.block = false
	}
	g.mu.Unlock()
	if hit {
		close(g.reached)
		<-g.release
	}
	return score * math.Exp2(-float64(dt)/1000)
}

// a93lockedInSweep reports whether some goroutine is parked on a
// sync.Mutex inside the sketch's horizon sweep (core maintainSlow).
func a93lockedInSweep() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "maintainSlow") {
			return true
		}
	}
	return false
}

// a93returnsOrLocks waits until done delivers (the call returned: true)
// or the call is seen parked on the sweep lock (false). No timing is
// asserted: a minute is only the failure bound of a hung test.
func a93returnsOrLocks(t *testing.T, done <-chan float64) (float64, bool) {
	t.Helper()
	limit := time.After(time.Minute)
	for {
		select {
		case v := <-done:
			return v, true
		case <-limit:
			t.Fatal("the call neither returned nor parked on the sweep lock within a minute")
		default:
		}
		if a93lockedInSweep() {
			return 0, false
		}
		runtime.Gosched()
	}
}

// a93rotator builds a rotator of n generations of period p on clk with
// law, its first rotation due p after clk's reading.
func a93rotator(t *testing.T, clk *sketchtest.FakeClock, law decay.Decay, n uint32, p time.Duration) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: 0, Hi: 100, Decay: law, Clock: clk, Seed: 93},
		Generations: n,
		Period:      p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const a93day = 24 * time.Hour

// TestAudit93LocksRotatorLongPeriodWaitsOnReBase: rotator.go
// says a Rotator "starts no goroutine and takes no lock: rotation
// happens on access", and rotator/doc.go's guarantees say "no goroutine,
// ticker or lock, ever". Rotation replaces a generation only once it has
// lived N x Period; with N x Period past 2^31 ms (N = 2, Period = 20
// days) a generation idle 2^31 ms is still live: the idle's promotion
// retires only the oldest, and the first operation on the new primary
// (born at New) re-bases every cell under the sketch's sweep lock
// (internal/core/horizon.go, maintainSlow). While that operation is
// held inside the re-base (a custom law that blocks, as a preempted
// goroutine would), a Query of another key parks on the lock. Audit 93
// found the rotator's docs promising no lock; they now state this
// exception (N x Period >= 2^31 ms), asserted here.
func TestAudit93LocksRotatorLongPeriodWaitsOnReBase(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	law := newA93GateLaw(true)
	r := a93rotator(t, clk, law, 2, 20*a93day)
	r.UpdateString("a", 50)
	r.UpdateString("b", 50)
	// One Period and 4.9 days: the promotion retires the first
	// generation only; the second, born at New and idle 2^31+10 ms,
	// becomes the primary.
	clk.Advance((1<<31 + 10) * time.Millisecond)
	law.arm()
	first := make(chan float64, 1)
	go func() { first <- r.QueryString("a") }()
	<-law.reached // the first Query is inside the primary's re-base
	second := make(chan float64, 1)
	go func() { second <- r.QueryString("b") }()
	b, returned := a93returnsOrLocks(t, second)
	if returned {
		t.Errorf("Rotator.QueryString(b) returned while another Query held the primary's re-base (N=2, Period=20 days, idle 2^31+10 ms); rotator/doc.go says operations arriving meanwhile wait where N x Period >= 2^31 ms")
	}
	close(law.release)
	if a := <-first; a != 0 {
		t.Errorf("Query(a) after 2^31 ms at half-life 1 s = %v; want 0", a)
	}
	if !returned {
		b = <-second
	}
	if b != 0 {
		t.Errorf("Query(b) = %v; want 0", b)
	}
	if st := r.Stats(); st.Promotions != 1 || st.Periods != 1 {
		t.Errorf("Stats = %+v; want one promotion of one period", st)
	}
}

// TestAudit93LocksRotatorIdlePastGenerationsRebasesNothing: with N x
// Period below 2^31 ms no generation can live 2^31 ms: an idle of 2^31
// ms is k >= N periods, and the promotion replaces every generation
// before any cell is touched. The operation after the idle calls the
// law on no old cell (no re-base), and reads the fresh set.
func TestAudit93LocksRotatorIdlePastGenerationsRebasesNothing(t *testing.T) {
	for _, n := range []uint32{2, 3, 8} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000)
		law := newA93GateLaw(false)
		p := time.Duration(int64(1)<<31/int64(n)-1) * time.Millisecond // N x Period < 2^31 ms
		r := a93rotator(t, clk, law, n, p)
		r.UpdateString("a", 50)
		clk.Advance((1<<31 + 10) * time.Millisecond)
		law.arm()
		if got := r.QueryString("a"); got != 0 {
			t.Errorf("N=%d: Query(a) after an idle of N periods = %v; want 0 (every generation retired)", n, got)
		}
		r.UpdateString("b", 7)
		if got := r.QueryString("b"); got < 7 {
			t.Errorf("N=%d: Query(b) after Update(b, 7) = %v; want >= 7", n, got)
		}
		if c := law.count(); c != 0 {
			t.Errorf("N=%d: the law was applied %d times with dt > 0 after the idle; want 0 (no old cell touched)", n, c)
		}
		if st := r.Stats(); st.Promotions != 1 || st.Periods < uint64(n) {
			t.Errorf("N=%d: Stats = %+v; want one promotion of >= N periods", n, st)
		}
	}
}

// TestAudit93LocksRotatorLongestLifeBelowHorizonNeverLocks: the longest
// a generation can live is N x Period; just below 2^31 ms, the last
// operation before the deadline finds its oldest cells due for the
// periodic sweep but never past the window: while another operation is
// held inside that sweep's chunk (a blocking law), a Query of another
// key returns (the sweep is TryLock'd, never waited for).
func TestAudit93LocksRotatorLongestLifeBelowHorizonNeverLocks(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	law := newA93GateLaw(true)
	const n = 2
	pms := int64(1)<<30 - 1 // N x Period = 2^31 - 2 ms
	r := a93rotator(t, clk, law, n, time.Duration(pms)*time.Millisecond)
	r.UpdateString("a", 50)
	r.UpdateString("b", 50)
	// Just before the first deadline (no rotation yet), then the oldest
	// generation's last instant: promote once at the deadline, keep the
	// second generation (born at 1000 ms) for one more Period.
	clk.Advance(time.Duration(pms) * time.Millisecond)
	r.UpdateString("c", 1) // the promotion: generation 1 (born at New) becomes the primary
	clk.Advance(time.Duration(pms-1) * time.Millisecond)
	law.arm()
	first := make(chan float64, 1)
	go func() { first <- r.QueryString("a") }()
	<-law.reached // inside the periodic sweep's chunk, holding its TryLock
	second := make(chan float64, 1)
	go func() { second <- r.QueryString("b") }()
	if _, returned := a93returnsOrLocks(t, second); !returned {
		t.Error("Query(b) parked on the sweep lock with N x Period < 2^31 ms; want it to return")
	}
	close(law.release)
	if a := <-first; a != 0 {
		t.Errorf("Query(a) = %v; want 0", a)
	}
	if st := r.Stats(); st.Promotions != 1 {
		t.Errorf("Promotions = %d; want 1", st.Promotions)
	}
}
