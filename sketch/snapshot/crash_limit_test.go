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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

const (
	limiterCrashEnv    = "GRUDGE_LIMITER_CRASH_CHILD"  // the snapshot path, in the child
	limiterCrashEngine = "GRUDGE_LIMITER_CRASH_ENGINE" // "buckets" or "count-min"
	limiterCrashSmall  = "GRUDGE_LIMITER_CRASH_SMALL"  // "1": small engines (-short, -race)
	crashRate          = 100                           // tokens per second
	crashBurst         = 1000
	crashHot           = 8 // keys the child keeps at their limit
)

// crashLimiter builds the crash test's limiter on engine (real clock,
// random seed: a restore adopts the snapshot's).
func crashLimiter(engine string, small bool) (*limit.Limiter, error) {
	// The default sizes (6.1 MiB each): a save takes a good part of
	// the 20 ms interval, so many kills land in the middle of one.
	// Small: 128 KiB.
	opts := []limit.Option{limit.WithEngine(limit.Buckets)}
	if small {
		opts = append(opts, limit.WithCapacity(20_000, 0.01))
	}
	if engine == "count-min" {
		opts = []limit.Option{limit.WithEngine(limit.CountMin)}
		if small {
			opts = append(opts, limit.WithSize(4, 1<<12))
		}
	}
	return limit.New(crashRate, crashBurst, opts...)
}

// debtSource records, before each snapshot, every hot key's debt and the
// wall time of that reading: the snapshot holds at least those debts,
// less what drains from that time on.
type debtSource struct {
	l        *limit.Limiter
	mu       sync.Mutex
	captured string // "wallms d0 d1 ..." of the snapshot being written
}

func (d *debtSource) WriteTo(w io.Writer) (int64, error) {
	t := d.l.Now()
	var b strings.Builder
	fmt.Fprint(&b, t.UnixMilli())
	for k := range crashHot {
		fmt.Fprintf(&b, " %g", crashBurst-d.l.TokensAt(t, fmt.Sprintf("hot%d", k)))
	}
	d.mu.Lock()
	d.captured = b.String()
	d.mu.Unlock()
	return d.l.WriteTo(w)
}

// TestLimiterHelperProcess is the child of TestLimiterCrashDuringSnapshots
// (it does nothing unless the environment names a snapshot path): it
// loads the last snapshot, then keeps its hot keys at their limit and
// spreads other keys over the engine, as fast as it can, while a Saver
// snapshots every 20 ms; after each durable save it prints "saved" and
// what that snapshot is known to hold. It runs until it is killed.
func TestLimiterHelperProcess(t *testing.T) {
	path := os.Getenv(limiterCrashEnv)
	if path == "" {
		return
	}
	l, err := crashLimiter(os.Getenv(limiterCrashEngine), os.Getenv(limiterCrashSmall) == "1")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	if err := snapshot.Load(path, l); err != nil && !errors.Is(err, snapshot.ErrNoSnapshot) {
		fmt.Println("error", err)
		os.Exit(3)
	}
	fmt.Println("start")
	src := &debtSource{l: l}
	_, err = snapshot.NewSaver(path, crashInterval, src, snapshot.OnSave(func(err error) {
		if err == nil {
			src.mu.Lock()
			fmt.Println("saved", src.captured)
			src.mu.Unlock()
		}
	}))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		l.Allow(fmt.Sprintf("hot%d", i%crashHot))
		l.Allow("other" + strconv.Itoa(i%5000))
	}
}

// TestLimiterCrashDuringSnapshots kills a child process running a
// limiter under a Saver with SIGKILL at random moments (many in the
// middle of a save), over one snapshot path per engine, each child
// continuing from what the previous one left. Every load after the first
// durable save must succeed (the file is a complete snapshot, the
// previous or the new one), and the restored limiter must hold, for every
// hot key, at least the debt the last reported save captured less what
// drained in the wall time since that capture: a key denied before the
// crash is never admitted early after it.
func TestLimiterCrashDuringSnapshots(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Log("SIGKILL is POSIX; not run on", runtime.GOOS)
		return
	}
	kills := 20
	small := testsize.Small()
	if small {
		kills = 6
	}
	dir := t.TempDir()
	begin := time.Now()
	midWrite := 0
	minDebt := float64(crashBurst)
	checked, strong := 0, 0 // kills checked; hot keys checked at a captured debt >= burst/2
	for i := range kills {
		engine := []string{"buckets", "count-min"}[i%2]
		path := filepath.Join(dir, engine+".snap")
		env := []string{limiterCrashEnv + "=" + path, limiterCrashEngine + "=" + engine}
		if small {
			env = append(env, limiterCrashSmall+"=1")
		}
		// No snapshot on this path before i = 2: let the first one land.
		c := startCrashChild(t, "TestLimiterHelperProcess", env, i < 2)
		// After the child's first save (20 ms), then at any moment of the
		// next saves and their writes.
		c.kill(t, 15*time.Millisecond+time.Duration(rand.IntN(100_000))*time.Microsecond)
		if m, _ := filepath.Glob(path + ".tmp-*"); len(m) > 0 {
			midWrite++
		}
		l, err := crashLimiter(engine, small)
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshot.Load(path, l); err != nil {
			t.Fatalf("kill %d (%s): the last good snapshot does not load: %v", i, engine, err)
		}
		saved, _ := c.lastSaved()
		if saved != nil && len(saved) != 1+crashHot {
			t.Fatalf("kill %d (%s): a malformed save line: %q", i, engine, saved)
		}
		if saved == nil {
			continue // killed before this child's first save: the file is the previous child's
		}
		capWall, _ := strconv.ParseInt(saved[0], 10, 64)
		now := l.Now()
		elapsed := float64(now.UnixMilli()-capWall) / 1000
		for k := range crashHot {
			captured, _ := strconv.ParseFloat(saved[1+k], 64)
			key := fmt.Sprintf("hot%d", k)
			debt := crashBurst - l.TokensAt(now, key)
			// 10 ms of slack: the wall and monotonic clocks of two
			// processes, and whole milliseconds.
			if floor := captured - crashRate*(elapsed+0.010); debt < floor {
				t.Fatalf("kill %d (%s): %s restored at debt %v, below %v (captured %v, %.3f s ago, draining %d/s)",
					i, engine, key, debt, floor, captured, elapsed, crashRate)
			}
			minDebt = min(minDebt, debt)
			if captured >= crashBurst/2 {
				strong++
			}
		}
		checked++
	}
	t.Logf("%d kills (%d in the middle of a save, %d after a reported save) in %v; least restored hot debt %v of burst %d",
		kills, midWrite, checked, time.Since(begin).Round(time.Millisecond), minDebt, crashBurst)
	if checked < kills/4 || checked == 0 {
		t.Errorf("only %d of %d kills came after a reported save: the check hardly ran", checked, kills)
	}
	if strong == 0 && !testsize.Race && !testchild.Emulated() {
		// The hot keys sit near their burst; the check has teeth only
		// where the captured debt was high. (Under -race or an emulator
		// the child may be too slow to fill them before its kill.)
		t.Errorf("no kill came after a save that captured a hot key at half its burst or more")
	}
}
