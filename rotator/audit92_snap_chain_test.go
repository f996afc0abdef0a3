package rotator_test

// Audit 92 (snapshots across rotation): a rotator saved at random
// instants (often with its deadline passed and no access yet to promote
// it: between lazy rotation steps) and restored into a new rotator on a
// new process's clock after a downtime, again and again, while updates,
// TryUpdates and queries go on, against a never-saved twin fed the same
// operations at the same wall times.
//
// Contract: Rotator.ReadFrom ("restored as Sketch.ReadFrom restores (each
// cell aged by the downtime, on the rotator's own clock). The rotation
// deadline moves to the rotator's clock through its wall time: a
// deadline that passed during the downtime promotes on the next access,
// as it would have"), docs/snapshots.md ("A restored rotator's primary
// retires after the time its deadline had left at the snapshot instant
// ... less the downtime"), API.md ("Min aggregation never
// under-estimates ... whatever the ... rotations, clock jumps"), and
// rotator/doc.go (a generation is the primary after N-1 periods of
// writes). Audit 88 saved an overdue rotator once under None and
// Exponential; this chains restores under all three provided laws, with
// TryUpdates, and checks a lower bound of its own as well as the twin.

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a92RotT0 = int64(1_800_000_000_000)

type a92RotWrite struct {
	at int64
	v  float64
}

// a92RotLower is a lower bound of a key's truth in the primary at now:
// its writes of the last (N-1) Periods (the primary has seen every one
// of them), decayed exactly (Linear simulated from empty: the law is
// monotone in its input, so leaving the older writes out only lowers it).
func a92RotLower(law string, ws []a92RotWrite, now, window int64) float64 {
	x, last := 0.0, int64(math.MinInt64)
	for _, w := range ws {
		if w.at <= now-window || w.at > now {
			continue
		}
		switch law {
		case "exp":
			x += w.v * math.Exp(-0.5*float64(now-w.at)/1000)
		case "linear":
			if last != math.MinInt64 {
				x = math.Max(x-2*float64(w.at-last)/1000, 0)
			}
			x += w.v
			last = w.at
		default:
			x += w.v
		}
	}
	if law == "linear" && last != math.MinInt64 {
		x = math.Max(x-2*float64(now-last)/1000, 0)
	}
	return x
}

// TestAudit92SnapRotatorChainEqualsTwin: three laws x N in {2, 3}, 400
// random steps each (fixed seeds): the clock moves 0 to 3.5 Periods
// (often past a deadline, with no access before the next snapshot), then
// an Update, a TryUpdate or nothing; every 9th step the rotator is saved
// (WriteTo or MarshalBinary) and restored (ReadFrom or UnmarshalBinary)
// into a rotator built on a fresh clock, at the snapshot instant plus a
// downtime of 0 to 2.5 Periods, or an hour, during which the twin sits
// idle. After every step every key reads exactly as in the twin, every
// TryUpdate decides as the twin's, and no key reads below its writes of
// the last N-1 Periods.
func TestAudit92SnapRotatorChainEqualsTwin(t *testing.T) {
	laws := []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"exp", decay.Exponential(0.5)}, {"linear", decay.Linear(2)}}
	const period = int64(1000)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for li, lw := range laws {
		for _, n := range []uint32{2, 3} {
			name := fmt.Sprintf("%s/N=%d", lw.name, n)
			rng := rand.New(rand.NewPCG(92, uint64(li*10)+uint64(n)))
			mk := func(c *sketchtest.FakeClock) *rotator.Rotator {
				r, err := rotator.New(rotator.Config{
					Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: lw.d, Hi: 1e9, Seed: 77, Clock: c},
					Generations: n, Period: time.Duration(period) * time.Millisecond,
				})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			wall := a92RotT0
			ct := sketchtest.NewFakeClock()
			ct.Set(wall)
			twin := mk(ct)
			cc := sketchtest.NewFakeClock()
			cc.Set(wall)
			cur := mk(cc)
			writes := map[string][]a92RotWrite{}
			restores := 0
			for step := range 400 {
				switch x := rng.IntN(10); {
				case x < 6:
					wall += rng.Int64N(period * 3 / 2)
				case x < 9:
					wall += rng.Int64N(period * 7 / 2)
				}
				ct.Set(wall)
				cc.Set(wall)
				k := keys[rng.IntN(len(keys))]
				switch rng.IntN(3) {
				case 0:
					v := float64(1 + rng.IntN(9))
					twin.UpdateString(k, v)
					cur.UpdateString(k, v)
					writes[k] = append(writes[k], a92RotWrite{wall, v})
				case 1:
					v, lim := float64(1+rng.IntN(5)), float64(5+rng.IntN(30))
					a, b := twin.TryUpdateString(k, v, lim), cur.TryUpdateString(k, v, lim)
					if a != b {
						t.Fatalf("%s step %d: TryUpdate(%s, %v, %v): twin %v, restored chain %v", name, step, k, v, lim, a, b)
					}
					if a {
						writes[k] = append(writes[k], a92RotWrite{wall, v})
					}
				}
				for _, q := range keys {
					g, w := cur.QueryString(q), twin.QueryString(q)
					if g != w {
						t.Fatalf("%s step %d (after %d restores) at t0+%d: %s reads %v, the twin %v", name, step, restores, wall-a92RotT0, q, g, w)
					}
					if lb := a92RotLower(lw.name, writes[q], wall, int64(n-1)*period); g < lb*(1-1e-12) {
						t.Fatalf("%s step %d at t0+%d: %s reads %v, below its writes of the last N-1 Periods (%v)", name, step, wall-a92RotT0, q, g, lb)
					}
				}
				if step%9 != 8 {
					continue
				}
				// Save now (without an access since the clock moved, so
				// often past the deadline), restore after a downtime.
				wall += rng.Int64N(period * 2)
				ct.Set(wall)
				cc.Set(wall)
				var snap []byte
				var err error
				if step%2 == 0 {
					var buf bytes.Buffer
					_, err = cur.WriteTo(&buf)
					snap = buf.Bytes()
				} else {
					snap, err = cur.MarshalBinary()
				}
				if err != nil {
					t.Fatalf("%s step %d: save: %v", name, step, err)
				}
				down := rng.Int64N(period * 5 / 2)
				if rng.IntN(8) == 0 {
					down = 3600_000
				}
				wall += down
				ct.Set(wall)
				cc = sketchtest.NewFakeClock()
				cc.Set(wall - 5*period) // built earlier, another epoch
				cur = mk(cc)
				cc.Set(wall)
				if step%4 < 2 {
					_, err = cur.ReadFrom(bytes.NewReader(snap))
				} else {
					err = cur.UnmarshalBinary(snap)
				}
				if err != nil {
					t.Fatalf("%s step %d: restore: %v", name, step, err)
				}
				restores++
			}
		}
	}
}

// TestAudit92SnapRotatorOverdueLinear: audit 88's overdue save under the
// Linear law (drained cells, a primary past its deadline by 0 to 3.5
// Periods at the save): restored after downtimes across the next
// deadlines, every key reads as the idle twin at every later instant.
func TestAudit92SnapRotatorOverdueLinear(t *testing.T) {
	for _, n := range []uint32{2, 3} {
		for _, idle := range []int64{0, 1, 500, 999, 1000, 1001, 2300, 3500} {
			for _, down := range []int64{0, 1, 499, 1000, 2700, 86_400_000} {
				name := fmt.Sprintf("N=%d/overdue=%dms/down=%dms", n, idle, down)
				mk := func(c *sketchtest.FakeClock) *rotator.Rotator {
					r, err := rotator.New(rotator.Config{
						Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 32, Decay: decay.Linear(3), Hi: 100, Seed: 5, Clock: c},
						Generations: n, Period: time.Second,
					})
					if err != nil {
						t.Fatal(err)
					}
					return r
				}
				c1 := sketchtest.NewFakeClock()
				c1.Set(a92RotT0)
				orig := mk(c1)
				for i := range 8 {
					c1.Set(a92RotT0 + int64(i)*120)
					orig.UpdateString(fmt.Sprint("k", i), float64(1+i))
				}
				save := a92RotT0 + 1000 + idle // deadline at t0 + 1 s
				c1.Set(save)
				snap, err := orig.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				c2 := sketchtest.NewFakeClock()
				c2.Set(save + down)
				res := mk(c2)
				if err := res.UnmarshalBinary(snap); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, after := range []int64{0, 1, 333, 1000, 1500, 3100} {
					at := save + down + after
					c1.Set(at)
					c2.Set(at)
					for i := range 8 {
						k := fmt.Sprint("k", i)
						if g, w := res.QueryString(k), orig.QueryString(k); g != w {
							t.Fatalf("%s: at restore+%dms %s reads %v restored, %v in the idle twin", name, after, k, g, w)
						}
					}
				}
			}
		}
	}
}
