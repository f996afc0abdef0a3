package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit44TryAgainDeadline: check.go: TRYAGAIN "waits (1, 2, 4 .. 50
// ms) and calls again until the context ends", and doc.go: "Context
// deadlines bound every call", "Calls are never retried by the sketch (a
// write is never applied twice by it), except after replies that say no
// code ran". A rotating sketch (Generations 2, both generation keys
// written) on the shared cluster; its slot is opened for migration and
// only one of its two keys migrated, so every FCALL gets TRYAGAIN. A
// TryUpdate and an Update under a 200 ms deadline return an error
// matching context.DeadlineExceeded within 1.5 s; after the move
// completes, the key's estimate is what it was before (no write was
// applied), and one more TryUpdate applies exactly once.
func TestAudit44TryAgainDeadline(t *testing.T) {
	t.Cleanup(audit3WaitDelayedRefresh)
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "cluster")
			c := e.cluster
			slot, src, dst := pickMove(t, c)
			name := nameForSlot(t, e.ns("a44tryagain"), slot)
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000_500)
			s := e.sketch(t, Config{Name: name, Levels: 3, CellsPerLevel: 1024, Hi: 1e6,
				Period: time.Second, Generations: 2, Clock: clk})
			ctx := context.Background()
			if _, err := s.TryUpdate(ctx, "k", 3, 100); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			if _, err := s.TryUpdate(ctx, "k", 4, 100); err != nil {
				t.Fatal(err)
			}
			before, err := s.Query(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			keys := []string{"{" + name + "}:g:0", "{" + name + "}:g:1"}
			for _, k := range keys {
				if n, err := rawDo(src.addr(), "EXISTS", k); err != nil || n != int64(1) {
					t.Fatalf("EXISTS %s on the owner = %v, %v; want both generations written", k, n, err)
				}
			}
			srcID, dstID := nodeID(t, src), nodeID(t, dst)
			sl := strconv.Itoa(slot)
			finished := false
			finish := func() {
				if finished {
					return
				}
				finished = true
				// Every key of the slot (other tests' sketches may share it).
				for range 100 {
					r, err := rawDo(src.addr(), "CLUSTER", "GETKEYSINSLOT", sl, "100")
					if err != nil {
						t.Errorf("GETKEYSINSLOT: %v", err)
						break
					}
					ks, _ := r.([]any)
					if len(ks) == 0 {
						break
					}
					for _, k := range ks {
						if r, err := rawDo(src.addr(), "MIGRATE", "127.0.0.1", strconv.Itoa(dst.port), k.(string), "0", "5000"); err != nil || r != "OK" {
							t.Errorf("MIGRATE %s = %v, %v", k, r, err)
						}
					}
				}
				for _, n := range append([]*testServer{dst, src}, c.nodes...) {
					if r, err := rawDo(n.addr(), "CLUSTER", "SETSLOT", sl, "NODE", dstID); err != nil || r != "OK" {
						t.Errorf("SETSLOT %s NODE on %s = %v, %v", sl, n.addr(), r, err)
					}
				}
				if err := c.waitConsistent(20 * time.Second); err != nil {
					t.Error(err)
				}
			}
			t.Cleanup(finish)
			if r, err := rawDo(dst.addr(), "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID); err != nil || r != "OK" {
				t.Fatalf("IMPORTING: %v %v", r, err)
			}
			if r, err := rawDo(src.addr(), "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID); err != nil || r != "OK" {
				t.Fatalf("MIGRATING: %v %v", r, err)
			}
			if r, err := rawDo(src.addr(), "MIGRATE", "127.0.0.1", strconv.Itoa(dst.port), keys[0], "0", "5000"); err != nil || r != "OK" {
				t.Fatalf("MIGRATE %s: %v %v", keys[0], r, err)
			}
			for _, op := range []string{"TryUpdate", "Update"} {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				t0 := time.Now()
				switch op {
				case "TryUpdate":
					_, err = s.TryUpdate(cctx, "k", 5, 100)
				case "Update":
					err = s.Update(cctx, "k", 5)
				}
				el := time.Since(t0)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s with the keys split: err %v; want one matching context.DeadlineExceeded", op, err)
				}
				if el > 1500*time.Millisecond {
					t.Errorf("%s with a 200ms deadline took %v", op, el)
				}
				t.Logf("%s: %v after %v", op, err, el)
			}
			finish()
			after, err := s.Query(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("estimate after the timed-out calls %v; before %v (a call that got only TRYAGAIN ran no code)", after, before)
			}
			if _, err := s.TryUpdate(ctx, "k", 5, 100); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Query(ctx, "k"); err != nil || got != before+5 {
				t.Fatalf("after one more TryUpdate of 5: %v, %v; want %v", got, err, before+5)
			}
		})
	}
}
