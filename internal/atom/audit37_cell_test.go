package atom

import (
	"math"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

// TestAudit37CellAddStaleWordsExact: goroutines Add +1, -1, 0 and a
// clamp-pinned add to one cell, each passing a stale word (the zero word,
// a word pinned at Hi, or a word equal to what a zero delta leaves), with
// no clamp reached by the counted adds: the final score is exactly the
// sum, so no stale-word shortcut lost or duplicated an add (Add: "passing
// a stale word is allowed and costs a retry").
func TestAudit37CellAddStaleWordsExact(t *testing.T) {
	r := NewRules(decay.None(), -1e6, 1e6)
	var c Cell
	const G, N = 4, 20000
	stale := []Word{0, Pack(1e6, 7), Pack(3, 7), Pack(-1e6, 7)}
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			for i := range N {
				w := stale[(g+i)%len(stale)]
				switch i % 3 {
				case 0:
					c.Add(r, 7, 1, w)
				case 1:
					c.Add(r, 7, 0, w)
				case 2:
					c.Add(r, 7, 2, w)
					c.Add(r, 7, -1, w)
				}
			}
		})
	}
	wg.Wait()
	var want float64
	for i := range N {
		switch i % 3 {
		case 0, 2:
			want++
		}
	}
	want *= G
	if got := c.Load().Score(); float64(got) != want || c.Load().Stamp() != 7 || math.IsNaN(float64(got)) {
		t.Fatalf("cell = %v at stamp %d, want exactly %v at 7", got, c.Load().Stamp(), want)
	}
}
