package main

import "testing"

// TestAudit101BenchFixedRatebenchZeroRoundsPanics (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc (bench/cmd/ratebench/main.go): "decisions per second in
// interleaved rounds, their medians, and per round the ratio ...";
// -rounds is "interleaved rounds" (default 7) and is never checked.
//
// Code: with -rounds 0 no cell is measured, and the summary table calls
// median(rates) and slices.Min(rates) on an empty slice for every cell:
// median indexes s[len(s)/2-1] = s[-1] and panics (index out of range),
// after the redis-server was started and the clients opened, instead of
// the usage error the other bad flags get (-callers: "bad -callers").
//
// Repro: median of no rounds.
func TestAudit101BenchFixedRatebenchZeroRoundsPanics(t *testing.T) {
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("median of zero rounds (-rounds 0) panics: %v; want -rounds validated (>= 1) or an empty cell reported", p)
		}
	}()
	_ = median(nil)
}

// TestAudit101BenchRatebenchMedian (passes): the median of an odd count
// is the middle value, of an even count the mean of the middle two; the
// input is not reordered.
func TestAudit101BenchRatebenchMedian(t *testing.T) {
	v := []float64{9, 1, 5}
	if got := median(v); got != 5 {
		t.Errorf("median(9,1,5) = %v", got)
	}
	if v[0] != 9 || v[1] != 1 {
		t.Errorf("median reordered its input: %v", v)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median(4,1,3,2) = %v; want 2.5", got)
	}
	if v, ok := field("# Server\r\nredis_version:7.2.4\r\nredis_mode:standalone\r\n", "redis_version"); !ok || v != "7.2.4" {
		t.Errorf("field redis_version = %q %v", v, ok)
	}
}
