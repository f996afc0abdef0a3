package httplimit_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a96Rig is a middleware over one limiter (a Limiter, a Tier or a Multi)
// with legacy headers, a settable cost, and a hook that keeps the last
// decision.
type a96Rig struct {
	h    http.Handler
	cost atomic.Int64
	last limit.Decision
	hits int
}

func a96NewRig(t *testing.T, l httplimit.Limiter, opts ...httplimit.Option) *a96Rig {
	t.Helper()
	g := &a96Rig{}
	g.cost.Store(1)
	opts = append([]httplimit.Option{
		httplimit.WithLegacyHeaders(true),
		httplimit.WithCost(func(*http.Request) int { return int(g.cost.Load()) }),
		httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { g.last = d }),
	}, opts...)
	m, err := httplimit.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	g.h = m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		g.hits++
		w.WriteHeader(http.StatusOK)
	}))
	return g
}

// do sends one request of cost n from 192.0.2.7 (key "192.0.2.7/32").
func (g *a96Rig) do(n int) *httptest.ResponseRecorder {
	g.cost.Store(int64(n))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.7:4242"
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, r)
	return w
}

const a96Key = "192.0.2.7/32"

func a96Ceil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// a96Check compares an answer with the decision the hook saw, field by
// field, as doc.go's "Answers" states them for a limiter of one policy
// (single is true) or a Multi.
func a96Check(t *testing.T, what string, w *httptest.ResponseRecorder, d limit.Decision, single bool) {
	t.Helper()
	h := w.Header()
	nextAfter := d.NextAfter
	if !single && !d.Allowed && !d.Never && nextAfter < d.RetryAfter {
		nextAfter = d.RetryAfter
	}
	want := strconv.Quote(d.Policy) + ";r=" + strconv.Itoa(d.Remaining)
	if nextAfter > 0 {
		want += ";t=" + strconv.FormatInt(a96Ceil(nextAfter), 10)
	}
	if got := h.Get("RateLimit"); got != want {
		t.Fatalf("%s: RateLimit %q; want %q (decision %+v)", what, got, want, d)
	}
	if got := h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(d.Remaining) {
		t.Fatalf("%s: X-RateLimit-Remaining %q; decision %+v", what, got, d)
	}
	if got := h.Get("X-RateLimit-Limit"); got != strconv.Itoa(d.Burst) {
		t.Fatalf("%s: X-RateLimit-Limit %q; decision %+v", what, got, d)
	}
	if got := h.Get("X-RateLimit-Reset"); got != strconv.FormatInt(a96Ceil(d.ResetAfter), 10) {
		t.Fatalf("%s: X-RateLimit-Reset %q; decision %+v", what, got, d)
	}
	switch {
	case d.Allowed:
		if w.Code != http.StatusOK || h.Get("Retry-After") != "" {
			t.Fatalf("%s: admitted but %d, Retry-After %q", what, w.Code, h.Get("Retry-After"))
		}
	case d.Never:
		if w.Code != http.StatusTooManyRequests || h.Get("Retry-After") != "" {
			t.Fatalf("%s: Never but %d, Retry-After %q", what, w.Code, h.Get("Retry-After"))
		}
	default:
		want := max(a96Ceil(d.RetryAfter), 1)
		if w.Code != http.StatusTooManyRequests || h.Get("Retry-After") != strconv.FormatInt(want, 10) {
			t.Fatalf("%s: denied (RetryAfter %v) but %d, Retry-After %q; want %d", what, d.RetryAfter, w.Code, h.Get("Retry-After"), want)
		}
	}
}

// a96Cfg is a policy as New takes it, with options.
type a96Cfg struct {
	name  string
	lim   limit.Limit
	burst int
	opts  []limit.Option
}

func (c a96Cfg) build(t *testing.T, clk *sketchtest.FakeClock, e limit.Engine) *limit.Limiter {
	t.Helper()
	opts := append([]limit.Option{limit.WithClock(clk), limit.WithSeed(96), limit.WithName(c.name),
		limit.WithEngine(e), limit.WithCapacity(64, 0.01)}, c.opts...)
	if e == limit.CountMin {
		// No rotation within the walks: a rotation may amnesty part of a
		// key's debt (limit's doc, "Rotation and amnesty"), which the
		// Buckets engine never does.
		opts = append(opts, limit.WithPeriod(1000*time.Hour))
	}
	l, err := limit.New(c.lim, c.burst, opts...)
	if err != nil {
		t.Fatalf("%s on %v: %v", c.name, e, err)
	}
	if l.Engine() != e {
		t.Fatalf("%s: Engine %v; want %v", c.name, l.Engine(), e)
	}
	return l
}

// The two engines (WithEngine, new since audit 88) give the same
// decisions and durations for a key alone in its cells, and are exact
// where they hold a limiter (limit's doc, "Engines" and "Exactness"):
// through the middleware, every header field of every answer is the
// same on Buckets and on CountMin, each equals what the decision says
// (RateLimit r and t = ceil(NextAfter), Retry-After = ceil(RetryAfter),
// the legacy fields), RateLimit-Policy's w is ceil(burst/rate), and a
// retry at Retry-After (RejectCost penalties included) is admitted. The
// handler is called exactly for the admitted requests.
func TestAudit96HTTPEnginesSameAnswers(t *testing.T) {
	cfgs := []a96Cfg{
		{"ten", 10, 20, nil},
		{"slow", 1, 30, nil},
		{"quarter", limit.Every(250 * time.Millisecond), 8, []limit.Option{limit.WithRejectCost(2)}},
		{"kilo", 1000, 1000, nil},
		{"penalty", 5, 10, []limit.Option{limit.WithMaxDebt(40), limit.WithRejectCost(3)}},
		{"half", 0.5, 4, []limit.Option{limit.WithRejectCost(1)}},
		{"lax", 4, 6, []limit.Option{limit.WithStrict(false), limit.WithRejectCost(0.5)}},
	}
	for ci, c := range cfgs {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		lb, lc := c.build(t, clk, limit.Buckets), c.build(t, clk, limit.CountMin)
		if !lb.Exact() || !lc.Exact() {
			t.Fatalf("%s: Exact %v (Buckets), %v (CountMin); the test needs exact policies", c.name, lb.Exact(), lc.Exact())
		}
		gb, gc := a96NewRig(t, lb), a96NewRig(t, lc)
		wantPol := strconv.Quote(c.name) + ";q=" + strconv.Itoa(c.burst) + ";w=" +
			strconv.FormatInt(int64(float64(c.burst)/float64(c.lim)+0.999999), 10)
		rng := rand.New(rand.NewPCG(96, uint64(ci)))
		token := time.Duration(float64(time.Second) / float64(c.lim))
		admitted := 0
		for i := range 400 {
			clk.Advance(time.Duration(rng.Int64N(int64(2*token/time.Millisecond)+1)) * time.Millisecond)
			n := 1 + rng.IntN(3)
			if rng.IntN(20) == 0 {
				n = c.burst + 1
			} else if rng.IntN(10) == 0 {
				n = c.burst
			}
			wb, wc := gb.do(n), gc.do(n)
			what := c.name + " step " + strconv.Itoa(i) + " cost " + strconv.Itoa(n)
			if wb.Code != wc.Code {
				t.Fatalf("%s: status %d on Buckets, %d on CountMin", what, wb.Code, wc.Code)
			}
			for _, f := range []string{"RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Content-Type"} {
				if wb.Header().Get(f) != wc.Header().Get(f) {
					t.Fatalf("%s: %s %q on Buckets, %q on CountMin", what, f, wb.Header().Get(f), wc.Header().Get(f))
				}
			}
			if got := wb.Header().Get("RateLimit-Policy"); got != wantPol {
				t.Fatalf("%s: RateLimit-Policy %q; want %q", what, got, wantPol)
			}
			a96Check(t, what+" (Buckets)", wb, gb.last, true)
			a96Check(t, what+" (CountMin)", wc, gc.last, true)
			if wb.Code == http.StatusOK {
				admitted++
			}
			if wb.Code == http.StatusTooManyRequests && !gb.last.Never && rng.IntN(3) == 0 {
				secs, _ := strconv.Atoi(wb.Header().Get("Retry-After"))
				clk.Advance(time.Duration(secs) * time.Second)
				wb, wc = gb.do(n), gc.do(n)
				if wb.Code != http.StatusOK || wc.Code != http.StatusOK {
					t.Fatalf("%s: retried at Retry-After %d s: %d (Buckets), %d (CountMin)", what, secs, wb.Code, wc.Code)
				}
				admitted++
			}
		}
		if gb.hits != admitted || gc.hits != admitted {
			t.Errorf("%s: handler called %d (Buckets), %d (CountMin) times for %d admitted requests", c.name, gb.hits, gc.hits, admitted)
		}
		if admitted == 0 || admitted == 400 {
			t.Errorf("%s: %d of 400 admitted: the walk does not test both answers", c.name, admitted)
		}
	}
}
