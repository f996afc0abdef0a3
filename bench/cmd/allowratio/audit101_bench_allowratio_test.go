package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// a101Main runs main with input on stdin and returns what it printed.
func a101Main(t *testing.T, input string) string {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	fo, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	oldIn, oldOut := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = fi, fo
	defer func() { os.Stdin, os.Stdout = oldIn, oldOut }()
	main()
	b, err := os.ReadFile(fo.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// a101Round is one `go test -bench 'Allow$' -cpu 1` run's output, one
// line per implementation given (name, ns/op), as go test prints it.
func a101Round(lines ...string) string {
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: github.com/lfgrudge/grudge/bench/limit\ncpu: AMD EPYC\n")
	for i := 0; i+1 < len(lines); i += 2 {
		b.WriteString("BenchmarkAllow/path=admitted/impl=" + lines[i] + "/keys=1M         \t 1000000\t       " + lines[i+1] + " ns/op\t         0 wrong/op\t       0 B/op\t       0 allocs/op\n")
	}
	b.WriteString("PASS\nok  \tgithub.com/lfgrudge/grudge/bench/limit\t3.2s\n")
	return b.String()
}

// a101Line returns the output line that starts with prefix after the
// heading that contains heading.
func a101Line(out, heading, prefix string) string {
	_, rest, ok := strings.Cut(out, heading)
	if !ok {
		return ""
	}
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestAudit101BenchFixedAllowratioRatioPairsByIndexNotRound (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc (bench/cmd/allowratio/main.go): "Each `go test` run is one round
// ... the second [table], for each other implementation, the ratio of
// its ns/op to limit's within the same round", and the printed heading
// "ns/op of the implementation / ns/op of `limit` in the same round".
//
// Code: rounds are never identified (the "goos:"/"PASS"/"ok" lines that
// delimit a go test run are skipped); the ratio pairs the i-th line of
// an implementation with the i-th line of limit. As soon as one round
// lacks a line (a run cut short by -timeout or ^C, a sub-benchmark that
// failed, a -bench filter changed between rounds) every later pair mixes
// two rounds.
//
// Repro: round 1 has only limit (100 ns/op; the run died before
// syncmap), round 2 limit 200 / syncmap 400, round 3 limit 100 /
// syncmap 200. In the same round syncmap is 2.00x in both rounds that
// have it (median 2.00x (2.00x-2.00x)); allowratio prints 2.50x
// (1.00x-4.00x), pairing round 2's syncmap with round 1's limit.
func TestAudit101BenchFixedAllowratioRatioPairsByIndexNotRound(t *testing.T) {
	in := a101Round("limit", "100") + a101Round("limit", "200", "syncmap", "400") + a101Round("limit", "100", "syncmap", "200")
	out := a101Main(t, in)
	row := a101Line(out, "in the same round", "| 1M | admitted | `syncmap` |")
	if row == "" {
		t.Fatalf("no syncmap ratio row:\n%s", out)
	}
	if !strings.Contains(row, "2.00x (2.00x-2.00x)") {
		t.Errorf("ratio row %q: within each round that has both, syncmap/limit = 400/200 = 200/100 = 2.00x; "+
			"allowratio pairs the i-th lines instead of the same round's\n%s", row, out)
	}
}

// TestAudit101BenchAllowratioParsesGoTestLines (passes): the regexp
// reads go test's lines as testing.BenchmarkResult.String prints them:
// the -cpu suffix (none at P=1), ns/op with decimals or without (at or
// above 999.95), wrong/op right after ns/op (custom metrics sort after
// ns/op) in go test's small-number form, then B/op and allocs/op.
func TestAudit101BenchAllowratioParsesGoTestLines(t *testing.T) {
	for _, c := range []struct {
		in                         string
		path, impl, keys, p, ns, w string
	}{
		{"BenchmarkAllow/path=denied/impl=syncmap-ttl/keys=16k-2 \t 1000000\t       178.4 ns/op\t 0.0000050 wrong/op\t      0 B/op\t       0 allocs/op",
			"denied", "syncmap-ttl", "16k", "2", "178.4", "0.0000050"},
		{"BenchmarkAllow/path=admitted/impl=limit/keys=1M       \t 1000000\t      1234 ns/op\t         0 wrong/op",
			"admitted", "limit", "1M", "", "1234", "0"},
		{"BenchmarkAllow/path=admitted/impl=bucket/keys=1M-16   \t 1000000\t        45.67 ns/op",
			"admitted", "bucket", "1M", "16", "45.67", ""},
	} {
		m := line.FindStringSubmatch(c.in)
		if m == nil {
			t.Errorf("no match: %q", c.in)
			continue
		}
		if m[1] != c.path || m[2] != c.impl || m[3] != c.keys || m[4] != c.p || m[5] != c.ns || m[6] != c.w {
			t.Errorf("%q parsed as %q", c.in, m[1:])
		}
	}
}
