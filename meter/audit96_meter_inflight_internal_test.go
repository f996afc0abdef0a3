package meter

import "testing"

// TestAudit96MeterInflightPast2To24Sticks: Inflight's doc
// (meter/inflight.go:32-37): "A cell is exact up to 2^24 in flight over
// all the keys that share it, and rounds up (an over-count, never under)
// beyond; past 2^24 a -1 rounds back up to the same value, so a cell that
// once held more than 2^24 (only Acquire, which has no max, can take it
// there) keeps that count after every release: the keys that share it
// are refused by TryAcquire for good." One cell; 2^24 - 1 requests of
// other keys in flight are put in it at once (what as many Acquires of
// keys sharing it leave, exactly, below 2^24), then two Acquires of k.
func TestAudit96MeterInflightPast2To24Sticks(t *testing.T) {
	in, err := NewInflight(0, WithSize(1, 1), WithSeed(96))
	if err != nil {
		t.Fatal(err)
	}
	in.s.UpdateString("others", 1<<24-1)
	g1 := in.Acquire("k")
	if got := in.Count("k"); got != 1<<24 {
		t.Fatalf("2^24 in flight: Count %d", got)
	}
	g2 := in.Acquire("k")
	if got := in.Count("k"); got != 1<<24+2 {
		t.Fatalf("2^24 + 1 in flight: Count %d, want 2^24 + 2 (rounded up)", got)
	}
	g2.Release()
	g1.Release()
	if got := in.Count("k"); got != 1<<24+2 {
		t.Errorf("after both releases (2^24 - 1 in flight): Count %d, want the stuck 2^24 + 2", got)
	}
	if g := in.TryAcquire("k", 1<<24); g != nil {
		t.Errorf("TryAcquire(k, 2^24) admitted on a cell stuck above 2^24")
	}
}
