package main

import (
	"strings"
	"testing"
)

// a103Run is one go test run's output for package pkg: its header, then
// for each (impl, ns/op) a BenchmarkAllow line at keys=1M, P=1.
func a103Run(pkg string, lines ...string) string {
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: " + pkg + "\ncpu: AMD EPYC\n")
	for i := 0; i+1 < len(lines); i += 2 {
		b.WriteString("BenchmarkAllow/path=admitted/impl=" + lines[i] + "/keys=1M         \t 1000000\t       " + lines[i+1] + " ns/op\t         0 wrong/op\n")
	}
	b.WriteString("PASS\nok  \t" + pkg + "\t3.2s\n")
	return b.String()
}

// TestAudit103ReviewAllowratioRounds (passes): rounds split at every
// goos: header, so (a) two packages in one go test run are two rounds
// and a package without BenchmarkAllow lines between them shifts
// nothing; (b) -count 3 in one run divides the round's medians; (c) a
// round missing limit's line drops out of the ratio; (d) lines with no
// header at all (a log cut to its Benchmark lines) are one round 0,
// whose ratio is the ratio of medians, not a pairing by index.
func TestAudit103ReviewAllowratioRounds(t *testing.T) {
	in := a103Run("x/limit", "limit", "100", "syncmap", "300") +
		a103Run("x/other") +
		a103Run("x/limit", "limit", "100", "limit", "200", "limit", "300", "syncmap", "400", "syncmap", "400", "syncmap", "600") +
		a103Run("x/limit", "syncmap", "9999")
	out := a101Main(t, in)
	if row := a101Line(out, "in the same round", "| 1M | admitted | `syncmap` |"); !strings.Contains(row, "2.50x (2.00x-3.00x)") {
		t.Errorf("ratios 3.00x (round 1) and 400/200 = 2.00x (round 3, medians of -count 3): want 2.50x (2.00x-3.00x); got %q\n%s", row, out)
	}
	bare := "BenchmarkAllow/path=admitted/impl=limit/keys=1M \t 1\t 100 ns/op\n" +
		"BenchmarkAllow/path=admitted/impl=syncmap/keys=1M \t 1\t 500 ns/op\n" +
		"BenchmarkAllow/path=admitted/impl=limit/keys=1M \t 1\t 300 ns/op\n"
	out = a101Main(t, bare)
	if row := a101Line(out, "in the same round", "| 1M | admitted | `syncmap` |"); !strings.Contains(row, "2.50x (2.50x-2.50x)") {
		t.Errorf("headerless lines: one round, 500 / median(100, 300) = 2.50x; got %q\n%s", row, out)
	}
}
