package limit_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A count-min limiter's snapshot with WithSize(2, 4096) and 2
// generations: write 1 the limiter header, 2 the rotator header (its
// instant read), 3 g0 header, 4 g0 cells, 5 g0 sum, 6 g1 header, 7 g1
// cells, 8 g1 sum, 9 the rotator sum. A write made by a hook before
// write N is in g0 iff N <= 3, in g1 iff N <= 6.
const a62T0 = int64(1_700_000_000_000)

func a62Limiter(t *testing.T, c *sketchtest.FakeClock, gens uint32) *limit.Limiter {
	t.Helper()
	l, err := limit.New(1000, 1000, limit.WithEngine(limit.CountMin), limit.WithSize(2, 4096),
		limit.WithPeriod(2*time.Second), limit.WithGenerations(gens), limit.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAudit62LimiterEncodeMovesNeverMoreTokens: a count-min limiter
// (1000/s, burst 1000, Period 2 s, 2 and 3 generations) takes 900 of k at
// +1500 and 600 of j at +1900 and is saved at +1950; before write N
// (every N) the clock moves forward 1, 30 or 49 ms (before the deadline)
// or back 10 ms, and 700 of w are taken there. A never-stopped twin makes
// the same calls at the same times. Restored on clocks 1 h and 1 ms
// behind, at, and 40 and 500 ms ahead of the instant, and walked every
// 5 ms across its promotions for 3 s, every key has at most the twin's
// tokens at the same point of the time line (w once a generation that
// holds it is the primary). docs/readings.md ("Surviving a restart"): "an
// abuser throttled before a deploy is still throttled after it, drained
// by the downtime and never more".
func TestAudit62LimiterEncodeMovesNeverMoreTokens(t *testing.T) {
	testsize.Serial(t)
	S := a62T0 + 1950
	for _, gens := range []uint32{2, 3} {
		last := 3 + 3*int(gens)
		for di, d := range []int64{1, 30, 49, -10} {
			if !testsize.Keep(di, 2) {
				continue
			}
			for N := 2; N <= last; N++ {
				c, tc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
				c.Set(a62T0)
				tc.Set(a62T0)
				l, twin := a62Limiter(t, c, gens), a62Limiter(t, tc, gens)
				do := func(at int64, key string, n int) {
					c.Set(at)
					tc.Set(at)
					l.AllowN(c.Now(), key, n)
					twin.AllowN(tc.Now(), key, n)
				}
				do(a62T0+1500, "k", 900)
				do(a62T0+1900, "j", 600)
				c.Set(S)
				tc.Set(S)
				wFrom := int64(-1) // wall ms from which the restored primary holds w
				hw := &testhook.Writer{N: N, Hook: func() {
					do(S+d, "w", 700)
					for g := 0; g < int(gens); g++ {
						if N <= 3+3*g {
							wFrom = a62T0 + int64(g)*2000
							break
						}
					}
				}}
				if _, err := l.WriteTo(hw); err != nil {
					t.Fatalf("gens %d d=%d N=%d: WriteTo: %v", gens, d, N, err)
				}
				wAt := max(S, S+d)
				for _, off := range []int64{-3_600_000, -1, 0, 40, 500} {
					c2 := sketchtest.NewFakeClock()
					r0 := S + off
					c2.Set(r0)
					m := a62Limiter(t, c2, gens)
					if _, err := m.ReadFrom(bytes.NewReader(hw.Buf.Bytes())); err != nil {
						t.Fatalf("ReadFrom: %v", err)
					}
					// the twin, fresh, replayed to each point (its clock
					// never runs back)
					tc2 := sketchtest.NewFakeClock()
					tc2.Set(a62T0)
					tw := a62Limiter(t, tc2, gens)
					for _, op := range []struct {
						at  int64
						key string
						n   int
					}{{a62T0 + 1500, "k", 900}, {a62T0 + 1900, "j", 600}, {wAt, "w", 700}} {
						tc2.Set(op.at)
						tw.AllowN(tc2.Now(), op.key, op.n)
					}
					shift := min(off, 0)
					bad := false
					for tau := max(r0, wAt+shift); tau < S+3000+shift && !bad; tau += 5 {
						c2.Set(tau)
						tc2.Set(tau - shift)
						for _, key := range []string{"k", "j", "w"} {
							if key == "w" && (wFrom < 0 || tau < wFrom+shift) {
								continue
							}
							if got, want := m.Tokens(key), tw.Tokens(key); got > want+1e-6 {
								t.Errorf("gens %d d=%d N=%d restore off %d: Tokens(%s) at +%d on the restore's line = %v, the never-stopped twin %v. "+
									"readings.md: \"drained by the downtime and never more\"", gens, d, N, off, key, tau-shift-a62T0, got, want)
								bad = true
							}
						}
					}
				}
			}
		}
	}
}

// TestAudit62LimiterJumpRefusedMatchesErrTakeAgain: a count-min limiter
// (Period 60 days) saved while the clock jumps 1 day before the
// primary's cells with a take of w there: WriteTo fails with an error
// matching sketch.ErrTakeAgain (sketch/errors.go: "the error of a WriteTo
// (sketch, rotator, meter, a count-min limiter) ... the clock jumped over
// 2^24 ms during the encode with a cell written after the jump"), and
// an instant later it succeeds. A jump of 2^24 ms exactly is taken. Since
// stop 47 w's debt of 10 is read back to the instant by the drain and
// stated at MaxDebt (2000, twice the burst) the 1.99 s before its stamp
// that MaxDebt takes to drain to 10, so a jump is refused only past
// 2^24 ms + 1.99 s.
func TestAudit62LimiterJumpRefusedMatchesErrTakeAgain(t *testing.T) {
	for _, d := range []int64{1 << 24, 1<<24 + 1, 1<<24 + 1900, 1<<24 + 2100, 86_400_000} {
		c := sketchtest.NewFakeClock()
		c.Set(a62T0)
		l, err := limit.New(1000, 1000, limit.WithEngine(limit.CountMin), limit.WithSize(2, 4096),
			limit.WithPeriod(60*24*time.Hour), limit.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		c.Set(a62T0 + 10)
		l.AllowN(c.Now(), "k", 10)
		hw := &testhook.Writer{N: 3, Hook: func() {
			c.Set(a62T0 + 10 + d)
			l.AllowN(c.Now(), "w", 10)
		}}
		_, err = l.WriteTo(hw)
		if want := d > 1<<24+2000; (err != nil) != want || (err != nil && !errors.Is(err, sketch.ErrTakeAgain)) {
			t.Errorf("jump %d ms: WriteTo = %v; want an error matching sketch.ErrTakeAgain: %v", d, err, want)
		}
		var buf bytes.Buffer
		if _, err := l.WriteTo(&buf); err != nil {
			t.Errorf("jump %d ms: the same call an instant later: %v", d, err)
		}
	}
}
