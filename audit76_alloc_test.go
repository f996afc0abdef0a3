package grudge_test

import (
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// a76SumAgg is a user's Aggregator (the slow path).
func a76SumAgg(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

type a76FNV struct{ seed uint64 }

func (h a76FNV) Hash64(key []byte) uint64 {
	x := uint64(14695981039346656037) ^ h.seed
	for _, c := range key {
		x ^= uint64(c)
		x *= 1099511628211
	}
	x ^= x >> 31
	x *= 0x9e3779b97f4a7c15
	return x ^ x>>29
}

// TestAudit76AllocsEveryFace: migrating.md, "What is identical":
// "Update, Query, UpdateAndQuery and TryUpdate allocate nothing"; "Custom
// aggregators": "still allocation-free in the steady state". Checked with
// every user-supplied part at once (a Clock with Now only, a user Hasher,
// a user Aggregator, a user Decay) and with the built-ins, on the Sketch,
// the lazy Rotator and the ticker Rotator, while the clock moves within a
// period (time passes, no promotion).
func TestAudit76AllocsEveryFace(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	user := grudge.Config{Lo: -100, Hi: 1000, Clock: a76UserClock{clk}, Aggregator: a76SumAgg,
		Decay: a76Toward{0.001}, Hasher: func(seed uint64) grudge.Hasher { return a76FNV{seed} }}
	builtin := grudge.Config{Hi: 1000, Clock: clk, Decay: grudge.Exponential(0.1), Hasher: grudge.SipHash()}
	type face interface {
		Update([]byte, float64)
		Query([]byte) float64
		UpdateAndQuery([]byte, float64) float64
		TryUpdate([]byte, float64, float64) bool
	}
	for _, c := range []struct {
		name string
		cfg  grudge.Config
	}{{"user", user}, {"builtin", builtin}} {
		s, err := grudge.New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		lazy, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: c.cfg, Generations: 6, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		tk := grudgetest.NewFakeTicker()
		ticked, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: c.cfg, Generations: 3, Ticker: tk})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			name string
			f    face
		}{{"sketch", s}, {"lazy", lazy}, {"ticker", ticked}} {
			key := []byte("some-key")
			for range 10 { // warm the pools
				f.f.Update(key, 1)
				f.f.TryUpdate(key, 1, 1e6)
			}
			n := testing.AllocsPerRun(200, func() {
				clk.Advance(time.Millisecond)
				f.f.Update(key, 1)
				_ = f.f.Query(key)
				_ = f.f.UpdateAndQuery(key, 2)
				_ = f.f.TryUpdate(key, 1, 500)
			})
			if n != 0 {
				t.Errorf("%s/%s: %v allocations per Update+Query+UpdateAndQuery+TryUpdate, want 0", c.name, f.name, n)
			}
		}
		ticked.Close()
	}
}
