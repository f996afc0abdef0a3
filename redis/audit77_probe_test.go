package redis

import (
	"context"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit77StaleProbeWritesNothing: the stop-48 probe (SETRANGE of a
// stale slot's last byte before its DEL). G 3, P 1 s, strings of
// 1,120,040 bytes (L 2 x M 70,000): three generations written under a
// 2mb proto-max-bulk-len, the limit lowered to 1mb, the clock moved so
// two slots are stale. Every write kind (Update, UpdateAndQuery,
// TryUpdate, admitted or not) then fails and leaves every string
// byte-identical (the stale ones included, so the probe's byte never
// lands anywhere); Query (no write) still answers from the one live
// generation, unchanged; with the limit raised again the same write
// succeeds and rotates as the model says (the stale slots reset). Run
// standalone and on the cluster (keys declared: the probe's key is one of
// the call's KEYS).
func TestAudit77StaleProbeWritesNothing(t *testing.T) {
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			var e *env
			if topo == "cluster" {
				e = newEnv(t, "rueidis", "cluster")
				e.doAll(t, "CONFIG", "SET", "proto-max-bulk-len", "2mb")
				t.Cleanup(func() {
					for _, n := range e.nodes() {
						rawDo(n.addr(), "CONFIG", "SET", "proto-max-bulk-len", "512mb")
					}
				})
			} else {
				e = newEnv(t, "rueidis", "standalone", "--proto-max-bulk-len", "2mb")
			}
			ctx := context.Background()
			clk := sketchtest.NewFakeClock()
			t0 := int64(1_700_000_000_000)
			s := e.sketch(t, Config{Name: e.ns("a77probe"), Levels: 2, CellsPerLevel: 70000, Decay: decay.Linear(1),
				Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min, Period: time.Second, Generations: 3, Clock: clk})
			for i, w := range []float64{1000, 100, 10} {
				clk.Set(t0 + 200 + int64(i)*1000)
				if err := s.Update(ctx, "k", w); err != nil {
					t.Fatal(err)
				}
			}
			keys := s.Keys()
			dump := func() []string {
				var out []string
				for _, k := range keys {
					v, err := e.do(t, "GET", k).ToString()
					if err != nil {
						t.Fatalf("GET %s: %v", k, err)
					}
					out = append(out, v)
				}
				return out
			}
			e.doAll(t, "CONFIG", "SET", "proto-max-bulk-len", "1mb")
			clk.Set(t0 + 4500) // cur = gen 4: live 2,3,4; slot of gen 2 is live (hw t0+2200), slots of 0 and 1 stale
			q0, err := s.Query(ctx, "k")
			if err != nil {
				t.Fatalf("Query under the lowered limit: %v", err)
			}
			before := dump()
			writes := []struct {
				name string
				f    func() error
			}{
				{"Update", func() error { return s.Update(ctx, "k", 1) }},
				{"UpdateAndQuery", func() error { _, err := s.UpdateAndQuery(ctx, "k", 1); return err }},
				{"TryUpdate admitted", func() error { _, err := s.TryUpdate(ctx, "k", 1, 1e6); return err }},
				{"TryUpdate denied", func() error { _, err := s.TryUpdate(ctx, "k", 1, 0); return err }},
				{"Update other key", func() error { return s.Update(ctx, "other", 5) }},
			}
			for _, w := range writes {
				if err := w.f(); err == nil {
					t.Fatalf("%s at t0+4500 under 1mb succeeded; want the probe's error", w.name)
				}
				after := dump()
				for i := range keys {
					if after[i] != before[i] {
						t.Fatalf("%s failed but changed %s (%d -> %d bytes): expected nothing written (distributed.md: \"fails whole, having written nothing\")",
							w.name, keys[i], len(before[i]), len(after[i]))
					}
				}
				q, err := s.Query(ctx, "k")
				if err != nil || q != q0 {
					t.Fatalf("Query after the failed %s = %v, %v; want %v as before", w.name, q, err, q0)
				}
			}
			// gen 2 (10 at t0+2200, Linear 1/ms... decay.Linear(1) is 1 unit/s): about 10-2.3.
			if q0 < 7 || q0 > 10 {
				t.Fatalf("Query at t0+4500 = %v; want about 7.7 (generation 2 only)", q0)
			}
			e.doAll(t, "CONFIG", "SET", "proto-max-bulk-len", "2mb")
			v, err := s.UpdateAndQuery(ctx, "k", 1)
			if err != nil {
				t.Fatalf("UpdateAndQuery with the limit restored: %v", err)
			}
			if v < q0+1-0.01 || v > q0+1+0.01 {
				t.Fatalf("UpdateAndQuery with the limit restored = %v; want %v + 1", v, q0)
			}
		})
	}
}
