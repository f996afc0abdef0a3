package limit_test

// Audit 3: package limit as a per-key peer of golang.org/x/time/rate.
//
// The differential test runs one key of a limit.Limiter next to two
// x/time/rate Limiters fed the same admitted requests:
//
//   - "scaled": x/time/rate with time and tokens rescaled so that its
//     float64 arithmetic is exact (a token is U units, a millisecond of
//     ours is one second of its, its Limit is D units per second, U/D
//     being 1000/rate in lowest terms). It is x/time/rate's algorithm
//     run on integers, so it is the rational bucket the package doc
//     promises ("for a key alone in its cells, the limiter is the exact
//     token bucket at millisecond resolution"), and every decision,
//     every delay and every token count is compared with it exactly.
//   - "plain": x/time/rate with the same Limit and burst on the same
//     times. Its float64 tokens are a few ulps off at the boundaries a
//     millisecond schedule hits all the time, so it is compared until the
//     first decision where it disagrees with the scaled one at a boundary
//     (|tokens - n| < 1e-6); any other disagreement fails the test.
//
// Where package limit documents a deviation from x/time/rate the oracle
// follows the documented rule (limit/doc.go and docs/readings.md, "x/time
// /rate parity"):
//   - a t before a time already used counts as that time, a t after the
//     clock's reading as that reading; durations are measured from t for a
//     stale t (the lag included), from the clock's reading for a future
//     one;
//   - a reservation beyond MaxDebt is not OK and debits nothing
//     (x/time/rate queues without bound), and WaitN refuses it with
//     ErrMaxDebt;
//   - Cancel is all or nothing and does not depend on t: a reservation
//     no request has written over since reads as if never taken (also
//     after its time to act, where x/time/rate's CancelAt is a no-op);
//     one written over keeps its debit (Buckets always; the count-min
//     gives it back when everything written since was in the
//     reservation's millisecond, below MaxDebt); one that filled the key
//     to MaxDebt is never given back. x/time/rate is then rebuilt from
//     the requests still standing.
//   - the count-min's rotation may amnesty a key that stays in debt
//     across (G-1) periods ("Rotation and amnesty"): for it, every stretch
//     of activity is kept shorter than the Period, broken by idle gaps of
//     at least a Period (which drain MaxDebt: New refuses shorter ones).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"golang.org/x/time/rate"
	"pgregory.net/rapid"
)

// a3Rate is a rate in the exact domain: P/Q per second in lowest terms,
// a token being U units and a millisecond draining D units (U/D =
// 1000Q/P in lowest terms).
type a3Rate struct {
	lim  limit.Limit
	P, Q int64
	U, D int64
	desc string
}

func a3gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func a3MakeRate(lim limit.Limit, p, q int64, desc string) a3Rate {
	g := a3gcd(p, q)
	p, q = p/g, q/g
	num, den := 1000*q, p
	g = a3gcd(num, den)
	return a3Rate{lim: lim, P: p, Q: q, U: num / g, D: den / g, desc: desc}
}

// a3DrawRate draws a rate as users write them: p/q per second, Every(d)
// for whole ms, slow Every(minutes), fast rates, Every(2^j ms).
func a3DrawRate(rt *rapid.T) a3Rate {
	switch rapid.IntRange(0, 4).Draw(rt, "rateKind") {
	case 0:
		p := rapid.Int64Range(1, 2000).Draw(rt, "p")
		q := rapid.Int64Range(1, 60).Draw(rt, "q")
		return a3MakeRate(limit.Limit(p)/limit.Limit(q), p, q, fmt.Sprintf("%d/%d per s", p, q))
	case 1:
		d := rapid.Int64Range(1, 5000).Draw(rt, "everyMs")
		return a3MakeRate(limit.Every(time.Duration(d)*time.Millisecond), 1000, d, fmt.Sprintf("Every(%dms)", d))
	case 2:
		m := rapid.Int64Range(1, 60).Draw(rt, "everyMin")
		return a3MakeRate(limit.Every(time.Duration(m)*time.Minute), 1, 60*m, fmt.Sprintf("Every(%dm)", m))
	case 3:
		// a x b per second with b a divisor of 1000: a drain of at most
		// a <= 4096 units per ms (see TestAudit3PeerExactHighDrain for
		// the others).
		a := rapid.Int64Range(1, 4096).Draw(rt, "fastA")
		b := rapid.SampledFrom([]int64{1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000}).Draw(rt, "fastB")
		p := max(a*b, 2000)
		return a3MakeRate(limit.Limit(p), p, 1, fmt.Sprintf("%d/s", p))
	default:
		j := rapid.IntRange(0, 12).Draw(rt, "pow2")
		return a3MakeRate(limit.Every(time.Duration(1<<j)*time.Millisecond), 1000, 1<<j, fmt.Sprintf("Every(%dms)", 1<<j))
	}
}

func a3ceil(a, b int64) int64 { // a > 0, b > 0
	return (a + b - 1) / b
}

func a3floor(a, b int64) int64 { // b > 0
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// a3xs is the scaled clock: one ms of ours is one second of x/time/rate's.
func a3xs(ms int64) time.Time { return time.Unix(ms, 0) }

// a3at is our clock (limittest.FakeClock's scale: Unix ms).
func a3at(ms int64) time.Time { return time.UnixMilli(ms) }

// a3msOf converts an x/time/rate delay on the scaled clock (ns of scaled
// seconds) into our whole ms, rounding up but forgiving the last few ns
// of float64 rounding in durationFromTokens (the exact delays are
// multiples of 1/D ms, D <= 200,000, far from a few ns).
func a3msOf(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	if d == rate.InfDuration {
		return math.MaxInt64
	}
	return int64(a3ceil(int64(d)-1000, int64(time.Second)))
}

type a3Res struct {
	r        *limit.Reservation
	ok       bool
	id, seq  int64
	ms       int64 // the time the limiter decided at
	n        int
	filled   bool // took the key to MaxDebt
	canceled bool
}

type a3Write struct {
	seq, ms   int64
	debtU     int64
	id        int64 // the debit's
	cancel    bool  // a Cancel's give-back
	withdrawn bool  // the debit was given back since
}

type a3Debit struct {
	id int64
	ms int64
	n  int
}

// a3Counts counts what the differential runs exercised (logged).
var a3Counts struct {
	admitted, denied, never, resOK, resMaxDebt, cancelGive, cancelKeep, cancelNoop,
	waitNow, waitWaited, waitCtx, waitRefused, idle, back atomic.Int64
}

// a3Sim drives one key of a Limiter and its x/time/rate peers.
type a3Sim struct {
	rt        *rapid.T
	l         *limit.Limiter
	clk       *limittest.FakeClock
	key       string
	r         a3Rate
	burst     int
	bU, mdU   int64
	countMin  bool
	period    int64 // ms, count-min only
	now, hw   int64 // the clock's reading, the limiter's high-water mark
	active    int64 // start of the current stretch of activity (count-min)
	xs, xp    *rate.Limiter
	log       []a3Debit
	seq, ids  int64
	writes    []a3Write
	res       []*a3Res
	step      int
	plainDrop string
	start     int64
	trace     []string
}

func (s *a3Sim) tracef(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("step %d clock %d hw %d: ", s.step, s.now-s.start, s.hw-s.start)+fmt.Sprintf(format, args...))
}

func (s *a3Sim) fatalf(format string, args ...any) {
	s.rt.Helper()
	tr := s.trace
	if len(tr) > 25 {
		tr = tr[len(tr)-25:]
	}
	s.rt.Fatalf("%s burst=%d maxDebtU=%d U=%d D=%d engine=%v period=%dms step %d: %s\nlast ops (ms relative to the start):\n  %s",
		s.r.desc, s.burst, s.mdU, s.r.U, s.r.D, s.l.Engine(), s.period, s.step, fmt.Sprintf(format, args...), strings.Join(tr, "\n  "))
}

func (s *a3Sim) newPeers() {
	s.xs = rate.NewLimiter(rate.Limit(s.r.D), s.burst*int(s.r.U))
	if s.plainDrop == "" {
		s.xp = rate.NewLimiter(rate.Limit(s.r.lim), s.burst)
	}
}

// rebuild replays the standing debits into fresh peers (after a Cancel
// that gave a reservation back: the key reads as if it were never taken).
func (s *a3Sim) rebuild() {
	s.newPeers()
	for _, e := range s.log {
		if !s.xs.ReserveN(a3xs(e.ms), e.n*int(s.r.U)).OK() {
			s.fatalf("replay refused")
		}
		if s.xp != nil {
			s.xp.ReserveN(a3at(e.ms), e.n)
		}
	}
}

// tokU is the scaled peer's tokens at ms, in units (an exact integer).
func (s *a3Sim) tokU(ms int64) int64 {
	v := s.xs.TokensAt(a3xs(ms))
	if v != math.Trunc(v) || math.Abs(v) > 1<<52 {
		s.fatalf("scaled peer not exact: %v", v)
	}
	return int64(v)
}

func (s *a3Sim) debtU(ms int64) int64 { return s.bU - s.tokU(ms) }

// eff is the time the limiter decides a request of t at, and base the
// time its durations are measured from.
//
// The limiter's clock reading is the clock's through the high-water mark
// (Limiter.Now never goes back: sketch.Clock, "a value lower than one
// seen before counts as zero elapsed time").
func (s *a3Sim) eff(t int64) (eff, base int64) {
	base = min(t, s.lnow())
	return max(base, s.hw), base
}

// lnow is Limiter.Now: the clock's reading, before the high-water mark
// when the clock stepped back (the short forms then decide at the mark,
// and their waits count from the reading, longer by the lag).
func (s *a3Sim) lnow() int64 { return s.now }

// observe records that the limiter used eff.
func (s *a3Sim) observe(eff int64) { s.hw = max(s.hw, eff) }

// record notes a debit the scaled peer already holds.
func (s *a3Sim) record(ms int64, n int) int64 {
	s.seq++
	s.ids++
	s.log = append(s.log, a3Debit{id: s.ids, ms: ms, n: n})
	s.writes = append(s.writes, a3Write{seq: s.seq, ms: ms, debtU: s.debtU(ms), id: s.ids})
	s.active = min(s.active, ms)
	return s.ids
}

// drawN draws a request size: mostly small, sometimes the burst or one
// past it.
func (s *a3Sim) drawN(label string) int {
	switch rapid.IntRange(0, 9).Draw(s.rt, label+"Kind") {
	case 0, 1, 2, 3:
		return 1
	case 4, 5, 6, 7:
		return rapid.IntRange(1, s.burst).Draw(s.rt, label)
	case 8:
		return s.burst
	default:
		return s.burst + rapid.IntRange(1, 2).Draw(s.rt, label+"Over")
	}
}

// drawT draws a request time: the clock's reading, a stale t, or a t
// ahead of the clock.
func (s *a3Sim) drawT() (int64, string) {
	tokMs := a3ceil(s.r.U, s.r.D)
	switch rapid.IntRange(0, 6).Draw(s.rt, "tKind") {
	case 6:
		// Before the clock's reading but after every time used: decided
		// at t, as x/time/rate decides it.
		if s.now-s.hw >= 2 {
			return s.hw + rapid.Int64Range(1, s.now-s.hw-1).Draw(s.rt, "past"), "past"
		}
		return s.now, "now"
	case 0:
		return s.hw - rapid.Int64Range(1, 3*tokMs+5).Draw(s.rt, "stale"), "stale"
	case 1:
		return s.now + rapid.Int64Range(1, 3*tokMs+5).Draw(s.rt, "ahead"), "ahead"
	default:
		return s.now, "now"
	}
}

// wantDecision is the Decision of a request of n at t, from the scaled
// peer's tokens; commit says whether it debits when admitted.
func (s *a3Sim) wantDecision(t int64, n int) limit.Decision {
	eff, base := s.eff(t)
	off := eff - base
	U, D := s.r.U, s.r.D
	debt := s.debtU(eff)
	nU := int64(n) * U
	d := limit.Decision{Limit: s.r.lim, Burst: s.burst, Policy: "default"}
	switch {
	case n > s.burst:
		d.Never, d.RetryAfter = true, limit.InfDuration
	case debt+nU <= s.bU:
		d.Allowed = true
		debt += nU
	default:
		d.RetryAfter = time.Duration(off+a3ceil(debt+nU-s.bU, D)) * time.Millisecond
	}
	d.Remaining = int(max(0, a3floor(s.bU-debt, U)))
	if debt > 0 {
		d.ResetAfter = time.Duration(off+a3ceil(debt, D)) * time.Millisecond
		target := s.bU - int64(d.Remaining+1)*U
		d.NextAfter = time.Duration(off+a3ceil(debt-target, D)) * time.Millisecond
	}
	return d
}

// checkPlain compares the plain peer's decision with the scaled one's,
// dropping it at the first float64 boundary disagreement.
func (s *a3Sim) checkPlain(got bool, want bool, n int, at int64, tokensBefore float64) {
	if s.xp == nil || got == want {
		return
	}
	if math.Abs(tokensBefore-float64(n)) < 1e-6 {
		s.plainDrop = fmt.Sprintf("step %d: float64 boundary (tokens %v, n %d)", s.step, tokensBefore, n)
		s.xp = nil
		return
	}
	s.fatalf("plain x/time/rate decided %v at %d for n=%d with %v tokens; scaled (exact) decided %v", got, at, n, tokensBefore, want)
}

func (s *a3Sim) opDecide() {
	t, mode := s.drawT()
	n := s.drawN("n")
	kind := rapid.SampledFrom([]string{"AllowN", "DecideN", "PeekN"}).Draw(s.rt, "decideKind")
	want := s.wantDecision(t, n)
	eff, _ := s.eff(t)
	s.tracef("%s(%s t=%d, n=%d) at %d, debt %d units: want allowed %v", kind, mode, t-s.start, n, eff-s.start, s.debtU(eff), want.Allowed)
	var plainTok float64
	if s.xp != nil {
		plainTok = s.xp.TokensAt(a3at(eff))
	}
	switch kind {
	case "AllowN":
		got := s.l.AllowN(a3at(t), s.key, n)
		if got != want.Allowed {
			s.fatalf("AllowN(%s t=%d, n=%d) = %v, want %v (debt %d units at %d)", mode, t, n, got, want.Allowed, s.debtU(eff), eff)
		}
	case "DecideN":
		got := s.l.DecideN(a3at(t), s.key, n)
		if got != want {
			s.fatalf("DecideN(%s t=%d, n=%d) =\n %+v, want\n %+v (debt %d units at %d)", mode, t, n, got, want, s.debtU(eff), eff)
		}
	case "PeekN":
		got := s.l.PeekN(a3at(t), s.key, n)
		if got != want {
			s.fatalf("PeekN(%s t=%d, n=%d) =\n %+v, want\n %+v", mode, t, n, got, want)
		}
	}
	if kind != "AllowN" || n <= s.burst {
		s.observe(eff) // AllowN of n > burst decides without reading the key or t
	}
	if kind == "PeekN" {
		return
	}
	xsOK := s.xs.AllowN(a3xs(eff), n*int(s.r.U))
	if xsOK != want.Allowed {
		s.fatalf("scaled x/time/rate AllowN = %v, oracle %v", xsOK, want.Allowed)
	}
	if s.xp != nil {
		s.checkPlain(s.xp.AllowN(a3at(eff), n), xsOK, n, eff, plainTok)
	}
	if want.Allowed {
		s.record(eff, n)
		a3Counts.admitted.Add(1)
	} else if want.Never {
		a3Counts.never.Add(1)
	} else {
		a3Counts.denied.Add(1)
	}
}

func (s *a3Sim) opReserve() {
	t, mode := s.drawT()
	n := s.drawN("rn")
	eff, _ := s.eff(t)
	U := s.r.U
	debt := s.debtU(eff)
	nU := int64(n) * U
	wantOK := n <= s.burst && debt+nU <= s.mdU
	s.tracef("ReserveN(%s t=%d, n=%d) at %d, debt %d units: want OK %v", mode, t-s.start, n, eff-s.start, debt, wantOK)
	r := s.l.ReserveN(a3at(t), s.key, n)
	if n <= s.burst {
		s.observe(eff) // n > burst is refused without reading the key or t
	}
	if r.OK() != wantOK {
		s.fatalf("ReserveN(%s t=%d, n=%d).OK() = %v, want %v (debt %d units, MaxDebt %d units)", mode, t, n, r.OK(), wantOK, debt, s.mdU)
	}
	rs := &a3Res{r: r, ok: wantOK, ms: eff, n: n}
	s.res = append(s.res, rs)
	if wantOK {
		a3Counts.resOK.Add(1)
	} else if n <= s.burst {
		a3Counts.resMaxDebt.Add(1)
	}
	if !wantOK {
		for _, x := range []int64{t, eff, eff + 1000} {
			if d := r.DelayFrom(a3at(x)); d != limit.InfDuration {
				s.fatalf("not-OK reservation DelayFrom = %v, want InfDuration", d)
			}
		}
		if n > s.burst {
			if s.xs.ReserveN(a3xs(eff), int(nU)).OK() {
				s.fatalf("x/time/rate reserved n > burst")
			}
		}
		return
	}
	// x/time/rate, scaled: its time to act, in our ms.
	xr := s.xs.ReserveN(a3xs(eff), int(nU))
	if !xr.OK() {
		s.fatalf("scaled x/time/rate refused a reservation within the burst")
	}
	wait := int64(0)
	if debt+nU > s.bU {
		wait = a3ceil(debt+nU-s.bU, s.r.D)
	}
	if got := a3msOf(xr.DelayFrom(a3xs(eff))); got != wait {
		s.fatalf("scaled x/time/rate waits %d ms, integer oracle %d", got, wait)
	}
	act := eff + wait
	for _, x := range []int64{t, eff, act - 1, act, act + 7, s.hw - 3} {
		want := max(act-x, 0)
		if got := r.DelayFrom(a3at(x)); got != time.Duration(want)*time.Millisecond {
			s.fatalf("ReserveN(%s t=%d, n=%d).DelayFrom(%d) = %v, want %d ms (x/time/rate %v scaled s; decided at %d, debt before %d units)",
				mode, t, n, x, got, want, xr.DelayFrom(a3xs(x)), eff, debt)
		}
		if xw := a3msOf(xr.DelayFrom(a3xs(x))); xw != want {
			s.fatalf("scaled x/time/rate DelayFrom(%d) = %d ms, want %d", x, xw, want)
		}
	}
	if got := r.Delay(); got != time.Duration(max(act-s.lnow(), 0))*time.Millisecond {
		s.fatalf("Delay() = %v on the clock at %d, act at %d", got, s.now, act)
	}
	s.observe(s.lnow()) // Delay read Limiter.Now
	if s.xp != nil {
		pr := s.xp.ReserveN(a3at(eff), n)
		pd := pr.DelayFrom(a3at(eff))
		ours := r.DelayFrom(a3at(eff))
		if !pr.OK() || ours < pd-time.Microsecond || ours >= pd+time.Millisecond+time.Microsecond {
			s.fatalf("plain x/time/rate reservation delay %v (ok %v), ours %v", pd, pr.OK(), ours)
		}
	}
	rs.filled = debt+nU == s.mdU
	rs.seq = s.seq + 1
	rs.id = s.record(eff, n)
}

// cancelOutcomes returns whether rs's Cancel may give it back and may
// keep it, by the documented rule ("a cell of the key that no other
// request has written since the reservation gets its previous value
// back ... A reservation that filled the key to MaxDebt is never given
// back"). One case is read both ways: when everything written since was
// itself given back (a later reservation cancelled), the key's cells hold
// again what this reservation left; the engines then give it back (as
// x/time/rate's CancelAt does), where the doc's "nothing has written it
// since" says keep. Either is on the safe side; anything else fails.
func (s *a3Sim) cancelOutcomes(rs *a3Res) (give, keep bool) {
	if rs.filled {
		return false, true
	}
	var standing []a3Write
	refunds := false
	for _, w := range s.writes {
		switch {
		case w.seq <= rs.seq:
		case w.cancel:
			refunds = true
		case !w.withdrawn:
			standing = append(standing, w)
		}
	}
	if len(standing) == 0 {
		return true, refunds
	}
	if !s.countMin {
		return false, true
	}
	sameMs := true
	for _, w := range standing {
		if w.ms != rs.ms || w.debtU >= s.mdU {
			sameMs = false
		}
	}
	if refunds {
		return sameMs, true
	}
	return sameMs, !sameMs
}

func (s *a3Sim) tokensNow() float64 { return s.l.TokensAt(a3at(s.hw), s.key) }

func (s *a3Sim) wantTokens(ms int64) float64 {
	return float64(s.tokU(ms)) / float64(s.r.U)
}

func (s *a3Sim) closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// giveBack removes the debit id from the peers' history.
func (s *a3Sim) giveBack(id int64) {
	for i := range s.writes {
		if s.writes[i].id == id && !s.writes[i].cancel {
			s.writes[i].withdrawn = true
		}
	}
	for i, e := range s.log {
		if e.id == id {
			s.log = append(s.log[:i:i], s.log[i+1:]...)
			s.rebuild()
			s.seq++
			s.writes = append(s.writes, a3Write{seq: s.seq, ms: s.hw, debtU: s.debtU(s.hw), cancel: true})
			return
		}
	}
	s.fatalf("no debit %d to give back", id)
}

func (s *a3Sim) opCancel() {
	if len(s.res) == 0 {
		return
	}
	rs := s.res[rapid.IntRange(0, len(s.res)-1).Draw(s.rt, "cancelIdx")]
	before := s.tokensNow()
	if !s.closeTo(before, s.wantTokens(s.hw)) {
		s.fatalf("TokensAt before Cancel = %v, want %v", before, s.wantTokens(s.hw))
	}
	if !rs.ok || rs.canceled {
		a3Counts.cancelNoop.Add(1)
		rs.r.Cancel()
		if after := s.tokensNow(); after != before {
			s.fatalf("Cancel of a reservation not OK (%v) or already cancelled (%v) moved the tokens %v -> %v", !rs.ok, rs.canceled, before, after)
		}
		return
	}
	give, keep := s.cancelOutcomes(rs)
	s.tracef("Cancel(reservation of %d at %d): give %v keep %v", rs.n, rs.ms-s.start, give, keep)
	rs.canceled = true
	rs.r.Cancel()
	after := s.tokensNow()
	kept := s.wantTokens(s.hw)
	switch {
	case keep && s.closeTo(after, kept):
		a3Counts.cancelKeep.Add(1)
		return
	case give:
		a3Counts.cancelGive.Add(1)
		s.giveBack(rs.id)
		if w := s.wantTokens(s.hw); !s.closeTo(after, w) {
			s.fatalf("Cancel of the reservation of %d at %d (nothing written since: %v) left %v tokens, want %v given back (it had %v)", rs.n, rs.ms, !keep, after, w, before)
		}
	default:
		s.fatalf("Cancel of the reservation of %d at %d (written over since, or filled MaxDebt %v) left %v tokens, want %v kept", rs.n, rs.ms, rs.filled, after, kept)
	}
}

func (s *a3Sim) opTokens() {
	t, mode := s.drawT()
	eff, _ := s.eff(t)
	got := s.l.TokensAt(a3at(t), s.key)
	s.observe(eff)
	want := s.wantTokens(eff)
	if !s.closeTo(got, want) {
		s.fatalf("TokensAt(%s t=%d) = %v, want %v (x/time/rate scaled %v units)", mode, t, got, want, s.xs.TokensAt(a3xs(eff)))
	}
	if s.xp != nil {
		if p := s.xp.TokensAt(a3at(eff)); math.Abs(p-got) > 1e-6*math.Max(1, math.Abs(p)) {
			s.fatalf("TokensAt = %v, plain x/time/rate %v", got, p)
		}
	}
}

// opWait runs WaitN on the fake clock (which reads s.now, at or after the
// high-water mark).
func (s *a3Sim) opWait() {
	if s.now < s.hw {
		return
	}
	n := s.drawN("wn")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hasDL := rapid.Bool().Draw(s.rt, "deadline")
	var left int64
	if hasDL {
		left = rapid.Int64Range(-3, 3*a3ceil(s.mdU, s.r.D)).Draw(s.rt, "left")
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, a3at(s.now+left))
		defer c2()
	}
	eff := s.now
	debt := s.debtU(eff)
	nU := int64(n) * s.r.U
	s.tracef("WaitN(n=%d, deadline %v in %d ms), debt %d units", n, hasDL, left, debt)
	allowedErrs := []error{}
	switch {
	case n > s.burst:
		allowedErrs = append(allowedErrs, limit.ErrAboveBurst)
	case hasDL && left < 0:
		allowedErrs = append(allowedErrs, limit.ErrPastDeadline)
	default:
		if debt+nU > s.mdU {
			allowedErrs = append(allowedErrs, limit.ErrMaxDebt)
		}
		if hasDL && debt+nU > s.bU+left*s.r.D {
			allowedErrs = append(allowedErrs, limit.ErrPastDeadline)
		}
	}
	if len(allowedErrs) > 0 {
		err := s.l.WaitN(ctx, s.key, n)
		if n <= s.burst {
			s.observe(eff) // it read the limiter's clock (Now)
		}
		var we *limit.WaitError
		ok := errors.As(err, &we)
		matched := false
		for _, e := range allowedErrs {
			matched = matched || errors.Is(err, e)
		}
		if !ok || !matched {
			s.fatalf("WaitN(n=%d, left %d ms, debt %d units) = %v, want one of %v", n, left, debt, err, allowedErrs)
		}
		if errors.Is(err, limit.ErrPastDeadline) && !errors.Is(err, context.DeadlineExceeded) {
			s.fatalf("ErrPastDeadline does not match context.DeadlineExceeded")
		}
		a3Counts.waitRefused.Add(1)
		if got, want := s.tokensNow(), s.wantTokens(s.hw); !s.closeTo(got, want) {
			s.fatalf("WaitN refused with %v but the key has %v tokens, want %v", err, got, want)
		}
		return
	}
	wait := int64(0)
	if debt+nU > s.bU {
		wait = a3ceil(debt+nU-s.bU, s.r.D)
	}
	filled := debt+nU == s.mdU
	if wait == 0 {
		if err := s.l.WaitN(ctx, s.key, n); err != nil {
			s.fatalf("WaitN(n=%d) with room = %v", n, err)
		}
		s.observe(eff)
		if !s.xs.AllowN(a3xs(eff), int(nU)) {
			s.fatalf("scaled x/time/rate denied")
		}
		if s.xp != nil {
			s.xp.ReserveN(a3at(eff), n)
		}
		s.record(eff, n)
		a3Counts.waitNow.Add(1)
		return
	}
	if s.clk.Timers() != 0 {
		s.fatalf("stale timers: %d", s.clk.Timers())
	}
	done := make(chan error, 1)
	go func() { done <- s.l.WaitN(ctx, s.key, n) }()
	ready := make(chan struct{})
	go func() { s.clk.BlockUntilTimers(1); close(ready) }()
	select {
	case err := <-done:
		s.fatalf("WaitN(n=%d) returned %v at once, want a wait of %d ms", n, err, wait)
	case <-ready:
	case <-time.After(20 * time.Second):
		s.fatalf("WaitN never set its timer")
	}
	s.observe(eff)
	if !s.xs.ReserveN(a3xs(eff), int(nU)).OK() {
		s.fatalf("scaled x/time/rate refused")
	}
	if s.xp != nil {
		s.xp.ReserveN(a3at(eff), n)
	}
	id := s.record(eff, n)
	seq := s.seq
	if rapid.Bool().Draw(s.rt, "ctxEnds") {
		k := rapid.Int64Range(0, wait-1).Draw(s.rt, "waited")
		s.now += k
		s.clk.Set(s.now)
		cancel()
		a3Counts.waitCtx.Add(1)
		if err := <-done; !errors.Is(err, context.Canceled) {
			s.fatalf("WaitN with its context cancelled = %v", err)
		}
		// Cancel's rule: nothing else wrote the key since.
		rs := &a3Res{ok: true, seq: seq, ms: eff, n: n, filled: filled}
		give, _ := s.cancelOutcomes(rs)
		if give {
			s.giveBack(id)
		}
		if got, w := s.tokensNow(), s.wantTokens(s.hw); !s.closeTo(got, w) {
			s.fatalf("after WaitN's context ended %d ms into a %d ms wait: %v tokens, want %v (given back: %v)", k, wait, got, w, give)
		}
		return
	}
	s.now += wait - 1
	s.clk.Set(s.now)
	if s.clk.Timers() != 1 {
		s.fatalf("WaitN(n=%d)'s timer fired 1 ms before its %d ms", n, wait)
	}
	s.now++
	s.clk.Set(s.now)
	a3Counts.waitWaited.Add(1)
	select {
	case err := <-done:
		if err != nil {
			s.fatalf("WaitN(n=%d) after its wait = %v", n, err)
		}
	case <-time.After(20 * time.Second):
		s.fatalf("WaitN(n=%d) did not return after its %d ms", n, wait)
	}
}

// opBack moves the clock back, decides at its reading with a short
// form, and puts it back.
func (s *a3Sim) opBack() {
	if s.now < s.hw {
		return
	}
	back := rapid.Int64Range(1, 2000).Draw(s.rt, "back")
	a3Counts.back.Add(1)
	was := s.now
	s.now -= back
	s.clk.Set(s.now)
	t := s.lnow() // the short forms decide at Limiter.Now
	eff, _ := s.eff(t)
	s.tracef("clock back %d ms, short form at %d, debt %d units", back, eff-s.start, s.debtU(eff))
	switch rapid.IntRange(0, 3).Draw(s.rt, "backKind") {
	case 0:
		want := s.wantDecision(t, 1)
		if got := s.l.Decide(s.key); got != want {
			s.fatalf("Decide with the clock %d ms back =\n %+v, want\n %+v", back, got, want)
		}
		if s.xs.AllowN(a3xs(eff), int(s.r.U)) != want.Allowed {
			s.fatalf("scaled peer disagrees")
		}
		if s.xp != nil {
			tok := s.xp.TokensAt(a3at(eff))
			s.checkPlain(s.xp.AllowN(a3at(eff), 1), want.Allowed, 1, eff, tok)
		}
		if want.Allowed {
			s.record(eff, 1)
		}
	case 1:
		want := s.wantDecision(t, 1)
		if got := s.l.Peek(s.key); got != want {
			s.fatalf("Peek with the clock %d ms back =\n %+v, want\n %+v", back, got, want)
		}
	case 2:
		if got, want := s.l.Tokens(s.key), s.wantTokens(eff); !s.closeTo(got, want) {
			s.fatalf("Tokens with the clock %d ms back = %v, want %v", back, got, want)
		}
	default:
		debt := s.debtU(eff)
		ok := debt+s.r.U <= s.mdU
		r := s.l.Reserve(s.key)
		if r.OK() != ok {
			s.fatalf("Reserve with the clock back OK=%v, want %v", r.OK(), ok)
		}
		s.res = append(s.res, &a3Res{r: r, ok: ok, ms: eff, n: 1})
		if ok {
			wait := int64(0)
			if debt+s.r.U > s.bU {
				wait = a3ceil(debt+s.r.U-s.bU, s.r.D)
			}
			if got := r.Delay(); got != time.Duration(eff+wait-s.lnow())*time.Millisecond {
				s.fatalf("Reserve with the clock %d ms back: Delay %v, want %d ms", back, got, eff+wait-s.lnow())
			}
			s.xs.ReserveN(a3xs(eff), int(s.r.U))
			if s.xp != nil {
				s.xp.ReserveN(a3at(eff), 1)
			}
			rs := s.res[len(s.res)-1]
			rs.filled = debt+s.r.U == s.mdU
			rs.seq = s.seq + 1
			rs.id = s.record(eff, 1)
		}
	}
	s.observe(eff)
	s.now = was
	s.clk.Set(s.now)
}

// advance moves the clock forward by a drawn gap.
func (s *a3Sim) advance() {
	tokMs := a3ceil(s.r.U, s.r.D)
	drainMs := a3ceil(s.mdU, s.r.D)
	var gap int64
	switch k := rapid.IntRange(0, 19).Draw(s.rt, "gapKind"); {
	case k < 4:
		gap = 0
	case k < 14:
		gap = rapid.Int64Range(1, 3*tokMs).Draw(s.rt, "gapSmall")
	case k < 17:
		gap = rapid.Int64Range(1, drainMs+2).Draw(s.rt, "gapDrain")
	case k == 17:
		a3Counts.idle.Add(1)
		gap = rapid.Int64Range(1, 48).Draw(s.rt, "gapHours") * int64(time.Hour/time.Millisecond)
	case k == 18:
		gap = rapid.Int64Range(1, 5).Draw(s.rt, "gapYears") * 365 * 86_400_000
	default:
		// A whole number of 2^16 ticks (of 1/D ms), +-1 ms: where a 16-bit
		// residue of a drain tick wraps.
		wraps := rapid.Int64Range(1, 4).Draw(s.rt, "wraps")
		gap = a3ceil(wraps<<16, s.r.D) + rapid.Int64Range(-1, 1).Draw(s.rt, "wrapAdj")
		gap = max(gap, 0)
	}
	if s.countMin {
		if gap >= s.period {
			s.active = math.MaxInt64
		} else if s.active != math.MaxInt64 && s.now+gap-s.active >= s.period/2 {
			gap = s.period + rapid.Int64Range(0, s.period).Draw(s.rt, "gapIdle")
			s.active = math.MaxInt64
		}
	}
	s.now += gap
	s.clk.Set(s.now)
	if gap > 0 {
		s.tracef("advanced %d ms", gap)
	}
	if s.countMin && s.now > s.hw {
		// A rotation that falls due at a decision made before the clock's
		// reading reads the clock (the new deadline), which moves the
		// high-water mark, and so the lag of the durations, to the clock:
		// TestAudit3PeerRotationLag keeps that case. Here the count-min
		// decides at the clock's reading or at stale times at most.
		s.l.Now()
		s.hw = s.now
	}
}

// TestAudit3PeerDifferential: one key of a Limiter (Auto, Buckets and
// CountMin, default and chosen MaxDebt) against x/time/rate fed the same
// requests: AllowN, DecideN, PeekN, ReserveN (+ Delay, DelayFrom,
// Cancel), WaitN on a fake clock (deadlines, cancelled contexts),
// TokensAt; stale and future t, the clock moving back, same-ms bursts,
// idle gaps of hours and years and of whole 2^16-tick wraps.
func TestAudit3PeerDifferential(t *testing.T) {
	var plainSteps, plainDrops atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		r := a3DrawRate(rt)
		bMax := int64(1<<23) / r.U // default MaxDebt 2 x burst within 2^24 units
		if r.D > 4096 {
			rt.Fatalf("bad draw %s: drain %d", r.desc, r.D)
		}
		burst := int(rapid.Int64Range(1, min(bMax, 40)).Draw(rt, "burst"))
		if rapid.IntRange(0, 9).Draw(rt, "bigBurst") == 0 {
			burst = int(rapid.Int64Range(1, min(bMax, 3000)).Draw(rt, "burstBig"))
		}
		md := int64(min(2*burst, 1<<24))
		var opts []limit.Option
		if rapid.Bool().Draw(rt, "setMaxDebt") {
			md = int64(burst) + rapid.Int64Range(0, 3*int64(burst)).Draw(rt, "extraDebt")
			md = min(md, max(int64(burst), int64(1<<24)/r.U))

			opts = append(opts, limit.WithMaxDebt(float64(md)))
		}
		if md*r.U > 1<<24 {
			rt.Fatalf("bad draw: MaxDebt %d x %d units", md, r.U)
		}
		bucketsOK := md*r.U <= 61438
		engine := rapid.SampledFrom([]limit.Engine{limit.Auto, limit.Buckets, limit.CountMin}).Draw(rt, "engine")
		clk := limittest.NewFakeClock()
		start := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + rapid.Int64Range(0, 1e6).Draw(rt, "start")
		clk.Set(start)
		base := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(rapid.Uint64().Draw(rt, "seed"))}, opts...)
		if engine == limit.Buckets && !bucketsOK {
			// "New refuses WithEngine(Buckets) otherwise".
			if _, err := limit.New(r.lim, burst, append(base, limit.WithEngine(limit.Buckets))...); !errors.Is(err, sketch.ErrInvalidConfig) {
				rt.Fatalf("%s burst %d MaxDebt %d (%d ticks): WithEngine(Buckets) = %v, want a config error", r.desc, burst, md, md*r.U, err)
			}
			engine = limit.Auto
		}
		l, err := limit.New(r.lim, burst, append(base, limit.WithEngine(engine))...)
		if err != nil {
			rt.Fatalf("New(%s, %d, MaxDebt %d, %v): %v", r.desc, burst, md, engine, err)
		}
		wantEngine := engine
		if engine == limit.Auto {
			wantEngine = limit.CountMin
			if bucketsOK {
				wantEngine = limit.Buckets
			}
		}
		if l.Engine() != wantEngine {
			rt.Fatalf("%s burst %d MaxDebt %d (%d ticks): engine %v, want %v", r.desc, burst, md, md*r.U, l.Engine(), wantEngine)
		}
		if !l.Exact() {
			rt.Fatalf("%s burst %d MaxDebt %d on %v: not Exact", r.desc, burst, md, l.Engine())
		}
		if l.MaxDebt() != float64(md) {
			rt.Fatalf("MaxDebt() = %v, want %d", l.MaxDebt(), md)
		}
		s := &a3Sim{
			rt: rt, l: l, clk: clk, key: rapid.SampledFrom([]string{"k", "", "user:42", "é"}).Draw(rt, "key"),
			r: r, burst: burst, bU: int64(burst) * r.U, mdU: md * r.U,
			countMin: l.Engine() == limit.CountMin, period: l.Period().Milliseconds(),
			now: start, hw: start, active: start, start: start, // New reads the clock
		}
		s.newPeers()
		steps := rapid.IntRange(10, 120).Draw(rt, "steps")
		for s.step = 0; s.step < steps; s.step++ {
			s.advance()
			switch rapid.IntRange(0, 11).Draw(rt, "op") {
			case 0, 1, 2, 3:
				s.opDecide()
			case 4, 5, 6:
				s.opReserve()
			case 7, 8:
				s.opCancel()
			case 9:
				s.opWait()
			case 10:
				s.opTokens()
			default:
				s.opBack()
			}
		}
		plainSteps.Add(int64(steps))
		if s.xp == nil {
			plainDrops.Add(1)
		}
	})
	t.Logf("plain x/time/rate peers dropped at a float64 boundary: %d (of %d steps in all)", plainDrops.Load(), plainSteps.Load())
	c := &a3Counts
	t.Logf("decisions admitted %d denied %d never %d; reservations OK %d, past MaxDebt %d; cancels given back %d kept %d no-op %d; WaitN at once %d, waited %d, context ended %d, refused %d; idle gaps of hours %d; clock moved back %d",
		c.admitted.Load(), c.denied.Load(), c.never.Load(), c.resOK.Load(), c.resMaxDebt.Load(), c.cancelGive.Load(), c.cancelKeep.Load(), c.cancelNoop.Load(),
		c.waitNow.Load(), c.waitWaited.Load(), c.waitCtx.Load(), c.waitRefused.Load(), c.idle.Load(), c.back.Load())
}
