package matrix

import (
	"runtime"
	"slices"
	"time"

	"github.com/loov/hrtime"
)

// Timer reads the latency-sampling clock through hrtime: the time-stamp
// counter (hrtime.TSC, RDTSC) where hrtime reports an invariant TSC on
// amd64, and hrtime.Now (time.Now in ns) elsewhere. Readings are ticks;
// NsPerTick converts. Immutable after NewTimer; safe for concurrent use.
type Timer struct {
	TSC       bool    // ticks are TSC counts; false: ticks are ns
	NsPerTick float64 // calibrated against time.Now over ~20ms when TSC
}

// NewTimer picks and calibrates the timer.
func NewTimer() *Timer {
	if runtime.GOARCH != "amd64" || !hrtime.TSCSupported() {
		return &Timer{NsPerTick: 1}
	}
	t0, n0 := hrtime.TSC(), time.Now()
	time.Sleep(20 * time.Millisecond)
	t1, n1 := hrtime.TSC(), time.Now()
	if t1 <= t0 {
		return &Timer{NsPerTick: 1}
	}
	return &Timer{TSC: true, NsPerTick: float64(n1.Sub(n0)) / float64(t1-t0)}
}

// Now returns the current reading in ticks.
func (t *Timer) Now() int64 {
	if t.TSC {
		return int64(hrtime.TSC())
	}
	return int64(hrtime.Now())
}

// Ticks converts a duration to ticks.
func (t *Timer) Ticks(d time.Duration) int64 { return int64(float64(d) / t.NsPerTick) }

// Nanos converts ticks to nanoseconds.
func (t *Timer) Nanos(ticks int64) float64 { return float64(ticks) * t.NsPerTick }

// Name describes the timer for the report.
func (t *Timer) Name() string {
	if t.TSC {
		return "hrtime.TSC (RDTSC)"
	}
	return "hrtime.Now (time.Now)"
}

// Overhead is the measured cost of latency sampling.
type Overhead struct {
	// PairNs is the median of two back-to-back timer reads: what every
	// latency sample includes besides the operation.
	PairNs float64
	// SampleNs is the whole cost of one sample (two reads and the
	// reservoir insert); the average cost per op is SampleNs/SampleEvery.
	SampleNs float64
}

// MeasureOverhead measures the timer on this machine.
func MeasureOverhead(t *Timer) Overhead {
	const n = 1 << 16
	d := make([]int64, n)
	for i := range d {
		a := t.Now()
		b := t.Now()
		d[i] = b - a
	}
	slices.Sort(d)
	var res reservoir
	res.init(1<<12, 1)
	const m = 1 << 18
	w0 := time.Now()
	for range m {
		a := t.Now()
		b := t.Now()
		res.add(b - a)
	}
	return Overhead{
		// n is even: the median is the mean of the middle two, as every
		// median of the report (Summarize), not the upper one.
		PairNs:   (t.Nanos(d[n/2-1]) + t.Nanos(d[n/2])) / 2,
		SampleNs: float64(time.Since(w0)) / m,
	}
}
