// Package redis holds a decaying count-min sketch on a Redis server, shared
// by every instance of a service, and a global token-bucket Limiter built on
// it with the lock-free sketch (package sketch) in front. It is a nested
// module (github.com/lfgrudge/grudge/redis) so the core keeps no Redis
// dependency.
//
// A *Limiter is an httplimit.Limiter as it is (DecideContext and
// Policies): httplimit.Wrap(l, mux) limits every client across every
// instance, with the draft's header fields; a round trip that fails is
// decided by the Limiter's Policy (FailClosed: 503 from the middleware,
// FailOpen and LocalFallback: their decision).
//
// # Model
//
// The server holds L x M cells per generation in one Redis string (a
// 40-byte header, then the cells), each cell the same 8-byte word as
// package atomiccell: float32 score (rounded toward +Inf) and uint32 age
// stamp in ms from the generation's epoch. The strings hold
// Shards x Generations x (40 + L*M*8) bytes whatever the number of keys
// (the server's allocator rounds each string up to a size class: up to
// a quarter more by MEMORY USAGE).
// The client hashes the key with the core's hashers and layout (a key
// maps to the cells a sketch.Sketch of the same shape and seed maps it
// to) and sends the L cell offsets; one server function (sketch.lua, a Redis
// Function library loaded with FUNCTION LOAD and called with FCALL, so
// Redis 7.0 or later) opens the generation strings, reads the server
// clock (TIME), decays, aggregates, clamps, rounds up and commits all L
// cells, atomically (Redis runs one function at a time), in one round
// trip. Every call declares every key the function touches: "{Name}:g"
// without rotation, the ring "{Name}:g:0" .. "{Name}:g:<G-1>" with it
// (generation i in slot i mod G), all under one hash tag, so a Redis
// Cluster routes the call to the one slot that holds them and migrates
// them with the slot:
//
//	tm := max(TIME, the creation time of every generation string)
//	for each live generation g (created, or reset when its slot holds an expired one):
//	    for each level l: v[l] = decay(score(g, off[l]), tm - epoch(g) - stamp(g, off[l]))
//	est := aggregate(v of the oldest live generation)
//	if op is TryUpdate and est + delta > limit: reply denied (retry time from the Linear law)
//	for each live generation g, each level l:
//	    cell := pack(addUp(v[l], delta, Lo, Hi), max(stamp, tm - epoch(g)))
//	    // addUp: the least float32 >= clamp(v[l] + delta) with the sum
//	    // exact (TwoSum), as the local sketch's add (docs/precision.md)
//
// A generation's epoch is rebased on the first write 2^31 ms after it
// (every cell decayed to now and restamped, exact by the composition law;
// under the linear law a cell the float32 round-up raised is stamped back
// by the whole ms that rounding takes to drain, so it never reads below
// the decayed value and never above it by 1 ms of drain or more),
// so any idle time, 1 ms to years, decays as the law says; ages are
// computed in float64 from the 64-bit epoch in the header. A backwards step
// of the server clock is no elapsed time per cell (a cell stamped later is
// not decayed), so the sketch never decays more than real time; a
// limiter's RetryAfter and ResetAfter still count from the clock's own
// reading (longer by how far it lies behind the time the call ran at).
//
// # Guarantees
//
//   - Every operation is one function call: atomic with respect to every call
//     from every instance, on the server's clock, so instances with skewed
//     clocks agree. Sketch.TryUpdate racing from N clients admits exactly
//     the limit (no decay), and with Min aggregation and non-negative
//     deltas an estimate never falls below the key's true score.
//   - Foreign or malformed data under a key (wrong type, size, magic,
//     shape, configuration fingerprint, NaN or Inf cell) is an error
//     starting "grudge:" from the server; no call panics or overwrites it.
//   - Calls are never retried by the sketch (a write is never applied
//     twice by it), except after replies that say no code ran: "Function
//     not found" (a fresh or restarted server: the client loads the
//     library on every node it can reach, a node that is down not
//     stopping it, and calls once more) and TRYAGAIN (a cluster
//     slot migrating with the sketch's keys split between two nodes: it
//     waits and calls again). go-redis retries after a network error on
//     its own unless told not to (see NewGoRedis); such a retry can only
//     over-count.
//   - Context deadlines bound every call; Config.Timeout supplies one when
//     the context has none. A call that timed out may still have run on
//     the server (docs/distributed.md, "Timed out, yet executed"). A nil
//     context panics, naming itself, before any round trip or cache look-up.
//   - Sketch.Check (NewLimiter runs it; LimiterConfig.ServerCheck) names
//     what would make the servers unfit: no Redis Functions
//     (ErrNoFunctions), an ACL that denies a command the sketch needs
//     (ErrPermission; RequiredACL lists them), a maxmemory-policy that can
//     evict the sketch (ErrEvictionPolicy: allkeys-*; noeviction and
//     volatile-* are safe, the keys have no TTL), and a generation's
//     string larger than a node's proto-max-bulk-len, which would fail
//     every write (ErrInvalidConfig; 512 MiB by default: split it with
//     Shards).
//
// Clients: New and NewLimiter take a rueidis.Client, NewGoRedis and
// NewLimiterGoRedis a go-redis v9 redis.UniversalClient (Client,
// ClusterClient, Ring, or an AutoPipeliner built from a Client: see
// NewGoRedis), standalone or Redis Cluster.
//
// Limiter adds the local deny cache (a key the server denied is denied
// locally, with no round trip, while its reported debt has not drained),
// an optional pre-check (the same cache also fed on admissions), and the
// fault policies FailClosed, FailOpen and LocalFallback, with Degraded and
// counters. Neither the cache nor the pre-check ever admits: the global
// limit stays exact, and they are stale only toward denial.
//
// docs/distributed.md has the design, the exactness argument, the failure
// policies and the measured numbers.
package redis
