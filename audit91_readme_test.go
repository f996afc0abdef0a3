package grudge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/asm"
	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// README.md's Packages table and its prose (lines 104-148): every name it
// gives, compiled against the current API.
var (
	_ *grudgetest.FakeClock  = grudgetest.NewFakeClock()
	_ *grudgetest.FakeTicker = grudgetest.NewFakeTicker()
	_ sketch.Scorer          = (*sketch.Sketch)(nil)
	_ sketch.Scorer          = (*reference.Sketch)(nil)
	_ sketch.Scorer          = (*rotator.Rotator)(nil)
	_                        = (*sketch.Sketch).Merge
	_                        = sketchtest.TestScorer
	_                        = snapshot.NewSaver
	_                        = snapshot.Load
	_                        = decay.Exponential
	_                        = atomiccell.Pack
	_                        = asm.Pause
	_                        = asm.NewBackoff

	// limit: Suggest, WithCapacity(keys, deny), Stats().Saturation,
	// ParseLimit, Tier, SetLimit, SetBurst.
	_ func(int, float64) (limit.Sizing, error)                            = limit.Suggest
	_ func(int, float64) limit.Option                                     = limit.WithCapacity
	_ func(string) (limit.Limit, error)                                   = limit.ParseLimit
	_ func(*limit.Limiter, string, limit.Limit, int) (*limit.Tier, error) = (*limit.Limiter).Tier
	_ func(*limit.Limiter, limit.Limit) error                             = (*limit.Limiter).SetLimit
	_ func(*limit.Limiter, int) error                                     = (*limit.Limiter).SetBurst
	_ float64                                                             = limit.Stats{}.Saturation

	// "The middleware takes any httplimit.Limiter: a limit.Limiter, a
	// limit.Multi".
	_ httplimit.Limiter = (*limit.Limiter)(nil)
	_ httplimit.Limiter = (*limit.Multi)(nil)
	_                   = httplimit.Wrap
	_                   = httplimit.WithProblemJSON
	_                   = httplimit.WithSkip
	_                   = httplimit.WithExcludedKey
	_                   = httplimit.WithDeniedHandler
	_                   = httplimit.WithErrorHandler

	// "A limiter (and meter.Rate, meter.Novelty) ... is a snapshot.Source
	// and Destination".
	_ snapshot.Source      = (*limit.Limiter)(nil)
	_ snapshot.Destination = (*limit.Limiter)(nil)
	_ snapshot.Source      = (*meter.Rate)(nil)
	_ snapshot.Destination = (*meter.Rate)(nil)
	_ snapshot.Source      = (*meter.Novelty)(nil)
	_ snapshot.Destination = (*meter.Novelty)(nil)
	_                      = meter.NewInflight

	// "limit/limittest: a fake clock that can wait".
	_ = (*limittest.FakeClock).BlockUntilTimers

	// API.md:151-155: x/time/rate's conventions and redis_rate's Result.
	_ func(time.Duration) limit.Limit                                 = limit.Every
	_ func(*limit.Limiter, time.Time, string, int) bool               = (*limit.Limiter).AllowN
	_ func(*limit.Limiter, time.Time, string, int) *limit.Reservation = (*limit.Limiter).ReserveN
	_ func(*limit.Limiter, context.Context, string, int) error        = (*limit.Limiter).WaitN
	_ func(*limit.Limiter, time.Time, string, int) limit.Decision     = (*limit.Limiter).DecideN
	_                                                                 = limit.Decision{Allowed: true, Limit: 1, Remaining: 1, RetryAfter: 1, ResetAfter: 1}
)

func a91Read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// README.md:175-211 names make targets and Makefile variables; README.md:27-28
// the two commands; README.md:199 ".ci/run calls make test".
func TestAudit91ReadmeMakeTargets(t *testing.T) {
	readme, mk := a91Read(t, "README.md"), a91Read(t, "Makefile")
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):`).FindAllStringSubmatch(mk, -1) {
		targets[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`make\s+([a-z][a-z0-9-]*)`).FindAllStringSubmatch(readme, -1) {
		if !targets[m[1]] {
			t.Errorf("README.md names `make %s`; the Makefile has no such target", m[1])
		}
	}
	for _, v := range []string{"V3_EMULATED", "V3_ALL", "MATRIX_FLAGS", `echo "make test: all checks passed"`, "qemu-aarch64-static", ".ci/fma-sites", "-tags purego", "-tags grudge_nobackoff", "GOAMD64=v3", "-d=checkptr"} {
		if !strings.Contains(mk, v) {
			t.Errorf("README.md names %q; the Makefile does not", v)
		}
	}
	if !strings.Contains(a91Read(t, ".ci/run"), "make test") {
		t.Errorf("README.md:199: .ci/run does not call make test")
	}
	// README.md:209-210: make bench writes results.csv, results.json,
	// results.md and plots to bench-results/.
	if !strings.Contains(mk, "-out $(CURDIR)/bench-results") {
		t.Errorf("README.md:210: make bench does not write to bench-results/")
	}
}

// The files and directories README.md names.
func TestAudit91ReadmePaths(t *testing.T) {
	paths := []string{
		"docs/design.md", "docs/precision.md", "docs/migrating.md", "docs/benchmarks.md",
		"docs/snapshots.md", "docs/blocked-layout.md", "docs/readings.md", "docs/capacity.md",
		"docs/distributed.md", ".ci/fma-sites", ".ci/fma-sites.txt", ".ci/run", "go.work",
		"internal/core", "internal/bucket", "internal/ref", "internal/atom", "internal/law", "internal/hw", "internal/testsize",
		"bench/cmd/matrix", "bench/cmd/allowratio", "bench/cmd/heapplot", "bench/cmd/redismem", "bench/cmd/ratebench", "bench/cmd/backoffsum",
		"bench/run16.sh", "bench/backoff16.sh",
		"examples/nethttp", "examples/chi", "examples/echo", "examples/gin", "examples/promstats",
		"tests/go.mod", "bench/go.mod", "examples/go.mod", "redis/go.mod",
		"limit/httplimit", "limit/limittest", "sketch/snapshot", "sketch/sketchtest", "sketch/reference",
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("README.md names %s: %v", p, err)
		}
	}
	// README.md:170: TestConsumerModules in tests/; README.md:182
	// testsize.Serial.
	if !strings.Contains(a91Read(t, "tests/consumer_test.go"), "func TestConsumerModules(") {
		t.Errorf("README.md:170: no TestConsumerModules in tests/consumer_test.go")
	}
	ts, _ := filepath.Glob("internal/testsize/*.go")
	found := false
	for _, f := range ts {
		if strings.Contains(a91Read(t, f), "func Serial(") {
			found = true
		}
	}
	if !found {
		t.Errorf("README.md:182: internal/testsize has no Serial")
	}
	// "five Go modules": go.work uses exactly five.
	if n := strings.Count(a91Read(t, "go.work"), "\n\t."); n != 5 {
		t.Errorf("README.md:164: five modules; go.work uses %d", n)
	}
}

// The sections README.md cites by name, and the figures it quotes from
// them (README.md:13-22).
func TestAudit91ReadmeDocSections(t *testing.T) {
	bench := a91Read(t, "docs/benchmarks.md")
	design := a91Read(t, "docs/design.md")
	i := strings.Index(bench, "\n## 16-core x86-64 server\n")
	if i < 0 {
		t.Fatalf(`README.md:14: docs/benchmarks.md has no section "16-core x86-64 server"`)
	}
	sec := bench[i:]
	if j := strings.Index(sec[10:], "\n## "); j >= 0 {
		sec = sec[:j+10]
	}
	for _, fig := range []string{"Go:** 1.26.8", "(26x)", "14x", "(44x)", "(25x)", "1.75x", "1.03x"} {
		if !strings.Contains(sec, fig) {
			t.Errorf("README.md:13-22 quotes %q; the 16-core section lacks it", fig)
		}
	}
	for _, h := range []string{"The floors under the P=16 write targets", "Fused multiply-add"} {
		if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(h)).MatchString(design) {
			t.Errorf("README.md cites docs/design.md, %q: no such heading", h)
		}
	}
}

// README.md:34: "Go 1.25 or later"; the go directive says the same.
func TestAudit91ReadmeGoDirective(t *testing.T) {
	m := regexp.MustCompile(`(?m)^go (1\.\d+)`).FindStringSubmatch(a91Read(t, "go.mod"))
	if m == nil || !strings.Contains(a91Read(t, "README.md"), "Go "+m[1]+" or later") {
		t.Errorf("go.mod's go directive %v does not match README.md:34", m)
	}
}

// README.md, "For contributors": a user's `go list -m all` holds what
// the library needs (siphash, murmur3, xxh3, x/sys, and xxh3's own:
// klauspost/cpuid, and zeebo/assert for its tests). Audit 91 found the
// list short of cpuid; every module go.mod requires is named now.
func TestAudit91ReadmeFixedModuleList(t *testing.T) {
	named := map[string]bool{
		"github.com/dchest/siphash":     true,
		"github.com/spaolacci/murmur3":  true,
		"github.com/zeebo/xxh3":         true,
		"golang.org/x/sys":              true,
		"github.com/klauspost/cpuid/v2": true,
	}
	gomod := a91Read(t, "go.mod")
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:require\s+)?([a-z0-9.\-]+\.[a-z]+/[^\s]+) v[^\s]+`).FindAllStringSubmatch(gomod, -1) {
		if !named[m[1]] {
			t.Errorf("README.md names the modules a user gets; go.mod also requires %s", m[1])
		}
	}
	if !strings.Contains(a91Read(t, "README.md"), "klauspost/cpuid") {
		t.Errorf("README.md does not name klauspost/cpuid")
	}
}

// README.md:62-63: "a 16-bit fingerprint and a 16-bit stamp in a 64-byte
// line of 14": limit.Suggest's Buckets size is its 64-byte lines plus a
// small fixed part (the floor histogram: 4,544 bytes today), and the
// README's table's keys fit at 14 per line with room to spare.
func TestAudit91ReadmeBucketsLines(t *testing.T) {
	for _, r := range []struct {
		keys int
		deny float64
	}{{100_000, 0.01}, {1_000_000, 0.01}, {1_000_000, 0.001}} {
		s, err := limit.Suggest(r.keys, r.deny)
		if err != nil {
			t.Fatal(err)
		}
		if extra := s.Buckets.Bytes - 64*s.Buckets.Lines; extra < 0 || extra > 8<<10 {
			t.Errorf("Suggest(%d, %v): %d bytes for %d lines, want 64 per line and a few KiB", r.keys, r.deny, s.Buckets.Bytes, s.Buckets.Lines)
		}
		if 14*s.Buckets.Lines < r.keys {
			t.Errorf("Suggest(%d, %v): %d lines of 14 hold fewer than the keys", r.keys, r.deny, s.Buckets.Lines)
		}
	}
}

// README.md:40-45 with WithCapacity (README.md:53) and Stats, on a fake
// clock: the snippet's limiter sized for more keys still admits bursts of
// 20 at 10/s, and Saturation grows with the keys held at their limit.
func TestAudit91ReadmeCapacitySnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithCapacity(2_000_000, 0.01), limit.WithSeed(91))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := limit.Suggest(2_000_000, 0.01)
	if got := l.Stats().Bytes; got != s.Buckets.Bytes {
		t.Errorf("WithCapacity(2e6, 0.01): %d bytes, Suggest's Buckets %d", got, s.Buckets.Bytes)
	}
	for i := 0; i < 20; i++ {
		if !l.Allow("client") {
			t.Fatalf("request %d of a burst of 20 denied", i+1)
		}
	}
	d := l.DecideN(clk.Now(), "client", 1)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 100*time.Millisecond || d.ResetAfter != 2*time.Second || d.Limit != 10 || d.Burst != 20 {
		t.Errorf("21st request: %+v; want denied, Remaining 0, RetryAfter 100ms, ResetAfter 2s", d)
	}
	clk.Advance(2 * time.Second)
	if d := l.PeekN(clk.Now(), "client", 20); !d.Allowed || d.Remaining != 0 {
		t.Errorf("after 2 s the full burst is back: %+v", d)
	}
}

// README.md:126-130 under a fake clock, with a route through With
// (README.md:134): a route's own limiter and the outer one both count.
func TestAudit91ReadmeWrapWith(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	login := limit.MustNew(limit.Every(12*time.Second), 2, limit.WithClock(clk), limit.WithName("login"))
	mux := http.NewServeMux()
	m, err := httplimit.New(l, httplimit.WithProblemJSON(true))
	if err != nil {
		t.Fatal(err)
	}
	lm, err := m.With(login)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/login", lm.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	h := m.Handler(mux)
	do := func(path string) *a91Resp {
		w := &a91Resp{h: http.Header{}}
		r, _ := http.NewRequest("GET", "http://x"+path, nil)
		r.RemoteAddr = "192.0.2.7:5555"
		h.ServeHTTP(w, r)
		return w
	}
	for i := 0; i < 2; i++ {
		if w := do("/login"); w.code != 200 {
			t.Fatalf("login %d: %d", i+1, w.code)
		}
	}
	w := do("/login")
	if w.code != 429 || w.h.Get("Retry-After") != "12" {
		t.Fatalf("third login: %d Retry-After %q; want 429 and 12", w.code, w.h.Get("Retry-After"))
	}
	if pol := strings.Join(w.h.Values("RateLimit-Policy"), ", "); !strings.Contains(pol, `"login";q=2;w=24`) || !strings.Contains(pol, `"default";q=20;w=2`) {
		t.Errorf("RateLimit-Policy %q lists not both policies", pol)
	}
	// the other route still has 20 - 3 = 17 of l's tokens.
	n := 0
	for n < 30 && do("/").code == 200 {
		n++
	}
	if n != 17 && n != 18 {
		t.Errorf("after 3 logins (2 admitted, 1 denied by login), / admitted %d, want 17 or 18", n)
	}
	t.Logf("/ admitted %d after 3 logins", n)
}

type a91Resp struct {
	h    http.Header
	code int
}

func (w *a91Resp) Header() http.Header { return w.h }
func (w *a91Resp) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	return len(b), nil
}
func (w *a91Resp) WriteHeader(c int) { w.code = c }

// limit/httplimit/example_test.go:36-40 (Example_tiers): "the free route's
// burst, 2 s of drain, is half of the paid route's 4 s, so a client who
// spent it on /free still has 20 requests on /paid", on a fake clock and
// on both engines.
func TestAudit91ExampleTiersTwentyLeft(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(10, 40, limit.WithMaxDebt(40), limit.WithClock(clk), limit.WithEngine(e))
		free, err := l.Tier("free", 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		paid, err := l.Tier("paid", 10, 40)
		if err != nil {
			t.Fatal(err)
		}
		got := []bool{free.Allow("c"), free.Allow("c"), free.Allow("c")}
		if !got[0] || !got[1] || got[2] {
			t.Fatalf("%v: /free x3: %v, want admit, admit, deny", e, got)
		}
		n := 0
		for n < 100 && paid.Allow("c") {
			n++
		}
		if n != 20 {
			t.Errorf("%v: after /free's burst, /paid admitted %d, Example_tiers says 20", e, n)
		}
	}
}

// README.md:141-144: "A limiter (and meter.Rate, meter.Novelty) survives
// a deploy: ... snapshot.Load restores it, debts drained by the
// downtime". Through snapshot.WriteFile and snapshot.Load on fake
// clocks: a restored meter reads, after the downtime, what the original
// reads after the same time.
func TestAudit91ReadmeMetersSurviveDeploy(t *testing.T) {
	dir := t.TempDir()
	clk := sketchtest.NewFakeClock()
	r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(91), meter.WithSize(2, 1024))
	if err != nil {
		t.Fatal(err)
	}
	n, err := meter.NewNovelty(10*time.Minute, meter.WithClock(clk), meter.WithSeed(91), meter.WithSize(2, 1024))
	if err != nil {
		t.Fatal(err)
	}
	for range 500 {
		clk.Advance(20 * time.Millisecond)
		r.Observe("api-key-1")
	}
	n.Seen("msg-1")
	if err := snapshot.WriteFile(filepath.Join(dir, "rate"), r); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteFile(filepath.Join(dir, "novelty"), n); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1500 * time.Millisecond) // the downtime
	clk2 := sketchtest.NewFakeClock()
	clk2.SetTime(clk.Now())
	r2, _ := meter.NewRate(time.Second, meter.WithClock(clk2), meter.WithSeed(91), meter.WithSize(2, 1024))
	n2, _ := meter.NewNovelty(10*time.Minute, meter.WithClock(clk2), meter.WithSeed(91), meter.WithSize(2, 1024))
	if err := snapshot.Load(filepath.Join(dir, "rate"), r2); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(filepath.Join(dir, "novelty"), n2); err != nil {
		t.Fatal(err)
	}
	want, got := r.PerSecond("api-key-1"), r2.PerSecond("api-key-1")
	if got != want || !(got > 0 && got < 50) {
		t.Errorf("Rate after 1.5 s of downtime: restored %v, original %v (both below 50, above 0)", got, want)
	}
	if !n2.Contains("msg-1") {
		t.Errorf("Novelty: restored 1.5 s after a mark, the mark is gone")
	}
	clk2.Advance(10 * time.Minute)
	if n2.Contains("msg-1") {
		t.Errorf("Novelty: the downtime was not counted: a mark 10 min 1.5 s old is still seen")
	}
}

// meter/example_test.go (ExampleNovelty): "a message id is "seen" for
// 10 minutes after its latest delivery (every sighting refreshes the
// mark), then forgotten" (audit 91: it said "first delivery", against
// Novelty's doc). Delivered at 0, redelivered at 9 min: seen at 15 min,
// forgotten 10 min after the redelivery.
func TestAudit91ExampleFixedNoveltyLatestDelivery(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	n, err := meter.NewNovelty(10*time.Minute, meter.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	n.Seen("msg-1")
	clk.Advance(9 * time.Minute)
	if !n.Seen("msg-1") {
		t.Fatal("redelivery at 9 min not seen")
	}
	clk.Advance(6 * time.Minute)
	if !n.Contains("msg-1") {
		t.Errorf("6 min after a redelivery the id is forgotten; ExampleNovelty: seen for 10 minutes after its latest delivery")
	}
	clk.Advance(4*time.Minute + time.Millisecond)
	if n.Contains("msg-1") {
		t.Errorf("10 min after its latest delivery the id is still seen")
	}
}

// API.md:157-158: "a limiter states how many keys at full debt its memory
// holds at a given innocent-denial rate, sizes itself from that (an
// option)": a limiter built WithCapacity(keys, deny) states a Capacity
// (deny) of at least keys, on both engines (README.md's table's rows).
func TestAudit91APICapacityRoundTrip(t *testing.T) {
	for _, r := range []struct {
		keys int
		deny float64
	}{{1000, 0.01}, {100_000, 0.01}, {100_000, 0.001}, {1_000_000, 0.01}} {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			if e == limit.CountMin && r.keys > 100_000 {
				continue // 146 MiB
			}
			l, err := limit.New(10, 20, limit.WithEngine(e), limit.WithCapacity(r.keys, r.deny))
			if err != nil {
				t.Fatal(err)
			}
			if c := l.Capacity(r.deny); c < r.keys {
				t.Errorf("%v WithCapacity(%d, %v): Capacity(%v) = %d", e, r.keys, r.deny, r.deny, c)
			}
		}
	}
}

// API.md:25: "Invalid parameters (NaN, Inf, <= 0) are reported by
// sketch.New as an error naming the field", for both laws, every kind of
// invalid parameter, through sketch.New, rotator.New and grudge.New.
func TestAudit91APIDecayParams(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, p := range []float64{nan, inf, -inf, 0, -1, -1e-300} {
		for name, d := range map[string]decay.Decay{"Exponential": decay.Exponential(p), "Linear": decay.Linear(p)} {
			_, err := sketch.New(sketch.Config{Hi: 1, Decay: d, CellsPerLevel: 8})
			if err == nil || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.Contains(err.Error(), "Decay") {
				t.Errorf("sketch.New with %s(%v): %v", name, p, err)
			}
			_, err = rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1, Decay: d, CellsPerLevel: 8}, Period: time.Second})
			if err == nil || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.Contains(err.Error(), "Decay") {
				t.Errorf("rotator.New with %s(%v): %v", name, p, err)
			}
		}
		for name, d := range map[string]grudge.Decay{"Exponential": grudge.Exponential(p), "Linear": grudge.Linear(p)} {
			if _, err := grudge.New(grudge.Config{Hi: 1, Decay: d, CellsPerLevel: 8}); err == nil || !strings.Contains(err.Error(), "Decay") {
				t.Errorf("grudge.New with %s(%v): %v", name, p, err)
			}
		}
	}
}

// README.md:69-70: "a rotator (every generation rehashes under a new
// seed ...)": the README snippet's rotator (SipHash, a fixed seed here)
// reads a key from different cells after each rotation, and the same
// seed gives the same cells (deterministic per Seed).
func TestAudit91ReadmeRotatorRehashes(t *testing.T) {
	newR := func(clk *sketchtest.FakeClock) *rotator.Rotator {
		r, err := rotator.New(rotator.Config{
			Sketch: sketch.Config{Decay: decay.Linear(10), Hi: 100, Hasher: sketch.SipHash(), Seed: 91, Clock: clk},
			Period: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	idx := func(r *rotator.Rotator) []uint32 {
		var out []uint32
		for _, l := range r.QueryDetailed([]byte("192.0.2.1")).Levels {
			out = append(out, l.Index)
		}
		return out
	}
	c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	r1, r2 := newR(c1), newR(c2)
	seen := map[string]bool{}
	for g := 0; g < 4; g++ {
		a, b := idx(r1), idx(r2)
		if len(a) != 4 || !slices.Equal(a, b) {
			t.Fatalf("generation %d: %v and %v under one seed", g, a, b)
		}
		k := fmt.Sprint(a)
		if seen[k] {
			t.Errorf("generation %d reads the key from cells %v, as an earlier one did", g, a)
		}
		seen[k] = true
		c1.Advance(time.Minute)
		c2.Advance(time.Minute)
	}
}

// README.md:113: limit/limittest, "a fake clock that can wait, for
// deterministic tests of WaitN", used as its doc says: a WaitN on a key
// at its limit waits on the fake clock's timer and returns once the clock
// has moved 100 ms (10/s); x/time/rate's ReserveN shape: OK and Delay.
func TestAudit91ReadmeLimittestWaitN(t *testing.T) {
	clk := limittest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	for i := 0; i < 20; i++ {
		if !l.Allow("k") {
			t.Fatalf("burst request %d denied", i+1)
		}
	}
	r := l.ReserveN(clk.Now(), "k", 1)
	if !r.OK() || r.Delay() != 100*time.Millisecond {
		t.Fatalf("ReserveN on an empty bucket: OK %v Delay %v, want true, 100ms", r.OK(), r.Delay())
	}
	r.Cancel()
	done := make(chan error, 1)
	go func() { done <- l.WaitN(context.Background(), "k", 1) }()
	clk.BlockUntilTimers(1)
	select {
	case err := <-done:
		t.Fatalf("WaitN returned %v before the clock moved", err)
	default:
	}
	clk.Advance(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("WaitN after 100 ms: %v", err)
	}
	if limit.Every(0) != limit.Inf || limit.Every(-time.Second) != limit.Inf {
		t.Errorf("Every(<= 0) is not Inf, as x/time/rate's")
	}
}

// docs/capacity.md:326-330 (cited by README.md:159): "limit's default
// holds 1,249,306 keys at 1% and 1,198,306 at 0.1% on Buckets ...,
// 38,011 and 19,577 on the count-min".
func TestAudit91ReadmeDefaultCapacityFigures(t *testing.T) {
	b := limit.MustNew(10, 20)
	c := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin))
	got := [4]int{b.Capacity(0.01), b.Capacity(0.001), c.Capacity(0.01), c.Capacity(0.001)}
	want := [4]int{1_249_306, 1_198_306, 38_011, 19_577}
	// docs/capacity.md's figures are amd64's: elsewhere the engine's
	// struct (cache-line padding of 128 bytes on arm64) and fused
	// multiply-adds move them by a few lines (as TestAudit3CapDefaults
	// allows: 1e-4 relative).
	for i := range got {
		if got[i] != want[i] && (runtime.GOARCH == "amd64" || math.Abs(float64(got[i]-want[i])) > 1e-4*float64(want[i])) {
			t.Errorf("default Capacity(1%%, 0.1%%) on Buckets and count-min: %v; docs/capacity.md says %v", got, want)
			break
		}
	}
}

// README.md:63-65: "the count-min 1.44 log2(1/deny) cells of 8 bytes per
// key and generation": limit.Suggest's CountMin, for the README table's
// rows.
func TestAudit91ReadmeCountMinCellsPerKey(t *testing.T) {
	for _, r := range []struct {
		keys int
		deny float64
	}{{100_000, 0.01}, {1_000_000, 0.01}, {1_000_000, 0.001}, {10_000_000, 0.01}} {
		s, err := limit.Suggest(r.keys, r.deny)
		if err != nil {
			t.Fatal(err)
		}
		cm := s.CountMin
		per := float64(cm.Levels) * float64(cm.Cells) / float64(r.keys)
		want := 1.44 * math.Log2(1/r.deny)
		if per < 0.97*want || per > 1.05*want {
			t.Errorf("Suggest(%d, %v): %.2f cells per key and generation, README: 1.44 log2(1/deny) = %.2f", r.keys, r.deny, per, want)
		}
		if b := float64(cm.Bytes) / float64(cm.Generations) / float64(cm.Levels) / float64(cm.Cells); b < 8 || b > 8.01 {
			t.Errorf("Suggest(%d, %v): %.3f bytes per cell, README: 8", r.keys, r.deny, b)
		}
	}
}

// limit/example_test.go:59-61 (ExampleParseLimit): a Limit's MarshalText
// "reads back exactly" through ParseLimit (README.md:137: rates from
// flags and files), for the rates New accepts: a fixed-seed sweep of
// magnitudes, Every of odd durations, and the parse forms of the example.
func TestAudit91ExampleParseLimitRoundTrip(t *testing.T) {
	var ls []limit.Limit
	rng := rand.New(rand.NewPCG(91, 91))
	for i := 0; i < 3000; i++ {
		ls = append(ls, limit.Limit(math.Ldexp(1+rng.Float64(), rng.IntN(120)-60)))
	}
	for _, d := range []time.Duration{1, 3, 7 * time.Millisecond, 3 * time.Second, 7 * time.Second, 11 * time.Minute, 13 * time.Hour, 49 * time.Hour, 1234567891} {
		ls = append(ls, limit.Every(d))
	}
	for _, s := range []string{"100/s", "1000/h", "5/m", "10/250ms", "1000-H", "7/3s", "1/d", "3/7ms", "2.5/s", "1e-06/s"} {
		l, err := limit.ParseLimit(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		ls = append(ls, l)
	}
	// The slowest rates New takes: about 2.94e-36 per second (below it,
	// SmallestNonzeroFloat64 included, ParseLimit refuses what New
	// refuses at every burst, since stop 64: audit 130).
	ls = append(ls, limit.Inf, 3e-36, 1e-35, 1e22, limit.Limit(math.Nextafter(1e22, 0)))
	tiny, _ := limit.Limit(math.SmallestNonzeroFloat64).MarshalText()
	if _, err := limit.ParseLimit(string(tiny)); err == nil {
		t.Errorf("ParseLimit(%q) accepted a rate New refuses at every burst", tiny)
	}
	for _, l := range ls {
		text, err := l.MarshalText()
		if err != nil {
			t.Fatalf("%v: MarshalText: %v", float64(l), err)
		}
		back, err := limit.ParseLimit(string(text))
		if err != nil {
			t.Errorf("%v (%q): ParseLimit: %v", float64(l), text, err)
			continue
		}
		if back != l {
			t.Errorf("%v: MarshalText %q reads back as %v", float64(l), text, float64(back))
		}
	}
}
