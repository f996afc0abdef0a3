package redis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/lfgrudge/grudge/internal/core"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/sketch"
)

// ErrInvalidConfig is matched (errors.Is) by every error New and
// NewLimiter return for a bad configuration; one about a field the core
// sketch validates (Levels, CellsPerLevel, Decay, Lo, Hi, ...) also wraps
// the core's *sketch.ConfigError, for errors.As. Check returns it for a
// sketch whose generation string a server cannot hold, and a call's
// error matches it when the server refused a write for that reason
// (proto-max-bulk-len lowered below the string's size since).
var ErrInvalidConfig = errors.New("redis: invalid configuration")

// Config describes a server-side sketch. The shared fields mean what they
// mean in sketch.Config, and are validated as sketch.New validates them;
// the rest say where the sketch lives on the server and how it rotates.
//
// Every instance that shares a sketch must use the same Config (the
// server stores a fingerprint of the law, bounds, aggregator, seed and
// rotation, and refuses a call made with another).
type Config struct {
	// Name is the sketch's base key. The server keys are "{Name}:g", or
	// with rotation the ring "{Name}:g:0" .. "{Name}:g:<Generations-1>",
	// and "{Name:<shard>}:..." when Shards > 1: the braces are a Redis
	// Cluster hash tag, so all of a shard's keys share one slot, and every
	// call declares all of them (Sketch.Keys). Must be non-empty and
	// contain no braces. A sharded sketch's tags are "Name:0" ..: do not
	// give another sketch on the same servers such a name ("login:0"
	// beside a sharded "login"), or the two share a string and charge
	// each other's keys (the server cannot tell them apart).
	Name string

	Levels        uint32               // L; 0 means 4; at most 8
	CellsPerLevel uint32               // M per shard; 0 means 100_000
	Decay         decay.Decay          // nil means decay.None(); only the provided laws (None, Exponential, Linear) run on the server
	Lo, Hi        float64              // clamp bounds, as in sketch.Config
	Aggregator    sketch.Aggregator    // Min (zero value), Max or Mean
	Hasher        sketch.HasherFactory // nil means sketch.XXH3(); hashing is done by the client
	Seed          uint64               // hash seed; with SipHash() the PRF key: keep it secret for keys clients choose (LimiterConfig.Hasher)

	// Period is the rotation period: 0 means one generation, never
	// rotated (right for draining laws such as the limiter's Linear).
	// With Period > 0 the server keeps Generations strings, one per
	// period, reads the oldest and writes all, as rotator does; a ring
	// slot whose generation's life has ended is reset by the next write
	// (the strings carry no TTL, so volatile-* eviction never takes them;
	// delete Sketch.Keys to retire a sketch).
	Period      time.Duration
	Generations uint32 // with Period > 0: 0 means 2; at least 2 and at most 1024 (as rotator's)

	// Shards spreads the sketch over this many hash-tagged bases (0 means
	// 1; at most 16384, a Redis Cluster's slots), for Redis Cluster; a
	// key's L cells are always in one shard.
	Shards uint32

	// Timeout bounds each call whose context has no deadline; 0 means
	// none (the context alone bounds it).
	Timeout time.Duration

	// Clock, when set, replaces the server's clock (TIME) with the
	// client's readings, in ms. For deterministic tests only: in
	// production instances must share the server's clock.
	Clock sketch.Clock
}

// maxShards bounds Config.Shards: a Redis Cluster's hash slots. Every
// shard's key names are built at New, so an unbounded count would exhaust
// memory there instead of failing.
const maxShards = 16384

// maxGenerations bounds Config.Generations, as rotator's MaxGenerations
// does in process: every call declares and may write all of them.
const maxGenerations = 1024

// normalized is a validated Config with its server arguments prepared.
type normalized struct {
	Config
	kind   law.Kind
	param  float64
	lo, hi float64 // rounded up to float32, as atomiccell.Rules holds them
	fp     uint32
	// cfg is the function's static argument (sketch.lua), binary
	// ('<I4I4I4I4ddddBB': L M G fp P param lo hi kind agg).
	cfg string
}

// The codes of the laws and aggregators in cfg (sketch.lua's KINDS and
// AGGS).
var (
	kindCodes = map[law.Kind]byte{law.KindNone: 0, law.KindExponential: 1, law.KindLinear: 2}
	aggCodes  = map[sketch.Aggregator]byte{sketch.Min: 0, sketch.Max: 1, sketch.Mean: 2}
)

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func (cfg Config) normalize() (normalized, error) {
	bad := func(format string, args ...any) (normalized, error) {
		return normalized{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if cfg.Name == "" {
		return bad("Name must not be empty")
	}
	for _, c := range cfg.Name {
		if c == '{' || c == '}' {
			return bad("Name must not contain braces; got %q", cfg.Name)
		}
	}
	if cfg.Clock != nil && core.IsNil(cfg.Clock) {
		// A typed nil is not "no Clock": a nil dereference at its first
		// reading (audit 140).
		return bad("Clock must not be a nil %T (leave it nil for the server's clock)", cfg.Clock)
	}
	_, sc, err := conv.Normalize(sketch.Config{
		Levels: cfg.Levels, CellsPerLevel: cfg.CellsPerLevel, Decay: cfg.Decay,
		Lo: cfg.Lo, Hi: cfg.Hi, Aggregator: cfg.Aggregator, Hasher: cfg.Hasher, Seed: cfg.Seed,
	})
	if err != nil {
		// Wrapped, not flattened: errors.As finds the *sketch.ConfigError
		// naming the field.
		return normalized{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cfg.Levels, cfg.CellsPerLevel, cfg.Decay, cfg.Hasher = sc.Levels, sc.CellsPerLevel, sc.Decay, sc.Hasher
	n := normalized{}
	n.kind, n.param = law.Params(cfg.Decay)
	if n.kind == law.KindCustom {
		return bad("Decay must be decay.None, Exponential or Linear (a custom law cannot run on the server); got %T", cfg.Decay)
	}
	if cfg.Period < 0 || (cfg.Period > 0 && cfg.Period < time.Millisecond) {
		return bad("Period must be 0 or >= 1ms; got %v", cfg.Period)
	}
	if cfg.Period%time.Millisecond != 0 {
		return bad("Period must be a whole number of ms; got %v", cfg.Period)
	}
	if cfg.Period == 0 {
		if cfg.Generations > 1 {
			return bad("Generations needs Period > 0; got Generations=%d, Period=0", cfg.Generations)
		}
		cfg.Generations = 1
	} else {
		if cfg.Generations == 0 {
			cfg.Generations = 2
		}
		if cfg.Generations < 2 || cfg.Generations > maxGenerations {
			return bad("Generations must be >= 2 and <= %d with Period > 0; got %d", maxGenerations, cfg.Generations)
		}
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
	}
	if cfg.Shards > maxShards {
		return bad("Shards must be at most %d (a Redis Cluster has %d slots: more shards cannot spread further); got %d", maxShards, maxShards, cfg.Shards)
	}
	if cfg.Timeout < 0 {
		return bad("Timeout must be >= 0; got %v", cfg.Timeout)
	}
	n.Config = cfg
	// The bounds as configured, infinite ones saturated at ±MaxFloat32
	// as atomiccell.Rules does: a cell stores its clamped value rounded
	// up to float32, and every read caps a score back at Hi (sketch.lua,
	// aggregate), as the in-process sketch does.
	n.lo, n.hi = max(cfg.Lo, -math.MaxFloat32), min(cfg.Hi, math.MaxFloat32)
	agg := map[sketch.Aggregator]string{sketch.Min: "min", sketch.Max: "max", sketch.Mean: "mean"}[cfg.Aggregator]
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%v|%s|%s|%s|%d|%d|%d", n.kind, fmtFloat(n.param), fmtFloat(n.lo), fmtFloat(n.hi), agg,
		cfg.Seed, cfg.Generations, cfg.Period.Milliseconds())
	n.fp = h.Sum32()
	b := make([]byte, 0, 50)
	for _, u := range []uint32{cfg.Levels, cfg.CellsPerLevel, cfg.Generations, n.fp} {
		b = binary.LittleEndian.AppendUint32(b, u)
	}
	for _, f := range []float64{float64(cfg.Period.Milliseconds()), n.param, n.lo, n.hi} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	b = append(b, kindCodes[n.kind], aggCodes[cfg.Aggregator])
	n.cfg = string(b)
	if math.IsNaN(n.lo) || math.IsNaN(n.hi) {
		return bad("Lo and Hi must not be NaN")
	}
	return n, nil
}
