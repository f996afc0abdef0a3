package decay_test

import (
	"fmt"
	"math"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// Exponential(lambda) has a half-life of ln(2)/lambda seconds: here 10 s.
func ExampleExponential() {
	d := decay.Exponential(math.Ln2 / 10)
	for _, dt := range []int64{0, 10_000, 20_000, 30_000} {
		fmt.Printf("after %2ds: %.2f\n", dt/1000, d.Apply(80, dt))
	}
	// Output:
	// after  0s: 80.00
	// after 10s: 40.00
	// after 20s: 20.00
	// after 30s: 10.00
}

// Linear(rate) is a leaky bucket: it drains rate per second and stops at 0,
// from either side.
func ExampleLinear() {
	d := decay.Linear(2)
	fmt.Println(d.Apply(10, 1500), d.Apply(10, 60_000))
	fmt.Println(d.Apply(-10, 1500), d.Apply(-10, 60_000))
	// Output:
	// 7 0
	// -7 0
}

// None never forgets.
func ExampleNone() {
	d := decay.None()
	fmt.Println(d.Apply(42, 365*24*3600*1000))
	// Output: 42
}

// An invalid parameter is reported by sketch.New, naming the law and the
// value.
func Example_validation() {
	_, err := sketch.New(sketch.Config{Hi: 1, Decay: decay.Exponential(0.5)})
	fmt.Println(err)
	_, err = sketch.New(sketch.Config{Hi: 1, Decay: decay.Linear(-1)})
	fmt.Println(err)
	// Output:
	// <nil>
	// sketch: Decay is invalid: decay: Linear rate must be finite and > 0; got -1
}
