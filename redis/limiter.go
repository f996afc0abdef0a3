package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/units"
	"github.com/lfgrudge/grudge/sketch"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Limit is a token bucket: Rate tokens per second refill a bucket of
// Burst tokens. Both must be finite and > 0, Burst at least 2^-126
// (float32's least normal number, about 1.2e-38: below it a cell's
// rounding step is no longer about Burst x 2^-23), and Burst/Rate (the
// time a full bucket takes to drain) at most 9e9 s (285 years).
type Limit struct {
	Rate  float64 // tokens per second
	Burst float64 // bucket size: the most debt a key may carry
}

// PerSecond returns a Limit of rate tokens per second with burst.
func PerSecond(rate, burst float64) Limit { return Limit{Rate: rate, Burst: burst} }

// Decision is AllowN's answer, in the shape of redis_rate's Result.
type Decision struct {
	Allowed bool
	Limit   Limit
	// Remaining is Burst minus the key's debt after the decision (the
	// tokens a request could take right now), >= 0.
	Remaining float64
	// RetryAfter is -1 when the request was allowed, as in redis_rate.
	// When denied: the exact wait, rounded up to the ms, after which the
	// same request fits if nothing else is admitted meanwhile (never
	// early, but for a limit counting tokens by the float64 rounding of
	// the server's drain: see Limiter; and but for a deny cache's local
	// denial after admissions of keys sharing the key's server cells:
	// see DenyCacheCells); -1 also when n > Burst (it never fits), and on a denial
	// made without the server that has no wait to give: FailClosed's,
	// and LocalFallback's for an n above the fallback's Burst/N but
	// within Burst (the fallback can never take it, the server can once
	// back); their error (ErrDegraded) says the server could not decide.
	// Limit is then the limiter's, not the fallback's. For a limit
	// counting tokens (not exact units), a wait may be late so that it
	// is never early across the rounding its sketch's cells meet while
	// the debt lasts (docs/distributed.md, "Sweep slack"): the server's
	// by 1 ms for each rebase of the key's generation that can come
	// before it (one after the generation's first 2^31 ms, then at most
	// one per 2^30 ms); the deny cache's or the LocalFallback's by
	// floor(Burst/Rate / 2^29 ms) ms (a horizon sweep every 6.2 days at
	// most); the deny cache's also by one float32 step of its Burst of
	// drain when the debt is at the cap (a cell stores Burst rounded up
	// and reads it capped), by up to one float32 step of Burst of drain
	// (it stores the server's debt rounded up) and by the server's
	// rebase slack bound (2 + wait / 2^30 ms: it copies the server's
	// debt, which a rebase may raise). The LocalFallback's waits are
	// otherwise exact for its own cells: computed from the key's cells
	// as its own TryUpdate decays them, a retry at RetryAfter fits and
	// one a millisecond earlier does not, if nothing else is admitted
	// meanwhile. Those cells count tokens (float32, every drain rounded
	// up), not the exact units of the server's limits, so against the
	// exact bucket at Rate/N and Burst/N its waits may be up to 1 ms
	// late, and a request that bucket admits may be denied with a
	// RetryAfter of 1 ms; never the other way.
	RetryAfter time.Duration
	// ResetAfter is the time until the key's debt drains to 0 (the
	// LocalFallback's: exactly for its cells, up to its sweep slack
	// above).
	ResetAfter time.Duration

	// nextAfter is the LocalFallback's time until Remaining grows by one
	// whole token, found on its cells as RetryAfter is (0: none, or not
	// the fallback's; DecideContext then works it out from Remaining).
	nextAfter time.Duration
}

// LimiterConfig describes a global Limiter.
type LimiterConfig struct {
	Name string // base key, as Config.Name
	// Limit is the bucket every instance sharing Name must use. The
	// server refuses a call whose sketch differs (its law or Hi), but two
	// limits with the same drain time of a Burst and the same units
	// build the same sketch (10/s x 10 and 5/s x 5): they are not told
	// apart, and each reads the other's debt as a share of its own
	// Burst. Give each limit its own Name.
	Limit Limit

	Levels        uint32 // L of the server sketch; 0 means 4
	CellsPerLevel uint32 // M of the server sketch per shard; 0 means 100_000
	// Hasher and Seed place keys in cells, as in Config. The default,
	// sketch.XXH3() under Seed 0, is public: anyone can compute which
	// keys share a client's cells and throttle it with their traffic.
	// For keys that clients choose (IPs, user names, API keys) use
	// sketch.SipHash() with a secret Seed, the same on every instance
	// (from the deployment's secrets, as a session key is): unlike the
	// local limit package, the module cannot draw a random seed, since
	// every instance must map a key to the same cells. The deny cache
	// and the LocalFallback hash with it too (under seeds derived from
	// Seed), so a crafted collision cannot deny a victim locally either.
	Hasher  sketch.HasherFactory
	Seed    uint64
	Shards  uint32        // as Config.Shards
	Timeout time.Duration // per call when the context has no deadline; 0 means none

	// Policy decides when the server cannot (FailClosed by default).
	Policy Policy
	// Instances is N for LocalFallback (the local limiter runs at
	// Rate/N, Burst/N, each rounded down so that N of them never exceed
	// Rate and Burst; Burst/N must be at least 2^-126); 0 means 1.
	Instances uint32
	// FallbackCells is M of the local fallback limiter; 0 means 65536.
	FallbackCells uint32

	// DenyCacheCells is M of the local deny cache (4 levels); 0 disables
	// it. With it, a key the server denied is denied locally, with no
	// round trip, until its reported debt has drained enough. A local
	// denial's RetryAfter, ResetAfter and Remaining count from the debt
	// the cache learned for the key: admissions since of keys that share
	// its server cells (other instances' of any key, this instance's of
	// other keys) raise the server's debt past it and can make them
	// early; the retry then gets the server's answer
	// (docs/distributed.md, "Why the limit stays exact"). A key whose
	// cache cells all hold other keys' learned debts (a collision in the
	// cache, its false-positive rate about (1 - e^(-h/M))^4 for h keys
	// held in M cells) is denied locally as if it owed the least of them,
	// for as long as those keys keep being learned, without asking the
	// server; a secret Seed keeps such a collision from being crafted.
	DenyCacheCells uint32
	// PreCheck also feeds the deny cache with the debt the server reports
	// for admitted requests, so a key this instance has driven to its
	// limit is denied locally before the server says so. Needs
	// DenyCacheCells > 0.
	PreCheck bool

	// ServerCheck says what NewLimiter does with the start-up check
	// (Sketch.Check: Redis Functions, the ACL, a maxmemory-policy that
	// cannot evict the sketch, and a string size within the servers'
	// proto-max-bulk-len): CheckRefuse (the zero value) returns
	// its error, CheckWarn logs it and goes on, CheckSkip does not check.
	ServerCheck ServerCheck
	// CheckTimeout bounds the start-up check; 0 means 5s.
	CheckTimeout time.Duration
	// Logger receives CheckWarn's warning; nil means slog.Default().
	Logger *slog.Logger

	// Clock replaces the server clock and the local sketches' clock (ms);
	// for deterministic tests only.
	Clock sketch.Clock
}

// ServerCheck is LimiterConfig.ServerCheck.
type ServerCheck uint8

const (
	// CheckRefuse: NewLimiter returns the start-up check's error (it
	// matches ErrEvictionPolicy, ErrNoFunctions, ErrPermission, or
	// ErrInvalidConfig for a string above a server's proto-max-bulk-len,
	// when that is the cause, or is the network error of an unreachable
	// server).
	CheckRefuse ServerCheck = iota
	// CheckWarn: NewLimiter logs the start-up check's error as a warning
	// and returns the limiter.
	CheckWarn
	// CheckSkip: NewLimiter does not contact the server.
	CheckSkip
)

// String names the mode.
func (c ServerCheck) String() string {
	switch c {
	case CheckRefuse:
		return "CheckRefuse"
	case CheckWarn:
		return "CheckWarn"
	case CheckSkip:
		return "CheckSkip"
	}
	return fmt.Sprintf("ServerCheck(%d)", uint8(c))
}

// Limiter is a global token-bucket limiter over a server Sketch, in debt
// form: Lo 0, Min aggregation, and a Linear law; AllowN is TryUpdate(key,
// n, Burst). When the rate is a short fraction (10/s, 3/s, 1000/h,
// Every(7ms)) whose units, chosen as package limit chooses them (a whole
// number drains each millisecond), hold Burst in at most 2^24, the
// sketch counts debt in those units, and every decision, RetryAfter and
// ResetAfter for whole-token (or whole-unit) requests is exactly the
// rational token bucket's at millisecond resolution. Otherwise it counts
// tokens, each stored debt a float32 rounded up: decisions are late by
// that rounding (about Burst x 2^-23 tokens per write), and early only
// by the float64 rounding of the server's linear drain (debt - rate x
// dt/1000, to nearest: at most about 2^-52 of the debt, 1.5e-11 token
// at 342,392 tokens, audit 86; a wait is then 1 ms short only where the
// exact one lies that close above a whole ms). Safe for concurrent use; no lock, no goroutine. The caller
// owns (and closes) the client. The zero Limiter is not usable: its
// decisions panic ("redis: zero Limiter; use NewLimiter").
type Limiter struct {
	sk       *Sketch
	limit    Limit
	unit     float64 // units per token (1: tokens): the sketch's Hi is Burst x unit
	burstU   float64 // Burst x unit
	rateU    float64 // units drained per second
	exactU   bool    // exact units: every stored debt a whole number of units below 2^24
	policy   Policy
	cache    *denyCache     // nil: no deny cache
	precheck bool           // feed cache on admissions too
	fallback *sketch.Sketch // LocalFallback only
	fbEngine *core.Sketch   // fallback's engine: its debt and waits from one load (OutlookString)
	lt       *localTime     // the deny cache's and the fallback's time
	fbLimit  Limit          // Rate/N, Burst/N
	fbSlack  time.Duration  // sweepSlack of the fallback: added to its waits
	fbExcess time.Duration  // capExcess of the fallback: DecideContext's NextAfter at the cap (its waits search the cells)
	excess   time.Duration  // capExcess of the server's cells (in units): DecideContext's NextAfter at the cap
	degraded atomic.Bool
	c        counters
}

// NewLimiter returns a Limiter for cfg over a rueidis client (standalone
// or cluster), or an error matching ErrInvalidConfig, or the start-up
// check's error (see LimiterConfig.ServerCheck).
func NewLimiter(client rueidis.Client, cfg LimiterConfig) (*Limiter, error) {
	if core.IsNil(client) {
		return nil, errNilClient
	}
	return newLimiter(rueidisConn{client}, cfg)
}

// NewLimiterGoRedis is NewLimiter over a go-redis v9 client (a
// *redis.Client, *redis.ClusterClient, *redis.Ring or any other
// redis.UniversalClient) whose options set ContextTimeoutEnabled: true;
// see NewGoRedis, also about go-redis's own retries.
func NewLimiterGoRedis(client goredis.UniversalClient, cfg LimiterConfig) (*Limiter, error) {
	c, err := newGoredisConn(client)
	if err != nil {
		return nil, err
	}
	return newLimiter(c, cfg)
}

// maxDrainSeconds bounds Burst/Rate: a decision's RetryAfter and
// ResetAfter are at most the time a full bucket takes to drain, and must
// fit a time.Duration (292 years) and the server's reply (whole ms below
// 2^53).
const maxDrainSeconds = 9e9

// minBurst is the least Burst (and LocalFallback's Burst/N): float32's
// least normal number, 2^-126. Below it the cells are subnormal and
// their rounding step is 2^-149, not Burst x 2^-23 (audit 123).
const minBurst = 0x1p-126

func newLimiter(c conn, cfg LimiterConfig) (*Limiter, error) {
	bad := func(format string, args ...any) (*Limiter, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	lim := cfg.Limit
	if !(lim.Rate > 0) || math.IsInf(lim.Rate, 0) {
		return bad("Limit.Rate must be finite and > 0; got %v", lim.Rate)
	}
	if !(lim.Burst > 0) || math.IsInf(lim.Burst, 0) {
		return bad("Limit.Burst must be finite and > 0; got %v", lim.Burst)
	}
	if lim.Burst < minBurst {
		return bad("Limit.Burst must be at least 2^-126 (%v: float32's least normal number; a cell rounds a debt below it by more than Burst x 2^-23); got %v", minBurst, lim.Burst)
	}
	if d := lim.Burst / lim.Rate; !(d <= maxDrainSeconds) {
		return bad("Limit.Burst/Limit.Rate (the time a full bucket takes to drain) must be at most %v s (285 years: a time.Duration, and a whole number of ms the server replies exactly); got %v s", float64(maxDrainSeconds), d)
	}
	if cfg.Policy > LocalFallback {
		return bad("Policy must be FailClosed, FailOpen or LocalFallback; got %v", cfg.Policy)
	}
	if cfg.PreCheck && cfg.DenyCacheCells == 0 {
		return bad("PreCheck needs DenyCacheCells > 0")
	}
	if cfg.ServerCheck > CheckSkip {
		return bad("ServerCheck must be CheckRefuse, CheckWarn or CheckSkip; got %v", cfg.ServerCheck)
	}
	if cfg.CheckTimeout < 0 {
		return bad("CheckTimeout must be >= 0; got %v", cfg.CheckTimeout)
	}
	// Exact units where they exist (every stored debt a whole number of
	// units below 2^24); otherwise tokens, whose float32 cells keep
	// fractions of a token (AllowN takes any n) better than a rounded
	// unit would.
	unit, rateU, exactU := 1.0, lim.Rate, false
	if u, drain, exact, _ := units.Units(lim.Rate, lim.Burst); exact {
		unit, rateU, exactU = u, 1000*drain, true
	}
	burstU := lim.Burst * unit
	if cfg.Clock != nil && core.IsNil(cfg.Clock) {
		return bad("Clock must not be a nil %T (leave it nil for the server's clock)", cfg.Clock)
	}
	lt := newLocalTime(cfg.Clock)
	sk, err := newSketch(c, Config{
		Name: cfg.Name, Levels: cfg.Levels, CellsPerLevel: cfg.CellsPerLevel,
		Decay: decay.Linear(rateU), Lo: 0, Hi: burstU, Aggregator: sketch.Min,
		Hasher: cfg.Hasher, Seed: cfg.Seed, Shards: cfg.Shards, Timeout: cfg.Timeout, Clock: lt.serverClock(),
	})
	if err != nil {
		return nil, err
	}
	l := &Limiter{sk: sk, limit: lim, unit: unit, burstU: burstU, rateU: rateU, exactU: exactU, policy: cfg.Policy, precheck: cfg.PreCheck, lt: lt,
		excess: capExcess(burstU, rateU)}
	if cfg.DenyCacheCells > 0 {
		if l.cache, err = newDenyCache(rateU, burstU, exactU, cfg.DenyCacheCells, cfg.Hasher, cfg.Seed, l.lt, func() int64 { return sk.rebaseAt }); err != nil {
			return bad("deny cache: %w", err)
		}
	}
	if cfg.Policy == LocalFallback {
		n := cfg.Instances
		if n == 0 {
			n = 1
		}
		cells := cfg.FallbackCells
		if cells == 0 {
			cells = 1 << 16
		}
		// Rounded down: N fallbacks at Burst/N each (Rate/N) admit at
		// most Burst (Rate) together, which x/n rounded to nearest can
		// pass by an ulp each (audit 149: 10 x 3.3333333333333335).
		l.fbLimit = Limit{Rate: divDown(lim.Rate, n), Burst: divDown(lim.Burst, n)}
		if l.fbLimit.Burst < minBurst {
			return bad("Limit.Burst/Instances (LocalFallback's Burst) must be at least 2^-126 (%v); got %v", minBurst, l.fbLimit.Burst)
		}
		l.fbSlack = sweepSlack(l.fbLimit.Rate, l.fbLimit.Burst, false) // the fallback counts in tokens
		l.fbExcess = capExcess(l.fbLimit.Burst, l.fbLimit.Rate)
		l.fallback, err = sketch.New(sketch.Config{
			Levels: 4, CellsPerLevel: cells, Decay: decay.Linear(l.fbLimit.Rate), Lo: 0, Hi: l.fbLimit.Burst,
			Aggregator: sketch.Min, Hasher: cfg.Hasher, Seed: cfg.Seed ^ 0xFA11BAC, Clock: l.lt.tb,
		})
		if err != nil {
			return bad("local fallback: %w", err)
		}
		l.fbEngine = core.SketchOf(l.fallback)
	}
	// The start-up check comes last: a bad configuration is refused
	// without a round trip.
	if cfg.ServerCheck != CheckSkip {
		timeout := cfg.CheckTimeout
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := sk.Check(ctx)
		cancel()
		if err != nil {
			if cfg.ServerCheck == CheckRefuse {
				return nil, err
			}
			logger := cfg.Logger
			if logger == nil {
				logger = slog.Default()
			}
			logger.Warn("redis: the start-up check of the limiter's server failed; going on (LimiterConfig.ServerCheck is CheckWarn)",
				"name", cfg.Name, "err", err)
		}
	}
	return l, nil
}

// Limit returns the limiter's Limit.
func (l *Limiter) Limit() Limit { return l.limit }

// Sketch returns the server sketch the limiter runs on. Its scores are
// debt in the limiter's units: a score s is s x Burst / Hi tokens (Hi of
// its Config).
func (l *Limiter) Sketch() *Sketch { return l.sk }

// Degraded reports whether the last round trip failed: decisions are
// being made by the Policy until a round trip succeeds again.
func (l *Limiter) Degraded() bool { return l.degraded.Load() }

// Stats returns the counters.
func (l *Limiter) Stats() Stats { return l.c.snapshot() }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n tokens may be taken for key now, globally:
// across every instance sharing the server sketch, exactly (TryUpdate on
// the server, one round trip), except that the deny cache may answer a
// denial locally (see LimiterConfig.DenyCacheCells). n must be finite and
// >= 0 (it panics otherwise, as a NaN would poison the cells). n = 0 only
// reads (a peek, as in redis_rate): allowed, with the key's Remaining
// and ResetAfter, and it writes nothing, on the server and in the
// LocalFallback alike; under a fault FailOpen and LocalFallback allow
// it and FailClosed denies it, as it denies everything.
//
// When the server fails or times out, the Policy decides, and AllowN
// returns that decision with an error matching ErrDegraded that also
// wraps the cause; otherwise the error is nil.
func (l *Limiter) AllowN(ctx context.Context, key string, n float64) (Decision, error) {
	if l.sk == nil {
		panic("redis: zero Limiter; use NewLimiter")
	}
	checkCtx("AllowN", ctx)
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		panic("redis: AllowN n must be finite and >= 0; got " + fmtFloat(n))
	}
	l.c.decisions.Add(1)
	nU := min(n*l.unit, math.MaxFloat64) // a finite n of a small unit may overflow: it never fits either way
	if n > l.limit.Burst {
		// Decided in tokens: n one ulp above Burst may scale to
		// Burst's units exactly (audit 60: 5.140000000000001 x 100 is
		// 514), and must still never fit.
		nU = max(nU, math.Nextafter(l.burstU, math.Inf(1)))
	}
	// A request above Burst never fits: the server answers it with the
	// key's own debt (the cache would deny it on any debt).
	if l.cache != nil && nU <= l.burstU {
		if denied, debt, retry, reset := l.cache.check(key, nU); denied {
			l.c.cacheDenials.Add(1)
			return Decision{Limit: l.limit, Remaining: l.tokens(l.burstU - debt), RetryAfter: retry, ResetAfter: reset}, nil
		}
	}
	l.c.serverCalls.Add(1)
	h := l.sk.hasher.Sum64String(key)
	var c call
	if l.cache != nil {
		c = l.cache.begin(h)
	}
	var r reply
	var err error
	if nU == 0 {
		// A request of 0 only reads, as redis_rate's does: a write of 0
		// re-stores every cell rounded up to float32, which for a limit
		// counting tokens adds up over polls and made a RetryAfter given
		// before them early (audit 46: 7 polls, 7 ms early). It always
		// fits.
		r, err = l.sk.call(ctx, "Q", h, 0, 0)
		r.ok, r.resetMs = true, max(r.resetMs, 0)
	} else {
		r, err = l.sk.tryUpdate(ctx, h, nU, l.burstU)
	}
	if err != nil {
		if l.cache != nil {
			c.end()
		}
		return l.fault(key, n, err)
	}
	l.degraded.Store(false)
	d := Decision{Allowed: r.ok, Limit: l.limit, Remaining: l.tokens(l.burstU - r.estimate),
		RetryAfter: msDuration(r.retryMs), ResetAfter: msDuration(r.resetMs)}
	if r.ok {
		d.RetryAfter = -1
	} else if r.retryMs < 0 {
		d.RetryAfter = -1
	}
	if l.cache != nil {
		// A denial (or, with PreCheck, any reply) puts the key's debt
		// there; an admission raises a key the cache holds, so a later
		// local denial's waits count from this instance's own
		// admissions too.
		l.cache.observe(c, key, r.estimate, r.resetMs, !r.ok || l.precheck)
	}
	return d, nil
}

// tokens converts u units of room to tokens, >= 0 and at most Burst.
func (l *Limiter) tokens(u float64) float64 {
	if u <= 0 {
		return 0
	}
	if u >= l.burstU {
		return l.limit.Burst
	}
	return u / l.unit
}

// fault records a failed round trip and returns the policy's decision.
func (l *Limiter) fault(key string, n float64, cause error) (Decision, error) {
	l.c.serverErrors.Add(1)
	if errors.Is(cause, context.DeadlineExceeded) || errors.Is(cause, os.ErrDeadlineExceeded) {
		l.c.timeouts.Add(1)
	}
	if !l.degraded.Swap(true) {
		l.c.degradedPeriods.Add(1)
	}
	err := fmt.Errorf("%w (policy %v): %w", ErrDegraded, l.policy, cause)
	d := Decision{Limit: l.limit, RetryAfter: -1}
	switch l.policy {
	case FailOpen:
		l.c.policyAdmits.Add(1)
		d.Allowed, d.Remaining = true, l.limit.Burst
	case LocalFallback:
		fb := l.fbLimit
		if n > fb.Burst && n <= l.limit.Burst {
			// The fallback (Burst/N) can never take n, the server can:
			// no decision, as FailClosed (the request is not "never").
			l.c.policyDenials.Add(1)
			break
		}
		d.Limit = fb
		// The waits come from the key's cells as the fallback's own
		// TryUpdate will decay them (core.Outlook.FitsIn), not from
		// the decayed debt a Query reads: draining that already rounded
		// value again came out an ulp of a token early at rates whose
		// drain a float does not hold (audit 61: 1000/13 per s over 3
		// instances), and a debt read at the cap, Burst/N rounded up to
		// float32 and read capped, 1 ms early (audit 60). The closed
		// forms are the search's first guess.
		lag := l.lt.lag()
		wait := func(ms int64) time.Duration {
			if ms < 0 {
				return -1
			}
			return later(withSlack(msDuration(ms), l.fbSlack), lag)
		}
		// A peek (n = 0) reads only: a TryUpdate of 0 re-stamps the
		// cells and rounds them up to float32, and peeks made while
		// waiting made the retry at RetryAfter 1 ms early (audit 69).
		d.Allowed = n == 0 || n <= fb.Burst && l.fallback.TryUpdateString(key, n, fb.Burst)
		o := l.fbEngine.OutlookString(key) // the debt and both waits from one load
		debt := o.Value()
		d.Remaining = max(fb.Burst-debt, 0)
		if fl := math.Floor(d.Remaining); fl < math.Floor(fb.Burst) {
			// The next whole token, on the cells, as Remaining reads
			// them: working it out from Remaining, a float64 of the
			// cells' float32 debt, came out 1 ms early (audit 98: 99 ms
			// at 10/s x 7.3, Remaining 2.999999999999999 at +99 ms),
			// and so did TryUpdate's test, debt + n <= Burst, which
			// rounds otherwise (audit 99: 0.6/s x 12.7).
			next := fl + 1
			d.nextAfter = wait(o.RemainsIn(next, fb.Burst, guessMs(retryAfter(debt, next, fb.Burst, fb.Rate))))
		}
		d.ResetAfter = wait(o.FitsIn(0, 0, guessMs(resetAfter(debt, fb.Rate))))
		if d.Allowed {
			l.c.policyAdmits.Add(1)
		} else {
			l.c.policyDenials.Add(1)
			d.RetryAfter = -1 // n above Burst/N: never
			if n <= fb.Burst {
				d.RetryAfter = wait(o.FitsIn(n, fb.Burst, guessMs(retryAfter(debt, n, fb.Burst, fb.Rate))))
			}
		}
	default: // FailClosed
		l.c.policyDenials.Add(1)
	}
	return d, err
}

// divDown returns the largest float64 q with q x n <= x exactly (x, n >
// 0): x/n rounded down where rounding to nearest went up.
func divDown(x float64, n uint32) float64 {
	q := x / float64(n)
	for q > 0 && math.FMA(q, float64(n), -x) > 0 {
		q = math.Nextafter(q, 0)
	}
	return q
}
