package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit87RdReshardDecideExact: one key of an exact limit (10/s x 20)
// on the 3-master cluster, two instances (rueidis and go-redis) taking
// turns, a fake clock; the limiter's slot moves (SETSLOT IMPORTING /
// MIGRATING, MIGRATE, SETSLOT NODE). limiter.go: for an exact
// configuration "every decision, RetryAfter and ResetAfter for
// whole-token requests is exactly the rational token bucket's"; doc.go:
// every call "atomic ... on the server's clock, so instances ... agree".
// Before the move, at each step of it (the slot open: the source serves;
// the key migrated: ASK to the target; the move done) and after it, the
// key is driven to its cap and every decision is the rational bucket's
// (which follows every admission); the denial's RetryAfter is exact
// across the move: a retry 1 ms before it is denied and one at it
// admitted, whichever node serves it.
func TestAudit87RdReshardDecideExact(t *testing.T) {
	t.Cleanup(audit3WaitDelayedRefresh)
	lim := PerSecond(10, 20)
	er := newEnv(t, "rueidis", "cluster")
	eg := newEnv(t, "go-redis", "cluster")
	c := er.cluster
	slot, src, dst := pickMove(t, c)
	name := nameForSlot(t, er.ns("a87rdresh"), slot)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Timeout: 5 * time.Second, CellsPerLevel: 64}
	ls := []*Limiter{er.limiter(t, cfg), eg.limiter(t, cfg)}
	b := audit86NewBucket(lim, clk.NowMillis())
	ctx := context.Background()
	calls := 0
	decide := func(where string) (allowed bool, retry time.Duration) {
		t.Helper()
		l := ls[calls%2]
		calls++
		d, err := l.DecideContext(ctx, "k", 1)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		w := b.step(clk.NowMillis(), 1)
		if d.Allowed != w.allowed || (!d.Allowed && d.RetryAfter != time.Duration(w.retryMs)*time.Millisecond) {
			t.Errorf("%s, call %d: %+v; the rational bucket: allowed %v, RetryAfter %d ms", where, calls, d, w.allowed, w.retryMs)
		}
		return d.Allowed, d.RetryAfter
	}
	round := func(step int) {
		where := fmt.Sprintf("move step %d", step)
		var retry time.Duration
		for i := 0; ; i++ {
			ok, r := decide(where)
			if !ok {
				retry = r
				break
			}
			if i > 40 {
				t.Fatalf("%s: no denial in 40 calls", where)
			}
		}
		if retry < time.Millisecond {
			t.Fatalf("%s: denial with RetryAfter %v", where, retry)
		}
		clk.Advance(retry - time.Millisecond)
		if ok, _ := decide(where + ", 1 ms before RetryAfter"); ok {
			t.Errorf("%s: admitted 1 ms before RetryAfter %v", where, retry)
		}
		clk.Advance(time.Millisecond)
		if ok, _ := decide(where + ", at RetryAfter"); !ok {
			t.Errorf("%s: denied at RetryAfter %v", where, retry)
		}
		clk.Advance(37 * time.Millisecond) // some refill before the next step
	}
	round(-2)
	steps := 0
	moveBySetslot(t, c, slot, src, dst, func(step int, _ string) {
		steps++
		round(step)
	})
	if steps < 3 {
		t.Fatalf("the move had %d steps; want open, moved, done", steps)
	}
	checkMoved(t, slot, []string{"{" + name + "}:g"}, src, dst)
	round(-3)
}
