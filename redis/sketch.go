package redis

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
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

// fcall runs the library's function once. When the server does not have
// the library (a fresh or restarted server, whose function set is empty
// without persistence) it loads it on every node the client knows and
// calls again: a "Function not found" reply means the first call ran no
// code, so the write is still applied at most once. Any other failure is
// never retried.
func fcall(ctx context.Context, c rueidis.Client, key string, args []string) ([]rueidis.RedisMessage, error) {
	cmd := func() rueidis.Completed {
		return c.B().Fcall().Function(libName).Numkeys(1).Key(key).Arg(args...).Build()
	}
	arr, err := c.Do(ctx, cmd()).ToArray()
	if rerr, ok := rueidis.IsRedisErr(err); !ok || !strings.HasSuffix(rerr.Error(), "Function not found") {
		return arr, err
	}
	if err := loadLibrary(ctx, c); err != nil {
		return nil, err
	}
	return c.Do(ctx, cmd()).ToArray()
}

// loadLibrary sends FUNCTION LOAD to every node; a library that is
// already there (another instance loaded it first) is no error, nor is a
// replica's READONLY (replicas get the library from their primary).
func loadLibrary(ctx context.Context, c rueidis.Client) error {
	for addr, n := range c.Nodes() {
		err := n.Do(ctx, n.B().FunctionLoad().FunctionCode(libCode).Build()).Error()
		if err != nil && !strings.Contains(err.Error(), "already exists") && !strings.HasPrefix(err.Error(), "READONLY") {
			return fmt.Errorf("FUNCTION LOAD on %s: %w", addr, err)
		}
	}
	return nil
}

// defaultRebaseAt is the age of a generation's epoch, in ms, at which the
// next write rebases it: half the uint32 stamp range, so a stamp never
// wraps however long the sketch lives or idles.
const defaultRebaseAt = 1 << 31

// Sketch is a count-min sketch of L x M packed cells held on a Redis
// server (one string per generation and shard), shared by every instance
// that uses the same Config. Each operation is one function call (FCALL),
// one round trip, atomic on the server. Safe for concurrent use; it holds no lock
// and starts no goroutine (the rueidis client it is given has its own,
// and the caller closes it).
type Sketch struct {
	client   rueidis.Client
	cfg      normalized
	hasher   sketch.Hasher
	bases    []string // per shard: "{Name}" or "{Name:i}"
	rebaseAt int64    // defaultRebaseAt; tests lower it
}

// New returns a Sketch for cfg over client, or an error matching
// ErrInvalidConfig. It does not contact the server: the generation strings
// are created by the first write.
func New(client rueidis.Client, cfg Config) (*Sketch, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client must not be nil", ErrInvalidConfig)
	}
	n, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	s := &Sketch{client: client, cfg: n, hasher: n.Hasher(n.Seed), rebaseAt: defaultRebaseAt}
	if n.Shards == 1 {
		s.bases = []string{"{" + n.Name + "}"}
	} else {
		for i := range n.Shards {
			s.bases = append(s.bases, "{"+n.Name+":"+strconv.FormatUint(uint64(i), 10)+"}")
		}
	}
	return s, nil
}

// Config returns the normalized configuration.
func (s *Sketch) Config() Config { return s.cfg.Config }

// MemoryBytes is the server memory of the sketch's payload when every
// generation of every shard exists: Shards x Generations x (40 + L x M x 8)
// bytes, whatever the number of keys.
func (s *Sketch) MemoryBytes() int64 {
	c := s.cfg
	return int64(c.Shards) * int64(c.Generations) * (headerBytes + int64(c.Levels)*int64(c.CellsPerLevel)*8)
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

// shard returns which base holds the key with hash h: a multiply-shift
// of h remixed (Index uses the raw halves of h for the cells).
func (s *Sketch) shard(h uint64) int {
	if len(s.bases) == 1 {
		return 0
	}
	x := bits.RotateLeft64(h, 29) * 0x9E3779B97F4A7C15
	hi, _ := bits.Mul64(x, uint64(len(s.bases)))
	return int(hi)
}

// call runs op for the key hash h. delta and limit must be finite.
func (s *Sketch) call(ctx context.Context, op string, h uint64, delta, limit float64) (reply, error) {
	if s.cfg.Timeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
			defer cancel()
		}
	}
	args := scriptArgs(s.cfg, op, h, delta, limit, s.rebaseAt)
	arr, err := fcall(ctx, s.client, s.bases[s.shard(h)], args)
	if err != nil {
		return reply{}, fmt.Errorf("redis: %s: %w", opName(op), err)
	}
	return parseReply(op, arr)
}

// scriptArgs is sketch.lua's ARGV for op on the key hash h: op, the
// static cfg, kind, agg, hs and he, then nums (binary delta, limit, rebaseAt), now
// ("" for the server clock, or Config.Clock's ms) and each level's cell byte range,
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
	args := make([]string, 0, 8+2*c.Levels)
	args = append(args, op, c.cfg, c.kindName, c.agg, c.hs, c.he, str[:24], ns)
	start := 24
	for _, e := range ends[:2*c.Levels] {
		args = append(args, str[start:e])
		start = e
	}
	return args
}

func parseReply(op string, arr []rueidis.RedisMessage) (reply, error) {
	if len(arr) != 4 {
		return reply{}, fmt.Errorf("redis: %s: script reply has %d elements, want 4", opName(op), len(arr))
	}
	ok, err1 := arr[0].AsInt64()
	eb, err2 := arr[1].ToString()
	retry, err3 := arr[2].AsInt64()
	reset, err4 := arr[3].AsInt64()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return reply{}, fmt.Errorf("redis: %s: malformed script reply: %w", opName(op), err)
	}
	return decodeReply(op, ok, eb, retry, reset)
}

// decodeReply checks and decodes the script reply's fields: allowed 0 or
// 1, the estimate as 8 bytes of little-endian float64, finite, and retry
// and reset >= -1.
func decodeReply(op string, ok int64, eb string, retry, reset int64) (reply, error) {
	if ok != 0 && ok != 1 {
		return reply{}, fmt.Errorf("redis: %s: malformed script reply: allowed = %d", opName(op), ok)
	}
	if len(eb) != 8 {
		return reply{}, fmt.Errorf("redis: %s: malformed estimate %q in script reply (want 8 bytes)", opName(op), eb)
	}
	e := math.Float64frombits(binary.LittleEndian.Uint64([]byte(eb)))
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return reply{}, fmt.Errorf("redis: %s: malformed estimate %v in script reply", opName(op), e)
	}
	if retry < -1 || reset < -1 {
		return reply{}, fmt.Errorf("redis: %s: malformed script reply: retry %d, reset %d", opName(op), retry, reset)
	}
	return reply{ok: ok == 1, estimate: e, retryMs: retry, resetMs: reset}, nil
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

// Update adds delta to the key's score at every level of every live
// generation, on the server: per cell, decay for its age on the server's
// clock, add, clamp to [Lo, Hi], round up to float32. It panics if delta
// is NaN or ±Inf (before any round trip), as sketch.Update does.
func (s *Sketch) Update(ctx context.Context, key string, delta float64) error {
	checkFinite("Update", "delta", delta)
	_, err := s.call(ctx, "U", s.hasher.Sum64String(key), delta, 0)
	return err
}

// UpdateAndQuery is Update followed by Query in the same atomic call.
func (s *Sketch) UpdateAndQuery(ctx context.Context, key string, delta float64) (float64, error) {
	checkFinite("UpdateAndQuery", "delta", delta)
	r, err := s.call(ctx, "A", s.hasher.Sum64String(key), delta, 0)
	return r.estimate, err
}

// Query returns the key's estimate: the aggregate of its decayed cells in
// the oldest live generation (0 for a sketch nobody has written). It only
// reads.
func (s *Sketch) Query(ctx context.Context, key string) (float64, error) {
	r, err := s.call(ctx, "Q", s.hasher.Sum64String(key), 0, 0)
	return r.estimate, err
}

// TryUpdate applies delta to the key's cells only if estimate + delta <=
// limit, atomically with respect to every other call on the server, from
// any instance. It reports whether it applied. It panics if delta or limit
// is NaN or ±Inf, or if limit is above Hi (such a limit can never deny),
// as sketch.TryUpdate does.
func (s *Sketch) TryUpdate(ctx context.Context, key string, delta, limit float64) (bool, error) {
	r, err := s.tryUpdate(ctx, s.hasher.Sum64String(key), delta, limit)
	return r.ok, err
}

func (s *Sketch) tryUpdate(ctx context.Context, h uint64, delta, limit float64) (reply, error) {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	if limit > s.cfg.hi {
		panic("redis: TryUpdate limit " + fmtFloat(limit) + " is above Hi " + fmtFloat(s.cfg.hi) + " and could never deny")
	}
	return s.call(ctx, "T", h, delta, limit)
}
