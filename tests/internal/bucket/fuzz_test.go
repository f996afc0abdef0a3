package bucket_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// FuzzOps drives the engine and the mutex model with an operation stream
// decoded from the fuzzer's bytes, on keys the fuzzer chooses (any
// bytes): answers and lines must agree, and no key may read below its
// true load.
func FuzzOps(f *testing.F) {
	f.Add([]byte("k"), []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0xff, 0x00}, []byte{1, 9, 1, 9, 40, 3, 200, 2})
	f.Fuzz(func(t *testing.T, keySeed, ops []byte) {
		if len(ops) > 600 {
			ops = ops[:600]
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		law := bucket.Linear(10, 40)
		e := bucket.MustNew(bucket.Config{Lines: 3, Law: law, Clock: clk, SeedSet: true, Seed: 11})
		m := bucket.NewModel(e)
		tr := newTruth(law)
		keys := make([]string, 24)
		for i := range keys {
			keys[i] = string(append(append([]byte(nil), keySeed...), byte(i)))
		}
		for i := 0; i+2 < len(ops); i += 3 {
			op, a, b := ops[i], ops[i+1], ops[i+2]
			if op&0x80 != 0 {
				clk.Advance(time.Duration(b) * time.Duration(1+op&0x3f) * time.Millisecond)
			}
			ms := bucket.NowMs(e)
			key := keys[int(a)%len(keys)]
			n := float64(b % 25)
			switch op % 3 {
			case 0:
				ok := e.TryUpdate(key, n, 20)
				mok, _, _ := m.Do(key, ms, bucket.OpTry, n, 20)
				if ok != mok {
					t.Fatalf("op %d: TryUpdate engine %v model %v", i/3, ok, mok)
				}
				if ok && n > 0 {
					tr.add(key, ms, n)
				}
			case 1:
				v := e.UpdateAndQuery(key, n)
				_, mv, _ := m.Do(key, ms, bucket.OpAdd, n, 0)
				if v != mv {
					t.Fatalf("op %d: UpdateAndQuery engine %v model %v", i/3, v, mv)
				}
				if n > 0 {
					tr.add(key, ms, n)
				}
			default:
				v := e.Query(key)
				_, mv, _ := m.Do(key, ms, bucket.OpQuery, 0, 0)
				if v != mv {
					t.Fatalf("op %d: Query engine %v model %v", i/3, v, mv)
				}
			}
			for _, k := range keys {
				if v, w := e.Query(k), tr.value(k, bucket.NowMs(e)); tr.below(e, v, w) {
					t.Fatalf("op %d: %q reads %v below its true load %v", i/3, k, v, w)
				}
			}
		}
		for i := range 3 {
			if es, ml := bucket.StateOf(e, i), m.Line(i); es != ml {
				t.Fatalf("line %d: engine %+v model %+v", i, es, ml)
			}
		}
	})
}
