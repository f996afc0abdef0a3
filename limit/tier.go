package limit

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/internal/units"

	"github.com/lfgrudge/grudge/sketch"
)

// params is one policy a limiter decides with: New's (replaced whole by
// SetLimit and SetBurst) or a Tier's. Its costs are in the engine's base
// units (Limiter.unit, drain): a token of the policy's rate r costs unit
// = 1000 x drain / r units, rounded up to what the engine stores exactly
// (costOf). It never changes once built; the decision paths take it as
// one pointer.
type params struct {
	unit    float64 // units per token
	burstU  float64 // burst x unit, <= the limiter's maxDebtU
	rejectU float64 // RejectCost x unit, at most maxDebtU
	limit   Limit
	burst   int
	burstF  float64 // float64(burst)
	name    string
	exact   bool // unit is 1000 x drain / limit exactly, on an exact engine

	// On the Buckets engine, unit against burstU and rejectU converted to
	// the engine's ticks once (l.charged), so that Allow converts nothing.
	allowC, rejectC bucket.Charge
}

// charged sets p's Buckets charges on l's engine (none on the count-min)
// and returns p; p must not be shared yet.
func (l *Limiter) charged(p *params) *params {
	if l.b != nil {
		p.allowC, p.rejectC = l.b.Charge(p.unit, p.burstU), l.b.Charge(p.rejectU, 0)
	}
	return p
}

func (p *params) policies() []Policy {
	return []Policy{{Name: p.name, Limit: p.limit, Burst: p.burst}}
}

// gridShift returns the largest k <= 30 for which every multiple of 2^-k
// units up to maxDebtU (<= 2^24) is exact in a float32 cell: the
// count-min's step for a policy's cost when the limiter is exact.
func gridShift(maxDebtU float64) int {
	k := 0
	for k < 30 && maxDebtU*math.Ldexp(1, k+1) <= units.MaxExactUnits {
		k++
	}
	return k
}

// costOf returns what a token of rate r (> 0, finite) costs in the
// engine's units, 1000 x drain / r, rounded up to what the engine stores
// exactly, and whether no rounding was needed on an exact engine:
//
//   - whole units on the Buckets engine (a unit is a whole number of its
//     ticks), and on the count-min when New's units are a short
//     fraction's but not exact (debts beyond 2^24 units), there with at
//     most m significant bits (below);
//   - multiples of 2^-shift units on an exact count-min (every such
//     multiple up to MaxDebt is exact in a float32 cell, so debts mixing
//     policies stay exact, and so does New's policy);
//   - m significant bits when New's rate is not a short fraction, as
//     units rounds New's own unit: m = 24 - bits(the policy's MaxDebt in
//     its tokens), at least 8, so that adds of up to MaxDebt tokens are
//     exact.
//
// r's exact value is its short fraction where it has one (3 for
// Limit(3), 1/3 for Every(3*time.Second)), else the float64's own. For
// New's rate this returns New's unit and exactness.
func (l *Limiter) costOf(r float64) (unit float64, exact bool) {
	// m bits of cost hold the policy's MaxDebt in its tokens within a
	// float32's 24 bits, so that its adds are exact (a full burst from
	// an empty key is admitted), as units does for New's rate (whose
	// MaxDebt this is when r is New's rate).
	tokens := l.maxDebt // the policy's MaxDebt in its tokens
	if r != l.rate {
		tokens = l.maxDebt / l.rate * r
	}
	m := max(24-bits.Len64(uint64(min(math.Ceil(tokens), 1<<62))), 8)
	if l.bits > 0 {
		// New's unit is 1000 x drain / R rounded up (by a factor
		// unit / (1000 x drain / R) >= 1): a token of r costs its exact
		// share scaled by the same factor, unit x R / r, so that New's
		// policy reads another policy's debt as no fewer of its tokens
		// than its exact bucket counts (an audit's
		// TestAudit32FixedNewPolicyEarlyAfterTierBurst: a Tier at the
		// exact cost let New's policy admit 128 s early).
		// R/r is taken as its short fraction where it has one (a tier
		// R/k is k of New's tokens, not k and a float64 rounding more,
		// so that WithMaxDebt(k x b) holds its burst b).
		x := l.unit * l.rate / r
		if math.IsInf(x, 0) || x == 0 {
			return x, false
		}
		ex := new(big.Rat).SetFloat64(l.unit)
		if p, q, ok := units.Fraction(l.rate / r); ok {
			ex.Mul(ex, new(big.Rat).SetFrac(p, q))
		} else {
			ex.Mul(ex, new(big.Rat).SetFloat64(l.rate)).Quo(ex, new(big.Rat).SetFloat64(r))
		}
		x, _ = ex.Float64()
		return min(units.RoundUpBits(x, m, ex), l.multiple(ex)), false
	}
	var rr *big.Rat
	if p, q, ok := units.Fraction(r); ok {
		rr = new(big.Rat).SetFrac(p, q)
	} else {
		rr = new(big.Rat).SetFloat64(r)
	}
	s := new(big.Rat).SetFloat64(math.Ldexp(1000*l.drain, l.shift)) // drain is a whole number
	s.Quo(s, rr)
	c := new(big.Int).Quo(s.Num(), s.Denom())
	if !s.IsInt() {
		c.Add(c, big.NewInt(1))
	}
	w := math.Inf(1)
	if l.b == nil && !l.exact {
		w = l.multiple(s)
		// Debts beyond 2^24 units (shift 0): whole units of at most m
		// significant bits.
		if drop := c.BitLen() - m; drop > 0 {
			lo := new(big.Int).Lsh(big.NewInt(1), uint(drop))
			if new(big.Int).Rem(c, lo).Sign() != 0 {
				c.Rsh(c, uint(drop)).Add(c, big.NewInt(1)).Lsh(c, uint(drop))
			}
		}
	}
	if c.BitLen() > 53 {
		return w, false
	}
	return min(math.Ldexp(float64(c.Int64()), -l.shift), w), l.exact && s.IsInt()
}

// multiple returns, for an inexact limiter, the least whole multiple of
// New's unit that is at least ex (a cost's exact value in units), or
// +Inf where such multiples may not add exactly. New's units keep every
// multiple of its token up to MaxDebt exact in a float32 (internal/units), so
// a cost of k of New's tokens adds as exactly as New's own do: a tier
// R/k costs k x unit, never more (WithMaxDebt(k x b) holds its burst b,
// as the package documentation promises), where rounding k x unit to
// the tier's m significant bits could exceed it.
func (l *Limiter) multiple(ex *big.Rat) float64 {
	frac, _ := math.Frexp(l.unit)
	mant := uint64(math.Ldexp(frac, 53))
	sig := 53 - bits.TrailingZeros64(mant) // the unit's significant bits
	if sig+bits.Len64(uint64(min(math.Ceil(l.maxDebt), 1<<62))) > 24 {
		return math.Inf(1)
	}
	u := new(big.Rat).SetFloat64(l.unit)
	q := new(big.Rat).Quo(ex, u)
	k := new(big.Int).Quo(q.Num(), q.Denom())
	if !q.IsInt() {
		k.Add(k, big.NewInt(1))
	}
	f, exact := new(big.Rat).Mul(new(big.Rat).SetInt(k), u).Float64()
	if !exact {
		return math.Inf(1)
	}
	return f
}

// MaxDebtError is the error of Limiter.Tier, SetLimit and SetBurst for a
// policy whose burst, priced in the limiter's units, exceeds what a key
// can carry (the engine's clamp: the count-min's Hi, the Buckets
// engine's span, both MaxDebt): a tier of rate r and burst b holds b x
// R/r tokens of the limiter's rate R. Need is the MaxDebt (WithMaxDebt,
// in tokens of New's limit) the policy needs: a limiter built as this
// one but WithMaxDebt(Need) takes it (its base units, which MaxDebt
// sets, are accounted for), unless New refuses that MaxDebt (above
// 2^24, beyond the Buckets engine's span, or, with WithEngine(Buckets)
// and a RejectCost that is not a whole number of tokens, one whose ticks
// do not hold that RejectCost whole: Auto takes it on the count-min).
// Have is the limiter's.
// It matches sketch.ErrInvalidConfig with errors.Is.
type MaxDebtError struct {
	Limit Limit // the policy's rate
	Burst int   // the policy's burst
	Need  float64
	Have  float64
}

func (e *MaxDebtError) Error() string {
	return fmt.Sprintf("limit: a policy of %v/s with burst %d needs MaxDebt >= %v (WithMaxDebt, in tokens of New's limit); got %v",
		float64(e.Limit), e.Burst, e.Need, e.Have)
}

// Is reports whether target is sketch.ErrInvalidConfig.
func (e *MaxDebtError) Is(target error) bool { return target == sketch.ErrInvalidConfig }

// newParams builds the policy of limit and burst named name on l's
// engine, or says why it cannot hold it.
func (l *Limiter) newParams(limit Limit, burst int, name string) (*params, error) {
	r := float64(limit)
	if math.IsNaN(r) || limit <= 0 {
		return nil, bad("Limit", r, "limit must be > 0; got %v", r)
	}
	if l.inf {
		return nil, bad("Limit", r, "an Inf Limiter keeps no state, so it cannot take a finite policy; build one with New(limit, ...); got %v", r)
	}
	if limit == Inf || math.IsInf(r, 1) {
		return nil, bad("Limit", r, "a policy's limit must be finite (every policy drains the engine's one debt); got Inf")
	}
	if limit > maxRate {
		return nil, bad("Limit", r, "limit must be <= %g; got %v", maxRate, r)
	}
	if burst < 1 || burst > 1<<24 {
		return nil, bad("Burst", burst, "burst must be in [1, %d]; got %d", 1<<24, burst)
	}
	unit, exact := l.costOf(r)
	burstF := float64(burst)
	burstU := burstF * unit
	if !(burstU <= l.maxDebtU) {
		return nil, &MaxDebtError{Limit: limit, Burst: burst, Need: l.needFor(r, burst, burstU), Have: l.maxDebt}
	}
	return l.charged(&params{unit: unit, burstU: burstU, rejectU: min(heldUnits(l.rejectCost, unit), l.maxDebtU),
		limit: limit, burst: burst, burstF: burstF, name: name,
		exact: exact && onGrid(l.maxDebtU, l.shift) && rejectExact(l.rejectCost, unit, l.shift)}), nil
}

// rejectExact reports whether a RejectCost of c tokens, at unit units a
// token, held as heldUnits holds it (a decimal means what it says, as
// WithMaxDebt's), is a multiple of 2^-shift units, which the engine
// stores exactly (onGrid). Off that grid every denial charges it
// rounded up (audit 89: WithRejectCost(1e-4) at 10/s on the count-min,
// 0.01 units, yet Exact said true).
func rejectExact(c, unit float64, shift int) bool { return onGrid(heldUnits(c, unit), shift) }

// onGrid reports whether u units are a multiple of 2^-shift units.
func onGrid(u float64, shift int) bool {
	p := math.Ldexp(u, shift)
	return !math.IsInf(p, 0) && !math.IsNaN(p) && p == math.Trunc(p)
}

// needOn returns the least MaxDebt, in tokens of l's limit, whose units
// on l's base units hold burstU.
func (l *Limiter) needOn(burstU float64) float64 {
	need := burstU / l.unit
	for heldUnits(need, l.unit) < burstU { // as New will hold it
		need = math.Nextafter(need, math.Inf(1))
	}
	return need
}

// needFor returns the MaxDebt a limiter built as l, WithMaxDebt(it),
// needs to hold a policy of rate r and burst, whose burst costs burstU
// on l's units (more than l's MaxDebt). A limiter built with another
// MaxDebt has other base units (the Buckets engine's ticks, the
// count-min's grid of costs and New's own unit depend on it), so the
// need on l's units is tried on the units a limiter with it would have,
// and raised until they hold the policy too (a few rounds: the units
// only coarsen as MaxDebt grows). It is priced on the engine a limiter
// built as l would run on: the Buckets engine where l does, or where l
// was built with Auto (and no count-min-only option) and that engine
// holds the MaxDebt found; else the count-min.
func (l *Limiter) needFor(r float64, burst int, burstU float64) float64 {
	need := l.needOn(burstU)
	for range 16 {
		if !(need <= 1<<24) {
			return need
		}
		var s *Limiter
		var err error
		if l.b != nil || l.auto {
			// The Buckets engine holds a MaxDebt of whole ticks only. A
			// limiter built with Auto takes that engine wherever it is
			// exact, whichever this one runs on (audit: New(1e5, 1) with
			// MaxDebt 1.5 on the count-min asked for 2, on which Auto
			// builds the Buckets engine, whose units needed 2.0123).
			if g, ok := bucketsMaxDebt(l.rate, need, l.rejectCost); ok {
				need = g
			}
			s, err = New(Limit(l.rate), 1, WithMaxDebt(need), WithEngine(Buckets), WithCapacity(1, 0.5), WithSeed(0))
		}
		if s == nil {
			s, err = New(Limit(l.rate), 1, WithMaxDebt(need), WithEngine(CountMin), WithSize(1, 1), WithSeed(0))
		}
		if err != nil {
			return need // New refuses this MaxDebt anyway, and says why
		}
		unit, _ := s.costOf(r)
		u := float64(burst) * unit
		if u <= s.maxDebtU {
			return need
		}
		need = math.Max(s.needOn(u), math.Nextafter(need, math.Inf(1)))
	}
	return need
}

// SetLimit changes the limiter's rate for every later decision of its
// own methods (not its Tiers'), keeping every key's state, as
// x/time/rate's SetLimit. A key's debt is held as time to drain, so a
// key in debt still waits what it waited before for the debt it holds,
// and its new requests cost 1/limit each (x/time/rate keeps the token
// count instead: docs/migrating.md). The burst must still fit MaxDebt in
// the new tokens: a *MaxDebtError says which MaxDebt it needs (limits
// down to New's/k need WithMaxDebt(k x burst)). A limit that is NaN, not
// positive, Inf or above 1e22 is a *sketch.ConfigError, and so is any
// finite limit on an Inf Limiter (SetLimit(Inf) on it does nothing);
// either way nothing changes. Decisions racing SetLimit use the old
// policy or the new one, never a mix. It panics on the zero Limiter.
func (l *Limiter) SetLimit(limit Limit) error {
	if l.tb == nil {
		panic(errZero)
	}
	if l.inf && (limit == Inf || math.IsInf(float64(limit), 1)) {
		return nil
	}
	l.setMu.Lock()
	defer l.setMu.Unlock()
	cur := l.p.Load()
	p, err := l.newParams(limit, cur.burst, cur.name)
	if err != nil {
		return err
	}
	l.p.Store(p)
	return nil
}

// SetBurst changes the limiter's burst for every later decision of its
// own methods, keeping every key's state, as x/time/rate's SetBurst (its
// rules are SetLimit's): a key's debt is unchanged, so a lower burst
// leaves a key in debt further from admission, a higher one closer. A
// burst < 1 or above 2^24 is a *sketch.ConfigError, one beyond MaxDebt a
// *MaxDebtError; nothing changes then. It panics on the zero Limiter.
func (l *Limiter) SetBurst(burst int) error {
	if l.tb == nil {
		panic(errZero)
	}
	l.setMu.Lock()
	defer l.setMu.Unlock()
	cur := l.p.Load()
	if l.inf {
		if burst < 1 || burst > 1<<24 {
			return bad("Burst", burst, "burst must be in [1, %d]; got %d", 1<<24, burst)
		}
		p := *cur
		p.burst, p.burstF = burst, float64(burst)
		l.p.Store(&p)
		return nil
	}
	p, err := l.newParams(cur.limit, burst, cur.name)
	if err != nil {
		return err
	}
	l.p.Store(p)
	return nil
}

// Tier is a policy of its own (rate, burst, name) on a Limiter's engine
// and keys: per-plan or per-route limits on one limiter, as redis_rate
// takes a Limit on every call. A key's debt is shared by every policy of
// the limiter, held as time to drain at the limiter's rate R: a request
// of n tokens under a tier of rate r costs n x R/r tokens of R against a
// burst of b x R/r, so a key that used the free tier's burst has used
// that much time of the paid tier's too (see the package documentation,
// "Tiers and changing the limit"). A request decided by both a Limiter
// and one of its Tiers (httplimit middlewares stacked one inside the
// other) is charged to that debt twice; give stacked limits separate
// Limiters.
//
// Build tiers once (Limiter.Tier does big.Rat arithmetic) and keep them:
// a Tier is a small value, safe for concurrent use, and its decisions
// cost what the Limiter's do (Allow does not allocate). It satisfies
// httplimit.Limiter. Its methods are the Limiter's, with the tier's
// policy in place of the limiter's own; SetLimit and SetBurst do not
// change a Tier. The zero Tier is not usable: its decision methods and
// MaxDebt panic ("limit: zero Tier"); its plain accessors, Limit, Burst,
// Name, Exact, Policies and Limiter, return zero values, as the zero
// Limiter's do.
type Tier struct {
	l *Limiter
	p params
}

// Tier returns a policy of limit and burst on l's engine and keys, named
// name in its Decisions and Policies ("" names it as l is named). The
// tier's cost per token, limit's share of the limiter's rate R in the
// engine's units, is rounded up to what the engine stores exactly (never
// early: the tier's effective rate is at most limit, short of it by
// less than one step of the engine's units per token; Tier.Exact reports
// whether it is exact). A burst whose cost exceeds MaxDebt is a
// *MaxDebtError naming the MaxDebt it needs: to offer tiers down to R/k
// with burst b, build l with WithMaxDebt(k x b). A limit that is NaN,
// not positive, Inf or above 1e22, a burst < 1 or above 2^24, and any
// tier of an Inf Limiter are a *sketch.ConfigError. It panics on the
// zero Limiter.
func (l *Limiter) Tier(name string, limit Limit, burst int) (*Tier, error) {
	if l.tb == nil {
		panic(errZero)
	}
	if name == "" {
		name = l.name
	}
	p, err := l.newParams(limit, burst, name)
	if err != nil {
		return nil, err
	}
	return &Tier{l: l, p: *p}, nil
}

const errZeroTier = "limit: zero Tier; use Limiter.Tier"

// lim returns the tier's limiter, or panics on the zero Tier.
func (t *Tier) lim() *Limiter {
	if t.l == nil {
		panic(errZeroTier)
	}
	return t.l
}

// Limiter returns the limiter whose engine and keys the tier shares.
func (t *Tier) Limiter() *Limiter { return t.l }

// Limit returns the tier's rate, as given to Limiter.Tier.
func (t *Tier) Limit() Limit { return t.p.limit }

// Burst returns the tier's burst.
func (t *Tier) Burst() int { return t.p.burst }

// Name returns the tier's policy name.
func (t *Tier) Name() string { return t.p.name }

// MaxDebt returns the most debt a key can carry in the tier's tokens:
// the limiter's MaxDebt priced at the tier's cost.
func (t *Tier) MaxDebt() float64 {
	l := t.lim()
	return l.maxDebtU / t.p.unit
}

// Exact reports whether the tier is exact, as Limiter.Exact: the limiter
// is, a token of the tier costs exactly R/r tokens of the limiter's rate
// R in the engine's units, and the RejectCost, priced in the tier's
// tokens, is on the engine's grid too (so its decisions are the rational
// bucket of rate r and burst b, for a key alone in its cells). Tiers R/k
// for a whole k are exact on an exact limiter with a whole RejectCost;
// other ratios are where R/r is a multiple of the engine's step
// (docs/design.md).
func (t *Tier) Exact() bool { return t.p.exact }

// Policies returns the tier's one Policy; nil for a nil Tier.
func (t *Tier) Policies() []Policy {
	if t == nil || t.l == nil {
		return nil
	}
	return t.p.policies()
}

// Now returns the limiter clock's reading (Limiter.Now).
func (t *Tier) Now() time.Time { return t.lim().Now() }

// Allow is Limiter.Allow under the tier's policy. It does not allocate.
func (t *Tier) Allow(key string) bool { return t.lim().allow(&t.p, key) }

// AllowN is Limiter.AllowN under the tier's policy.
func (t *Tier) AllowN(tm time.Time, key string, n int) bool {
	return t.lim().allowN(&t.p, tm, key, n)
}

// Decide is Limiter.Decide under the tier's policy.
func (t *Tier) Decide(key string) Decision {
	l := t.lim()
	return l.decide(&t.p, l.Now(), key, 1, true)
}

// DecideN is Limiter.DecideN under the tier's policy: its Limit, Burst
// and Policy are the tier's, and its durations and Remaining are the
// tier's bucket's.
func (t *Tier) DecideN(tm time.Time, key string, n int) Decision {
	return t.lim().decide(&t.p, tm, key, n, true)
}

// Peek is Limiter.Peek under the tier's policy.
func (t *Tier) Peek(key string) Decision {
	l := t.lim()
	return l.decide(&t.p, l.Now(), key, 1, false)
}

// PeekN is Limiter.PeekN under the tier's policy.
func (t *Tier) PeekN(tm time.Time, key string, n int) Decision {
	return t.lim().decide(&t.p, tm, key, n, false)
}

// DecideContext is Limiter.DecideContext under the tier's policy (the
// error is always nil): with Policies, what httplimit.Limiter asks.
func (t *Tier) DecideContext(_ context.Context, key string, n int) (Decision, error) {
	l := t.lim()
	return l.decide(&t.p, l.Now(), key, n, true), nil
}

// Reserve is Limiter.Reserve under the tier's policy.
func (t *Tier) Reserve(key string) *Reservation {
	l := t.lim()
	return l.reserve(&t.p, l.Now(), key, 1, l.maxDebtU)
}

// ReserveN is Limiter.ReserveN under the tier's policy: the debt after
// the reservation is within the limiter's MaxDebt (t.MaxDebt tokens).
func (t *Tier) ReserveN(tm time.Time, key string, n int) *Reservation {
	checkN("ReserveN", n)
	l := t.lim()
	return l.reserve(&t.p, tm, key, n, l.maxDebtU)
}

// Wait is WaitN with n = 1.
func (t *Tier) Wait(ctx context.Context, key string) error { return t.WaitN(ctx, key, 1) }

// WaitN is Limiter.WaitN under the tier's policy.
func (t *Tier) WaitN(ctx context.Context, key string, n int) error {
	return t.lim().waitN(&t.p, ctx, key, n)
}

// Tokens is TokensAt at the clock's reading.
func (t *Tier) Tokens(key string) float64 {
	l := t.lim()
	return l.tokensAt(&t.p, l.Now(), key)
}

// TokensAt is Limiter.TokensAt in the tier's tokens: its burst less the
// key's debt priced at the tier's cost.
func (t *Tier) TokensAt(tm time.Time, key string) float64 {
	return t.lim().tokensAt(&t.p, tm, key)
}
