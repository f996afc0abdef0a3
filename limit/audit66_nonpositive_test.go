package limit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit66NonPositiveNPanics: doc.go, "Input": "n <= 0 panics
// ("limit: AllowN: n must be > 0; got 0")". Every n-taking method of a
// Limiter (finite and Inf), a Tier and a Multi panics for n = 0 and n =
// -1, with a message of that form, and before debiting anything.
func TestAudit66NonPositiveNPanics(t *testing.T) {
	l, _ := newFake(t, 10, 5)
	inf := limit.MustNew(limit.Inf, 5)
	tier, err := l.Tier("half", 5, 5)
	if err != nil {
		t.Fatal(err)
	}
	m, err := limit.NewMulti(l, limit.MustNew(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int{0, -1, -1 << 40} {
		forms := map[string]func(){}
		for name, x := range map[string]*limit.Limiter{"finite": l, "inf": inf} {
			x := x
			forms[name+".AllowN"] = func() { x.AllowN(x.Now(), "k", n) }
			forms[name+".DecideN"] = func() { x.DecideN(x.Now(), "k", n) }
			forms[name+".PeekN"] = func() { x.PeekN(x.Now(), "k", n) }
			forms[name+".ReserveN"] = func() { x.ReserveN(x.Now(), "k", n) }
			forms[name+".WaitN"] = func() { _ = x.WaitN(ctx, "k", n) }
			forms[name+".DecideContext"] = func() { _, _ = x.DecideContext(ctx, "k", n) }
		}
		forms["tier.AllowN"] = func() { tier.AllowN(l.Now(), "k", n) }
		forms["tier.DecideN"] = func() { tier.DecideN(l.Now(), "k", n) }
		forms["tier.PeekN"] = func() { tier.PeekN(l.Now(), "k", n) }
		forms["tier.ReserveN"] = func() { tier.ReserveN(l.Now(), "k", n) }
		forms["tier.WaitN"] = func() { _ = tier.WaitN(ctx, "k", n) }
		forms["tier.DecideContext"] = func() { _, _ = tier.DecideContext(ctx, "k", n) }
		forms["multi.AllowN"] = func() { m.AllowN(l.Now(), "k", n) }
		forms["multi.DecideKeys"] = func() { m.DecideKeys(l.Now(), n, "k") }
		forms["multi.DecideContext"] = func() { _, _ = m.DecideContext(ctx, "k", n) }
		for name, f := range forms {
			msg := func() (s string) {
				defer func() {
					if r := recover(); r != nil {
						s = fmt.Sprint(r)
					}
				}()
				f()
				return ""
			}()
			if !strings.HasPrefix(msg, "limit: ") || !strings.Contains(msg, fmt.Sprintf("n must be > 0; got %d", n)) {
				t.Errorf("%s(n=%d): panic %q, want \"limit: <Op>: n must be > 0; got %d\"", name, n, msg, n)
			}
		}
	}
	if tk := l.TokensAt(l.Now(), "k"); tk != 5 {
		t.Errorf("after the panics, tokens %v, want 5 (nothing debited)", tk)
	}
	if st := l.Stats(); st.Admitted+st.Denied != 0 {
		t.Errorf("panicking calls counted in Stats: %+v", st)
	}
}
