package limit_test

// Audit 3, capacity: the one-sided promise of the Buckets engine under
// churn, against an exact oracle per key (limit/doc.go, "Error side":
// "A key's read debt is at least its own debt on either engine ... So a
// collision can only deny a key early, never admit it past its own
// limit. The durations of a Decision and a Reservation are derived from
// the debt the sketch reads, so they are exact for a key alone in its
// cells and only late, never early, under collisions.").

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// a3capSizes are engines far smaller than the key pools below: 2 lines
// (28 slots: every key shares both lines with most others, and
// fingerprint twins abound), 8 and 80 lines.
var a3capSizes = []struct {
	name  string
	keys  int
	deny  float64
	lines int
}{
	{"2lines", 1, 0.5, 2},
	{"8lines", 100, 0.5, 8},
	{"80lines", 1000, 0.05, 80},
}

// TestAudit3CapOneSidedChurn drives every key of a pool far larger than
// the engine (eviction pressure 100x to 1000x its slots), with hot keys
// held at full debt, warm keys that come back after being evicted, and
// cold keys that arrive at their whole burst; time moves in steps from
// 0 ms to hours (eviction floors decay; idle spans that cross the
// stamps' 16-bit window), and long idles are followed by bursts at one
// instant. Every key has an exact oracle (debt form, in ms), and every
// answer of the limiter and of a Tier must be one-sided against it:
// an admission fits the oracle's bucket, a reservation fits MaxDebt,
// Remaining and TokensAt are at most the oracle's, RetryAfter,
// ResetAfter and a Reservation's Delay at least the oracle's. The
// variants: strict (default), optimistic (WithStrict(false): exact for a
// sequential caller) and WithRejectCost(1) (the oracle debits the
// penalty on every denial, clamped at MaxDebt, a lower bound of the
// truth).
func TestAudit3CapOneSidedChurn(t *testing.T) {
	testsize.Serial(t)
	variants := []struct {
		name string
		opts []limit.Option
		pen  int64 // RejectCost, in tokens
	}{
		{"strict", nil, 0},
		{"optimistic", []limit.Option{limit.WithStrict(false)}, 0},
		{"rejectcost1", []limit.Option{limit.WithRejectCost(1)}, 1},
	}
	run := 0
	for _, sz := range a3capSizes {
		early := 0
		for _, c := range a3capConfs {
			for _, seed := range []uint64{1, 0xC0FFEE} {
				v := variants[run%len(variants)]
				run++
				t.Run(fmt.Sprintf("%s/%s/seed%d/%s", c.name, sz.name, seed, v.name), func(t *testing.T) {
					early += a3capChurn(t, c, sz.keys, sz.deny, sz.lines, seed, v.pen, v.opts)
				})
			}
		}
		// Power: the engine was pushed past its slots often enough that
		// collisions and floors denied keys the oracle admits.
		if early < 20 {
			t.Errorf("%s: only %d denials the oracle would admit over all runs: the churn did not saturate the engine", sz.name, early)
		}
	}
}

func a3capChurn(t *testing.T, c a3capConf, capKeys int, capDeny float64, lines int, seed uint64, pen int64, extra []limit.Option) (early int) {
	opts := append([]limit.Option{limit.WithCapacity(capKeys, capDeny)}, extra...)
	l, clk := a3capNew(t, c, seed, opts...)
	if got := (l.Sizes().Cells / 64) - 1; got != lines {
		t.Fatalf("engine has %d lines, want %d", got, lines)
	}
	tierBurst := max(1, c.burst/2)
	tier, err := l.Tier("half", c.lim/2, tierBurst)
	if err != nil {
		t.Fatal(err)
	}
	if !tier.Exact() {
		t.Fatalf("tier R/2 not exact")
	}
	tierTok := 2 * c.tokenMs
	tierBurstMs := int64(tierBurst) * tierTok

	hot := a3capKeys(fmt.Sprintf("hot%d", seed), 16)
	warm := a3capKeys(fmt.Sprintf("warm%d", seed), 256)
	cold := a3capKeys(fmt.Sprintf("cold%d", seed), 20000)
	all := [][]string{hot, warm, cold}
	oracle := [3][]a3capOracle{make([]a3capOracle, len(hot)), make([]a3capOracle, len(warm)), make([]a3capOracle, len(cold))}

	rng := rand.New(rand.NewPCG(seed, 77))
	tok, burstMs, maxMs := c.tokenMs, c.burstMs(), c.maxDebtMs()
	penMs := pen * tok
	idles := []int64{61_437, 61_438, 61_439, 65_535, 65_536, 65_537, 2 * 65_536, 3*65_536 - 1, 3_600_000, 1 << 22, maxMs, maxMs + 1, burstMs}
	drawN := func(b int) int {
		switch rng.IntN(4) {
		case 0, 1:
			return 1
		case 2:
			return b
		}
		return 1 + rng.IntN(b)
	}
	rounds := 500
	if lines > 8 {
		rounds = 250
	}
	// Larger engines get shorter steps, so that the cold keys' debts
	// outlive enough rounds to fill them past their slots.
	scale := int64(max(1, lines/8))
	ops := 0
	tight := 0 // admissions that filled the oracle's bucket exactly (early, the result: AllowN denials the oracle would admit)
	for round := range rounds {
		// Time: mostly small steps, sometimes a token or a burst's
		// drain, sometimes a long idle followed by a burst of requests
		// at one instant.
		burstOps := 20
		switch r := rng.IntN(100); {
		case r < 35:
		case r < 65:
			clk.Advance(time.Duration(1+rng.Int64N(2*tok)/scale) * time.Millisecond)
		case r < 85:
			clk.Advance(time.Duration(1+rng.Int64N(burstMs)/scale) * time.Millisecond)
		case r < 95:
			clk.Advance(time.Duration(1+rng.Int64N(maxMs+tok)/scale) * time.Millisecond)
		default:
			clk.Advance(time.Duration(idles[rng.IntN(len(idles))]) * time.Millisecond)
			burstOps = 200
		}
		now := clk.NowMillis()
		tm := clk.Now()
		flood := lines / 4 // cold keys arriving at their whole burst: eviction pressure
		for j := range burstOps + flood {
			ops++
			var cls int
			switch r := rng.IntN(10); {
			case j >= burstOps:
				cls = 2
			case r < 4:
				cls = 0
			case r < 7:
				cls = 1
			default:
				cls = 2
			}
			i := rng.IntN(len(all[cls]))
			key, o := all[cls][i], &oracle[cls][i]
			debt := o.debt(now)
			where := func() string {
				return fmt.Sprintf("round %d op %d t=%d key %s: oracle debt %d ms (burst %d ms, token %d ms)", round, ops, now, key, debt, burstMs, tok)
			}
			deny := func(perTok int64) { // a denial's penalty, in the oracle
				if penMs > 0 {
					o.add(now, min(penMs, pen*perTok), maxMs)
				}
			}
			op := rng.IntN(10)
			if j >= burstOps {
				op = 0
			}
			switch op {
			case 0, 1: // AllowN
				n := drawN(c.burst)
				if j >= burstOps {
					n = c.burst
				}
				if l.AllowN(tm, key, n) {
					if debt+int64(n)*tok > burstMs {
						t.Fatalf("%s: AllowN(%d) admitted over the exact bucket", where(), n)
					}
					if debt+int64(n)*tok == burstMs {
						tight++
					}
					o.add(now, int64(n)*tok, maxMs)
				} else {
					if debt+int64(n)*tok <= burstMs {
						early++
					}
					deny(tok)
				}
			case 2: // Allow, at the clock's reading (= tm)
				if l.Allow(key) {
					if debt+tok > burstMs {
						t.Fatalf("%s: Allow admitted over the exact bucket", where())
					}
					o.add(now, tok, maxMs)
				} else {
					deny(tok)
				}
			case 3, 4: // DecideN
				n := drawN(c.burst)
				d := l.DecideN(tm, key, n)
				if d.Allowed {
					if debt+int64(n)*tok > burstMs {
						t.Fatalf("%s: DecideN(%d) admitted over the exact bucket: %+v", where(), n, d)
					}
					if debt+int64(n)*tok == burstMs {
						tight++
					}
					o.add(now, int64(n)*tok, maxMs)
					after := o.debt(now)
					if want := int((burstMs - after) / tok); d.Remaining > want {
						t.Fatalf("%s: DecideN(%d) Remaining %d > the oracle's %d", where(), n, d.Remaining, want)
					}
					if d.ResetAfter < time.Duration(after)*time.Millisecond {
						t.Fatalf("%s: DecideN(%d) ResetAfter %v < the oracle's %d ms", where(), n, d.ResetAfter, after)
					}
				} else {
					deny(tok)
					after := o.debt(now)
					if want := after + int64(n)*tok - burstMs; d.RetryAfter < time.Duration(want)*time.Millisecond {
						t.Fatalf("%s: DecideN(%d) RetryAfter %v < the oracle's %d ms: %+v", where(), n, d.RetryAfter, want, d)
					}
					if d.ResetAfter < time.Duration(after)*time.Millisecond {
						t.Fatalf("%s: DecideN(%d) denied, ResetAfter %v < the oracle's %d ms", where(), n, d.ResetAfter, after)
					}
				}
			case 5: // ReserveN
				n := drawN(c.burst)
				r := l.ReserveN(tm, key, n)
				if r.OK() {
					if debt+int64(n)*tok > maxMs {
						t.Fatalf("%s: ReserveN(%d) OK past MaxDebt (%d ms)", where(), n, maxMs)
					}
					o.add(now, int64(n)*tok, maxMs)
					if want := o.debt(now) - burstMs; r.DelayFrom(tm) < time.Duration(want)*time.Millisecond {
						t.Fatalf("%s: ReserveN(%d) Delay %v < the oracle's %d ms", where(), n, r.DelayFrom(tm), want)
					}
				}
			case 6: // PeekN
				n := drawN(c.burst)
				d := l.PeekN(tm, key, n)
				if d.Allowed && debt+int64(n)*tok > burstMs {
					t.Fatalf("%s: PeekN(%d) says admitted over the exact bucket", where(), n)
				}
				if !d.Allowed {
					if want := debt + int64(n)*tok - burstMs; d.RetryAfter < time.Duration(want)*time.Millisecond {
						t.Fatalf("%s: PeekN(%d) RetryAfter %v < the oracle's %d ms", where(), n, d.RetryAfter, want)
					}
				}
			case 7: // TokensAt
				got := l.TokensAt(tm, key)
				if want := float64(burstMs-debt) / float64(tok); got > want+1e-9 {
					t.Fatalf("%s: TokensAt %v > the oracle's %v", where(), got, want)
				}
			default: // the tier R/2: a token costs 2 of R's
				n := drawN(tierBurst)
				if op == 8 {
					if tier.AllowN(tm, key, n) {
						if debt+int64(n)*tierTok > tierBurstMs {
							t.Fatalf("%s: tier AllowN(%d) admitted over the tier's exact bucket (%d ms per token, burst %d ms)", where(), n, tierTok, tierBurstMs)
						}
						o.add(now, int64(n)*tierTok, maxMs)
					} else {
						deny(tierTok)
					}
					break
				}
				d := tier.DecideN(tm, key, n)
				if d.Allowed {
					if debt+int64(n)*tierTok > tierBurstMs {
						t.Fatalf("%s: tier DecideN(%d) admitted over the tier's exact bucket", where(), n)
					}
					o.add(now, int64(n)*tierTok, maxMs)
					if want := int((tierBurstMs - o.debt(now)) / tierTok); d.Remaining > want {
						t.Fatalf("%s: tier DecideN(%d) Remaining %d > the oracle's %d", where(), n, d.Remaining, want)
					}
				} else {
					deny(tierTok)
					if want := o.debt(now) + int64(n)*tierTok - tierBurstMs; d.RetryAfter < time.Duration(want)*time.Millisecond {
						t.Fatalf("%s: tier DecideN(%d) RetryAfter %v < the oracle's %d ms", where(), n, d.RetryAfter, want)
					}
				}
			}
		}
	}
	st := l.Stats()
	t.Logf("%d ops, %d admitted (%d exactly filling the bucket), %d denied (%d of AllowN's where the oracle admits)", ops, st.Admitted, tight, st.Denied, early)
	if tight == 0 {
		t.Fatalf("the run never filled a bucket exactly: no power")
	}
	return early
}
