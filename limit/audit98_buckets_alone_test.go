package limit_test

import (
	"fmt"
	"hash/fnv"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// a98bkRouted is a hasher that places keys on chosen lines of a Buckets
// engine of n lines (its locate: line = 32-bit half x n >> 32): the keys
// of private get the two lines named there, every other key two distinct
// lines at or above floor; the bits below a line's range, and so the
// fingerprint, come from FNV-1a of the key, mixed.
type a98bkRouted struct {
	n       uint64
	floor   uint64
	private map[string][2]uint64
}

func (h *a98bkRouted) Sum64(k []byte) uint64 { return h.Sum64String(string(k)) }

func (h *a98bkRouted) Sum64String(k string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(k))
	x := f.Sum64()
	x ^= x >> 31
	x *= 0x9E3779B97F4A7C15
	x ^= x >> 29
	var a, b uint64
	if p, ok := h.private[k]; ok {
		a, b = p[0], p[1]
	} else {
		span := h.n - h.floor
		a = h.floor + x%span
		b = h.floor + (x/span)%(span-1)
		if b >= a {
			b++
		}
	}
	return h.half(b, x>>32)<<32 | h.half(a, x)
}

// half returns a 32-bit value whose line is a, offset within a's range by r.
func (h *a98bkRouted) half(a, r uint64) uint64 {
	lo := (a<<32 + h.n - 1) / h.n
	hi := ((a+1)<<32 + h.n - 1) / h.n
	return lo + uint64(uint32(r))%(hi-lo)
}

// TestAudit98BucketsAloneExactUnderFlood: four keys, each alone on its
// own two lines of a Buckets limiter (a hasher that routes every other
// key to the remaining lines), are decided exactly as their own rational
// buckets (a66Oracle: Allowed, Remaining, RetryAfter, ResetAfter,
// NextAfter; ReserveN's OK and Delay; Cancel of a key's last take with
// nothing written since, which comes back whole unless it filled the key
// to MaxDebt), in strict and optimistic mode, while:
//
//   - a flood of 12 times as many keys as the other lines hold, at full
//     and partial debt, and waves of 600 fresh keys at full debt at one
//     instant evict and raise floors on every other line, move their
//     times, and drive Stats().Saturation above 0.5;
//   - the clock sometimes steps back up to 2 s (the durations then count
//     the lag: a98bkLag);
//   - the limiter idles four times, from 2^31 ms to 10 years (a98bkIdle).
//
// Nothing a line holds, nor a structure of the whole engine (the floor
// histogram, its sweeps), may leak into another pair of lines. Doc:
// limit/doc.go, "Exactness": "For a key alone in its cells, the limiter
// is the exact token bucket at millisecond resolution: every decision,
// and every RetryAfter, ResetAfter, NextAfter and Remaining, is that of
// the rational bucket", "The Buckets engine is always exact for New's
// policy"; "Keys and time": durations "from t ... with the lag to the
// time the limiter decided at included"; Reservation.Cancel: "it is given
// back exactly when nothing has written it since", "A reservation that
// filled the key to MaxDebt is never given back (either engine)".
func TestAudit98BucketsAloneExactUnderFlood(t *testing.T) {
	opts := []limit.Option{limit.WithSeed(98), limit.WithCapacity(300, 0.01), limit.WithEngine(limit.Buckets)}
	probe, err := limit.New(10, 20, opts...)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(probe.Sizes().Cells/64 - 1) // the lines (one line of alignment slack)
	if n < 14 {
		t.Fatalf("%d lines; want at least 14", n)
	}
	const alone = 4
	h := &a98bkRouted{n: n, floor: 2 * alone, private: map[string][2]uint64{}}
	for i := range alone {
		h.private[fmt.Sprintf("alone-%d", i)] = [2]uint64{uint64(2 * i), uint64(2*i + 1)}
	}
	for _, strict := range []bool{true, false} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) { a98bkAloneRun(t, h, opts, strict) })
	}
}

// a98bkAloneRun is one run of TestAudit98BucketsAloneExactUnderFlood.
func a98bkAloneRun(t *testing.T, h *a98bkRouted, opts []limit.Option, strict bool) {
	clk := limittest.NewFakeClock()
	clk.Set(1_750_000_000_000)
	l, err := limit.New(10, 20, append(opts, limit.WithHasher(func(uint64) sketch.Hasher { return h }), limit.WithClock(clk), limit.WithStrict(strict))...)
	if err != nil {
		t.Fatal(err)
	}
	pol := a66Pol{10, 1, 20}
	start := clk.NowMillis()
	hw := start
	type key struct {
		name   string
		o      *a66Oracle
		last   *limit.Reservation // the key's last write, when a reservation
		before *a66Oracle         // the oracle before it; nil if it filled the key to MaxDebt
	}
	keys := make([]*key, len(h.private))
	for i := range keys {
		keys[i] = &key{name: fmt.Sprintf("alone-%d", i), o: &a66Oracle{d: new(big.Rat), at: start, max: big.NewRat(4000, 1)}}
	}
	rng := rand.New(rand.NewPCG(98, 1))
	floodKeys := int(h.n-h.floor) * 14 * 12
	flooded, cancels, checked, lagged, maxSat := 0, 0, 0, 0, 0.0
	for step := range 3000 {
		if idle, ok := a98bkIdle[step]; ok {
			clk.Advance(idle) // a long idle: every debt drains, every line's time is far behind
		} else if rng.IntN(50) == 0 {
			clk.Set(clk.NowMillis() - int64(rng.IntN(2000))) // a step back
		} else {
			clk.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
		now := l.Now() // observed: the limiter decides at hw from now on
		hw = max(hw, now.UnixMilli())
		ms := hw
		lag := time.Duration(hw-now.UnixMilli()) * time.Millisecond
		if lag > 0 {
			lagged++
		}
		// The flood: a slice of it each step, at full or partial debt, and
		// every 100 steps a wave of fresh keys at full debt at one instant.
		if step%100 == 0 {
			for i := range 600 {
				l.AllowN(now, fmt.Sprintf("wave-%d-%d", step, i), 20)
			}
			flooded += 600
			if s := l.Stats().Saturation; s > maxSat {
				maxSat = s
			}
		}
		for range 40 {
			f := rng.IntN(floodKeys)
			fn := 20 // most at full debt, a quarter at partial debts
			if f%4 == 0 {
				fn = 1 + f%20
			}
			l.AllowN(now, fmt.Sprintf("flood-%d", f), fn)
			flooded++
		}
		k := keys[rng.IntN(len(keys))]
		k.o.advance(ms)
		req := 1 + rng.IntN(20)
		if k.last != nil && rng.IntN(3) == 0 {
			// Cancel the key's last write: nothing has written its entry
			// since, so it comes back whole.
			k.last.Cancel()
			if k.before != nil {
				k.before.advance(ms)
				k.o = k.before
			}
			k.last, k.before = nil, nil
			cancels++
		}
		switch rng.IntN(4) {
		case 0:
			before := k.o.clone()
			wantOK, wantDelay := k.o.reserve(pol, req)
			r := l.ReserveN(now, k.name, req)
			if wantOK {
				wantDelay += lag
			}
			if r.OK() != wantOK || (wantOK && r.DelayFrom(now) != wantDelay) {
				t.Fatalf("step %d: %s ReserveN(%d) at +%d ms: OK %v delay %v; its own bucket (debt %s ms before): OK %v delay %v",
					step, k.name, req, ms-start, r.OK(), r.DelayFrom(now), before.d.FloatString(3), wantOK, wantDelay)
			}
			if wantOK {
				k.last, k.before = r, before
				if k.o.d.Cmp(k.o.max) == 0 {
					// "A reservation that filled the key to MaxDebt is
					// never given back (either engine)".
					k.before = nil
				}
			}
		case 1:
			want := a98bkLag(k.o.decide(pol, req, 0, false), lag)
			got := l.PeekN(now, k.name, req)
			if !a98bkSame(t, step, k.name+" PeekN", req, got, want) {
				return
			}
		default:
			d := k.o.d.FloatString(3)
			want := a98bkLag(k.o.decide(pol, req, 0, true), lag)
			got := l.DecideN(now, k.name, req)
			if !a98bkSame(t, step, k.name+" DecideN (debt "+d+" ms)", req, got, want) {
				return
			}
			if got.Allowed {
				k.last, k.before = nil, nil
			}
		}
		checked++
	}
	if cancels < 100 || lagged < 300 || maxSat < 0.5 {
		t.Fatalf("%d cancels, %d steps behind the limiter's time, Saturation at most %v after the waves: the run did not exercise its cases", cancels, lagged, maxSat)
	}
	t.Logf("strict %v: %d lines, %d checked decisions (%d behind), %d cancels, %d flood requests, Saturation up to %.3f", strict, h.n, checked, lagged, cancels, flooded, maxSat)
}

// a98bkIdle are the long idles of TestAudit98BucketsAloneExactUnderFlood,
// by step: 2^31 ms and 2^32 ms (and a little), 30 days, 10 years.
var a98bkIdle = map[int]time.Duration{
	700:  (1<<31 + 12_345) * time.Millisecond,
	1400: (1<<32 + 777) * time.Millisecond,
	2100: 30 * 24 * time.Hour,
	2800: 10 * 365 * 24 * time.Hour,
}

// a98bkLag returns d's durations counted from a time lag before the one
// decided at (limit/doc.go, "Keys and time": "Durations are measured so
// that they are never early: from t ... with the lag to the time the
// limiter decided at included").
func a98bkLag(d limit.Decision, lag time.Duration) limit.Decision {
	for _, x := range []*time.Duration{&d.RetryAfter, &d.ResetAfter, &d.NextAfter} {
		if *x > 0 && *x != limit.InfDuration {
			*x += lag
		}
	}
	return d
}

// a98bkSame reports whether got has want's decision and durations.
func a98bkSame(t *testing.T, step int, what string, n int, got, want limit.Decision) bool {
	t.Helper()
	if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryAfter != want.RetryAfter ||
		got.ResetAfter != want.ResetAfter || got.NextAfter != want.NextAfter || got.Never != want.Never {
		t.Errorf("step %d: %s(%d): got %+v; its own bucket: %+v", step, what, n, got, want)
		return false
	}
	return true
}
