package limit

import (
	"math"
	"time"
)

// Decision is the full answer to one request, in the shape of
// redis_rate's Result: whether it was admitted and what the key has left.
type Decision struct {
	// Allowed reports whether the request was admitted (and debited).
	Allowed bool
	// Limit and Burst are the limiter's policy.
	Limit Limit
	Burst int
	// Remaining is how many one-token requests the key could make right
	// after this decision: floor(burst - debt), at least 0.
	Remaining int
	// RetryAfter is 0 when Allowed. Otherwise it is the time after which
	// the same request would be admitted if nothing else happened to the
	// key: the linear law solved for the debt the sketch holds, rounded up
	// to the next millisecond, so a retry at t+RetryAfter is admitted and
	// one 1 ms earlier is not (for a key alone in its cells; a colliding
	// key can only make it later, never earlier). InfDuration when Never.
	RetryAfter time.Duration
	// ResetAfter is the time until the key's debt drains to zero (the
	// bucket is full again), rounded up to the millisecond.
	ResetAfter time.Duration
	// Never is set when n > burst: the request can never be admitted and
	// must not be retried.
	Never bool
}

// Decide is AllowN returning the full Decision. It panics if n <= 0. On a
// denial RejectCost (if any) is debited before RetryAfter is computed, so
// RetryAfter includes the penalty.
func (l *Limiter) Decide(t time.Time, key []byte, n int) Decision {
	return l.decide(t, bytesView(key), n, true)
}

// DecideString is Decide for a string key.
func (l *Limiter) DecideString(t time.Time, key string, n int) Decision {
	return l.decide(t, key, n, true)
}

// Peek is Decide without any write: it says what Decide would answer at
// t (Remaining and ResetAfter as if the request were admitted, when it
// would be), and debits nothing, not even RejectCost. Like every rotator
// access it may perform a rotation that is due; it never writes a cell.
func (l *Limiter) Peek(t time.Time, key []byte, n int) Decision {
	return l.decide(t, bytesView(key), n, false)
}

// PeekString is Peek for a string key.
func (l *Limiter) PeekString(t time.Time, key string, n int) Decision {
	return l.decide(t, key, n, false)
}

func (l *Limiter) decide(t time.Time, key string, n int, commit bool) Decision {
	checkN("Decide", n)
	d := Decision{Limit: l.limit, Burst: l.burst}
	if l.r == nil {
		d.Allowed, d.Remaining = true, l.burst
		return d
	}
	nf := float64(n)
	var debt float64
	switch {
	case n > l.burst:
		d.Never, d.RetryAfter = true, InfDuration
		debt = l.r.QueryStringAt(t, key)
		if commit && l.rejectCost > 0 {
			debt = l.r.UpdateAndQueryStringAt(t, key, l.rejectCost)
		}
		d.Remaining, d.ResetAfter = l.remaining(debt), l.drainTime(debt)
		return d
	case !commit:
		debt = l.r.QueryStringAt(t, key)
		d.Allowed = debt+nf <= l.burstF
	case l.strict:
		d.Allowed = l.r.TryUpdateStringAt(t, key, nf, l.burstF)
		debt = l.r.QueryStringAt(t, key)
	default:
		debt = l.r.QueryStringAt(t, key)
		if debt+nf <= l.burstF {
			d.Allowed = true
			debt = l.r.UpdateAndQueryStringAt(t, key, nf)
		}
	}
	if !d.Allowed {
		if commit && l.rejectCost > 0 {
			debt = l.r.UpdateAndQueryStringAt(t, key, l.rejectCost)
		}
		d.RetryAfter = l.retryAfter(debt, nf)
	} else if !commit {
		debt += nf // what the key would owe after the request
	}
	d.Remaining, d.ResetAfter = l.remaining(debt), l.drainTime(debt)
	return d
}

// remaining returns floor(burst - debt), at least 0.
func (l *Limiter) remaining(debt float64) int {
	return int(max(math.Floor(l.burstF-debt), 0))
}

// drainTime returns the time for debt to drain to 0, rounded up to the ms.
func (l *Limiter) drainTime(debt float64) time.Duration {
	if debt <= 0 {
		return 0
	}
	return l.msDuration(math.Ceil(debt * 1000 / l.rate))
}

// retryAfter returns the least whole number of ms x such that debt,
// drained x ms by the linear law as the sketch evaluates it
// (max(debt - rate*x/1000, 0)), plus n is at most the burst; at least
// 1 ms when the request does not fit now (a denial can race a drain or a
// refund, so a denial found debt + n <= burst only by a hair).
func (l *Limiter) retryAfter(debt, n float64) time.Duration {
	excess := debt + n - l.burstF
	if excess <= 0 {
		return time.Millisecond
	}
	x := math.Ceil(excess * 1000 / l.rate)
	if x >= 1<<52 {
		return l.msDuration(x)
	}
	// The division rounds; settle the boundary on the sketch's own
	// expression.
	for x > 1 && fits(debt, n, l.burstF, l.rate, x-1) {
		x--
	}
	for !fits(debt, n, l.burstF, l.rate, x) {
		x++
	}
	return l.msDuration(max(x, 1))
}

// fits reports whether debt drained for x ms plus n is within burst.
func fits(debt, n, burst, rate, x float64) bool {
	return math.Max(debt-rate*x/1000, 0)+n <= burst
}

// msDuration converts ms to a Duration, saturating at InfDuration.
func (l *Limiter) msDuration(ms float64) time.Duration {
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return InfDuration
	}
	return time.Duration(ms) * time.Millisecond
}
