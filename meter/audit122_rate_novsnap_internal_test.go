package meter

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit122RateNoveltySnapshotStalledSeen (regression, passes):
// meter/doc.go: WriteTo "stops nothing ... not a global cut (an event in
// flight may be in it or not)"; Novelty.ReadFrom: "A key marked within T
// of the snapshot's instant is seen until T after its mark". Interleaving:
// keys p0..p3 are Seen before D-1; A = Seen(k) at D-1 is admitted by the
// primary and stopped before its level-0 CAS (stripe held); the clock
// crosses D and B = Seen(b) claims the promotion (its publish waits for
// A's stripe); WriteTo starts (before B's claim in one case, after it in
// the other: it then waits for the publish), and A resumes. Observation
// wanted: nothing hangs; WriteTo succeeds; the restored Novelty sees
// p0..p3 (completed before WriteTo began) at the snapshot's time.
func TestAudit122RateNoveltySnapshotStalledSeen(t *testing.T) {
	for _, claimFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("claimFirst=%v", claimFirst), func(t *testing.T) {
			built := make(chan struct{}, 1)
			var building atomic.Bool
			xx := sketch.XXH3()
			hf := func(seed uint64) sketch.Hasher {
				if building.Load() {
					select {
					case built <- struct{}{}:
					default:
					}
				}
				return xx(seed)
			}
			opts := func(c *sketchtest.FakeClock) []Option {
				return []Option{WithClock(c), WithSize(2, 64), WithSeed(122), WithPeriodWindows(1), WithHasher(hf)}
			}
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000)
			n, err := NewNovelty(10*time.Millisecond, opts(clk)...)
			if err != nil {
				t.Fatal(err)
			}
			cur := n.rot().Current()
			d := cur.Deadline
			pre := []string{"p0", "p1", "p2", "p3"}
			for i, k := range pre {
				clk.Set(d - 5 + int64(i))
				if n.Seen(k) {
					t.Fatalf("%q seen before its first sighting", k)
				}
			}
			clk.Set(d - 1)
			p := cur.Gens[0]
			var armed, fired atomic.Bool
			stalled, release := make(chan struct{}), make(chan struct{})
			core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
				if level != 0 || !armed.Load() || fired.Swap(true) {
					return
				}
				close(stalled)
				select {
				case <-release:
				case <-time.After(a122Limit):
				}
			}})
			aRes := make(chan bool, 1)
			armed.Store(true)
			go func() { aRes <- n.Seen("k") }()
			select {
			case <-stalled:
			case <-time.After(a122Limit):
				close(release)
				t.Fatal("A never reached its CAS")
			}
			bRes := make(chan bool, 1)
			type wr struct {
				b   []byte
				at  int64
				err error
			}
			wRes := make(chan wr, 1)
			write := func() {
				var buf bytes.Buffer
				at := clk.NowMillis()
				_, err := n.WriteTo(&buf)
				wRes <- wr{buf.Bytes(), at, err}
			}
			if !claimFirst {
				write()
			}
			clk.Set(d)
			building.Store(true)
			go func() { bRes <- n.Seen("b") }()
			if claimFirst {
				select {
				case <-built:
				case <-time.After(a122Limit):
					t.Error("B never started the promotion")
				}
				go write()
				for range 200 {
					runtime.Gosched()
				}
			}
			close(release)
			var w wr
			var aNew, bNew bool
			for i := range 3 {
				select {
				case s := <-aRes:
					aNew = !s
				case s := <-bRes:
					bNew = !s
				case w = <-wRes:
				case <-time.After(a122Limit):
					t.Fatalf("call %d of A, B, WriteTo never returned", i)
				}
			}
			if !aNew || !bNew {
				t.Errorf("A told new %v, B (another key) told new %v: both first sightings", aNew, bNew)
			}
			core.SetHooks(p, core.Hooks{})
			if w.err != nil {
				t.Fatalf("WriteTo: %v", w.err)
			}
			c2 := sketchtest.NewFakeClock()
			c2.Set(w.at)
			n2, err := NewNovelty(10*time.Millisecond, opts(c2)...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := n2.ReadFrom(bytes.NewReader(w.b)); err != nil {
				t.Fatalf("ReadFrom: %v", err)
			}
			for _, k := range pre {
				if !n2.Contains(k) {
					t.Errorf("restored: %q, seen before WriteTo began, is not seen", k)
				}
			}
			if !n.Contains("k") || !n.Contains("b") {
				t.Errorf("live: k or b not seen after both calls returned")
			}
		})
	}
}
