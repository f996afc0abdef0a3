package grudge_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit76LazyPromotionUnderRacingWriters: W goroutines write their own
// keys (distinct cells) with Update, UpdateAndQuery and TryUpdate (a limit
// never reached) at every GOMAXPROCS while the fake clock crosses one
// period boundary per round, so the first writers of each round race the
// lazy promotion. After round s the primary holds exactly the writes of
// the last min(s+1, G) rounds (migrating.md, "What is identical":
// "Rotator: reads the oldest generation, writes all ... the promoted
// generation was written all along (warm start)"; "Ticker: nil: ... The
// first operation after a Period ends promotes the next generation, with
// one CAS"), and Rotations() counts one per round.
func TestAudit76LazyPromotionUnderRacingWriters(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, gens := range []uint32{2, 3} {
			clk := grudgetest.NewFakeClock()
			const period = 10 * time.Millisecond
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch: grudge.Config{Levels: 4, CellsPerLevel: 64, Hi: 1 << 24, Clock: clk,
					Hasher: func(uint64) grudge.Hasher { return a76SpreadHasher{} }},
				Generations: gens, Period: period,
			})
			if err != nil {
				t.Fatal(err)
			}
			const workers, per, rounds = 4, 150, 8
			for s := 0; s < rounds; s++ {
				if s > 0 {
					clk.Advance(period)
				}
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						key := []byte(fmt.Sprintf("k%d", w))
						for i := 0; i < per; i++ {
							switch i % 3 {
							case 0:
								r.Update(key, 1)
							case 1:
								r.UpdateAndQuery(key, 1)
							default:
								if !r.TryUpdate(key, 1, 1<<23) {
									t.Errorf("TryUpdate denied far below its limit")
								}
							}
						}
					}(w)
				}
				wg.Wait()
				live := s + 1
				if live > int(gens) {
					live = int(gens)
				}
				for w := 0; w < workers; w++ {
					key := []byte(fmt.Sprintf("k%d", w))
					if got, want := r.Query(key), float64(live*per); got != want {
						t.Fatalf("G=%d round %d: Query(k%d) = %v, want %v (the writes of the last %d rounds)", gens, s, w, got, want, live)
					}
				}
				if got := r.Rotations(); got != int64(s) {
					t.Fatalf("G=%d round %d: Rotations() = %d, want %d", gens, s, got, s)
				}
			}
		}
	})
}

// TestAudit76LazyPromotionRacingClock: the clock crosses period boundaries
// while writers run. Each write is bracketed by the number of boundary
// moves finished before it started (a) and started before it finished
// (b), so it landed in a period in [a, b]. At the end, after K moves, the
// primary must hold every write with a >= K-G+1 (never under-estimate:
// the promoted generation was written all along) and none with
// b < K-G+1 ("a score lives at most Generations x Period after its last
// write").
func TestAudit76LazyPromotionRacingClock(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, gens := range []uint32{2, 4} {
			clk := grudgetest.NewFakeClock()
			const period = 10 * time.Millisecond
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch: grudge.Config{Levels: 4, CellsPerLevel: 64, Hi: 1 << 24, Clock: clk,
					Hasher: func(uint64) grudge.Hasher { return a76SpreadHasher{} }},
				Generations: gens, Period: period,
			})
			if err != nil {
				t.Fatal(err)
			}
			var started, finished atomic.Int64
			stop := make(chan struct{})
			const workers = 3
			type span struct{ a, b int64 }
			spans := make([][]span, workers)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					key := []byte(fmt.Sprintf("k%d", w))
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						a := finished.Load()
						switch i % 3 {
						case 0:
							r.Update(key, 1)
						case 1:
							r.UpdateAndQuery(key, 1)
						default:
							r.TryUpdate(key, 1, 1<<23)
						}
						b := started.Load()
						spans[w] = append(spans[w], span{a, b})
					}
				}(w)
			}
			const moves = 60
			for k := int64(1); k <= moves; k++ {
				time.Sleep(200 * time.Microsecond)
				started.Store(k)
				clk.Advance(period)
				finished.Store(k)
			}
			time.Sleep(time.Millisecond)
			close(stop)
			wg.Wait()
			cut := int64(moves) - int64(gens) + 1
			for w := 0; w < workers; w++ {
				var lo, hi float64
				for _, s := range spans[w] {
					if s.a >= cut {
						lo++
					}
					if s.b >= cut {
						hi++
					}
				}
				got := r.Query([]byte(fmt.Sprintf("k%d", w)))
				if got < lo || got > hi {
					t.Fatalf("G=%d: Query(k%d) = %v after %d boundaries, want within [%v, %v] (%d writes)", gens, w, got, moves, lo, hi, len(spans[w]))
				}
			}
			if got := r.Rotations(); got != moves {
				t.Fatalf("G=%d: Rotations() = %d, want %d", gens, got, moves)
			}
		}
	})
}

// TestAudit76TryUpdateWithRacingDecrements: TryUpdate(k, 1, 10) races
// Update(k, -1) and readers on one key (None, integers, no clamp
// reached): every reading stays <= 10 (an admission is aggregate + delta
// <= limit, atomic with respect to every other TryUpdate, and the
// decrements only lower it), and the final score is exactly admitted -
// decrements (every method is safe for concurrent use; integers are
// exact). On the Sketch, the lazy Rotator and the ticker Rotator, at every
// GOMAXPROCS.
func TestAudit76TryUpdateWithRacingDecrements(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		cfg := grudge.Config{Levels: 4, CellsPerLevel: 64, Lo: -1 << 20, Hi: 1 << 20, Clock: grudgetest.NewFakeClock()}
		s, err := grudge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lazy, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 3, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		tk := grudgetest.NewFakeTicker()
		ticked, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Ticker: tk})
		if err != nil {
			t.Fatal(err)
		}
		defer ticked.Close()
		type face interface {
			Update([]byte, float64)
			Query([]byte) float64
			UpdateAndQuery([]byte, float64) float64
			TryUpdate([]byte, float64, float64) bool
		}
		for _, f := range []struct {
			name string
			f    face
		}{{"sketch", s}, {"lazy", lazy}, {"ticker", ticked}} {
			key := []byte("hot")
			var admitted, decs atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < 400; i++ {
						switch (i + w) % 4 {
						case 0, 1:
							if f.f.TryUpdate(key, 1, 10) {
								admitted.Add(1)
							}
						case 2:
							if w%2 == 0 {
								f.f.Update(key, -1)
							} else {
								f.f.UpdateAndQuery(key, -1)
							}
							decs.Add(1)
						default:
							if q := f.f.Query(key); q > 10 {
								t.Errorf("%s: Query = %v above every TryUpdate limit 10", f.name, q)
							}
						}
					}
				}(w)
			}
			wg.Wait()
			if got, want := f.f.Query(key), float64(admitted.Load()-decs.Load()); got != want {
				t.Fatalf("%s: final Query = %v, want admitted %d - decrements %d = %v", f.name, got, admitted.Load(), decs.Load(), want)
			}
		}
	})
}
