package redis

// Audit 89: the Limiter's decisions on a healthy server, where every key
// shares the same cells (CellsPerLevel 1): the count-min then holds one
// bucket for all traffic, and Limiter's exactness promise (limiter.go,
// Limiter: "every decision, RetryAfter and ResetAfter for whole-token
// ... requests is exactly the rational token bucket's at millisecond
// resolution") makes it package limit's exact limiter on one key, fed
// every request, whatever key it names.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit89SharedRun drives a Limiter with one cell per level (every key of
// a shard in it) and, per shard, package limit's exact limiter on a
// single key, on the same fake clock, over a seeded schedule, and
// compares every field.
func audit89SharedRun(t *testing.T, e *env, lim Limit, levels, shards uint32, seed uint64, steps int) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_800_000_000_000)
	l := e.limiter(t, LimiterConfig{Name: e.ns(fmt.Sprintf("a89sh:%v:%v:%d:%d", lim.Rate, lim.Burst, levels, shards)), Limit: lim,
		Levels: levels, CellsPerLevel: 1, Shards: shards, Clock: clk})
	// One bucket per shard: package limit's exact limiter on one key.
	lls := make([]*limit.Limiter, max(shards, 1))
	for i := range lls {
		ll, err := limit.New(limit.Limit(lim.Rate), int(lim.Burst), limit.WithClock(clk), limit.WithMaxDebt(lim.Burst))
		if err != nil {
			t.Fatal(err)
		}
		if !ll.Exact() {
			t.Fatalf("setup: package limit is not exact for %+v", lim)
		}
		lls[i] = ll
	}
	rng := rand.New(rand.NewPCG(seed, 89))
	ctx := context.Background()
	full := 1000 * lim.Burst / lim.Rate
	var lastRetry time.Duration
	var lastN int
	for i := range steps {
		n := 1 + rng.IntN(3)
		switch r := rng.IntN(10); {
		case lastRetry > time.Millisecond && r < 3:
			// the denied request again, 1 ms early or on time
			clk.Advance(lastRetry - time.Duration(rng.IntN(2))*time.Millisecond)
			n = lastN
		case r < 5:
		case r < 7:
			clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
		case r < 9:
			clk.Advance(time.Duration(rng.Float64()*full/6) * time.Millisecond)
		default:
			n = int(lim.Burst) + rng.IntN(2) // the whole burst, or one above it
		}
		key := fmt.Sprintf("user-%d", rng.IntN(50))
		where := fmt.Sprintf("step %d (t+%d ms, key %s, n %d)", i, clk.NowMillis()-1_800_000_000_000, key, n)
		want := lls[l.Sketch().shard(l.Sketch().hasher.Sum64String(key))].DecideN(clk.Now(), "all", n)
		lastRetry, lastN = 0, n
		if !want.Allowed && !want.Never {
			lastRetry = want.RetryAfter
		}
		if rng.IntN(2) == 0 {
			got, err := l.DecideContext(ctx, key, n)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			want.Policy = got.Policy
			if got != want {
				t.Fatalf("%s: DecideContext %+v; package limit %+v", where, got, want)
			}
			continue
		}
		got, err := l.AllowN(ctx, key, float64(n))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		wantRetry := time.Duration(-1)
		if !want.Allowed && !want.Never {
			wantRetry = want.RetryAfter
		}
		if got.Allowed != want.Allowed || got.RetryAfter != wantRetry || got.ResetAfter != want.ResetAfter ||
			int(math.Floor(got.Remaining)) != want.Remaining || got.Limit != lim {
			t.Fatalf("%s: AllowN %+v; package limit %+v", where, got, want)
		}
		// Limiter.Sketch: "a score s is s x Burst / Hi tokens".
		s, err := l.Sketch().Query(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		debt := s * lim.Burst / l.Sketch().Config().Hi
		if math.Abs(lim.Burst-debt-got.Remaining) > 1e-9*lim.Burst {
			t.Fatalf("%s: Sketch().Query %v units = %v tokens of debt; Remaining %v of Burst %v", where, s, debt, got.Remaining, lim.Burst)
		}
	}
}

var audit89SharedLimits = []Limit{
	PerSecond(10, 7),
	PerSecond(1000.0/7, 20),       // Every(7ms)
	PerSecond(1000.0/3600, 12),    // 1000/h
	PerSecond(3, 5),               // unit 1000, drain 3
	PerSecond(1.0/60, 3),          // 1/min
	PerSecond(5001, 1000),         // drain 5001 a ms
	PerSecond(1000.0/3600, 4660),  // unit 3600 near 2^24 units
	PerSecond(1000.0/13, 1000000), // unit 13, 13e6 units
}

// TestAudit89RedisSharedCellExact: every key in one cell (L 1 and L 3),
// standalone on both clients: one exact bucket for all traffic.
func TestAudit89RedisSharedCellExact(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for i, lim := range audit89SharedLimits {
			for _, levels := range []uint32{1, 3} {
				t.Run(fmt.Sprintf("%v/%v/L%d", lim.Rate, lim.Burst, levels), func(t *testing.T) {
					audit89SharedRun(t, e, lim, levels, 1, uint64(10*i)+uint64(levels), 150)
				})
			}
		}
	})
}

// TestAudit89RedisSharedCellExactCluster: the same in the cluster (names
// that look like a sharded sketch's tags, "X:<digits>"), unsharded and
// over 4 shards, each an exact bucket of its own.
func TestAudit89RedisSharedCellExactCluster(t *testing.T) {
	e := newEnv(t, "rueidis", "cluster")
	for i, lim := range audit89SharedLimits[:3] {
		for _, shards := range []uint32{1, 4} {
			t.Run(fmt.Sprintf("%v/%v/shards=%d", lim.Rate, lim.Burst, shards), func(t *testing.T) {
				audit89SharedRun(t, e, lim, 2, shards, uint64(500+10*i)+uint64(shards), 100)
			})
		}
	}
}
