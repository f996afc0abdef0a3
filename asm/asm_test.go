package asm

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// twins pairs each build's Pause with the always-compiled pure-Go twin.
var twins = []struct {
	name  string
	pause func()
}{
	{"impl=asm", Pause},
	{"impl=generic", pauseGeneric},
}

// TestPause: Pause is a spin hint, so what it must do is return, touch no
// memory the caller can see, and let a spin-wait built on it observe
// another goroutine's store: a waiter spinning on an atomic flag with
// Pause finishes once the flag is set, and allocates nothing.
func TestPause(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, tw := range twins {
		t.Run(tw.name, func(t *testing.T) {
			if a := testing.AllocsPerRun(100, tw.pause); a != 0 {
				t.Fatalf("Pause allocates %v times per call; want 0", a)
			}
			x := [4]uint64{1, 2, 3, 4}
			for range 1000 {
				tw.pause()
			}
			if x != [4]uint64{1, 2, 3, 4} {
				t.Fatalf("Pause changed the caller's memory: %v", x)
			}
			var flag atomic.Bool
			done := make(chan int)
			go func() {
				n := 0
				for !flag.Load() {
					tw.pause()
					n++
				}
				done <- n
			}()
			time.Sleep(time.Millisecond)
			flag.Store(true)
			select {
			case n := <-done:
				t.Logf("spin-wait ended after %d Pause calls", n)
			case <-time.After(30 * time.Second):
				t.Fatal("a spin-wait on Pause never saw the flag set by another goroutine")
			}
		})
	}
}
