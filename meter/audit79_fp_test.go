package meter_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79NoveltyFalsePositiveRate: novelty.go's false-positive rate,
// "(1 - (1 - 1/M)^n)^L for n keys seen per T in L levels of M cells, plus
// about n/M^2", measured over many seeds (Contains of fresh keys after n
// marks within T).
func TestAudit79NoveltyFalsePositiveRate(t *testing.T) {
	for _, c := range []struct {
		L, M uint32
		n    int
	}{{2, 64, 40}, {3, 128, 100}, {1, 256, 50}, {4, 64, 30}} {
		fp, total := 0, 0
		for seed := uint64(0); seed < 40; seed++ {
			clk := sketchtest.NewFakeClock()
			nv, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSeed(seed), meter.WithSize(c.L, c.M))
			for i := 0; i < c.n; i++ {
				nv.Seen(fmt.Sprint("mark-", seed, "-", i))
			}
			for q := 0; q < 1000; q++ {
				total++
				if nv.Contains(fmt.Sprint("fresh-", seed, "-", q)) {
					fp++
				}
			}
		}
		M, L, n := float64(c.M), float64(c.L), float64(c.n)
		want := math.Pow(1-math.Pow(1-1/M, n), L) + n/(M*M)
		got := float64(fp) / float64(total)
		t.Logf("L=%d M=%d n=%d: FP %.4f, doc %.4f", c.L, c.M, c.n, got, want)
		if math.Abs(got-want) > 0.2*want+0.003 {
			t.Errorf("L=%d M=%d n=%d: false-positive rate %.4f, the doc's formula gives %.4f", c.L, c.M, c.n, got, want)
		}
	}
}

// TestAudit79RatePoissonNoise: rate.go, "Its relative noise for Poisson
// events is about 1/sqrt(2 x rho x window)", and "at steady state it is
// unbiased": Poisson events at rho = 200/s, window 500 ms, sampled every
// window after a warm-up of 10 windows.
func TestAudit79RatePoissonNoise(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	window := 500 * time.Millisecond
	r, _ := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(2, 64))
	rng := newAudit79Rand(79)
	const rho = 200.0 // per second
	lam := rho / 1000 // per ms
	var sum, sum2 float64
	n := 0
	for ms := 0; ms < 400*500; ms++ {
		// Poisson(lam) by inversion
		k, p, u := 0, math.Exp(-lam), rng.Float64()
		cdf := p
		for u > cdf {
			k++
			p *= lam / float64(k)
			cdf += p
		}
		if k > 0 {
			r.ObserveAt(clk.Now(), "k", float64(k))
		}
		if ms >= 5000 && ms%500 == 0 {
			v := r.PerSecond("k")
			sum += v
			sum2 += v * v
			n++
		}
		clk.Advance(time.Millisecond)
	}
	mean := sum / float64(n)
	sd := math.Sqrt(sum2/float64(n) - mean*mean)
	want := 1 / math.Sqrt(2*rho*window.Seconds())
	t.Logf("mean %.2f/s (rho %v), relative sd %.4f, doc %.4f", mean, rho, sd/mean, want)
	if math.Abs(mean-rho) > 0.03*rho {
		t.Errorf("mean %v, want about %v", mean, rho)
	}
	if math.Abs(sd/mean-want) > 0.25*want {
		t.Errorf("relative sd %.4f, doc says about %.4f", sd/mean, want)
	}
}

func newAudit79Rand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }
