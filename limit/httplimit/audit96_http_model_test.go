package httplimit_test

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a96Pol is a policy of the exact model: a token costs tok ms of the
// key's debt (held as time to drain, as limit's doc, "Tiers and changing
// the limit", holds it), burst tokens, a RejectCost of reject tokens.
type a96Pol struct {
	name   string
	tok    int64 // ms per token
	burst  int64
	reject int64 // tokens
}

// a96Win is one key's debt in ms of drain under a limiter whose MaxDebt
// is maxMs ms.
type a96Win struct {
	debt, maxMs int64
	at          int64 // the time debt was read, in ms
}

func (w *a96Win) drain(now int64) {
	w.debt = max(w.debt-(now-w.at), 0)
	w.at = now
}

// state is what the key has under p: Remaining, ResetAfter, NextAfter
// (limit.Decision's definitions for the rational bucket).
func (w *a96Win) state(p a96Pol) (rem int64, reset, next time.Duration) {
	rem = max((p.burst*p.tok-w.debt)/p.tok, 0)
	if w.debt > 0 {
		reset = time.Duration(w.debt) * time.Millisecond
		next = time.Duration(w.debt-(p.burst-rem-1)*p.tok) * time.Millisecond
	}
	return rem, reset, next
}

func (w *a96Win) fits(p a96Pol, n int64) bool { return n <= p.burst && w.debt+n*p.tok <= p.burst*p.tok }

func (w *a96Win) retryAfter(p a96Pol, n int64) time.Duration {
	return time.Duration(max(w.debt+n*p.tok-p.burst*p.tok, 1)) * time.Millisecond
}

func (w *a96Win) penalize(p a96Pol) {
	if p.reject > 0 {
		w.debt = min(w.debt+p.reject*p.tok, w.maxMs)
	}
}

// decide is one strict decision of n tokens under p: the Decision a
// limiter exact for p answers.
func (w *a96Win) decide(p a96Pol, n int64) limit.Decision {
	d := limit.Decision{Policy: p.name, Burst: int(p.burst)}
	switch {
	case n > p.burst:
		d.Never, d.RetryAfter = true, limit.InfDuration
		w.penalize(p)
	case w.fits(p, n):
		d.Allowed = true
		w.debt += n * p.tok
	default:
		w.penalize(p)
		d.RetryAfter = w.retryAfter(p, n)
	}
	rem, reset, next := w.state(p)
	d.Remaining, d.ResetAfter, d.NextAfter = int(rem), reset, next
	return d
}

// a96Want returns the RateLimit, Retry-After ("" when absent) and legacy
// Reset fields doc.go's "Answers" derives from d, for a limiter of one
// policy (single) or a Multi.
func a96Want(d limit.Decision, single bool) (rl, ra, reset string) {
	next := d.NextAfter
	if !single && !d.Allowed && !d.Never && next < d.RetryAfter {
		next = d.RetryAfter
	}
	rl = strconv.Quote(d.Policy) + ";r=" + strconv.Itoa(d.Remaining)
	if next > 0 {
		rl += ";t=" + strconv.FormatInt(a96Ceil(next), 10)
	}
	if !d.Allowed && !d.Never {
		ra = strconv.FormatInt(max(a96Ceil(d.RetryAfter), 1), 10)
	}
	return rl, ra, strconv.FormatInt(a96Ceil(d.ResetAfter), 10)
}

func a96Compare(t *testing.T, what string, w *httptest.ResponseRecorder, d limit.Decision, single bool) {
	t.Helper()
	rl, ra, reset := a96Want(d, single)
	code := http.StatusOK
	if !d.Allowed {
		code = http.StatusTooManyRequests
	}
	h := w.Header()
	if w.Code != code || h.Get("RateLimit") != rl || h.Get("Retry-After") != ra || h.Get("X-RateLimit-Reset") != reset ||
		h.Get("X-RateLimit-Remaining") != strconv.Itoa(d.Remaining) || h.Get("X-RateLimit-Limit") != strconv.Itoa(d.Burst) {
		t.Fatalf("%s: got %d RateLimit %q Retry-After %q Reset %q Remaining %q Limit %q;\n want %d %q %q %q %d %d (exact bucket: %+v)",
			what, w.Code, h.Get("RateLimit"), h.Get("Retry-After"), h.Get("X-RateLimit-Reset"),
			h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Limit"), code, rl, ra, reset, d.Remaining, d.Burst, d)
	}
}

// Tiers of one limiter (limit.Tier, new since audit 88's engine work:
// tiers on the Buckets engine, tiers with a RejectCost) behind one
// middleware each, on one key: every answer is the exact token bucket's
// (debt held as time to drain; a tier of rate r costs 1000/r ms of it a
// token, its RejectCost too, in its own tokens, clamped at MaxDebt), on
// Buckets and on CountMin alike, the tiers' Exact reporting true (limit's
// doc: "Tiers R/k for a whole k are exact on an exact limiter with a
// whole RejectCost"; "Every tier R/k for a whole k is exact"). Each
// middleware announces its tier's own q and w = ceil(burst/rate).
// Halfway, SetLimit halves the Limiter's own rate: its middleware
// announces and answers the new policy from the next request on, the
// debt kept as time, the tiers' answers unchanged in kind.
func TestAudit96HTTPTiersExactBucket(t *testing.T) { a96TierWalk(t, false) }

// Reservations (ReserveN on the Limiter and on its Tiers) queue debt past
// the burst, up to MaxDebt, and Cancel right after gives it back exactly
// (nothing else wrote the key since; Reservation.Cancel), on either
// engine: the middlewares of the tiers then answer what the exact bucket
// with that debt gives (r=0, t and Retry-After the drain back into the
// burst, the legacy Reset the whole debt's), and each Reservation's
// Delay is the time until the debt is back within its policy's burst.
func TestAudit96HTTPReservationsQueueExact(t *testing.T) { a96TierWalk(t, true) }

// a96Reserver is what the walk reserves with: a Limiter or a Tier.
type a96Reserver interface {
	ReserveN(t time.Time, key string, n int) *limit.Reservation
}

func a96TierWalk(t *testing.T, reserve bool) {
	pols := []a96Pol{
		{"base", 100, 20, 1}, // New(10, 20): its own policy
		{"free", 400, 10, 1}, // 2.5/s = 10/4
		{"slow", 1000, 5, 1}, // 1/s = 10/10
		{"fast", 50, 6, 1},   // 20/s: a token is half of base's
		{"trial", 2000, 3, 1},
	}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_650_000_000_000)
		opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(7), limit.WithName("base"), limit.WithEngine(e),
			limit.WithMaxDebt(100), limit.WithRejectCost(1), limit.WithCapacity(64, 0.01)}
		if e == limit.CountMin {
			opts = append(opts, limit.WithPeriod(1000*time.Hour))
		}
		base, err := limit.New(10, 20, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if base.Engine() != e || !base.Exact() {
			t.Fatalf("%v: Engine %v, Exact %v", e, base.Engine(), base.Exact())
		}
		rigs := make([]*a96Rig, len(pols))
		res := make([]a96Reserver, len(pols))
		for i, p := range pols {
			var l httplimit.Limiter = base
			res[i] = base
			if i > 0 {
				tr, err := base.Tier(p.name, limit.Limit(1000/float64(p.tok)), int(p.burst))
				if err != nil {
					t.Fatalf("%v: Tier %s: %v", e, p.name, err)
				}
				if !tr.Exact() {
					t.Fatalf("%v: Tier %s: Exact false", e, p.name)
				}
				l, res[i] = tr, tr
			}
			rigs[i] = a96NewRig(t, l)
		}
		model := a96Win{maxMs: 100 * 100, at: clk.NowMillis()}
		rng := rand.New(rand.NewPCG(96, uint64(e)))
		reserved, queued := 0, 0
		pols := append([]a96Pol(nil), pols...)
		for i := range 1500 {
			if i == 750 {
				// SetLimit replaces the Limiter's own policy; the debt is
				// kept as time, the Tiers unchanged (limit's doc, "Tiers
				// and changing the limit"), and the next answer announces
				// the new policy.
				if err := base.SetLimit(5); err != nil || !base.Exact() {
					t.Fatalf("%v: SetLimit(5): %v, Exact %v", e, err, base.Exact())
				}
				pols[0].tok = 200
			}
			clk.Advance(time.Duration(rng.Int64N(700)) * time.Millisecond)
			k := rng.IntN(len(pols))
			p := pols[k]
			n := 1 + rng.Int64N(3)
			if rng.IntN(25) == 0 {
				n = p.burst + 1
			}
			model.drain(clk.NowMillis())
			if reserve && rng.IntN(3) == 0 {
				r := res[k].ReserveN(clk.Now(), a96Key, int(n))
				ok := n <= p.burst && model.debt+n*p.tok <= model.maxMs
				if r.OK() != ok {
					t.Fatalf("%v step %d: %s ReserveN(%d) OK %v at debt %d ms; want %v", e, i, p.name, n, r.OK(), model.debt, ok)
				}
				if !ok {
					continue
				}
				reserved++
				model.debt += n * p.tok
				want := time.Duration(max(model.debt-p.burst*p.tok, 0)) * time.Millisecond
				if got := r.Delay(); got != want {
					t.Fatalf("%v step %d: %s ReserveN(%d) Delay %v; want %v (debt %d ms)", e, i, p.name, n, got, want, model.debt)
				}
				if want > 0 {
					queued++
				}
				if model.debt < model.maxMs && rng.IntN(2) == 0 {
					r.Cancel()
					model.debt -= n * p.tok
				}
				continue
			}
			d := model.decide(p, n)
			w := rigs[k].do(int(n))
			what := e.String() + " step " + strconv.Itoa(i) + " " + p.name + " cost " + strconv.FormatInt(n, 10)
			a96Compare(t, what, w, d, true)
			wantPol := strconv.Quote(p.name) + ";q=" + strconv.FormatInt(p.burst, 10) + ";w=" +
				strconv.FormatInt(int64(math.Ceil(float64(p.burst*p.tok)/1000)), 10)
			if got := w.Header().Get("RateLimit-Policy"); got != wantPol {
				t.Fatalf("%s: RateLimit-Policy %q; want %q", what, got, wantPol)
			}
		}
		if reserve && (reserved == 0 || queued == 0) {
			t.Errorf("%v: %d reservations, %d queued past the burst", e, reserved, queued)
		}
	}
}

// A Multi of windows with RejectCosts, on either engine (limit.Multi:
// "Each window's RejectCost is charged only by the window that denies";
// the first in order that denies is the one that charges it): through
// the middleware every answer is what the exact buckets give, with the
// fields doc.go states for a Multi (the denial names the window that
// denies longest, r the least Remaining, t its RetryAfter), and a retry
// at Retry-After is admitted.
func TestAudit96HTTPMultiRejectCostExact(t *testing.T) {
	for ci, c := range []struct {
		pols    []a96Pol
		maxDebt []float64
	}{
		{[]a96Pol{
			{"second", 100, 10, 2}, // 10/s, burst 10, RejectCost 2
			{"minute", 500, 30, 1}, // 2/s, burst 30 (15 s), RejectCost 1
		}, []float64{40, 40}},
		// A window whose burst is its MaxDebt takes last (limit.Multi);
		// its RejectCost is clamped at MaxDebt.
		{[]a96Pol{
			{"second", 100, 10, 1},
			{"minute", 500, 30, 2},
			{"burst", 250, 8, 0},
		}, []float64{10, 40, 8}},
	} {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			a96MultiWalk(t, c.pols, c.maxDebt, e, uint64(ci))
		}
	}
}

// a96MultiWalk walks a Multi of pols (MaxDebts maxDebt) on engine e
// through the middleware against the exact model.
func a96MultiWalk(t *testing.T, pols []a96Pol, maxDebt []float64, e limit.Engine, seed uint64) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_650_000_000_000)
	var ws []*limit.Limiter
	models := make([]a96Win, len(pols))
	for i, p := range pols {
		opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(i)), limit.WithName(p.name), limit.WithEngine(e),
			limit.WithMaxDebt(maxDebt[i]), limit.WithRejectCost(float64(p.reject)), limit.WithCapacity(64, 0.01)}
		if e == limit.CountMin {
			opts = append(opts, limit.WithPeriod(1000*time.Hour))
		}
		l, err := limit.New(limit.Limit(1000/float64(p.tok)), int(p.burst), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if l.Engine() != e || !l.Exact() {
			t.Fatalf("%v: %s Engine %v Exact %v", e, p.name, l.Engine(), l.Exact())
		}
		ws = append(ws, l)
		models[i] = a96Win{maxMs: int64(maxDebt[i]) * p.tok, at: clk.NowMillis()}
	}
	m, err := limit.NewMulti(ws...)
	if err != nil {
		t.Fatal(err)
	}
	g := a96NewRig(t, m)
	rng := rand.New(rand.NewPCG(96+seed, 1000+uint64(e)))
	retried := 0
	for i := range 1500 {
		clk.Advance(time.Duration(rng.Int64N(450)) * time.Millisecond)
		n := 1 + rng.Int64N(4)
		if rng.IntN(30) == 0 {
			n = 11 // above "second"'s burst (and "burst"'s)
		}
		d := a96MultiModel(models, pols, clk.NowMillis(), n)
		w := g.do(int(n))
		what := e.String() + " step " + strconv.Itoa(i) + " cost " + strconv.FormatInt(n, 10)
		a96Compare(t, what, w, d, false)
		if w.Code == http.StatusTooManyRequests && !d.Never && rng.IntN(4) == 0 {
			secs, _ := strconv.Atoi(w.Header().Get("Retry-After"))
			clk.Advance(time.Duration(secs) * time.Second)
			d := a96MultiModel(models, pols, clk.NowMillis(), n)
			w := g.do(int(n))
			a96Compare(t, what+" retried at Retry-After", w, d, false)
			if w.Code != http.StatusOK {
				t.Fatalf("%s: retried at Retry-After %d s: %d", what, secs, w.Code)
			}
			retried++
		}
	}
	if retried == 0 {
		t.Errorf("%v: no retry", e)
	}
}

// a96MultiModel is limit.Multi.DecideKeys on the exact buckets: all or
// nothing, the first denying window charges its RejectCost, the Decision
// combined as DecideKeys documents it.
func a96MultiModel(ws []a96Win, pols []a96Pol, now, n int64) limit.Decision {
	denied := -1
	for i := range ws {
		ws[i].drain(now)
		if denied < 0 && !ws[i].fits(pols[i], n) {
			denied = i
		}
	}
	if denied >= 0 {
		ws[denied].penalize(pols[denied])
	} else {
		for i := range ws {
			ws[i].debt += n * pols[i].tok
		}
	}
	d := limit.Decision{Allowed: denied < 0, Remaining: math.MaxInt, Policy: pols[max(denied, 0)].name, Burst: int(pols[max(denied, 0)].burst)}
	for i := range ws {
		p := pols[i]
		rem, reset, next := ws[i].state(p)
		var ra time.Duration
		never := n > p.burst
		if !never && !ws[i].fits(p, n) {
			ra = ws[i].retryAfter(p, n)
		}
		switch {
		case denied < 0:
			if int(rem) < d.Remaining {
				d.Policy, d.Burst = p.name, int(p.burst)
			}
		case never:
			if !d.Never {
				d.Never, d.RetryAfter, d.Policy, d.Burst = true, limit.InfDuration, p.name, int(p.burst)
			}
		case !d.Never && (ra > d.RetryAfter || i == denied && d.RetryAfter == 0):
			d.RetryAfter, d.Policy, d.Burst = ra, p.name, int(p.burst)
		}
		d.ResetAfter = max(d.ResetAfter, reset)
		switch {
		case int(rem) < d.Remaining:
			d.Remaining, d.NextAfter = int(rem), next
		case int(rem) == d.Remaining && (d.NextAfter == 0 || next == 0):
			d.NextAfter = 0
		case int(rem) == d.Remaining:
			d.NextAfter = max(d.NextAfter, next)
		}
	}
	if !d.Allowed && d.RetryAfter == 0 {
		d.RetryAfter = time.Millisecond
	}
	return d
}
