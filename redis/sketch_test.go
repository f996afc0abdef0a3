package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	decaylaw "github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty name", Config{Hi: 1}, "Name must not be empty"},
		{"braces", Config{Name: "a{b}", Hi: 1}, "braces"},
		{"bad bounds", Config{Name: "a", Lo: 1, Hi: 2}, "Lo must be <= 0"},
		{"levels", Config{Name: "a", Hi: 1, Levels: 9}, "Levels must be <= 8"},
		{"custom law", Config{Name: "a", Hi: 1, Decay: customLaw{}}, "custom law cannot run on the server"},
		{"bad lambda", Config{Name: "a", Hi: 1, Decay: decay.Exponential(-1)}, "lambda"},
		{"period", Config{Name: "a", Hi: 1, Period: time.Microsecond}, "Period must be 0 or >= 1ms"},
		{"generations without period", Config{Name: "a", Hi: 1, Generations: 3}, "Generations needs Period > 0"},
		{"one generation", Config{Name: "a", Hi: 1, Period: time.Second, Generations: 1}, "Generations must be >= 2"},
		{"timeout", Config{Name: "a", Hi: 1, Timeout: -1}, "Timeout must be >= 0"},
		{"too many generations", Config{Name: "a", Hi: 1, Period: time.Second, Generations: 1025}, "Generations must be >= 2 and <= 1024"},
		{"generations at MaxUint32", Config{Name: "a", Hi: 1, Period: time.Second, Generations: math.MaxUint32}, "<= 1024"},
		{"too many shards", Config{Name: "a", Hi: 1, Shards: 16385}, "Shards must be at most 16384"},
		{"shards at MaxUint32", Config{Name: "a", Hi: 1, Shards: math.MaxUint32}, "Shards must be at most 16384"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.normalize()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want ErrInvalidConfig containing %q", err, tt.want)
			}
		})
	}
	// The bounds themselves are accepted, and New builds their key names
	// (an unbounded Shards or Generations used to exhaust memory there).
	for _, cfg := range []Config{
		{Name: "a", Hi: 1, Shards: 16384},
		{Name: "a", Hi: 1, Period: time.Second, Generations: 1024},
	} {
		s, err := newSketch(nil, cfg)
		if err != nil {
			t.Fatalf("newSketch(%+v): %v", cfg, err)
		}
		if got, want := len(s.Keys()), int(max(cfg.Shards, 1)*max(cfg.Generations, 1)); got != want {
			t.Fatalf("newSketch(%+v): %d keys, want %d", cfg, got, want)
		}
	}
}

// TestConfigErrorWrapsCore: an error about a field the core sketch
// validates wraps the core's *sketch.ConfigError (it used to be
// flattened into text), so errors.As names the field.
func TestConfigErrorWrapsCore(t *testing.T) {
	_, err := Config{Name: "a", Hi: 1, Levels: 9}.normalize()
	var ce *sketch.ConfigError
	if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Levels" {
		t.Fatalf("err = %v (%T); want ErrInvalidConfig wrapping a *sketch.ConfigError for Levels", err, err)
	}
}

type customLaw struct{}

func (customLaw) Apply(s float64, _ int64) float64 { return s }

// TestTryUpdateExactGlobally: several clients (instances), many goroutines
// each, racing TryUpdate(k, 1, limit) admit exactly limit, for one key and
// for many keys sharing every cell (M=1).
func TestTryUpdateExactGlobally(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const clients, perClient, limit = 4, 16, 1000
		for _, tc := range []struct {
			name string
			m    uint32
			keys int
		}{{"one key", 1000, 1}, {"all keys collide", 1, 64}} {
			t.Run(tc.name, func(t *testing.T) {
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for c := range clients {
					s := e.sketch(t, Config{Name: e.ns("exact:" + tc.name), CellsPerLevel: tc.m, Hi: 1e6})
					for g := range perClient {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; i < 2*limit/(clients*perClient)+10; i++ {
								k := []byte(fmt.Sprint("k", (c*perClient+g+i)%tc.keys))
								ok, err := s.TryUpdate(context.Background(), string(k), 1, limit)
								if err != nil {
									t.Error(err)
									return
								}
								if ok {
									admitted.Add(1)
								}
							}
						}()
					}
				}
				wg.Wait()
				if got := admitted.Load(); got != limit {
					t.Fatalf("admitted %d; want exactly %d", got, limit)
				}
			})
		}
	})
}

// TestDifferential runs the same random operations, at the same fake
// times, on the server sketch and on the local lock-free sketch with the
// same Config: estimates agree within the float32 bound and TryUpdate
// decisions agree wherever the estimate is not within that bound of the
// limit.
func TestDifferential(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) { testDifferential(t, e) })
}

func testDifferential(t *testing.T, e *env) {
	laws := []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"exp", decay.Exponential(0.7)}, {"linear", decay.Linear(3)}}
	aggs := []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean}
	for _, law := range laws {
		for _, agg := range aggs {
			t.Run(law.name+"/"+agg.String(), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				const hi, lo = 200.0, -50.0
				rs := e.sketch(t, Config{Name: e.ns("diff:" + law.name + agg.String()), Levels: 3, CellsPerLevel: 16,
					Decay: law.d, Lo: lo, Hi: hi, Aggregator: agg, Seed: 7, Clock: clk})
				ls, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: law.d, Lo: lo, Hi: hi,
					Aggregator: agg, Seed: 7, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(1, uint64(agg)))
				ctx := context.Background()
				n := 300
				if testing.Short() {
					n = 100
				}
				for i := range n {
					key := []byte(fmt.Sprint("key", rng.IntN(40)))
					clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
					delta := float64(rng.IntN(30)) - 5
					switch rng.IntN(4) {
					case 0:
						if err := rs.Update(ctx, string(key), delta); err != nil {
							t.Fatal(err)
						}
						ls.Update(key, delta)
					case 1:
						got, err := rs.UpdateAndQuery(ctx, string(key), delta)
						if err != nil {
							t.Fatal(err)
						}
						want := ls.UpdateAndQuery(key, delta)
						checkClose(t, i, "UpdateAndQuery", got, want)
					case 2:
						limit := float64(rng.IntN(150))
						est := ls.Query(key)
						if math.Abs(est+delta-limit) <= f32Bound(limit) {
							continue // borderline: either answer is within the bound
						}
						got, err := rs.TryUpdate(ctx, string(key), delta, limit)
						if err != nil {
							t.Fatal(err)
						}
						if want := ls.TryUpdate(key, delta, limit); got != want {
							t.Fatalf("op %d: TryUpdate(%s, %v, %v) = %v; local sketch says %v (estimate %v)", i, key, delta, limit, got, want, est)
						}
					default:
						got, err := rs.Query(ctx, string(key))
						if err != nil {
							t.Fatal(err)
						}
						checkClose(t, i, "Query", got, ls.Query(key))
					}
				}
			})
		}
	}
}

// TestBackwardsClock: the server's clock steps back now and then
// (non-negative deltas, Lo 0, Min). The server counts a step back as no
// elapsed time per cell, as grudge does: a cell stamped after the new
// reading is not decayed and keeps its stamp, and time runs on from the
// new reading for the others. So between two touches of a cell it never
// decays more than the real time that passed. The reference is the local
// sketch with the same hashing, fed exactly the server's admitted
// updates, on a clock that never steps back (the real time): the server's
// estimate is never below it (beyond the float32 bound), so never below
// the truth.
func TestBackwardsClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			law      decay.Decay
			rebaseAt int64
		}{{decay.Exponential(0.7), defaultRebaseAt}, {decay.Linear(3), defaultRebaseAt}, {decay.Linear(3), 1500}} {
			law := tc.law
			k, _ := decaylaw.Params(law)
			t.Run(fmt.Sprint(k, "/rebase=", tc.rebaseAt), func(t *testing.T) {
				clk, real := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				real.Set(1_000_000)
				rs := e.sketch(t, Config{Name: e.ns(fmt.Sprint("back:", k, tc.rebaseAt)), Levels: 3, CellsPerLevel: 16, Decay: law, Hi: 200, Clock: clk})
				rs.setRebaseAt(tc.rebaseAt) // every few writes a rebase, with cells stamped after it
				ls, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: law, Hi: 200, Clock: real})
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(5, 6))
				ctx := context.Background()
				steps := 0
				for i := range 300 {
					if rng.IntN(6) == 0 {
						clk.Set(clk.NowMillis() - int64(rng.IntN(2000))) // no real time passes
						steps++
					} else {
						d := time.Duration(rng.IntN(400)) * time.Millisecond
						clk.Advance(d)
						real.Advance(d)
					}
					key := []byte(fmt.Sprint("key", rng.IntN(40)))
					delta := float64(rng.IntN(20))
					var got float64
					switch rng.IntN(3) {
					case 0:
						if got, err = rs.UpdateAndQuery(ctx, string(key), delta); err != nil {
							t.Fatal(err)
						}
						ls.Update(key, delta)
					case 1:
						limit := float64(rng.IntN(150))
						ok, err := rs.TryUpdate(ctx, string(key), delta, limit)
						if err != nil {
							t.Fatal(err)
						}
						if ok {
							ls.Update(key, delta)
						}
						if got, err = rs.Query(ctx, string(key)); err != nil {
							t.Fatal(err)
						}
					default:
						if got, err = rs.Query(ctx, string(key)); err != nil {
							t.Fatal(err)
						}
					}
					if want := ls.Query(key); got < want-f32Bound(want) {
						t.Fatalf("op %d: the server's estimate %v is below the real-time reference %v", i, got, want)
					}
				}
				if steps == 0 {
					t.Fatal("the clock never stepped back")
				}
			})
		}
	})
}

// f32Bound is the float32 tolerance of a value near v after a few
// rounded-up operations.
func f32Bound(v float64) float64 { return 8 * (math.Abs(v)*0x1p-23 + 1e-30) }

func checkClose(t *testing.T, i int, op string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > f32Bound(math.Max(math.Abs(got), math.Abs(want))) {
		t.Fatalf("op %d: %s = %v on the server; local sketch %v", i, op, got, want)
	}
}

// TestCollisionsSafeSide: with every key in one cell per level (M=1) and
// non-negative deltas, Min never under-estimates any key.
func TestCollisionsSafeSide(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.sketch(t, Config{Name: e.ns("collide"), Levels: 2, CellsPerLevel: 1, Hi: 1e9})
		ctx := context.Background()
		truth := map[string]float64{}
		rng := rand.New(rand.NewPCG(3, 4))
		for range 200 {
			k := fmt.Sprint("k", rng.IntN(20))
			d := float64(rng.IntN(10))
			truth[k] += d
			if err := s.Update(ctx, k, d); err != nil {
				t.Fatal(err)
			}
		}
		for k, want := range truth {
			got, err := s.Query(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if got < want {
				t.Fatalf("Query(%s) = %v < true score %v", k, got, want)
			}
		}
	})
}

// TestForeignData: whatever sits under the sketch's key, a call returns
// an error naming the problem; none panics and none overwrites the data.
func TestForeignData(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) { testForeignData(t, e) })
}

func testForeignData(t *testing.T, e *env) {
	name := e.ns("foreign")
	cfg := Config{Name: name, Levels: 2, CellsPerLevel: 4, Hi: 100}
	good := e.sketch(t, cfg)
	ctx := context.Background()
	key := "{" + name + "}:g"
	size := headerBytes + 2*4*8
	tests := []struct {
		name  string
		setup func()
		want  string
	}{
		{"string", func() { e.do(t, "SET", key, "hello") }, "holds 5 bytes"},
		{"list", func() { e.do(t, "RPUSH", key, "x") }, "holds a list"},
		{"longer", func() {
			good.Update(ctx, "a", 1)
			e.do(t, "APPEND", key, "x")
		}, fmt.Sprintf("holds %d bytes", size+1)},
		{"shorter", func() {
			good.Update(ctx, "a", 1)
			s, _ := e.do(t, "GET", key).ToString()
			e.do(t, "SET", key, s[:size-1])
		}, fmt.Sprintf("holds %d bytes", size-1)},
		{"bad magic", func() { e.do(t, "SET", key, strings.Repeat("z", size)) }, "bad magic"},
		{"other shape", func() {
			other := e.sketch(t, Config{Name: name, Levels: 1, CellsPerLevel: 8, Hi: 100})
			other.Update(ctx, "a", 1)
		}, "not L=2 M=4"},
		{"other config", func() {
			other := e.sketch(t, Config{Name: name, Levels: 2, CellsPerLevel: 4, Hi: 50})
			other.Update(ctx, "a", 1)
		}, "another configuration"},
		{"NaN cell", func() {
			good.Update(ctx, "a", 1)
			nan := strings.Repeat("\x00\x00\x00\x00\x00\x00\xc0\x7f", 8) // stamp 0, score NaN
			e.do(t, "SETRANGE", key, fmt.Sprint(headerBytes), nan)
		}, "corrupt cell"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.do(t, "DEL", key)
			tt.setup()
			before, _ := e.do(t, "DUMP", key).ToString()
			for _, op := range []func() error{
				func() error { return good.Update(ctx, "a", 1) },
				func() error { _, err := good.Query(ctx, "a"); return err },
				func() error { _, err := good.TryUpdate(ctx, "a", 1, 10); return err },
			} {
				err := op()
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "grudge:") {
					t.Fatalf("err = %v; want an error containing %q", err, tt.want)
				}
			}
			if after, _ := e.do(t, "DUMP", key).ToString(); after != before {
				t.Fatal("a failed call modified the data under the key")
			}
		})
	}
}

// TestRotation: with Period and Generations the server holds the ring of
// Generations strings, L*M*8+40 bytes each, with no TTL (eviction-safe
// under volatile-*), and every call declares exactly them; the oldest live
// generation answers, so a score is gone Generations periods after its
// last update, and a slot whose generation's life is over is reset by the
// next write.
func TestRotation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		clk.Set(10_000)
		name := e.ns("rot")
		s := e.sketch(t, Config{Name: name, Levels: 2, CellsPerLevel: 8, Hi: 1e6, Period: time.Second, Generations: 2, Clock: clk})
		want := []string{"{" + name + "}:g:0", "{" + name + "}:g:1"}
		if got := s.Keys(); !slices.Equal(got, want) {
			t.Fatalf("Keys() = %q; want %q", got, want)
		}
		ctx := context.Background()
		if err := s.Update(ctx, "a", 5); err != nil {
			t.Fatal(err)
		}
		for _, k := range want {
			n, err := e.do(t, "STRLEN", k).ToInt64()
			if err != nil || n != headerBytes+2*8*8 {
				t.Fatalf("STRLEN %s = %d, %v; want %d", k, n, err, headerBytes+2*8*8)
			}
			if ttl, _ := e.do(t, "PTTL", k).ToInt64(); ttl != -1 {
				t.Fatalf("PTTL %s = %d; want -1 (no TTL)", k, ttl)
			}
		}
		steps := []struct {
			advance time.Duration
			want    float64
		}{{0, 5}, {999 * time.Millisecond, 5}, {time.Millisecond, 5}, {time.Second, 0}, {10 * time.Second, 0}}
		for i, st := range steps {
			clk.Advance(st.advance)
			got, err := s.Query(ctx, "a")
			if err != nil || got != st.want {
				t.Fatalf("step %d (t=%d): Query = %v, %v; want %v", i, clk.NowMillis(), got, err, st.want)
			}
		}
		// Years later the ring is reused: stale slots are reset by the
		// first write, which sees only itself.
		clk.Advance(1 << 40 * time.Millisecond)
		if got, err := s.UpdateAndQuery(ctx, "a", 2); err != nil || got != 2 {
			t.Fatalf("UpdateAndQuery after 2^40 ms = %v, %v; want 2", got, err)
		}
		if got := s.MemoryBytes(); got != 2*(headerBytes+2*8*8) {
			t.Fatalf("MemoryBytes = %d", got)
		}
	})
}

// TestRotationModel: random updates, try-updates and queries at random
// fake times (advancing 0 to 3 periods, one time in ten stepping back) on
// a rotating server sketch with no decay and no collisions, against a
// model of the rotation:
//
//   - an operation runs at t = max(clock, the server's high-water mark),
//     which a write operation that creates a generation raises to t;
//   - a write operation (a denied TryUpdate included) creates every live
//     generation, floor(t/P)-G+1 .. floor(t/P), that no earlier write
//     operation created;
//   - an estimate at t is the sum of the key's committed deltas at times
//     >= (floor(t/P)-G+1)*P.
func TestRotationModel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, gens := range []int64{2, 3} {
			t.Run(fmt.Sprint("G=", gens), func(t *testing.T) {
				const period = 1000
				clk := sketchtest.NewFakeClock()
				clk.Set(123_456)
				s := e.sketch(t, Config{Name: e.ns(fmt.Sprint("rotmodel:", gens)), Levels: 3, CellsPerLevel: 4096, Hi: 1e9,
					Period: period * time.Millisecond, Generations: uint32(gens), Clock: clk})
				type write struct {
					at    int64
					key   string
					delta float64
				}
				var log []write
				var srvT int64
				created := map[int64]bool{}
				estimate := func(at int64, key string) float64 {
					from := (at/period - gens + 1) * period
					var sum float64
					for _, w := range log {
						if w.key == key && w.at >= from {
							sum += w.delta
						}
					}
					return sum
				}
				writeOp := func(at int64) {
					for i := at/period - gens + 1; i <= at/period; i++ {
						if !created[i] {
							created[i], srvT = true, at
						}
					}
				}
				rng := rand.New(rand.NewPCG(uint64(gens), 9))
				ctx := context.Background()
				n := 300
				if testing.Short() {
					n = 100
				}
				for i := range n {
					if rng.IntN(10) == 0 {
						clk.Set(clk.NowMillis() - int64(rng.IntN(2*period))) // the clock steps back
					} else {
						clk.Advance(time.Duration(rng.IntN(3*period)) * time.Millisecond)
					}
					at := max(clk.NowMillis(), srvT)
					key := fmt.Sprint("k", rng.IntN(8))
					delta := float64(1 + rng.IntN(5))
					switch rng.IntN(3) {
					case 0:
						got, err := s.UpdateAndQuery(ctx, key, delta)
						if err != nil {
							t.Fatal(err)
						}
						writeOp(at)
						log = append(log, write{at, key, delta})
						if want := estimate(at, key); got != want {
							t.Fatalf("op %d (t=%d): UpdateAndQuery(%s, %v) = %v; model %v", i, at, key, delta, got, want)
						}
					case 1:
						limit := float64(rng.IntN(30))
						est := estimate(at, key)
						got, err := s.TryUpdate(ctx, key, delta, limit)
						if err != nil {
							t.Fatal(err)
						}
						writeOp(at)
						if want := est+delta <= limit; got != want {
							t.Fatalf("op %d (t=%d): TryUpdate(%s, %v, %v) = %v; model %v (estimate %v)", i, at, key, delta, limit, got, want, est)
						}
						if got {
							log = append(log, write{at, key, delta})
						}
					default:
						got, err := s.Query(ctx, key)
						if err != nil {
							t.Fatal(err)
						}
						if want := estimate(at, key); got != want {
							t.Fatalf("op %d (t=%d): Query(%s) = %v; model %v", i, at, key, got, want)
						}
					}
				}
			})
		}
	})
}

// TestRebase: a write to a generation whose epoch is rebaseAt old moves
// the epoch, without changing any value (compared with the local sketch),
// and idle times far past 2^32 ms decay as the law says: compared with
// sketch/reference (int64 ms ages), since the local lock-free sketch stops
// decaying past 2^31 ms of idle (sketch/doc.go) and the server does not.
func TestRebase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) { testRebase(t, e) })
}

func testRebase(t *testing.T, e *env) {
	for _, law := range []decay.Decay{decay.None(), decay.Exponential(1e-9), decay.Linear(1e-6)} {
		t.Run(fmt.Sprint(decaylaw.Params(law)), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			k, _ := decaylaw.Params(law)
			s := e.sketch(t, Config{Name: e.ns("rebase:" + k.String()), Levels: 2, CellsPerLevel: 8, Hi: 1e9, Decay: law, Clock: clk})
			s.setRebaseAt(1000)
			ls, _ := reference.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e9, Decay: law, Clock: clk})
			ctx := context.Background()
			for i, adv := range []time.Duration{0, 600 * time.Millisecond, 600 * time.Millisecond, 3 * time.Second, 1 << 33 * time.Millisecond, 1 << 40 * time.Millisecond} {
				clk.Advance(adv)
				key := []byte(fmt.Sprint("k", i%3))
				got, err := s.UpdateAndQuery(ctx, string(key), 1000)
				if err != nil {
					t.Fatal(err)
				}
				checkClose(t, i, "UpdateAndQuery", got, ls.UpdateAndQuery(key, 1000))
				for j := range 3 {
					key := []byte(fmt.Sprint("k", j))
					got, err := s.Query(ctx, string(key))
					if err != nil {
						t.Fatal(err)
					}
					checkClose(t, i, "Query", got, ls.Query(key))
				}
			}
		})
	}
}

// TestShards: with Shards > 1 the keys spread over hash-tagged bases and
// each answers as a single sketch would.
func TestShards(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		name := e.ns("sh")
		s := e.sketch(t, Config{Name: name, Shards: 4, CellsPerLevel: 1000, Hi: 1e9})
		ctx := context.Background()
		for i := range 100 {
			if err := s.Update(ctx, fmt.Sprint(i), float64(i)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 100 {
			if got, err := s.Query(ctx, fmt.Sprint(i)); err != nil || got < float64(i) {
				t.Fatalf("Query(%d) = %v, %v", i, got, err)
			}
		}
		for i := range 4 {
			if n, _ := e.do(t, "EXISTS", fmt.Sprintf("{%s:%d}:g", name, i)).ToInt64(); n != 1 {
				t.Fatalf("shard %d missing", i)
			}
		}
	})
}

func TestPanicsOnNaN(t *testing.T) {
	s := &Sketch{cfg: normalized{hi: 10}, hasher: sketch.XXH3()(0)}
	for name, f := range map[string]func(){
		"Update":    func() { s.Update(context.Background(), "", math.NaN()) },
		"TryUpdate": func() { s.TryUpdate(context.Background(), "", 1, math.Inf(1)) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "redis: ") {
					t.Errorf("%s: recovered %v; want a panic starting with redis:", name, r)
				}
			}()
			f()
		}()
	}
}

// TestTryUpdateLimitAboveHi: any finite limit is accepted, as the core
// sketch accepts it, and the decision is estimate + delta <= limit with
// the estimate capped at Hi: a limit above Hi still denies a delta that
// does not fit (it used to panic, "could never deny", which was false).
func TestTryUpdateLimitAboveHi(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.sketch(t, Config{Name: e.ns("abovehi"), Levels: 2, CellsPerLevel: 16, Hi: 10})
		local, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 10})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i, c := range []struct {
			delta, limit float64
			want         bool
		}{
			{4, 100, true}, {4, 100, true}, {4, 100, true}, // 12 clamped to 10
			{95, 100, false}, // 10 + 95 > 100
			{90, 100, true},  // 10 + 90 = 100
			{1, 10.5, false}, // 10 + 1 > 10.5
			{0.5, 10.5, true},
		} {
			got, err := s.TryUpdate(ctx, "k", c.delta, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if want := local.TryUpdate([]byte("k"), c.delta, c.limit); got != c.want || want != c.want {
				t.Fatalf("step %d: TryUpdate(%v, %v) = %v, core sketch %v; want %v", i, c.delta, c.limit, got, want, c.want)
			}
		}
		if got, err := s.Query(ctx, "k"); err != nil || got != 10 {
			t.Fatalf("Query = %v, %v; want 10 (clamped at Hi)", got, err)
		}
	})
}

// TestLibraryReloaded: a server whose function set is empty (FUNCTION
// FLUSH on every node, as after a restart without persistence) gets the
// library again from the next call, which then runs once: the write is
// applied exactly once.
func TestLibraryReloaded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		name := e.ns("reload")
		s := e.sketch(t, Config{Name: name, Levels: 2, CellsPerLevel: 16, Hi: 100})
		ctx := context.Background()
		for i := range 3 {
			e.doAll(t, "FUNCTION", "FLUSH")
			got, err := s.UpdateAndQuery(ctx, "k", 1)
			if err != nil || got != float64(i+1) {
				t.Fatalf("call %d after FUNCTION FLUSH: %v, %v; want %d", i, got, err, i+1)
			}
		}
		for _, n := range e.nodes() {
			if l, err := rawDo(n.addr(), "FUNCTION", "LIST"); err != nil || len(l.([]any)) != 1 {
				t.Fatalf("FUNCTION LIST on %s = %v, %v; want 1 library", n.addr(), l, err)
			}
		}
	})
}

// TestWrongKeyCount: a call that declares other keys than the sketch's
// (a foreign or broken caller) is refused before any key is touched.
func TestWrongKeyCount(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	s := e.sketch(t, Config{Name: "wk", Hi: 10, Period: time.Second, Generations: 2})
	ctx := context.Background()
	args := scriptArgs(s.cfg, "U", 1, 1, 0, s.rebaseAt)
	for _, keys := range [][]string{s.keys[0][:1], append(slices.Clone(s.keys[0]), "{wk}:g:2")} {
		_, err := s.fcall(ctx, keys, args)
		if err == nil || !strings.Contains(err.Error(), "the sketch has 2") {
			t.Fatalf("FCALL with %d keys: %v; want a grudge: error naming the count", len(keys), err)
		}
	}
	if n, _ := e.do(t, "EXISTS", "{wk}:g:0").ToInt64(); n != 0 {
		t.Fatal("a refused call created a key")
	}
}

// TestClampInexactHi: with a Hi no float32 holds (0.1, 1e9+1), a key at
// the clamp reads Hi exactly through Query and UpdateAndQuery, with
// every aggregator, and TryUpdate(k, 0, Hi) admits it, as the in-process
// sketch does (cells store the float32 just above Hi; reads cap it).
func TestClampInexactHi(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for _, hi := range []float64{0.1, 1e9 + 1} {
			for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
				name := fmt.Sprintf("clamp:%v:%v", hi, agg)
				rs := e.sketch(t, Config{Name: e.ns(name), Levels: 3, CellsPerLevel: 16, Hi: hi, Aggregator: agg})
				got, err := rs.UpdateAndQuery(ctx, "k", 2*hi)
				if err != nil {
					t.Fatal(err)
				}
				if got != hi {
					t.Fatalf("Hi %v, %v: UpdateAndQuery(2 Hi) = %v, want Hi", hi, agg, got)
				}
				if got, err = rs.Query(ctx, "k"); err != nil || got != hi {
					t.Fatalf("Hi %v, %v: Query = %v (%v), want Hi", hi, agg, got, err)
				}
				if ok, err := rs.TryUpdate(ctx, "k", 0, hi); err != nil || !ok {
					t.Fatalf("Hi %v, %v: TryUpdate(0, Hi) = %v (%v) at the clamp: Hi + 0 <= Hi", hi, agg, ok, err)
				}
				if ok, err := rs.TryUpdate(ctx, "k", hi/1e6, hi); err != nil || ok {
					t.Fatalf("Hi %v, %v: TryUpdate(Hi/1e6, Hi) = %v (%v) at the clamp, want denied", hi, agg, ok, err)
				}
			}
		}
	})
}
