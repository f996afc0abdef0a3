package redis

// Audit 89: RequiredACL sufficient for the reload path. check.go,
// RequiredACL: "FUNCTION|LOAD is needed on every primary unless an
// administrator loads the library"; doc.go: after "Function not found" (a
// fresh or restarted server) "the client loads the library on every node
// it can reach ... and calls once more". A user granted exactly
// RequiredACL (and the libraries' connection commands) keeps deciding,
// exactly, across a FUNCTION FLUSH of every node.

import (
	"context"
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit89RedisACLExactAcrossFunctionFlush(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, e *env) {
		name := e.ns("a89acl:7")
		user := fmt.Sprintf("a89u%d", e.seq)
		audit75Grant(t, e, user, name)
		clk := sketchtest.NewFakeClock()
		clk.Set(1_800_000_000_000)
		cfg := LimiterConfig{Name: name, Limit: PerSecond(1, 5), Shards: 3, Levels: 2, CellsPerLevel: 64, Clock: clk,
			DenyCacheCells: 64, PreCheck: true}
		var l *Limiter
		var err error
		switch c := audit75Conn(t, e, user).(type) {
		case rueidisConn:
			l, err = NewLimiter(c.c, cfg)
		case goredisConn:
			l, err = NewLimiterGoRedis(c.c, cfg)
		}
		if err != nil {
			t.Fatalf("NewLimiter as a user granted exactly RequiredACL: %v", err)
		}
		keys := []string{"a", "b", "c", "d", "e", "f"}
		for _, k := range keys {
			if d, err := l.AllowN(ctx, k, 3); err != nil || !d.Allowed {
				t.Fatalf("AllowN(%q, 3) = %+v, %v", k, d, err)
			}
		}
		e.doAll(t, "FUNCTION", "FLUSH")
		for _, k := range keys {
			for i, want := range []bool{true, true, false} {
				d, err := l.AllowN(ctx, k, 1)
				if err != nil || d.Allowed != want {
					t.Fatalf("after FUNCTION FLUSH: AllowN(%q, 1) #%d = %+v, %v; want allowed %v (3 of 5 taken before)", k, i, d, err, want)
				}
			}
		}
		for _, k := range l.Sketch().Keys() {
			e.do(t, "DEL", k)
		}
	})
}
