package bucket_test

// audit27: snapshots of the bucket engine taken while writers run, the
// clock moving during the encode (by a millisecond or by a long-move
// jump per chunk written). Restored into an engine built with the same
// configuration, at the snapshot's instant (no downtime), every key's
// debt is at least the debt of the admissions that completed before
// WriteTo was called, drained to the snapshot instant (limit/doc.go,
// "Saving and restoring": "every key's restored debt is at least its
// debt when its cells were read, drained since").

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a27StepWriter advances clk by step ms on every Write (the encode writes
// its header, then one chunk of 1024 lines per call, then its trailer).
type a27StepWriter struct {
	buf  bytes.Buffer
	clk  *sketchtest.FakeClock
	step int64
}

func (w *a27StepWriter) Write(p []byte) (int, error) {
	w.clk.Set(w.clk.NowMillis() + w.step)
	runtime.Gosched()
	return w.buf.Write(p)
}

func TestAudit27SnapshotUnderWritersOneSided(t *testing.T) {
	for _, c := range []struct {
		name string
		law  bucket.Law
		step int64
	}{
		{"1000x60/1ms", bucket.Linear(1000, 60), 1},
		{"1000x60/6ms", bucket.Linear(1000, 60), 6}, // past the slack (5.5 ms): long moves during the encode
		{"10x20/200ms", bucket.Linear(10, 20), 200}, // past the slack (184 ms)
	} {
		t.Run(c.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
			const lines, nkeys, writers = 3000, 50_000, 4 // 42,000 slots: past capacity
			clk := sketchtest.NewFakeClock()
			clk.Set(3_000_000)
			e, err := bucket.New(bucket.Config{Lines: lines, Law: c.law, Clock: clk, SeedSet: true, Seed: 27})
			if err != nil {
				t.Fatal(err)
			}
			q := e.Quantum()
			if q.PerMs == 0 {
				t.Skip("ticks longer than a ms")
			}
			u, g := uint64(q.PerUnit), q.PerMs
			limTok := q.Span / u * 3 / 4
			key := func(i int) string { return fmt.Sprintf("s%05d", i) }
			var adm [nkeys]atomic.Uint64
			// Frozen phase: every admission at tick t0.
			t0 := bucket.NowMs(e)*g + a27TickBase
			race(writers, 12_000, func(gor, i int) bool {
				k := (gor*7919 + i*104729) % 4000 // ~12 admissions each: debts that outlast the encode
				n := uint64(1 + (i % 5))
				if e.TryUpdate(key(k), float64(n), float64(limTok)) {
					adm[k].Add(n * u)
				}
				return true
			})
			// Writers keep running (at the clock the encode moves) while
			// WriteTo runs; the lower bound is taken before it starts.
			var stop atomic.Bool
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(w), 1))
					for !stop.Load() {
						k := r.IntN(nkeys)
						e.TryUpdate(key(k), float64(1+r.IntN(5)), float64(limTok))
					}
				})
			}
			runtime.Gosched()
			lower := make([]uint64, nkeys)
			for k := range nkeys {
				lower[k] = adm[k].Load()
			}
			sw := &a27StepWriter{clk: clk, step: c.step}
			if _, err := e.WriteTo(sw); err != nil {
				t.Fatal(err)
			}
			stop.Store(true)
			wg.Wait()

			clk2 := sketchtest.NewFakeClock()
			clk2.Set(clk.NowMillis()) // the snapshot's wall instant: no downtime
			e2, err := bucket.New(bucket.Config{Lines: lines, Law: c.law, Clock: clk2, SeedSet: true, Seed: 27})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e2.ReadFrom(bytes.NewReader(sw.buf.Bytes())); err != nil {
				t.Fatal(err)
			}
			tr := bucket.NowMs(e2)*g + a27TickBase
			checked := 0
			for k := range nkeys {
				if lower[k] == 0 {
					continue
				}
				want := float64(0)
				if t0+lower[k] > tr {
					want = float64(t0+lower[k]-tr) / float64(u)
					checked++
				}
				if got := e2.Query(key(k)); got < want-1e-9 {
					t.Fatalf("key %d: restored debt %v below %v (admitted %d ticks at tick %d, restored at tick %d)", k, got, want, lower[k], t0, tr)
				}
			}
			if checked == 0 {
				t.Fatalf("no key with a debt left at the snapshot instant: the test checks nothing")
			}
			t.Logf("%d keys checked, %d ticks drained", checked, tr-t0)
		})
	}
}
