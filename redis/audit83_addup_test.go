package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type audit83Case struct{ start, delta, lo, hi float64 }

// audit83Run writes start then delta on a one-level server sketch and on
// the local sketch (same Config, still clock) and returns both readings.
func audit83Run(t *testing.T, e *env, name string, c audit83Case, d decay.Decay, clk *sketchtest.FakeClock, advance int64) (srv, loc float64) {
	t.Helper()
	ctx := context.Background()
	rs := e.sketch(t, Config{Name: name, Levels: 1, CellsPerLevel: 4, Lo: c.lo, Hi: c.hi, Decay: d, Seed: 3, Clock: clk})
	ls, err := sketch.New(sketch.Config{Levels: 1, CellsPerLevel: 4, Lo: c.lo, Hi: c.hi, Decay: d, Seed: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Update(ctx, "k", c.start); err != nil {
		t.Fatal(err)
	}
	ls.Update([]byte("k"), c.start)
	clk.Advance(time.Duration(advance) * time.Millisecond)
	srv, err = rs.UpdateAndQuery(ctx, "k", c.delta)
	if err != nil {
		t.Fatal(err)
	}
	loc = ls.UpdateAndQuery([]byte("k"), c.delta)
	return srv, loc
}

// audit83Bounds: the least float32 at or above clamp(a+d, RoundUp(lo), RoundUp(hi)), exact (math/big).
func audit83Want(a, d, lo, hi float64) float64 {
	ex := new(big.Float).SetPrec(4000).Add(new(big.Float).SetPrec(4000).SetFloat64(a), new(big.Float).SetPrec(4000).SetFloat64(d))
	lo32 := audit83Up(big.NewFloat(lo))
	hi32 := audit83Up(big.NewFloat(hi))
	if ex.Cmp(big.NewFloat(lo32)) < 0 {
		return lo32
	}
	if ex.Cmp(big.NewFloat(hi32)) >= 0 {
		return hi32
	}
	return audit83Up(ex)
}

// audit83Up: least float32 >= x (x within the float32 range).
func audit83Up(x *big.Float) float64 {
	f, _ := x.Float32()
	if big.NewFloat(float64(f)).Cmp(x) < 0 {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	if f > math.MaxFloat32 {
		f = math.MaxFloat32
	}
	return float64(f)
}

// TestAudit83AddUpEdges: values agree with the local sketch and with the
// exact sum rounded up (math/big), on bounds no float32 holds, MaxFloat32,
// overflowing sums, subnormals and -2^k steps.
func TestAudit83AddUpEdges(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	cases := []audit83Case{
		{0.05, 0.05 + 0x1p-70, -0.1, 0.1},
		{-0.05, -0.05 - 0x1p-70, -0.1, 0.1},
		{-0.05, -0.0499999, -0.1, 0.1},
		{0.05, 0.0499999, -0.1, 0.1},
		{float64(float32(-0.1)), 0x1p-80, -0.1, 0.1},
		{-0.099999994, 0x1p-80, -0.1, 0.1},
		{0.099999994, 0x1p-80, -0.1, 0.1},
		{5e11, 5e11 + 1e-5, -1e12, 1e12},
		{-5e11, -5e11 - 1e-5, -1e12, 1e12},
		{999999995904, 1e-6, -1e12, 1e12},
		{-999999995904, 1e-6, -1e12, 1e12},
		{-999999995904, -1e-6, -1e12, 1e12},
		{math.MaxFloat32, math.MaxFloat64, -math.MaxFloat32, math.MaxFloat32},
		{-math.MaxFloat32, -math.MaxFloat64, -math.MaxFloat32, math.MaxFloat32},
		{math.MaxFloat32, 1e-300, -math.MaxFloat32, math.MaxFloat32},
		{-math.MaxFloat32, 1e-300, -math.MaxFloat32, math.MaxFloat32},
		{-math.MaxFloat32, -1e-300, -math.MaxFloat32, math.MaxFloat32},
		{3e38, 3e38, -math.MaxFloat32, math.MaxFloat32},
		{-3e38, -3e38, -math.MaxFloat32, math.MaxFloat32},
		{0x1p-149, -0x1p-200, -1, 1},
		{-0x1p-148, 0x1p-200, -1, 1},
		{-0x1p-126, 0x1p-300, -1, 1},
		{-0x1p-125, 0x1p-300, -1, 1},
		{-0x1p-149, -0x1p-300, -1, 1},
		{-0x1p-126, -0x1p-300, -1, 1},
		{0x1p-126, -0x1p-300, -1, 1},
		{-1, 0x1p-60, -1, 1},
		{-1, -0x1p-60, -1, 1},
		{1, 0x1p-60, -1, 1},
		{0.5, 0.5 - 0x1p-60, -1, 1},
		{-0.5, -0.5 + 0x1p-60, -1, 1},
		{-0.5, -0.5 - 0x1p-60, -1, 1},
		{0, 5e-324, -1, 1},
		{0, -5e-324, -1, 1},
	}
	for i, c := range cases {
		srv, loc := audit83Run(t, e, fmt.Sprint("a83edge", i), c, decay.None(), clk, 0)
		want := audit83Want(float64(float32(audit83Up(big.NewFloat(math.Max(math.Min(c.start, c.hi), c.lo))))), c.delta, c.lo, c.hi)
		// reads cap at Hi
		if want > c.hi {
			want = c.hi
		}
		if srv != loc {
			t.Errorf("case %d %+v: server %v (%x), local %v (%x)", i, c, srv, math.Float64bits(srv), loc, math.Float64bits(loc))
		}
		if srv != want {
			t.Errorf("case %d %+v: server %v, exact rounded up %v", i, c, srv, want)
		}
	}
}

// TestAudit83FixedAddUpNegZero: from the least negative subnormal
// -2^-149 a positive error steps to zero: the Go engine (Rules.RoundSum,
// a bit step) stores -0, sketch.lua's addUp (c = y + 1 = 0) stored +0.
// Fixed in stop 49: addUp returns -0 there.
func TestAudit83FixedAddUpNegZero(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	srv, loc := audit83Run(t, e, "a83negzero", audit83Case{-0x1p-149, 0x1p-300, -1, 1}, decay.None(), clk, 0)
	if math.Float64bits(srv) != math.Float64bits(loc) {
		t.Errorf("-2^-149 + 2^-300 in [-1, 1]: server reads %v (signbit %v), local sketch %v (signbit %v); redis/sketch.lua addUp claims to mirror Rules.RoundSum and redis/exactadd_test.go's HEAD commit claims the edges agree bit for bit with the local sketch", srv, math.Signbit(srv), loc, math.Signbit(loc))
	}
}

// TestAudit83AddUpDecay: with Exponential and Linear decay the server's
// reading is never below the exact sum of its own decayed value (bounded
// below by the local's within a float32 step) and delta.
func TestAudit83AddUpDecay(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	for di, d := range []decay.Decay{decay.Exponential(0.7), decay.Linear(3)} {
		for i, c := range []audit83Case{
			{1000, 0x1p-40, -1e6, 1e6},
			{0x1p60, 1, -1e30, 1e30},
			{-1000, 0x1p-40, -1e6, 1e6},
			{0.1, 0.2, -0.1, 0.1},
			{5e11, 1e-6, -1e12, 1e12},
		} {
			srv, loc := audit83Run(t, e, fmt.Sprint("a83decay", di, "_", i), c, d, clk, 1234)
			// local within one float32 step either way
			lo32 := float64(math.Nextafter32(float32(loc), float32(math.Inf(-1))))
			hi32 := float64(math.Nextafter32(float32(loc), float32(math.Inf(1))))
			if srv < lo32 || srv > hi32 {
				t.Errorf("decay %d case %d %+v: server %v, local %v: more than a float32 step apart", di, i, c, srv, loc)
			}
		}
	}
}

// TestAudit83FixedClassifyName: classify matches "exceeds maximum
// allowed size" anywhere in a server message, and a message from the
// function names the key, whose Name the user chooses: a key holding
// foreign data is then reported as ErrInvalidConfig (a
// proto-max-bulk-len refusal) instead of the unchanged error. Fixed in
// stop 49: classify matches the server's own reply only, at its start.
func TestAudit83FixedClassifyName(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for _, name := range []string{"plain", "exceeds maximum allowed size"} {
		rs := e.sketch(t, Config{Name: name, Levels: 1, CellsPerLevel: 4, Hi: 1e9})
		if r, err := rawDo(e.srv.addr(), "RPUSH", "{"+name+"}:g", "x"); err != nil {
			t.Fatalf("RPUSH: %v %v", r, err)
		}
		err := rs.Update(ctx, "k", 1)
		if err == nil {
			t.Fatalf("Name %q: Update on a key holding a list passed", name)
		}
		if errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Name %q: a key holding a list: %v matches ErrInvalidConfig; config.go: ErrInvalidConfig is for a write the server refused because the string passes proto-max-bulk-len; the brief: other errors must be unchanged", name, err)
		}
	}
}

// TestAudit83ClassifyLowered: proto-max-bulk-len lowered after creation:
// a write to a new generation and to an existing one matches
// ErrInvalidConfig naming the string's size, on both clients.
func TestAudit83ClassifyLowered(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cfg := Config{Name: "big", Levels: 4, CellsPerLevel: 65536, Hi: 1e9}
		rs := e.sketch(t, cfg)
		if err := rs.Check(ctx); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if err := rs.Update(ctx, "k", 1); err != nil {
			t.Fatalf("Update before lowering: %v", err)
		}
		if r, err := rawDo(e.srv.addr(), "CONFIG", "SET", "proto-max-bulk-len", "1048576"); err != nil || r != "OK" {
			t.Fatalf("CONFIG SET: %v %v", r, err)
		}
		size := fmt.Sprint(40 + 4*65536*8)
		for _, key := range []string{"k", "other"} {
			_, err := rs.UpdateAndQuery(ctx, key, 1)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), size) {
				t.Errorf("existing generation, key %s: %v; want ErrInvalidConfig naming %s bytes", key, err, size)
			}
		}
		rs2 := e.sketch(t, Config{Name: "big2", Levels: 4, CellsPerLevel: 65536, Hi: 1e9})
		_, err := rs2.TryUpdate(ctx, "k", 1, 10)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), size) {
			t.Errorf("new generation: %v; want ErrInvalidConfig naming %s bytes", err, size)
		}
		// Query reads only: unchanged, no error.
		if _, err := rs.Query(ctx, "k"); err != nil {
			t.Errorf("Query after lowering: %v", err)
		}
	})
}

// audit83Ctx is cancelled after n calls of Done (mid-way through Check).
type audit83Ctx struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
	after  int64
}

func (c *audit83Ctx) Done() <-chan struct{} {
	if c.n.Add(1) == c.after {
		c.cancel()
	}
	return c.Context.Done()
}

func audit83Sketch(t *testing.T, e *env, user string, cfg Config, pool int) (*Sketch, error) {
	if e.lib == "rueidis" {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: e.seeds(), DisableCache: true, Username: user, Password: "pw"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return New(c, cfg)
	}
	c := goredis.NewClient(&goredis.Options{Addr: e.seeds()[0], Username: user, Password: "pw", ContextTimeoutEnabled: true, PoolSize: pool})
	t.Cleanup(func() { c.Close() })
	return NewGoRedis(c, cfg)
}

// TestAudit83CheckShards: users denying chosen shards; Check names the
// first denied shard in order; a context cancelled mid-way is an error.
func TestAudit83CheckShards(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		addr := e.srv.addr()
		acl := strings.ReplaceAll(RequiredACL, "{Name", "{a83")
		users := map[string]struct {
			rules string
			first string
		}{
			"all":     {acl, ""},
			"no0":     {strings.ReplaceAll(acl, "~{a83:*", "~{a83:[1-9]*"), "{a83:0}"},
			"nolast":  {strings.ReplaceAll(acl, "~{a83:*", "~{a83:[0-9]} ~{a83:[0-9]}:* ~{a83:[1-9][0-9]}* ~{a83:1[0-9][0-9]}* ~{a83:2[0-8][0-9]}* ~{a83:29[0-8]}*"), "{a83:299}"},
			"no1":     {strings.ReplaceAll(acl, "~{a83:*", "~{a83:0}* ~{a83:[2-9]}* ~{a83:[1-9][0-9]}* ~{a83:[12][0-9][0-9]}*"), "{a83:1}"},
			"no65up":  {strings.ReplaceAll(acl, "~{a83:*", "~{a83:[0-9]}* ~{a83:[1-5][0-9]}* ~{a83:6[0-4]}*"), "{a83:65}"},
			"no64_70": {strings.ReplaceAll(acl, "~{a83:*", "~{a83:[0-9]}* ~{a83:[1-5][0-9]}* ~{a83:6[0-3]}* ~{a83:7[1-9]}* ~{a83:[89][0-9]}* ~{a83:[12][0-9][0-9]}* ~{a83:6[5-9]}*"), "{a83:64}"},
		}
		for u, x := range users {
			args := append([]string{"ACL", "SETUSER", u, "on", "resetkeys", ">pw"}, strings.Fields(x.rules+" "+connectionACL)...)
			if r, err := rawDo(addr, args...); err != nil || r != "OK" {
				t.Fatalf("%v: %v, %v", args, r, err)
			}
		}
		for _, pool := range []int{1, 0} {
			for u, x := range users {
				cfg := Config{Name: "a83", Shards: 300, Levels: 1, CellsPerLevel: 4, Hi: 1e9}
				if pool == 1 {
					cfg.Timeout = 2 * time.Second
				}
				s, err := audit83Sketch(t, e, u, cfg, pool)
				if err != nil {
					t.Fatal(err)
				}
				err = s.Check(context.Background())
				if x.first == "" {
					if err != nil {
						t.Errorf("pool %d user %s: Check: %v", pool, u, err)
					}
					// cancelled mid-way: an error.
					for _, after := range []int64{1, 3, 40, 150} {
						base, cancel := context.WithCancel(context.Background())
						ctx := &audit83Ctx{Context: base, cancel: cancel, after: after}
						if err := s.Check(ctx); err == nil {
							t.Errorf("pool %d: context cancelled after %d Done calls: Check passed", pool, after)
						}
						cancel()
					}
					continue
				}
				if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), x.first+":") && !strings.Contains(err.Error(), x.first+" ") {
					t.Errorf("pool %d user %s: Check: %v; want ErrPermission naming %s", pool, u, err, x.first)
				}
			}
		}
	})
}
