package limit_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// A limiter for every client in three lines: 10 requests per second, bursts
// of 5, any number of keys, constant memory.
func Example() {
	l := limit.MustNew(10, 5)
	admitted := 0
	for range 8 {
		if l.Allow("203.0.113.7") {
			admitted++
		}
	}
	fmt.Println(admitted, l.Allow("198.51.100.1"))
	// Output: 5 true
}

// A Decision says how long to wait: here exactly one token's drain.
func ExampleLimiter_DecideN() {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(limit.Every(200*time.Millisecond), 2, limit.WithClock(clk))
	l.AllowN(clk.Now(), "k", 2)
	d := l.DecideN(clk.Now(), "k", 1)
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
	clk.Advance(d.RetryAfter)
	fmt.Println(l.AllowN(clk.Now(), "k", 1))
	// Output:
	// false 0 200ms 400ms
	// true
}

// Two windows, all-or-nothing: a denial by the hourly window debits the
// per-second one nothing (Peek's Remaining is after the peeked request).
func ExampleMulti() {
	clk := sketchtest.NewFakeClock()
	perSec := limit.MustNew(10, 10, limit.WithClock(clk))
	perHour := limit.MustNew(limit.Every(time.Hour/20), 20, limit.WithClock(clk))
	m, _ := limit.NewMulti(perSec, perHour)
	n := 0
	for range 5 {
		if m.AllowN(clk.Now(), "user-42", 8) {
			n++
		}
		clk.Advance(time.Second)
	}
	fmt.Println(n, perSec.PeekN(clk.Now(), "user-42", 1).Remaining)
	// Output: 2 9
}

// Rates from flags, environment variables and configuration files:
// ParseLimit reads "count/period", and a Limit is an encoding.TextUnmarshaler
// (flag.TextVar, JSON strings, YAML) whose MarshalText reads back exactly.
func ExampleParseLimit() {
	for _, s := range []string{"100/s", "1000/h", "5/m", "10/250ms", "1000-H"} {
		r, err := limit.ParseLimit(s)
		if err != nil {
			panic(err)
		}
		text, _ := r.MarshalText()
		fmt.Printf("%-8s %.6g/s  %s\n", s, float64(r), text)
	}
	_, err := limit.ParseLimit("100/fortnight")
	fmt.Println(err)
	// Output:
	// 100/s    100/s  100/s
	// 1000/h   0.277778/s  1000/h
	// 5/m      0.0833333/s  5/m
	// 10/250ms 40/s  40/s
	// 1000-H   0.277778/s  1000/h
	// limit: ParseLimit: the period must be a positive duration (a unit ns, us, ms, s, m, h or d, or one like 250ms) (want "count/period", e.g. "100/s", "1000/h" or "10/250ms"); got "100/fortnight"
}

// An operator's view of a limiter's capacity: its Stats published with
// expvar (served at /debug/vars by expvar's handler), and an alert when
// the limiter would deny more than 1% of clients it has never seen. A
// limiter sized for 10,000 clients at their limit, then 20,000 of them
// taking their whole burst at once: saturated.
func ExampleLimiter_Stats() {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithCapacity(10_000, 0.01), limit.WithClock(clk), limit.WithSeed(1))
	if expvar.Get("ratelimit") == nil {
		expvar.Publish("ratelimit", expvar.Func(func() any { return l.Stats() }))
	}
	alert := func() bool { return l.Stats().Saturation > 0.01 }
	fmt.Println(l.Stats().Engine, "alert:", alert())
	for i := range 20_000 {
		l.AllowN(clk.Now(), fmt.Sprint("client-", i), 20)
	}
	fmt.Println(l.Stats().Engine, "alert:", alert())
	// Output:
	// buckets alert: false
	// buckets alert: true
}

// Per-plan limits on one limiter: tiers share each key's debt, held as
// time. A free client's burst of 20 at 2.5/s is 8 s of drain, the
// limiter's MaxDebt (80 tokens of its 10/s).
func ExampleLimiter_Tier() {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithMaxDebt(80), limit.WithClock(clk))
	free, err := l.Tier("free", 2.5, 20)
	if err != nil {
		panic(err)
	}
	for range 20 {
		free.Allow("user-42")
	}
	d := free.Decide("user-42")
	fmt.Println(d.Allowed, d.Policy, d.RetryAfter, d.ResetAfter, free.Exact())
	// The limiter's own policy (10/s, burst 20: 2 s) sees the 8 s owed.
	fmt.Println(l.Decide("user-42").RetryAfter)
	// A slower tier with the same burst would need twice the MaxDebt.
	_, err = l.Tier("trial", 1.25, 20)
	fmt.Println(err)
	// Output:
	// false free 400ms 8s true
	// 6.1s
	// limit: a policy of 1.25/s with burst 20 needs MaxDebt >= 160 (WithMaxDebt, in tokens of New's limit); got 80
}

// SetLimit keeps every key's debt as time to drain: halving the rate
// leaves a key that owes 1 s still 1 s from full, and its burst of 10
// now spans 2 s, so 5 requests of 200 ms fit at once (x/time/rate would
// keep the key's 0 tokens: docs/migrating.md).
func ExampleLimiter_SetLimit() {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 10, limit.WithMaxDebt(20), limit.WithClock(clk))
	for range 10 {
		l.Allow("k")
	}
	fmt.Println(l.Decide("k").RetryAfter)
	if err := l.SetLimit(5); err != nil {
		panic(err)
	}
	d := l.Decide("k")
	fmt.Println(d.Allowed, d.Remaining, d.ResetAfter, l.Limit())
	// Output:
	// 100ms
	// true 4 1.2s 5
}

// The decision counters, as expvar serves them at /debug/vars: every
// Allow (or Decide, Reserve, Wait) counts once, admitted or denied; a
// Peek is a read and counts nothing.
func ExampleLimiter_Stats_counters() {
	l := limit.MustNew(10, 5)
	if expvar.Get("api-limiter") == nil {
		expvar.Publish("api-limiter", expvar.Func(func() any { return l.Stats() }))
	}
	for range 8 {
		l.Allow("203.0.113.7")
	}
	l.Peek("203.0.113.7")
	var st struct {
		Engine                      string
		Admitted, Denied, Rotations uint64
	}
	json.Unmarshal([]byte(expvar.Get("api-limiter").String()), &st)
	fmt.Printf("%+v\n", st)
	// Output: {Engine:buckets Admitted:5 Denied:3 Rotations:0}
}
