package limit_test

// Audit 84: what a Decision means, against an exact oracle. One random,
// seeded sequence mixes every operation a key can see on an exact
// limiter: DecideN, PeekN, AllowN, ReserveN (with Cancel later, while
// nothing else wrote the key), TokensAt, WaitN (with and without a
// deadline, returning at once or after the fake clock is moved),
// retries at RetryAfter and 1 ms before it, SetLimit and SetBurst, exact
// Tiers sharing the keys, RejectCost, stale and future t, and a clock
// that steps forward (ms to years) and back. The oracle is the rational
// bucket in time form (docs/design.md, section 9): a key's debt is a
// big.Rat of milliseconds to drain; a policy (r, b) costs 1000/r ms a
// token against a burst of 1000 b / r ms; the limiter's time is the
// high-water mark of min(t, clock) over the calls that read time.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// audit84exactCtx is a context whose Deadline is on the fake clock's
// scale (context.WithDeadline would compare it with the wall clock and
// be done at once).
type audit84exactCtx struct {
	context.Context
	dl time.Time
}

func (c audit84exactCtx) Deadline() (time.Time, bool) { return c.dl, true }

// audit84exactTarget is what a Limiter and a Tier share.
type audit84exactTarget interface {
	DecideN(time.Time, string, int) limit.Decision
	PeekN(time.Time, string, int) limit.Decision
	AllowN(time.Time, string, int) bool
	ReserveN(time.Time, string, int) *limit.Reservation
	TokensAt(time.Time, string) float64
	WaitN(context.Context, string, int) error
}

type audit84exactPol struct {
	tg    audit84exactTarget
	name  string
	lim   limit.Limit
	burst int64
	tok   *big.Rat // ms per token
}

func (p *audit84exactPol) cap() *big.Rat { return new(big.Rat).Mul(p.tok, big.NewRat(p.burst, 1)) }
func (p *audit84exactPol) cost(n int) *big.Rat {
	return new(big.Rat).Mul(p.tok, big.NewRat(int64(n), 1))
}

type audit84exactKey struct {
	d      *big.Rat // ms to drain, as of at
	at     int64
	writes int
}

type audit84exactRes struct {
	r      *limit.Reservation
	key    string
	prevD  *big.Rat
	prevAt int64
	writes int
	full   bool // filled the key to MaxDebt: never given back
	t0     int64
}

type audit84exactModel struct {
	hw   int64
	mx   *big.Rat // MaxDebt in ms
	rc   int64    // RejectCost in a policy's tokens
	keys map[string]*audit84exactKey
}

func audit84exactCeil(x *big.Rat) int64 {
	q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func audit84exactFloor(x *big.Rat) int64 {
	q, _ := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	return q.Int64()
}

func (m *audit84exactModel) observe(t, c int64) {
	m.hw = max(m.hw, min(t, c))
}

// val is key's debt at the model's time.
func (m *audit84exactModel) val(key string) *big.Rat {
	k := m.keys[key]
	v := new(big.Rat).Sub(k.d, big.NewRat(m.hw-k.at, 1))
	if v.Sign() < 0 {
		v.SetInt64(0)
	}
	return v
}

func (m *audit84exactModel) set(key string, v *big.Rat) {
	k := m.keys[key]
	k.d, k.at = v, m.hw
	k.writes++
}

func audit84exactMs(x int64) time.Duration {
	if x < 0 {
		x = 0
	}
	return time.Duration(x) * time.Millisecond
}

// fill is Remaining, ResetAfter and NextAfter for a debt v under p,
// durations with gap added.
func (m *audit84exactModel) fill(p *audit84exactPol, v *big.Rat, gap int64, d *limit.Decision) {
	room := new(big.Rat).Sub(p.cap(), v)
	rem := audit84exactFloor(new(big.Rat).Quo(room, p.tok))
	d.Remaining = int(max(rem, 0))
	d.ResetAfter, d.NextAfter = 0, 0
	if v.Sign() > 0 {
		d.ResetAfter = audit84exactMs(gap + audit84exactCeil(v))
		need := new(big.Rat).Add(v, p.cost(d.Remaining+1))
		need.Sub(need, p.cap())
		d.NextAfter = audit84exactMs(gap + max(audit84exactCeil(need), 0))
	}
}

// decide is the oracle's DecideN (commit) or PeekN.
func (m *audit84exactModel) decide(p *audit84exactPol, key string, n int, gap int64, commit bool) limit.Decision {
	want := limit.Decision{Limit: p.lim, Burst: int(p.burst), Policy: p.name}
	v := m.val(key)
	reject := func() {
		if commit && m.rc > 0 {
			v.Add(v, p.cost(int(m.rc)))
			if v.Cmp(m.mx) > 0 {
				v.Set(m.mx)
			}
			m.set(key, new(big.Rat).Set(v))
		}
	}
	if int64(n) > p.burst {
		want.Never, want.RetryAfter = true, limit.InfDuration
		reject()
		m.fill(p, v, gap, &want)
		return want
	}
	after := new(big.Rat).Add(v, p.cost(n))
	if after.Cmp(p.cap()) <= 0 {
		want.Allowed = true
		if commit {
			m.set(key, new(big.Rat).Set(after))
		}
		m.fill(p, after, gap, &want)
		return want
	}
	reject()
	ex := new(big.Rat).Add(v, p.cost(n))
	ex.Sub(ex, p.cap())
	want.RetryAfter = audit84exactMs(gap + max(audit84exactCeil(ex), 1))
	m.fill(p, v, gap, &want)
	return want
}

type audit84exactCfg struct {
	name    string
	lim     limit.Limit
	r       *big.Rat // the limit's exact value, per second
	burst   int
	maxDebt float64
	eng     limit.Engine
	rc      int64
	strict  bool
	// rates (as multiples of the limit) tried for tiers and SetLimit
	mults [][2]int64
}

func audit84exactCfgs() []audit84exactCfg {
	mults := [][2]int64{{1, 2}, {1, 4}, {2, 1}, {1, 3}, {3, 2}, {1, 1}}
	return []audit84exactCfg{
		{"10/s", 10, big.NewRat(10, 1), 20, 80, limit.Buckets, 0, true, mults},
		{"10/s-cm", 10, big.NewRat(10, 1), 20, 80, limit.CountMin, 1, true, mults},
		{"every7ms", limit.Every(7 * time.Millisecond), big.NewRat(1000, 7), 5, 40, limit.Auto, 0, false, mults},
		{"every7ms-cm", limit.Every(7 * time.Millisecond), big.NewRat(1000, 7), 5, 40, limit.CountMin, 2, true, mults},
		{"3/7", limit.Limit(3) / limit.Limit(7), big.NewRat(3, 7), 4, 16, limit.CountMin, 0, true, mults},
		{"1000/s", 1000, big.NewRat(1000, 1), 50, 400, limit.Buckets, 1, true, mults},
		{"1/s", 1, big.NewRat(1, 1), 3, 12, limit.Auto, 0, true, mults},
		{"every3s", limit.Every(3 * time.Second), big.NewRat(1, 3), 2, 8, limit.CountMin, 1, false, mults},
		{"250/s", 250, big.NewRat(250, 1), 20, 80, limit.Buckets, 2, false, mults},
	}
}

func TestAudit84ExactMixedOracle(t *testing.T) {
	for ci, c := range audit84exactCfgs() {
		for seed := range uint64(testsize.Pick(3, 1)) {
			t.Run(fmt.Sprintf("%s/%d", c.name, seed), func(t *testing.T) {
				audit84exactRun(t, c, seed+uint64(ci)*100, testsize.Pick(600, 250))
			})
		}
	}
}

func audit84exactRun(t *testing.T, c audit84exactCfg, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 84))
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000 + int64(rng.IntN(1<<30)))
	opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(c.eng),
		limit.WithMaxDebt(c.maxDebt), limit.WithStrict(c.strict), limit.WithName("own"),
		limit.WithCapacity(10_000, 0.001)} // small engines: 3 keys stay alone (fixed seeds)
	if c.rc > 0 {
		opts = append(opts, limit.WithRejectCost(float64(c.rc)))
	}
	if c.eng == limit.CountMin {
		// No rotation amnesty within the run (documented, "Rotation and
		// amnesty"): a Period far longer than the run's activity.
		opts = append(opts, limit.WithPeriod(1000*time.Hour))
	}
	l, err := limit.New(c.lim, c.burst, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exact() {
		t.Fatalf("%s: not exact", c.name)
	}
	if c.eng != limit.Auto && l.Engine() != c.eng {
		t.Fatalf("engine %v", l.Engine())
	}
	tokOf := func(r *big.Rat) *big.Rat { return new(big.Rat).Quo(big.NewRat(1000, 1), r) }
	m := &audit84exactModel{hw: clk.NowMillis(), rc: c.rc, keys: map[string]*audit84exactKey{},
		mx: new(big.Rat).Mul(new(big.Rat).SetFloat64(c.maxDebt), tokOf(c.r))}
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		m.keys[k] = &audit84exactKey{d: new(big.Rat), at: m.hw}
	}
	own := &audit84exactPol{tg: l, name: "own", lim: c.lim, burst: int64(c.burst), tok: tokOf(c.r)}
	pols := []*audit84exactPol{own}
	for i, mu := range c.mults {
		r := new(big.Rat).Mul(c.r, big.NewRat(mu[0], mu[1]))
		rf, _ := r.Float64()
		b := 1 + rng.IntN(c.burst+2)
		tr, err := l.Tier(fmt.Sprintf("tier%d", i), limit.Limit(rf), b)
		var mde *limit.MaxDebtError
		capMs := new(big.Rat).Mul(tokOf(r), big.NewRat(int64(b), 1))
		if err != nil {
			if !errors.As(err, &mde) || capMs.Cmp(m.mx) <= 0 {
				t.Fatalf("Tier(%v, %d): %v (cap %v ms, MaxDebt %v ms)", rf, b, err, capMs.FloatString(3), m.mx.FloatString(3))
			}
			continue
		}
		if capMs.Cmp(m.mx) > 0 {
			t.Fatalf("Tier(%v, %d) accepted a burst of %v ms beyond MaxDebt %v ms", rf, b, capMs.FloatString(3), m.mx.FloatString(3))
		}
		if !tr.Exact() {
			continue
		}
		pols = append(pols, &audit84exactPol{tg: tr, name: tr.Name(), lim: limit.Limit(rf), burst: int64(b), tok: tokOf(r)})
	}
	var pending []*audit84exactRes
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		for _, s := range trace[max(len(trace)-15, 0):] {
			t.Log(s)
		}
		t.Fatalf(format, args...)
	}
	ms := func(x int64) time.Time { return time.UnixMilli(x) }
	for step := range steps {
		// Move the clock.
		switch x := rng.IntN(20); {
		case x < 12:
			tokMs, _ := own.tok.Float64()
			clk.Set(clk.NowMillis() + int64(rng.Float64()*tokMs*1.5))
		case x < 14:
			clk.Set(clk.NowMillis() - int64(1+rng.IntN(2000)))
		case x == 14:
			clk.Set(clk.NowMillis() + []int64{3_600_000, 86_400_000, 1 << 31, 1<<32 + 17, 3 * 365 * 86_400_000}[rng.IntN(5)])
		case x == 15 && m.hw > clk.NowMillis():
			clk.Set(m.hw) // catch up with the limiter's time
		}
		now := clk.NowMillis()
		var at int64
		switch rng.IntN(5) {
		case 0, 1:
			at = now
		case 2:
			at = now - int64(rng.IntN(500))
		case 3:
			at = now + int64(rng.IntN(500))
		default:
			at = m.hw - int64(rng.IntN(3))
		}
		p := pols[rng.IntN(len(pols))]
		key := keys[rng.IntN(len(keys))]
		n := 1 + rng.IntN(int(p.burst)+1)
		if rng.IntN(40) == 0 {
			n = 1 << 40 // huge n
		}
		op := rng.IntN(12)
		where := fmt.Sprintf("step %d op %d: clock %d t %d hw %d %s key %s n %d debt %s", step, op, now, at, m.hw, p.name, key, n, m.val(key).FloatString(3))
		trace = append(trace, where)
		switch op {
		case 0, 1, 2: // DecideN / PeekN
			commit := op != 2
			m.observe(at, now)
			gap := max(m.hw-min(at, now), 0)
			var d limit.Decision
			if commit {
				d = p.tg.DecideN(ms(at), key, n)
			} else {
				d = p.tg.PeekN(ms(at), key, n)
			}
			want := m.decide(p, key, n, gap, commit)
			if d != want {
				fail("%s:\n got  %+v\n want %+v", where, d, want)
			}
			if d.Allowed || d.Never || rng.IntN(2) == 0 {
				break
			}
			// Retry 1 ms before RetryAfter (Peek), then at it (AllowN),
			// on a clock put there: from t, or the clock's reading when t
			// is ahead of it.
			base := min(at, now)
			early := base + d.RetryAfter.Milliseconds() - 1
			clk.Set(early)
			m.observe(early, early)
			trace = append(trace, fmt.Sprintf("  retry: early at %d (hw %d)", early, m.hw))
			if early >= m.hw {
				if e := p.tg.PeekN(ms(early), key, n); e.Allowed {
					fail("%s: admitted 1 ms before RetryAfter %v", where, d.RetryAfter)
				}
			}
			clk.Set(early + 1)
			m.observe(early+1, early+1)
			if want := m.decide(p, key, n, 0, true); !want.Allowed {
				fail("%s: oracle denies at RetryAfter %v", where, d.RetryAfter)
			}
			if !p.tg.AllowN(ms(early+1), key, n) {
				fail("%s: denied at RetryAfter %v", where, d.RetryAfter)
			}
		case 3: // AllowN
			if int64(n) <= p.burst || m.rc > 0 {
				m.observe(at, now)
			}
			got := p.tg.AllowN(ms(at), key, n)
			want := m.decide(p, key, n, 0, true)
			if got != want.Allowed {
				fail("%s: AllowN %v, want %v", where, got, want.Allowed)
			}
		case 4, 5: // ReserveN
			if int64(n) <= p.burst {
				m.observe(at, now)
			}
			r := p.tg.ReserveN(ms(at), key, n)
			v := m.val(key)
			after := new(big.Rat).Add(v, p.cost(n))
			ok := int64(n) <= p.burst && after.Cmp(m.mx) <= 0
			if r.OK() != ok {
				fail("%s: ReserveN OK %v, want %v", where, r.OK(), ok)
			}
			if !ok {
				if r.DelayFrom(ms(at)) != limit.InfDuration {
					fail("%s: refused reservation DelayFrom %v", where, r.DelayFrom(ms(at)))
				}
				break
			}
			k := m.keys[key]
			rec := &audit84exactRes{r: r, key: key, prevD: v, prevAt: m.hw, full: after.Cmp(m.mx) == 0, t0: m.hw}
			m.set(key, after)
			rec.writes = k.writes
			ex := new(big.Rat).Sub(after, p.cap())
			act := m.hw + max(audit84exactCeil(ex), 0)
			if got, want := r.DelayFrom(ms(at)), audit84exactMs(act-at); got != want {
				fail("%s: DelayFrom(t) %v, want %v", where, got, want)
			}
			if got, want := r.DelayFrom(ms(now)), audit84exactMs(act-now); got != want {
				fail("%s: DelayFrom(clock) %v, want %v", where, got, want)
			}
			pending = append(pending, rec)
		case 6: // Cancel a pending reservation
			if len(pending) == 0 {
				break
			}
			i := rng.IntN(len(pending))
			rec := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			k := m.keys[rec.key]
			if k.writes != rec.writes {
				break // something wrote the key since: Cancel's outcome is not exact
			}
			trace = append(trace, fmt.Sprintf("  cancel reservation of %s taken at %d (full %v)", rec.key, rec.t0, rec.full))
			rec.r.Cancel()
			gone := rec.full || (l.Engine() == limit.CountMin && m.hw-rec.t0 >= 1<<31)
			if !gone {
				k.d, k.at = rec.prevD, rec.prevAt
			}
			k.writes++
			rec.r.Cancel() // idempotent
		case 7: // TokensAt
			m.observe(at, now)
			got := p.tg.TokensAt(ms(at), key)
			w := new(big.Rat).Sub(big.NewRat(p.burst, 1), new(big.Rat).Quo(m.val(key), p.tok))
			wf, _ := w.Float64()
			if d := got - wf; d > 1e-9 || d < -1e-9 {
				fail("%s: TokensAt %v, want %v", where, got, wf)
			}
		case 8, 9: // WaitN
			audit84exactWait(t, rng, clk, m, p, key, n, where, fail)
		case 10: // SetLimit / SetBurst
			if rng.IntN(2) == 0 {
				mu := c.mults[rng.IntN(len(c.mults))]
				r := new(big.Rat).Mul(c.r, big.NewRat(mu[0], mu[1]))
				rf, _ := r.Float64()
				prev := l.Limit()
				err := l.SetLimit(limit.Limit(rf))
				capMs := new(big.Rat).Mul(tokOf(r), big.NewRat(own.burst, 1))
				if (err != nil) != (capMs.Cmp(m.mx) > 0) {
					fail("%s: SetLimit(%v): %v (cap %v ms, MaxDebt %v ms)", where, rf, err, capMs.FloatString(3), m.mx.FloatString(3))
				}
				if err != nil {
					break
				}
				if !l.Exact() {
					if err := l.SetLimit(prev); err != nil || !l.Exact() {
						fail("SetLimit back to %v: %v", prev, err)
					}
					break
				}
				own.lim, own.tok = limit.Limit(rf), tokOf(r)
				trace = append(trace, fmt.Sprintf("  SetLimit(%v)", rf))
			} else {
				b := 1 + rng.IntN(2*c.burst)
				err := l.SetBurst(b)
				capMs := new(big.Rat).Mul(own.tok, big.NewRat(int64(b), 1))
				if (err != nil) != (capMs.Cmp(m.mx) > 0) {
					fail("%s: SetBurst(%d): %v", where, b, err)
				}
				if err == nil {
					own.burst = int64(b)
					trace = append(trace, fmt.Sprintf("  SetBurst(%d)", b))
				}
			}
		case 11: // the short forms: Decide at the clock's reading
			if p != own {
				break
			}
			m.observe(now, now)
			gap := max(m.hw-now, 0)
			d := l.Decide(key)
			want := m.decide(p, key, 1, gap, true)
			if d != want {
				fail("%s: Decide:\n got  %+v\n want %+v", where, d, want)
			}
		}
	}
}

// audit84exactWait runs one WaitN under p and checks it against the
// oracle: an error before waiting debits nothing; a wait returns nil when
// the clock reaches the act time and not 1 ms before; a wait whose
// context is cancelled gives the reservation back.
func audit84exactWait(t *testing.T, rng *rand.Rand, clk *limittest.FakeClock, m *audit84exactModel,
	p *audit84exactPol, key string, n int, where string, fail func(string, ...any)) {
	t.Helper()
	now := clk.NowMillis()
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ctx context.Context = base
	hasDL := rng.IntN(2) == 0
	var dl int64
	if hasDL {
		dl = now + int64(rng.IntN(3000)) - 200
		ctx = audit84exactCtx{Context: base, dl: time.UnixMilli(dl)}
	}
	// The oracle.
	var wantErr error
	var act int64
	var after *big.Rat
	switch {
	case int64(n) > p.burst:
		wantErr = limit.ErrAboveBurst
	default:
		m.observe(now, now) // WaitN reads the clock
		capMs := m.mx
		why := limit.ErrMaxDebt
		if hasDL {
			switch {
			case dl < now, dl < m.hw:
				wantErr = limit.ErrPastDeadline
			default:
				c := new(big.Rat).Add(p.cap(), big.NewRat(dl-m.hw, 1))
				if c.Cmp(capMs) < 0 {
					capMs, why = c, limit.ErrPastDeadline
				}
			}
		}
		if wantErr != nil {
			break
		}
		after = new(big.Rat).Add(m.val(key), p.cost(n))
		if after.Cmp(capMs) > 0 {
			wantErr = why
			break
		}
		ex := new(big.Rat).Sub(after, p.cap())
		act = m.hw + max(audit84exactCeil(ex), 0)
	}
	done := make(chan error, 1)
	go func() { done <- p.tg.WaitN(ctx, key, n) }()
	// Wait for it to return or to set its timer.
	deadline := time.Now().Add(10 * time.Second)
	var err error
	returned := false
	for !returned && clk.Timers() == 0 {
		select {
		case err = <-done:
			returned = true
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				fail("%s: WaitN neither returned nor waited", where)
			}
		}
	}
	if wantErr != nil {
		if !returned {
			cancel()
			<-done
			fail("%s: WaitN waits, want %v", where, wantErr)
		}
		if !errors.Is(err, wantErr) {
			fail("%s: WaitN %v, want %v (act %d)", where, err, wantErr, act)
		}
		if errors.Is(wantErr, limit.ErrPastDeadline) && !errors.Is(err, context.DeadlineExceeded) {
			fail("%s: ErrPastDeadline does not match context.DeadlineExceeded", where)
		}
		return
	}
	// Admitted: debited now.
	k := m.keys[key]
	prevD, prevAt := m.val(key), m.hw
	m.set(key, after)
	writes := k.writes
	if act <= now {
		if !returned {
			cancel()
			<-done
			fail("%s: WaitN waits, want nil at once (act %d, clock %d)", where, act, now)
		}
		if err != nil {
			fail("%s: WaitN %v, want nil", where, err)
		}
		return
	}
	if returned {
		fail("%s: WaitN returned %v at once, want a wait until %d (clock %d)", where, err, act, now)
	}
	if rng.IntN(3) == 0 {
		// The context ends during the wait: the reservation is given back
		// (nothing else wrote the key), unless it filled the key to MaxDebt.
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			fail("%s: cancelled WaitN returned %v", where, err)
		}
		if k.writes == writes && after.Cmp(m.mx) != 0 {
			k.d, k.at = prevD, prevAt
			k.writes++
		}
		return
	}
	// 1 ms before the act time the timer has not fired.
	clk.Set(act - 1)
	select {
	case err := <-done:
		fail("%s: WaitN returned %v at %d, 1 ms before its act time %d", where, err, act-1, act)
	default:
	}
	if clk.Timers() == 0 {
		// The timer fired (a clock at act-1 ms): give it a moment to
		// return, which would be early.
		select {
		case err := <-done:
			fail("%s: WaitN returned %v at %d, 1 ms before its act time %d", where, err, act-1, act)
		case <-time.After(50 * time.Millisecond):
		}
	}
	clk.Set(act)
	select {
	case err := <-done:
		if err != nil {
			fail("%s: WaitN %v at its act time", where, err)
		}
	case <-time.After(10 * time.Second):
		fail("%s: WaitN did not return at its act time %d", where, act)
	}
}
