package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit80PrecisionTableRows recomputes the rows a2, b, c, d, e and f
// of docs/precision.md's "Measured" table (the workloads as described
// there and in TestPrecision, with its seed, at full size: a1 is the one
// row that does not consume the random stream and is too large for
// -race) and requires each row, formatted as the table is, to appear
// verbatim in the page.
func TestAudit80PrecisionTableRows(t *testing.T) {
	testsize.Serial(t)
	doc, err := os.ReadFile("../docs/precision.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(r precResult) {
		t.Helper()
		yes := "yes"
		if !r.oneSided {
			yes = "NO"
		}
		line := fmt.Sprintf("| %s | %d | %d | %.3g | %.3g | %.4g | %s |", r.name, r.ops, r.samples, r.maxRel, r.medRel, r.maxAbs, yes)
		line = strings.Replace(line, "|score| <= 2^24", `\|score\| <= 2^24`, 1)
		if !strings.Contains(string(doc), line+"\n") {
			t.Errorf("measured row not in docs/precision.md:\n%s", line)
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	{ // a2
		keys := precKeys(100)
		p := newPrecPair(t, sketch.Config{Decay: decay.Exponential(math.Ln2 / 10), Hi: 1e9})
		for ms := 1; ms <= 60_000; ms++ {
			p.clk.Set(int64(ms))
			k := keys[rng.IntN(len(keys))]
			p.update(k, 1)
			p.compare(k)
		}
		row(p.result("a2 rate counter, 100 keys, 1 kHz total, 60 s"))
	}
	{ // b
		keys := precKeys(10)
		p := newPrecPair(t, sketch.Config{Decay: decay.Linear(100), Lo: 0, Hi: 1000})
		for ms := 1; ms <= 600_000; ms++ {
			p.clk.Set(int64(ms))
			for i, k := range keys {
				inflow := (0.5 + float64(i)/9) * 100
				if rng.Float64() < inflow/1000/2.55 {
					p.update(k, 0.1+4.9*rng.Float64())
					p.compare(k)
				}
			}
		}
		row(p.result("b debt meter, Linear(100/s), 10 keys, 10 min"))
	}
	{ // c
		k := []byte("big")
		p := newPrecPair(t, sketch.Config{Hi: 1e12})
		p.update(k, 1e6)
		for i := 1; i <= 100_000; i++ {
			p.update(k, 1e-5)
			if i%100 == 0 {
				p.compare(k)
			}
		}
		row(p.result("c +1e-5 x 1e5 on 1e6, no decay"))
	}
	{ // d
		keys := precKeys(100)
		p := newPrecPair(t, sketch.Config{Lo: -(1 << 24), Hi: 1 << 24})
		for range 200_000 {
			k := keys[rng.IntN(len(keys))]
			d := float64(rng.IntN(151) - 50)
			if d == 0 {
				d = 1
			}
			p.update(k, d)
			p.compare(k)
		}
		edge := []byte("edge")
		p.update(edge, 1<<24-5000)
		for range 5000 {
			p.update(edge, 1)
			p.compare(edge)
		}
		row(p.result("d integer deltas, |score| <= 2^24, no decay"))
	}
	{ // e
		n := 1_000_000
		k := []byte("large")
		p := newPrecPair(t, sketch.Config{Hi: 1e12})
		p.update(k, float64(1<<24-n/10))
		for i := 1; i <= n; i++ {
			p.update(k, 1)
			if i%1000 == 0 {
				p.compare(k)
			}
		}
		row(p.result(fmt.Sprintf("e +1 x %d from 2^24-%d, no decay", n, n/10)))
	}
	{ // f
		keys := precKeys(50)
		p := newPrecPair(t, sketch.Config{Decay: decay.Exponential(math.Ln2 / 30), Lo: -100, Hi: 100})
		for ms := 1; ms <= 120_000; ms++ {
			p.clk.Set(int64(ms))
			k := keys[rng.IntN(len(keys))]
			d := -1 + 0.5*rng.Float64()
			if rng.IntN(5) == 0 {
				d = 5 * rng.Float64()
			}
			p.update(k, d)
			p.compare(k)
		}
		row(p.result("f feedback score +/-, Lo=-100, Hi=100, Exponential"))
	}
}
