package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch"
)

// audit14Limiter is a fixed-policy Limiter for calling SetHeaders
// directly; it is never asked to decide.
type audit14Limiter struct{ pols []limit.Policy }

func (l audit14Limiter) DecideContext(context.Context, string, int) (limit.Decision, error) {
	return limit.Decision{Allowed: true}, nil
}
func (l audit14Limiter) Policies() []limit.Policy { return l.pols }

func audit14Middleware(t *testing.T, pols ...limit.Policy) *httplimit.Middleware {
	t.Helper()
	m, err := httplimit.New(audit14Limiter{pols})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// SetHeaders' godoc: Retry-After on a denial that can be retried is
// RetryAfter in whole seconds rounded up, at least 1 (never 0: "retry
// now" on a denial is always early).
func TestAudit14MutRetryAfterAtLeastOneRoundedUp(t *testing.T) {
	m := audit14Middleware(t, limit.Policy{Name: "api", Limit: 10, Burst: 5})
	for _, c := range []struct {
		ra   time.Duration
		want string
	}{
		{0, "1"},
		{-3 * time.Second, "1"},
		{time.Nanosecond, "1"},
		{time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Millisecond, "2"},
		{59*time.Second + 999*time.Millisecond, "60"},
	} {
		h := http.Header{}
		m.SetHeaders(h, limit.Decision{Allowed: false, Limit: 10, Burst: 5, Policy: "api", RetryAfter: c.ra, NextAfter: max(c.ra, 0)})
		if got := h.Get("Retry-After"); got != c.want {
			t.Errorf("denial with RetryAfter %v: Retry-After %q, want %q", c.ra, got, c.want)
		}
	}
}

// SetHeaders' godoc: "a Decision of an Inf policy gets no RateLimit
// field"; RateLimit-Policy still announces the finite ones.
func TestAudit14MutInfDecisionGetsNoRateLimitField(t *testing.T) {
	m := audit14Middleware(t,
		limit.Policy{Name: "fin", Limit: 10, Burst: 5},
		limit.Policy{Name: "inf", Limit: limit.Inf, Burst: 0})
	h := http.Header{}
	m.SetHeaders(h, limit.Decision{Allowed: true, Limit: limit.Inf, Policy: "inf"})
	if v, ok := h["Ratelimit"]; ok {
		t.Errorf("Decision of an Inf policy got RateLimit %q, want none", v)
	}
	if p := h.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"fin";`) || strings.Contains(p, `"inf"`) {
		t.Errorf("RateLimit-Policy %q, want the finite policy only", p)
	}
	// The finite policy's decision does get the field.
	h = http.Header{}
	m.SetHeaders(h, limit.Decision{Allowed: true, Limit: 10, Burst: 5, Policy: "fin", Remaining: 4, NextAfter: 100 * time.Millisecond})
	if got := h.Get("RateLimit"); got != `"fin";r=4;t=1` {
		t.Errorf("finite policy's RateLimit %q, want %q", got, `"fin";r=4;t=1`)
	}
}

// SetHeaders' godoc: the RateLimit field is that of "the policy d
// names"; with three policies, each named decision must be reported
// under its own name, not another's.
func TestAudit14MutRateLimitNamesTheDecisionsPolicy(t *testing.T) {
	pols := []limit.Policy{
		{Name: "a", Limit: 10, Burst: 5},
		{Name: "b", Limit: 1, Burst: 3},
		{Name: "c", Limit: 100, Burst: 50},
	}
	m := audit14Middleware(t, pols...)
	for _, p := range pols {
		h := http.Header{}
		m.SetHeaders(h, limit.Decision{Allowed: true, Limit: p.Limit, Burst: p.Burst, Policy: p.Name, Remaining: p.Burst})
		if got, want := h.Get("RateLimit"), `"`+p.Name+`";r=`; !strings.HasPrefix(got, want) {
			t.Errorf("decision of %q: RateLimit %q, want prefix %q", p.Name, got, want)
		}
	}
}

// New's godoc: a policy whose name is not printable ASCII is a
// *sketch.ConfigError (RFC 9651 sf-string: 0x20..0x7E). DEL (0x7F) and
// the bytes above it are not printable; space and tilde are.
func TestAudit14MutPolicyNameNotPrintable(t *testing.T) {
	for _, name := range []string{"a\x7f", "\x7f", "a\x80", "caf\xc3\xa9", "a\x1f", "a\tb"} {
		if _, err := httplimit.New(audit14Limiter{[]limit.Policy{{Name: name, Limit: 10, Burst: 5}}}); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("policy name %q: New err %v, want ErrInvalidConfig", name, err)
		}
	}
	for _, name := range []string{" ", "~", "a b", `q"uote\`} {
		if _, err := httplimit.New(audit14Limiter{[]limit.Policy{{Name: name, Limit: 10, Burst: 5}}}); err != nil {
			t.Errorf("printable policy name %q: New err %v, want nil", name, err)
		}
	}
}

// The package doc: w is ceil(burst/rate) and at least 1, so a custom
// Limiter's policy of burst 0 announces w=1 (a window of 0 s means
// nothing to a client), and a fractional refill time rounds up.
func TestPolicyWindowAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		p    limit.Policy
		want string
	}{
		{limit.Policy{Name: "zero", Limit: 10, Burst: 0}, `"zero";q=0;w=1`},
		{limit.Policy{Name: "fast", Limit: 1000, Burst: 5}, `"fast";q=5;w=1`},
		{limit.Policy{Name: "slow", Limit: 2, Burst: 5}, `"slow";q=5;w=3`},
	} {
		h := http.Header{}
		audit14Middleware(t, c.p).SetHeaders(h, limit.Decision{Allowed: true, Limit: c.p.Limit, Burst: c.p.Burst, Policy: c.p.Name})
		if got := h.Get("RateLimit-Policy"); got != c.want {
			t.Errorf("policy %+v: RateLimit-Policy %q, want %q", c.p, got, c.want)
		}
	}
}
