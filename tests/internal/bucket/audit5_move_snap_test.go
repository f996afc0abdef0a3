package bucket_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit5MoveSnapshotDuringMoves: snapshots (WriteTo) taken while 4
// goroutines write keys alone in a 2- or 3-line engine, right after the
// clock moved by a gap around the slack (so the writers are moving the
// lines' time, in long moves of several steps for the longer gaps),
// restored (ReadFrom) into fresh engines of the same configuration after
// downtimes of 0 to an hour.
//
// snapshot.go: "each line is a state a reader could have seen at some
// moment of the encode ... so every key's restored load is at least its
// load when its lines were read, decayed ... a write in flight may or may
// not be in it"; "the restored engine is the saved one after an idle
// time equal to the downtime ... so every load has drained by the real
// elapsed time and none grows". So each key must read, restored, at
// least its debt at the phase's start drained by the downtime, and at
// most its debt with every write attempted in the phase, drained by the
// downtime (a phantom, an entry read one 2^16-tick wrap high, reads above
// Max).
func TestAudit5MoveSnapshotDuringMoves(t *testing.T) {
	downs := []time.Duration{0, time.Millisecond, 300 * time.Millisecond, 370 * time.Millisecond, 3 * time.Second, time.Hour}
	a5Procs(t, func(t *testing.T) {
		for ci, c := range a5Cfgs[:2] { // requests of 1 token
			for _, lines := range []int{2, 3} {
				L := a5LawOf(t, c.law)
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 34)
				seed := uint64(300 + 10*ci + lines)
				cfg := bucket.Config{Lines: lines, Law: c.law, Clock: clk, SeedSet: true, Seed: seed}
				e := bucket.MustNew(cfg)
				keys := a5Keys(e, 3*lines, "snap", map[uint16]bool{})
				d := make([]uint64, len(keys)) // debts (ticks) at the phase's time, as the engine read them
				for p := range reps(20, 6) {
					X := clk.Now()
					for i, k := range keys {
						if q, w := e.QueryAt(X, k), L.val(d[i]); q != w {
							t.Fatalf("%v lines %d phase %d: key %d reads %v at the phase's start, want %v", c.law, lines, p, i, q, w)
						}
					}
					att := make([]atomic.Int64, len(keys))
					var stop atomic.Bool
					var snaps [][]byte
					var wg sync.WaitGroup
					wg.Go(func() {
						for !stop.Load() || len(snaps) < 2 {
							var b bytes.Buffer
							if _, err := e.WriteTo(&b); err != nil {
								t.Error(err)
								return
							}
							snaps = append(snaps, b.Bytes())
							if len(snaps) >= 6 {
								return
							}
						}
					})
					race(4, 1, func(g, _ int) bool {
						rng := rand.New(rand.NewPCG(seed, uint64(p*4+g)))
						for range 40 {
							k := rng.IntN(len(keys))
							att[k].Add(1)
							if rng.IntN(2) == 0 {
								e.TryUpdate(keys[k], 1, float64(c.limit))
							} else {
								e.Update(keys[k], 1)
							}
						}
						return false
					})
					stop.Store(true)
					wg.Wait()
					var bad []string
					for si, snap := range snaps {
						down := downs[(p+si)%len(downs)]
						clk2 := sketchtest.NewFakeClock()
						clk2.Set(X.UnixMilli() + down.Milliseconds())
						cfg2 := cfg
						cfg2.Clock = clk2
						e2 := bucket.MustNew(cfg2)
						if _, err := e2.ReadFrom(bytes.NewReader(snap)); err != nil {
							t.Fatal(err)
						}
						for i, k := range keys {
							lo := L.drain(d[i], down.Milliseconds())
							hi := L.drain(min(d[i]+uint64(att[i].Load())*L.u, L.span), down.Milliseconds())
							if q := e2.Query(k); q < L.val(lo) || q > L.val(hi) {
								bad = append(bad, fmt.Sprintf("snapshot %d restored after %v: key %d reads %v, outside [%v, %v] (debt %v at the phase's start, %d writes attempted)", si, down, i, q, L.val(lo), L.val(hi), L.val(d[i]), att[i].Load()))
							}
						}
						// The restored engine keeps working: one more
						// idle time, and every debt has drained by it.
						clk2.Advance(c.gaps[p%len(c.gaps)])
						for i, k := range keys {
							hi := L.drain(min(d[i]+uint64(att[i].Load())*L.u, L.span), (down + c.gaps[p%len(c.gaps)]).Milliseconds())
							e2.Update(keys[(i+1)%len(keys)], 1) // moves the restored lines
							if q := e2.Query(k); q > L.val(hi)+1 {
								bad = append(bad, fmt.Sprintf("snapshot %d restored after %v, then idle %v: key %d reads %v, above %v", si, down, c.gaps[p%len(c.gaps)], i, q, L.val(hi)+1))
							}
						}
					}
					if len(bad) > 0 {
						t.Fatalf("%v lines %d phase %d: %s", c.law, lines, p, strings.Join(bad, "; "))
					}
					for i, k := range keys {
						q := e.QueryAt(X, k)
						d[i] = uint64(q*float64(L.u) + 0.5)
						if L.val(d[i]) != q {
							t.Fatalf("key %d reads %v: not a whole number of ticks", i, q)
						}
					}
					gap := c.gaps[p%len(c.gaps)]
					clk.Advance(gap)
					for i := range d {
						d[i] = L.drain(d[i], gap.Milliseconds())
					}
				}
			}
		}
	})
}

// TestAudit5MoveSnapshotMovingBit: a snapshot holding lines with the
// moving bit set, the state WriteTo saves when it reads a line between a
// long move's bit and its first step (snapshot.go: "A line saved while a
// long move of its lw was on keeps its moving bit; the first writer
// after the restore finishes or calls off that move"). Built from a
// quiescent engine: keys alone written at T0, the clock 3 s later (the
// lines' time T0: any write now is a long move of Linear(10, 40)'s
// 369 ms slack), the snapshot's line headers given bit 47 and its
// checksum recomputed (the format in snapshot.go). Restored after a
// downtime of 0 to 3 s, every key must read exactly its debt drained by
// the idle time and the downtime ("the restored engine is the saved one
// after an idle time equal to the downtime"), take one more token
// exactly, read exactly that, and read 0 an hour later.
func TestAudit5MoveSnapshotMovingBit(t *testing.T) {
	law := bucket.Linear(10, 40)
	L := a5LawOf(t, law)
	for _, down := range []time.Duration{0, time.Millisecond, 369 * time.Millisecond, time.Second, 3 * time.Second} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 34)
		cfg := bucket.Config{Lines: 2, Law: law, Clock: clk, SeedSet: true, Seed: 9}
		e := bucket.MustNew(cfg)
		keys := a5Keys(e, 10, "mbit", map[uint16]bool{})
		debt := make([]uint64, len(keys)) // ticks
		for i, k := range keys {
			n := float64(5 + 4*i) // 0.5 s to 4.1 s of debt, clamped at 4 s
			e.Update(k, n)
			debt[i] = min(uint64(n)*L.u, L.span)
		}
		clk.Advance(3 * time.Second)
		var b bytes.Buffer
		if _, err := e.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		snap := b.Bytes()
		for i := range 2 {
			o := 104 + 64*i
			h := binary.LittleEndian.Uint64(snap[o:])
			if h&(1<<47) != 0 {
				t.Fatalf("line %d already moving in a quiescent engine", i)
			}
			binary.LittleEndian.PutUint64(snap[o:], h|1<<47)
		}
		n := len(snap)
		binary.LittleEndian.PutUint32(snap[n-4:], crc32.Checksum(snap[:n-4], crc32.MakeTable(crc32.Castagnoli)))
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(clk.NowMillis() + down.Milliseconds())
		cfg.Clock = clk2
		e2 := bucket.MustNew(cfg)
		if _, err := e2.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatalf("downtime %v: %v", down, err)
		}
		idle := (3*time.Second + down).Milliseconds()
		for i, k := range keys {
			d := L.drain(debt[i], idle)
			if q := e2.Query(k); q != L.val(d) {
				t.Errorf("downtime %v: key %d reads %v restored, want exactly %v", down, i, q, L.val(d))
			}
			debt[i] = d
		}
		for i, k := range keys {
			want := debt[i]+L.u <= 40*L.u
			if ok := e2.TryUpdate(k, 1, 40); ok != want {
				t.Errorf("downtime %v: key %d: TryUpdate(1, 40) at a debt of %v returned %v", down, i, L.val(debt[i]), ok)
			}
			if want {
				debt[i] += L.u
			}
		}
		for i, k := range keys {
			if q := e2.Query(k); q != L.val(debt[i]) {
				t.Errorf("downtime %v: key %d reads %v after its write, want exactly %v", down, i, q, L.val(debt[i]))
			}
		}
		clk2.Advance(time.Hour)
		for i, k := range keys {
			if q := e2.Query(k); q != 0 {
				t.Errorf("downtime %v: key %d reads %v an hour later", down, i, q)
			}
		}
	}
}
