package limit

import (
	"sync/atomic"
	"unsafe"
)

// Stats is a reading of a limiter for monitoring: what it runs on, how
// full it is, and what it has decided. It is a plain value (publish it
// with expvar.Func, or marshal it as JSON: Engine reads as its name);
// more fields may come.
//
// Counting: every decision that commits counts once, in Admitted or in
// Denied, when it returns: Allow and AllowN (by their answer), Decide,
// DecideN and DecideContext (by Allowed), Reserve and ReserveN (by OK),
// Wait and WaitN (Admitted once they reserve, whether or not the wait
// then completes, as a wait that ends with ErrNoTimer inside a
// testing/synctest bubble does; Denied on ErrAboveBurst and on a
// reservation refused, ErrMaxDebt or ErrPastDeadline; nothing when they
// return before asking the limiter: a context already done, a deadline
// already past, ErrNoTimer from a clock that cannot wait). Peek, PeekN, Tokens and TokensAt decide nothing and count
// nothing; a Reservation's Cancel (and WaitN's, on a context that ends)
// gives tokens back but does not uncount. An Inf limiter counts its
// decisions too (all admitted). A Tier's decisions count in its
// limiter's Stats, by the same rules. The counts are the process's:
// ReadFrom restores debts, not counts. A Multi's decisions count in the Multi's
// Stats, not in its windows' (see Multi.Stats).
//
// The counters cost no contended write: each decision adds one to one
// of a fixed set of cache-line-padded counters, chosen by the calling
// goroutine's stack address, and Stats sums them. Each counter is exact
// for the decisions that have returned before Stats is called; read
// while decisions are in flight, Admitted and Denied are each a
// moment's reading, not a snapshot of the pair.
type Stats struct {
	// Engine is the engine the limiter runs on (Auto for Inf).
	Engine Engine
	// Bytes is the memory the engine holds (Sizes().Total).
	Bytes int
	// Saturation is the estimated probability that a fresh key (one the
	// limiter has never seen) asking for one token now is denied: the
	// limiter's rate of innocent denials for one-token requests, the
	// number to alert on. A request of n tokens meets a debt left by
	// others up to n-1 tokens below a denying one, so it is denied more
	// often: after a table at full debt has drained one token's time the
	// reading falls to 0 while most fresh 2-token requests are still
	// denied (audit 70: 0.000% read, 98.5% denied). docs/capacity.md
	// has its accuracy against measured rates, and WithCapacity the
	// cure. The Buckets engine of at most 4096 lines reads every line
	// once (its floors line by line: the same reading on every call); a
	// larger one reads its eviction-floor histogram and 4096 lines drawn
	// at random positions (a seed and a per-engine count of calls); the count-min the share of cells
	// that would deny in a run of 16,384 cells of each level of its
	// primary generation, from an offset drawn from a process-wide count
	// of Stats calls, so a fixed-seed reading can differ with the calls
	// made before it (by a sample's noise) (their product: the Bloom filter's rate, which
	// leaves out what double hashing adds, so on a count-min of a few
	// cells per level it can read half the measured rate: see
	// docs/capacity.md). Each
	// reading reads about 256 KiB (Buckets) or 512 KiB (count-min) and
	// takes well under a millisecond; it writes no cell and does not
	// allocate (but see Rotations). 0 for Inf.
	Saturation float64
	// Admitted and Denied are the decisions since New that admitted and
	// that denied (see Counting above).
	Admitted, Denied uint64
	// Rotations is the number of periods the count-min has rotated
	// through since New (a clock jump over k periods counts k, as
	// rotator.Stats().Periods does). Rotation is lazy, performed by
	// the first access after its deadline: Stats is such an access, so
	// the count (and Saturation) is up to date with the clock, and a
	// Stats call past a deadline performs that rotation (which allocates
	// the fresh generation), as any decision would. The Buckets engine
	// does not rotate (its debts expire entry by entry, its Period is 0):
	// Rotations is always 0 there, and Saturation is its reading of
	// pressure. 0 for Inf.
	Rotations uint64
}

// statsCalls draws a fresh sample offset per Stats call.
var statsCalls atomic.Uint64

// Stats returns the limiter's current Stats. It panics on the zero
// Limiter. It does not allocate, unless it performs a rotation that is
// due (see Stats.Rotations).
func (l *Limiter) Stats() Stats {
	if l.tb == nil {
		panic(errZero)
	}
	st := Stats{Engine: l.Engine(), Bytes: l.Sizes().Total}
	st.Admitted, st.Denied = l.counts.sum()
	p := l.p.Load()
	switch {
	case l.b != nil:
		st.Saturation = l.b.Saturation(p.unit, p.burstU)
	case l.r != nil:
		l.r.QueryString("") // an access: performs a rotation that is due
		st.Saturation = l.r.Saturation(p.unit, p.burstU, 0, statsCalls.Add(0x9E3779B97F4A7C15))
		st.Rotations = l.r.Stats().Periods
	}
	return st
}

// MarshalText returns the engine's name ("auto", "buckets",
// "count-min"), so that Stats marshals readably.
func (e Engine) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// counterShards is the number of shards of a limiter's decision
// counters: a power of two, enough that the goroutines running at once
// on a large machine rarely share one.
const counterShards = 1 << counterBits

const counterBits = 6

// counters are a limiter's decision counts, sharded so that concurrent
// decisions do not write one cache line: each shard's counts follow 112
// bytes of padding (a shard is 128 bytes: two lines, as the
// adjacent-line prefetcher pairs them), and 112 more end the struct, so
// that no line holds two shards' counts, nor a count and anything that
// precedes or follows the counters (the Limiter's read-mostly fields),
// whatever the struct's alignment.
type counters struct {
	s [counterShards]struct {
		_ [128 - 16]byte
		n [2]atomic.Uint64 // denied, admitted
	}
	_ [128 - 16]byte
}

// count adds one decision, admitted or denied. The shard is a hash of
// the address of a local variable: a goroutine's stack is its own, so
// concurrent goroutines spread over the shards (and one goroutine's
// decisions mostly land on one), with no runtime internals and no
// allocation. Any shard is correct; the choice only spreads the writes.
func (c *counters) count(ok bool) {
	var x byte
	i := uint64(uintptr(unsafe.Pointer(&x))) * 0x9E3779B97F4A7C15 >> (64 - counterBits)
	j := 0
	if ok {
		j = 1
	}
	c.s[i].n[j].Add(1)
}

// sum returns the admitted and denied counts, each summed over the
// shards.
func (c *counters) sum() (admitted, denied uint64) {
	for i := range c.s {
		denied += c.s[i].n[0].Load()
		admitted += c.s[i].n[1].Load()
	}
	return admitted, denied
}

// Stats returns the Multi's Stats. Admitted and Denied count the
// Multi's own decisions (Allow, AllowN, DecideKeys, DecideContext: one
// per call, admitted only if every window admitted), which its windows
// do not count: a window's own Stats (see Windows) count only the calls
// made on that window directly. The rest combines the windows' Stats:
// Bytes and Rotations are their sums, Saturation the probability that
// a fresh key is denied by at least one window, 1 - (1-s1)(1-s2)...
// (the windows hash independently: their seeds differ unless WithSeed
// gave them one), Engine the windows' engine if they all run on one,
// Auto otherwise. It panics on the zero Multi, and does not allocate
// (see Limiter.Stats).
func (m *Multi) Stats() Stats {
	if len(m.ls) == 0 {
		panic("limit: zero Multi; use NewMulti")
	}
	var st Stats
	st.Admitted, st.Denied = m.counts.sum()
	pass := 1.0 // the probability that a fresh key passes every window
	for i, l := range m.ls {
		w := l.Stats()
		if i == 0 {
			st.Engine = w.Engine
		} else if w.Engine != st.Engine {
			st.Engine = Auto
		}
		st.Bytes += w.Bytes
		st.Rotations += w.Rotations
		pass *= 1 - w.Saturation
	}
	st.Saturation = 1 - pass
	return st
}
