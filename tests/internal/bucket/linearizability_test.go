package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Linearizability: concurrent histories from 8 goroutines, checked with
// porcupine against sequential specifications. Time moves in phases: it
// is frozen while the goroutines run a phase and advanced between
// phases, so each operation's time is its phase's and the specification
// is exact (bucket.Linear(1000, 30): one token per ms, whole tokens).

type linKind uint8

const (
	linTry linKind = iota
	linAdd
	linQuery
)

type linIn struct {
	kind  linKind
	key   int
	n     int64
	limit int64
	ms    int64 // the phase's time, ms after the epoch
}

type linOut struct {
	ok  bool
	val float64
}

func describe(in linIn, out linOut) string {
	switch in.kind {
	case linTry:
		return fmt.Sprintf("@%d TryUpdate(k%d, %d, %d) -> %v", in.ms, in.key, in.n, in.limit, out.ok)
	case linAdd:
		return fmt.Sprintf("@%d Update(k%d, %d)", in.ms, in.key, in.n)
	}
	return fmt.Sprintf("@%d Query(k%d) -> %v", in.ms, in.key, out.val)
}

// record runs phases of clients goroutines with opsPer operations each,
// advancing clk between phases by 0 to 11 ms, and returns the history.
func record(clk *sketchtest.FakeClock, phases, clients, opsPer int, seed uint64, gen func(r *rand.Rand) linIn, apply func(linIn) linOut) []porcupine.Operation {
	return recordPhases(clk, phases, clients, opsPer, seed, gen, apply, func(r *rand.Rand) int64 { return int64(r.IntN(12)) }, nil)
}

// recordPhases is record with the jump between phases (ms) drawn by jump,
// and background, when not nil, starting goroutines in wg beside the
// clients of each phase (they start with the clients, on start).
func recordPhases(clk *sketchtest.FakeClock, phases, clients, opsPer int, seed uint64, gen func(r *rand.Rand) linIn, apply func(linIn) linOut, jump func(r *rand.Rand) int64, background func(wg *sync.WaitGroup, start <-chan struct{})) []porcupine.Operation {
	var stamp atomic.Int64
	var history []porcupine.Operation
	var mu sync.Mutex
	base := clk.NowMillis()
	for ph := range phases {
		ms := clk.NowMillis() - base
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed+uint64(ph), uint64(c)))
				var ops []porcupine.Operation
				<-start
				for range opsPer {
					in := gen(r)
					in.ms = ms
					call := stamp.Add(1)
					out := apply(in)
					ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: stamp.Add(1)})
				}
				mu.Lock()
				history = append(history, ops...)
				mu.Unlock()
			})
		}
		if background != nil {
			background(&wg, start)
		}
		close(start)
		wg.Wait()
		clk.Advance(time.Duration(jump(rand.New(rand.NewPCG(seed, uint64(ph))))) * time.Millisecond)
	}
	return history
}

func check(t *testing.T, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Log("porcupine timed out")
		return
	}
	ops := append([]porcupine.Operation(nil), history...)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "\n  c%d [%d,%d] %s", op.ClientId, op.Call, op.Return, describe(op.Input.(linIn), op.Output.(linOut)))
	}
	_ = info
	t.Fatalf("not linearizable:%s", b.String())
}

// keyState is the specification's state of one key: the ms at which its
// debt reaches 0 (tokens are ms at 1000/s).
type keyState struct{ tat int64 }

// exactModel: one key alone in the table: every answer exact.
var exactModel = porcupine.Model{
	Init: func() any { return keyState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(keyState), input.(linIn), output.(linOut)
		debt := max(s.tat-in.ms, 0)
		add := func(n int64) keyState { return keyState{min(max(s.tat, in.ms)+n, in.ms+30)} }
		switch in.kind {
		case linTry:
			ok := debt+in.n <= in.limit
			if ok != out.ok {
				return false, s
			}
			if ok && in.n > 0 {
				return true, add(in.n)
			}
			return true, s
		case linAdd:
			if in.n > 0 {
				return true, add(in.n)
			}
			return true, s
		}
		return out.val == float64(debt), s
	},
	Equal:             func(a, b any) bool { return a == b },
	DescribeOperation: func(in, out any) string { return describe(in.(linIn), out.(linOut)) },
	DescribeState:     func(s any) string { return fmt.Sprint(s) },
}

func applyOn(e *bucket.Engine, keys []string) func(linIn) linOut {
	return func(in linIn) linOut {
		t := e.Timebase().Now() // frozen within a phase
		switch in.kind {
		case linTry:
			return linOut{ok: e.TryUpdateAt(t, keys[in.key], float64(in.n), float64(in.limit))}
		case linAdd:
			e.UpdateAt(t, keys[in.key], float64(in.n))
			return linOut{}
		}
		return linOut{val: e.QueryAt(t, keys[in.key])}
	}
}

// TestLinearizableSingleKey: TryUpdate, Update and Query of one key,
// with decay between phases: linearizable against the exact token
// bucket.
func TestLinearizableSingleKey(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for rep := range reps(10, 2) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 1024, bucket.Linear(1000, 30), clk)
			keys := []string{fmt.Sprintf("lin-%d", rep)}
			gen := func(r *rand.Rand) linIn {
				switch x := r.IntN(10); {
				case x < 5:
					return linIn{kind: linTry, n: int64(r.IntN(4)), limit: int64(10 + r.IntN(15))}
				case x < 7:
					return linIn{kind: linAdd, n: int64(r.IntN(3))}
				}
				return linIn{kind: linQuery}
			}
			check(t, exactModel, record(clk, 6, 8, 12, uint64(rep), gen, applyOn(e, keys)))
		}
	})
}

// loadState: per-key true loads (frozen time, no decay): admissions must
// fit, denials are free (an over-count may deny), a Query may read
// high but never below.
type loadState []int64

// overCountModel: many keys sharing two lines (evictions, floors,
// fingerprint collisions, conflicts).
var overCountModel = porcupine.Model{
	Init: func() any { return loadState(make([]int64, 64)) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(loadState), input.(linIn), output.(linOut)
		switch in.kind {
		case linTry:
			if !out.ok || in.n == 0 {
				return true, s
			}
			if s[in.key]+in.n > in.limit {
				return false, s
			}
		case linAdd:
		default:
			return out.val >= float64(s[in.key]), s
		}
		ns := append(loadState(nil), s...)
		ns[in.key] += in.n
		return true, ns
	},
	Equal: func(a, b any) bool {
		x, y := a.(loadState), b.(loadState)
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	},
	DescribeOperation: func(in, out any) string { return describe(in.(linIn), out.(linOut)) },
	DescribeState:     func(s any) string { return fmt.Sprint(s) },
}

// TestLinearizableCollidingKeys: 40 keys in a 2-line engine (28 slots),
// time frozen: no admission past a key's limit and no Query below its
// admitted total, in some linearization of the real-time order.
func TestLinearizableCollidingKeys(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for rep := range reps(10, 2) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			e := newTest(t, 2, bucket.None(1000), clk)
			keys := make([]string, 40)
			for i := range keys {
				keys[i] = fmt.Sprintf("coll-%d-%d", rep, i)
			}
			gen := func(r *rand.Rand) linIn {
				k := r.IntN(len(keys))
				switch x := r.IntN(10); {
				case x < 6:
					return linIn{kind: linTry, key: k, n: int64(1 + r.IntN(2)), limit: 4}
				case x < 7:
					return linIn{kind: linAdd, key: k, n: 1}
				}
				return linIn{kind: linQuery, key: k}
			}
			check(t, overCountModel, record(clk, 1, 8, 25, uint64(rep), gen, applyOn(e, keys)))
		}
	})
}
