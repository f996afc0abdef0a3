// Command allowratio summarizes interleaved rounds of BenchmarkAllow as
// the markdown tables of docs/readings.md:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench 'Allow$' -benchtime 1000000x -cpu 1,2 ./limit/; done > allow.txt
//	go run ./cmd/allowratio < allow.txt
//
// Each `go test` run is one round: it measures every implementation once,
// one after the other, so the implementations of a round share the
// machine's state at that time. A round begins at each `goos:` line, the
// header go test prints before a package's benchmarks, so that a ratio
// divides only lines of the same run: a run cut short (-timeout, ^C, a
// failed sub-benchmark) leaves its round without some lines, and that
// round drops out of those ratios instead of shifting every later pair
// onto another round. The first table gives each
// implementation's median ns/op over the rounds, with the range, per key
// count and path; the second, for each other implementation, the ratio
// of its ns/op to limit's within the same round (how many times faster
// limit is), median and range over the rounds; the third, wrong/op
// where any implementation has some (a bounded cache that forgot a
// denied key).
package main

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"
)

var line = regexp.MustCompile(`^BenchmarkAllow/path=([^/]+)/impl=([^/]+)/keys=(\w+?)(?:-(\d+))?\s+\d+\s+([0-9.]+) ns/op(?:\s+([0-9.e+-]+) wrong/op)?`)

// runStart matches the first line go test prints for a package's benchmarks:
// it starts a round.
var runStart = regexp.MustCompile(`^goos: `)

type cell struct {
	keys, path, impl string
	procs            int
}

// sample is one line's ns/op and the round it was read in.
type sample struct {
	round int
	ns    float64
}

func main() {
	rounds := map[cell][]sample{} // ns/op per round, in input order
	wrong := map[cell][]float64{} // wrong/op per round
	var impls, paths, keys []string
	var procs []int
	round := 0 // lines before any goos: header are round 0
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if runStart.MatchString(sc.Text()) {
			round++
			continue
		}
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		p := 1
		if m[4] != "" {
			p, _ = strconv.Atoi(m[4])
		}
		ns, err := strconv.ParseFloat(m[5], 64)
		if err != nil {
			log.Fatal(err)
		}
		c := cell{m[3], m[1], m[2], p}
		rounds[c] = append(rounds[c], sample{round, ns})
		if m[6] != "" {
			w, _ := strconv.ParseFloat(m[6], 64)
			wrong[c] = append(wrong[c], w)
		}
		if !slices.Contains(keys, c.keys) {
			keys = append(keys, c.keys)
		}
		if !slices.Contains(impls, c.impl) {
			impls = append(impls, c.impl)
		}
		if !slices.Contains(paths, c.path) {
			paths = append(paths, c.path)
		}
		if !slices.Contains(procs, p) {
			procs = append(procs, p)
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	if len(rounds) == 0 {
		log.Fatal("no BenchmarkAllow lines on stdin")
	}
	slices.Sort(procs)
	fmt.Println("ns/op, median (min-max) over the rounds:")
	fmt.Println()
	header(procs, "keys | path | implementation")
	for _, k := range keys {
		for _, path := range paths {
			for _, impl := range impls {
				fmt.Printf("| %s | %s | `%s` |", k, path, impl)
				for _, p := range procs {
					fmt.Printf(" %s |", summary(values(rounds[cell{k, path, impl, p}]), "%.0f"))
				}
				fmt.Println()
			}
		}
	}
	fmt.Println()
	fmt.Println("ns/op of the implementation / ns/op of `limit` in the same round, median (min-max):")
	fmt.Println()
	header(procs, "keys | path | limit faster than")
	for _, k := range keys {
		for _, path := range paths {
			for _, impl := range impls {
				if impl == "limit" {
					continue
				}
				fmt.Printf("| %s | %s | `%s` |", k, path, impl)
				for _, p := range procs {
					r := sameRound(rounds[cell{k, path, "limit", p}], rounds[cell{k, path, impl, p}])
					fmt.Printf(" %s |", summary(r, "%.2fx"))
				}
				fmt.Println()
			}
		}
	}
	// wrong/op: the calls that did not answer as the path expects (a
	// denied key a bounded cache forgot and admitted); rows with any.
	var rows []string
	for _, k := range keys {
		for _, path := range paths {
			for _, impl := range impls {
				row, any := fmt.Sprintf("| %s | %s | `%s` |", k, path, impl), false
				for _, p := range procs {
					w := wrong[cell{k, path, impl, p}]
					any = any || slices.ContainsFunc(w, func(x float64) bool { return x > 0 })
					row += fmt.Sprintf(" %s |", summary(w, "%.4f"))
				}
				if any {
					rows = append(rows, row)
				}
			}
		}
	}
	if len(rows) > 0 {
		fmt.Println()
		fmt.Println("wrong/op (the fraction of calls not answered as the path expects), median (min-max), rows with any:")
		fmt.Println()
		header(procs, "keys | path | implementation")
		for _, r := range rows {
			fmt.Println(r)
		}
	}
}

// values returns the ns/op of v, every round's.
func values(v []sample) []float64 {
	ns := make([]float64, len(v))
	for i, x := range v {
		ns[i] = x.ns
	}
	return ns
}

// sameRound returns, for each round in which both base and other have a
// line, other's ns/op over base's, in round order. A round with several
// lines of a cell (go test -count) divides their medians.
func sameRound(base, other []sample) []float64 {
	byRound := func(v []sample) map[int][]float64 {
		m := map[int][]float64{}
		for _, x := range v {
			m[x.round] = append(m[x.round], x.ns)
		}
		return m
	}
	b, o := byRound(base), byRound(other)
	var rs []int
	for r := range o {
		if _, ok := b[r]; ok {
			rs = append(rs, r)
		}
	}
	slices.Sort(rs)
	ratios := make([]float64, len(rs))
	for i, r := range rs {
		ratios[i] = median(o[r]) / median(b[r])
	}
	return ratios
}

func header(procs []int, first string) {
	fmt.Printf("| %s |", first)
	for _, p := range procs {
		fmt.Printf(" P=%d |", p)
	}
	fmt.Println()
	fmt.Print("|---|---|---|")
	for range procs {
		fmt.Print("---|")
	}
	fmt.Println()
}

// summary formats the median and range of v ("-" when v is empty).
func summary(v []float64, f string) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf(f+" ("+f+"-"+f+")", median(v), slices.Min(v), slices.Max(v))
}

// median returns the median of v (the mean of the middle two when len(v)
// is even); v must not be empty.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}
