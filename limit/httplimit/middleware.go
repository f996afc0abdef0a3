package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/lfgrudge/grudge/limit"
)

// Middleware limits the requests of each key (by default the client IP,
// IPv6 folded to /64) with a limit.Limiter. Create one with New; the zero
// Middleware is not usable. It is safe for concurrent use.
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
// n >= 1, or the request is answered 500.
func WithCost(f func(*http.Request) int) Option { return func(m *Middleware) { m.cost = f } }

// WithLegacyHeaders also sets X-RateLimit-Limit (the burst),
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds until the bucket
// is full, rounded up) on every answer.
func WithLegacyHeaders(on bool) Option { return func(m *Middleware) { m.legacy = on } }

// WithProblemJSON answers denials with an RFC 9457 application/problem+json
// body (type "about:blank", title "Too Many Requests", status 429, a
// detail, and the extension member "retryAfter" in seconds) instead of
// text/plain.
func WithProblemJSON(on bool) Option { return func(m *Middleware) { m.problem = on } }

// WithHook calls f after every decision (admitted or not), before the
// answer is written: for metrics and logging. f must be safe for
// concurrent use and should be fast.
func WithHook(f func(r *http.Request, key string, d limit.Decision)) Option {
	return func(m *Middleware) { m.hook = f }
}

// WithErrorHandler answers requests whose key cannot be extracted
// (default: 400 Bad Request with the error's text).
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(m *Middleware) { m.onKeyError = f }
}

// New returns middleware limiting with l. It returns an error, prefixed
// "httplimit: ", for a nil limiter, a nil option value or a policy name
// (l.Name()) that is not printable ASCII.
func New(l *limit.Limiter, opts ...Option) (*Middleware, error) {
	if l == nil {
		return nil, errors.New("httplimit: New needs a limiter; got nil")
	}
	m := &Middleware{l: l, key: RemoteIP(), onKeyError: badRequest}
	for _, o := range opts {
		o(m)
	}
	if m.key == nil || m.onKeyError == nil {
		return nil, errors.New("httplimit: WithKey and WithErrorHandler need a non-nil function")
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

func badRequest(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// Handler returns next behind the limiter. It panics if next is nil.
func (m *Middleware) Handler(next http.Handler) http.Handler {
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
				http.Error(w, fmt.Sprintf("httplimit: cost must be >= 1; got %d", n), http.StatusInternalServerError)
				return
			}
		}
		d := m.l.DecideString(m.l.Now(), key, n)
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
// retried. A limiter with limit Inf sets none.
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

// Problem is the RFC 9457 body of a denial (WithProblemJSON).
type Problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	RetryAfter *int64 `json:"retryAfter,omitempty"` // seconds; absent when the request can never be admitted
}

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
		Type: "about:blank", Title: http.StatusText(http.StatusTooManyRequests),
		Status: http.StatusTooManyRequests, Detail: detail, RetryAfter: ra,
	})
}
