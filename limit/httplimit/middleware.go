package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/internal/common"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/limit"
)

// Limiter is what a Middleware limits with: *limit.Limiter and
// *limit.Multi implement it, and so does the Redis module's
// *redis.Limiter (a limit shared by every instance of a service).
type Limiter interface {
	// DecideContext decides a request of n >= 1 tokens for key, now. A
	// nil error means d is the limiter's decision. A non-nil error means
	// the limiter could not decide as configured (a remote store failed
	// or timed out); d is then what its fallback decided, if anything:
	// a decision is a Decision that is Allowed, Never, or a denial with
	// RetryAfter > 0.
	DecideContext(ctx context.Context, key string, n int) (limit.Decision, error)
	// Policies returns the token buckets the limiter enforces, at least
	// one, with distinct names; a Decision's Policy names one of them.
	Policies() []limit.Policy
}

// ErrLimiter is matched (errors.Is) by the error the error handler gets
// when the limiter returned an error and no decision; the error also
// wraps the limiter's. The default handler answers 503.
var ErrLimiter = errors.New("httplimit: the limiter could not decide")

// Middleware limits the requests of each key (by default the client IP,
// IPv6 folded to /64) with a Limiter. Create one with New (and one per
// route with With); the zero Middleware is not usable (Handler and
// Allow panic with "httplimit: zero Middleware; use New"). It is safe
// for concurrent use.
//
// For each request, in order: WithSkip's function may let it through
// untouched; the key is extracted (an error goes to the error handler);
// WithExcludedKey's function may let it through untouched; the cost is
// computed (below 1: the error handler); the limiter decides. A limiter
// error goes to WithLimiterError's function, and when the limiter made
// no decision at all, to the error handler (wrapped in ErrLimiter);
// otherwise the decision stands (a fallback's: the Redis module's
// FailOpen or LocalFallback). Then WithHook's function sees the
// decision, the header fields are set, and the request goes to the next
// handler if admitted, to the denied handler if not.
//
// Every decided answer carries the RateLimit-Policy and RateLimit fields
// of Draft; a denial is 429 Too Many Requests with Retry-After in whole
// seconds rounded up (so a client retrying at that second is never
// early for its own debt). A request that can never be admitted (cost
// above the burst) is 429 without Retry-After.
type Middleware struct {
	l        Limiter
	key      KeyFunc
	cost     func(*http.Request) int
	legacy   bool
	problem  bool
	hook     func(r *http.Request, key string, d limit.Decision)
	onError  func(w http.ResponseWriter, r *http.Request, err error)
	onDenied func(w http.ResponseWriter, r *http.Request, d limit.Decision) // nil: deny
	onLimErr func(r *http.Request, key string, err error)
	skip     func(r *http.Request) bool
	excluded func(key string) bool
	policies []policy                   // the limiter's at New, in order: their names (fixed)
	announce *atomic.Pointer[announced] // the RateLimit-Policy value, rebuilt when SetLimit or SetBurst changes a policy; its own per build (With copies m)
}

// policy is one of the limiter's policies, as the fields name it.
type policy struct {
	name   string
	quoted string // name as an sf-string
}

// isInf reports whether l is limit.Inf: a policy announced nowhere.
func isInf(l limit.Limit) bool { return l == limit.Inf || math.IsInf(float64(l), 1) }

// announced is the RateLimit-Policy value and the policies it was built
// from.
type announced struct {
	pols  []limit.Policy
	value string // "" when every policy is Inf
	// torn: a refill the limiter reported was for another policy than
	// the one read (SetLimit or SetBurst between the two reads), so the
	// value may lack it; such a value is not cached.
	torn bool
}

// announcedFor builds the RateLimit-Policy value of pols, the limiter's
// policies in order.
func announcedFor(pols []limit.Policy, refills []common.Refill) *announced {
	a := &announced{pols: pols, torn: refills != nil && len(refills) != len(pols)}
	for i, p := range pols {
		if isInf(p.Limit) {
			continue
		}
		if a.value != "" {
			a.value += ", "
		}
		var refill time.Duration
		// Only a refill read for this very policy (SetLimit or SetBurst
		// may have changed it between the two reads).
		if len(refills) == len(pols) {
			if refills[i].Burst == p.Burst && refills[i].Limit == float64(p.Limit) {
				refill = refills[i].Refill
			} else {
				a.torn = true
			}
		}
		a.value += policyField(sfString(p.Name), p, refill)
	}
	return a
}

// refillsOf returns how long l refills each of its policies, when l is
// one of package limit's limiters or the redis module's (nil otherwise).
func refillsOf(l Limiter) []common.Refill {
	return common.PolicyRefills(l)
}

// policyValue returns the RateLimit-Policy value for the limiter's
// current policies: the cached one while they are those it was built
// from, a rebuilt one after SetLimit or SetBurst changed one.
func (m *Middleware) policyValue() string {
	if m.announce == nil {
		return "" // the zero Middleware
	}
	a := m.announce.Load()
	pols := m.l.Policies()
	if !slices.Equal(pols, a.pols) {
		// The policies and their refills are two reads: a SetLimit or
		// SetBurst between them tears the pair. Read both again (a few
		// times), and cache only a value built from a matching pair
		// (audit 52: a torn pair announced a w without the refill, 10 s
		// short, and could stay cached).
		for range 4 {
			if a = announcedFor(pols, refillsOf(m.l)); !a.torn {
				m.announce.Store(a)
				break
			}
			pols = m.l.Policies()
		}
	}
	return a.value
}

// Option configures New and With.
type Option func(*Middleware)

// WithKey sets the key extractor (default RemoteIP()).
func WithKey(k KeyFunc) Option { return func(m *Middleware) { m.key = k } }

// WithCost sets the tokens a request costs (default 1); it must return
// n >= 1, or the request goes to the error handler with ErrBadCost
// (default: 500).
func WithCost(f func(*http.Request) int) Option { return func(m *Middleware) { m.cost = f } }

// WithLegacyHeaders also sets X-RateLimit-Limit (the burst),
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds until the bucket
// is full, rounded up) on every decided answer, except those of a
// limiter whose policies are all Inf (no fields at all; see SetHeaders).
func WithLegacyHeaders(on bool) Option { return func(m *Middleware) { m.legacy = on } }

// WithProblemJSON answers denials with an RFC 9457 application/problem+json
// body of Draft's quota-exceeded problem type (type
// "https://iana.org/assignments/http-problem-types#quota-exceeded", its
// title, status 429, a detail, the draft's extension member
// "violated-policies" naming the policy, and "retryAfter" in seconds)
// instead of text/plain.
func WithProblemJSON(on bool) Option { return func(m *Middleware) { m.problem = on } }

// WithHook calls f after every decision (admitted or not), before the
// answer is written: for metrics and logging. f must be safe for
// concurrent use and should be fast. nil removes it.
func WithHook(f func(r *http.Request, key string, d limit.Decision)) Option {
	return func(m *Middleware) { m.hook = f }
}

// WithErrorHandler answers requests the middleware cannot decide: the key
// cannot be extracted, the cost is invalid (ErrBadCost), or the limiter
// returned an error and no decision (ErrLimiter); err says why, for
// logs. The default answers 500 Internal Server Error for ErrNoClientIP,
// ErrNilRequest and ErrBadCost (the server's faults), 503 Service
// Unavailable for ErrLimiter, and 400 Bad Request otherwise, with the
// status text only: no error text reaches the client.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(m *Middleware) { m.onError = f }
}

// WithDeniedHandler answers denied requests instead of the default 429
// (throttled's DeniedHandler, ulule's WithLimitReachedHandler). The
// header fields (RateLimit-Policy, RateLimit, Retry-After unless d.Never)
// are already set when f runs; f writes the status and the body. Keep
// error text and the key out of the body. nil restores the default.
func WithDeniedHandler(f func(w http.ResponseWriter, r *http.Request, d limit.Decision)) Option {
	return func(m *Middleware) { m.onDenied = f }
}

// WithLimiterError calls f with every error the limiter returns, whether
// or not it also decided (a degraded Redis limiter decides by its
// Policy): for logs and metrics. nil removes it.
func WithLimiterError(f func(r *http.Request, key string, err error)) Option {
	return func(m *Middleware) { m.onLimErr = f }
}

// WithSkip lets through, before the key is extracted, the requests for
// which f returns true: not limited, no header fields, nothing debited
// (health checks, static files). nil removes it.
func WithSkip(f func(r *http.Request) bool) Option { return func(m *Middleware) { m.skip = f } }

// WithExcludedKey lets through the requests whose key f returns true
// for, as WithSkip but after the key is extracted (ulule's
// WithExcludedKey: an allowlist of clients). nil removes it.
func WithExcludedKey(f func(key string) bool) Option { return func(m *Middleware) { m.excluded = f } }

// New returns middleware limiting with l. It returns a *sketch.ConfigError
// (errors.Is(err, sketch.ErrInvalidConfig)), prefixed "httplimit: ", for
// a nil or zero limiter (no policies), a nil Option, a nil WithKey or
// WithErrorHandler function, or a policy whose name
// is not printable ASCII or repeats another's (give a Multi's windows
// names with limit.WithName), whose limit is not > 0, or whose burst is
// negative.
func New(l Limiter, opts ...Option) (*Middleware, error) {
	return build(&Middleware{key: RemoteIP(), onError: defaultError}, l, opts)
}

// With returns middleware with m's options and limiter l, then opts:
// one per route, sharing the key, hooks and handlers (chi's
// r.With(m.Handler), or mux.Handle(pattern, m.Handler(h)) per pattern).
// Its errors are New's.
func (m *Middleware) With(l Limiter, opts ...Option) (*Middleware, error) {
	if m.l == nil {
		return nil, bad("Middleware", nil, "With on a zero Middleware; use New")
	}
	c := *m
	return build(&c, l, opts)
}

func build(m *Middleware, l Limiter, opts []Option) (*Middleware, error) {
	var pols []limit.Policy
	if l != nil {
		pols = l.Policies()
	}
	if len(pols) == 0 {
		return nil, bad("Limiter", l, "New needs a limiter from limit.New or limit.NewMulti (or another with a policy); got nil or a zero limiter")
	}
	for i, o := range opts {
		if o == nil {
			return nil, bad("Option", i, "option %d is nil", i)
		}
		o(m)
	}
	if m.key == nil || m.onError == nil {
		return nil, bad("Option", nil, "WithKey and WithErrorHandler need a non-nil function")
	}
	m.l, m.policies = l, nil
	for _, p := range pols {
		if err := checkName(p.Name); err != nil {
			return nil, err
		}
		if !(p.Limit > 0) || p.Burst < 0 {
			return nil, bad("Policy", p, "policy %q: the limit must be > 0 and the burst >= 0; got %v and %d", p.Name, float64(p.Limit), p.Burst)
		}
		for _, q := range m.policies {
			if q.name == p.Name {
				return nil, bad("Name", p.Name, "policy names must be distinct (limit.WithName on each window); got %q twice", p.Name)
			}
		}
		q := policy{name: p.Name, quoted: sfString(p.Name)}
		m.policies = append(m.policies, q)
	}
	m.announce = new(atomic.Pointer[announced])
	m.announce.Store(announcedFor(pols, refillsOf(m.l)))
	return m, nil
}

// Wrap is New(l, opts...).Handler(next) that panics on an error: the
// middleware in one line.
func Wrap(l Limiter, next http.Handler, opts ...Option) http.Handler {
	m, err := New(l, opts...)
	if err != nil {
		panic(err)
	}
	return m.Handler(next)
}

// bad returns the *sketch.ConfigError of an invalid argument or option.
func bad(field string, value any, format string, args ...any) error {
	return core.ConfigErr("httplimit", field, value, format, args...)
}

// defaultError answers a request the middleware cannot decide: 500 for
// the server's faults, 503 when the limiter could not decide, 400 for
// the client's; the status text only.
func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	code := http.StatusBadRequest
	switch {
	case errors.Is(err, ErrLimiter):
		code = http.StatusServiceUnavailable
	case errors.Is(err, ErrNoClientIP) || errors.Is(err, ErrNilRequest) || errors.Is(err, ErrBadCost):
		code = http.StatusInternalServerError
	}
	http.Error(w, http.StatusText(code), code)
}

// Handler returns next behind the limiter: Allow, then next if it
// returned true. It panics if next is nil, or on the zero Middleware.
// An admitted request's tokens are spent when Allow decides it: they are
// not given back when next fails or panics. A request that reaches the
// handler twice is charged twice: net/http's client Transport resends an
// idempotent request (GET, HEAD, ...) on HTTP/1.1 when a reused
// connection closes without an answer, as a panicking handler's does.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if m.l == nil {
		panic("httplimit: zero Middleware; use New")
	}
	if next == nil {
		panic("httplimit: Handler needs a next handler; got nil")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.Allow(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Allow decides r as Handler does, for routers whose middleware is not an
// http.Handler wrapper (gin, echo): it sets the header fields on w and
// returns true when r should go on to its handler; otherwise it has
// answered r (429, or the error handler) and returns false. It panics on
// the zero Middleware.
func (m *Middleware) Allow(w http.ResponseWriter, r *http.Request) bool {
	if m.l == nil {
		panic("httplimit: zero Middleware; use New")
	}
	if m.skip != nil && m.skip(r) {
		return true
	}
	key, err := m.key(r)
	if err != nil {
		m.onError(w, r, err)
		return false
	}
	if m.excluded != nil && m.excluded(key) {
		return true
	}
	n := 1
	if m.cost != nil {
		if n = m.cost(r); n < 1 {
			m.onError(w, r, fmt.Errorf("%w; got %d", ErrBadCost, n))
			return false
		}
	}
	d, err := m.l.DecideContext(r.Context(), key, n)
	if err != nil {
		if m.onLimErr != nil {
			m.onLimErr(r, key, err)
		}
		if !d.Allowed && !d.Never && d.RetryAfter <= 0 {
			m.onError(w, r, fmt.Errorf("%w: %w", ErrLimiter, err))
			return false
		}
	}
	if m.hook != nil {
		m.hook(r, key, d)
	}
	m.SetHeaders(w.Header(), d)
	if d.Allowed {
		return true
	}
	if m.onDenied != nil {
		m.onDenied(w, r, d)
	} else {
		m.deny(w, d)
	}
	return false
}

// find returns the policy d names: d.Policy, or the first one for a
// Decision that names none of them.
func (m *Middleware) find(d limit.Decision) policy {
	for _, p := range m.policies {
		if p.name == d.Policy {
			return p
		}
	}
	return m.policies[0]
}

// SetHeaders sets the RateLimit-Policy field (every policy of the
// limiter that is not Inf, as the limiter has them now: SetLimit and
// SetBurst show in the next answer) and the RateLimit field (the policy d names:
// its remaining quota r and t, the seconds until more is available; on a
// denial by a limiter of several policies, a Multi, r is the least of
// its windows' and t its RetryAfter, see the package doc), the
// legacy ones if enabled, and Retry-After on a denial that can be
// retried: RetryAfter in whole seconds rounded up, at least 1, so never
// earlier than the RateLimit field's t (d.NextAfter <= d.RetryAfter). A
// limiter whose policies are all Inf gets none; a Decision of an Inf
// policy gets no RateLimit field.
//
// Fields already in h are kept (stacked middlewares: a global limit
// around a per-route one): RateLimit-Policy and RateLimit get m's items
// appended, after removing any item that names one of m's policies (so
// a second call replaces m's own, and a stacked limiter with a policy
// of the same name replaces the other's: give stacked limiters distinct
// names); the legacy fields keep the least Remaining (over every line
// and spelling, as one line, with the least Limit and the latest Reset
// of those already set); on a denial,
// Retry-After is the latest of this one's, one already set (seconds or
// an HTTP-date, which stays only if it is no earlier than now plus this
// one's seconds; a kept value is written as a sender writes it, a plain
// integer or an IMF-fixdate; dates are read as RFC 9110 §5.6.7 asks, a
// leap second and an rfc850 two-digit year included) and the t of every
// listed item with r=0, at most 999999999999999 (the largest Integer a
// field holds) (an outer
// policy with no quota left denies a retry before its t; t is its next
// whole token, so a retry that costs it more may be denied later too).
// On a denial that can never be admitted (d.Never) it removes any
// Retry-After already set. A negative d.Remaining (a Limiter breaking
// Decision's contract), or a negative legacy value an outer layer set, is
// written as 0: the fields hold no sign.
func (m *Middleware) SetHeaders(h http.Header, d limit.Decision) {
	d.Remaining = max(d.Remaining, 0)
	v := m.policyValue()
	if v == "" {
		return
	}
	addItem(h, "RateLimit-Policy", m.policies, v)
	// An empty policy the outer middlewares listed, read before this
	// one replaces an item of its name (a stacked policy of the same
	// name: its t still binds a retry).
	var listedT int64
	if !d.Allowed && !d.Never {
		listedT = exhaustedT(h)
	}
	if p := m.find(d); !isInf(d.Limit) {
		f := d
		if len(m.policies) > 1 && !d.Allowed && !d.Never && f.NextAfter < f.RetryAfter {
			// A Multi's denial names the window that denies longest,
			// while Remaining and NextAfter are the least of all
			// windows: another window's next token. The named one has
			// more quota by RetryAfter at the latest (its own next
			// token is no later), and the least Remaining is at most
			// its own.
			f.NextAfter = f.RetryAfter
		}
		addItem(h, "RateLimit", m.policies, rateLimitField(p.quoted, f))
	}
	if m.legacy {
		// One value each: the least Remaining of the middlewares that
		// set them (an outer one's stay when they say less).
		// Every spelling of the three fields is one field (fieldLines).
		fieldLines(h, "X-RateLimit-Limit")
		fieldLines(h, "X-RateLimit-Reset")
		// The least readable Remaining of every line and spelling;
		// none readable (or none set): set ours.
		least, found := extremeInt(fieldLines(h, "X-RateLimit-Remaining"), true)
		if found && int64(d.Remaining) >= least {
			// Theirs stays, each field as one line (every spelling and
			// line of a field is one field): the least Remaining, and,
			// where several middlewares set them, the least Limit and the
			// latest Reset, the reading no client is misled by.
			// An outer value below 0 (a sign these fields do not hold)
			// is written as 0, as ours is.
			h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(least, 0), 10))
			if v, ok := extremeInt(h.Values("X-RateLimit-Limit"), true); ok {
				h.Set("X-RateLimit-Limit", strconv.FormatInt(max(v, 0), 10))
			}
			if v, ok := extremeInt(h.Values("X-RateLimit-Reset"), false); ok {
				h.Set("X-RateLimit-Reset", strconv.FormatInt(max(v, 0), 10))
			}
		}
		if !found || int64(d.Remaining) < least {
			h.Set("X-RateLimit-Limit", strconv.Itoa(d.Burst))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.ResetAfter), 10))
		}
	}
	if !d.Allowed && !d.Never {
		// Not before this denial's RetryAfter, nor the t of a listed
		// policy with no quota left (an outer middleware's: a retry
		// before it is denied there), nor a Retry-After already set.
		ra := min(max(ceilSeconds(d.RetryAfter), 1, listedT, exhaustedT(h)), maxSFInteger)
		// Every spelling and line of the field is one: the latest
		// readable value stays if it is not earlier, as one line; one
		// beyond the largest Integer a field holds is written as that,
		// as ra is (the problem+json body says the same). Lines compare
		// by the instant they stand for (a date to the nanosecond from
		// now, so it is not early for being read in whole seconds), and
		// the latest stays only if it is not earlier than now + ra.
		now := time.Now()
		keep, kept, found := "", retryAfter{}, false
		for _, v := range fieldLines(h, "Retry-After") {
			if a, ok := parseRetryAfter(v, now); ok && (!found || a.after(kept)) {
				keep, kept, found = v, a, true
			}
		}
		switch {
		case !found || !kept.atLeast(ra):
			h.Set("Retry-After", strconv.FormatInt(ra, 10))
		case kept.whole > maxSFInteger:
			h.Set("Retry-After", strconv.FormatInt(maxSFInteger, 10))
		default:
			h.Set("Retry-After", retryAfterText(keep, now))
		}
	}
	if !d.Allowed && d.Never {
		// A request that can never be admitted gets no Retry-After, one
		// an outer layer set included (every spelling: fieldLines), so
		// that no client is told to come back (audit 120).
		fieldLines(h, "Retry-After")
		h.Del("Retry-After")
	}
}

// Problem is the RFC 9457 body of a denial (WithProblemJSON), of Draft's
// quota-exceeded problem type.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	RetryAfter       *int64   `json:"retryAfter,omitempty"` // seconds; absent when the request can never be admitted
}

// The quota-exceeded problem type of Draft (section 5.1).
const (
	ProblemType  = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	ProblemTitle = "Request cannot be satisfied as assigned quota has been exceeded"
)

func (m *Middleware) deny(w http.ResponseWriter, d limit.Decision) {
	detail := "rate limit exceeded; retry after the Retry-After delay"
	var ra *int64
	if d.Never {
		detail = "the request costs more than the burst of " + strconv.Itoa(d.Burst) + "; it can never be admitted: do not retry"
	} else {
		// The Retry-After field SetHeaders set (a stacked one may be
		// later than this decision's own: audit 63).
		s := max(ceilSeconds(d.RetryAfter), 1)
		if a, ok := parseRetryAfter(w.Header().Get("Retry-After"), time.Now()); ok {
			s = max(s, min(a.whole, maxSFInteger)) // rounded up
		}
		ra = &s
	}
	if !m.problem {
		http.Error(w, detail, http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(Problem{
		Type: ProblemType, Title: ProblemTitle, Status: http.StatusTooManyRequests,
		Detail: detail, ViolatedPolicies: []string{m.find(d).name}, RetryAfter: ra,
	})
}
