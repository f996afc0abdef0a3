package rotator_test

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55TryUpdateExactAcrossDelayedPromotion: 4 goroutines race
// TryUpdate(k, 1, 1000) while 2 goroutines take snapshots in a loop and
// the clock crosses the first deadline (N = 2, no decay, every generation
// born at the start, so a single crossing forgets nothing): exactly 1000
// admissions, Query reads 1000, one promotion, every WriteTo succeeds,
// and every snapshot restores to at most 1000.
func TestAudit55TryUpdateExactAcrossDelayedPromotion(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 5 {
			clk := sketchtest.NewFakeClock()
			clk.Set(a55T0)
			r := a55New(t, clk, 2, time.Second)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var snaps [][]byte
			var smu sync.Mutex
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						var b bytes.Buffer
						if _, err := r.WriteTo(&b); err != nil {
							if strings.Contains(err.Error(), "take the snapshot again") {
								continue // a promotion during the encode: refused, as documented
							}
							t.Errorf("WriteTo: %v", err)
							return
						}
						smu.Lock()
						if len(snaps) < 20 {
							snaps = append(snaps, b.Bytes())
						}
						smu.Unlock()
					}
				}()
			}
			var tw sync.WaitGroup
			for range 4 {
				tw.Add(1)
				go func() {
					defer tw.Done()
					for i := 0; i < 600; i++ {
						if r.TryUpdateString("k", 1, 1000) {
							admitted.Add(1)
						}
						if i == 100+round*50 {
							clk.Set(a55T0 + 1000 + int64(round)*100)
						}
					}
				}()
			}
			tw.Wait()
			close(stop)
			wg.Wait()
			if got := admitted.Load(); got != 1000 {
				t.Fatalf("round %d: %d admissions of TryUpdate(k, 1, 1000), want exactly 1000", round, got)
			}
			if q := r.QueryString("k"); q != 1000 {
				t.Fatalf("round %d: Query = %v, want 1000", round, q)
			}
			if st := r.Stats(); st.Promotions != 1 || st.Periods != 1 {
				t.Fatalf("round %d: Stats %+v, want one promotion of one period", round, st)
			}
			for _, b := range snaps {
				rc := sketchtest.NewFakeClock()
				rc.Set(clk.NowMillis())
				rest := a55New(t, rc, 2, time.Second)
				if err := rest.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				if q := rest.QueryString("k"); q > 1000 {
					t.Fatalf("restored snapshot reads %v > 1000", q)
				}
			}
		}
	})
}

// TestAudit55WriteToBlockedWriterDoesNotBlockOps: while a WriteTo is
// stuck in its writer, operations past the deadline neither block nor
// promote (Stats unchanged); they promote once it returns.
func TestAudit55WriteToBlockedWriterDoesNotBlockOps(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a55T0)
	r := a55New(t, clk, 3, 100*time.Millisecond)
	release := make(chan struct{})
	entered := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := r.WriteTo(&testhook.Writer{W: io.Discard, N: 1, Hook: func() { close(entered); <-release }})
		done <- err
	}()
	<-entered
	for i := range 50 {
		clk.Set(a55T0 + 100 + int64(i)*37)
		r.UpdateString("x", 1)
		r.TryUpdateString("y", 1, 10)
		_ = r.QueryString("x")
	}
	// The operations promoted as their deadlines came (the blocked
	// WriteTo holds nothing off): deadline grid 100, 200, ...; the last
	// op at 100 + 49*37 = 1913.
	if st := r.Stats(); st.Periods != 19 {
		t.Fatalf("during a blocked WriteTo: Stats %+v, want 19 periods", st)
	}
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "take the snapshot again") {
		t.Fatalf("WriteTo across promotions: %v, want the documented refusal", err)
	}
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
}
