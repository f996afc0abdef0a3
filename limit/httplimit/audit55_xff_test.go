package httplimit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// a55XFFOracle is the split-based forwardedFor of before e073dd7.
func a55XFFOracle(lines []string, n int) (netip.Addr, error) {
	var parts []string
	for _, l := range lines {
		parts = append(parts, strings.Split(l, ",")...)
	}
	if len(parts) < n {
		return netip.Addr{}, fmt.Errorf("%w: %d entries, fewer than the %d trusted proxies", ErrForwardedFor, len(parts), n)
	}
	s := strings.TrimSpace(parts[len(parts)-n])
	a, err := netip.ParseAddr(s)
	if err != nil {
		if ap, err2 := netip.ParseAddrPort(s); err2 == nil {
			return ap.Addr(), nil
		}
		return netip.Addr{}, fmt.Errorf("%w: cannot parse the entry %q", ErrForwardedFor, s)
	}
	return a, nil
}

func a55XFFCompare(t *testing.T, lines []string, n int) {
	ga, gerr := forwardedFor(lines, n)
	wa, werr := a55XFFOracle(lines, n)
	if ga != wa || (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) ||
		(gerr != nil && !errors.Is(gerr, ErrForwardedFor)) {
		t.Fatalf("forwardedFor(%q, %d) = %v, %v; split oracle %v, %v", lines, n, ga, gerr, wa, werr)
	}
}

// TestAudit55ForwardedForTable: the scan from the right agrees with the
// split-based oracle on hand-picked headers (empty lines, trailing and
// leading commas, ports, v6, zones, several lines, n past the count).
func TestAudit55ForwardedForTable(t *testing.T) {
	cases := [][]string{
		nil, {}, {""}, {"", ""}, {","}, {",,"}, {" , "},
		{"1.2.3.4"}, {"1.2.3.4,"}, {",1.2.3.4"}, {"1.2.3.4, 5.6.7.8"},
		{"1.2.3.4:80, [::1]:443", "fe80::1%eth0"}, {"a", "b,c", ""}, {"1.1.1.1", "", "2.2.2.2"},
		{"\t1.2.3.4\t ,\n5.6.7.8 "}, {"::ffff:1.2.3.4"}, {"1.2.3.4 5.6.7.8"},
	}
	for _, c := range cases {
		for n := 1; n <= 6; n++ {
			a55XFFCompare(t, c, n)
		}
	}
}

// FuzzAudit55ForwardedFor: the same against the oracle on fuzzed lines
// (a line split at '\n' into several header lines) and n in 1..8.
func FuzzAudit55ForwardedFor(f *testing.F) {
	f.Add("1.2.3.4, 5.6.7.8\n9.9.9.9", uint8(2))
	f.Add(",,\n,", uint8(3))
	f.Add("[::1]:80,fe80::1%z", uint8(1))
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		lines := strings.Split(s, "\n")
		a55XFFCompare(t, lines, int(n%8)+1)
	})
}

// TestAudit55ForwardedForNoAllocs: a successful scan allocates nothing
// for a 256 KiB line of commas with the entry at the right.
func TestAudit55ForwardedForNoAllocs(t *testing.T) {
	lines := []string{strings.Repeat(",", 1<<18) + " 10.0.0.1, 10.0.0.2"}
	if a := testing.AllocsPerRun(10, func() {
		if _, err := forwardedFor(lines, 2); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
