package redis

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// audit83Proxy forwards to addr, delaying every server->client chunk by d
// (a slow network: each round trip takes at least d).
func audit83Proxy(t *testing.T, addr string, d time.Duration) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(s)
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(s, c); s.Close() }()
			go func() {
				defer wg.Done()
				buf := make([]byte, 1<<16)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						time.Sleep(d)
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestAudit83FixedCheckPoolTimeout: over a network with a 20 ms round
// trip, every single call takes about 20-60 ms, well within Config.Timeout
// = 300 ms, so a sequential check passes; Check's 64 concurrent calls on a
// go-redis client with PoolSize 1 queue for the one connection and the
// later ones passed their own Timeout while waiting, so Check failed.
// Fixed in stop 49: with go-redis, Check runs at most PoolSize calls at
// once (conn.concurrent).
func TestAudit83FixedCheckPoolTimeout(t *testing.T) {
	srv := startServer(t)
	px := audit83Proxy(t, srv.addr(), 20*time.Millisecond)
	for _, pool := range []int{64, 1} {
		c := goredis.NewClient(&goredis.Options{Addr: px, ContextTimeoutEnabled: true, PoolSize: pool})
		s, err := NewGoRedis(c, Config{Name: "a83pool", Shards: 130, Levels: 1, CellsPerLevel: 4, Hi: 1e9, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		// Sequentially, every shard one after the other (the pre-change
		// loop): each call alone is within Timeout.
		if pool == 1 {
			for i := range s.keys {
				c2, cancel := s.bound(context.Background())
				_, err := s.checkOp(c2, s.keys[i])
				cancel()
				if err != nil {
					t.Fatalf("shard %d alone: %v", i, err)
				}
			}
		}
		err = s.Check(context.Background())
		c.Close()
		if err != nil {
			t.Errorf("go-redis PoolSize %d, a 20 ms round trip, Timeout 300 ms, 130 shards: Check: %v; want nil: each call alone is within Timeout (config.go: Timeout bounds each call; check.go: checkShards reports what one call after the other would)", pool, err)
		}
	}
}
