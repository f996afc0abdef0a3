package limit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit89BucketsConcurrentFillExactCounts: 4 goroutines each own 400
// keys of a Buckets limiter sized for 10,000 keys (New(10, 20)) and ask
// each of them for one token 25 times at a frozen fake clock, then, the
// clock 1 s later, 15 times more. Keys of one goroutine are never raced,
// so each key is the exact bucket alone (limit/doc.go, "Exactness": "For
// a key alone in its cells, the limiter is the exact token bucket"):
// exactly 20 admissions, then exactly 10, whatever the other goroutines
// write into the same lines. A sequential control with the same seed
// tells which keys share a fingerprint in a line (they share a debt);
// those are only held to the pair's total. Stats counts every decision
// once (stats.go: "Each counter is exact for the decisions that have
// returned before Stats is called").
func TestAudit89BucketsConcurrentFillExactCounts(t *testing.T) {
	const workers, perWorker, burst = 4, 400, 20
	key := func(w, i int) string { return fmt.Sprintf("w%d-k%d", w, i) }
	run := func(l *limit.Limiter, asks int, concurrent bool) [workers][perWorker]int {
		var got [workers][perWorker]int
		var wg sync.WaitGroup
		now := l.Now()
		for w := range workers {
			body := func() {
				for i := range perWorker {
					for range asks {
						if l.AllowN(now, key(w, i), 1) {
							got[w][i]++
						}
					}
				}
			}
			if concurrent {
				wg.Go(body)
			} else {
				body()
			}
		}
		wg.Wait()
		return got
	}
	ctl, ctlClk := a89bkNew(t, 10, burst, limit.WithCapacity(10_000, 0.01))
	lim, clk := a89bkNew(t, 10, burst, limit.WithCapacity(10_000, 0.01))
	var asked, admitted uint64
	for phase, c := range []struct {
		asks, want int
	}{{25, 20}, {15, 10}} {
		if phase > 0 {
			ctlClk.Advance(time.Second)
			clk.Advance(time.Second)
		}
		want := run(ctl, c.asks, false)
		got := run(lim, c.asks, true)
		exact := 0
		for w := range workers {
			for i := range perWorker {
				asked += uint64(c.asks)
				admitted += uint64(got[w][i])
				if got[w][i] > c.want {
					t.Errorf("phase %d: %s admitted %d; its bucket holds %d", phase, key(w, i), got[w][i], c.want)
				}
				if want[w][i] == c.want {
					exact++
					if got[w][i] != c.want {
						t.Errorf("phase %d: %s (alone in the sequential control) admitted %d under concurrency; want exactly %d", phase, key(w, i), got[w][i], c.want)
					}
				}
			}
		}
		if exact < workers*perWorker-10 {
			t.Fatalf("phase %d: only %d keys of %d exact in the sequential control", phase, exact, workers*perWorker)
		}
	}
	st := lim.Stats()
	if st.Admitted != admitted || st.Admitted+st.Denied != asked {
		t.Errorf("Stats: admitted %d denied %d; the callers saw %d admitted of %d", st.Admitted, st.Denied, admitted, asked)
	}
	if st.Engine != limit.Buckets || st.Rotations != 0 {
		t.Errorf("Stats: engine %v rotations %d; want buckets, 0", st.Engine, st.Rotations)
	}
}
