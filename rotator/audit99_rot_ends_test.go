package rotator_test

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a99EndsEnv = "GRUDGE_A99_ROT_ENDS"

// a99EndsCase: a rotator (N = 3, Period 10 ms, no decay) built with its
// fake clock at start, one write of 1 to "k", the clock set to to, then
// one Query.
type a99EndsCase struct {
	name      string
	start, to int64
}

var a99EndsCases = []a99EndsCase{
	// The deadline start + Period saturates at MaxInt64; the clock then
	// reads MaxInt64 (5 ms after the write, within the window).
	{"deadline-saturated", math.MaxInt64 - 5, math.MaxInt64},
	// Built with the clock at MaxInt64: the first operation already reads
	// the saturated deadline.
	{"built-at-MaxInt64", math.MaxInt64, math.MaxInt64},
	// A forward jump of 2^63 ms or more: now - deadline overflows int64.
	{"jump-MinInt64-to-MaxInt64", math.MinInt64, math.MaxInt64},
	{"jump-past-2^63", -1 << 62, math.MaxInt64 - 3},
}

// want returns what the documented rotator does for c: the Query result
// and the Stats.Periods count (one promotion of k periods, k counted in
// exact arithmetic; for a deadline that saturated, at most one period).
func (c a99EndsCase) want() (q float64, periods uint64) {
	const p = 10
	if c.start > math.MaxInt64-p {
		return 1, 0 // 5 ms or less old: well within (N-1) x Period
	}
	dl := c.start + p
	k := (uint64(c.to)-uint64(dl))/p + 1 // to >= dl: the unsigned difference is exact
	if k >= 3 {
		return 0, k
	}
	return 1, k
}

// a99EndsChild runs case i in this process and prints one result line:
// the operation either returns or keeps promoting (it is then left
// spinning, and the process exits).
func a99EndsChild(i int) {
	c := a99EndsCases[i]
	clk := sketchtest.NewFakeClock()
	clk.Set(c.start)
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 1, CellsPerLevel: 64, Hi: 1e9, Decay: decay.None(), Seed: 99, Clock: clk},
		Generations: 3, Period: 10 * time.Millisecond,
	})
	if err != nil {
		fmt.Printf("A99RESULT error %v\n", err)
		os.Exit(0)
	}
	done := make(chan float64, 1)
	go func() {
		r.UpdateString("k", 1)
		clk.Set(c.to)
		done <- r.QueryString("k")
	}()
	for {
		select {
		case q := <-done:
			st := r.Stats()
			fmt.Printf("A99RESULT done %v %d %d\n", q, st.Promotions, st.Periods)
			os.Exit(0)
		default:
		}
		// No timing: a correct operation makes at most one promotion, so
		// 64 means it loops.
		if st := r.Stats(); st.Promotions > 64 {
			fmt.Printf("A99RESULT runaway %v %d %d\n", 0, st.Promotions, st.Periods)
			os.Exit(0)
		}
	}
}

// TestAudit99RotEndsFixedClockEndsLoopForever (audit 99; fixed at stop
// 59, the text below says what was wrong; successor counts the periods
// unsigned, and settle never crosses a deadline saturated at MaxInt64).
// rotator/doc.go's
// Guarantees: "Exactly one promotion per deadline crossed; a forward
// clock jump of k periods is one promotion of O(N) work", and
// docs/design.md section 4: "whatever any clock returns the sketch stays
// safe". With the deadline saturated at MaxInt64 (a clock within a
// Period of MaxInt64 ms when New or a promotion ran) and the clock then
// reading MaxInt64, settle's loop promotes forever: every successor's
// deadline saturates to MaxInt64 again, and now >= deadline stays true;
// the operation never returns (each round builds a generation). A forward
// jump of 2^63 ms or more overflows now - deadline (internal/core/rotate.go,
// successor), k comes out as 0 or wraps, and the operation again loops
// forever (Stats.Periods then holds a wrapped count). Each case runs in a
// child process, which reports whether the operation returned or was
// still promoting after 64 promotions, and then exits.
func TestAudit99RotEndsFixedClockEndsLoopForever(t *testing.T) {
	if v := os.Getenv(a99EndsEnv); v != "" {
		i, _ := strconv.Atoi(v)
		a99EndsChild(i)
		return
	}
	for i, c := range a99EndsCases {
		cmd := testchild.Command("-test.run=^TestAudit99RotEndsFixedClockEndsLoopForever$", "-test.count=1")
		cmd.Env = append(os.Environ(), a99EndsEnv+"="+strconv.Itoa(i))
		out, err := testchild.CombinedOutput(cmd, 0)
		text := string(out)
		at := strings.Index(text, "A99RESULT ")
		if err != nil || at < 0 {
			t.Errorf("%s: child failed (%v):\n%s", c.name, err, testchild.Tail(text))
			continue
		}
		var kind string
		var q float64
		var prom, per uint64
		if _, err := fmt.Sscanf(text[at:], "A99RESULT %s %v %d %d", &kind, &q, &prom, &per); err != nil {
			t.Errorf("%s: unreadable child result %q: %v", c.name, text[at:], err)
			continue
		}
		wq, wper := c.want()
		if kind != "done" {
			t.Errorf("%s: clock %d -> %d ms: the Update or the Query never returned: %d promotions so far (Periods %d); want at most one promotion (of %d period(s)) and the Query to return %v",
				c.name, c.start, c.to, prom, per, wper, wq)
			continue
		}
		perOK := per == wper
		if c.start > math.MaxInt64-10 {
			perOK = per <= 1
		}
		if q != wq || !perOK || prom > 1 {
			t.Errorf("%s: clock %d -> %d ms: Query %v, %d promotion(s) of %d period(s); want %v, at most one promotion of %d",
				c.name, c.start, c.to, q, prom, per, wq, wper)
		}
	}
}
