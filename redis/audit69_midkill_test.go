package redis

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// TestAudit69KilledMidRequest: calls in flight when the server is
// SIGKILLed (held in the server by DEBUG SLEEP from another connection,
// so they are sent and unanswered): every Limiter call returns its
// policy's decision with ErrDegraded (FailClosed denies, FailOpen admits,
// LocalFallback decides locally), by the connection's loss, not by its
// 10 s deadline (Timeouts stays 0, no error matches a deadline); every
// Sketch call (Update, UpdateAndQuery, Query, TryUpdate) returns an
// error, and none panics. Both clients. Then the server restarts on the
// same port (no persistence): the limiters recover (Degraded false) and
// the sketches answer again (the library reloaded).
func TestAudit69KilledMidRequest(t *testing.T) {
	srv := startServer(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	gc := goredis.NewClient(&goredis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { gc.Close() })
	type lim struct {
		name string
		pol  Policy
		l    *Limiter
	}
	var ls []lim
	var sks []*Sketch
	for _, lib := range []string{"rueidis", "go-redis"} {
		for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
			cfg := LimiterConfig{Name: "a69mk:" + lib + ":" + pol.String(), Limit: PerSecond(1, 5), Policy: pol,
				Instances: 2, Timeout: 10 * time.Second, CellsPerLevel: 1024}
			var l *Limiter
			if lib == "rueidis" {
				l, err = NewLimiter(rc, cfg)
			} else {
				l, err = NewLimiterGoRedis(gc, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, lim{lib + "/" + pol.String(), pol, l})
		}
		scfg := Config{Name: "a69mks:" + lib, Hi: 1e9, CellsPerLevel: 1024, Timeout: 10 * time.Second}
		var s *Sketch
		if lib == "rueidis" {
			s, err = New(rc, scfg)
		} else {
			s, err = NewGoRedis(gc, scfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		sks = append(sks, s)
	}
	ctx := context.Background()
	for _, x := range ls { // warm: connections open, library loaded
		if _, err := x.l.Allow(ctx, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sks {
		if err := s.Update(ctx, "warm", 1); err != nil {
			t.Fatal(err)
		}
	}
	sleepDone := make(chan struct{})
	go func() { rawDo(srv.addr(), "DEBUG", "SLEEP", "30"); close(sleepDone) }()
	time.Sleep(200 * time.Millisecond) // the server is asleep: what is sent now waits
	var wg sync.WaitGroup
	type res struct {
		d   Decision
		err error
		el  time.Duration
	}
	lres := make([]res, len(ls))
	serrs := make([][4]error, len(sks))
	start := time.Now()
	for i, x := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: AllowN panicked with the server killed mid-request: %v", x.name, r)
				}
			}()
			d, err := x.l.Allow(ctx, "k")
			lres[i] = res{d, err, time.Since(start)}
		}()
	}
	for i, s := range sks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("sketch %d: a call panicked with the server killed mid-request: %v", i, r)
				}
			}()
			var w sync.WaitGroup
			w.Add(4)
			go func() { defer w.Done(); serrs[i][0] = s.Update(ctx, "k", 1) }()
			go func() { defer w.Done(); _, serrs[i][1] = s.UpdateAndQuery(ctx, "k", 1) }()
			go func() { defer w.Done(); _, serrs[i][2] = s.Query(ctx, "k") }()
			go func() { defer w.Done(); _, serrs[i][3] = s.TryUpdate(ctx, "k", 1, 10) }()
			w.Wait()
		}()
	}
	time.Sleep(300 * time.Millisecond) // the calls are sent and waiting
	srv.kill()
	<-sleepDone
	wg.Wait()
	for i, x := range ls {
		r := lres[i]
		if !errors.Is(r.err, ErrDegraded) {
			t.Errorf("%s: killed mid-request: %+v, %v; want ErrDegraded", x.name, r.d, r.err)
			continue
		}
		if errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, os.ErrDeadlineExceeded) || x.l.Stats().Timeouts != 0 {
			t.Errorf("%s: killed mid-request: decided by the deadline (%v, stats %+v), not by the lost connection", x.name, r.err, x.l.Stats())
		}
		if x.pol == FailOpen && !r.d.Allowed || x.pol == FailClosed && r.d.Allowed || x.pol == LocalFallback && !r.d.Allowed {
			t.Errorf("%s: killed mid-request: decision %+v is not the policy's", x.name, r.d)
		}
		if !x.l.Degraded() {
			t.Errorf("%s: Degraded() false after the failed call", x.name)
		}
	}
	for i := range sks {
		for j, err := range serrs[i] {
			if err == nil {
				t.Errorf("sketch %d call %d: no error with the server killed mid-request", i, j)
			}
		}
	}
	srv.start()
	deadline := time.Now().Add(8 * time.Second)
	for _, x := range ls {
		for {
			_, err := x.l.Allow(ctx, "after")
			if err == nil && !x.l.Degraded() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no recovery after the restart: %v", x.name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i, s := range sks {
		for {
			v, err := s.UpdateAndQuery(ctx, "after", 2)
			if err == nil {
				if v != 2 {
					t.Errorf("sketch %d after the restart: UpdateAndQuery(after, 2) = %v on a fresh server, want 2", i, v)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sketch %d: no recovery after the restart: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
