package grudge_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// a87Law is a user's Decay given as a function.
type a87Law func(score float64, dt int64) float64

func (f a87Law) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return f(score, dt)
}

// a87Scorer is what the root Sketch and Rotator share.
type a87Scorer interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	UpdateAndQuery(key []byte, delta float64) float64
	TryUpdate(key []byte, delta, limit float64) bool
	QueryDetailed(key []byte) grudge.Result
}

// a87Both builds a root Sketch and a lazy root Rotator (Period an hour,
// so no test here rotates) for cfg.
func a87Both(t *testing.T, cfg grudge.Config) map[string]a87Scorer {
	t.Helper()
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 3, Period: time.Hour})
	if err != nil {
		t.Fatalf("NewRotator: %v", err)
	}
	t.Cleanup(r.Close)
	return map[string]a87Scorer{"sketch": s, "rotator": r}
}

// TestAudit87RootDecayCustomConforming: a user's conforming Decay (a
// half-life law, composing over subdivisions of time) on the root Sketch
// and Rotator: every read is at or above the exact float64 truth (the law
// applied to the exact score over the whole idle time) and within float32
// rounding of it, across many clock moves, the TryUpdate decision being
// aggregate + delta <= limit.
func TestAudit87RootDecayCustomConforming(t *testing.T) {
	half := a87Law(func(s float64, dt int64) float64 { return s * math.Exp2(-float64(dt)/700) })
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	for name, sc := range a87Both(t, grudge.Config{Levels: 4, CellsPerLevel: 1 << 12, Decay: half, Hi: 1e9, Clock: clk}) {
		k := []byte("key-" + name)
		truth := 0.0
		for i := range 400 {
			dt := time.Duration((i*37)%300) * time.Millisecond
			clk.Advance(dt)
			truth = half.Apply(truth, dt.Milliseconds())
			d := float64(1 + i%17)
			switch i % 4 {
			case 0:
				sc.Update(k, d)
				truth += d
			case 1:
				got := sc.UpdateAndQuery(k, d)
				truth += d
				if got < truth || got > truth*(1+1e-5)+1e-9 {
					t.Fatalf("%s op %d: UpdateAndQuery = %v, truth %v", name, i, got, truth)
				}
			case 2:
				q := sc.Query(k)
				limit := q + d + float64(i%3) - 1 // below, at, above the boundary
				ok := sc.TryUpdate(k, d, limit)
				if ok != (q+d <= limit) {
					t.Fatalf("%s op %d: TryUpdate(%v, %v) = %v with aggregate %v", name, i, d, limit, ok, q)
				}
				if ok {
					truth += d
				}
			case 3:
				got := sc.Query(k)
				if got < truth || got > truth*(1+1e-5)+1e-9 {
					t.Fatalf("%s op %d: Query = %v, truth %v", name, i, got, truth)
				}
				det := sc.QueryDetailed(k)
				if det.Aggregate != got {
					t.Fatalf("%s op %d: QueryDetailed.Aggregate %v, Query %v", name, i, det.Aggregate, got)
				}
			}
		}
	}
}

// TestAudit87RootDecayCustomFaulty: a user's Decay that breaks the
// contract (NaN, ±Inf, growth away from 0, crossing 0) on the root Sketch
// and Rotator. decay/doc.go: the sketch "sanitizes a custom law's faults
// (NaN, ±Inf, growth, crossing 0) to the safe side: no decay, or 0";
// API.md: "no cell is ever left holding NaN or Inf". So a NaN, Inf or
// growing law reads as no decay (the exact sum of the deltas, integers
// here), a crossing law reads 0, for positive and negative scores, and
// every level score stays finite inside [Lo, Hi].
func TestAudit87RootDecayCustomFaulty(t *testing.T) {
	laws := []struct {
		name   string
		d      grudge.Decay
		toZero bool // a crossing law: sanitized to 0
	}{
		{"nan", a87Law(func(float64, int64) float64 { return math.NaN() }), false},
		{"+inf", a87Law(func(float64, int64) float64 { return math.Inf(1) }), false},
		{"-inf", a87Law(func(float64, int64) float64 { return math.Inf(-1) }), false},
		{"double", a87Law(func(s float64, _ int64) float64 { return 2 * s }), false},
		{"plus1", a87Law(func(s float64, _ int64) float64 { return s + math.Copysign(1, s) }), false},
		{"cross", a87Law(func(s float64, _ int64) float64 { return -s }), true},
		{"cross-by-1", a87Law(func(s float64, _ int64) float64 { return -math.Copysign(1, s) }), true},
	}
	for _, law := range laws {
		for _, sign := range []float64{1, -1} {
			t.Run(fmt.Sprintf("%s/sign%v", law.name, sign), func(t *testing.T) {
				clk := grudgetest.NewFakeClock()
				for name, sc := range a87Both(t, grudge.Config{Levels: 3, CellsPerLevel: 1 << 10, Decay: law.d, Lo: -1000, Hi: 1000, Clock: clk}) {
					k := []byte("k")
					sum := 0.0
					for i := range 20 {
						d := sign * float64(1+i%5)
						if i%2 == 0 {
							sc.Update(k, d)
						} else {
							sc.UpdateAndQuery(k, d)
						}
						sum += d
						clk.Advance(time.Duration(1+i) * time.Millisecond)
						want := sum
						if law.toZero {
							want = 0 // every idle gap sends the score to 0
						}
						got := sc.Query(k)
						if got != want {
							t.Fatalf("%s step %d: Query = %v, want %v (sanitized law)", name, i, got, want)
						}
						for l, v := range sc.QueryDetailed(k).LevelScores {
							if math.IsNaN(v) || math.IsInf(v, 0) || v < -1000 || v > 1000 {
								t.Fatalf("%s step %d: level %d holds %v", name, i, l, v)
							}
						}
					}
				}
			})
		}
	}
}

// TestAudit87RootTryUpdateAboveHi: API.md "Any finite limit is accepted,
// as in grudge: the decision is aggregate + delta <= limit even when limit
// > Hi (scores stay clamped at Hi)"; root sketch.go's TryUpdate says the
// same. On the root Sketch and Rotator, for a Hi a float32 holds (10) and
// one it does not (0.1, so the stored score is rounded up past Hi and
// reads are capped at it): at the clamp, TryUpdate(k, 0, Hi) admits
// (migrating.md: "TryUpdate(k, 0, Hi) admits it, as grudge does"), a limit
// far above Hi admits and the score stays Hi, and every decision is the
// float64 aggregate + delta <= limit; MaxFloat64 and -MaxFloat64 limits
// are valid.
func TestAudit87RootTryUpdateAboveHi(t *testing.T) {
	for _, hi := range []float64{10, 0.1, 1e9 + 1} {
		clk := grudgetest.NewFakeClock()
		for name, sc := range a87Both(t, grudge.Config{Levels: 4, CellsPerLevel: 1 << 10, Hi: hi, Clock: clk}) {
			k := []byte("k")
			sc.Update(k, 2*hi)
			if q := sc.Query(k); q != hi {
				t.Fatalf("Hi %v %s: Query = %v after an update of 2*Hi, want Hi", hi, name, q)
			}
			for _, c := range []struct{ delta, limit float64 }{
				{0, hi}, {0, math.Nextafter(hi, 0)}, {hi, 2 * hi}, {hi, math.Nextafter(2*hi, 0)},
				{1, hi + 1}, {5, 1e300}, {0, math.MaxFloat64}, {1e300, math.MaxFloat64}, {-hi, 0}, {-hi, -1},
				{0, -math.MaxFloat64}, {hi / 2, hi * 1.5},
			} {
				q := sc.Query(k)
				want := q+c.delta <= c.limit
				if got := sc.TryUpdate(k, c.delta, c.limit); got != want {
					t.Fatalf("Hi %v %s: TryUpdate(k, %v, %v) with aggregate %v = %v, want %v", hi, name, c.delta, c.limit, q, got, want)
				}
				after := sc.Query(k)
				if after > hi || (want && c.delta >= 0 && after != hi) {
					t.Fatalf("Hi %v %s: after TryUpdate(k, %v, %v) (admitted %v) Query = %v, want Hi", hi, name, c.delta, c.limit, want, after)
				}
				if want && c.delta < 0 {
					sc.Update(k, 2*hi) // back to the clamp
				}
			}
		}
	}
}
