package redis

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/limit"
)

// DecideContext is AllowN answering a limit.Decision, the shape of
// package limit's limiters: with it and Policies, a *Limiter is an
// httplimit.Limiter (one limit per client across every instance of a
// service). The error is AllowN's: on a round trip that failed, d is the
// Policy's decision (FailOpen and LocalFallback decide; FailClosed's
// denial, and LocalFallback's for n above its Burst/N but within Burst,
// say no retry time, RetryAfter 0 and NextAfter 0, and are not Never; httplimit
// answers them through its error handler, 503; a request above Burst is
// Never, as always: under FailClosed with NextAfter 0, under
// LocalFallback with the fallback's NextAfter). Burst and
// Remaining are rounded down to whole tokens, capped at 2^53; NextAfter
// is the time until Remaining grows by one, rounded up to the
// millisecond, and 0 when the bucket holds its Burst's whole tokens
// (with a fractional Burst, the last fraction of a token brings no whole
// one; past the cap, Remaining == Burst does not say the bucket is
// full, NextAfter does). It is exact for a limit in exact units; for
// one counting tokens it is up to 1 ms late (2 ms for a key read at its
// cap), a deny cache's denial up to its RetryAfter's float32 step of
// drain late, and the LocalFallback's late by its waits' slack (see
// Decision.RetryAfter): never early, but that on a denial it is at most
// RetryAfter, the time the request would be admitted, and the
// LocalFallback's admission test (debt + n <= Burst) and its Remaining
// (Burst - debt) round apart by a float64 step, so there it can come 1
// ms before Remaining reads the next whole token. It panics if n <= 0.
func (l *Limiter) DecideContext(ctx context.Context, key string, n int) (limit.Decision, error) {
	if n <= 0 {
		panic("redis: DecideContext: n must be > 0; got " + strconv.Itoa(n))
	}
	nf := tokensUp(n)
	d, err := l.AllowN(ctx, key, nf)
	// A key read at its cap drains from Burst rounded up to float32: its
	// next token is that much later (audit 61).
	excess := l.excess
	if err != nil && l.policy == LocalFallback {
		excess = l.fbExcess
	}
	var eu exactUnits
	if l.exactU && err == nil && l.burstU == math.Floor(l.burstU) {
		eu = exactUnits{unit: l.unit, burstU: l.burstU, perMs: l.rateU / 1000}
	}
	// A policy's denial made without the server or the fallback reading
	// the key (FailClosed's; LocalFallback's for n above its Burst/N
	// within Burst) knows nothing of the key: no NextAfter.
	blind := err != nil && (l.policy == FailClosed ||
		l.policy == LocalFallback && nf > l.fbLimit.Burst && nf <= l.limit.Burst)
	return toDecision(d, nf, l.sk.cfg.Name, excess, eu, blind), err
}

// tokensUp returns n as a float64 rounded up: above 2^53 float64(n)
// rounds to nearest, which can make a request of Burst + 1 tokens one of
// Burst, admitted (audit 123).
func tokensUp(n int) float64 {
	nf := float64(n)
	if nf < 1<<63 && int64(nf) < int64(n) {
		nf = math.Nextafter(nf, math.Inf(1))
	}
	return nf
}

// exactUnits are a limiter's exact units (Limiter's doc: a whole number
// of units a token, a whole number drained each ms, Burst within 2^24 of
// them, here a whole number of them too), for DecideContext's NextAfter;
// the zero value: none (a limit that counts tokens, a Burst of a
// fraction of a unit, or the LocalFallback's decision).
type exactUnits struct {
	unit, burstU, perMs float64
}

// Policies returns the limiter's one policy: its Name, Rate and Burst
// (rounded down to whole tokens); nil for a nil Limiter.
func (l *Limiter) Policies() []limit.Policy {
	if l == nil || l.sk == nil {
		return nil
	}
	return []limit.Policy{{Name: l.sk.cfg.Name, Limit: limit.Limit(l.limit.Rate), Burst: wholeTokens(l.limit.Burst)}}
}

func init() { common.RegisterRefills(limiterRefills) }

// limiterRefills is common.PolicyRefills for a *Limiter (nil for
// anything else): httplimit announces RateLimit-Policy's w from it.
func limiterRefills(x any) []common.Refill {
	if l, ok := x.(*Limiter); ok && l != nil && l.sk != nil {
		return []common.Refill{l.refill()}
	}
	return nil
}

// refill is how long an empty key takes to get Burst back as the server
// holds it: the full burst's debt as a cell stores it (a float32 rounded
// up: more than Burst above 2^24 tokens), drained at the rate, rounded up
// to the ms (for exact units, a quotient within 4 ulps of a whole ms is
// that ms), plus the slack the server adds to a wait its rebases may
// meet unless the debt counts exact units (sketch.lua's rebaseSlack,
// bounded by rebaseSlackBound). It comes with Policies' rate and burst.
// Burst/Rate alone was short (audit 52: 0.3/s x 30000001 announced a w
// 2.7 s before a full burst was back).
func (l *Limiter) refill() common.Refill {
	q := float64(atom.RoundUp(l.burstU)) / l.rateU * 1000
	if l.exactU {
		// Whole units at a whole drain: a whole ms comes out of the
		// division a few ulps off (audit 89: 5/s x 161 gave 32200.000000000004,
		// a w 1 ms past the server's ResetAfter), as in package limit.
		q = common.SnapWhole(q)
	}
	ms := math.Ceil(q)
	if !l.exactU {
		ms += float64(rebaseSlackBound(int64(ms), l.sk.rebaseAt))
	}
	return common.Refill{Limit: l.limit.Rate, Burst: wholeTokens(l.limit.Burst), Refill: msDuration(int64(ms))}
}

// wholeTokens returns floor(x) as an int, within [0, 2^53].
func wholeTokens(x float64) int { return int(min(max(math.Floor(x), 0), 1<<53)) }

// toDecision converts AllowN's Decision for n tokens; excess is the
// drain a debt read at the cap hides (capExcess), added to NextAfter
// when Remaining is 0.
func toDecision(d Decision, n float64, name string, excess time.Duration, eu exactUnits, blind bool) limit.Decision {
	out := limit.Decision{
		Allowed: d.Allowed, Limit: limit.Limit(d.Limit.Rate), Burst: wholeTokens(d.Limit.Burst), Policy: name,
		Remaining: min(wholeTokens(d.Remaining), wholeTokens(d.Limit.Burst)), ResetAfter: max(d.ResetAfter, 0),
	}
	switch {
	case d.Allowed:
	case n > d.Limit.Burst:
		out.Never, out.RetryAfter = true, limit.InfDuration
	case d.RetryAfter > 0:
		out.RetryAfter = d.RetryAfter
	}
	// The next whole token: from Remaining r to floor(r)+1 (at most the
	// burst) at Rate per second, where there is one (Remaining below
	// Burst, both whole). A denial that is no decision (blind, or the
	// policy's with no retry time) knows nothing of the key: NextAfter
	// stays 0, at most its RetryAfter as on every denial.
	noDecision := blind || !d.Allowed && !out.Never && out.RetryAfter == 0
	if r, b := d.Remaining, d.Limit.Burst; math.Floor(r) < math.Floor(b) && d.Limit.Rate > 0 && !noDecision {
		if d.nextAfter > 0 {
			// The LocalFallback's, found on its cells (lag and slack in).
			out.NextAfter = d.nextAfter
			if out.RetryAfter > 0 {
				out.NextAfter = min(out.NextAfter, out.RetryAfter)
			}
			return out
		}
		var ms float64
		if eu.perMs > 0 {
			// In exact units, as the server counts: the room is a whole
			// number of units (snapped: r is room/unit rounded; a room
			// between two wholes, from a cached debt, rounds down, to
			// the safe side), and so are the next token and the drain,
			// so the wait is an integer ceiling (audit 86: computed from
			// r in tokens, floor(r)+1 - r cancelled to 1.0000000000004
			// ms at 1000/h, a NextAfter 1 ms late).
			roomU := int64(math.Floor(common.SnapWhole(r * eu.unit)))
			unit, perMs := int64(eu.unit), int64(eu.perMs)
			nextU := min((roomU/unit+1)*unit, int64(eu.burstU)) - roomU
			ms = float64((nextU + perMs - 1) / perMs)
		} else {
			// Tokens counted in float64 (the server drains its units in
			// its own rounding): the quotient is widened by 2^-40 of
			// itself before its ceiling, so that one a few ulps short
			// of the server's time is not early. A snap to a whole ms
			// (audit 60) came out 1 ms early where the quotient truly
			// lay just above it (audits 98, 99: 10/s x 2.3 and x 5.1;
			// 0.6/s x 704187 rounded down to exactly 1250 ms); exact
			// rates with a whole Burst take the exact units above.
			target := min(math.Floor(r)+1, b)
			q := (target - r) / d.Limit.Rate * 1000
			ms = math.Ceil(q * (1 + 0x1p-40))
			// Past 2^53 tokens a token is below a float64 step of r:
			// it comes within the first millisecond.
			ms = max(ms, 1)
		}
		if r <= 0 {
			ms += float64(excess / time.Millisecond)
		}
		if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
			out.NextAfter = limit.InfDuration
		} else {
			out.NextAfter = time.Duration(ms) * time.Millisecond
		}
		if out.RetryAfter > 0 {
			out.NextAfter = min(out.NextAfter, out.RetryAfter)
		}
	}
	return out
}
