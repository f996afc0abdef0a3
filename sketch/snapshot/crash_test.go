package snapshot_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

const (
	crashEnv      = "GRUDGE_SNAPSHOT_CRASH_CHILD" // the snapshot path, in the child
	crashInterval = 20 * time.Millisecond
)

var progressKey = []byte("progress")

func crashCfg() sketch.Config {
	return sketch.Config{Levels: 4, CellsPerLevel: 1 << 14, Hi: 1e15} // 512 KiB of cells, no decay
}

// progressSource records, before each snapshot of w (a sketch, a
// rotator), how many progress updates had completed: the snapshot holds
// at least that many.
type progressSource struct {
	w        io.WriterTo
	done     *atomic.Int64
	captured atomic.Int64
}

func (p *progressSource) WriteTo(w io.Writer) (int64, error) {
	p.captured.Store(p.done.Load())
	return p.w.WriteTo(w)
}

// TestHelperProcess is the child of TestCrashDuringSnapshots (it does
// nothing unless the environment names a snapshot path): it loads the
// last snapshot, then counts progress into the sketch as fast as it can
// while a Saver snapshots every 20 ms; after each durable save it prints
// "saved N", N the progress the snapshot is known to include. It runs
// until it is killed.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		return
	}
	s, err := sketch.New(crashCfg())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	if err := snapshot.Load(path, s); err != nil && !errors.Is(err, snapshot.ErrNoSnapshot) {
		fmt.Println("error", err)
		os.Exit(3)
	}
	var done atomic.Int64
	done.Store(int64(s.Query(progressKey)))
	fmt.Println("start", done.Load())
	src := &progressSource{w: s, done: &done}
	_, err = snapshot.NewSaver(path, crashInterval, src, snapshot.OnSave(func(err error) {
		if err == nil {
			fmt.Println("saved", src.captured.Load())
		}
	}))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	other := make([]byte, 8)
	for i := 0; ; i++ {
		s.Update(progressKey, 1)
		done.Add(1)
		other[i%8]++
		s.Update(other, 1)         // keep the rest of the sketch changing too
		for done.Load() >= 1<<23 { // stay within float32's exact integers
			time.Sleep(time.Millisecond)
		}
	}
}

// TestCrashDuringSnapshots kills a child process with SIGKILL at random
// moments, most of them in the middle of a snapshot write (a save takes
// a good part of the 20 ms interval), many times over one snapshot path,
// each child continuing from what the previous one left. Every load after
// the first durable save must succeed, and must hold at least the progress
// of the last save the child reported durable before it died: nothing
// older than one interval (plus one save's duration) is lost.
func TestCrashDuringSnapshots(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Log("SIGKILL is POSIX; not run on", runtime.GOOS)
		return
	}
	kills := 30
	if testing.Short() {
		kills = 8
	}
	path := filepath.Join(t.TempDir(), "crash.snap")
	var floor int64 = -1 // the progress the snapshot must hold, once one exists
	var maxGap time.Duration
	midWrite := 0
	begin := time.Now()
	for i := range kills {
		// No snapshot yet: let the first one land.
		c := startCrashChild(t, "TestHelperProcess", []string{crashEnv + "=" + path}, floor < 0)
		// Kill at a random moment after the child loaded: it saves every
		// 20 ms; up to 120 ms covers several saves and their writes.
		killAt := c.kill(t, time.Duration(rand.IntN(120_000))*time.Microsecond)
		saved := int64(-1)
		if f, at := c.lastSaved(); f != nil {
			saved, _ = strconv.ParseInt(f[0], 10, 64)
			maxGap = max(maxGap, killAt.Sub(at))
		}
		if m, _ := filepath.Glob(path + ".tmp-*"); len(m) > 0 {
			midWrite++ // killed with a temporary file open: in a save
		}
		s, _ := sketch.New(crashCfg())
		if err := snapshot.Load(path, s); err != nil {
			t.Fatalf("kill %d: the last good snapshot does not load: %v", i, err)
		}
		got := int64(s.Query(progressKey))
		want := max(floor, saved)
		if got < want {
			t.Fatalf("kill %d: loaded progress %d, but a snapshot of %d had been reported durable", i, got, want)
		}
		floor = got // the next child starts from here: progress never goes back
	}
	t.Logf("%d kills (%d in the middle of a save) in %v; final progress %d; longest time from the last durable save to a kill: %v (interval %v)",
		kills, midWrite, time.Since(begin).Round(time.Millisecond), floor, maxGap.Round(time.Millisecond), crashInterval)
	// Saves keep coming every interval while the child runs: a gap of
	// seconds would mean the Saver stalled (the bound is loose because
	// this machine is shared and fsync can stall for a while).
	if maxGap > 5*time.Second {
		t.Errorf("a kill came %v after the last durable save; the interval is %v", maxGap, crashInterval)
	}
	if m, _ := filepath.Glob(path + ".tmp-*"); len(m) > 1 {
		t.Errorf("stray temporary files pile up: %v", m)
	}
}
