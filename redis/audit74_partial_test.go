package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestAudit74FixedPartialWriteAboveLoweredLimit: docs say the limit
// "can change at run time (CONFIG SET)". A sketch string created under
// proto-max-bulk-len 2mb (1,280,040 bytes: L 4 x M 40000), then the limit
// lowered to 1mb: a write whose level-3 cell lies beyond 1 MiB fails
// (SETRANGE refuses offset+8 > limit) after the function has already
// written levels 0..2 (Redis does not roll a function back), so the call
// returns an error yet its delta is applied to 3 of the key's 4 cells.
func TestAudit74FixedPartialWriteAboveLoweredLimit(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone", "--proto-max-bulk-len", "2mb")
			addr := e.srv.addr()
			s := e.sketch(t, Config{Name: "pw", Levels: 4, CellsPerLevel: 40000, Hi: 1e9})
			if err := s.Update(ctx, "seed", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := rawDo(addr, "CONFIG", "SET", "proto-max-bulk-len", "1mb"); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(ctx); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Check after lowering the limit: %v; want ErrInvalidConfig", err)
			}
			// Levels 0..2 end at 40 + 3 x 320000 = 960040 < 1 MiB.
			snap := func() string {
				r, err := rawDo(addr, "GETRANGE", "{pw}:g", "40", "960039")
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(r)
			}
			for i := 0; i < 50; i++ {
				key := fmt.Sprintf("k%d", i)
				before := snap()
				err := s.Update(ctx, key, 1)
				if err == nil {
					continue // its level-3 cell is below 1 MiB
				}
				// Stop 49: the server's refusal matches ErrInvalidConfig
				// and names the string's size.
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "1280040 bytes") {
					t.Fatalf("Update(%q, 1) above the lowered proto-max-bulk-len: %v; want ErrInvalidConfig naming the 1280040-byte string", key, err)
				}
				est, qerr := s.Query(ctx, key) // reads are not limited
				if after := snap(); after != before {
					t.Fatalf("Update(%q, 1) returned %v, yet it changed levels 0..2 of the string (Query now %v, %v).\n"+
						"doc.go: the function \"commits all L cells, atomically\"; check.go: such a string \"would fail every write\". "+
						"Expected a failed write to leave the string unchanged (or to succeed)", key, err, est, qerr)
				}
				return
			}
			t.Fatal("no write failed")
		})
	}
}
