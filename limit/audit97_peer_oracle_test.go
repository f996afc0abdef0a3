package limit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a97Peer is golang.org/x/time/rate's Limiter for one key, re-expressed
// in exact arithmetic at whole-millisecond times: tokens (rational) as of
// last, refilled at r tokens a ms up to the burst, and x/time/rate's
// rules for time: a t before last is counted with no elapsed time and
// moves last back to t (advance), an admitted request or reservation
// stores its t as last. It has no MaxDebt (x/time/rate queues without
// bound) and no RejectCost.
type a97Peer struct {
	r      *big.Rat // tokens per ms
	b      int
	tokens *big.Rat
	last   int64
}

func a97NewPeer(num, den int64, b int, at int64) *a97Peer {
	return &a97Peer{r: big.NewRat(num, 1000*den), b: b, tokens: big.NewRat(int64(b), 1), last: at}
}

func (p *a97Peer) clone() *a97Peer {
	c := *p
	c.tokens = new(big.Rat).Set(p.tokens)
	return &c
}

// advance is x/time/rate's advance: the tokens at t, the state unchanged.
func (p *a97Peer) advance(t int64) *big.Rat {
	last := p.last
	if t < last {
		last = t
	}
	tk := new(big.Rat).Mul(p.r, big.NewRat(t-last, 1))
	tk.Add(tk, p.tokens)
	if bb := big.NewRat(int64(p.b), 1); tk.Cmp(bb) > 0 {
		tk = bb
	}
	return tk
}

// take stores the state of an admitted request of n at t.
func (p *a97Peer) take(t int64, n int) {
	tk := p.advance(t)
	p.tokens = tk.Sub(tk, big.NewRat(int64(n), 1))
	p.last = t
}

// touch is x/time/rate's AllowN(t, 0): admitted, it stores t as last
// (backwards too) with the tokens at t.
func (p *a97Peer) touch(t int64) { p.take(t, 0) }

// fits reports whether AllowN(t, n) admits.
func (p *a97Peer) fits(t int64, n int) bool {
	return n <= p.b && p.advance(t).Cmp(big.NewRat(int64(n), 1)) >= 0
}

// waitMs is how long after t, in ms (rational), the tokens at t reach
// want, refilling at r: x/time/rate's durationFromTokens(want - tokens)
// before its truncation to the nanosecond; 0 if they already do.
func (p *a97Peer) waitMs(tk *big.Rat, want int64) *big.Rat {
	x := new(big.Rat).Sub(big.NewRat(want, 1), tk)
	if x.Sign() <= 0 {
		return new(big.Rat)
	}
	return x.Quo(x, p.r)
}

// debt is burst - tokens at t (tokens).
func (p *a97Peer) debt(t int64) *big.Rat {
	return new(big.Rat).Sub(big.NewRat(int64(p.b), 1), p.advance(t))
}

func a97Ceil(x *big.Rat) time.Duration {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > math.MaxInt64/int64(time.Millisecond) {
		return limit.InfDuration
	}
	return time.Duration(q.Int64()) * time.Millisecond
}

// decision is the Decision x/time/rate's bucket implies at t for n
// (commit: DecideN, else PeekN), in limit's whole ms rounded up.
func (p *a97Peer) decision(t int64, n int, commit bool) limit.Decision {
	return p.decisionAs(t, n, commit, true)
}

// decisionAs is decision where the bucket admits only if mayAdmit: the
// peer following a limiter that denied (its Remaining, ResetAfter and
// NextAfter then leave the request out; RetryAfter is at least 1 ms).
func (p *a97Peer) decisionAs(t int64, n int, commit, mayAdmit bool) limit.Decision {
	d := limit.Decision{Burst: p.b}
	tk := p.advance(t)
	switch {
	case n > p.b:
		d.Never, d.RetryAfter = true, limit.InfDuration
	case mayAdmit && tk.Cmp(big.NewRat(int64(n), 1)) >= 0:
		d.Allowed = true
		tk.Sub(tk, big.NewRat(int64(n), 1))
		if commit {
			p.tokens, p.last = new(big.Rat).Set(tk), t
		}
	default:
		d.RetryAfter = max(a97Ceil(p.waitMs(tk, int64(n))), time.Millisecond)
	}
	fl := new(big.Int).Div(tk.Num(), tk.Denom()).Int64()
	d.Remaining = int(max(fl, 0))
	if tk.Cmp(big.NewRat(int64(p.b), 1)) < 0 {
		d.ResetAfter = a97Ceil(p.waitMs(tk, int64(p.b)))
		d.NextAfter = a97Ceil(p.waitMs(tk, int64(d.Remaining+1)))
	}
	return d
}

// a97Cfg is a limiter under test and its rate as a fraction.
type a97Cfg struct {
	num, den int64
	b        int
	eng      limit.Engine
	md, rc   float64
	opt      bool // WithStrict(false)
}

func (c a97Cfg) String() string {
	return fmt.Sprintf("%d/%ds-b%d-%v-md%v-rc%v-optimistic=%v", c.num, c.den, c.b, c.eng, c.md, c.rc, c.opt)
}

func (c a97Cfg) build(clk *limittest.FakeClock) (*limit.Limiter, error) {
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(97), limit.WithEngine(c.eng), limit.WithStrict(!c.opt)}
	if c.eng == limit.CountMin {
		opts = append(opts, limit.WithSize(2, 512))
	} else {
		opts = append(opts, limit.WithCapacity(64, 0.01))
	}
	if c.md != 0 {
		opts = append(opts, limit.WithMaxDebt(c.md))
	}
	if c.rc != 0 {
		opts = append(opts, limit.WithRejectCost(c.rc))
	}
	return limit.New(limit.Limit(float64(c.num)/float64(c.den)), c.b, opts...)
}

// a97Base is 2100-01-01 in Unix ms: a fixed time, far from 0 and after
// any real clock, so that a context deadline on the fake clock's scale
// has not passed in real time.
var a97Base = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// a97Idle draws a step of the clock: none, a few ms, about a token, about
// the burst, and long idles (hours, days, around 2^31 and 2^32 ms and
// around multiples of 2^16 ms, where 16- and 32-bit stamps wrap, and
// decades).
func a97Idle(rng *rand.Rand, tokMs int64, b int) int64 {
	switch x := rng.IntN(100); {
	case x < 20:
		return 0
	case x < 45:
		return rng.Int64N(4)
	case x < 70:
		return rng.Int64N(2*tokMs + 2)
	case x < 88:
		return rng.Int64N(int64(b)*tokMs + 2)
	case x < 90:
		return rng.Int64N(3 * 86_400_000)
	case x < 91:
		return 1<<40 + rng.Int64N(1<<20) // 35 years
	case x < 94:
		return 1<<31 + rng.Int64N(5) - 2
	case x < 96:
		return 1<<32 + rng.Int64N(5) - 2
	default:
		return int64(1+rng.IntN(4))<<16 + rng.Int64N(3) - 1
	}
}

// a97Configs returns the rates the walks run: token of a whole number of
// ms, a fraction of one, several seconds, a minute, an hour's share, and
// rates that are not short fractions; each on both engines where New
// takes it, and under Auto in optimistic mode (WithStrict(false)).
func a97Configs() []a97Cfg {
	type rb struct {
		num, den int64
		b        int
		md       float64
	}
	var out []a97Cfg
	for _, x := range []rb{
		{10, 1, 20, 0}, {1000, 1, 1000, 0}, {1, 3, 3, 0}, {1, 1, 30, 0}, {7000, 13, 20, 0},
		{3, 10, 5, 12}, {1, 60, 139, 0}, {1000, 3600, 100, 0}, {2000, 3, 7, 0}, {50, 7, 4, 9.5},
		{7, 1, 1, 1}, {1, 86400, 2, 0}, {5001, 1, 50, 0}, {13, 1, 3, 0},
		{1, 60, 4096, 0}, {1, 86400, 30, 0}, {5001, 1, 4000, 0}, {1, 7, 3000, 0},
		{1_000_000_000, 1, 1, 0}, {1_000_000, 1, 1000, 0}, {123_456_789, 1000, 7, 0}, {10, 13, 1, 0},
		{1_000_000_000_000_000, 1, 3, 0}, {1_000_000_000_000_000_000, 1, 1, 0}, {999_999_937, 1, 2, 0},
	} {
		for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
			out = append(out, a97Cfg{num: x.num, den: x.den, b: x.b, eng: eng, md: x.md})
		}
		// Optimistic mode, one goroutine: the same decisions.
		out = append(out, a97Cfg{num: x.num, den: x.den, b: x.b, eng: limit.Auto, md: x.md, opt: true})
	}
	return out
}

// TestAudit97PeerWalkExact: "For a key alone in its cells, the limiter is
// the exact token bucket at millisecond resolution: every decision, and
// every RetryAfter, ResetAfter, NextAfter and Remaining, is that of the
// rational bucket" when Exact (limit/doc.go:82-86), and the parity table
// (docs/readings.md:567-571): AllowN "admitted iff debt + n <= burst at
// t", ReserveN "debits n now; DelayFrom(t) is when debt drains back
// within the burst", not OK "beyond MaxDebt", TokensAt "burst - debt,
// fractional, negative while reservations queue", a Cancel with no write
// since "reads as if the reservation had never been taken". Random walks
// (fixed seeds) of one key with monotone times (t between the limiter's
// last time and the clock's reading), idles up to days and past 2^31 and
// 2^32 ms, rates from 1/day to 1e18/s, against a97Peer (x/time/rate's
// bucket in big.Rat): every Exact limiter on both engines, strict and
// optimistic (one goroutine), matches it to the millisecond (its
// durations are the peer's rounded up to the ms; the peer's admissions
// are limit's), and every inexact one never admits what the peer denies
// nor answers a shorter duration.
func TestAudit97PeerWalkExact(t *testing.T) {
	testsize.Serial(t)
	var built, exactN, inexactN, longIdle int
	for ci, cfg := range a97Configs() {
		clk := limittest.NewFakeClock()
		clk.Set(a97Base)
		l, err := cfg.build(clk)
		if err != nil {
			continue // Buckets cannot hold it
		}
		built++
		ex := l.Exact()
		e, li := a97WalkExact(t, cfg, l, clk, uint64(ci), testsize.Pick(500, 150))
		longIdle += li
		if ex {
			exactN += e
		} else {
			inexactN += e
		}
	}
	if built < 20 || exactN < testsize.Pick(5000, 1500) || inexactN < testsize.Pick(300, 100) || longIdle < testsize.Pick(50, 20) {
		t.Fatalf("too little checked: %d limiters, %d exact and %d inexact steps, %d long idles", built, exactN, inexactN, longIdle)
	}
	t.Logf("%d limiters, %d exact and %d inexact steps, %d idles past 2^31 ms", built, exactN, inexactN, longIdle)
}

func a97WalkExact(t *testing.T, cfg a97Cfg, l *limit.Limiter, clk *limittest.FakeClock, seed uint64, steps int) (checked, longIdle int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 97))
	now := clk.NowMillis()
	hw := now // the latest time the limiter used
	p := a97NewPeer(cfg.num, cfg.den, cfg.b, now)
	exact := l.Exact()
	maxDebt := new(big.Rat).SetFloat64(l.MaxDebt())
	tokMs := max(1000*cfg.den/cfg.num, 1)
	const key = "k"
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log
		if len(tail) > 12 {
			tail = tail[len(tail)-12:]
		}
		t.Fatalf("%v (Exact %v): "+format+"\nlast ops:\n%q", append([]any{cfg, exact}, append(args, tail)...)...)
	}
	for step := 0; step < steps; step++ {
		dt := a97Idle(rng, tokMs, cfg.b)
		if dt >= 1<<31 {
			longIdle++
		}
		now += dt
		clk.Set(now)
		// t anywhere from the limiter's last time to the clock's reading.
		at := hw + rng.Int64N(now-hw+1)
		tm := time.UnixMilli(at)
		n := 1 + rng.IntN(cfg.b+1)
		if rng.IntN(3) == 0 {
			n = 1
		}
		op := rng.IntN(10)
		log = append(log, fmt.Sprintf("now=+%d t=+%d op=%d n=%d peer debt %s", now-a97Base, at-a97Base, op, n, p.debt(at).FloatString(4)))
		checked++
		switch op {
		case 0, 1, 2, 3: // DecideN, PeekN
			commit := op != 3
			before := p.clone()
			var got limit.Decision
			if commit {
				got = l.DecideN(tm, key, n)
			} else {
				got = l.PeekN(tm, key, n)
			}
			got.Limit, got.Policy = 0, ""
			want := p.decision(at, n, commit)
			if exact {
				if got != want {
					fail("DecideN/PeekN(%d) (commit %v):\n got %+v\nwant %+v", n, commit, got, want)
				}
				break
			}
			if got.Allowed && !want.Allowed {
				fail("inexact DecideN/PeekN(%d) admitted, the peer denies:\n got %+v\nwant %+v", n, got, want)
			}
			if !got.Allowed && want.Allowed {
				p = before // the peer follows the limiter's denial
				want = p.decisionAs(at, n, commit, false)
			}
			if got.Never != want.Never || got.RetryAfter < want.RetryAfter || got.Remaining > want.Remaining || got.ResetAfter < want.ResetAfter {
				fail("inexact DecideN/PeekN(%d) ahead of the peer:\n got %+v\nwant %+v", n, got, want)
			}
		case 4, 5: // AllowN
			ok := l.AllowN(tm, key, n)
			want := p.fits(at, n)
			if exact && ok != want || ok && !want {
				fail("AllowN(%d) = %v, the peer %v", n, ok, want)
			}
			if ok {
				p.take(at, n)
			}
		case 6, 7: // ReserveN, then maybe Cancel at once or after a while
			before := p.clone()
			r := l.ReserveN(tm, key, n)
			tk := p.advance(at)
			after := new(big.Rat).Sub(big.NewRat(int64(cfg.b), 1), tk)
			after.Add(after, big.NewRat(int64(n), 1)) // the debt the reservation leaves
			wantOK := n <= cfg.b && after.Cmp(maxDebt) <= 0
			if exact && r.OK() != wantOK || r.OK() && !wantOK {
				fail("ReserveN(%d): OK %v, the peer within MaxDebt %v (debt after %s)", n, r.OK(), wantOK, after.FloatString(4))
			}
			if !r.OK() {
				if r.DelayFrom(tm) != limit.InfDuration {
					fail("ReserveN(%d) not OK: DelayFrom %v, want InfDuration", n, r.DelayFrom(tm))
				}
				break
			}
			wantDelay := a97Ceil(p.waitMs(tk, int64(n)))
			if got := r.DelayFrom(tm); exact && got != wantDelay || got < wantDelay {
				fail("ReserveN(%d): DelayFrom(t) %v, the peer %v", n, got, wantDelay)
			}
			p.take(at, n)
			// Cancel with nothing written since: "as if the reservation had
			// never been taken" (readings.md:571), unless it filled the key
			// to MaxDebt.
			if rng.IntN(3) == 0 && after.Cmp(maxDebt) < 0 {
				later := now + rng.Int64N(2*tokMs+1)
				clk.Set(later)
				r.Cancel()
				now, hw = later, later
				p = before
				log = append(log, fmt.Sprintf("  cancel at +%d", now-a97Base))
			}
		case 8, 9: // TokensAt
			got := l.TokensAt(tm, key)
			wf, _ := p.advance(at).Float64()
			tol := 1e-9 * math.Max(1, math.Abs(wf))
			if exact && math.Abs(got-wf) > tol || got > wf+tol {
				fail("TokensAt = %v, the peer %v", got, wf)
			}
		}
		hw = max(hw, at)
	}
	return checked, longIdle
}

// TestAudit97PeerWalkTimeJumps: the documented deviations from
// x/time/rate's handling of time only ever make the limiter stricter
// than the peer. readings.md:567: "t after the clock's reading counts as
// that reading", "A t before a time already used counts as that time,
// as x/time/rate counts it (no elapsed time), but x/time/rate then also
// moves its last back and re-credits the interval later; here time never
// runs backwards"; doc.go:174-179: durations "are never early: from t,
// or from the clock's reading when t is ahead of it, with the lag to the
// time the limiter decided at included"; RejectCost and MaxDebt only add
// debt or refuse. Random walks (fixed seeds) with the clock stepping
// back, stale t's, t's ahead of the clock, long idles and RejectCosts,
// on both engines, against a97Peer following the limiter's own outcomes
// (at min(t, clock), every call storing its t as an AllowN(t, 0) would,
// x/time/rate's rules otherwise): no admission the
// peer denies, no RetryAfter, ResetAfter or reservation delay shorter
// than the peer's, no Remaining or TokensAt above it.
func TestAudit97PeerWalkTimeJumps(t *testing.T) {
	testsize.Serial(t)
	var built, stale, ahead, back int
	for ci, cfg := range a97Configs() {
		for _, rc := range []float64{0, 1, 0.5} {
			cfg := cfg
			cfg.rc = rc
			if cfg.md != 0 && cfg.md < float64(cfg.b)+rc {
				continue
			}
			clk := limittest.NewFakeClock()
			clk.Set(a97Base)
			l, err := cfg.build(clk)
			if err != nil {
				continue
			}
			built++
			s, a, b := a97WalkJumps(t, cfg, l, clk, uint64(100*ci)+uint64(2*rc), testsize.Pick(300, 100))
			stale, ahead, back = stale+s, ahead+a, back+b
		}
	}
	if built < 50 || stale < testsize.Pick(2000, 700) || ahead < testsize.Pick(1000, 300) || back < testsize.Pick(500, 150) {
		t.Fatalf("too little checked: %d limiters, %d stale t, %d t ahead, %d clock steps back", built, stale, ahead, back)
	}
	t.Logf("%d limiters, %d stale t, %d t ahead of the clock, %d clock steps back", built, stale, ahead, back)
}

func a97WalkJumps(t *testing.T, cfg a97Cfg, l *limit.Limiter, clk *limittest.FakeClock, seed uint64, steps int) (stale, ahead, back int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9797))
	now := clk.NowMillis()
	hw := now
	p := a97NewPeer(cfg.num, cfg.den, cfg.b, now)
	tokMs := max(1000*cfg.den/cfg.num, 1)
	const key = "k"
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log
		if len(tail) > 12 {
			tail = tail[len(tail)-12:]
		}
		t.Fatalf("%v (Exact %v): "+format+"\nlast ops:\n%q", append([]any{cfg, l.Exact()}, append(args, tail)...)...)
	}
	for step := 0; step < steps; step++ {
		if rng.IntN(8) == 0 {
			now -= 1 + rng.Int64N(int64(cfg.b)*tokMs+2) // the clock steps back
			back++
		} else {
			now += a97Idle(rng, tokMs, cfg.b)
		}
		clk.Set(now)
		at := now
		switch x := rng.IntN(10); {
		case x < 4:
			at = now - rng.Int64N(int64(cfg.b)*tokMs+2)
		case x < 6:
			at = now + 1 + rng.Int64N(int64(cfg.b)*tokMs+2)
			ahead++
		}
		if at < hw {
			stale++
		}
		tp := min(at, now) // the peer's t: a t ahead counts as the reading (the one deviation)
		// Every call of the limiter uses its t, a read or a denial too
		// (TestAudit97PeerFindingStaleTAfterRead): the peer stores it as
		// its last by an AllowN(t, 0), x/time/rate's own rules for a t
		// before last included.
		p.touch(tp)
		tm := time.UnixMilli(at)
		n := 1 + rng.IntN(cfg.b+1)
		if rng.IntN(3) == 0 {
			n = 1
		}
		op := rng.IntN(8)
		log = append(log, fmt.Sprintf("now=+%d hw=+%d t=+%d op=%d n=%d peer tokens %s last +%d", now-a97Base, hw-a97Base, at-a97Base, op, n, p.advance(tp).FloatString(4), p.last-a97Base))
		switch op {
		case 0, 1, 2: // DecideN, PeekN
			commit := op != 2
			before := p.clone()
			var got limit.Decision
			if commit {
				got = l.DecideN(tm, key, n)
			} else {
				got = l.PeekN(tm, key, n)
			}
			want := p.decision(tp, n, commit)
			if got.Allowed && !want.Allowed {
				fail("DecideN/PeekN(%d) (commit %v) admitted, the peer denies:\n got %+v\nwant %+v", n, commit, got, want)
			}
			if !got.Allowed && want.Allowed {
				p = before // the peer follows the limiter's denial
				want = p.decisionAs(tp, n, commit, false)
			}
			if got.Never != want.Never || got.RetryAfter < want.RetryAfter || got.Remaining > want.Remaining || got.ResetAfter < want.ResetAfter {
				fail("DecideN/PeekN(%d) (commit %v) ahead of the peer:\n got %+v\nwant %+v", n, commit, got, want)
			}
		case 3, 4: // AllowN
			ok := l.AllowN(tm, key, n)
			if ok && !p.fits(tp, n) {
				fail("AllowN(%d) admitted, the peer denies", n)
			}
			if ok {
				p.take(tp, n)
			}
		case 5, 6: // ReserveN, maybe Cancel
			before := p.clone()
			r := l.ReserveN(tm, key, n)
			if !r.OK() {
				break
			}
			if n > cfg.b {
				fail("ReserveN(%d) above the burst OK", n)
			}
			tk := p.advance(tp)
			want := a97Ceil(p.waitMs(tk, int64(n)))
			if got := r.DelayFrom(time.UnixMilli(tp)); got < want {
				fail("ReserveN(%d): DelayFrom(t) %v, the peer %v", n, got, want)
			}
			p.take(tp, n)
			if rng.IntN(3) == 0 {
				r.Cancel() // given back or not, the peer's state before is at most the key's
				p = before
			}
		case 7: // TokensAt
			got := l.TokensAt(tm, key)
			wf, _ := p.advance(tp).Float64()
			if got > wf+1e-9*math.Max(1, math.Abs(wf)) {
				fail("TokensAt = %v, the peer %v", got, wf)
			}
		}
		hw = max(hw, min(at, now))
	}
	return stale, ahead, back
}
