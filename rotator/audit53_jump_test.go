package rotator_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a53T0 = 1_700_000_000_000

func a53New(t *testing.T, clk sketch.Clock, n uint32, period time.Duration, seed uint64) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 256, Decay: decay.None(), Hi: 1e9, Seed: seed, Clock: clk},
		Generations: n,
		Period:      period,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit53FixedRotatorSnapshotJumpPastDeadline (fixed: WriteTo fails when the set is promoted during the encode;
// the restore never holds a set older than the writes): a rotator (N = 2,
// Period 100 ms, no decay, deadline at +100 ms) is saved at +90 ms; during
// the encode (after its header: set loaded, instant read) the clock moves
// to +150 ms and k is written once: the write promotes, and lands in the
// live set [g1, newborn]. WriteTo returns no error and encodes the set of
// its start, [g0, g1], g1 with the write. Restored at +150 ms, the rotator
// reads k = 1 (g1 is promoted); at +200 ms the never-saved rotator's
// primary is the newborn that holds the write (k = 1), the restored one's
// the generation it built at the restore (k = 0): the write it showed is
// forgotten one Period early, 50 ms after it was made. With a jump of two
// Periods (to +290 ms) the write is in no encoded generation: 0 at once.
//
// docs/snapshots.md, "Consistency under concurrent updates": a write
// during the encode is restored "so it does not decay before it was
// written", and a clock jump the snapshot cannot state "makes WriteTo
// fail with an error that says so (take the snapshot again)"; "A rotator
// snapshot encodes the generation set current at its start (sets are
// immutable, so a promotion meanwhile cannot mix two sets)": here g1
// mixes in a write of the next set. sketch/doc.go: Query(k) >= the true
// score "whatever the ... rotations or clock jumps".
func TestAudit53FixedRotatorSnapshotJumpPastDeadline(t *testing.T) {
	for _, c := range []struct {
		to   int64 // clock during the encode, ms after a53T0
		what string
	}{
		{150, "one deadline crossed"},
		{290, "two deadlines crossed (all of the snapshot's set retired in the live rotator)"},
	} {
		oc := sketchtest.NewFakeClock()
		oc.Set(a53T0)
		orig := a53New(t, oc, 2, 100*time.Millisecond, 53)
		oc.Set(a53T0 + 90)
		var buf bytes.Buffer
		_, err := orig.WriteTo(&testhook.Writer{W: &buf, N: 1, Hook: func() {
			oc.Set(a53T0 + c.to)
			orig.UpdateString("k", 1)
		}})
		if err != nil {
			t.Logf("%s: WriteTo failed (%v): the documented refusal", c.what, err)
			continue
		}
		rc := sketchtest.NewFakeClock()
		rc.Set(a53T0 + c.to)
		rest := a53New(t, rc, 2, 100*time.Millisecond, 53)
		if err := rest.UnmarshalBinary(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		for at := a53T0 + c.to; at < a53T0+c.to+100; at += 10 {
			oc.Set(at)
			rc.Set(at)
			if o, r := orig.QueryString("k"), rest.QueryString("k"); r < o {
				t.Errorf("%s: %d ms after a write made during WriteTo, the restored rotator reads %v, the never-saved one %v "+
					"(WriteTo gave no error; docs/snapshots.md: a write during the encode \"does not decay before it was written\", "+
					"a jump the snapshot cannot state makes WriteTo fail)", c.what, at-a53T0-c.to, r, o)
				break
			}
		}
	}
}

// a53Model is an exact model of a lazy rotator under decay None: its
// generations (each a map of key sums and a birth time), the deadline,
// the clock's high-water mark and the Stats counters.
type a53Model struct {
	n           int
	p, deadline int64
	hw          int64
	gens        []map[string]float64
	promotions  uint64
	periods     uint64
	allocated   uint64
}

func newA53Model(n int, p, now int64) *a53Model {
	m := &a53Model{n: n, p: p, deadline: now + p, hw: now, allocated: uint64(n)}
	for range n {
		m.gens = append(m.gens, map[string]float64{})
	}
	return m
}

// access is one operation at clock reading now: the high-water mark, then
// a promotion when the deadline has passed (k periods, min(k, N) fresh
// generations, the deadline kept on the grid).
func (m *a53Model) access(now int64) {
	m.hw = max(m.hw, now)
	if m.hw < m.deadline {
		return
	}
	over := m.hw - m.deadline
	k := over/m.p + 1
	retire := int(min(k, int64(m.n)))
	m.gens = m.gens[retire:]
	for range retire {
		m.gens = append(m.gens, map[string]float64{})
	}
	m.deadline = m.hw - over%m.p + m.p
	m.promotions++
	m.periods += uint64(k)
	m.allocated += uint64(retire)
}

func (m *a53Model) update(now int64, key string, d float64) {
	m.access(now)
	for _, g := range m.gens {
		g[key] += d
	}
}

func (m *a53Model) query(now int64, key string) float64 {
	m.access(now)
	return m.gens[0][key]
}

// a53Steps returns the clock steps (ms) tried for Period p and N n: a
// backward step, less than, exactly and more than a Period, N x Period
// and around it, and 2^24, 2^29, 2^31, 2^32 ms and their neighbours.
func a53Steps(p int64, n int) []int64 {
	s := []int64{-5, -p, 0, 1, p - 1, p, p + 1, 2*p - 1, 2 * p, int64(n)*p - 1, int64(n) * p, int64(n)*p + 1, 7*p + p/2,
		1 << 24, 1<<24 + 1, 1 << 29, 1<<29 - 1, 1 << 31, 1<<31 + 1, 1 << 32, 1<<32 - 1, 1<<32 + p}
	out := s[:0]
	for _, x := range s {
		if x >= -p && (x > 0 || x <= 0) {
			out = append(out, x)
		}
	}
	return out
}

// TestAudit53ModelAcrossJumps: a rotator with no decay against the exact
// model above, for N in {2, 3, 5} and Periods of 1 ms, 7 ms, 1 s, 2^24 ms,
// 2^31 ms and 2^32+3 ms, under a pseudo-random sequence of the steps of
// a53Steps (backward included), with writes and reads of 4 keys at every
// step: every Query equals the model's primary sum exactly, and Stats
// (Promotions, Periods, Allocated) equal the model's counters after every
// step ("Exactly one promotion per deadline crossed; a forward clock jump
// of k periods is one promotion", "a backwards step rotates nothing",
// Stats.Periods: "a clock jump of k periods counts k"). Every 9 steps the
// rotator is saved and restored (MarshalBinary / UnmarshalBinary, and
// WriteTo / ReadFrom), idle 0, 1 Period, 3 Periods + 1 ms or 2^31 ms past
// the last access (or 1 ms back), into a fresh rotator whose clock reads the same
// time, a later one (downtime 0, 1 ms, a Period, 2^31 ms) or an earlier
// one (Period/2 + 1 ms, 2^29 ms behind: no downtime, the deadline keeps
// the time it had left, docs/snapshots.md), and the
// model follows the restored rotator from then on: it must read the same
// sums and rotate on the same grid.
func TestAudit53ModelAcrossJumps(t *testing.T) {
	keys := []string{"a", "b", "c", "d"}
	for _, n := range []int{2, 3, 5} {
		for _, pms := range []int64{1, 7, 1000, 1 << 24, 1 << 31, 1<<32 + 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(a53T0)
			r := a53New(t, clk, uint32(n), time.Duration(pms)*time.Millisecond, 53)
			m := newA53Model(n, pms, a53T0)
			steps := a53Steps(pms, n)
			x := uint64(pms)*2654435761 + uint64(n)
			restores := 0
			var base Stats53
			for i := range 120 {
				x = x*6364136223846793005 + 1442695040888963407
				step := steps[int(x>>33)%len(steps)]
				clk.Set(clk.NowMillis() + step)
				now := clk.NowMillis()
				k := keys[int(x>>40)%len(keys)]
				d := float64(int(x>>50)%5 + 1)
				r.UpdateString(k, d)
				m.update(now, k, d)
				for _, q := range keys {
					if got, want := r.QueryString(q), m.query(now, q); got != want {
						t.Fatalf("N=%d P=%d ms step %d (%+d ms): Query(%q) = %v, model %v", n, pms, i, step, q, got, want)
					}
				}
				st := r.Stats()
				if restores == 0 {
					if st.Promotions != m.promotions || st.Periods != m.periods || st.Allocated != m.allocated {
						t.Fatalf("N=%d P=%d ms step %d (%+d ms): Stats %+v, model promotions %d periods %d allocated %d",
							n, pms, i, step, st, m.promotions, m.periods, m.allocated)
					}
				} else if st.Periods-base.Periods != m.periods-base.ModelPeriods {
					t.Fatalf("N=%d P=%d ms step %d (%+d ms, now %d, model deadline %d): restored rotator counted %d periods since the restore, model %d",
						n, pms, i, step, now, m.deadline, st.Periods-base.Periods, m.periods-base.ModelPeriods)
				}
				if i%9 == 8 {
					down := []int64{0, 1, pms, 1 << 31, -pms/2 - 1, -(1 << 29)}[restores%6]
					// The rotator may be idle past its deadline when saved
					// (WriteTo promotes nothing; its instant is the clock's
					// reading, the high-water mark moved).
					idle := []int64{0, pms, 3*pms + 1, 1 << 31, -1}[restores%5]
					clk.Set(now + idle)
					now = clk.NowMillis()
					m.hw = max(m.hw, now)
					now = m.hw
					var data []byte
					if restores%2 == 0 {
						var err error
						if data, err = r.MarshalBinary(); err != nil {
							t.Fatal(err)
						}
					} else {
						var b bytes.Buffer
						if _, err := r.WriteTo(&b); err != nil {
							t.Fatal(err)
						}
						data = b.Bytes()
					}
					nclk := sketchtest.NewFakeClock()
					nclk.Set(now + down)
					nr := a53New(t, nclk, uint32(n), time.Duration(pms)*time.Millisecond, 53)
					if restores%2 == 0 {
						if err := nr.UnmarshalBinary(data); err != nil {
							t.Fatal(err)
						}
					} else if _, err := nr.ReadFrom(bytes.NewReader(data)); err != nil {
						t.Fatal(err)
					}
					r, clk = nr, nclk
					// The snapshot instant is the source's high-water mark;
					// a restoring clock behind it counts no downtime: the
					// deadline keeps the time it had left, on the new
					// clock (docs/snapshots.md). New and the restore read
					// the new clock: its reading is the high-water mark.
					if rt := now + down; rt < m.hw {
						m.deadline, m.hw = rt+(m.deadline-m.hw), rt
					} else {
						m.hw = rt
					}
					restores++
					base = Stats53{Periods: r.Stats().Periods, ModelPeriods: m.periods}
				}
			}
		}
	}
}

// Stats53 is the restored rotator's period count and the model's at the
// restore.
type Stats53 struct{ Periods, ModelPeriods uint64 }
