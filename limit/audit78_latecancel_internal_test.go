package limit

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A Buckets reservation cancelled up to 300 s (past the engine's 16-bit
// span of ticks, so residues wrap) after it was taken, while keys of other
// fingerprints sharing its lines wrote in between (moving the lines'
// windows): Cancel must never give back more than the reservation ("a
// key is never given back more than its own reservation, nor anything
// of another key's", reserve.go): the key reads at most its true debt in
// tokens, and every neighbor reads exactly what it read before the
// Cancel.
func TestAudit78BucketsLateCancelAmidNeighbors(t *testing.T) {
	bad := 0
	for off := int64(0); off < 300_000; off += 1013 * int64(testsize.Stride(testsize.Sample(1, 4, 12))) {
		clk := sketchtest.NewFakeClock()
		clk.Set(7_000_000)
		l, _ := New(10, 20, WithClock(clk), WithEngine(Buckets), WithSeed(3), WithMaxDebt(80), WithCapacity(2000, 0.01))
		key := fmt.Sprintf("victim%d", off)
		a0, a1, afp := l.b.Locate(key)
		var neigh []string
		for i := 0; len(neigh) < 4 && i < 2_000_000; i++ {
			k := fmt.Sprintf("n%d", i)
			b0, b1, bfp := l.b.Locate(k)
			if bfp != afp && (b0 == a0 || b0 == a1 || b1 == a0 || b1 == a1) {
				neigh = append(neigh, k)
			}
		}
		now := l.Now()
		l.AllowN(now, key, 10)
		r := l.ReserveN(now, key, 20)
		for j, k := range neigh {
			clk.Advance(time.Duration(off/int64(len(neigh)+1)) * time.Millisecond)
			l.AllowN(l.Now(), k, 5+j*3)
		}
		clk.Set(7_000_000 + off)
		now = l.Now()
		var before []float64
		for _, k := range neigh {
			before = append(before, l.TokensAt(now, k))
		}
		r.Cancel()
		want := 20.0
		if off < 1000 {
			want = 20 - (10 - float64(off)/100)
		}
		got := l.TokensAt(now, key)
		if got > want+1e-9 {
			t.Errorf("cancel %d ms later: victim tokens %v > %v (given back more than taken)", off, got, want)
		}
		if got < want-1e-9 {
			bad++
		}
		for i, k := range neigh {
			if a := l.TokensAt(now, k); a != before[i] {
				t.Errorf("cancel %d ms later: neighbor %s tokens %v -> %v", off, k, before[i], a)
			}
		}
	}
	t.Logf("%d kept (one-sided)", bad)
}
