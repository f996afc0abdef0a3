package limit_test

import (
	"bytes"
	"fmt"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// A limiter saved before a restart and restored after it: the abuser's
// debt survives, drained by the downtime. A service saves with
// snapshot.NewSaver(path, interval, l) and restores with
// snapshot.Load(path, l); a buffer stands in for the file here.
func ExampleLimiter_ReadFrom() {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	for l.Allow("abuser") {
	}
	var file bytes.Buffer
	l.WriteTo(&file)

	// The new process, 1.5 s later, built with the same configuration.
	clk2 := limittest.NewFakeClock()
	clk2.Set(1_700_000_001_500)
	r := limit.MustNew(10, 20, limit.WithClock(clk2))
	if _, err := r.ReadFrom(&file); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Tokens("abuser"), r.Tokens("someone else"))
	fmt.Println(r.Decide("abuser").Remaining)
	// Output:
	// 15 20
	// 14
}
