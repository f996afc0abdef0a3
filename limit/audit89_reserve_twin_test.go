package limit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a89rsPol is what the twin test reserves through: a Limiter or a Tier.
type a89rsPol interface {
	DecideN(time.Time, string, int) limit.Decision
	PeekN(time.Time, string, int) limit.Decision
	ReserveN(time.Time, string, int) *limit.Reservation
	TokensAt(time.Time, string) float64
	Burst() int
}

type a89rsTwinCfg struct {
	name  string
	lim   limit.Limit
	burst int
	alt   limit.Limit // a SetLimit target (burst kept)
	opts  []limit.Option
}

func a89rsTwinCfgs() []a89rsTwinCfg {
	return []a89rsTwinCfg{
		{"10/s-buckets", 10, 20, 5, []limit.Option{limit.WithEngine(limit.Buckets)}},
		{"10/s-countmin", 10, 20, 5, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"third-countmin-maxdebt", 1.0 / 3, 4, 1.0 / 6, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxDebt(8)}},
		{"pi-inexact-countmin", limit.Limit(math.Pi), 20, limit.Limit(math.Pi / 2), []limit.Option{limit.WithMaxDebt(45.5)}},
		{"every1500us-buckets", 2000.0 / 3, 50, 1000.0 / 3, []limit.Option{limit.WithEngine(limit.Buckets)}},
	}
}

// TestAudit89ReserveCancelTwin: Reservation.Cancel (reserve.go) "a cell
// of the key that no other request has written since the reservation
// gets its previous value back (the key reads as if the reservation had
// never been taken, the part drained since included)", on either engine,
// whatever happened meanwhile that is not a write of the key: the clock
// moving on or stepping back, Delay and PeekN and TokensAt reads, SetLimit
// (the reservation's policy is gone), and "Only the first call does
// anything"; ReserveN "A reservation for n > burst, or beyond MaxDebt,
// is not OK and debits nothing"; "A reservation that filled the key to
// MaxDebt is never given back (either engine)". Checked bit for bit
// against a twin limiter (same engine, seed and clock) that saw every
// other request but never took the cancelled reservations: exact rates,
// an inexact one (pi/s on the count-min, debts small enough that every
// decayed debt is a float32) and a Tier's reservations. (Where a decayed
// debt is not a float32, Cancel is not exact:
// TestAudit89ReserveFindingCancelRoundsUpDebt.)
func TestAudit89ReserveCancelTwin(t *testing.T) {
	for _, cfg := range a89rsTwinCfgs() {
		t.Run(cfg.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 6; seed++ {
				a89rsTwin(t, cfg, seed)
			}
		})
	}
}

func a89rsTwin(t *testing.T, cfg a89rsTwinCfg, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 89))
	clk := limittest.NewFakeClock()
	clk.Set(50_000_000)
	mk := func() *limit.Limiter {
		l, err := limit.New(cfg.lim, cfg.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, cfg.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := mk(), mk()
	ta, err := a.Tier("half", cfg.lim/2, max(cfg.burst/3, 1))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := b.Tier("half", cfg.lim/2, max(cfg.burst/3, 1))
	const key = "k"
	drainMs := int(float64(cfg.burst) / float64(cfg.lim) * 1000) // the burst's drain
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		if len(log) > 16 {
			log = log[len(log)-16:]
		}
		t.Fatalf("seed %d on %v: "+format+"\nlast steps: %q", append([]any{seed, a.Engine()}, append(args, log)...)...)
	}
	same := func(what string) {
		t.Helper()
		now := clk.Now()
		for _, p := range [][2]a89rsPol{{a, b}, {ta, tb}} {
			for _, n := range []int{1, p[0].Burst()} {
				if ga, gb := p[0].PeekN(now, key, n), p[1].PeekN(now, key, n); ga != gb {
					fail("%s: PeekN(%d) %+v, twin %+v", what, n, ga, gb)
				}
			}
			if ga, gb := p[0].TokensAt(now, key), p[1].TokensAt(now, key); ga != gb {
				fail("%s: TokensAt %v, twin %v", what, ga, gb)
			}
		}
	}
	moveClock := func() {
		switch x := rng.IntN(10); {
		case x < 2:
			d := -time.Duration(1+rng.IntN(40)) * time.Millisecond
			clk.Advance(d)
			log = append(log, fmt.Sprintf("move %v", d))
		case x < 4:
		default:
			d := time.Duration(rng.IntN(drainMs/4+2)) * time.Millisecond
			clk.Advance(d)
			log = append(log, fmt.Sprintf("move %v", d))
		}
	}
	slow := false
	for step := 0; step < 60; step++ {
		moveClock()
		now := clk.Now()
		pa, pb := a89rsPol(a), a89rsPol(b)
		if rng.IntN(3) == 0 {
			pa, pb = ta, tb
		}
		n := 1 + rng.IntN(pa.Burst()+1) // n = burst + 1 included
		switch op := rng.IntN(4); op {
		case 0: // a decision both take
			log = append(log, fmt.Sprintf("%d: decide %d tier=%v", now.UnixMilli(), n, pa == a89rsPol(ta)))
			if ga, gb := pa.DecideN(now, key, n), pb.DecideN(now, key, n); ga != gb {
				fail("DecideN(%d) %+v, twin %+v", n, ga, gb)
			}
		case 1: // a reservation both keep
			log = append(log, fmt.Sprintf("%d: keep %d tier=%v", now.UnixMilli(), n, pa == a89rsPol(ta)))
			ra, rb := pa.ReserveN(now, key, n), pb.ReserveN(now, key, n)
			if ra.OK() != rb.OK() || ra.Delay() != rb.Delay() {
				fail("kept ReserveN(%d): OK %v Delay %v, twin %v %v", n, ra.OK(), ra.Delay(), rb.OK(), rb.Delay())
			}
		default: // a reservation only a takes, then cancels
			before := pa.TokensAt(now, key)
			r := pa.ReserveN(now, key, n)
			log = append(log, fmt.Sprintf("%d: reserve %d ok=%v delay=%v tier=%v tok %v->%v", now.UnixMilli(), n, r.OK(), r.Delay(), pa == a89rsPol(ta), before, pa.TokensAt(now, key)))
			if !r.OK() {
				if r.Delay() != limit.InfDuration || r.DelayFrom(now) != limit.InfDuration {
					fail("a reservation that is not OK: Delay %v DelayFrom %v, want InfDuration", r.Delay(), r.DelayFrom(now))
				}
				same("after a reservation that is not OK")
				r.Cancel()
				same("after Cancel of a reservation that is not OK")
				continue
			}
			// the twin reads at now too: a limiter's time is the latest t
			// it was called at (its high-water mark)
			_ = pb.TokensAt(now, key)
			// Did it fill the key to MaxDebt? Then it is never given back.
			after := pa.TokensAt(now, key)
			maxTok := a89rsMaxDebtTokens(a, pa, cfg.lim)
			floor := float64(pa.Burst()) - maxTok
			atCap := after <= floor
			if !atCap && after <= floor+1e-9*maxTok {
				return // too close to MaxDebt to tell
			}
			for range rng.IntN(3) {
				moveClock()
				_ = r.Delay()
				// reads move a limiter's time (its high-water mark), so
				// the twin reads too
				_, _ = a.PeekN(clk.Now(), key, 1), b.PeekN(clk.Now(), key, 1)
				_, _ = ta.TokensAt(clk.Now(), key), tb.TokensAt(clk.Now(), key)
			}
			if rng.IntN(4) == 0 {
				slow = !slow
				to := cfg.lim
				if slow {
					to = cfg.alt
				}
				if err := a.SetLimit(to); err != nil {
					t.Fatal(err)
				}
				if err := b.SetLimit(to); err != nil {
					t.Fatal(err)
				}
				log = append(log, fmt.Sprintf("SetLimit(%v)", to))
			}
			if atCap {
				at := clk.Now()
				keep := a.PeekN(at, key, 1)
				r.Cancel()
				if got := a.PeekN(at, key, 1); got != keep {
					fail("Cancel of a reservation that filled the key to MaxDebt gave back: %+v -> %+v (tokens %v -> %v before)", keep, got, before, after)
				}
				return // the twins differ from here on
			}
			r.Cancel()
			log = append(log, fmt.Sprintf("%d: cancel", clk.Now().UnixMilli()))
			same("after Cancel")
			r.Cancel()
			same("after a second Cancel")
		}
		same("after the step")
	}
}

// a89rsMaxDebtTokens is the limiter's MaxDebt in p's tokens: the
// limiter's own current policy's (MaxDebt is New's, in New's tokens, and
// a debt is time) or a Tier's.
func a89rsMaxDebtTokens(l *limit.Limiter, p a89rsPol, newRate limit.Limit) float64 {
	if tr, ok := p.(*limit.Tier); ok {
		return tr.MaxDebt()
	}
	return l.MaxDebt() * float64(l.Limit()) / float64(newRate)
}
