package sketch_test

// Audit 98 (package decay and the core's float32 precision claims): an
// exact oracle (math/big at 320 bits: exact for None, Linear and an
// integer custom law, within 2^-280 relative for Exponential) against
// every write form of the public API.
//
// Contract: sketch/doc.go, "Never below the truth: ... with Min
// aggregation and non-negative deltas Query(k) >= the key's true score,
// whatever the collisions, clamps, roll-backs, rotations or clock jumps";
// "Time never runs backwards: a clock step back counts as zero elapsed
// time ... an At time ahead of the clock counts as the clock's reading.
// Any idle time, 1 ms to years, decays as int64 stamps would";
// internal/core/at.go (a t before a time already used counts as that
// time); docs/precision.md, "Every step ... is at or above its float64
// counterpart (the add at or above the exact sum)", and "Scores below
// 1e-290" (an exact float64 underflow stays 0: the one allowance here,
// 2^-1070 absolute); Sketch.Merge ("adds other into s under the additive
// law ... For Linear, overlap ... so that no key reads below the union of
// both streams"); doc.go, "Snapshots ... restore on a new process clock
// with every score aged by its downtime"; TryUpdate's "aggregate + delta
// <= limit as a float64 compare".

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a98Prec = 320

// a98Drain3 is a custom law: 3 whole units a millisecond toward 0,
// stopping at 0. On whole scores below 2^53 its float64 arithmetic is
// exact, so it composes exactly and has an exact oracle.
type a98Drain3 struct{}

func (a98Drain3) Apply(s float64, dt int64) float64 {
	if dt <= 0 || s == 0 || s != s {
		return s
	}
	d := 3 * float64(dt)
	if s > 0 {
		return max(s-d, 0)
	}
	return min(s+d, 0)
}

// a98Law is a law and its exact counterpart.
type a98Law struct {
	name  string
	d     decay.Decay
	kind  byte // 'n' none, 'e' exponential, 'l' linear, 'c' a98Drain3
	param float64
	whole bool // deltas must be whole (the custom law's oracle)
	cache map[int64]*big.Float
}

func a98Laws() []*a98Law {
	return []*a98Law{
		{name: "none", d: decay.None(), kind: 'n'},
		{name: "exp-halflife10s", d: decay.Exponential(math.Ln2 / 10), kind: 'e', param: math.Ln2 / 10},
		{name: "exp-3", d: decay.Exponential(3), kind: 'e', param: 3},
		{name: "exp-1e-9", d: decay.Exponential(1e-9), kind: 'e', param: 1e-9},
		{name: "exp-1e-10-subnudge", d: decay.Exponential(1e-10), kind: 'e', param: 1e-10},
		{name: "linear-0.1", d: decay.Linear(0.1), kind: 'l', param: 0.1},
		{name: "linear-third", d: decay.Linear(1.0 / 3), kind: 'l', param: 1.0 / 3},
		{name: "linear-100", d: decay.Linear(100), kind: 'l', param: 100},
		{name: "linear-7000-whole", d: decay.Linear(7000), kind: 'l', param: 7000},
		{name: "linear-nextafter500", d: decay.Linear(math.Nextafter(500, 0)), kind: 'l', param: math.Nextafter(500, 0)},
		{name: "linear-1e-300", d: decay.Linear(1e-300), kind: 'l', param: 1e-300},
		{name: "linear-1e300-widedrop", d: decay.Linear(1e300), kind: 'l', param: 1e300},
		{name: "exp-1e300", d: decay.Exponential(1e300), kind: 'e', param: 1e300},
		{name: "custom-drain3", d: a98Drain3{}, kind: 'c', whole: true},
	}
}

func a98Big(x float64) *big.Float { return new(big.Float).SetPrec(a98Prec).SetFloat64(x) }

// a98ExpNeg returns e^-x for x >= 0 at a98Prec bits: halve x until it
// is below 2^-8, a Taylor series, then square back.
func a98ExpNeg(x *big.Float) *big.Float {
	y := new(big.Float).SetPrec(a98Prec + 64).Set(x)
	k := 0
	lim := big.NewFloat(0x1p-8)
	for y.Cmp(lim) > 0 {
		y.SetMantExp(y, -1)
		k++
	}
	y.Neg(y)
	sum := new(big.Float).SetPrec(a98Prec + 64).SetInt64(1)
	term := new(big.Float).SetPrec(a98Prec + 64).SetInt64(1)
	for n := int64(1); n < 60 && term.Sign() != 0 && term.MantExp(nil) > -(a98Prec+80); n++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(a98Prec+64).SetInt64(n))
		sum.Add(sum, term)
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum.SetPrec(a98Prec)
}

// decayBig returns v after dt ms of the law, exactly (Exponential: to
// a98Prec bits).
func (l *a98Law) decayBig(v *big.Float, dt int64) *big.Float {
	if dt <= 0 || v.Sign() == 0 {
		return v
	}
	switch l.kind {
	case 'e':
		if l.cache == nil {
			l.cache = map[int64]*big.Float{}
		}
		f, ok := l.cache[dt]
		if !ok {
			x := new(big.Float).SetPrec(a98Prec).Mul(a98Big(l.param), new(big.Float).SetPrec(a98Prec).SetInt64(dt))
			x.Quo(x, a98Big(1000))
			if x.Cmp(a98Big(1000)) > 0 {
				// MaxFloat32 x e^-1000 is below the 2^-1070 allowance.
				f = a98Big(0)
			} else {
				f = a98ExpNeg(x)
			}
			l.cache[dt] = f
		}
		return new(big.Float).SetPrec(a98Prec).Mul(v, f)
	case 'l', 'c':
		var drop *big.Float
		if l.kind == 'l' {
			drop = new(big.Float).SetPrec(a98Prec).Mul(a98Big(l.param), new(big.Float).SetPrec(a98Prec).SetInt64(dt))
			drop.Quo(drop, a98Big(1000))
		} else {
			drop = new(big.Float).SetPrec(a98Prec).SetInt64(3 * dt)
		}
		r := new(big.Float).SetPrec(a98Prec)
		if v.Sign() > 0 {
			r.Sub(v, drop)
			if r.Sign() < 0 {
				r.SetInt64(0)
			}
		} else {
			r.Add(v, drop)
			if r.Sign() > 0 {
				r.SetInt64(0)
			}
		}
		return r
	}
	return v
}

type a98Ev struct {
	t int64
	d float64
}

// truth replays a key's events (clamped to [lo, hi] after each add, as
// the reference does) and decays the result to tq.
func (l *a98Law) truth(evs []a98Ev, lo, hi float64, tq int64) *big.Float {
	v := a98Big(0)
	last := int64(0)
	blo, bhi := a98Big(lo), a98Big(hi)
	for _, e := range evs {
		v = l.decayBig(v, e.t-last)
		v = new(big.Float).SetPrec(a98Prec).Add(v, a98Big(e.d))
		if v.Cmp(bhi) > 0 {
			v = bhi
		}
		if v.Cmp(blo) < 0 {
			v = blo
		}
		last = e.t
	}
	return l.decayBig(v, tq-last)
}

// a98Below reports whether got is below the exact truth by more than the
// documented underflow allowance (2^-1070 absolute) and more than the
// oracle's own error (2^-280 relative).
func a98Below(got float64, truth *big.Float) bool {
	g := a98Big(got)
	slack := new(big.Float).SetPrec(a98Prec).Abs(truth)
	slack.SetMantExp(slack, -280)
	slack.Add(slack, big.NewFloat(0x1p-1070))
	g.Add(g, slack)
	return g.Cmp(truth) < 0
}

// a98Replica is one sketch and its keys' event logs; hw mirrors the
// sketch's time high-water mark.
type a98Replica struct {
	s   *sketch.Sketch
	evs map[string][]a98Ev
	hw  int64
}

// a98Gaps are clock moves: small steps, the table edge 2^24, the sweep
// period 2^29, the stamp horizon 2^31 and wrap 2^32, and days.
var a98Gaps = []int64{0, 1, 1, 2, 3, 7, 50, 999, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1 << 29, 1<<31 + 1, 1 << 32, 3 * 86_400_000}

// a98Delta draws a non-negative delta: whole, fractional, tiny, float32
// boundary values, and values near or past Hi.
func a98Delta(rng *rand.Rand, hi float64, whole bool) float64 {
	if whole {
		return float64([]int{0, 1, 2, 5, 100, 1 << 20, 1<<24 - 1, 1 << 24}[rng.IntN(8)])
	}
	h := hi
	if math.IsInf(h, 1) {
		h = math.MaxFloat32
	}
	switch rng.IntN(12) {
	case 0:
		return 0
	case 1:
		return 0.1
	case 2:
		return 1e-30
	case 3:
		return 0x1p-149
	case 4:
		return 1 << 24
	case 5:
		return 1<<24 + 1
	case 6:
		return h
	case 7:
		return h * 0.999
	case 8:
		return float64(rng.IntN(100))
	case 9:
		return rng.Float64() * 5
	case 10:
		return 1e-5
	}
	return 1e6 + 1e-5
}

func TestAudit98PrecOracleEveryWriteForm(t *testing.T) {
	his := []float64{1e9, 0.1, 0x1p-149, 1 << 24, math.MaxFloat32, math.Inf(1)}
	shapes := []struct{ l, m uint32 }{{1, 1}, {2, 3}, {3, 64}}
	for li, lw := range a98Laws() {
		for hiIdx, hi := range his {
			if math.IsInf(hi, 1) && (lw.kind == 'n') {
				continue // +Inf needs a law that drains
			}
			for si, sh := range shapes {
				name := fmt.Sprintf("%s/hi=%g/L%dM%d", lw.name, hi, sh.l, sh.m)
				seed := uint64(li*100 + hiIdx*10 + si)
				t.Run(name, func(t *testing.T) {
					a98RunOracle(t, lw, hi, sh.l, sh.m, seed)
				})
			}
		}
	}
}

func a98RunOracle(t *testing.T, lw *a98Law, hi float64, levels, cells uint32, seed uint64) {
	rng := rand.New(rand.NewPCG(98, seed))
	clk := sketchtest.NewFakeClock()
	const t0 = 1_760_000_000_000
	clk.Set(t0)
	lo := 0.0
	if seed%2 == 1 {
		lo = -50
	}
	cfg := sketch.Config{Levels: levels, CellsPerLevel: cells, Decay: lw.d, Lo: lo, Hi: hi, Seed: seed, Clock: clk}
	newRep := func() *a98Replica {
		return &a98Replica{s: mustNewSketch(t, cfg), evs: map[string][]a98Ev{}, hw: clk.NowMillis()}
	}
	a, b := newRep(), newRep()
	keys := []string{"k0", "k1", "k2", "k3", "k4"}
	effHi := hi
	if math.IsInf(hi, 1) {
		effHi = math.MaxFloat32 // "as if Hi were MaxFloat32"
	}
	// eff is the time an operation at t uses (at.go): the clock's reading
	// for a t ahead of it, the high-water mark for one behind it.
	eff := func(r *a98Replica, tm int64) int64 {
		e := max(r.hw, min(tm, clk.NowMillis()))
		r.hw = e
		return e
	}
	check := func(r *a98Replica, op, k string, got float64, at int64) {
		t.Helper()
		tr := lw.truth(r.evs[k], lo, effHi, at)
		if a98Below(got, tr) {
			t.Fatalf("%s(%s) at +%d ms read %.17g below the exact truth %s (events %v)", op, k, at-t0, got, tr.Text('g', 20), r.evs[k])
		}
	}
	for step := range 200 {
		r := a
		if rng.IntN(4) == 0 {
			r = b
		}
		k := keys[rng.IntN(len(keys))]
		d := a98Delta(rng, hi, lw.whole)
		now := clk.NowMillis()
		switch op := rng.IntN(14); op {
		case 0:
			r.s.UpdateString(k, d)
			e := eff(r, now)
			r.evs[k] = append(r.evs[k], a98Ev{e, d})
		case 1:
			got := r.s.UpdateAndQueryString(k, d)
			e := eff(r, now)
			r.evs[k] = append(r.evs[k], a98Ev{e, d})
			check(r, "UpdateAndQuery", k, got, e)
		case 2, 3: // At ahead of or behind the clock
			off := []int64{-1, 1, -5000, 5000, -(1 << 30)}[rng.IntN(5)]
			tm := now + off
			if rng.IntN(2) == 0 {
				r.s.UpdateAt(time.UnixMilli(tm), k, d)
				e := eff(r, tm)
				r.evs[k] = append(r.evs[k], a98Ev{e, d})
			} else {
				got := r.s.UpdateAndQueryAt(time.UnixMilli(tm), k, d)
				e := eff(r, tm)
				r.evs[k] = append(r.evs[k], a98Ev{e, d})
				check(r, "UpdateAndQueryAt", k, got, e)
			}
		case 4, 5: // TryUpdate around the decision boundary
			q := r.s.QueryString(k)
			e := eff(r, now)
			check(r, "Query", k, q, e)
			limit := []float64{q + d, q + d - 1, math.Nextafter(q+d, 0), q + d + 1, hi * 2, -1}[rng.IntN(6)]
			if math.IsInf(limit, 0) || math.IsNaN(limit) {
				limit = math.MaxFloat64
			}
			var ok bool
			if op == 4 {
				ok = r.s.TryUpdateString(k, d, limit)
			} else {
				ok = r.s.TryUpdateAt(time.UnixMilli(now+int64(rng.IntN(3))-1), k, d, limit)
				e = eff(r, now) // the high-water mark is at now already (the Query above)
			}
			if want := q+d <= limit; ok != want {
				t.Fatalf("TryUpdate(%s, %g, %g) = %v on an aggregate of %.17g (step %d)", k, d, limit, ok, q, step)
			}
			if ok {
				r.evs[k] = append(r.evs[k], a98Ev{e, d})
			}
		case 6: // clock moves forward
			clk.Set(now + a98Gaps[rng.IntN(len(a98Gaps))])
		case 7: // one operation on a clock stepped back, then the clock returns
			back := []int64{1, 1000, 1 << 31}[rng.IntN(3)]
			clk.Set(now - back)
			r.s.UpdateString(k, d)
			e := eff(r, now-back)
			r.evs[k] = append(r.evs[k], a98Ev{e, d})
			got := r.s.QueryString(k)
			check(r, "Query after a step back", k, got, eff(r, now-back))
			clk.Set(now)
		case 8: // QueryAt ahead or behind
			tm := now + []int64{-3, 0, 7}[rng.IntN(3)]
			got := r.s.QueryAt(time.UnixMilli(tm), k)
			check(r, "QueryAt", k, got, eff(r, tm))
		case 9:
			det := r.s.QueryDetailed([]byte(k))
			e := eff(r, now)
			check(r, "QueryDetailed", k, det.Score, e)
			for _, lv := range det.Levels {
				check(r, fmt.Sprintf("QueryDetailed level %d", lv.Level), k, lv.Score, e)
			}
		case 10: // Merge b into a, at a's time: the union of both streams
			if lw.kind == 'c' {
				continue // a custom law is not additive
			}
			var err error
			e := eff(a, now)
			eff(b, now)
			if lw.kind == 'l' {
				// overlap: every ms both replicas may have held a score.
				err = a.s.Merge(b.s, time.Duration(e-t0+1)*time.Millisecond)
			} else {
				err = a.s.Merge(b.s)
			}
			if err != nil {
				t.Fatal(err)
			}
			for kk, ev := range b.evs {
				u := append(append([]a98Ev(nil), a.evs[kk]...), ev...)
				sort.SliceStable(u, func(i, j int) bool { return u[i].t < u[j].t })
				a.evs[kk] = u
			}
			b.s.Reset()
			b.evs = map[string][]a98Ev{}
			// Linear's union: the separate replays drain each stream,
			// the union drains the sum once; the overlap covers it.
		case 11: // snapshot, downtime, restore on a fresh sketch
			var buf bytes.Buffer
			if _, err := r.s.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			down := []int64{0, 1, 1 << 20, 1 << 29, 1<<31 + 5}[rng.IntN(5)]
			clk.Set(now + down)
			ns := mustNewSketch(t, cfg)
			if _, err := ns.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			r.s = ns
			r.hw = clk.NowMillis()
		default:
			got := r.s.QueryString(k)
			check(r, "Query", k, got, eff(r, now))
		}
	}
	// Every key of both replicas, at the end and a year later.
	for _, r := range []*a98Replica{a, b} {
		for _, k := range keys {
			check(r, "final Query", k, r.s.QueryString(k), eff(r, clk.NowMillis()))
		}
	}
	clk.Set(clk.NowMillis() + 365*86_400_000)
	for _, r := range []*a98Replica{a, b} {
		for _, k := range keys {
			check(r, "Query a year later", k, r.s.QueryString(k), eff(r, clk.NowMillis()))
		}
	}
}
