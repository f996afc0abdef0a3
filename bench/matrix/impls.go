package matrix

import (
	"fmt"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/hw"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
)

// Target is what a worker calls: the part of sketch.Scorer that the
// workloads use. *sketch.Sketch, *ref.Sketch, both rotators and the
// two peers implement it.
type Target interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	UpdateAndQuery(key []byte, delta float64) float64
	TryUpdate(key []byte, delta, limit float64) bool
}

var (
	_ Target = sketch.Scorer(nil)
	_ Target = (*AtomicAdd)(nil)
	_ Target = (*RateMap)(nil)
)

// filler is implemented by targets whose pre-fill is not an Update.
type filler interface{ Fill(key []byte, v float64) }

// sizer is implemented by targets that report their own footprint.
type sizer interface{ Sizes() sketch.Sizes }

// SharedClock is the clock of -clock=shared: the runtime's monotonic clock
// (hw.Nanotime, vDSO clock_gettime) in milliseconds, read by every
// implementation. Safe for concurrent use; the zero value is ready.
type SharedClock struct{}

// NowMillis returns hw.Nanotime()/1e6.
func (SharedClock) NowMillis() int64 { return hw.Nanotime() / 1e6 }

// sharedEpoch anchors ratemap's time.Time readings of SharedClock.
var sharedEpoch = time.Now()

// sharedTime is SharedClock as a time.Time, for ratemap under
// -clock=shared.
func sharedTime() time.Time {
	return sharedEpoch.Add(time.Duration(SharedClock{}.NowMillis()) * time.Millisecond)
}

// Parameters common to every cell.
const (
	// sketchHi is the clamp ceiling (Lo is 0).
	sketchHi = 1e12
	// lambda is the decay rate per second: decay.Exponential(lambda).
	lambda = 1
	// admitLimit admits every TryUpdate (it must be finite).
	admitLimit = sketchHi
	// denyLimit and denyFill set up the abuse path: keys filled with
	// denyFill stay above denyLimit for about ln(1e9) = 20.7 s under
	// Exponential(1).
	denyLimit = 1
	denyFill  = 1e9
	// rotatorPeriod and rotatorGens configure both rotators.
	rotatorPeriod = time.Second
	rotatorGens   = 2
	// rateBurst is ratemap's bucket for every workload but
	// tryupdate-denied: large enough never to run dry in a cell. Buckets
	// refill at rateLimit tokens per second.
	rateBurst = 1 << 30
	rateLimit = 1
	// rateDenyLimit is the refill of tryupdate-denied's drained buckets of
	// one token: one admission per key per 100 s, so a key drained at the
	// start of a group's fill stays empty through the group's cells, as a
	// sketch key filled with denyFill stays above denyLimit for 20 s.
	rateDenyLimit = 0.01
)

// sketchConfig is the sketch configuration of every sketch and rotator
// generation: L, M from o, Exponential(1), Lo=0, Hi=1e12, Seed 0, XXH3.
func sketchConfig(o *Options, clk sketch.Clock) sketch.Config {
	return sketch.Config{
		Levels:        o.Levels,
		CellsPerLevel: o.Cells,
		Decay:         decay.Exponential(lambda),
		Lo:            0,
		Hi:            sketchHi,
		Clock:         clk,
	}
}

// instance is one built implementation for one cell.
type instance struct {
	target Target
	close  func() // releases background resources; never nil
}

// runsUnder reports whether impl has a cell under clock mode: atomicadd
// reads no clock, so it runs once, under default.
func runsUnder(impl, clock string) bool {
	return impl != ImplAtomicAdd || clock == ClockDefault
}

// build returns a fresh impl for workload w under clock mode clock.
func build(o *Options, impl, clock string, w workload) (instance, error) {
	var clk sketch.Clock
	now := time.Now
	if clock == ClockShared {
		clk, now = SharedClock{}, sharedTime
	}
	return buildOn(o, impl, clk, now, w)
}

// buildOn is build on clock clk (nil: each implementation's default) and,
// for ratemap, the time source now.
func buildOn(o *Options, impl string, clk sketch.Clock, now func() time.Time, w workload) (instance, error) {
	nop := func() {}
	switch impl {
	case ImplLockfree:
		s, err := sketch.New(sketchConfig(o, clk))
		return instance{s, nop}, err
	case ImplReference:
		s, err := ref.New(sketchConfig(o, clk))
		return instance{s, nop}, err
	case ImplRotator:
		r, err := rotator.New(rotator.Config{Sketch: sketchConfig(o, clk), Generations: rotatorGens, Period: rotatorPeriod})
		if err != nil {
			return instance{}, err
		}
		return instance{r, r.Close}, nil
	case ImplRefRotator:
		r, err := ref.NewRotator(ref.RotatorConfig{Sketch: sketchConfig(o, clk), Generations: rotatorGens, Period: rotatorPeriod})
		if err != nil {
			return instance{}, err
		}
		return instance{r, r.Close}, nil
	case ImplAtomicAdd:
		return instance{NewAtomicAdd(o.Levels, o.Cells), nop}, nil
	case ImplRateMap:
		if rateDrains(w) {
			return instance{NewRateMap(rateDenyLimit, 1, true, now), nop}, nil
		}
		return instance{NewRateMap(rateLimit, rateBurst, false, now), nop}, nil
	}
	return instance{}, fmt.Errorf("matrix: unknown implementation %q", impl)
}

// NewTarget builds implementation impl (ImplLockfree, ImplReference,
// ImplRotator, ImplRefRotator, ImplAtomicAdd, ImplRateMap) with the
// matrix's parameters for a sketch of levels x cells, under clock mode
// clock (ClockDefault or ClockShared). It is how the go test benchmarks
// reuse the matrix's registry instead of building their own. close
// releases background resources and is never nil.
func NewTarget(impl string, levels, cells uint32, clock string) (t Target, close func(), err error) {
	o := &Options{Levels: levels, Cells: cells}
	in, err := build(o, impl, clock, workload{})
	return in.target, in.close, err
}

// NewTargetOn is NewTarget on clock clk (a sketchtest.FakeClock, say),
// for benchmarks that drive time themselves. The target's concrete type
// is the implementation's (*sketch.Sketch, *rotator.Rotator, ...), for a
// caller that needs more than Target.
func NewTargetOn(impl string, levels, cells uint32, clk sketch.Clock) (t Target, close func(), err error) {
	o := &Options{Levels: levels, Cells: cells}
	in, err := buildOn(o, impl, clk, time.Now, workload{})
	return in.target, in.close, err
}

// DenyLimit and DenyFill set up the abuse path of every harness: a key
// filled with DenyFill stays above DenyLimit for about 20 s under the
// matrix's Exponential(1); AdmitLimit admits every TryUpdate.
const (
	DenyLimit  = denyLimit
	DenyFill   = denyFill
	AdmitLimit = admitLimit
	// Hi is the clamp ceiling of every sketch the registry builds
	// (update-saturated fills and adds it).
	Hi = sketchHi
)
