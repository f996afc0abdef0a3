package bucket_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// truth is the exact per-key load of the law (float64, at the law's own
// rate, not the engine's quantized one), replayed from the writes that
// took effect.
type truth struct {
	law  bucket.Law
	ops  map[string][]truthOp
	next int
}

type truthOp struct {
	id  int
	ms  uint64
	n   float64
	off bool // refunded
}

func newTruth(law bucket.Law) *truth { return &truth{law: law, ops: map[string][]truthOp{}} }

func (tr *truth) add(key string, ms uint64, n float64) int {
	tr.next++
	tr.ops[key] = append(tr.ops[key], truthOp{id: tr.next, ms: ms, n: n})
	return tr.next
}

func (tr *truth) refund(key string, id int) {
	for i := range tr.ops[key] {
		if tr.ops[key][i].id == id {
			tr.ops[key][i].off = true
		}
	}
}

// value returns key's true load at ms.
func (tr *truth) value(key string, ms uint64) float64 {
	l := tr.law
	switch l.Kind {
	case bucket.KindLinear:
		// In debt form (the drain since the previous write), not as a
		// stamp in absolute ms, so that a fast law's tiny debts keep
		// their precision after hours of ms.
		debt, last := 0.0, uint64(0)
		for _, o := range tr.ops[key] {
			if o.off {
				continue
			}
			debt = math.Max(debt-float64(o.ms-last)*l.Rate/1000, 0)
			debt = math.Min(debt+o.n, l.Max)
			last = o.ms
		}
		return math.Max(debt-float64(ms-last)*l.Rate/1000, 0)
	case bucket.KindExponential:
		s, last := 0.0, uint64(0)
		for _, o := range tr.ops[key] {
			if o.off {
				continue
			}
			s = math.Min(s*math.Exp(-l.Lambda*float64(o.ms-last)/1000)+o.n, l.Max)
			last = o.ms
		}
		return s * math.Exp(-l.Lambda*float64(ms-last)/1000)
	default:
		s := 0.0
		for _, o := range tr.ops[key] {
			if !o.off {
				s = math.Min(s+o.n, l.Max)
			}
		}
		return s
	}
}

// below reports whether an engine reading v is below the true value w,
// beyond the law's allowance: float64 rounding of the truth itself, and
// for the exponential law the remainders below Resolution it drops, at
// most one per tick, which add up to at most Resolution/(1-exp(-kappa)).
func (tr *truth) below(e *bucket.Engine, v, w float64) bool {
	slack := 1e-9*math.Max(1, w) + 1.01*bucket.DropSlack(e)
	return v < w-slack
}

var debugDiff = false

var diffLaws = []bucket.Law{
	bucket.Linear(10, 40),  // exact: 1500 ticks per token, 15 per ms
	bucket.Linear(1000, 4), // exact, fast
	bucket.Linear(1, 20),   // exact rate, one tick per 2 ms
	bucket.Linear(3, 10),   // rate 3/s: quantized to a slightly slower drain
	bucket.Linear(0.01, 5), // slow: long ticks
	bucket.None(100),       // a counter
	bucket.Exponential(0.5, 100, 0),
	bucket.Exponential(20, 50, 1e-6),
}

// diffRun is one differential run: the engine, the mutex model of the
// same rules, the truth, and the reservations not yet refunded.
type diffRun struct {
	e    *bucket.Engine
	m    *bucket.Model
	tr   *truth
	keys []string
	open []diffPending
}

type diffPending struct {
	key string
	id  int
	er  bucket.Receipt
	mr  bucket.ModelReceipt
}

func newDiffRun(e *bucket.Engine, law bucket.Law, nkeys int) *diffRun {
	d := &diffRun{e: e, m: bucket.NewModel(e), tr: newTruth(law), keys: make([]string, nkeys)}
	for i := range d.keys {
		d.keys[i] = fmt.Sprintf("k%d", i)
	}
	return d
}

// step draws one operation (TryUpdateAndQuery, Update, UpdateAndQuery,
// Query, TryReserve, or the Refund of an open reservation) on key with
// load n and limit, runs it on the engine and the model at the engine's
// now, and fails rt when their answers differ or when any key reads
// below its true load afterwards.
func (d *diffRun) step(rt *rapid.T, step int, key string, n, limit float64) {
	e, m, tr := d.e, d.m, d.tr
	ms := bucket.NowMs(e)
	var eok, mok bool
	var ev, mv float64
	switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
	case 0:
		eok, ev = e.TryUpdateAndQuery(key, n, limit)
		mok, mv, _ = m.Do(key, ms, bucket.OpTry, n, limit)
		if eok && n > 0 {
			tr.add(key, ms, n)
		}
	case 1:
		e.Update(key, n)
		mok, _, _ = m.Do(key, ms, bucket.OpAdd, n, 0)
		eok = mok
		if n > 0 {
			tr.add(key, ms, n)
		}
	case 2:
		ev = e.UpdateAndQuery(key, n)
		_, mv, _ = m.Do(key, ms, bucket.OpAdd, n, 0)
		if n > 0 {
			tr.add(key, ms, n)
		}
	case 3:
		ev = e.Query(key)
		_, mv, _ = m.Do(key, ms, bucket.OpQuery, 0, 0)
	case 4:
		var er bucket.Receipt
		var mr bucket.ModelReceipt
		er, eok = e.TryReserve(key, n, limit)
		mok, _, mr = m.Do(key, ms, bucket.OpTry, n, limit)
		if eok && n > 0 {
			d.open = append(d.open, diffPending{key, tr.add(key, ms, n), er, mr})
		}
	case 5:
		if len(d.open) == 0 {
			return
		}
		i := rapid.IntRange(0, len(d.open)-1).Draw(rt, "refund")
		p := d.open[i]
		d.open = append(d.open[:i], d.open[i+1:]...)
		eok = e.Refund(&p.er)
		mok = m.Refund(&p.mr)
		if eok {
			tr.refund(p.key, p.id)
		}
	}
	if eok != mok || ev != mv {
		rt.Fatalf("step %d (ms %d): engine (%v, %v) != model (%v, %v)", step, ms, eok, ev, mok, mv)
	}
	if debugDiff {
		rt.Logf("step %d ms %d tick %d: %v/%v; k0 %v truth %v; l0 %+v l1 %+v", step, ms, bucket.Tick(e), eok, ev, e.Query(d.keys[0]), tr.value(d.keys[0], ms), bucket.StateOf(e, 0), bucket.StateOf(e, 1))
	}
	for _, k := range d.keys {
		if v, w := e.Query(k), tr.value(k, bucket.NowMs(e)); tr.below(e, v, w) {
			rt.Fatalf("step %d: key %s reads %v below its true load %v", step, k, v, w)
		}
	}
}

// sameLines fails rt when a line of the engine and the model differ.
func (d *diffRun) sameLines(rt *rapid.T, when string) {
	for i := range d.e.Lines() {
		if es, ml := bucket.StateOf(d.e, i), d.m.Line(i); es != ml {
			rt.Fatalf("%s: line %d: engine %+v != model %+v", when, i, es, ml)
		}
	}
}

// TestDifferential runs random operation sequences on the engine and on
// the mutex model of the same rules, sequentially: every answer and, at
// the end, every line must agree; and every key's load must stay at or
// above its true load (one-sided) after every operation.
func TestDifferential(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		law := rapid.SampledFrom(diffLaws).Draw(rt, "law")
		lines := rapid.IntRange(2, 6).Draw(rt, "lines")
		nkeys := rapid.IntRange(1, 120).Draw(rt, "keys")
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := bucket.MustNew(bucket.Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: rapid.Uint64().Draw(rt, "seed")})
		d := newDiffRun(e, law, nkeys)
		steps := rapid.IntRange(1, 400).Draw(rt, "steps")
		for step := range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "advance") {
			case 0, 1:
				clk.Advance(time.Duration(rapid.IntRange(1, 50).Draw(rt, "ms")) * time.Millisecond)
			case 2:
				clk.Advance(time.Duration(rapid.IntRange(50, 200_000).Draw(rt, "bigms")) * time.Millisecond)
			}
			key := d.keys[rapid.IntRange(0, nkeys-1).Draw(rt, "key")]
			n := float64(rapid.IntRange(0, 8).Draw(rt, "n"))
			if rapid.IntRange(0, 4).Draw(rt, "frac") == 0 {
				n = rapid.Float64Range(0, 3).Draw(rt, "nf")
			}
			limit := float64(rapid.IntRange(0, int(law.Max)+2).Draw(rt, "limit"))
			d.step(rt, step, key, n, limit)
		}
		d.sameLines(rt, "end")
	})
}
