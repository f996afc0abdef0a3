package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// audit75Conn is a client of e's library and topology logged in as user.
func audit75Conn(t *testing.T, e *env, user string) conn {
	t.Helper()
	switch e.lib {
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: e.seeds(), DisableCache: true, Username: user, Password: "pw"})
		if err != nil {
			t.Fatalf("rueidis.NewClient as %s: %v", user, err)
		}
		t.Cleanup(c.Close)
		return rueidisConn{c}
	default:
		var c goredis.UniversalClient
		if e.cluster != nil {
			c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: e.seeds(), Username: user, Password: "pw", ContextTimeoutEnabled: true})
		} else {
			c = goredis.NewClient(&goredis.Options{Addr: e.seeds()[0], Username: user, Password: "pw", ContextTimeoutEnabled: true})
		}
		t.Cleanup(func() { c.Close() })
		return goredisConn{c}
	}
}

// audit75Grant makes user on every node of e with exactly RequiredACL
// (Name substituted) and the libraries' connection commands.
func audit75Grant(t *testing.T, e *env, user, name string) string {
	t.Helper()
	// RequiredACL: "Name stands for Config.Name, with the glob characters
	// * ? [ ] and \ in it escaped by a backslash" (stop 48).
	esc := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(name)
	acl := strings.ReplaceAll(RequiredACL, "{Name", "{"+esc)
	args := append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw"}, strings.Fields(acl)...)
	args = append(args, strings.Fields(connectionACL)...)
	e.doAll(t, args...)
	t.Cleanup(func() {
		for _, n := range e.nodes() {
			rawDo(n.addr(), "ACL", "DELUSER", user)
		}
	})
	return acl
}

// TestAudit75ACLExactGrant: a user granted exactly RequiredACL (Name
// substituted) runs sketches (plain and rotating) and limiters, sharded
// and not, on both clients, standalone and in the cluster: New's and
// NewLimiter's default check passes and every call succeeds.
func TestAudit75ACLExactGrant(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, e *env) {
		name := e.ns("a75acl")
		user := fmt.Sprintf("a75u%d", e.seq)
		acl := audit75Grant(t, e, user, name)
		for _, shards := range []uint32{1, 3} {
			for _, rot := range []bool{false, true} {
				cfg := Config{Name: name, Shards: shards, Levels: 2, CellsPerLevel: 64, Hi: 100, Decay: decay.Linear(1)}
				if rot {
					cfg.Period, cfg.Generations = time.Hour, 3
				}
				var s *Sketch
				var err error
				switch c := audit75Conn(t, e, user).(type) {
				case rueidisConn:
					s, err = New(c.c, cfg)
				case goredisConn:
					s, err = NewGoRedis(c.c, cfg)
				}
				if err == nil {
					err = s.Check(ctx)
				}
				for i := 0; err == nil && i < 12; i++ {
					k := fmt.Sprintf("k%d", i)
					if _, err = s.UpdateAndQuery(ctx, k, 1); err == nil {
						if _, err = s.TryUpdate(ctx, k, 1, 50); err == nil {
							_, err = s.Query(ctx, k)
						}
					}
				}
				if err != nil {
					t.Fatalf("sketch Shards %d rotating %v, user granted exactly %q: %v", shards, rot, acl, err)
				}
				// Deleted (as admin) so the next configuration can reuse Name.
				for _, k := range s.Keys() {
					e.do(t, "DEL", k)
				}
			}
			lc := LimiterConfig{Name: name, Limit: PerSecond(1, 10), Shards: shards, Levels: 2, CellsPerLevel: 64}
			var l *Limiter
			var err error
			switch c := audit75Conn(t, e, user).(type) {
			case rueidisConn:
				l, err = NewLimiter(c.c, lc)
			case goredisConn:
				l, err = NewLimiterGoRedis(c.c, lc)
			}
			for i := 0; err == nil && i < 12; i++ {
				_, err = l.AllowN(ctx, fmt.Sprintf("u%d", i), 2)
			}
			if err != nil {
				t.Fatalf("limiter Shards %d, user granted exactly %q: %v", shards, acl, err)
			}
			for _, k := range l.Sketch().Keys() {
				e.do(t, "DEL", k)
			}
		}
	})
}

// TestAudit75FixedACLNameGlob: Config.Name may be any non-empty string
// without braces, and RequiredACL is documented with "Name stands for
// Config.Name"; but an ACL key pattern is a glob: a Name holding '[' ']'
// (or '\\') makes "~{Name}*" match other keys than the sketch's, so a user
// granted exactly RequiredACL with Name substituted is refused.
func TestAudit75FixedACLNameGlob(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone")
			for i, name := range []string{"api[v2]", `tenant\x`} {
				user := fmt.Sprintf("glob%d", i)
				acl := audit75Grant(t, e, user, name)
				lc := LimiterConfig{Name: name, Limit: PerSecond(1, 10), Levels: 2, CellsPerLevel: 64}
				var l *Limiter
				var err error
				switch c := audit75Conn(t, e, user).(type) {
				case rueidisConn:
					l, err = NewLimiter(c.c, lc)
				case goredisConn:
					l, err = NewLimiterGoRedis(c.c, lc)
				}
				if err == nil {
					_, err = l.Allow(ctx, "k")
				}
				if err != nil {
					t.Errorf("Name %q: a user granted exactly RequiredACL with Name substituted (%s): %v.\n"+
						"check.go RequiredACL: \"in ACL SETUSER syntax (Name stands for Config.Name)\"; config.go Name: \"Must be non-empty and contain no braces\"; "+
						"docs/distributed.md: \"`~{Name}* ~{Name:*` ... the sketch's keys\". Expected the grant to cover the sketch's keys (or Name to refuse glob characters, or the docs to say to escape them); got a refusal",
						name, acl, err)
				}
			}
		})
	}
}
