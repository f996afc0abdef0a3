package reference_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a56ExpNeg(x float64) float64 {
	const prec = 300
	bx := new(big.Float).SetPrec(prec).SetFloat64(x)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for n := int64(1); n < 400; n++ {
		term.Mul(term, bx)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(n))
		sum.Add(sum, term)
	}
	f, _ := new(big.Float).SetPrec(prec).Quo(new(big.Float).SetPrec(prec).SetInt64(1), sum).Float64()
	return f
}

func a56Drift(t *testing.T, lambda float64, reads int) (rel, ulps, got, exact float64) {
	fc := sketchtest.NewFakeClock()
	s, err := reference.New(sketch.Config{Levels: 1, CellsPerLevel: 1024, Hi: 1e6, Decay: decay.Exponential(lambda), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateString("k", 1)
	for range reads {
		fc.Advance(time.Millisecond)
		_ = s.QueryString("k")
	}
	got = s.QueryString("k")
	exact = a56ExpNeg(lambda * float64(reads) / 1000)
	return (exact - got) / exact, (exact - got) / (math.Nextafter(exact, 2) - exact), got, exact
}

// sketch/doc.go: "for them this holds up to float64 rounding (a relative
// 5e-14 below the law after a thousand reads under Exponential; audit
// 54)": the scenario (a key read every ms for 1 s, lambda 1.3) drifts
// 5.1e-14 below the law.
func TestAudit56ReferenceDriftThousandReads(t *testing.T) {
	rel, ulps, got, exact := a56Drift(t, 1.3, 1000)
	t.Logf("got %v, law %v: relative %.3g below, %.0f ulps", got, exact, rel, ulps)
	if rel > 6e-14 {
		t.Errorf("relative drift %.3g after 1000 reads, sketch/doc.go: 5e-14", rel)
	}
}

// TestAudit56FixedReferenceDriftNotBoundedBy1e13 (fixed in the doc: it
// now gives the drift as growing with the reads, with these two figures):
// sketch/reference/doc.go said "a key read often under Exponential
// decay may drift a few ulps, a relative 1e-13, below the law". The drift
// grows with the number of reads (each read rounds to nearest and writes
// back): 1000 reads drift about 250 ulps, and a key read every ms for 100
// s under lambda 0.013/s drifts 4.5e-12. The check: the doc's figures
// bound what happens, within a little.
func TestAudit56FixedReferenceDriftNotBoundedBy1e13(t *testing.T) {
	_, ulps1k, _, _ := a56Drift(t, 1.3, 1000)
	rel, ulps, got, exact := a56Drift(t, 0.013, 100_000)
	t.Logf("1000 reads at lambda 1.3: %.0f ulps; 100000 reads at lambda 0.013: got %v, law %v, relative %.3g below (%.0f ulps)", ulps1k, got, exact, rel, ulps)
	if ulps1k > 300 {
		t.Errorf("1000 reads drift %.0f ulps below the law; reference/doc.go says 251", ulps1k)
	}
	if rel > 5e-12 {
		t.Errorf("100000 reads (lambda 0.013, 100 s): relative drift %.3g below the law; reference/doc.go says 4.5e-12", rel)
	}
}
