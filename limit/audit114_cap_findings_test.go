package limit_test

import (
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit114FixedSuggestRefusesWhatCountMinHolds (audit 114; fixed at stop 62, the text below
// says what was wrong): limit.Suggest's doc:
// "CountMin is the zero CountMinSize when no count-min of at most 2^30
// cells per level holds them (the Buckets size may still exist: about 5
// bytes per key). An invalid argument, or a size no engine reaches, is a
// *sketch.ConfigError (field Capacity)." So a size that only the
// count-min reaches must still be answered, with Buckets zero (the
// mirror of the case the doc spells out). Input: Suggest(100000, 1e-9).
// Observed: an error, "bucket: Suggest: 100000 keys at a denial rate of
// 1e-09 need more than 2^32 lines", and a zero Sizing, although the
// count-min reaches it (bucket.SuggestCountMin(100000, 1e-9, 2): 6 x
// 4,684,813 cells, 450 MB in all; 1M keys at 1e-8: 8 x 9,699,414;
// and limit.New(10, 20, WithCapacity(100000, 1e-9),
// WithEngine(CountMin)) builds it, Capacity(1e-9) = 100,000). Suggest is what a user sizes with (and what
// a limiter that runs on the count-min under Auto, a per-minute limit,
// needs): it answers nothing where the sizing exists. Fails now.
func TestAudit114FixedSuggestRefusesWhatCountMinHolds(t *testing.T) {
	for _, c := range []struct {
		keys int
		deny float64
	}{{100_000, 1e-9}, {1_000_000, 1e-8}, {1000, 1e-12}} {
		cm, err := bucket.SuggestCountMin(c.keys, c.deny, 2)
		if err != nil {
			t.Fatalf("SuggestCountMin(%d, %v): %v", c.keys, c.deny, err)
		}
		s, err := limit.Suggest(c.keys, c.deny)
		if err != nil {
			t.Errorf("Suggest(%d, %v) = error %q; the count-min holds them in %d x %d cells (%d bytes), so the doc's \"a size no engine reaches\" does not apply",
				c.keys, c.deny, err, cm.Levels, cm.Cells, cm.Generations*int(cm.Levels)*int(cm.Cells)*8)
			continue
		}
		if s.CountMin.Levels != cm.Levels || s.CountMin.Cells != cm.Cells {
			t.Errorf("Suggest(%d, %v).CountMin = %+v, SuggestCountMin %+v", c.keys, c.deny, s.CountMin, cm)
		}
	}
}

// TestAudit114FixedBucketsFiveBytesPerKey (audit 114; fixed at stop 62, the text below
// says what was wrong): limit.Sizing's doc: "Buckets is
// the Buckets engine's size ...: about 5 bytes per key"; limit/doc.go,
// "Engines": "A key at its limit takes about 5 bytes"; internal/bucket's
// doc: "holds a key at its limit in about 5 bytes" (only
// docs/capacity.md qualifies it: "5.1-5.8 bytes per key at its limit for
// 1% or 0.1%"). Suggest, the sizing those docs describe, answers for
// every deny in (0, 1), and below about 4e-4 the 16-bit fingerprint sets
// the size: a fresh key matches one of the 2 x 14 entries of its lines
// with probability 2 x (keys per line)/65,535, so keys per line must
// fall as deny does. Measured (Suggest's Buckets.Bytes / keys, 1M keys):
// 5.1 B at 1%, 5.3 at 0.1%, 39.1 at 1e-4, 130 at 3e-5, 391 at 1e-5,
// 3,906 at 1e-6, where the count-min takes 337, 403, 473 and 654 bytes
// (two generations): at 1e-6 the "5 bytes" engine is 6 times the
// count-min's size, and WithCapacity(1_000_000, 1e-6) under Auto builds
// 3.9 GB of Buckets (within the default 4 GiB MaxBytes) where the
// count-min needs 0.65 GB. (The default memory's own figure is on that
// side too: 1M keys in 6.10 MiB measured 0.023-0.029% of fresh keys
// denied, seeds 1 and 2, so no "5 bytes per key" limiter meets 1e-4.)
// Either the docs say where "about 5 bytes" holds (deny above about
// 4e-4) or the sizing keeps it; this test asks the sizing for what the
// unqualified docs promise, within a factor 2. Fails now.
func TestAudit114FixedBucketsFiveBytesPerKey(t *testing.T) {
	src, err := os.ReadFile("sizing.go")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`Buckets engine's size[^.]*about 5 bytes per key\.`).Match(src) {
		t.Error("Sizing's doc says \"about 5 bytes per key\" without the denial rates where it holds")
	}
	for _, deny := range []float64{0.01, 3e-3, 1e-3} {
		s, err := limit.Suggest(1_000_000, deny)
		if err != nil {
			t.Fatal(err)
		}
		if per := float64(s.Buckets.Bytes) / 1e6; per > 10 {
			t.Errorf("Suggest(1M, %v): Buckets %d lines, %.1f bytes per key; docs: about 5 bytes per key at 1%% to 0.1%%",
				deny, s.Buckets.Lines, per)
		}
	}
}

// TestAudit114FixedAutoCapacityOnlyCountMin (audit 114; stop 62): under
// Auto, WithCapacity selects the count-min where only it holds the keys
// (1000 keys at 1e-12: more than 2^32 lines; New returned a Capacity
// error), and Auto's usual engine elsewhere (Buckets for New(10, 20) at
// 1%, 0.1% and 1e-6, where the count-min would be smaller: documented,
// WithEngine(CountMin) takes it), with the memory Suggest gives.
func TestAudit114FixedAutoCapacityOnlyCountMin(t *testing.T) {
	for _, c := range []struct {
		keys int
		deny float64
		want limit.Engine
	}{{1000, 0.01, limit.Buckets}, {1000, 1e-3, limit.Buckets}, {1000, 1e-6, limit.Buckets}, {1000, 1e-12, limit.CountMin}} {
		s, err := limit.Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatalf("Suggest(%d, %v): %v", c.keys, c.deny, err)
		}
		l, err := limit.New(10, 20, limit.WithClock(sketchtest.NewFakeClock()), limit.WithCapacity(c.keys, c.deny))
		if err != nil {
			t.Fatalf("New with WithCapacity(%d, %v): %v", c.keys, c.deny, err)
		}
		if l.Engine() != c.want {
			t.Errorf("WithCapacity(%d, %v) under Auto: engine %v, want %v (Suggest: Buckets %d bytes, count-min %d)", c.keys, c.deny, l.Engine(), c.want, s.Buckets.Bytes, s.CountMin.Bytes)
		}
		if got := l.Capacity(c.deny); got < c.keys {
			t.Errorf("WithCapacity(%d, %v) on %v: Capacity = %d", c.keys, c.deny, l.Engine(), got)
		}
		if c.want == limit.Buckets && l.Stats().Bytes != s.Buckets.Bytes {
			t.Errorf("WithCapacity(%d, %v): %d bytes; Suggest's Buckets %d", c.keys, c.deny, l.Stats().Bytes, s.Buckets.Bytes)
		}
		if c.want == limit.CountMin && s.Buckets.Lines != 0 {
			t.Errorf("Suggest(%d, %v).Buckets = %+v; want zero (no Buckets engine holds them)", c.keys, c.deny, s.Buckets)
		}
	}
}

// TestAudit114FixedDocBytesFigures (audit 114; fixed at stop 62, the text below
// says what was wrong): docs/capacity.md, "Saturation reading",
// the operator's alert: limit.MustNew(10, 20)'s Stats published with
// expvar read, "after 1M keys at full debt", {"Engine":"buckets",
// "Bytes":6399952, ...}; internal/bucket's package doc: "a million keys
// at full debt in limit's default 6.14 MiB deny 0.03%". Stats.Bytes is
// Sizes().Total, which no key changes. Observed (amd64): Stats().Bytes =
// 6,400,000 (99,929 lines: 6,395,520 bytes of lines and 4,480 of
// struct), 6.10 MiB; 6.14 MiB is the count-min default's Sizes().Total
// (6,435,264), and 100,543 lines in 6.14 MiB was the bare engine of
// commit 5be175a (capacity.md says so). Fails now.
func TestAudit114FixedDocBytesFigures(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the docs' figures are amd64's")
	}
	l := limit.MustNew(10, 20, limit.WithClock(sketchtest.NewFakeClock()))
	got := l.Stats().Bytes
	md, err := os.ReadFile("../docs/capacity.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"Engine":"buckets","Bytes":(\d+)`).FindSubmatch(md)
	if m == nil {
		t.Fatal("docs/capacity.md: the expvar example is gone")
	}
	if doc, _ := strconv.Atoi(string(m[1])); doc != got {
		t.Errorf("docs/capacity.md's expvar example: \"Bytes\":%d; limit.MustNew(10, 20).Stats().Bytes = %d", doc, got)
	}
	bdoc, err := os.ReadFile("../internal/bucket/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	mib := float64(got) / (1 << 20)
	if strings.Contains(string(bdoc), "limit's default 6.14 MiB") {
		t.Errorf("internal/bucket/doc.go: \"limit's default 6.14 MiB\"; limit.MustNew(10, 20) (Buckets) holds %d bytes, %.2f MiB", got, mib)
	}
}

// TestAudit114FixedStatsSamplingDoc (audit 114; fixed at stop 62, the text below
// says what was wrong): Stats.Saturation's doc: "The Buckets
// engine reads its eviction-floor histogram and samples 4096 lines (as
// many as it has, with replacement, where it has fewer), from an offset
// that advances with each of the limiter's Stats calls". The code
// (internal/bucket/saturation.go) and docs/capacity.md ("an engine of at
// most 4096 lines is read whole, the floor term line by line with each
// line's successor") say otherwise: an engine of at most 4096 lines is
// read whole, each line once, its floors line by line (not from the
// histogram), so the reading is exact and the same on every call; a
// larger one draws 4096 lines at random positions (SplitMix64 from the
// seed and a per-engine count), not a run from an advancing offset.
// Input: limit.New(10, 20, WithCapacity(1000, 0.01)) (85 lines), 600
// keys at full debt, Stats called 20 times. Observed: 20 identical
// readings (0.0215%, every time), where 85 draws
// with replacement would differ from call to call. The doc misdescribes
// what the reading is (and that small engines are exact). Fails now
// while the doc says "with replacement, where it has fewer".
func TestAudit114FixedStatsSamplingDoc(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(3), limit.WithCapacity(1000, 0.01))
	if l.Engine() != limit.Buckets {
		t.Fatalf("engine %v", l.Engine())
	}
	now := clk.Now()
	for i := range 600 {
		l.AllowN(now, "k"+strconv.Itoa(i), 20)
	}
	first := l.Stats().Saturation
	if first == 0 {
		t.Fatal("no heavy entry: the test reads nothing")
	}
	for range 19 {
		if s := l.Stats().Saturation; s != first {
			t.Errorf("readings differ (%v, %v): the doc says an engine of at most 4096 lines is read whole, the same reading on every call", first, s)
		}
	}
	src, err := os.ReadFile("stats.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile(`\s*\n\s*//\s*`).ReplaceAllString(string(src), " ")
	if strings.Contains(doc, "with replacement, where it has fewer") {
		t.Errorf("Stats.Saturation's doc says a Buckets engine of fewer than 4096 lines is sampled with replacement; on %d lines 20 readings were all %v: it is read whole (docs/capacity.md)",
			l.Sizes().Cells/64-1, first)
	}
}
