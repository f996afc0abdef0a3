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

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit74Offline is a go-redis client on a port nothing listens on: New
// and NewLimiter (CheckSkip) never dial, so configuration checks need no
// server.
func audit74Offline(t *testing.T) goredis.UniversalClient {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func audit74Exists(t *testing.T, addr, key string) int64 {
	t.Helper()
	r, err := rawDo(addr, "EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := r.(int64)
	return n
}

// TestAudit74BoundaryExact: Redis's SETRANGE accepts a string of exactly
// proto-max-bulk-len bytes and refuses one byte more; Check must agree
// (size > limit, not >=). 1 MiB server: 40 + 3 x 43689 x 8 = 1,048,576.
func TestAudit74BoundaryExact(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone", "--proto-max-bulk-len", "1mb")
			if v, err := rawDo(e.srv.addr(), "CONFIG", "GET", "proto-max-bulk-len"); err != nil || fmt.Sprint(v) != "[proto-max-bulk-len 1048576]" {
				t.Fatalf("CONFIG GET proto-max-bulk-len: %v, %v", v, err)
			}
			at := e.sketch(t, Config{Name: "at", Levels: 3, CellsPerLevel: 43689, Hi: 1e9})
			if got := at.stringBytes(); got != 1<<20 {
				t.Fatalf("stringBytes = %d; want 1048576", got)
			}
			if err := at.Check(ctx); err != nil {
				t.Fatalf("Check of a string of exactly proto-max-bulk-len: %v; want nil", err)
			}
			if err := at.Update(ctx, "k", 1); err != nil {
				t.Fatalf("Update of a string of exactly proto-max-bulk-len: %v (Redis accepts size == limit)", err)
			}
			if r, err := rawDo(e.srv.addr(), "STRLEN", "{at}:g"); err != nil || r != int64(1<<20) {
				t.Fatalf("STRLEN {at}:g = %v, %v; docs: 40 + L x M x 8 = 1048576", r, err)
			}
			over := e.sketch(t, Config{Name: "over", Levels: 3, CellsPerLevel: 43690, Hi: 1e9}) // 1,048,600
			err := over.Check(ctx)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "1048600") {
				t.Fatalf("Check of a 1,048,600-byte string under 1 MiB: %v; want ErrInvalidConfig naming 1048600", err)
			}
			if audit74Exists(t, e.srv.addr(), "{over}:g") != 0 {
				t.Fatal("Check wrote the sketch's string; its doc: \"It writes nothing but the library\"")
			}
			uerr := over.Update(ctx, "k", 1)
			if uerr == nil {
				t.Fatal("Update of a string above proto-max-bulk-len succeeded")
			}
			t.Logf("the error a write to a too-large string gives: %v (ErrInvalidConfig: %v)", uerr, errors.Is(uerr, ErrInvalidConfig))
			// proto-max-bulk-len cannot go below 1 MiB (docs: "at least 1 MiB").
			if r, err := rawDo(e.srv.addr(), "CONFIG", "SET", "proto-max-bulk-len", "1048575"); err == nil && r == "OK" {
				t.Fatal("CONFIG SET proto-max-bulk-len 1048575 accepted; docs say at least 1 MiB")
			}
		})
	}
}

// TestAudit74DefaultBulk: a fresh server's proto-max-bulk-len is 512 MiB
// (docs), and Check's boundary there, computed without writing anything.
func TestAudit74DefaultBulk(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "rueidis", "standalone")
	if v, err := rawDo(e.srv.addr(), "CONFIG", "GET", "proto-max-bulk-len"); err != nil || fmt.Sprint(v) != fmt.Sprintf("[proto-max-bulk-len %d]", defaultMaxBulk) || defaultMaxBulk != 512<<20 {
		t.Fatalf("CONFIG GET proto-max-bulk-len: %v, %v; defaultMaxBulk %d", v, err, defaultMaxBulk)
	}
	// 40 + 8 x 8388607 x 8 = 536,870,888 fits; 8 x 8388608 = 536,870,952 does not.
	if err := e.sketch(t, Config{Name: "fit", Levels: 8, CellsPerLevel: 8388607, Hi: 1e9}).Check(ctx); err != nil {
		t.Fatalf("Check of 536,870,888 bytes under 512 MiB: %v", err)
	}
	err := e.sketch(t, Config{Name: "big", Levels: 8, CellsPerLevel: 8388608, Hi: 1e9}).Check(ctx)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "536870952") || !strings.Contains(err.Error(), "536870912") {
		t.Fatalf("Check of 536,870,952 bytes under 512 MiB: %v", err)
	}
	if audit74Exists(t, e.srv.addr(), "{big}:g")+audit74Exists(t, e.srv.addr(), "{fit}:g") != 0 {
		t.Fatal("Check created a sketch string")
	}
}

// TestAudit74InfoOnlyACL: a user with +info but no +config|get: the
// default 512 MiB is assumed (documented), so a string above it is
// refused and one below passes, even on a 1 MiB server (documented
// limitation: Check cannot see the lower limit).
func TestAudit74InfoOnlyACL(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			for _, srvLimit := range []string{"512mb", "1mb"} {
				e := newEnv(t, lib, "standalone", "--proto-max-bulk-len", srvLimit)
				acl := strings.ReplaceAll(RequiredACL, "{Name}", "{a74}")
				acl = strings.ReplaceAll(acl, "+config|get", "+info")
				args := append([]string{"ACL", "SETUSER", "infoonly", "on", ">pw"}, strings.Fields(acl+" "+connectionACL)...)
				if r, err := rawDo(e.srv.addr(), args...); err != nil || r != "OK" {
					t.Fatalf("%v: %v %v", args, r, err)
				}
				mk := func(m uint32) *Sketch {
					s, err := newSketch(aclClient(t, e, "infoonly"), Config{Name: "a74", Levels: 8, CellsPerLevel: m, Hi: 1e9})
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				err := mk(8388608).Check(ctx)
				if !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "default proto-max-bulk-len") {
					t.Fatalf("%s: Check as +info user, string above 512 MiB: %v; want ErrInvalidConfig naming the default", srvLimit, err)
				}
				small := mk(20000) // 1,280,040 bytes: above 1 MiB, below 512 MiB
				err = small.Check(ctx)
				if err != nil {
					t.Fatalf("%s: Check as +info user, 1,280,040 bytes: %v (docs: the default is assumed without CONFIG GET)", srvLimit, err)
				}
				if audit74Exists(t, e.srv.addr(), "{a74}:g") != 0 {
					t.Fatal("Check created the string")
				}
				if _, err := limiterAs(t, e, "infoonly", LimiterConfig{Name: "a74", Limit: PerSecond(1, 10), Levels: 8, CellsPerLevel: 8388608}); !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("%s: NewLimiter as +info user, string above 512 MiB: %v; want ErrInvalidConfig", srvLimit, err)
				}
			}
		})
	}
}

// TestAudit74ClusterOneNodeLower: in a cluster one node has a 1 MiB
// limit, the others 512 MiB: Check reports that node (whether or not it
// holds the sketch's slot), naming its address and not the others'.
func TestAudit74ClusterOneNodeLower(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "cluster")
			name := e.ns("a74c")
			s := e.sketch(t, Config{Name: name, Levels: 4, CellsPerLevel: 40000, Hi: 1e9}) // 1,280,040
			if err := s.Check(ctx); err != nil {
				t.Fatalf("Check before any node is lowered: %v", err)
			}
			owner := e.nodeOf(t, s.Keys()[0])
			for _, low := range e.nodes() {
				if _, err := rawDo(low.addr(), "CONFIG", "SET", "proto-max-bulk-len", "1mb"); err != nil {
					t.Fatal(err)
				}
				err := s.Check(ctx)
				if _, rerr := rawDo(low.addr(), "CONFIG", "SET", "proto-max-bulk-len", "512mb"); rerr != nil {
					t.Fatal(rerr)
				}
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), low.addr()) {
					t.Fatalf("Check with %s (owner %v) at 1 MiB: %v; want ErrInvalidConfig naming it", low.addr(), low == owner, err)
				}
				for _, n := range e.nodes() {
					if n != low && strings.Contains(err.Error(), n.addr()) {
						t.Fatalf("Check names %s, whose limit is 512 MiB: %v", n.addr(), err)
					}
				}
			}
			if audit74Exists(t, owner.addr(), s.Keys()[0]) != 0 {
				t.Fatal("Check created the string")
			}
		})
	}
}

// TestAudit74WarnSkip: CheckWarn logs the size error and returns the
// limiter; CheckSkip neither checks nor logs; the limiter then fails its
// calls (every write is refused by the server) by its Policy.
func TestAudit74WarnSkip(t *testing.T) {
	ctx := context.Background()
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone", "--proto-max-bulk-len", "1mb")
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			cfg := LimiterConfig{Name: "w", Limit: PerSecond(1, 10), CellsPerLevel: 40000, Logger: log}
			if _, err := e.newLimiter(t, cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("CheckRefuse: %v", err)
			}
			cfg.ServerCheck = CheckWarn
			l, err := e.newLimiter(t, cfg)
			if err != nil || l == nil {
				t.Fatalf("CheckWarn: %v, %v; want the limiter", l, err)
			}
			if !strings.Contains(buf.String(), "1280040") || !strings.Contains(buf.String(), "proto-max-bulk-len") {
				t.Fatalf("CheckWarn's log %q does not name the sizes", buf.String())
			}
			buf.Reset()
			cfg.ServerCheck = CheckSkip
			l2, err := e.newLimiter(t, cfg)
			if err != nil || buf.Len() != 0 {
				t.Fatalf("CheckSkip: %v, log %q", err, buf.String())
			}
			for _, lim := range []*Limiter{l, l2} {
				d, err := lim.Allow(ctx, "k")
				if err == nil || d.Allowed {
					t.Fatalf("Allow on a sketch too large for the server: %+v, %v; want a failure", d, err)
				}
				t.Logf("Allow's error: %v", err)
			}
			if audit74Exists(t, e.srv.addr(), "{w}:g") != 0 {
				t.Fatal("a too-large string exists")
			}
		})
	}
}

// TestAudit74Bounds: Shards 16384 and Generations 1024 are accepted, one
// more refused (Config and LimiterConfig); MemoryBytes at the largest
// accepted shape does not overflow.
func TestAudit74Bounds(t *testing.T) {
	c := audit74Offline(t)
	ok := []Config{
		{Name: "b", Hi: 1e9, Shards: 16384},
		{Name: "b", Hi: 1e9, Generations: 1024, Period: time.Second},
		{Name: "b", Hi: 1e9, Generations: 2, Period: time.Second},
	}
	for _, cfg := range ok {
		if _, err := NewGoRedis(c, cfg); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	bad := []Config{
		{Name: "b", Hi: 1e9, Shards: 16385},
		{Name: "b", Hi: 1e9, Shards: 1 << 31},
		{Name: "b", Hi: 1e9, Generations: 1025, Period: time.Second},
		{Name: "b", Hi: 1e9, Generations: 1, Period: time.Second},
		{Name: "b", Hi: 1e9, Generations: 1 << 31, Period: time.Second},
		{Name: "b", Hi: 1e9, Generations: 2},
	}
	for _, cfg := range bad {
		if _, err := NewGoRedis(c, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: %v; want ErrInvalidConfig", cfg, err)
		}
	}
	for _, sh := range []uint32{16384, 16385} {
		_, err := NewLimiterGoRedis(c, LimiterConfig{Name: "b", Limit: PerSecond(1, 10), Shards: sh, CellsPerLevel: 16, ServerCheck: CheckSkip})
		if (err == nil) != (sh == 16384) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Fatalf("LimiterConfig.Shards %d: %v", sh, err)
		}
	}
	l, err := NewLimiterGoRedis(c, LimiterConfig{Name: "b", Limit: PerSecond(1, 10), Shards: 7, Levels: 3, CellsPerLevel: 16, ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.sk.Config().Shards; got != 7 || len(l.sk.keys) != 7 {
		t.Fatalf("LimiterConfig.Shards 7 gave Config.Shards %d, %d shards", got, len(l.sk.keys))
	}
	// Largest string New accepts: L 8 x M 2^26 (the core's 4 GiB MaxBytes).
	s, err := NewGoRedis(c, Config{Name: "m", Hi: 1e9, Levels: 8, CellsPerLevel: 1 << 26, Shards: 16384})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.MemoryBytes(), int64(16384)*(40+8*(1<<26)*8); got != want || got <= 0 {
		t.Fatalf("MemoryBytes = %d; want %d", got, want)
	}
	// with Generations 1024 as well: 2^24 x (2^32 + 40).
	if got, want := int64(16384)*1024*(40+int64(8)*(1<<26)*8), int64(72057594709016576); got != want {
		t.Fatalf("arith %d %d", got, want)
	}
}

// TestAudit74BoundaryRebaseRotate: a string of exactly proto-max-bulk-len
// also survives a rebase (GETRANGE of the body, one SETRANGE of it back)
// and a rotation's reset (DEL, create), under a fake clock.
func TestAudit74BoundaryRebaseRotate(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "rueidis", "standalone", "--proto-max-bulk-len", "1mb")
	clk := sketchtest.NewFakeClock()
	for _, cfg := range []Config{
		{Name: "rb", Levels: 3, CellsPerLevel: 43689, Hi: 1e9, Clock: clk},
		{Name: "rot", Levels: 3, CellsPerLevel: 43689, Hi: 1e9, Clock: clk, Period: time.Second, Generations: 2},
	} {
		s := e.sketch(t, cfg)
		s.setRebaseAt(1000)
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
		var epochs []string
		for i := 0; i < 4; i++ {
			if err := s.Update(ctx, "k", 1); err != nil {
				t.Fatalf("%s: Update %d at the limit: %v", cfg.Name, i, err)
			}
			if cfg.Period == 0 {
				r, err := rawDo(e.srv.addr(), "GETRANGE", s.Keys()[0], "24", "31")
				if err != nil {
					t.Fatal(err)
				}
				epochs = append(epochs, fmt.Sprintf("%x", r))
			}
			clk.Advance(3 * time.Second)
		}
		if cfg.Period == 0 && epochs[0] == epochs[3] {
			t.Fatalf("no rebase happened: epochs %v", epochs)
		}
		for _, k := range s.Keys() {
			if r, err := rawDo(e.srv.addr(), "STRLEN", k); err != nil || r != int64(1<<20) {
				t.Fatalf("STRLEN %s = %v, %v", k, r, err)
			}
		}
	}
}
