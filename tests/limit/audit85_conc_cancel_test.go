package limit_test

// Audit 85 (concurrency): a large reservation cancelled while other
// requests of the same key race it. On Buckets a reservation larger than
// one give-back step (3 tokens for limit.New(10, 20)) "is given back in
// steps, and a request of the key ... that lands between two of them keeps
// the part not yet given back, on the safe side" (Reservation.Cancel);
// either way "a key is never given back more than its own reservation".
// So, with the key owing prior tokens and racers asking one token at a
// time while the reservation is cancelled: the racers' admissions never
// exceed what the burst leaves above the prior debt (plus the time the
// clock moved), and the key never reads below prior + admitted (less
// that time).

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit85ConcLargeCancelRacesOwnKey(t *testing.T) {
	for _, e := range audit85concEngines {
		for _, moving := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/moving=%v", e, moving), func(t *testing.T) {
				sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
					for round := 0; round < 8; round++ {
						audit85concLargeCancel(t, e, moving, round)
					}
				})
			})
		}
	}
}

func audit85concLargeCancel(t *testing.T, e limit.Engine, moving bool, round int) {
	const (
		burst   = 20
		prior   = 5
		reserve = 15 + 1 // with prior, 21: past the burst, within MaxDebt 80
		racers  = 4
	)
	fc := sketchtest.NewFakeClock()
	fc.Set(1 << 32)
	l := limit.MustNew(10, burst, append(audit85concEngineOpts(e, uint64(round)), limit.WithClock(fc), limit.WithMaxDebt(80))...)
	key := fmt.Sprintf("big%d", round)
	start := fc.NowMillis()
	if !l.AllowN(fc.Now(), key, prior) {
		t.Fatal("setup")
	}
	r := l.ReserveN(fc.Now(), key, reserve)
	if !r.OK() {
		t.Fatal("setup: reservation refused")
	}
	var admitted atomic.Int64
	var done atomic.Bool
	var wg sync.WaitGroup
	go1 := make(chan struct{})
	stop := make(chan struct{})
	for g := 0; g < racers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			// until the Cancel has returned, and 20 more
			for i, after := 0, 0; after < 20 && i < 100000; i++ {
				if i%8 == 0 {
					runtime.Gosched() // let the Cancel run at GOMAXPROCS 1
				}
				if done.Load() {
					after++
				}
				if l.AllowN(fc.Now().Add(time.Hour), key, 1) {
					admitted.Add(1)
				}
			}
		}()
	}
	var aux sync.WaitGroup
	if moving {
		aux.Add(1)
		go func() {
			defer aux.Done()
			<-go1
			for {
				select {
				case <-stop:
					return
				default:
				}
				fc.Advance(time.Millisecond)
				time.Sleep(20 * time.Microsecond)
			}
		}()
	}
	aux.Add(1)
	go func() {
		defer aux.Done()
		<-go1
		r.Cancel()
		done.Store(true)
	}()
	close(go1)
	wg.Wait()
	close(stop)
	aux.Wait()
	moved := fc.NowMillis() - start
	a := admitted.Load()
	// tokens of 100 ms
	if float64(a) > float64(burst-prior)+float64(moved)/100 {
		t.Errorf("round %d: racers admitted %d tokens while a reservation was cancelled; the key owed %d of %d and the clock moved %d ms: the Cancel gave back more than its own", round, a, prior, burst, moved)
	}
	debt := burst - l.TokensAt(fc.Now(), key)
	if truth := float64(prior+a) - float64(moved)/100; debt < truth-1e-9 {
		t.Errorf("round %d: the key reads %v tokens of debt, below prior %d + admitted %d less %d ms drained = %v", round, debt, prior, a, moved, truth)
	}
}
