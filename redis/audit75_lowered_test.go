package redis

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit75LowKey returns a key whose every cell ends at or below limit
// bytes into the string.
func audit75LowKey(t *testing.T, s *Sketch, limit int) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		k := fmt.Sprintf("low%d", i)
		args := scriptArgs(s.cfg, "U", s.hasher.Sum64String(k), 0, 0, 1)
		ok := true
		for l := 0; l < int(s.cfg.Levels); l++ {
			end, err := strconv.Atoi(args[5+2*l])
			if err != nil {
				t.Fatal(err)
			}
			if end+1 > limit {
				ok = false
			}
		}
		if ok {
			return k
		}
	}
	t.Fatal("no key below the limit")
	return ""
}

// TestAudit75FixedLoweredLimitOthersFail: docs/distributed.md ("A
// string the server can hold"): "The limit can be lowered at run time
// (CONFIG SET ...) below a string that exists: then a call whose cells lie
// past it fails whole, having written nothing (...), while the others
// succeed, and Check reports the string." Strings of 1,120,040 bytes
// (L 2 x M 70000) made under proto-max-bulk-len 2mb, the limit lowered to
// 1mb, a key whose cells all end below 1 MiB: its writes succeed only
// until (a) the ring rotates (the new generation's string is created at
// its full size, above the limit) or (b) a rebase is due (its
// whole-body SETRANGE reaches past the limit); from then on every write
// of every key fails.
func TestAudit75FixedLoweredLimitOthersFail(t *testing.T) {
	ctx := context.Background()
	for _, c := range []string{"rotation", "rebase"} {
		t.Run(c, func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone", "--proto-max-bulk-len", "2mb")
			clk := sketchtest.NewFakeClock()
			t0 := int64(1_700_000_000_000)
			clk.Set(t0)
			cfg := Config{Name: "a75low", Levels: 2, CellsPerLevel: 70000, Decay: decay.Linear(1000),
				Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min, Clock: clk}
			if c == "rotation" {
				cfg.Period, cfg.Generations = time.Second, 2
			}
			s := e.sketch(t, cfg)
			if c == "rebase" {
				s.setRebaseAt(500)
			}
			k := audit75LowKey(t, s, 1<<20)
			if err := s.Update(ctx, k, 100); err != nil {
				t.Fatal(err)
			}
			if _, err := rawDo(e.srv.addr(), "CONFIG", "SET", "proto-max-bulk-len", "1mb"); err != nil {
				t.Fatal(err)
			}
			clk.Set(t0 + 100)
			if err := s.Update(ctx, k, 1); err != nil {
				t.Fatalf("setup: a write of %s (cells below 1 MiB) under the lowered limit: %v", k, err)
			}
			when := "the ring rotated (t0 + 1 s: a new generation)"
			if c == "rotation" {
				clk.Set(t0 + 1000)
			} else {
				clk.Set(t0 + 600)
				when = "a rebase came due (epoch age 600 ms >= rebaseAt 500 ms)"
			}
			// Fixed as a doc (stop 48): "while the others succeed, until
			// the next rebase or rotation, which writes the whole string:
			// from then on every write fails".
			if err := s.Update(ctx, k, 1); err == nil {
				t.Errorf("after %s, Update(%q) succeeded; docs/distributed.md: \"until the next rebase or rotation, which writes the whole string: from then on every write fails\"", when, k)
			}
		})
	}
}

// TestAudit75FixedFailedRotationDeletesGeneration: sketch.lua commits
// "all or nothing" ("if it fails nothing of the call was written"; docs/
// distributed.md: "fails whole, having written nothing"), but a write
// that finds a stale ring slot DELetes it before creating the new
// generation, and under a lowered proto-max-bulk-len that creation fails
// after the DEL. The DEL persists, and with it the call's view of time:
// tm is the largest of the clock and the slots' hw, so a slot gone lowers
// it. G 2, P 1 s, Linear 1/s: k has 110 in generation N (its slot made
// at t0+200) and 10 in N+1 (made at t0+1200). The clock jumps to t0+3500
// (a write there fails) then steps back to t0+1500: had the failed call
// written nothing, generation N is live again at t0+1500 and answers
// about 109 (as it does in the control, without the failing write); after it,
// N's string is gone and the Query answers ~10: a debt forgotten early
// by a call that reported failure.
func TestAudit75FixedFailedRotationDeletesGeneration(t *testing.T) {
	ctx := context.Background()
	for _, fail := range []bool{false, true} {
		e := newEnv(t, "rueidis", "standalone", "--proto-max-bulk-len", "2mb")
		clk := sketchtest.NewFakeClock()
		t0 := int64(1_700_000_000_000)
		clk.Set(t0 + 200)
		s := e.sketch(t, Config{Name: "a75del", Levels: 2, CellsPerLevel: 70000, Decay: decay.Linear(1),
			Lo: 0, Hi: 1 << 20, Aggregator: sketch.Min, Period: time.Second, Generations: 2, Clock: clk})
		if err := s.Update(ctx, "k", 100); err != nil {
			t.Fatal(err)
		}
		clk.Set(t0 + 1200)
		if err := s.Update(ctx, "k", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := rawDo(e.srv.addr(), "CONFIG", "SET", "proto-max-bulk-len", "1mb"); err != nil {
			t.Fatal(err)
		}
		if fail {
			clk.Set(t0 + 3500)
			if err := s.Update(ctx, "k", 1); err == nil {
				t.Fatal("setup: the write at t0+3500 succeeded under 1mb")
			}
		}
		clk.Set(t0 + 1500)
		q, err := s.Query(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if !fail {
			if q < 105 {
				t.Fatalf("control: Query at t0+1500 = %v; want about 110 (generation N)", q)
			}
			continue
		}
		if q < 105 {
			t.Errorf("after a write that failed (proto-max-bulk-len lowered below the strings) at t0+3500, Query at t0+1500 = %v; "+
				"without that call it is about 110 (generation N, live at t0+1500). The failed call DELeted N's string before its "+
				"creation of the new generation failed. sketch.lua: \"if it fails nothing of the call was written\"; docs/distributed.md: "+
				"\"fails whole, having written nothing\". Expected about 110, got %v", q, q)
		}
	}
}
