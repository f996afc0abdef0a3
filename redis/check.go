package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoFunctions is matched (errors.Is) by the error of a call, Check or
// NewLimiter when the server has no Redis Functions: FUNCTION or FCALL is
// an unknown command, as on Redis before 7.0 or where they are renamed
// or disabled. The sketch needs Redis 7.0 or later.
var ErrNoFunctions = errors.New("redis: the server has no Redis Functions (FUNCTION LOAD and FCALL, Redis 7.0 or later)")

// ErrPermission is matched (errors.Is) by the error of a call, Check or
// NewLimiter when the server's ACL denies the connection's user a command
// or key the sketch needs; the message names what was denied. The full
// list is RequiredACL.
var ErrPermission = errors.New("redis: the server's ACL denies a command the sketch needs")

// ErrEvictionPolicy is matched (errors.Is) by the error of Check or
// NewLimiter when a server's maxmemory-policy is allkeys-lru, allkeys-lfu
// or allkeys-random: such a server may evict the sketch's strings, which
// forgets every debt they hold and admits again keys that are over their
// limit. noeviction and the volatile-* policies are safe (the sketch's
// keys carry no TTL, so volatile-* never evicts them).
var ErrEvictionPolicy = errors.New("redis: the server's maxmemory-policy can evict the sketch")

// RequiredACL lists what the connection's user needs, in ACL SETUSER
// syntax (Name stands for Config.Name, with the glob characters * ? [ ]
// and \ in it escaped by a backslash, since key patterns are globs): the
// commands the sketch sends and those its server function runs, on the
// sketch's keys ("~{Name}*" covers "{Name}:g..." and "~{Name:*" a
// sharded sketch's "{Name:<shard>}:g...").
// FUNCTION|LOAD is needed on every primary unless an administrator loads
// the library (Library) and keeps it loaded across restarts; CONFIG|GET
// (or INFO) only for the start-up check of maxmemory-policy (and
// CONFIG|GET of proto-max-bulk-len, whose default is assumed without it).
// The client libraries send their own connection commands too (HELLO,
// AUTH, PING, CLIENT|SETINFO, and in a cluster CLUSTER|SLOTS or
// CLUSTER|SHARDS): +@connection and +cluster|slots +cluster|shards cover
// them.
const RequiredACL = "+fcall +function|load +time +exists +strlen +type +getrange +setrange +del +config|get ~{Name}* ~{Name:*"

// Library returns the name and the code of the Redis Function library the
// sketch calls, for an administrator who loads it (FUNCTION LOAD code) on
// servers where the sketch's user may not.
func Library() (name, code string) { return libName, libCode }

// maxTryAgain bounds the TRYAGAIN retries of a call whose context has no
// deadline (about 4.8 s with the backoff of tryAgainWait).
const maxTryAgain = 100

func tryAgainWait(attempt int) time.Duration {
	return min(time.Millisecond<<min(attempt, 6), 50*time.Millisecond)
}

// fcall runs the library's function once, and again only after a reply
// that says no code ran:
//
//   - "Function not found": the server does not have the library (a fresh
//     or restarted server, whose function set is empty without
//     persistence, or a cluster node the sketch's slot just moved to). It
//     loads the library on every node the client knows and calls again,
//     once.
//   - TRYAGAIN: in a Redis Cluster, the sketch's slot is migrating and
//     its generation keys are split between the two nodes for the moment
//     (some moved, some not). It waits (1, 2, 4 .. 50 ms) and calls again
//     until the context ends (at most maxTryAgain times without a
//     deadline).
//
// Any other failure, a network error or a timeout included, is never
// retried by the sketch: a write is applied at most once by the sketch
// itself (go-redis may retry after a network error on its own; see
// NewGoRedis).
func (s *Sketch) fcall(ctx context.Context, keys, args []string) (string, error) {
	var r string
	err := s.retrying(ctx, keys, func() (err error) {
		r, err = s.conn.fcall(ctx, libName, keys, args)
		return err
	})
	return r, err
}

// retrying runs call, and again after the replies fcall describes.
func (s *Sketch) retrying(ctx context.Context, keys []string, call func() error) error {
	loaded := false
	var loadErr error     // the nodes that did not take the library
	var readOnly []string // the nodes that refused it as read-only replicas
	// after names, with a failure after the reload, the nodes the library
	// could not reach.
	after := func(err error) error {
		if loadErr != nil {
			return fmt.Errorf("%w (after loading the library: %w)", err, loadErr)
		}
		return err
	}
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil {
			return nil
		}
		msg, isServer := s.conn.serverError(err)
		switch {
		case !isServer:
			return after(err)
		case !loaded && strings.HasSuffix(msg, "Function not found"):
			took, ro, lerr := s.loadLibrary(ctx)
			if !took {
				if lerr == nil {
					return err // no node to load it on
				}
				return lerr
			}
			loaded, loadErr, readOnly = true, lerr, ro
		case strings.HasPrefix(msg, "TRYAGAIN"):
			_, deadline := ctx.Deadline()
			if !deadline && attempt >= maxTryAgain {
				return err
			}
			t := time.NewTimer(tryAgainWait(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w (the slot was still migrating: %w)", ctx.Err(), err)
			case <-t.C:
			}
		case len(readOnly) > 0 && strings.HasSuffix(msg, "Function not found"):
			// Every node the client knows refused the library as a
			// read-only replica, which takes it only from its primary,
			// and that has not loaded it (audit 131; a node that failed
			// otherwise is the cause to report: audit 133).
			return after(fmt.Errorf("%w: the library is missing and FUNCTION LOAD was refused with READONLY by %s (a read-only replica gets functions only from its primary): point the client at the primary (or load the library there); got %w",
				ErrNoFunctions, strings.Join(readOnly, ", "), err))
		default:
			return after(s.classify(ctx, msg, err, keys))
		}
	}
}

// loadLibrary sends FUNCTION LOAD to every node; a library that is
// already there (another instance loaded it first) counts as taken, as
// does a replica's READONLY (replicas get the library from their
// primary). Where no node loaded it and every refusal was a READONLY,
// it returns those nodes in readOnly: a retried call that still finds
// no library then runs on a replica whose primary lacks it, not on a
// server without Functions.
func (s *Sketch) loadLibrary(ctx context.Context) (took bool, readOnly []string, err error) {
	nodes, err := s.conn.nodes(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("FUNCTION LOAD: listing the nodes: %w", err)
	}
	// Every node, whatever fails: a node that is down (a Cluster with
	// cluster-require-full-coverage off keeps serving the other slots)
	// must not keep the library from the restarted node that holds the
	// sketch's slot. It reports whether any node took it (the call is
	// then made once more) and the failures, joined.
	var errs []error
	loadedHere := false // a node took the library itself (or had it)
	for _, n := range nodes {
		err := n.functionLoad(ctx, libCode)
		if err == nil {
			took, loadedHere = true, true
			continue
		}
		msg, isServer := s.conn.serverError(err)
		if isServer && strings.Contains(msg, "already exists") {
			took, loadedHere = true, true
			continue
		}
		if isServer && strings.HasPrefix(msg, "READONLY") {
			took = true
			readOnly = append(readOnly, n.addr())
			continue
		}
		if isServer {
			err = s.classify(ctx, msg, err, nil)
		}
		errs = append(errs, fmt.Errorf("FUNCTION LOAD on %s: %w", n.addr(), err))
	}
	if loadedHere || len(errs) > 0 {
		readOnly = nil // not every node is a read-only replica
	}
	return took, readOnly, errors.Join(errs...)
}

// classify wraps a server's error reply in the sentinel that names its
// cause, where it knows one: ErrNoFunctions for an unknown FUNCTION or
// FCALL, ErrPermission for an ACL denial (naming what the user lacks, by
// asking the function itself when the denial came from inside it),
// ErrInvalidConfig for a generation's string above the server's
// proto-max-bulk-len (lowered below the sketch's size since Check ran).
func (s *Sketch) classify(ctx context.Context, msg string, err error, keys []string) error {
	low := strings.ToLower(msg)
	switch {
	case strings.HasPrefix(strings.TrimPrefix(msg, "ERR "), "string exceeds maximum allowed size"):
		// The server's own reply (Redis words it so from 7.0 on), not a
		// message that quotes a key: a Name may hold any text.
		return fmt.Errorf("%w: a generation's string of the sketch is %d bytes (40 + Levels %d x CellsPerLevel %d x 8), above the server's proto-max-bulk-len, so the write failed (and wrote nothing); use more Shards with fewer CellsPerLevel each, or raise proto-max-bulk-len; got %w",
			ErrInvalidConfig, s.stringBytes(), s.cfg.Levels, s.cfg.CellsPerLevel, err)
	case strings.Contains(low, "unknown command") && (strings.Contains(low, "fcall") || strings.Contains(low, "function")):
		return fmt.Errorf("%w: the server answered %q (Redis older than 7.0, or FUNCTION/FCALL renamed or disabled)", ErrNoFunctions, msg)
	case strings.HasPrefix(msg, "NOPERM"):
		return fmt.Errorf("%w: %s (the sketch needs %s); got %w", ErrPermission, aclCause(msg, keys), RequiredACL, err)
	case strings.Contains(msg, "can't run this command"):
		// Denied inside the function: ask it which commands.
		denied := "a command the function runs"
		if keys != nil {
			if d, cerr := s.deniedInside(ctx, keys); cerr == nil && len(d) > 0 {
				denied = strings.Join(d, ", ")
			}
		}
		return fmt.Errorf("%w: the function may not run %s (the sketch needs %s); got %w", ErrPermission, denied, RequiredACL, err)
	}
	return err
}

// aclCause extracts what a NOPERM reply denies.
func aclCause(msg string, keys []string) string {
	if i := strings.Index(msg, "to run the '"); i >= 0 {
		rest := msg[i+len("to run the '"):]
		if j := strings.IndexByte(rest, '\''); j >= 0 {
			return "the user may not run " + strings.ToUpper(rest[:j])
		}
	}
	if strings.Contains(msg, "key") {
		return "the user may not read and write the sketch's keys " + strings.Join(keys, " ")
	}
	return strings.TrimPrefix(msg, "NOPERM ")
}

// deniedInside runs the function's check operation on keys: the commands
// (with their keys) that the ACL denies the function, as
// redis.acl_check_cmd reports them.
func (s *Sketch) deniedInside(ctx context.Context, keys []string) ([]string, error) {
	return s.conn.fcallStrings(ctx, libName, keys, []string{"C"})
}

// Check verifies that the servers can hold the sketch safely, on every
// node the client knows: that they run Redis Functions (it loads the
// library where it is missing; ErrNoFunctions), that the ACL lets the
// connection's user run every command the sketch needs on its keys
// (ErrPermission, naming what is denied), and that no maxmemory-policy can
// evict the sketch (ErrEvictionPolicy), and that one generation's string
// (40 + L x M x 8 bytes, M per shard) fits in a server string: a string
// above a node's proto-max-bulk-len (512 MiB unless configured) would fail
// every write, so it is reported as ErrInvalidConfig, naming the sizes
// (more Shards or fewer CellsPerLevel make it fit). It writes nothing but
// the library. Several problems are joined (errors.Join). NewLimiter calls
// it (see LimiterConfig.ServerCheck). The ACL check runs on every
// shard's keys, the first shard alone and then up to 64 at a time
// (rueidis pipelines them; with go-redis at most its PoolSize), and
// reports the first shard in order that fails.
//
// maxmemory-policy is read with CONFIG GET, else from INFO memory; a
// server that allows neither is reported (ErrPermission).
// proto-max-bulk-len is read with CONFIG GET; where that fails (denied,
// renamed, or timed out) the default 512 MiB is assumed. Both can change
// at run time (CONFIG SET): Check sees the moment it runs. Each of its
// round trips is bounded by Config.Timeout when ctx has no deadline, as
// every call is (audit 69: a paused server held it 5 s past a 200 ms
// Timeout).
func (s *Sketch) Check(ctx context.Context) error {
	s.built()
	checkCtx("Check", ctx)
	var errs []error
	if denied, err := s.checkShards(ctx); err != nil {
		errs = append(errs, fmt.Errorf("redis: Check: %w", err))
	} else if len(denied) > 0 {
		errs = append(errs, fmt.Errorf("redis: Check: %w: the function may not run %s (the sketch needs %s)",
			ErrPermission, strings.Join(denied, ", "), RequiredACL))
	}
	c, cancel := s.bound(ctx)
	nodes, err := s.conn.nodes(c)
	cancel()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("redis: Check: listing the nodes: %w", err))...)
	}
	for _, n := range nodes {
		c, cancel := s.bound(ctx)
		err := s.checkEviction(c, n)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
		c, cancel = s.bound(ctx)
		err = s.checkSize(c, n)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// defaultMaxBulk is Redis's default proto-max-bulk-len: the largest
// string SETRANGE may make.
const defaultMaxBulk = 512 << 20

// stringBytes is the size of one generation's string of one shard.
func (s *Sketch) stringBytes() int64 { return stringSize(s.cfg.Levels, s.cfg.CellsPerLevel) }

// checkSize compares one generation's string with n's proto-max-bulk-len
// (the default where CONFIG GET is denied or the value unreadable).
func (s *Sketch) checkSize(ctx context.Context, n node) error {
	// Any failure of CONFIG GET (denied, renamed, timed out) falls back
	// to the default, as the doc says.
	limit, src := int64(defaultMaxBulk), "the default proto-max-bulk-len"
	if v, err := n.configGet(ctx, "proto-max-bulk-len"); err == nil {
		if l, err := strconv.ParseInt(v, 10, 64); err == nil && l > 0 {
			limit, src = l, "its proto-max-bulk-len"
		}
	}
	if size := s.stringBytes(); size > limit {
		return fmt.Errorf("%w: a generation's string of the sketch is %d bytes (40 + Levels %d x CellsPerLevel %d x 8), above %s on %s (%d bytes), so every write would fail; use more Shards with fewer CellsPerLevel each, or fewer CellsPerLevel",
			ErrInvalidConfig, size, s.cfg.Levels, s.cfg.CellsPerLevel, src, n.addr(), limit)
	}
	return nil
}

// checkParallel is how many shards Check's ACL check runs at once, at
// most: rueidis pipelines concurrent calls, so 16384 shards take about
// 16384 / checkParallel round trips instead of 16384. A go-redis client
// runs as many as its pool holds (conn.concurrent): a call queued for a
// connection would spend its Timeout waiting.
const checkParallel = 64

// checkShards runs the check operation on every shard's keys and returns
// what the first shard (in shard order) that failed or was denied
// reported, as one call after the other would: the first shard alone
// (which loads the library where a server lacks it), then the others
// checkParallel at a time (at most conn.concurrent), launching no more
// after a failure. Each call is bounded by Config.Timeout when ctx has no
// deadline.
func (s *Sketch) checkShards(ctx context.Context) (denied []string, err error) {
	one := func(ctx context.Context, keys []string) ([]string, error) {
		c, cancel := s.bound(ctx)
		defer cancel()
		return s.checkOp(c, keys)
	}
	if denied, err = one(ctx, s.keys[0]); err != nil || len(denied) > 0 || len(s.keys) == 1 {
		return denied, err
	}
	type result struct {
		denied []string
		err    error
	}
	rest := s.keys[1:]
	out := make([]result, len(rest))
	// A finding stops the launches, not the calls in flight: every shard
	// below it then has its own answer, so the first in order is the one
	// a sequential check reports.
	var found atomic.Bool
	sem := make(chan struct{}, min(checkParallel, s.conn.concurrent()))
	var wg sync.WaitGroup
	started := 0
	for i, keys := range rest {
		sem <- struct{}{}
		if found.Load() || ctx.Err() != nil {
			<-sem
			break
		}
		started++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, err := one(ctx, keys)
			out[i] = result{d, err}
			if err != nil || len(d) > 0 {
				found.Store(true)
			}
		}()
	}
	wg.Wait()
	for _, r := range out[:started] {
		if r.err != nil || len(r.denied) > 0 {
			return r.denied, r.err
		}
	}
	if started < len(rest) {
		return nil, ctx.Err() // ctx ended before every shard was checked
	}
	return nil, nil
}

// checkOp runs the function's check operation (loading the library if
// the server lacks it), the same way a call does.
func (s *Sketch) checkOp(ctx context.Context, keys []string) ([]string, error) {
	var d []string
	err := s.retrying(ctx, keys, func() (err error) {
		d, err = s.conn.fcallStrings(ctx, libName, keys, []string{"C"})
		return err
	})
	return d, err
}

// checkEviction reads n's maxmemory-policy.
func (s *Sketch) checkEviction(ctx context.Context, n node) error {
	policy, err1 := n.configGet(ctx, "maxmemory-policy")
	if err1 != nil {
		info, err2 := n.info(ctx, "memory")
		var ok bool
		if err2 == nil {
			if policy, ok = infoField(info, "maxmemory_policy"); !ok {
				err2 = errors.New("no maxmemory_policy field")
			}
		}
		if err2 != nil {
			var sentinel error = errors.New("redis: Check")
			if m1, ok1 := s.conn.serverError(err1); ok1 && strings.HasPrefix(m1, "NOPERM") {
				if m2, ok2 := s.conn.serverError(err2); ok2 && strings.HasPrefix(m2, "NOPERM") {
					sentinel = ErrPermission
				}
			}
			return fmt.Errorf("%w: cannot read maxmemory-policy on %s (grant +config|get or +info, or skip the check): CONFIG GET: %v; INFO memory: %v",
				sentinel, n.addr(), err1, err2)
		}
	}
	if strings.HasPrefix(policy, "allkeys-") {
		return fmt.Errorf("%w: %s has maxmemory-policy %s; use noeviction or a volatile-* policy (the sketch's keys have no TTL); got %s",
			ErrEvictionPolicy, n.addr(), policy, policy)
	}
	return nil
}
