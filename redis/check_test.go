package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// TestEvictionPolicyChecked: at start-up the Limiter reads every node's
// maxmemory-policy: allkeys-* is refused with ErrEvictionPolicy naming the
// node and the policy (CheckRefuse, the default), or logged (CheckWarn),
// or not looked at (CheckSkip); noeviction and volatile-* pass.
func TestEvictionPolicyChecked(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		node := e.nodes()[len(e.nodes())-1]
		defer rawDo(node.addr(), "CONFIG", "SET", "maxmemory-policy", "noeviction")
		for _, policy := range []string{"noeviction", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random"} {
			t.Run(policy, func(t *testing.T) {
				if _, err := rawDo(node.addr(), "CONFIG", "SET", "maxmemory-policy", policy); err != nil {
					t.Fatal(err)
				}
				unsafe := strings.HasPrefix(policy, "allkeys-")
				cfg := LimiterConfig{Name: e.ns("evict"), Limit: PerSecond(1, 10)}
				_, err := e.newLimiter(t, cfg)
				if unsafe != errors.Is(err, ErrEvictionPolicy) {
					t.Fatalf("NewLimiter under %s: %v; want ErrEvictionPolicy: %v", policy, err, unsafe)
				}
				if unsafe && (!strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), node.addr())) {
					t.Fatalf("error %q does not name the policy and the node %s", err, node.addr())
				}
				if !unsafe && err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				cfg.ServerCheck, cfg.Logger = CheckWarn, slog.New(slog.NewTextHandler(&buf, nil))
				l, err := e.newLimiter(t, cfg)
				if err != nil || l == nil {
					t.Fatalf("CheckWarn: NewLimiter = %v, %v; want a limiter", l, err)
				}
				if logged := strings.Contains(buf.String(), "maxmemory-policy") && strings.Contains(buf.String(), "level=WARN"); logged != unsafe {
					t.Fatalf("CheckWarn under %s logged %q; want a warning: %v", policy, buf.String(), unsafe)
				}
				cfg.ServerCheck, cfg.Logger = CheckSkip, nil
				if _, err := e.newLimiter(t, cfg); err != nil {
					t.Fatalf("CheckSkip: %v", err)
				}
			})
		}
	})
}

// TestEvictionPolicies shows why: with memory full of other keys,
// volatile-lru evicts only keys with a TTL, and the sketch (no TTL) keeps
// its debts, so an exhausted key stays denied; allkeys-lru evicts the
// sketch, and the exhausted key is admitted again.
func TestEvictionPolicies(t *testing.T) {
	for _, policy := range []string{"volatile-lru", "allkeys-lru"} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t, "rueidis", "standalone")
			addr := e.srv.addr()
			l := e.limiter(t, LimiterConfig{Name: "ev", Limit: PerSecond(1e-3, 5), CellsPerLevel: 1000, ServerCheck: CheckWarn,
				Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
			ctx := context.Background()
			for range 5 {
				if d, err := l.Allow(ctx, "abuser"); err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v", d, err)
				}
			}
			if d, _ := l.Allow(ctx, "abuser"); d.Allowed {
				t.Fatal("admitted over Burst")
			}
			// LRU idle times have a resolution of one second: a filler
			// written in the sketch's second ties with it, and the LRU
			// may evict fillers alone. Wait until the sketch is strictly
			// the least recently used key (OBJECT IDLETIME does not touch).
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				idle, err := rawDo(addr, "OBJECT", "IDLETIME", "{ev}:g")
				if err != nil {
					t.Fatal(err)
				}
				if idle.(int64) >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("OBJECT IDLETIME {ev}:g = %v after 10s; want 2", idle)
				}
			}
			info, _ := rawDo(addr, "INFO", "memory")
			used, _ := infoField(info.(string), "used_memory")
			var limit int64
			fmt.Sscan(used, &limit)
			limit += 2 << 20
			for _, args := range [][]string{{"CONFIG", "SET", "maxmemory-policy", policy}, {"CONFIG", "SET", "maxmemory", fmt.Sprint(limit)}} {
				if _, err := rawDo(addr, args...); err != nil {
					t.Fatal(err)
				}
			}
			// 10 MiB of other keys, each with a TTL, against a 2 MiB budget.
			val := strings.Repeat("x", 100<<10)
			for i := range 100 {
				if _, err := rawDo(addr, "SET", fmt.Sprint("filler:", i), val, "EX", "3600"); err != nil {
					t.Fatalf("SET filler %d: %v", i, err)
				}
			}
			n, _ := rawDo(addr, "EXISTS", "{ev}:g")
			d, err := l.Allow(ctx, "abuser")
			if err != nil {
				t.Fatal(err)
			}
			switch policy {
			case "volatile-lru":
				if n != int64(1) || d.Allowed {
					t.Fatalf("volatile-lru: sketch exists %v, exhausted key admitted %v; want kept and denied", n, d.Allowed)
				}
			default:
				if n != int64(0) || !d.Allowed {
					t.Fatalf("allkeys-lru: sketch exists %v, exhausted key admitted %v; want evicted and admitted again", n, d.Allowed)
				}
			}
		})
	}
}

// TestNoFunctions: a server without Redis Functions (Redis before 7.0,
// emulated by renaming FCALL and FUNCTION away, or only one of them) gets
// ErrNoFunctions, naming the cause, from NewLimiter, Check and a call; the
// Limiter's policy decides such a call.
func TestNoFunctions(t *testing.T) {
	for _, renamed := range [][]string{{"FCALL", "FUNCTION"}, {"FCALL"}, {"FUNCTION"}} {
		for _, lib := range []string{"rueidis", "go-redis"} {
			t.Run(strings.Join(renamed, "+")+"/"+lib, func(t *testing.T) {
				var extra []string
				for _, c := range renamed {
					extra = append(extra, "--rename-command", c, "")
				}
				e := newEnv(t, lib, "standalone", extra...)
				cfg := LimiterConfig{Name: "nofn", Limit: PerSecond(1, 10), Policy: FailOpen}
				_, err := e.newLimiter(t, cfg)
				if !errors.Is(err, ErrNoFunctions) || !strings.Contains(err.Error(), "Redis 7.0") || !strings.Contains(strings.ToLower(err.Error()), "unknown command") {
					t.Fatalf("NewLimiter: %v; want ErrNoFunctions naming the unknown command and Redis 7.0", err)
				}
				cfg.ServerCheck = CheckSkip
				l := e.limiter(t, cfg)
				d, err := l.Allow(context.Background(), "k")
				if !errors.Is(err, ErrNoFunctions) || !errors.Is(err, ErrDegraded) || !d.Allowed {
					t.Fatalf("Allow = %+v, %v; want FailOpen's admission with ErrDegraded wrapping ErrNoFunctions", d, err)
				}
				s := e.sketch(t, Config{Name: "nofn2", Hi: 10})
				if err := s.Update(context.Background(), "k", 1); !errors.Is(err, ErrNoFunctions) {
					t.Fatalf("Update: %v; want ErrNoFunctions", err)
				}
				if err := s.Check(context.Background()); !errors.Is(err, ErrNoFunctions) {
					t.Fatalf("Check: %v; want ErrNoFunctions", err)
				}
			})
		}
	}
}

// aclEnv is a standalone server with ACL users, and clients that log in
// as them.
func aclClient(t *testing.T, e *env, user string) conn {
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
		c := goredis.NewClient(&goredis.Options{Addr: e.seeds()[0], Username: user, Password: "pw", ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return goredisConn{c}
	}
}

func limiterAs(t *testing.T, e *env, user string, cfg LimiterConfig) (*Limiter, error) {
	switch c := aclClient(t, e, user).(type) {
	case rueidisConn:
		return NewLimiter(c.c, cfg)
	case goredisConn:
		return NewLimiterGoRedis(c.c, cfg)
	}
	panic("unreachable")
}

// connectionACL is what the client libraries send on their own.
const connectionACL = "+@connection +cluster|slots +cluster|shards"

// TestACL: a user granted exactly RequiredACL (and the libraries'
// connection commands) runs the Limiter; a user missing one of them gets
// ErrPermission naming what is missing, from NewLimiter's check and from a
// call.
func TestACL(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		addr := e.srv.addr()
		acl := strings.ReplaceAll(RequiredACL, "{Name", "{acl")
		users := map[string]string{
			"full":      acl,
			"infoonly":  strings.ReplaceAll(acl, "+config|get", "+info"),
			"noconfig":  strings.ReplaceAll(acl, " +config|get", ""),
			"fcallonly": "+fcall ~{acl}*",
			"noload":    strings.ReplaceAll(acl, "+function|load ", ""),
			"nosetrng":  strings.ReplaceAll(acl, "+setrange ", ""),
			"nokeys":    strings.ReplaceAll(acl, "~{acl}*", "~other*"),
			"readonly":  strings.ReplaceAll(acl, "~{acl}*", "%R~{acl}*"),
		}
		for u, rules := range users {
			args := append([]string{"ACL", "SETUSER", u, "on", ">pw"}, strings.Fields(rules+" "+connectionACL)...)
			if r, err := rawDo(addr, args...); err != nil || r != "OK" {
				t.Fatalf("%v: %v, %v", args, r, err)
			}
		}
		cfg := LimiterConfig{Name: "acl", Limit: PerSecond(1e-3, 10)}
		ctx := context.Background()
		allow := func(l *Limiter) error { _, err := l.Allow(ctx, "k"); return err }

		for _, u := range []string{"full", "infoonly"} {
			l, err := limiterAs(t, e, u, cfg)
			if err != nil {
				t.Fatalf("%s: NewLimiter: %v", u, err)
			}
			if err := allow(l); err != nil {
				t.Fatalf("%s: Allow: %v", u, err)
			}
		}
		tests := []struct {
			user string
			want []string // in the error
		}{
			{"noconfig", []string{"cannot read maxmemory-policy", "CONFIG GET", "INFO"}},
			{"nosetrng", []string{"SETRANGE {acl}:g"}},
			{"readonly", []string{"may not read and write the sketch's keys {acl}:g"}},
			{"nokeys", []string{"may not read and write the sketch's keys {acl}:g"}},
		}
		for _, tt := range tests {
			_, err := limiterAs(t, e, tt.user, cfg)
			if !errors.Is(err, ErrPermission) {
				t.Fatalf("%s: NewLimiter: %v; want ErrPermission", tt.user, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%s: NewLimiter: %q does not name %q", tt.user, err, w)
				}
			}
		}
		// A call denied inside the function names the commands too.
		c := cfg
		c.ServerCheck = CheckSkip
		l, err := limiterAs(t, e, "nosetrng", c)
		if err != nil {
			t.Fatal(err)
		}
		if err := allow(l); !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "SETRANGE {acl}:g") {
			t.Fatalf("nosetrng: Allow: %v; want ErrPermission naming SETRANGE", err)
		}
		// Without FUNCTION LOAD: fine while the library is loaded, named
		// when it is not.
		if _, err := rawDo(addr, "FUNCTION", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"noload", "fcallonly"} {
			_, err := limiterAs(t, e, u, cfg)
			if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "FUNCTION|LOAD") {
				t.Fatalf("%s without the library: NewLimiter: %v; want ErrPermission naming FUNCTION|LOAD", u, err)
			}
		}
		name, code := Library()
		if r, err := rawDo(addr, "FUNCTION", "LOAD", code); err != nil || r != name {
			t.Fatalf("FUNCTION LOAD (an administrator) = %v, %v; want %s", r, err, name)
		}
		l, err = limiterAs(t, e, "noload", cfg)
		if err != nil {
			t.Fatalf("noload with the library loaded: NewLimiter: %v", err)
		}
		if err := allow(l); err != nil {
			t.Fatalf("noload: Allow: %v", err)
		}
		_, err = limiterAs(t, e, "fcallonly", cfg)
		if !errors.Is(err, ErrPermission) {
			t.Fatalf("fcallonly: NewLimiter: %v; want ErrPermission", err)
		}
		for _, w := range []string{"TIME", "GETRANGE {acl}:g", "SETRANGE {acl}:g"} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("fcallonly: NewLimiter: %q does not name %q", err, w)
			}
		}
	})
}

// TestCheckStringSize: a generation's string above a node's
// proto-max-bulk-len fails every write (SETRANGE refuses it), so Check
// reports it as ErrInvalidConfig naming the sizes, and NewLimiter refuses
// it (CheckRefuse); one that fits, or the same cells split over Shards,
// passes. The server runs with the smallest limit Redis accepts (1 MiB).
func TestCheckStringSize(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) { checkStringSize(t, newEnv(t, lib, "standalone", "--proto-max-bulk-len", "1mb")) })
	}
}

func checkStringSize(t *testing.T, e *env) {
	ctx := context.Background()
	const limit = 1 << 20
	// 40 + 4 x 40000 x 8 = 1,280,040 bytes: above 1 MiB.
	big := e.sketch(t, Config{Name: "size", Levels: 4, CellsPerLevel: 40000, Hi: 1e9})
	if err := big.Update(ctx, "k", 1); err == nil {
		t.Fatal("a write to a string above proto-max-bulk-len succeeded; the check guards nothing")
	}
	err := big.Check(ctx)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Check of a 1,280,040-byte string under a 1 MiB limit: %v; want ErrInvalidConfig", err)
	}
	for _, want := range []string{"1280040", fmt.Sprint(limit), "proto-max-bulk-len", e.srv.addr(), "Shards"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check's error %q does not name %q", err, want)
		}
	}
	for _, cfg := range []Config{
		{Name: "fits", Levels: 4, CellsPerLevel: 30000, Hi: 1e9},             // 960,040 bytes
		{Name: "split", Levels: 4, CellsPerLevel: 20000, Shards: 2, Hi: 1e9}, // 640,040 per shard
	} {
		s := e.sketch(t, cfg)
		if err := s.Check(ctx); err != nil {
			t.Fatalf("Check(%+v): %v", cfg, err)
		}
		if err := s.Update(ctx, "k", 1); err != nil {
			t.Fatalf("Update on %+v: %v", cfg, err)
		}
	}
	if _, err := e.newLimiter(t, LimiterConfig{Name: "lsize", Limit: PerSecond(1, 10), CellsPerLevel: 40000}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewLimiter with a string above proto-max-bulk-len: %v; want ErrInvalidConfig", err)
	}
}
