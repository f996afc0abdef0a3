package snapshot_test

// Audit 134: SIGKILL in the middle of a Saver's saves of a ROTATOR
// (TestCrashDuringSnapshots covers a sketch, TestLimiterCrashDuringSnapshots
// a limiter; a rotator's snapshot is the N generations' snapshots in one
// file, each with its own checksum, behind one more).
//
// Contract: sketch/snapshot package doc ("after a crash at any point the
// target holds either the previous complete snapshot or the new complete
// one, never a mix"; "What a crash loses: updates since the start of the
// last save that completed"; "A crash may leave a stray temporary file
// (name + ".tmp-*"), which the next Saver on the same path removes").
//
// The child (this binary again) loads the rotator (decay None, Period 1 h:
// nothing rotates out while the test runs), counts progress into it and
// saves every 20 ms, printing the progress each durable save includes;
// the parent kills it at random moments, each child continuing from the
// last file. Every Load succeeds and holds at least the progress last
// reported durable; stray temporary files never pile up.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

const audit134RotCrashEnv = "GRUDGE_AUDIT134_ROTATOR_CRASH_CHILD"

func audit134RotCrashCfg() rotator.Config {
	return rotator.Config{
		Sketch:      sketch.Config{Levels: 4, CellsPerLevel: 1 << 12, Hi: 1e15},
		Generations: 3,
		Period:      time.Hour,
	}
}

// TestAudit134RotatorHelperProcess is the child: it does nothing unless
// the environment names a snapshot path; then it runs until killed.
func TestAudit134RotatorHelperProcess(t *testing.T) {
	path := os.Getenv(audit134RotCrashEnv)
	if path == "" {
		return
	}
	r, err := rotator.New(audit134RotCrashCfg())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	if err := snapshot.Load(path, r); err != nil && !errors.Is(err, snapshot.ErrNoSnapshot) {
		fmt.Println("error", err)
		os.Exit(3)
	}
	var done atomic.Int64
	done.Store(int64(r.QueryString("progress")))
	fmt.Println("start", done.Load())
	src := &progressSource{w: r, done: &done}
	_, err = snapshot.NewSaver(path, crashInterval, src, snapshot.OnSave(func(err error) {
		if err == nil {
			fmt.Println("saved", src.captured.Load())
		}
	}))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		r.UpdateString("progress", 1)
		done.Add(1)
		r.UpdateString(strconv.Itoa(i%512), 1)
		for done.Load() >= 1<<23 {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestAudit134RotatorCrashDuringSnapshots(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("SIGKILL is POSIX")
	}
	kills := 8
	if testing.Short() {
		kills = 4
	}
	path := filepath.Join(t.TempDir(), "rot.snap")
	var floor int64 = -1
	midWrite := 0
	for i := range kills {
		c := startCrashChild(t, "TestAudit134RotatorHelperProcess", []string{audit134RotCrashEnv + "=" + path}, floor < 0)
		c.kill(t, time.Duration(rand.IntN(100_000))*time.Microsecond)
		saved := int64(-1)
		if f, _ := c.lastSaved(); f != nil {
			saved, _ = strconv.ParseInt(f[0], 10, 64)
		}
		if m, _ := filepath.Glob(path + ".tmp-*"); len(m) > 0 {
			midWrite++
		}
		r, err := rotator.New(audit134RotCrashCfg())
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshot.Load(path, r); err != nil {
			t.Fatalf("kill %d: the last good snapshot does not load: %v", i, err)
		}
		got := int64(r.QueryString("progress"))
		if want := max(floor, saved); got < want {
			t.Fatalf("kill %d: loaded progress %d, but a snapshot of %d had been reported durable", i, got, want)
		}
		floor = got
	}
	t.Logf("%d kills (%d in the middle of a save); final progress %d", kills, midWrite, floor)
	if m, _ := filepath.Glob(path + ".tmp-*"); len(m) > 1 {
		t.Errorf("stray temporary files pile up: %v", m)
	}
}
