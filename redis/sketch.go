package redis

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

//go:embed sketch.lua
var librarySource string

// The Redis Function library (sketch.lua) under a name that carries a
// hash of its source, so that instances running different versions of
// the library never call each other's code, and the code FUNCTION LOAD
// sends.
var (
	libName = "grudge_" + libHash()
	libCode = strings.ReplaceAll(librarySource, "grudge_LIBVERSION", libName)
)

func libHash() string {
	h := sha1.Sum([]byte(librarySource))
	return hex.EncodeToString(h[:6])
}

// defaultRebaseAt is the age of a generation's epoch, in ms, at which the
// next write rebases it: half the uint32 stamp range, so a stamp never
// wraps however long the sketch lives or idles.
const defaultRebaseAt = 1 << 31

// Sketch is a count-min sketch of L x M packed cells held on a Redis
// server (one string per generation and shard), shared by every instance
// that uses the same Config. Each operation is one function call (FCALL),
// one round trip, atomic on the server. Safe for concurrent use; it holds
// no lock and starts no goroutine (the client it is given has its own,
// and the caller closes it). The zero Sketch is not usable: its
// operations and Check panic ("redis: zero Sketch; use New").
type Sketch struct {
	conn     conn
	cfg      normalized
	hasher   sketch.Hasher
	keys     [][]string // per shard: the generation keys every call declares
	rebaseAt int64      // defaultRebaseAt; tests lower it
}

// New returns a Sketch for cfg over a rueidis client (standalone or
// cluster), or an error matching ErrInvalidConfig. It does not contact
// the server: the generation strings are created by the first write, and
// Check verifies the server.
func New(client rueidis.Client, cfg Config) (*Sketch, error) {
	if core.IsNil(client) {
		return nil, errNilClient
	}
	return newSketch(rueidisConn{client}, cfg)
}

// NewGoRedis is New over a go-redis v9 client: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring or any other redis.UniversalClient.
// Its options must set ContextTimeoutEnabled: true (an error matching
// ErrInvalidConfig otherwise, for the client types whose options it can
// read; build an AutoPipeliner from such a client too): without it
// go-redis ignores context deadlines, and Config.Timeout would bound
// nothing. Passing client.AutoPipeline() batches concurrent calls (go-redis
// marks it experimental; docs/distributed.md measures it) where client is
// a *redis.Client: over a ClusterClient or a Ring an AutoPipeliner hides
// the nodes and sends FUNCTION LOAD and Check's commands to one of them,
// so the others never get the library. Over a Redis Cluster that is
// refused (Check, and loading the library, fail with an error matching
// ErrInvalidConfig; told by INFO cluster, so where the ACL allows INFO);
// a Ring's shards cannot tell, so do not build one over a Ring.
// go-redis retries a command after a network error unless its options
// say MaxRetries: -1 (ClusterOptions: MaxRedirects): such a retry may
// apply one update twice, which over-counts (docs/distributed.md, "Timed
// out, yet executed").
func NewGoRedis(client goredis.UniversalClient, cfg Config) (*Sketch, error) {
	c, err := newGoredisConn(client)
	if err != nil {
		return nil, err
	}
	return newSketch(c, cfg)
}

func newSketch(c conn, cfg Config) (*Sketch, error) {
	n, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	s := &Sketch{conn: c, cfg: n, hasher: n.Hasher(n.Seed), rebaseAt: defaultRebaseAt}
	if core.IsNil(s.hasher) {
		// Wrapped as the other sketch fields' errors are (normalize).
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, core.NilHasherErr("sketch", n.Seed))
	}
	for i := range n.Shards {
		s.keys = append(s.keys, generationKeys(n.Config, i))
	}
	return s, nil
}

// generationKeys are the keys of shard i: "{Name}:g" without rotation,
// else the ring "{Name}:g:0" .. "{Name}:g:<G-1>" (generation j lives in
// slot j mod G); "{Name:i}" instead of "{Name}" when Shards > 1. They
// share one hash tag, so one Redis Cluster slot, and every call declares
// all of them: they are exactly the keys the function touches.
func generationKeys(c Config, i uint32) []string {
	base := "{" + c.Name + "}"
	if c.Shards > 1 {
		base = "{" + c.Name + ":" + strconv.FormatUint(uint64(i), 10) + "}"
	}
	if c.Period == 0 {
		return []string{base + ":g"}
	}
	keys := make([]string, c.Generations)
	for g := range keys {
		keys[g] = base + ":g:" + strconv.Itoa(g)
	}
	return keys
}

// Keys returns the server keys of the sketch, every shard's generation
// strings: what to grant in an ACL (~{Name}* covers them, and ~{Name:*
// a sharded sketch's: RequiredACL), to watch, or to delete when the
// sketch is retired.
func (s *Sketch) Keys() []string {
	var all []string
	for _, k := range s.keys {
		all = append(all, k...)
	}
	return all
}

// Config returns the normalized configuration.
func (s *Sketch) Config() Config { return s.cfg.Config }

// MemoryBytes is the server memory of the sketch's payload when every
// generation of every shard exists: Shards x Generations x (40 + L x M x 8)
// bytes, whatever the number of keys.
func (s *Sketch) MemoryBytes() int64 {
	return int64(s.cfg.Shards) * int64(s.cfg.Generations) * s.stringBytes()
}

// stringSize is the size of one generation's string of one shard with
// levels levels of cells cells: the header and 8 bytes per cell.
func stringSize(levels, cells uint32) int64 {
	return headerBytes + int64(levels)*int64(cells)*8
}

// maxLevels is the most levels a Config may have.
const maxLevels = sketch.MaxLevels

// headerBytes is the size of a generation string's header (sketch.lua).
const headerBytes = 40

// reply is the script's answer.
type reply struct {
	ok       bool
	estimate float64
	retryMs  int64 // -1: not a Linear law, or the request can never fit
	resetMs  int64 // -1: not a Linear law
}

// shard returns which shard holds the key with hash h: a multiply-shift
// of h remixed (Index uses the raw halves of h for the cells).
func (s *Sketch) shard(h uint64) int {
	if len(s.keys) == 1 {
		return 0
	}
	x := bits.RotateLeft64(h, 29) * 0x9E3779B97F4A7C15
	hi, _ := bits.Mul64(x, uint64(len(s.keys)))
	return int(hi)
}

// call runs op for the key hash h. delta and limit must be finite.
func (s *Sketch) call(ctx context.Context, op string, h uint64, delta, limit float64) (reply, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	args := scriptArgs(s.cfg, op, h, delta, limit, s.rebaseAt)
	r, err := s.fcall(ctx, s.keys[s.shard(h)], args)
	if err != nil {
		return reply{}, fmt.Errorf("redis: %s: %w", opName(op), err)
	}
	return decodeReply(op, r)
}

// bound returns ctx bounded by Config.Timeout when it has no deadline.
func (s *Sketch) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	checkCtx("Sketch", ctx)
	if s.cfg.Timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			return context.WithTimeout(ctx, s.cfg.Timeout)
		}
	}
	return ctx, func() {}
}

// scriptArgs is sketch.lua's ARGV for op on the key hash h: op, the
// static cfg, then nums (binary delta, limit, rebaseAt), now ("" for the
// server clock, or Config.Clock's ms) and each level's cell byte range,
// pos and pos+7, in decimal. The per-call strings alias one buffer, never
// written again: one allocation instead of 2L+1.
func scriptArgs(c normalized, op string, h uint64, delta, limit float64, rebaseAt int64) []string {
	buf := make([]byte, 0, 24+int(c.Levels)*22)
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(delta))
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(limit))
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(rebaseAt)))
	var ends [2 * maxLevels]int
	for l := range c.Levels {
		pos := headerBytes + 8*(uint64(l)*uint64(c.CellsPerLevel)+uint64(core.Index(h, l, c.CellsPerLevel)))
		buf = strconv.AppendUint(buf, pos, 10)
		ends[2*l] = len(buf)
		buf = strconv.AppendUint(buf, pos+7, 10)
		ends[2*l+1] = len(buf)
	}
	str := unsafe.String(unsafe.SliceData(buf), len(buf))
	ns := ""
	if c.Clock != nil {
		ns = strconv.FormatInt(c.Clock.NowMillis(), 10)
	}
	args := make([]string, 0, 4+2*c.Levels)
	args = append(args, op, c.cfg, str[:24], ns)
	start := 24
	for _, e := range ends[:2*c.Levels] {
		args = append(args, str[start:e])
		start = e
	}
	return args
}

// replyBytes is the size of the function's reply, struct '<Bddd'.
const replyBytes = 25

// decodeReply checks and decodes the function's reply: 25 bytes, allowed
// 0 or 1, then the estimate (finite), retry and reset (whole numbers >= -1
// and below 2^53) as little-endian float64.
func decodeReply(op, b string) (reply, error) {
	if len(b) != replyBytes {
		return reply{}, fmt.Errorf("redis: %s: malformed script reply: %d bytes, want %d", opName(op), len(b), replyBytes)
	}
	f := func(i int) float64 {
		var u uint64
		for j := 8; j > 0; j-- {
			u = u<<8 | uint64(b[8*i+j])
		}
		return math.Float64frombits(u)
	}
	ok, e, retry, reset := b[0], f(0), f(1), f(2)
	if ok > 1 {
		return reply{}, fmt.Errorf("redis: %s: malformed script reply: allowed = %d", opName(op), ok)
	}
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return reply{}, fmt.Errorf("redis: %s: malformed estimate %v in script reply", opName(op), e)
	}
	whole := func(v float64) bool { return v >= -1 && v < 1<<53 && v == math.Trunc(v) }
	if !whole(retry) || !whole(reset) {
		return reply{}, fmt.Errorf("redis: %s: malformed script reply: retry %v, reset %v", opName(op), retry, reset)
	}
	return reply{ok: ok == 1, estimate: e, retryMs: int64(retry), resetMs: int64(reset)}, nil
}

func opName(op string) string {
	switch op {
	case "Q":
		return "Query"
	case "U":
		return "Update"
	case "A":
		return "UpdateAndQuery"
	}
	return "TryUpdate"
}

func checkFinite(op, name string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		panic("redis: " + op + " " + name + " must be finite; got " + strconv.FormatFloat(v, 'g', -1, 64))
	}
}

// checkCtx panics on a nil context, as the standard library does, but
// with a message that names it instead of a nil dereference deep in the
// client.
func checkCtx(op string, ctx context.Context) {
	if ctx == nil {
		panic("redis: " + op + ": nil Context (pass context.Background() or context.TODO())")
	}
}

// built panics on the zero Sketch, which has no connection and no hasher.
func (s *Sketch) built() {
	if s.conn == nil {
		panic("redis: zero Sketch; use New")
	}
}

// hash is the key's hash under the sketch's hasher; it panics on the zero
// Sketch.
func (s *Sketch) hash(key string) uint64 {
	s.built()
	return s.hasher.Sum64String(key)
}

// Update adds delta to the key's score at every level of every live
// generation, on the server: per cell, decay for its age on the server's
// clock, add, clamp to [Lo, Hi], round up to float32. It panics if delta
// is NaN or ±Inf (before any round trip), as sketch.Update does.
func (s *Sketch) Update(ctx context.Context, key string, delta float64) error {
	checkFinite("Update", "delta", delta)
	_, err := s.call(ctx, "U", s.hash(key), delta, 0)
	return err
}

// UpdateAndQuery is Update followed by Query in the same atomic call.
func (s *Sketch) UpdateAndQuery(ctx context.Context, key string, delta float64) (float64, error) {
	checkFinite("UpdateAndQuery", "delta", delta)
	r, err := s.call(ctx, "A", s.hash(key), delta, 0)
	return r.estimate, err
}

// Query returns the key's estimate: the aggregate of its decayed cells in
// the oldest live generation (0 for a sketch nobody has written). It only
// reads.
func (s *Sketch) Query(ctx context.Context, key string) (float64, error) {
	r, err := s.call(ctx, "Q", s.hash(key), 0, 0)
	return r.estimate, err
}

// TryUpdate applies delta to the key's cells only if estimate + delta <=
// limit, atomically with respect to every other call on the server, from
// any instance. It reports whether it applied. Any finite limit is
// accepted, as sketch.TryUpdate accepts it: the decision is estimate +
// delta <= limit even when limit is above Hi (the estimate is capped at
// Hi, the cells stay clamped). It panics if delta or limit is NaN or
// ±Inf, as sketch.TryUpdate does.
func (s *Sketch) TryUpdate(ctx context.Context, key string, delta, limit float64) (bool, error) {
	r, err := s.tryUpdate(ctx, s.hash(key), delta, limit)
	return r.ok, err
}

func (s *Sketch) tryUpdate(ctx context.Context, h uint64, delta, limit float64) (reply, error) {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	return s.call(ctx, "T", h, delta, limit)
}
