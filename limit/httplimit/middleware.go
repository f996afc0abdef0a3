package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/limit"
)

// Middleware limits the requests of each key (by default the client IP,
// IPv6 folded to /64) with a limit.Limiter. Create one with New; the zero
// Middleware is not usable (Handler panics with "httplimit: zero
// Middleware; use New"). It is safe for concurrent use.
//
// Every answer carries the RateLimit-Policy and RateLimit fields of
// Draft; a denial is 429 Too Many Requests with Retry-After in whole
// seconds rounded up (so a client retrying at that second is never
// early for its own debt). A request that can never be admitted (cost
// above the burst) is 429 without Retry-After.
type Middleware struct {
	l          *limit.Limiter
	key        KeyFunc
	cost       func(*http.Request) int
	legacy     bool
	problem    bool
	hook       func(r *http.Request, key string, d limit.Decision)
	onKeyError func(w http.ResponseWriter, r *http.Request, err error)
	policy     string // the RateLimit-Policy value, fixed
	quoted     string // the policy name as an sf-string
}

// Option configures New.
type Option func(*Middleware)

// WithKey sets the key extractor (default RemoteIP()).
func WithKey(k KeyFunc) Option { return func(m *Middleware) { m.key = k } }

// WithCost sets the tokens a request costs (default 1); it must return
// n >= 1, or the request goes to the error handler with ErrBadCost
// (default: 500).
func WithCost(f func(*http.Request) int) Option { return func(m *Middleware) { m.cost = f } }

// WithLegacyHeaders also sets X-RateLimit-Limit (the burst),
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds until the bucket
// is full, rounded up) on every answer.
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
// concurrent use and should be fast.
func WithHook(f func(r *http.Request, key string, d limit.Decision)) Option {
	return func(m *Middleware) { m.hook = f }
}

// WithErrorHandler answers requests whose key cannot be extracted, or
// whose cost is invalid (ErrBadCost); err says why, for logs. The default
// answers 500 Internal Server Error for ErrNoClientIP, ErrNilRequest and
// ErrBadCost (the server's faults) and 400 Bad Request otherwise, with the
// status text only: no error text reaches the client.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(m *Middleware) { m.onKeyError = f }
}

// New returns middleware limiting with l. It returns a *sketch.ConfigError
// (errors.Is(err, sketch.ErrInvalidConfig)), prefixed "httplimit: ", for
// a nil or zero limiter, a nil Option, a nil WithKey or WithErrorHandler
// function, or a policy name (l.Name()) that is not printable ASCII.
func New(l *limit.Limiter, opts ...Option) (*Middleware, error) {
	if l == nil || l.Burst() == 0 { // New never builds a burst of 0
		return nil, bad("Limiter", l, "New needs a limiter from limit.New; got nil or a zero Limiter")
	}
	m := &Middleware{l: l, key: RemoteIP(), onKeyError: defaultError}
	for i, o := range opts {
		if o == nil {
			return nil, bad("Option", i, "option %d is nil", i)
		}
		o(m)
	}
	if m.key == nil || m.onKeyError == nil {
		return nil, bad("Option", nil, "WithKey and WithErrorHandler need a non-nil function")
	}
	if err := checkName(l.Name()); err != nil {
		return nil, err
	}
	m.quoted = sfString(l.Name())
	if l.Limit() != limit.Inf {
		m.policy = policyField(m.quoted, l)
	}
	return m, nil
}

// Wrap is New(l, opts...).Handler(next) that panics on an error: the
// middleware in one line.
func Wrap(l *limit.Limiter, next http.Handler, opts ...Option) http.Handler {
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

// defaultError answers a request the middleware cannot key or cost: 500
// for the server's faults, 400 for the client's, the status text only.
func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	code := http.StatusBadRequest
	if errors.Is(err, ErrNoClientIP) || errors.Is(err, ErrNilRequest) || errors.Is(err, ErrBadCost) {
		code = http.StatusInternalServerError
	}
	http.Error(w, http.StatusText(code), code)
}

// Handler returns next behind the limiter. It panics if next is nil, or
// on the zero Middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if m.l == nil {
		panic("httplimit: zero Middleware; use New")
	}
	if next == nil {
		panic("httplimit: Handler needs a next handler; got nil")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := m.key(r)
		if err != nil {
			m.onKeyError(w, r, err)
			return
		}
		n := 1
		if m.cost != nil {
			if n = m.cost(r); n < 1 {
				m.onKeyError(w, r, fmt.Errorf("%w; got %d", ErrBadCost, n))
				return
			}
		}
		d := m.l.DecideN(m.l.Now(), key, n)
		if m.hook != nil {
			m.hook(r, key, d)
		}
		m.SetHeaders(w.Header(), d)
		if d.Allowed {
			next.ServeHTTP(w, r)
			return
		}
		m.deny(w, d)
	})
}

// SetHeaders sets the RateLimit-Policy and RateLimit fields (and the
// legacy ones if enabled) for d, and Retry-After on a denial that can be
// retried: RetryAfter in whole seconds rounded up, at least 1, so never
// earlier than the RateLimit field's t (d.NextAfter <= d.RetryAfter). A
// limiter with limit Inf sets none.
func (m *Middleware) SetHeaders(h http.Header, d limit.Decision) {
	if m.policy == "" {
		return
	}
	h.Set("RateLimit-Policy", m.policy)
	h.Set("RateLimit", rateLimitField(m.quoted, d))
	if m.legacy {
		h.Set("X-RateLimit-Limit", strconv.Itoa(d.Burst))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.ResetAfter), 10))
	}
	if !d.Allowed && !d.Never {
		h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10))
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
		s := max(ceilSeconds(d.RetryAfter), 1)
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
		Detail: detail, ViolatedPolicies: []string{m.l.Name()}, RetryAfter: ra,
	})
}
