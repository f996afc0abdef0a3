// Package limit is a per-key token bucket over an unbounded key space in
// constant memory: a limiter for every client IP, user or API key that
// never needs purging. It follows golang.org/x/time/rate's conventions
// (Limit, Every, Inf; AllowN(t, key, n), ReserveN, WaitN) and answers a
// Decision in the shape of redis_rate's Result.
//
// # Model: debt form
//
// Each key owes a debt. A request for n tokens adds n; the debt drains at
// Limit per second and never goes below 0. A request is admitted iff
// debt + n <= burst. This is the token bucket (tokens = burst - debt)
// written so that an absent key is a zero debt: the state of every key
// lives in a fixed-size engine (see "Engines"), whatever the number of
// keys, hashed with SipHash keyed from crypto/rand (WithSeed to fix it).
// The engine counts debt in units chosen so that its arithmetic is exact
// at the clock's milliseconds (see "Exactness"); below, debt is in
// tokens. Strict mode (the default) is one call:
//
//	admitted := engine.TryUpdate(key, n, burst)  // exact under contention
//	if !admitted && rejectCost > 0 { engine.Update(key, rejectCost) }
//
// Optimistic mode (WithStrict(false)) is Query, then Update if it fits: a
// little cheaper on the admitted path, but callers racing on one key can
// all pass the read, so it over-admits by at most the number of racers.
//
// # Engines
//
// Two engines hold the debts (WithEngine; Limiter.Engine says which one
// a limiter runs on):
//
//   - Buckets (internal/bucket, docs/design.md section 8): 64-byte lines
//     of 14 entries, a key's debt stored as the 16-bit residue of the
//     tick at which it drains to 0, next to a 16-bit fingerprint, in one
//     of two lines chosen by the keyed hash. A key at its limit takes
//     about 5 bytes at 1% to 0.1% of fresh keys denied (more below about
//     7e-4, where the fingerprints set the size: Sizing), and the
//     default 6.1 MiB holds a million keys at full
//     debt while denying 0.03% of fresh keys (measured, docs/capacity.md;
//     Capacity(0.0003) reads lower, as it keeps Suggest's margin). It
//     holds a limiter only where it is exact: MaxDebt must drain within
//     61,438 ticks of at most a millisecond, a token and a millisecond
//     each being a whole number of ticks, at most 16,384 ticks to the
//     millisecond, and MaxDebt's ticks and a millisecond's together at
//     most 65,534 (MaxDebt/limit <= 61.4 s where a token is a whole
//     number of milliseconds, or a millisecond a whole number of tokens:
//     limit.New(10, 20), New(1000, 1000), New(1, 30), Every(d) for d a
//     whole number of ms with burst <= 30.7 s / d; 61.4 s divided by the
//     ticks a millisecond takes otherwise: New(0.3, 5) has a token of
//     10000/3 ms, 3 ticks a millisecond, so MaxDebt must drain within
//     20.48 s, and its default MaxDebt of 10 tokens, 33.3 s, runs on
//     CountMin, as does New(7.3, 20), 73 ticks a millisecond; not
//     New(18387, 1), whose millisecond is 18,387 ticks of a 1/18,387 ms
//     token, nor New(8e6, 30000), whose 60,000 ticks of MaxDebt leave
//     no room for a millisecond of 8,000). It does not rotate (Period
//     is 0): a key shares its debt only with a key of the
//     same fingerprint in one of its lines, for as long as both are
//     live, or inherits a line's eviction floor once the table is past
//     its capacity. It counts time in 47 bits of milliseconds after New
//     (the first New: a restore carries the snapshot's scale on, its
//     downtime included, as a limiter that never stopped counts it):
//     a clock more than 2^47 ms (4,460 years) on counts as that instant,
//     where debts stop draining and a Reservation's Delay is measured
//     from it (too early); a limiter is not meant to see such a clock.
//   - CountMin: a rotator of count-min sketches (Decay:
//     decay.Linear(limit), Lo: 0, Hi: MaxDebt, Aggregator: Min) in
//     Generations x Levels x CellsPerLevel x 8 bytes: any rate, any
//     MaxDebt up to 2^24, seeds re-rolled every Period (see "Rotation and
//     amnesty"), and about 10 cells per key at its limit for 1% of fresh
//     keys denied: the default memory denies 16% of fresh keys with 100k
//     keys at full debt (docs/capacity.md).
//
// Auto, the default, picks Buckets wherever it is exact and CountMin
// elsewhere (rates whose MaxDebt takes longer than those 61,438 ticks to
// drain: 61.4 s at most, less where a millisecond takes several ticks;
// rates that are not a whole number of ticks per token; a MaxDebt or a
// RejectCost that is not a whole number of ticks); WithSize,
// WithGenerations, WithPeriod and WithConservativeUpdate(true) select
// CountMin, and so does a WithCapacity that only the count-min holds
// within MaxBytes (below about 7e-6, for 1,000 keys or more, the count-min is also the
// smaller: Sizing). Both engines give the
// same decisions for a key alone in its cells and every guarantee below,
// with one difference in what a Cancel gives back (see
// Reservation.Cancel), one in a rare race (first writes of one key
// racing into two lines, merged: Buckets then reads high by up to the
// lines' idle time before the race and an eviction floor of the key's
// lines per entry, at most MaxDebt; docs/design.md,
// "Concurrency: the validated CAS"), and Buckets' 4,460-year horizon above. WithCapacity sizes either engine for a number of
// keys at their limit and a rate of fresh-key denials; Suggest says what
// that costs in each, Limiter.Capacity how many such keys a limiter
// holds; Stats reads how saturated the engine is now, and counts the
// decisions admitted and denied and the count-min's rotations (sharded
// counters: no contended write on the decision paths).
//
// # Exactness
//
// For a key alone in its cells, the limiter is the exact token bucket at
// millisecond resolution: every decision, and every RetryAfter,
// ResetAfter, NextAfter and Remaining, is that of the rational bucket
// (checked against big.Rat arithmetic over random rates, bursts and
// schedules, on both engines), when Exact reports true. The Buckets
// engine is always exact for New's policy (it is chosen only where it
// is: see "Engines").
// The count-min is exact when the rate is a
// short fraction (p/q per second, or Every(d) for d a whole number of
// milliseconds or a short fraction of one; Every(3*time.Second) is
// exactly 1/3 per second) and MaxDebt drains within 2^24 units, a unit
// being the largest that divides both a token and a millisecond's drain
// (with the default MaxDebt of 2 x burst: bursts up to 2330 at 1000/h,
// 139 at 1/minute, 83886 at 10/s), MaxDebt and RejectCost in units
// being multiples of the grid its cells hold exactly (whole units, or
// halves, quarters and finer where MaxDebt leaves bits to spare:
// WithMaxDebt(40.0001) at 10/s, 4000.01 units, is not). Otherwise decisions are never
// earlier than the exact bucket's, and late in one of two ways
// (internal/units has the derivation):
//
//   - A short fraction keeps its units past 2^24 while its drain is at
//     most 4096 units a millisecond and the bit lengths of the unit's odd
//     part and of MaxDebt (rounded up) add up to at most 24, so that a
//     token's adds stay exact (1/minute: a unit of 60000 = 2^5 x 1875,
//     11 bits, up to MaxDebt 8191). Decisions are then late by the
//     float32 rounding of the key's stored debt: each write while the
//     key is in debt (an admission, a RejectCost, a cancelled
//     reservation's give-back) rounds it up by less than 2^-23 of
//     itself, and these steps add up until the debt has drained to 0 (Every(24h) with burst 30: a step is 256 ms at 30
//     days of debt, and 40 admissions 1 day and 255 ms apart, each
//     storing 30 days, leave the key 10.2 s late; docs/precision.md,
//     workload b).
//   - Any other rate, a short fraction outside those bounds included
//     (Every(time.Minute) at burst 4096, whose MaxDebt 8192 takes 14
//     bits; 5001/s past 2^24 units, a drain of 5001), counts tokens of
//     a token's ms rounded up to m = 24 - bits(MaxDebt) significant
//     bits, at least 8, so that a token's adds stay exact up to MaxDebt
//     65535 (5e-4 = 1/2000 at burst 1000: a token of 2,000,128 units of
//     a millisecond's drain, not 2,000,000): the rate is rounded down by
//     less than 2^(1-m) of itself, 2^-7 at most (2^-12 at MaxDebt 2000;
//     one step of m bits on a value just above a power of two).
//
// Either way a full burst is
// admitted at once from an empty key, and RetryAfter predicts the
// limiter's own next decision to the millisecond: a retry at
// t+RetryAfter is admitted and one 1 ms earlier is not. One exception:
// on the count-min, a key read at MaxDebt where MaxDebt in units is not
// a float32 (above about 65,536 tokens at such a rate) is held at the
// float32 above MaxDebt, as its cells may be, and its durations may be
// late by up to that step's drain, less than 2^-23 of MaxDebt's (audit
// 67: 40 ms of a 1.06 s RetryAfter at 0.944/s with MaxDebt 958687),
// never early (audit 66 found them early when read as MaxDebt). A
// Reservation's Delay is such a duration: with MaxDebt = burst there,
// ReserveN or WaitN of the full burst from an empty key may wait up to
// that step (the 40 ms above), where AllowN of it is admitted at once
// (audit 90, TestAudit90ExactReserveFullBurstHeldMaxDebt).
//
// Under contention on one key, strict decisions never admit past the
// burst on either engine. On Buckets a key's own racing requests can,
// rarely, deny one with room (its racing first writes into two lines,
// or a move past the engine's slack; 0 to 3 in 18,000 racing calls under
// stress: docs/design.md, section 8, "Exact TryUpdate for one key").
//
// # Error side
//
// A key's read debt is at least its own debt on either engine: with the
// count-min's Min aggregation every cell holds the key's debt plus its
// collisions' debt, rounded up in float32; in the Buckets engine a key
// reads the largest of the entries carrying its fingerprint in its two
// lines and of the lines' eviction floors, which cover every debt ever
// evicted (the one-sided argument is in docs/design.md). So a collision
// can only deny a key early, never admit it past its own limit. The durations of a Decision and a Reservation are
// derived from the debt the sketch reads, so they are exact for a key
// alone in its cells and only late, never early, under collisions; a
// Reservation's from the debt its own take left, so reservations of one
// key racing with each other get a serial order's delays (see
// ReserveN).
//
// # Keys and time
//
// Keys are strings, and each operation has a short form at the clock's
// reading and one full form taking t first, with x/time/rate's names:
// Allow and AllowN(t, key, n), Reserve and ReserveN, Tokens and TokensAt,
// and ours, Decide and DecideN, Peek and PeekN (the module's naming rule:
// package sketch, "Naming"). Wait and WaitN(ctx, key, n) take no t, as
// x/time/rate's do: they wait on the limiter's clock.
//
// Every time read and every wait goes through the limiter's clock
// (WithClock): Now, Reservation.Delay, WaitN's timer (a [Clock] can
// wait, so a fake one makes waiting deterministic). The default clock is
// the runtime's monotonic clock, which a testing/synctest bubble does not
// fake: in a bubble give the limiter limittest.TimeClock, on package
// time (a default-clock WaitN there returns ErrNoTimer). The full forms take
// t as x/time/rate's do, with one deviation: all keys share one
// time scale, so a t after the clock's reading counts as that reading (a
// future t must not drain every other key early), and a t before a time
// already used counts as that time. Durations are measured so that they
// are never early: from t, or from the clock's reading when t is ahead of
// it, with the lag to the time the limiter decided at included (after a
// clock stepped back, a t between its reading and that time is both).
// The short forms decide at Now, the
// clock's own reading: after a clock stepped back, a stale t like any
// other (their waits are longer by the lag). docs/readings.md has the
// x/time/rate parity table.
//
// # Rotation and amnesty
//
// This section is the count-min's; the Buckets engine does not rotate,
// so it never amnesties a debt. Rotation exists to re-roll the seeds, so that a key unlucky enough to
// share all its cells with a heavy hitter is unlucky for one Period at
// most. A generation becomes the primary (the one read) after it has
// received every write for (G-1) periods, G = Generations. What it has
// not seen is the debt a key already had when the generation was built,
// and that debt drains at rate. So a key that went silent at MaxDebt is
// never amnestied when (G-1) x Period x rate >= MaxDebt: by the time the
// generation that missed its debt is read, the debt has drained anyway.
// New refuses a shorter Period. A key that keeps being admitted at
// exactly its rate can keep its old debt unseen by the young generation
// (both drain at the same rate), and gains at most that debt, <= MaxDebt,
// once per (G-1) x Period; the default Period is PeriodFactor (16) times
// the minimum, which bounds that gain to 1/16 of the rate in the worst
// case (a client hammering at the limit), and to nothing for any client
// that pauses for MaxDebt/rate in a Period. A Period is at most the
// longest time.Duration (about 292 years): where 16 times the minimum
// is longer (a MaxDebt that drains in more than about 18 x (G-1) years,
// Every(24h) with a MaxDebt of 20,000) the factor is smaller and the
// gain bound larger (1/5.3 for that one), and where the minimum itself
// is longer (a MaxDebt that drains in more than 292 x (G-1) years: 1e-10
// a second with burst 1, or Every(24h) with a MaxDebt of 300,000) a
// silent key's debt can be amnestied after two such Periods, 584 years
// of its clock.
//
// # Tiers and changing the limit
//
// One limiter can enforce several policies on the same keys: per-plan or
// per-route limits (redis_rate takes a Limit on every call), and a limit
// changed at run time (x/time/rate's SetLimit and SetBurst), without a
// new limiter and without losing any key's state. The engine drains
// every key's debt at one rate R, New's; a policy of rate r and burst b
// is a cost of n x R/r per request of n tokens against a burst of
// b x R/r, in tokens of R. So a key's debt is held as time to drain, and
// every policy of the limiter sees the same debt:
//
//	l, _ := limit.New(10, 20, limit.WithMaxDebt(80))
//	free, _ := l.Tier("free", 2.5, 20) // 20 requests of 400 ms: 8 s of debt
//	paid, _ := l.Tier("paid", 10, 20)  // New's policy, under its own name
//	free.Allow(key); paid.DecideContext(ctx, key, 1)
//
// Limiter.Tier builds a policy once (big.Rat arithmetic; keep the Tier,
// do not build one per request); a *Tier has the decision methods of
// the Limiter (Allow, AllowN, Decide, DecideN, Peek, PeekN, Reserve,
// ReserveN, Wait, WaitN, Tokens, TokensAt, DecideContext, Policies, so
// httplimit takes it), at the same cost (Allow does not allocate). Its
// Decisions carry its Limit, Burst and name, and every duration and
// Remaining in its tokens.
//
// SetLimit and SetBurst replace the Limiter's own policy whole (one
// pointer: a decision racing them uses the old policy or the new one,
// never a mix); Tiers are not changed by them. A key in debt keeps its
// debt as time: after SetLimit it still drains what it owes in the same
// time (ResetAfter), and pays the new cost for new requests against the
// burst in the new tokens (x/time/rate keeps the token count instead;
// docs/migrating.md compares). Limit, Burst, Policies and Exact read the
// current policy; MaxDebt stays New's, in New's tokens.
//
// Limits of the scaling. A policy's burst in the engine's units must fit
// what a key can carry, MaxDebt (the count-min's Hi, the Buckets
// engine's span; neither clamps a burst silently): Tier, SetLimit and
// SetBurst return a *MaxDebtError naming the MaxDebt (in tokens of
// New's limit) the policy needs. To offer tiers down to R/k with burst
// b, build with WithMaxDebt(k x b) (on Buckets, MaxDebt must still drain
// within its 61.4 s). Reservations of any policy queue up to the
// limiter's MaxDebt.
//
// Exactness of a policy. A token of rate r costs 1000 x drain / r of the
// engine's units (drain: units drained per ms; New's token is 1000 x
// drain / R), rounded up to what the engine stores exactly: whole units
// on Buckets (its ticks), multiples of 2^-k units on an exact count-min
// (the finest grid whose multiples up to MaxDebt a float32 holds, so
// debts mixing policies stay exact), and elsewhere the significant bits
// that keep MaxDebt tokens exact in a float32, or a whole number of
// New's tokens when that is less (they add as exactly as New's own:
// a tier R/k costs k of them on any limiter, so WithMaxDebt(k x b)
// holds its burst b). The rounding is never
// early: a request costs at least its share, the policy's effective rate
// is at most r, short of it by less than one grid step per token, and
// its full burst is admitted at once from an empty key. Tier.Exact (and
// Limiter.Exact after SetLimit) reports a policy whose cost needed no
// rounding on an exact limiter: then its decisions and durations are
// the rational bucket (r, b)'s, as New's are. Every tier R/k for a whole
// k is exact on an exact limiter; other ratios are where R/r times New's
// unit is on the grid. An inexact policy is never early against its own
// bucket, and its RetryAfter still predicts its own next decision to
// the millisecond; a key shared with it counts its burst at the rounded
// cost (at most b grid steps of drain more time than b x R/r). A Multi's
// windows are Limiters: SetLimit on a window works; a Multi of Tiers is
// not provided (build each window as a Limiter).
//
// # Multi-window
//
// Multi decides several limiters all-or-nothing: see its doc for what a
// concurrent reader can observe.
//
// # Saving and restoring
//
// A restart would otherwise forgive every abuser. A Limiter implements
// io.WriterTo and io.ReaderFrom (with SnapshotSize), so package
// sketch/snapshot's Saver, WriteFile and Load keep it on disk:
//
//	l := limit.MustNew(10, 20)
//	if err := snapshot.Load(path, l); err != nil && !errors.Is(err, snapshot.ErrNoSnapshot) {
//		log.Print(err) // l is empty, as built: serve anyway
//	}
//	s, _ := snapshot.NewSaver(path, time.Second, l)
//	defer s.Close() // one last save
//
// The snapshot holds the hidden state: the engine's cells or lines, each
// debt with its time, and the hash seed. ReadFrom takes it into a
// limiter freshly built with the same configuration and any seed: the
// snapshot's seed replaces the limiter's (users never see it, and
// WithSeed is not needed), so every key maps to the cells it had.
// "The same configuration" is what the engine's state means: the
// engine, its base units (the unit of a token and the drain per
// millisecond, which the limit and MaxDebt set: see "Exactness"), MaxDebt,
// the size, and for CountMin Generations, Period and conservative
// update. Anything else is refused, before the limiter is touched, with
// an error matching sketch.ErrSnapshotMismatch; a damaged or truncated
// snapshot with one matching sketch.ErrCorruptSnapshot (or, when the
// damage is in a header field the limiter compares, ErrSnapshotMismatch
// naming it: the checksum ends the stream, read after the header);
// either way the
// limiter is left empty, as built. The burst, RejectCost, the name and
// the mode are configuration, not state: the restoring process's apply,
// as x/time/rate's SetBurst would (to change the burst across a restart,
// fix MaxDebt with WithMaxDebt, since its default is twice the burst).
// But the engine is in the snapshot, and under Auto a RejectCost or a
// MaxDebt that is not a whole number of the Buckets engine's ticks picks
// the count-min: a change of either that moves the limiter across
// engines (New(1000, 5) and New(1000, 5, WithRejectCost(0.5))) is
// refused with ErrSnapshotMismatch naming Engine, the limiter left
// empty; WithEngine pins one.
//
// Time: debts are restored as of the snapshot's instant and drain by the
// wall time elapsed since (the limiter clock's time.Time), so a debt
// saved 5 s ago has drained 5 s worth, never more, and never grows: the
// restored limiter decides as the never-stopped one would at the same
// wall time (TestRestoreDifferential, on both engines). A restoring
// clock that reads earlier than the snapshot's instant counts its
// reading as that instant (no drain at the restore), and drains from
// there as it advances: ahead of a never-stopped limiter, which would
// not drain before the instant, by up to that lag (10 s of drain for a
// clock 10 s behind) until the clock reaches the instant. A count-min's
// rotation deadline moves the same way.
//
// Consistency: WriteTo runs alongside every other method and never
// blocks them. Each cell (count-min) or line (Buckets: its entries, then
// its header, as a decision reads them) is read with atomic loads, one
// after the other, so a snapshot taken under traffic is not a global
// cut: every key's restored debt is at least its debt when its cells
// were read, drained since (the one-sided rule holds), and a request in
// flight may be in it or not. What a crash loses is the requests since
// the last completed save (snapshot's package documentation); a
// SIGKILL test (sketch/snapshot) checks that a restored key is never
// below the debt its last durable save captured, drained since. A Multi
// is saved and restored window by window (each window is a Limiter).
// The format and its measured sizes and costs are in docs/snapshots.md.
//
// # Input
//
// ParseLimit reads a rate from a flag, an environment variable or a
// configuration file ("100/s", "1000/h", "5/m", "10/250ms", ulule's
// "1000-H", "inf"); Limit is an encoding.TextMarshaler and
// TextUnmarshaler whose text reads back to the same Limit, bit for bit
// (but for +Inf, which New takes as Inf: its "inf" reads back as Inf).
//
// New returns a *sketch.ConfigError (errors.Is(err,
// sketch.ErrInvalidConfig)) for a NaN, zero, negative or too large limit,
// a burst < 1, a nil Option or an invalid option (WithEngine(Buckets)
// where the Buckets engine would not be exact, count-min options with
// it, WithCapacity with WithSize); every size is bounded
// (MaxGenerations, WithMaxBytes). n <= 0 panics ("limit: AllowN: n must
// be > 0; got 0"). n > burst is never admitted and its Decision says
// Never, but on an Inf limiter, which admits every n, as x/time/rate's
// Inf does. The zero Limiter and the zero Multi panic ("limit: zero
// Limiter; use New") rather than admit. WaitN's errors are *WaitError
// values matched with errors.Is (ErrAboveBurst, ErrMaxDebt,
// ErrPastDeadline, which is also context.DeadlineExceeded, ErrNoTimer).
package limit
