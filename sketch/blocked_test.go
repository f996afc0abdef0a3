package sketch

// An experiment, not a feature: should the lock-free sketch offer a
// blocked layout, with all L cells of a key inside one 64-byte block (as
// Caffeine's FrequencySketch keeps a key's counters in one block), so an
// operation costs about one cache miss instead of L? This file holds a
// minimal blocked variant used only here, and compares it with the row
// layout of Sketch at equal memory:
//
//   - BenchmarkLayout: speed of Update and Query, side by side.
//   - TestBlockedAccuracy: false positives and overestimates (run -v for
//     the table).
//
// See docs/blocked-layout.md for the commands, the numbers and the
// conclusion.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
)

// blkCellsPerBlock is the number of 8-byte cells in one 64-byte block.
const blkCellsPerBlock = 8

// blockedSketch is the blocked layout: B = L*M/8 blocks of 8 cells (as
// many cells as Sketch's L rows of M). A key's block is fastrange(h1, B),
// h1 the low 32 bits of its hash; its L cells are L distinct positions in
// the block, a uniformly chosen L-subset of the 8 picked with h2, the high
// 32 bits (see offsets). Update and Query are Sketch.update and Sketch.query on
// those cells: load the L words, then CAS-add each; load, decay, Min.
type blockedSketch struct {
	cells   []atomiccell.Cell // blocks*8 cells, block 0 on a cache-line boundary
	rules   *atomiccell.Rules
	hasher  Hasher
	epoch   int64
	blocks  uint32
	levels  uint32
	agg     Aggregator
	subsets []uint32 // blkSubsets(levels)
}

// newBlocked builds a blocked sketch with the cell count of a row sketch
// of levels rows of m cells (m*levels must be a multiple of 8, as every
// M used here is). epoch plays the role of Sketch.epoch.
func newBlocked(tb testing.TB, levels, m uint32, d decay.Decay, hi float64, epoch int64) *blockedSketch {
	tb.Helper()
	if levels == 0 || levels > blkCellsPerBlock || levels > MaxLevels {
		tb.Fatalf("blocked layout needs 1 <= L <= 8; got %d", levels)
	}
	if cacheLine != blkCellsPerBlock*8 {
		tb.Skipf("blocked layout assumes 64-byte cache lines; this platform has %d", cacheLine)
	}
	total := uint64(levels) * uint64(m)
	if total%blkCellsPerBlock != 0 {
		tb.Fatalf("L*M = %d is not a multiple of %d", total, blkCellsPerBlock)
	}
	blocks := uint32(total / blkCellsPerBlock)
	cells, _ := allocRows(1, int(blocks)*blkCellsPerBlock)
	return &blockedSketch{
		cells:   cells,
		rules:   atomiccell.NewRules(d, 0, hi),
		hasher:  XXH3()(0),
		epoch:   epoch,
		blocks:  blocks,
		levels:  levels,
		agg:     Min,
		subsets: blkSubsets(levels),
	}
}

// offsets fills off[:L] with the key's cells: block fastrange(h1, B), and
// in it the L positions of one of the C(8, L) L-subsets of the 8 cells
// (70 for L=4), picked by fastrange(h2, C(8, L)) from a table built by
// newBlocked. Positions are distinct by construction, and every subset is
// equally likely to within C(8,L)/2^32. Cost: one multiply and one L1 load
// more than Index's arithmetic. (A first version drew a partial
// Fisher-Yates permutation of 0..7 from h2 with a dependent multiply-shift
// chain; it cost about 3x Sketch.offsets and showed up in every timing.)
func (b *blockedSketch) offsets(h uint64, off *[MaxLevels]int) {
	base := int((uint64(uint32(h))*uint64(b.blocks))>>32) * blkCellsPerBlock
	t := b.subsets[(uint64(uint32(h>>32))*uint64(len(b.subsets)))>>32]
	for l := range b.levels {
		off[l] = base + int(t>>(4*l)&15)
	}
}

// blkSubsets lists every L-subset of the 8 positions of a block, in
// increasing bitmask order, as its positions packed one nibble each,
// lowest first.
func blkSubsets(levels uint32) []uint32 {
	var out []uint32
	for mask := 0; mask < 1<<blkCellsPerBlock; mask++ {
		if bits.OnesCount8(uint8(mask)) != int(levels) {
			continue
		}
		var packed uint32
		n := 0
		for p := range blkCellsPerBlock {
			if mask&(1<<p) != 0 {
				packed |= uint32(p) << (4 * n)
				n++
			}
		}
		out = append(out, packed)
	}
	return out
}

func (b *blockedSketch) stamp(ms int64) uint32 { return uint32(ms - b.epoch) }

// UpdateAt is Sketch.UpdateAt for the blocked layout.
func (b *blockedSketch) UpdateAt(key []byte, delta float64, ms int64) {
	checkFinite("Update", "delta", delta)
	b.update(b.hasher.Sum64(key), delta, ms)
}

func (b *blockedSketch) update(h uint64, delta float64, ms int64) {
	var off [MaxLevels]int
	var w [MaxLevels]atomiccell.Word
	b.offsets(h, &off)
	now := b.stamp(ms)
	for l := range b.levels {
		w[l] = b.cells[off[l]].Load()
	}
	for l := range b.levels {
		b.cells[off[l]].Add(b.rules, now, delta, w[l])
	}
}

// QueryAt is Sketch.QueryAt for the blocked layout.
func (b *blockedSketch) QueryAt(key []byte, ms int64) float64 {
	return b.query(b.hasher.Sum64(key), ms)
}

func (b *blockedSketch) query(h uint64, ms int64) float64 {
	var off [MaxLevels]int
	var v [MaxLevels]float64
	b.offsets(h, &off)
	now := b.stamp(ms)
	for l := range b.levels {
		v[l] = b.rules.Value(b.cells[off[l]].Load(), now)
	}
	return b.agg.Aggregate(v[:b.levels])
}

// blkTheoryFP is the false-positive rate of the blocked layout: the chance
// that the L positions of a cold key are all covered by the hot keys that
// share its block. A block holds k ~ Binomial(H, 1/B) hot keys, each on a
// uniform L-subset of the 8 positions. By inclusion-exclusion over the
// j cold positions left uncovered,
//
//	P(cold set covered | k) = sum_j (-1)^j C(L,j) q_j^k, q_j = C(8-j,L)/C(8,L),
//
// and E[q^k] = (1 - (1-q)/B)^H.
func blkTheoryFP(levels, blocks uint32, hot uint64) float64 {
	binom := func(n, k int) float64 {
		if k < 0 || k > n {
			return 0
		}
		r := 1.0
		for i := 1; i <= k; i++ {
			r = r * float64(n-k+i) / float64(i)
		}
		return r
	}
	L := int(levels)
	all := binom(blkCellsPerBlock, L)
	fp := 0.0
	for j := 0; j <= L; j++ {
		q := binom(blkCellsPerBlock-j, L) / all
		e := math.Exp(float64(hot) * math.Log1p(-(1-q)/float64(blocks)))
		if j%2 == 1 {
			e = -e
		}
		fp += binom(L, j) * e
	}
	return math.Max(fp, 0)
}

// TestBlockedOffsets checks the blocked index: L distinct positions, all
// in one block, and every L-subset of the 8 positions equally likely.
func TestBlockedOffsets(t *testing.T) {
	for _, levels := range []uint32{1, 2, 4, 8} {
		b := &blockedSketch{blocks: 12_345, levels: levels, subsets: blkSubsets(levels)}
		r := rand.New(rand.NewPCG(7, uint64(levels)))
		counts := map[uint8]int{}
		const n = 700_000
		for range n {
			var off [MaxLevels]int
			b.offsets(r.Uint64(), &off)
			blk := off[0] / blkCellsPerBlock
			var mask uint8
			for l := range levels {
				if off[l]/blkCellsPerBlock != blk {
					t.Fatalf("L=%d: offsets %v span two blocks", levels, off[:levels])
				}
				if blk >= int(b.blocks) {
					t.Fatalf("L=%d: block %d out of range", levels, blk)
				}
				bit := uint8(1) << (off[l] % blkCellsPerBlock)
				if mask&bit != 0 {
					t.Fatalf("L=%d: offsets %v not distinct", levels, off[:levels])
				}
				mask |= bit
			}
			counts[mask]++
		}
		subsets := 1
		for i := range int(levels) {
			subsets = subsets * (blkCellsPerBlock - i) / (i + 1)
		}
		if len(counts) != subsets {
			t.Errorf("L=%d: %d subsets seen, want %d", levels, len(counts), subsets)
		}
		want := float64(n) / float64(subsets)
		for mask, c := range counts {
			if bits.OnesCount8(mask) != int(levels) {
				t.Fatalf("L=%d: subset %08b has the wrong size", levels, mask)
			}
			// 6 standard deviations of a binomial count.
			if math.Abs(float64(c)-want) > 6*math.Sqrt(want) {
				t.Errorf("L=%d: subset %08b seen %d times, want %.0f", levels, mask, c, want)
			}
		}
	}
}

// blkAccuracy is one layout's accuracy for one (M, H) setting.
type blkAccuracy struct {
	fp        float64 // fraction of cold keys with estimate > 0
	coldOver  float64 // mean estimate of cold keys (true score 0)
	hotOver   float64 // mean (estimate - score) of hot keys
	hotHit    float64 // fraction of hot keys overestimated
	hotUnder  int     // hot keys estimated below their score (must be 0)
	maxCold   float64 // largest cold estimate
	estimates int
}

func blkMeasure(hot, cold [][]byte, score float64, update func([]byte, float64), query func([]byte) float64) blkAccuracy {
	for _, k := range hot {
		update(k, score)
	}
	var a blkAccuracy
	fp := 0
	for _, k := range cold {
		e := query(k)
		if e > 0 {
			fp++
		}
		a.coldOver += e
		a.maxCold = math.Max(a.maxCold, e)
	}
	a.fp = float64(fp) / float64(len(cold))
	a.coldOver /= float64(len(cold))
	over := 0
	for _, k := range hot {
		e := query(k)
		if e < score {
			a.hotUnder++
		}
		if e > score {
			over++
		}
		a.hotOver += e - score
	}
	a.hotOver /= float64(len(hot))
	a.hotHit = float64(over) / float64(len(hot))
	a.estimates = len(cold) + len(hot)
	return a
}

// TestBlockedAccuracy compares the two layouts at equal memory (L*M
// cells each): H hot keys each get score 1000 once (no decay), 100k cold
// keys are never written, and every key is then queried (Min).
func TestBlockedAccuracy(t *testing.T) {
	const (
		levels = 4
		score  = 1000.0
		nCold  = 100_000
		hi     = 1e12
		at     = 1_000 // fixed time for every call
	)
	cold := make([][]byte, nCold)
	for i := range cold {
		cold[i] = fmt.Appendf(nil, "cold-%d", i)
	}
	hotAll := make([][]byte, 100_000)
	for i := range hotAll {
		hotAll[i] = fmt.Appendf(nil, "hot-%d", i)
	}
	t.Logf("L=%d, score %.0f per hot key, %d cold keys, no decay, Min; equal memory: rows L x M cells, blocked L*M/8 blocks of 8 cells", levels, score, nCold)
	t.Logf("| M | H | rows FP | rows FP theory | blocked FP | blocked FP theory | FP ratio blocked/rows (theory) | rows cold mean est | blocked cold mean est | rows hot mean over | blocked hot mean over | rows hot frac over | blocked hot frac over |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range []uint32{100_000, 1_000_000} {
		for _, h := range []int{1_000, 10_000, 50_000, 100_000} {
			hot := hotAll[:h]
			s, err := New(Config{Levels: levels, CellsPerLevel: m, Hi: hi})
			if err != nil {
				t.Fatal(err)
			}
			bl := newBlocked(t, levels, m, decay.None(), hi, 0)
			rows := blkMeasure(hot, cold, score,
				func(k []byte, d float64) { s.UpdateAt(k, d, at) },
				func(k []byte) float64 { return s.QueryAt(k, at) })
			blk := blkMeasure(hot, cold, score,
				func(k []byte, d float64) { bl.UpdateAt(k, d, at) },
				func(k []byte) float64 { return bl.QueryAt(k, at) })
			thRows := FalsePositiveRate(levels, m, uint64(h))
			thBlk := blkTheoryFP(levels, bl.blocks, uint64(h))
			ratio := thBlk / thRows
			t.Logf("| %d | %d | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g |",
				m, h, rows.fp, thRows, blk.fp, thBlk, ratio,
				rows.coldOver, blk.coldOver, rows.hotOver, blk.hotOver, rows.hotHit, blk.hotHit)

			if thRows > 1e-3 && math.Abs(rows.fp-thRows) > 0.3*thRows {
				t.Errorf("M=%d H=%d: rows FP %.4g not within 30%% of theory %.4g", m, h, rows.fp, thRows)
			}
			if thBlk > 1e-3 && math.Abs(blk.fp-thBlk) > 0.3*thBlk {
				t.Errorf("M=%d H=%d: blocked FP %.4g not within 30%% of its theory %.4g", m, h, blk.fp, thBlk)
			}
			if rows.hotUnder != 0 {
				t.Errorf("M=%d H=%d: rows under-estimated %d hot keys", m, h, rows.hotUnder)
			}
			if blk.hotUnder != 0 {
				t.Errorf("M=%d H=%d: blocked under-estimated %d hot keys", m, h, blk.hotUnder)
			}
		}
	}
}

// Benchmark keys: 1<<20 pre-generated 16-byte keys from a fixed seed.
const (
	blkNumKeys = 1 << 20
	blkKeyMask = blkNumKeys - 1
	blkKeyLen  = 16
)

var blkKeys = sync.OnceValue(func() [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, blkNumKeys*blkKeyLen)
	keys := make([][]byte, blkNumKeys)
	for i := range keys {
		k := buf[i*blkKeyLen : (i+1)*blkKeyLen : (i+1)*blkKeyLen]
		binary.LittleEndian.PutUint64(k, r.Uint64())
		binary.LittleEndian.PutUint64(k[8:], r.Uint64())
		keys[i] = k
	}
	return keys
})

var blkSink float64

// BenchmarkLayout compares the row layout (Sketch) with the blocked layout
// at equal memory: L=4, M cells per row (blocked: L*M/8 blocks),
// Exponential(1), Hi=1e12, serial, keys=uniform1M. Both sketches are
// built once per M and filled with +1 on every key at time epoch+5s (so
// every cell holds a non-zero score and every page is faulted in);
// every timed call runs at the fixed time epoch+10s through the At twins,
// so no clock is read. Query therefore always decays a 5 s gap; Update
// decays on a cell's first touch and finds it current after that. The
// key is hashed (XXH3, seed 0) inside each call, as the sketch does.
//
// M=8_000_000 (256 MB per layout, about the size of the shared L3 of the
// test machine) is an extra point beyond the brief's 100k and 1M.
func BenchmarkLayout(b *testing.B) {
	const (
		levels = 4
		hi     = 1e12
	)
	keys := blkKeys()
	for _, m := range []uint32{100_000, 1_000_000, 8_000_000} {
		b.Run(fmt.Sprintf("M=%d", m), func(b *testing.B) {
			s, err := New(Config{Levels: levels, CellsPerLevel: m, Decay: decay.Exponential(1), Hi: hi})
			if err != nil {
				b.Fatal(err)
			}
			bl := newBlocked(b, levels, m, decay.Exponential(1), hi, s.epoch)
			fillAt, now := s.epoch+5_000, s.epoch+10_000
			for _, k := range keys {
				s.UpdateAt(k, 1, fillAt)
				bl.UpdateAt(k, 1, fillAt)
			}
			b.Run("keys=uniform1M", func(b *testing.B) {
				b.Run("op=update", func(b *testing.B) {
					b.Run("layout=rows", func(b *testing.B) {
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							s.UpdateAt(keys[i], 1, now)
							i = (i + 1) & blkKeyMask
						}
					})
					b.Run("layout=blocked", func(b *testing.B) {
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							bl.UpdateAt(keys[i], 1, now)
							i = (i + 1) & blkKeyMask
						}
					})
				})
				b.Run("op=query", func(b *testing.B) {
					b.Run("layout=rows", func(b *testing.B) {
						b.ReportAllocs()
						i := 0
						var sum float64
						for b.Loop() {
							sum += s.QueryAt(keys[i], now)
							i = (i + 1) & blkKeyMask
						}
						blkSink = sum
					})
					b.Run("layout=blocked", func(b *testing.B) {
						b.ReportAllocs()
						i := 0
						var sum float64
						for b.Loop() {
							sum += bl.QueryAt(keys[i], now)
							i = (i + 1) & blkKeyMask
						}
						blkSink = sum
					})
				})
			})
		})
	}
}

// BenchmarkLayoutPaired is BenchmarkLayout interleaved, for a shared and
// noisy machine: each round times a chunk of blkChunk operations on the
// row layout and a chunk on the blocked layout back to back (the order
// alternating by round, each layout on its own key cursor so neither finds
// the other's keys in cache), and the benchmark reports the medians over
// rounds of each layout's ns per operation and of the per-round ratio
// blocked/rows. A preempted or slowed chunk spoils one round, and the
// median discards it. The setting is BenchmarkLayout's (L=4, Exponential(1),
// fill at epoch+5s, every call at epoch+10s, keys=uniform1M, serial). Its
// own ns/op (per round) is meaningless; read rows-ns/op, blocked-ns/op and
// blocked/rows. M=10_000 (320 kB per layout, inside L2) adds a point where
// memory costs nearly nothing, so its ratio is the indexing and compute
// difference alone.
func BenchmarkLayoutPaired(b *testing.B) {
	const (
		levels   = 4
		hi       = 1e12
		blkChunk = 4096
	)
	keys := blkKeys()
	for _, m := range []uint32{10_000, 100_000, 1_000_000, 8_000_000} {
		b.Run(fmt.Sprintf("M=%d", m), func(b *testing.B) {
			s, err := New(Config{Levels: levels, CellsPerLevel: m, Decay: decay.Exponential(1), Hi: hi})
			if err != nil {
				b.Fatal(err)
			}
			bl := newBlocked(b, levels, m, decay.Exponential(1), hi, s.epoch)
			fillAt, now := s.epoch+5_000, s.epoch+10_000
			for _, k := range keys {
				s.UpdateAt(k, 1, fillAt)
				bl.UpdateAt(k, 1, fillAt)
			}
			type chunkFn func(start int) float64
			ops := []struct {
				name          string
				rows, blocked chunkFn
			}{
				{"update",
					func(i int) float64 {
						for range blkChunk {
							s.UpdateAt(keys[i], 1, now)
							i = (i + 1) & blkKeyMask
						}
						return 0
					},
					func(i int) float64 {
						for range blkChunk {
							bl.UpdateAt(keys[i], 1, now)
							i = (i + 1) & blkKeyMask
						}
						return 0
					}},
				{"query",
					func(i int) float64 {
						var sum float64
						for range blkChunk {
							sum += s.QueryAt(keys[i], now)
							i = (i + 1) & blkKeyMask
						}
						return sum
					},
					func(i int) float64 {
						var sum float64
						for range blkChunk {
							sum += bl.QueryAt(keys[i], now)
							i = (i + 1) & blkKeyMask
						}
						return sum
					}},
			}
			for _, op := range ops {
				b.Run("keys=uniform1M/op="+op.name, func(b *testing.B) {
					var rowsNs, blkNs, ratio []float64
					ri, bi := 0, blkNumKeys/2
					timeChunk := func(f chunkFn, start int) float64 {
						t0 := time.Now()
						blkSink += f(start)
						return float64(time.Since(t0).Nanoseconds()) / blkChunk
					}
					round := 0
					for b.Loop() {
						var r, bk float64
						if round&1 == 0 {
							r = timeChunk(op.rows, ri)
							bk = timeChunk(op.blocked, bi)
						} else {
							bk = timeChunk(op.blocked, bi)
							r = timeChunk(op.rows, ri)
						}
						round++
						ri = (ri + blkChunk) & blkKeyMask
						bi = (bi + blkChunk) & blkKeyMask
						rowsNs = append(rowsNs, r)
						blkNs = append(blkNs, bk)
						ratio = append(ratio, bk/r)
					}
					b.ReportMetric(blkMedian(rowsNs), "rows-ns/op")
					b.ReportMetric(blkMedian(blkNs), "blocked-ns/op")
					b.ReportMetric(blkMedian(ratio), "blocked/rows")
				})
			}
		})
	}
}

func blkMedian(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	n := len(x)
	if n%2 == 1 {
		return x[n/2]
	}
	return (x[n/2-1] + x[n/2]) / 2
}
