package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
)

// TestAudit136NegativeRemainingStackedMulti: a7c4bfc's clamp ("A
// negative d.Remaining ... is written as 0: the fields hold no sign"),
// beyond audit 133's single middleware: an outer global middleware and
// an inner Multi middleware (two windows), both with legacy headers,
// called in the order a stack calls them, on allowed and denied
// decisions with negative Remaining in either: no header value holds a
// '-', the negative middleware's RateLimit item says r=0, the legacy
// Remaining is the least (0), each middleware keeps one item per
// policy, and a denial's Retry-After is a positive integer.
func TestAudit136NegativeRemainingStackedMulti(t *testing.T) {
	outerL := limit.MustNew(100, 50, limit.WithName("global"))
	m1 := limit.MustNew(10, 5, limit.WithName("sec"))
	m2 := limit.MustNew(1, 60, limit.WithName("min"), limit.WithMaxDebt(60))
	multi, err := limit.NewMulti(m1, m2)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := httplimit.New(outerL, httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := httplimit.New(multi, httplimit.WithLegacyHeaders(true))
	if err != nil {
		t.Fatal(err)
	}
	od := func(r int) limit.Decision {
		return limit.Decision{Allowed: true, Limit: 100, Burst: 50, Policy: "global", Remaining: r, ResetAfter: time.Second}
	}
	id := func(allowed bool, r int) limit.Decision {
		d := limit.Decision{Allowed: allowed, Limit: 1, Burst: 60, Policy: "min", Remaining: r, ResetAfter: time.Minute}
		if !allowed {
			d.RetryAfter, d.NextAfter = 3*time.Second, time.Second
		}
		return d
	}
	for _, c := range []struct {
		name   string
		o, i   limit.Decision
		innerR string // the r of inner's item
	}{
		{"outer negative, inner allowed", od(-4), id(true, 7), "r=7"},
		{"inner negative allowed", od(20), id(true, -2), "r=0"},
		{"inner negative denied", od(20), id(false, -9), "r=0"},
		{"both negative denied", od(-1), id(false, -1), "r=0"},
	} {
		h := http.Header{}
		outer.SetHeaders(h, c.o)
		inner.SetHeaders(h, c.i)
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "=-") || strings.HasPrefix(v, "-") || strings.Contains(v, ";r=-") {
					t.Errorf("%s: %s: %q holds a sign", c.name, k, v)
				}
			}
		}
		rl := strings.Join(h.Values("RateLimit"), ", ")
		if !strings.Contains(rl, `"min";`+c.innerR) || strings.Count(rl, `"min"`) != 1 || strings.Count(rl, `"global"`) != 1 {
			t.Errorf("%s: RateLimit %q; want one item each, min's with %s", c.name, rl, c.innerR)
		}
		wantLeg := "0"
		if c.o.Remaining >= 0 && c.i.Remaining >= 0 {
			wantLeg = "7"
		}
		if got := h.Values("X-RateLimit-Remaining"); len(got) != 1 || got[0] != wantLeg {
			t.Errorf("%s: X-RateLimit-Remaining %q, want %s", c.name, got, wantLeg)
		}
		if !c.i.Allowed {
			if ra := h.Values("Retry-After"); len(ra) != 1 || ra[0] == "0" || strings.HasPrefix(ra[0], "-") {
				t.Errorf("%s: Retry-After %q", c.name, ra)
			}
		}
	}
}
