// internal/bucket's tests that need rapid, porcupine or goleak (the core
// module has no test-only dependencies): the concurrent races, the
// porcupine histories, and the differential and fuzz tests against the
// mutex model (bucket.Model), through the seams internal/bucket exports
// for them (seams.go, model.go).
package bucket_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func reps(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// newTest returns an engine on a fake clock (set to a non-zero time) with
// seed 1.
func newTest(t testing.TB, lines int, law bucket.Law, clk *sketchtest.FakeClock) *bucket.Engine {
	t.Helper()
	if clk == nil {
		clk = sketchtest.NewFakeClock()
		clk.Set(1_000_000)
	}
	e, err := bucket.New(bucket.Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// race runs g goroutines calling try tries times each, released together,
// and returns how many calls returned true.
func race(g, tries int, try func(gor, i int) bool) int64 {
	var n atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for gi := range g {
		wg.Go(func() {
			<-start
			c := int64(0)
			for i := range tries {
				if try(gi, i) {
					c++
				}
			}
			n.Add(c)
		})
	}
	close(start)
	wg.Wait()
	return n.Load()
}
