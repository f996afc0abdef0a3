// Command heapplot draws docs/img/readings-heap.png from the output of
//
//	go test -run '^$' -bench Heap -benchtime 1x ./limit/ | go run ./cmd/heapplot -o ../docs/img/readings-heap.png -note "machine, commit"
//
// one line per implementation: live heap (MiB, log scale) against the
// number of distinct keys seen (millions). BenchmarkHeap's heap-MB metric
// is bytes/2^20, so the axis says MiB. Its key counts are named %gM, so a
// LIMIT_HEAP_MAX cap can name a fractional million (keys=1.5M, keys=0.5M,
// keys=1e-05M below 100 keys); those lines are read like the others.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

var line = regexp.MustCompile(`^BenchmarkHeap/impl=([^/]+)/keys=([0-9.]+(?:e[-+]\d+)?)M\S*\s+\d+\s+\d+ ns/op\s+([0-9.]+) heap-MB`)

func main() {
	out := flag.String("o", "readings-heap.png", "output PNG")
	note := flag.String("note", "", "a second title line: the machine and commit measured")
	flag.Parse()
	series := map[string]plotter.XYs{}
	var names []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		keys, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			log.Fatalf("heapplot: %q: %v", sc.Text(), err)
		}
		mib, _ := strconv.ParseFloat(m[3], 64)
		if _, ok := series[m[1]]; !ok {
			names = append(names, m[1])
		}
		series[m[1]] = append(series[m[1]], plotter.XY{X: keys, Y: mib})
	}
	if len(names) == 0 {
		log.Fatal("heapplot: no BenchmarkHeap lines on stdin")
	}
	p := plot.New()
	p.Title.Text = "live heap after N distinct keys (one Allow each)"
	if *note != "" {
		p.Title.Text += "\n" + *note
	}
	p.X.Label.Text = "distinct keys (millions)"
	p.Y.Label.Text = "heap (MiB, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, n := range names {
		xy := series[n]
		// cmp.Compare, not int(a.X-b.X): that truncates 1.5-1 to 0 and
		// would take a fractional million for equal to its neighbour.
		slices.SortFunc(xy, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		args = append(args, n, xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		log.Fatal(err)
	}
	if err := p.Save(6*vg.Inch, 4*vg.Inch, *out); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", *out)
}
