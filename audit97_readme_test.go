package grudge_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

func a97Read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// a97Line returns the 1-based number of the first line of doc holding
// sub, or 0.
func a97Line(doc, sub string) int {
	i := strings.Index(doc, sub)
	if i < 0 {
		return 0
	}
	return strings.Count(doc[:i], "\n") + 1
}

// TestAudit97ReadmeFixedCoreGoGetUnpublished (audit 97; fixed at stop 59,
// the text below says what was wrong; the line now points to
// "Installing"). README.md:33-35, "To use it": `go get github.com/lfgrudge/grudge@latest`
// with no caveat, while the Redis section's line (README.md:217) says
// "not yet published", README.md:237-240 says "Neither module is tagged
// yet", and docs/distributed.md:19-20 says "Until then `go get` of either
// fails (the proxy answers 404/403 ...)". Run as written on this tree,
// the core line fails too:
//
//	go: github.com/lfgrudge/grudge@latest: module github.com/lfgrudge/grudge:
//	reading https://proxy.golang.org/github.com/lfgrudge/grudge/@v/list: 403 Forbidden
//
// A newcomer following "To use it" gets no hint. The line must say so,
// as the Redis one does (or the module must be published).
func TestAudit97ReadmeFixedCoreGoGetUnpublished(t *testing.T) {
	readme := a97Read(t, "README.md")
	var core string
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "go get github.com/lfgrudge/grudge@") {
			core = l
		}
	}
	if core == "" {
		t.Fatal("README.md has no `go get github.com/lfgrudge/grudge@...` line")
	}
	if !strings.Contains(a97Read(t, "docs/distributed.md"), "`go get` of either fails") {
		t.Fatal("docs/distributed.md no longer says go get of either module fails: published? update this test")
	}
	if !strings.Contains(core, "not yet") || !strings.Contains(core, "see") {
		t.Errorf("README.md:%d %q: the core module is not published (docs/distributed.md:19-20: "+
			"\"`go get` of either fails\"; the proxy answers 403), yet the line has no caveat, "+
			"unlike README.md:%d's Redis line", a97Line(readme, core), core, a97Line(readme, "go get github.com/lfgrudge/grudge/redis@"))
	}
}

// TestAudit97ReadmeFixedReadingsXTimeVersion (audit 97; fixed at stop 59,
// the text below says what was wrong). docs/readings.md:25 ("`sync.Map` of `*rate.Limiter` (golang.org/x/time/rate
// v0.16.0)") and :555 ("follows golang.org/x/time/rate (v0.16.0, read from
// its source)"): the benchmarks that measured the syncmap/lru/otter rows
// (bench/go.mod) and the parity tests (tests/go.mod) build against the
// x/time that their go.mod requires, v0.15.0, as docs/readings.md:122-123
// itself says of the Allow run.
func TestAudit97ReadmeFixedReadingsXTimeVersion(t *testing.T) {
	readings := a97Read(t, "docs/readings.md")
	req := regexp.MustCompile(`(?m)^\s*golang\.org/x/time (v[0-9.]+)`)
	for _, mod := range []string{"bench/go.mod", "tests/go.mod"} {
		m := req.FindStringSubmatch(a97Read(t, mod))
		if m == nil {
			t.Fatalf("%s requires no golang.org/x/time", mod)
		}
		for _, claim := range regexp.MustCompile(`golang\.org/x/time/rate,? \(?(v[0-9.]+)`).FindAllStringSubmatch(readings, -1) {
			if claim[1] != m[1] {
				t.Errorf("docs/readings.md:%d names x/time/rate %s; %s requires %s", a97Line(readings, claim[0]), claim[1], mod, m[1])
			}
		}
	}
}

// docs/readings.md's commands and the names its prose cites: every
// benchmark, test, tool flag, file and option exists under that name
// where the command runs it.
func TestAudit97ReadmeReadingsNames(t *testing.T) {
	src := func(glob string) string {
		files, _ := filepath.Glob(glob)
		var b strings.Builder
		for _, f := range files {
			b.WriteString(a97Read(t, f))
		}
		return b.String()
	}
	benchLimit := src("bench/limit/*_test.go")
	for _, f := range []string{"BenchmarkAllow(", "BenchmarkHeap(", "BenchmarkAllowHot(", "BenchmarkForget(", "BenchmarkAbuser("} {
		if !strings.Contains(benchLimit, "func "+f) {
			t.Errorf("docs/readings.md runs `-bench %s` in bench/limit; no such benchmark", strings.TrimPrefix(f[:len(f)-1], "Benchmark"))
		}
	}
	// The implementations' names of the tables (the sub-benchmarks'
	// impl=...): readings.md:21-30.
	for _, n := range []string{"limit", "limit-countmin", "syncmap", "syncmap-ttl", "reference", "lru", "otter", "memorystore"} {
		if !strings.Contains(benchLimit, `{"`+n+`"`) {
			t.Errorf("docs/readings.md's implementation %q is not one of bench/limit's", n)
		}
	}
	// readings.md:97 and :379-380 select sub-benchmarks path=/impl=/keys=.
	if !strings.Contains(benchLimit, `"path=%s/impl=%s/keys=%s"`) {
		t.Errorf("bench/limit's Allow sub-benchmarks are not named path=/impl=/keys= as readings.md's -bench patterns expect")
	}
	for _, c := range []struct{ glob, fn string }{
		{"limit/*_test.go", "func BenchmarkSnapshot("},                         // readings.md:598
		{"internal/hw/*_test.go", "func BenchmarkPrefetch("},                   // readings.md:268
		{"limit/*_test.go", "func TestTierAllocs("},                            // readings.md:366
		{"limit/*_test.go", "func TestCounterShards("},                         // readings.md:433
		{"sketch/snapshot/*_test.go", "func TestLimiterCrashDuringSnapshots("}, // readings.md:608
		{"limit/*.go", "func (l *Limiter) allow("},                             // readings.md:280 objdump -s
		{"internal/hw/*.go", "func Prefetch("},                                 // readings.md:258
		{"internal/core/*.go", ") Hash("},                                      // readings.md:257 core.Sketch.Hash
		{"internal/core/*.go", ") Prefetch("},                                  // readings.md:257
		{"limit/*.go", "func WithPrefetch("},                                   // readings.md:255
		{"bench/cmd/heapplot/*.go", `flag.String("o"`},                         // readings.md:48
		{"bench/cmd/heapplot/*.go", `flag.String("note"`},                      // readings.md:48
	} {
		if !strings.Contains(src(c.glob), c.fn) {
			t.Errorf("docs/readings.md cites %q in %s: not found", c.fn, c.glob)
		}
	}
	for _, p := range []string{"limit/stats.go", "internal/units", "docs/img/readings-heap.png", "bench/cmd/allowratio", "bench/limit/bench_test.go", "bench/limit/peers_test.go"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("docs/readings.md names %s: %v", p, err)
		}
	}
	// readings.md:28-30: the peers' versions.
	mod := a97Read(t, "bench/go.mod")
	for _, v := range []string{"github.com/hashicorp/golang-lru/v2 v2.0.7", "github.com/maypok86/otter/v2 v2.4.0", "github.com/sethvargo/go-limiter v0.7.1"} {
		if !strings.Contains(mod, v) {
			t.Errorf("docs/readings.md names %s; bench/go.mod does not require it", v)
		}
	}
}

// docs/readings.md:461-462: "`limit.New` puts this policy [1e-6/s, burst
// 1] on the count-min (Buckets refuses a debt that takes 2e6 s to
// drain)"; :505-506: "Policy 10/s, burst 20: `limit.New` runs it on
// Buckets"; :204-205: the count-min's "3.2 MB every derived Period of
// 0.32 s at r=1000, b=10".
func TestAudit97ReadmeReadingsEngines(t *testing.T) {
	if e := limit.MustNew(1e-6, 1).Engine(); e != limit.CountMin {
		t.Errorf("New(1e-6, 1): engine %v, readings.md: the count-min", e)
	}
	_, err := limit.New(1e-6, 1, limit.WithEngine(limit.Buckets))
	var ce *sketch.ConfigError
	if err == nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Errorf("New(1e-6, 1, WithEngine(Buckets)): %v; readings.md: Buckets refuses it", err)
	}
	if l := limit.MustNew(1e-6, 1, limit.WithEngine(limit.CountMin)); l.MaxDebt()/1e-6 != 2e6 {
		t.Errorf("1e-6/s, burst 1: MaxDebt %v takes %v s to drain, readings.md: 2e6 s", l.MaxDebt(), l.MaxDebt()/1e-6)
	}
	if e := limit.MustNew(10, 20).Engine(); e != limit.Buckets {
		t.Errorf("New(10, 20): engine %v, readings.md: Buckets", e)
	}
	cm := limit.MustNew(1000, 10, limit.WithEngine(limit.CountMin))
	if p := cm.Period(); p != 320*time.Millisecond {
		t.Errorf("count-min at 1000/s, b=10: Period %v, readings.md: 0.32 s", p)
	}
	if gen := cm.Sizes().Cells / 2; gen < 3_200_000 || gen > 3_200_000+512 {
		t.Errorf("count-min at 1000/s, b=10: a generation of %d B, readings.md: 3.2 MB", gen)
	}
}

// docs/readings.md:502-508 ("Live traffic"): policy 10/s, burst 20, an
// abuser at 20/s, 15/s or 200/s for 10 simulated seconds: "its own
// token bucket alone admits 119 of them (`ideal`)", and the `limit`
// rows (Buckets) got "119 every run"; the count-min "never admits the
// abuser beyond its bucket (one-sided)" (:537-538). On a fake clock: the
// abuser alone gets exactly 119 on both engines, and among a crowd on a
// count-min shrunk so that its cells collide (2 x 1,000 cells for 20k
// clients/s, the crowd alone more than its drain) it gets no more.
func TestAudit97ReadmeReadingsAbuserIdeal(t *testing.T) {
	const seconds = 10
	for _, rate := range []int{20, 15, 200} {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			clk := sketchtest.NewFakeClock()
			base := clk.Now()
			l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(97))
			admits := 0
			step := time.Second / time.Duration(rate)
			for at := time.Duration(0); at < seconds*time.Second; at += step {
				clk.SetTime(base.Add(at))
				if l.AllowN(clk.Now(), "abuser", 1) {
					admits++
				}
			}
			if admits != 119 {
				t.Errorf("%v, abuser alone at %d/s for 10 s: %d admitted, readings.md: the ideal 119", e, rate, admits)
			}
		}
	}
	// The crowd: 20k clients, one request a second each, spread evenly.
	clk := sketchtest.NewFakeClock()
	base := clk.Now()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSize(2, 1000), limit.WithSeed(97))
	const clients = 20_000
	step := time.Second / clients
	next, admits, ideal, denied, requests := time.Duration(0), 0, 0, 0, 0
	var tokens float64 = 20
	last := time.Duration(0)
	buf := make([]byte, 0, 16)
	for s := 0; time.Duration(s)*step < 4*time.Second; s++ {
		at := time.Duration(s) * step
		clk.SetTime(base.Add(at))
		buf = strconv.AppendInt(append(buf[:0], "c-"...), int64(s%clients), 10)
		requests++
		if !l.AllowN(clk.Now(), string(buf), 1) {
			denied++
		}
		if at >= next {
			next += time.Second / 20
			if l.AllowN(clk.Now(), "abuser", 1) {
				admits++
			}
			tokens = min(20, tokens+10*(at-last).Seconds())
			last = at
			if tokens >= 1 {
				tokens--
				ideal++
			}
		}
	}
	if admits > ideal {
		t.Errorf("count-min among a crowd: abuser admitted %d, its own bucket admits %d: above the truth", admits, ideal)
	}
	t.Logf("count-min 2x1000 among 20k clients/s: abuser %d of ideal %d, clients denied %.2f%%", admits, ideal, 100*float64(denied)/float64(requests))
}

// docs/readings.md:450-469 ("Beyond the bound"): policy 1e-6/s, burst 1
// (the count-min), the abuser's first request admitted, then three times
// 16k fresh clients and the abuser again: `limit` admits the abuser 0 of
// 3 times and denies 0.50% of the fresh clients (48k standing debts in
// 2 x 4 x 100,000 cells). On a fake clock with a fixed seed: 0 admits,
// and a fresh-denied share of the order the table gives.
func TestAudit97ReadmeReadingsForgetGap16k(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(1e-6, 1, limit.WithClock(clk), limit.WithSeed(97))
	if l.Engine() != limit.CountMin {
		t.Fatalf("engine %v", l.Engine())
	}
	if !l.Allow("abuser") {
		t.Fatal("the abuser's first request was denied")
	}
	const rounds, gap = 3, 16 << 10
	admits, denied := 0, 0
	buf := make([]byte, 0, 32)
	for r := range rounds {
		for i := range gap {
			buf = strconv.AppendUint(append(strconv.AppendUint(append(buf[:0], "fresh-"...), uint64(r), 10), '-'), uint64(i), 10)
			if !l.Allow(string(buf)) {
				denied++
			}
		}
		if l.Allow("abuser") {
			admits++
		}
	}
	share := float64(denied) / float64(rounds*gap)
	if admits != 0 {
		t.Errorf("abuser admitted %d of 3 times; readings.md: 0", admits)
	}
	// 0.50% measured; the share depends on the seed: within a factor 3.
	if share < 0.005/3 || share > 0.005*3 {
		t.Errorf("fresh-denied %.3f%%; readings.md: 0.50%%", 100*share)
	}
	t.Logf("fresh-denied %.3f%%", 100*share)
}

// docs/distributed.md, "Installing" (and README.md:236-240), as a
// newcomer checks it on a checkout: redis/go.mod requires the core at
// v0.1.0 with no replace directive; go.work uses . and ./redis and
// carries the workspace-only replace of exactly that version by ./;
// go.work.sum exists; `make tidy-check-redis` (part of `make test`, via
// test-redis) and `make tidy-redis` tidy a -modfile copy that adds the
// pinned replace.
func TestAudit97ReadmeDistributedInstalling(t *testing.T) {
	mod := a97Read(t, "redis/go.mod")
	if !regexp.MustCompile(`(?m)^\s*(require\s+)?github\.com/lfgrudge/grudge v0\.1\.0\s*$`).MatchString(mod) {
		t.Errorf("docs/distributed.md:14: redis/go.mod does not require github.com/lfgrudge/grudge v0.1.0")
	}
	if regexp.MustCompile(`(?m)^\s*replace\b`).MatchString(mod) {
		t.Errorf("docs/distributed.md:14-15: redis/go.mod has a replace directive")
	}
	work := a97Read(t, "go.work")
	for _, u := range []string{"\t.\n", "\t./redis\n"} {
		if !strings.Contains(work, u) {
			t.Errorf("docs/distributed.md:25: go.work does not use %q", strings.TrimSpace(u))
		}
	}
	if !regexp.MustCompile(`(?m)^replace github\.com/lfgrudge/grudge v0\.1\.0 => \./\s*$`).MatchString(work) {
		t.Errorf("docs/distributed.md:29: go.work lacks `replace github.com/lfgrudge/grudge v0.1.0 => ./`")
	}
	if _, err := os.Stat("go.work.sum"); err != nil {
		t.Errorf("docs/distributed.md:31: %v", err)
	}
	mk := a97Read(t, "Makefile")
	for _, target := range []string{"tidy-check-redis", "tidy-redis"} {
		body := regexp.MustCompile(`(?ms)^` + target + `:[^\n]*\n(.*?)\n\n`).FindStringSubmatch(mk)
		if body == nil || !strings.Contains(body[1], "-modfile") || !strings.Contains(body[1], "replace github.com/lfgrudge/grudge") {
			t.Errorf("docs/distributed.md:34-38: make %s does not tidy a -modfile copy with the pinned replace", target)
		}
	}
	if !regexp.MustCompile(`(?m)^test-redis:.*\btidy-check-redis\b`).MatchString(mk) || !regexp.MustCompile(`(?m)^test:.*\btest-emulated-with-redis\b`).MatchString(mk) ||
		!strings.Contains(mk, "--no-print-directory test-redis'") {
		t.Errorf("docs/distributed.md:34: tidy-check-redis is not part of make test")
	}
}

// TestAudit97ReadmeFixedHeapMaxUnread (audit 97; fixed at stop 59, the
// text below says what was wrong; BenchmarkHeap now reads it, see
// heapCounts). docs/readings.md:45-48 runs `go test -run '^$' -bench Heap -benchtime 1x
// ./limit/` in bench/ (1M and 10M keys per implementation: about 2 GB for
// the 10M sync.Map); the benchmark's doc (bench/limit/bench_test.go:
// "Set LIMIT_HEAP_MAX to cap the key counts (e.g. 3000000) on a machine
// short of memory") names an environment variable that nothing reads:
// run with LIMIT_HEAP_MAX=1000000, the benchmark still ran keys=10M
// (BenchmarkHeap/impl=limit/keys=10M, 10 s; then syncmap's 10M).
func TestAudit97ReadmeFixedHeapMaxUnread(t *testing.T) {
	files, _ := filepath.Glob("bench/limit/*.go")
	named, read := "", false
	for _, f := range files {
		src := a97Read(t, f)
		if n := a97Line(src, "LIMIT_HEAP_MAX"); n > 0 && named == "" {
			named = f + ":" + strconv.Itoa(n)
		}
		if regexp.MustCompile(`os\.(Getenv|LookupEnv)\("LIMIT_HEAP_MAX"\)`).MatchString(src) {
			read = true
		}
	}
	if named != "" && !read {
		t.Errorf("%s: BenchmarkHeap's doc says LIMIT_HEAP_MAX caps the key counts; no code in bench/limit reads it", named)
	}
}

// README.md:141-144: "A limiter (and `meter.Rate`, `meter.Novelty`)
// survives a deploy: it is a `snapshot.Source` and `Destination`, so a
// `snapshot.Saver` writes it every interval and `snapshot.Load` restores
// it, debts drained by the downtime" (docs/readings.md:587-592: "the
// hidden hash seed, which the restoring limiter adopts"). Through a
// Saver (an interval of an hour: Save and Close write, nothing else),
// into limiters and meters built with other seeds, on both engines.
func TestAudit97ReadmeSaverDeploy(t *testing.T) {
	dir := t.TempDir()
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(1))
		for range 20 {
			l.Allow("abuser")
		}
		path := filepath.Join(dir, e.String())
		sv, err := snapshot.NewSaver(path, time.Hour, l)
		if err != nil {
			t.Fatal(err)
		}
		if err := sv.Save(); err != nil || sv.Saves() != 1 {
			t.Fatalf("%v: Save: %v, %d saves", e, err, sv.Saves())
		}
		l.Allow("late") // after the periodic save: Close's final one has it
		if err := sv.Close(); err != nil || sv.Saves() != 2 {
			t.Fatalf("%v: Close: %v, %d saves", e, err, sv.Saves())
		}
		clk.Advance(500 * time.Millisecond) // the downtime
		clk2 := sketchtest.NewFakeClock()
		clk2.SetTime(clk.Now())
		l2 := limit.MustNew(10, 20, limit.WithClock(clk2), limit.WithEngine(e), limit.WithSeed(2))
		if err := snapshot.Load(path, l2); err != nil {
			t.Fatalf("%v: Load: %v", e, err)
		}
		n := 0
		for n < 100 && l2.Allow("abuser") {
			n++
		}
		if n != 5 {
			t.Errorf("%v: restored 0.5 s after its burst of 20, the abuser got %d; want 5 (drained by the downtime)", e, n)
		}
		if tok := l2.Tokens("late"); tok != 20 {
			// one token owed at the save, 0.1 s of drain: 0.5 s later, full.
			t.Errorf("%v: \"late\" restored with %v tokens, want 20", e, tok)
		}
		if d := l2.Peek("late"); !d.Allowed || d.Remaining != 19 {
			t.Errorf("%v: fresh after restore: %+v", e, d)
		}
	}
	// meter.Rate and meter.Novelty through a Saver.
	clk := sketchtest.NewFakeClock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 1024))
	nv, _ := meter.NewNovelty(time.Minute, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 1024))
	for range 200 {
		clk.Advance(10 * time.Millisecond)
		r.Observe("k")
	}
	nv.Seen("m")
	for name, src := range map[string]snapshot.Source{"rate": r, "novelty": nv} {
		sv, err := snapshot.NewSaver(filepath.Join(dir, name), time.Hour, src)
		if err != nil {
			t.Fatal(err)
		}
		if err := sv.Close(); err != nil {
			t.Fatalf("%s: Close: %v", name, err)
		}
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.SetTime(clk.Now())
	r2, _ := meter.NewRate(time.Second, meter.WithClock(clk2), meter.WithSeed(2), meter.WithSize(2, 1024))
	nv2, _ := meter.NewNovelty(time.Minute, meter.WithClock(clk2), meter.WithSeed(2), meter.WithSize(2, 1024))
	if err := snapshot.Load(filepath.Join(dir, "rate"), r2); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Load(filepath.Join(dir, "novelty"), nv2); err != nil {
		t.Fatal(err)
	}
	if got, want := r2.PerSecond("k"), r.PerSecond("k"); got != want || got <= 0 {
		t.Errorf("Rate restored through a Saver: %v, the original %v", got, want)
	}
	if !nv2.Contains("m") || nv2.Contains("n") {
		t.Errorf("Novelty restored through a Saver: m %v, n %v; want true, false", nv2.Contains("m"), nv2.Contains("n"))
	}
}

// TestAudit97ReadmeDocumentedTableMeasured (audit 97; documented at stop
// 59, the text below says what was wrong; the column now reads "fresh
// keys denied (Buckets: at most; count-min: expected)", Suggest's doc
// says the count-min's is the formula's expected share, and the test
// asserts both). README.md:55-60, the sizing table: its second column
// was "fresh keys denied at most", and the count-min cell for 100,000
// keys at 1% read "14.6 MiB (measured 1.02%)": above the "at most". The
// Buckets engine keeps a margin (docs/capacity.md: "Suggest asks the
// model for half the rate"); the count-min is sized at the Bloom
// formula's expected rate, so a given seed denies more than deny about
// half the time (next test).
func TestAudit97ReadmeDocumentedTableMeasured(t *testing.T) {
	readme := a97Read(t, "README.md")
	if !strings.Contains(readme, "fresh keys denied (Buckets: at most; count-min: expected)") {
		t.Fatal("README.md's sizing table no longer names its column as the test expects: update the test")
	}
	row := regexp.MustCompile(`(?m)^\| [0-9,]+ \| ([0-9.]+)% \|([^|]*)\|([^|]*)\|`)
	measured := regexp.MustCompile(`measured ([0-9.]+)%`)
	rows := row.FindAllStringSubmatch(readme, -1)
	if len(rows) < 4 {
		t.Fatalf("README.md's sizing table: %d rows", len(rows))
	}
	for _, r := range rows {
		target, _ := strconv.ParseFloat(r[1], 64)
		for col, cell := range []string{r[2], r[3]} {
			for _, m := range measured.FindAllStringSubmatch(cell, -1) {
				got, _ := strconv.ParseFloat(m[1], 64)
				if col == 0 && got > target {
					t.Errorf("README.md:%d: Buckets %q above its \"at most\" %v%%", a97Line(readme, r[0]), m[0], target)
				}
				if col == 1 && (got < 0.9*target || got > 1.1*target) {
					t.Errorf("README.md:%d: count-min %q more than 10%% off its expected %v%%", a97Line(readme, r[0]), m[0], target)
				}
			}
		}
	}
}

// TestAudit97ReadmeDocumentedCountMinCapacity (audit 97; documented at
// stop 59, the text below says what was wrong; Suggest's doc now says
// the count-min is sized for the expected share, missed by a few percent
// of it either way, and the test asserts within 10%). The same row
// measured: limit.New(10, 20, WithEngine(CountMin),
// WithCapacity(100_000, 0.01)) (14.7 MiB), 100,000 keys each taking their
// whole burst, then 200,000 fresh keys peeked with one token, on a fake
// clock, seeds 1 to 6. Observed (amd64): fresh denied 0.972%, 1.006%,
// 0.973%, 0.956%, 1.062%, 0.973%: seeds 2 and 5 above 1%. README.md:55
// and limit/sizing.go (Suggest: "a fresh-key denial rate of at most
// deny") promise at most 1%. (Stats().Saturation is not used: its sample
// offset comes from a process-wide counter of Stats calls, so its reading
// depends on which tests ran before.)
func TestAudit97ReadmeDocumentedCountMinCapacity(t *testing.T) {
	testsize.Serial(t)
	var over []string
	for seed := uint64(1); seed <= 6; seed++ {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin),
			limit.WithCapacity(100_000, 0.01), limit.WithSeed(seed))
		buf := make([]byte, 0, 16)
		for i := 0; i < 100_000; i++ {
			buf = strconv.AppendInt(append(buf[:0], "k"...), int64(i), 10)
			l.AllowN(clk.Now(), string(buf), 20)
		}
		const probes = 200_000
		denied := 0
		for i := 0; i < probes; i++ {
			buf = strconv.AppendInt(append(buf[:0], "f"...), int64(i), 10)
			if !l.PeekN(clk.Now(), string(buf), 1).Allowed {
				denied++
			}
		}
		t.Logf("seed %d: %d denied", seed, denied)
		if rate := float64(denied) / probes; rate < 0.009 || rate > 0.011 {
			over = append(over, "seed "+strconv.FormatUint(seed, 10)+": fresh denied "+strconv.FormatFloat(100*rate, 'f', 3, 64)+"%")
		}
	}
	if len(over) > 0 {
		t.Errorf("count-min sized by WithCapacity(100000, 0.01) with 100000 keys at their limit: more than 10%% off the expected 1%% (Suggest's doc: a few percent either way):\n  %s", strings.Join(over, "\n  "))
	}
}

// TestAudit97ReadmeDocumentedReadingsAllowLimitRow (audit 97; documented
// at stop 59, the text below says what was wrong; readings.md now says
// the table's `limit` rows are the count-min's, and the test asserts the
// note and today's engine). docs/readings.md, "Allow, ns/op": the `limit` implementation is
// `limit.MustNew(r, b)` (readings.md:23; bench/limit/bench_test.go's
// benchImpls[0]), which at the admitted path's r=1000, b=10 runs on
// Buckets (readings.md:10-11), a table that does not rotate (Period 0).
// Yet readings.md:203-206 explains `limit`'s "0-9 B/op on the admitted
// path" as "the promotion's new generation (3.2 MB every derived Period
// of 0.32 s at r=1000, b=10)", :218-219 says `limit` "writes two
// generations' cells", and :237-239 "Both limiters are a rotator of two
// generations ... (6.4 MB of cells for `limit`...)": the section's
// `limit` rows were measured at df20001, before 435d10e made Buckets the
// default, i.e. on the count-min, now `limit-countmin`. Run today
// (`go test -run '^$' -bench 'Allow$' -benchtime 1000x -cpu 1 ./limit/`
// in bench/), `limit` shows 0 B/op on every path.
func TestAudit97ReadmeDocumentedReadingsAllowLimitRow(t *testing.T) {
	if !strings.Contains(a97Read(t, "docs/readings.md"), "are the count-min's, the engine the suite now names\n`limit-countmin`") {
		t.Error("docs/readings.md's Allow section no longer says its `limit` rows are the count-min's")
	}
	l := limit.MustNew(1000, 10)
	if l.Engine() != limit.Buckets || l.Period() != 0 {
		t.Errorf("MustNew(1000, 10): engine %v, Period %v; readings.md: today's `limit` is on Buckets and never rotates", l.Engine(), l.Period())
	}
}

// docs/readings.md:515-531 ("Live traffic"), the `limit` (Buckets) rows:
// among 1M clients each asking once a second (1M requests/s) the abuser
// at 20/s "got its 119 in every run and no client was denied", in 6.1
// MiB. The same traffic on a fake clock for 2 simulated seconds (2M
// client requests, the abuser's own bucket admitting 20 + 10 x 1.95 =
// 39), seed fixed: the abuser gets exactly its bucket's 39, no client is
// denied.
func TestAudit97ReadmeReadingsLiveTrafficBuckets(t *testing.T) {
	testsize.Serial(t)
	const clients = 1 << 20
	clk := sketchtest.NewFakeClock()
	base := clk.Now()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(97))
	if l.Engine() != limit.Buckets {
		t.Fatalf("New(10, 20): engine %v", l.Engine())
	}
	step := time.Second / clients
	var next time.Duration
	admits, denied := 0, 0
	buf := make([]byte, 0, 32)
	for s := uint64(0); time.Duration(s)*step < 2*time.Second; s++ {
		at := time.Duration(s) * step
		clk.SetTime(base.Add(at))
		buf = strconv.AppendUint(append(buf[:0], "client-"...), s%clients, 10)
		if !l.AllowN(clk.Now(), string(buf), 1) {
			denied++
		}
		if at >= next {
			next += time.Second / 20
			if l.AllowN(clk.Now(), "abuser", 1) {
				admits++
			}
		}
	}
	if admits != 39 || denied != 0 {
		t.Errorf("Buckets among 1M clients/s: abuser admitted %d (its bucket: 39), %d client requests denied (want 0)", admits, denied)
	}
}
