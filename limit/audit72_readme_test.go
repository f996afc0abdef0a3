package limit

import (
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// README.md:42: l.Allow(clientIP) makes zero allocations.
func TestAudit72AllowZeroAllocs(t *testing.T) {
	l := MustNew(10, 20)
	if a := testing.AllocsPerRun(200, func() { l.Allow("192.0.2.1") }); a != 0 {
		t.Errorf("README.md:42: Allow allocates %v per call", a)
	}
}

// README.md:47-48: "Its default memory (6.1 MiB) holds a million clients
// at their limit at once while denying 0.03% of clients it has never seen".
func TestAudit72MillionClients(t *testing.T) {
	if testsize.Small() {
		t.Skip("a million keys: not under -short or -race (the claim is sequential)")
	}
	clk := sketchtest.NewFakeClock()
	l := MustNew(10, 20, WithClock(clk), WithSeed(72))
	now := clk.Now()
	got := 0
	for i := 0; i < 1_000_000; i++ {
		if l.AllowN(now, "c"+strconv.Itoa(i), 20) {
			got++
		}
	}
	denied := 0
	const fresh = 200_000
	for i := 0; i < fresh; i++ {
		if !l.AllowN(now, "f"+strconv.Itoa(i), 1) {
			denied++
		}
	}
	rate := float64(denied) / fresh
	t.Logf("1M keys at full debt: %d got their burst; fresh denied %.4f%% (%d of %d); Saturation %.4f%%", got, 100*rate, denied, fresh, 100*l.Stats().Saturation)
	if rate > 0.0006 {
		t.Errorf("README.md:48: fresh keys denied %.4f%%, README says 0.03%%", 100*rate)
	}
}

// limit/doc.go:36-37: "Capacity(0.0003) reads lower" than the million the
// default Buckets size holds; limit/doc.go:62-63: "the default memory
// denies 16% of fresh keys with 100k keys at full debt" (count-min).
func TestAudit72CapacityAndCountMinDefault(t *testing.T) {
	if c := MustNew(10, 20).Capacity(0.0003); c >= 1_000_000 || c <= 0 {
		t.Errorf("limit/doc.go:37: Capacity(0.0003) = %d, doc: below a million (Suggest's margin)", c)
	} else {
		t.Logf("Capacity(0.0003) = %d", c)
	}
	if testsize.Small() {
		t.Skip("100k keys")
	}
	clk := sketchtest.NewFakeClock()
	l := MustNew(10, 20, WithEngine(CountMin), WithClock(clk), WithSeed(72))
	now := clk.Now()
	for i := 0; i < 100_000; i++ {
		l.AllowN(now, "c"+strconv.Itoa(i), 20)
	}
	denied := 0
	const fresh = 50_000
	for i := 0; i < fresh; i++ {
		if !l.AllowN(now, "f"+strconv.Itoa(i), 1) {
			denied++
		}
	}
	rate := float64(denied) / fresh
	t.Logf("count-min default (%d bytes): 100k keys at full debt deny %.2f%% of fresh keys", l.Stats().Bytes, 100*rate)
	if rate < 0.13 || rate > 0.19 {
		t.Errorf("limit/doc.go:62: fresh keys denied %.2f%%, doc says 16%%", 100*rate)
	}
}
