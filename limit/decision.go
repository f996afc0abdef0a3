package limit

import (
	"math"
	"time"
)

// Decision is the full answer to one request, in the shape of
// redis_rate's Result: whether it was admitted and what the key has left.
// Its durations are whole milliseconds, measured from the request's t
// (from the clock's reading when t is ahead of it, as the decision is);
// for a key alone in its cells they are exact (see Limiter.Exact), and a
// colliding key can only make them longer, never shorter.
type Decision struct {
	// Allowed reports whether the request was admitted (and debited).
	Allowed bool
	// Limit and Burst are the limiter's policy, and Policy its name
	// (WithName): for a Multi, the window's whose Remaining (admitted) or
	// RetryAfter (denied) the Decision reports.
	Limit  Limit
	Burst  int
	Policy string
	// Remaining is how many one-token requests the key could make right
	// after this decision: floor(burst - debt), at least 0 (a debt of
	// any size above 0 costs the burst's last token). For a Multi whose
	// windows include one limiter k times with one key, a one-token
	// request takes k of that limiter's tokens, and its Remaining counts
	// such requests.
	Remaining int
	// RetryAfter is 0 when Allowed. Otherwise it is the time after which
	// the same request would be admitted if nothing else happened to the
	// key: a retry at t+RetryAfter is admitted and one 1 ms earlier is
	// not, except for a key read at MaxDebt on a count-min limiter whose
	// MaxDebt no float32 holds (see "Exactness" in the package doc),
	// where it may be late by up to the float32 step's drain. InfDuration
	// when Never.
	RetryAfter time.Duration
	// ResetAfter is the time until the key's debt, as this decision
	// leaves it, drains to zero (the bucket is full again): an admitted
	// request's cost is included, and an admitted Peek's too, as if it
	// had been debited.
	ResetAfter time.Duration
	// NextAfter is the time until Remaining grows by one (the next whole
	// token); 0 when the bucket is full (Remaining == Burst), or for a
	// Multi when Remaining can never grow (see Remaining). On a denial
	// it is at most RetryAfter (an admission's RetryAfter is 0). It is
	// what httplimit sends as the RateLimit field's t.
	NextAfter time.Duration
	// Never is set when n > burst: the request can never be admitted and
	// must not be retried (never on an Inf limiter, which admits every n).
	Never bool
}

// Decide is Allow returning the full Decision: DecideN at the clock's
// reading with n = 1.
func (l *Limiter) Decide(key string) Decision { return l.decide(l.p.Load(), l.Now(), key, 1, true) }

// DecideN is AllowN returning the full Decision. It panics if n <= 0. On
// a denial RejectCost (if any) is debited before RetryAfter is computed,
// so RetryAfter includes the penalty.
func (l *Limiter) DecideN(t time.Time, key string, n int) Decision {
	return l.decide(l.p.Load(), t, key, n, true)
}

// Peek is Decide without any write: PeekN at the clock's reading with
// n = 1.
func (l *Limiter) Peek(key string) Decision { return l.decide(l.p.Load(), l.Now(), key, 1, false) }

// PeekN is DecideN without any write: it says what DecideN would answer
// at t (Remaining and ResetAfter as if the request were admitted, when
// it would be), and debits nothing, not even RejectCost. Like every
// access it may perform a rotation that is due; it never writes a cell.
func (l *Limiter) PeekN(t time.Time, key string, n int) Decision {
	return l.decide(l.p.Load(), t, key, n, false)
}

// decide is DecideN (commit) and PeekN (!commit) under the policy p
// (the Limiter's or a Tier's): every number of the Decision comes from p
// and the engine's debt, in p's units.
// A committed decision counts for Stats.
func (l *Limiter) decide(p *params, t time.Time, key string, n int, commit bool) Decision {
	d := l.judge(p, t, key, n, commit)
	if commit {
		l.counts.count(d.Allowed)
	}
	return d
}

// judge is decide without the count.
func (l *Limiter) judge(p *params, t time.Time, key string, n int, commit bool) Decision {
	if n <= 0 {
		op := "PeekN"
		if commit {
			op = "DecideN"
		}
		checkN(op, n)
	}
	if l.none() {
		l.unset()
		return Decision{Allowed: true, Limit: p.limit, Burst: p.burst, Policy: p.name, Remaining: p.burst}
	}
	d := Decision{Limit: p.limit, Burst: p.burst, Policy: p.name}
	nU := p.cost(float64(n))
	var debt float64 // in units
	switch {
	case n > p.burst:
		d.Never, d.RetryAfter = true, InfDuration
		if commit && p.rejectU > 0 {
			debt = l.addAt(t, key, p.rejectU)
		} else {
			debt = l.queryAt(t, key)
		}
		l.fill(p, &d, debt, l.gap(t))
		return d
	case !commit:
		debt = l.queryAt(t, key)
		d.Allowed = debt+nU <= p.burstU
	case l.strict:
		d.Allowed, debt = l.tryAndQueryAt(t, key, nU, p.burstU)
	default:
		debt = l.queryAt(t, key)
		if debt+nU <= p.burstU {
			d.Allowed = true
			debt = l.addAt(t, key, nU)
		}
	}
	if !d.Allowed && commit && p.rejectU > 0 {
		debt = l.addAt(t, key, p.rejectU)
	}
	gap := l.gap(t)
	if !d.Allowed {
		// At least 1 ms: a denial can race a drain or a refund that made
		// the request fit a moment later.
		d.RetryAfter = plus(gap, l.ms(max(l.msUntilFits(p, debt, nU), 1)))
	} else if !commit {
		debt = l.after(debt, nU) // what the key would owe after the request
	}
	l.fill(p, &d, debt, gap)
	return d
}

// fill sets d's Remaining, ResetAfter and NextAfter for a debt of debt
// units read gap after t, under the policy p.
func (l *Limiter) fill(p *params, d *Decision, debt float64, gap time.Duration) {
	l.fillK(p, d, debt, gap, 1)
}

// fillK is fill for requests that each take k tokens per token asked
// (a Multi holding this limiter as k windows with one key): Remaining
// counts such requests, and NextAfter waits for the next one.
func (l *Limiter) fillK(p *params, d *Decision, debt float64, gap time.Duration, k int) {
	d.Remaining = p.remainingK(debt, k)
	if debt > 0 {
		d.ResetAfter = plus(gap, l.ms(math.Ceil(debt/l.drain)))
		// The next request of k tokens: when the debt drains to the
		// room it needs, by remainingK's own test (0 where none can
		// ever fit: the least never grows).
		switch next := (d.Remaining + 1) * k; {
		case next > p.burst:
		case d.Remaining == 0 && k == 1: // the first request: the engine's own add
			d.NextAfter = plus(gap, l.ms(l.msUntilFits(p, debt, p.cost(float64(next)))))
		default:
			d.NextAfter = plus(gap, l.ms(l.msUntilBelow(debt, p.burstU-p.cost(float64(next)))))
		}
	}
}

// gap returns how far the time the limiter decided at lies after t, or
// after the clock's reading when t is ahead of it, rounded up to the
// millisecond: 0 for a t at the clock's reading when the clock has not
// stepped back, the lag otherwise. Read after the decision, the
// high-water mark is at or after the time the decision used, so a
// duration with gap added, counted from t or from the clock's reading,
// whichever is earlier, is never early.
func (l *Limiter) gap(t time.Time) time.Duration {
	hw := l.tb.Time(l.tb.HighWater())
	if !l.tb.Steady() { // else the reading is never before the mark: no read
		if now := l.tb.Time(l.tb.Peek()); t.After(now) {
			t = now
		}
	}
	g := hw.Sub(t)
	if g <= 0 {
		return 0
	}
	if g > InfDuration-time.Millisecond {
		return InfDuration // Sub saturated: a t centuries stale
	}
	return (g + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// plus returns gap + w, saturating at InfDuration.
func plus(gap, w time.Duration) time.Duration {
	if w > InfDuration-gap {
		return InfDuration
	}
	return gap + w
}

// cost returns n tokens in units under p: n x unit, rounded to float64
// by the explicit conversion. Without it the compiler may fuse the
// product into the add of a later compare (debt + cost <= burstU, an FMA
// on arm64), and then the compare would see the exact product while the
// sketch is given its rounding: a decision that disagrees with the
// sketch's own (docs/design.md, "Fused multiply-add").
func (p *params) cost(n float64) float64 { return float64(n * p.unit) }

// remainingK returns the most requests of k tokens each that fit a debt
// of debt units one after the other: for k = 1, floor(burst - debt) in
// tokens, at least 0. It compares the debt with the room r
// requests leave, burstU - cost(r x k), exact where costs are multiples
// of the unit (Sterbenz otherwise, near the boundary), not debt + cost
// with the add's rounding: a debt below half a float64 step of burstU
// (left by a policy whose tokens cost far less, a Tier or an earlier
// SetLimit) vanishes in the add, yet the cells, which round every take
// up, carry it: the last token of the burst would not fit.
//
// The first request is the exception: the engine decides it on the
// float64 add, debt + cost <= burstU, which may absorb a tiny debt, so
// where none fits by the room, one fits if the add says so (burst 1
// after a tiny debt: one more request is admitted); its cells then hold
// the sum rounded up, and the room decides every later one. For k > 1
// (a Multi holding the limiter k times) the request is k takes, the
// later ones from the rounded cells: the room decides.
func (p *params) remainingK(debt float64, k int) int {
	r := int(max(math.Floor((p.burstU-debt)/p.unit), 0)) / k
	for r > 0 && p.burstU-p.cost(float64(r*k)) < debt {
		r-- // the division rounded up past a boundary (inexact units)
	}
	if r == 0 && k == 1 && p.burst >= 1 && debt+p.unit <= p.burstU {
		r = 1 // (k > 1: the request's k takes are each their own add)
	}
	return r
}

// msUntilFits returns the least whole number of ms x >= 0 after which a
// debt of debt units, drained x ms as the sketch drains it, leaves room
// for nU units within the burst: max(debt - drop(x), 0) + nU <= burstU,
// evaluated as TryUpdate evaluates it, under the policy p. For nU above
// burstU, which never fits, it returns +Inf (a Duration of InfDuration)
// instead of searching for ever.
func (l *Limiter) msUntilFits(p *params, debt, nU float64) float64 {
	if nU > p.burstU {
		return math.Inf(1)
	}
	fits := func(x float64) bool { return max(debt-l.drop(x), 0)+nU <= p.burstU }
	return l.settle(math.Ceil((debt+nU-p.burstU)/l.drain), fits)
}

// msUntilBelow returns the least whole number of ms x >= 0 after which a
// debt of debt units, drained x ms, is at most target units.
func (l *Limiter) msUntilBelow(debt, target float64) float64 {
	below := func(x float64) bool { return max(debt-l.drop(x), 0) <= target }
	return l.settle(math.Ceil((debt-target)/l.drain), below)
}

// settle returns the least x >= 0 with ok(x), ok monotone, starting from
// the estimate x (a division that may round either way by a step).
func (l *Limiter) settle(x float64, ok func(float64) bool) float64 {
	x = max(x, 0)
	if x >= 1<<52 {
		return x
	}
	for x > 0 && ok(x-1) {
		x--
	}
	for !ok(x) {
		x++
	}
	return x
}

// drop returns what x ms drain off a debt, as the sketch's linear law
// computes it: (1000 x drain) x x / 1000, the integer drain x x.
func (l *Limiter) drop(x float64) float64 { return 1000 * l.drain * x / 1000 }

// ms converts whole milliseconds to a Duration, saturating at InfDuration.
func (l *Limiter) ms(ms float64) time.Duration {
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return InfDuration
	}
	return time.Duration(ms) * time.Millisecond
}

// Tokens is TokensAt at the clock's reading.
func (l *Limiter) Tokens(key string) float64 { return l.TokensAt(l.Now(), key) }

// TokensAt returns the tokens key has at t, as x/time/rate's TokensAt:
// burst - debt, fractional, negative while reservations are queued past
// the burst. It only reads (t is taken as AllowN takes it).
func (l *Limiter) TokensAt(t time.Time, key string) float64 { return l.tokensAt(l.p.Load(), t, key) }

// tokensAt is TokensAt under the policy p.
func (l *Limiter) tokensAt(p *params, t time.Time, key string) float64 {
	if l.none() {
		l.unset()
		return p.burstF
	}
	debt := l.queryAt(t, key)
	tokens := p.burstF - debt/p.unit
	if debt > 0 && tokens >= p.burstF {
		// A debt below a float64 step of the burst: the subtraction
		// absorbed it, but the key no longer has its whole burst.
		tokens = math.Nextafter(p.burstF, math.Inf(-1))
	}
	return tokens
}
