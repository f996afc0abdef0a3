package grudge_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// a50SlowHasher is a user's Hasher (FNV-1a, mixed).
type a50SlowHasher uint64

func (h a50SlowHasher) Hash64(key []byte) uint64 {
	x := uint64(h) ^ 0xcbf29ce484222325
	for _, b := range key {
		x ^= uint64(b)
		x *= 0x100000001b3
	}
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// TestAudit50FixedTickReturnsBeforeSlowRotation (fixed: once a tick is
// taken, Tick waits for its rotation without a bound): grudgetest/ticker.go:
// "Tick delivers one tick, which makes the attached Rotator rotate once,
// and returns when that rotation is done, so Rotations() read right after
// sees it." The only exception it states is a tick "that no rotator takes
// within a second". Here the rotator takes the tick at once, but building
// the new generation (the user's HasherFactory, called for each
// generation) takes longer than a second; Tick's one timer covers the
// wait for the rotation too (grudgetest/ticker.go:55 and :76), so Tick returns after
// 1 s with the rotation not done and Rotations() still 0. A large sketch
// built under load (allocating and zeroing GiBs) can take that long. The
// factory is held until Tick returns (at most 1.5 s), so the outcome does
// not depend on timing.
func TestAudit50FixedTickReturnsBeforeSlowRotation(t *testing.T) {
	var calls atomic.Int32
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	factory := func(seed uint64) grudge.Hasher {
		if calls.Add(1) > 2 { // the two generations New builds pass through
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return a50SlowHasher(seed)
	}
	ft := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Lo: 0, Hi: 10, Hasher: factory, Clock: grudgetest.NewFakeClock()},
		Ticker: ft,
	})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan int64, 1)
	go func() {
		ft.Tick()
		returned <- r.Rotations()
	}()
	<-entered // the rotator took the tick and is building the new generation
	var rotationsSeen int64 = -1
	select {
	case rotationsSeen = <-returned:
	case <-time.After(1500 * time.Millisecond): // past the 1 s the bug returned after
	}
	close(release)
	if rotationsSeen == -1 {
		rotationsSeen = <-returned // Tick waited for the rotation: as documented
	}
	r.Close()
	if rotationsSeen != 1 {
		t.Errorf("Tick returned while the tick's rotation was still being built: Rotations() read right after Tick = %d, want 1 (grudgetest/ticker.go: Tick \"returns when that rotation is done, so Rotations() read right after sees it\"; only a tick no rotator takes within a second is dropped, and this one was taken)",
			rotationsSeen)
	}
	if got := r.Rotations(); got != 1 {
		t.Errorf("after the build finished: Rotations() = %d, want 1", got)
	}
}
