// Command backoffsum summarises a bench/backoff16.sh sweep: the lock-free
// hot-key cells under each contention-backoff schedule, medians over the
// rounds with their range, against the reference measured in the same
// rounds.
//
//	tar -xzf sweep.tar.gz && (cd bench && go run ./cmd/backoffsum ../sweep)
//
// The folder holds <round>-<schedule>.json (schedule "off" or F-L) and
// <round>-reference.json, each a results.json of one matrix run with one
// repeat per cell. It prints a Markdown table: one row per workload, key
// distribution and P, one column per schedule (Mops/s median (min-max)
// over the rounds), and the schedule's median over the reference's.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lfgrudge/grudge/bench/matrix"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: backoffsum DIR (the sweep folder of bench/backoff16.sh)")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "backoffsum:", err)
		os.Exit(1)
	}
}

type key struct {
	work, dist string
	procs      int
}

func run(dir string, w io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no .json files in %s", dir)
	}
	// cells[schedule][key] = the rounds' Mops/s
	cells := map[string]map[key][]float64{}
	var meta *matrix.Meta
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		_, sched, ok := strings.Cut(base, "-")
		if !ok {
			return fmt.Errorf("%s: want <round>-<schedule>.json", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var rep matrix.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if meta == nil {
			meta = &rep.Meta
		}
		sched = strings.Replace(sched, "-", "/", 1)
		if cells[sched] == nil {
			cells[sched] = map[key][]float64{}
		}
		for _, r := range rep.Results {
			k := key{r.Workload, r.Dist, r.Procs}
			cells[sched][k] = append(cells[sched][k], r.Mops)
		}
	}
	ref := cells["reference"]
	if ref == nil {
		return fmt.Errorf("no <round>-reference.json in %s", dir)
	}
	var scheds []string
	for s := range cells {
		if s != "reference" {
			scheds = append(scheds, s)
		}
	}
	slices.SortFunc(scheds, func(a, b string) int { return schedOrder(a) - schedOrder(b) })
	var keys []key
	for k := range ref {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.work, b.work); c != 0 {
			return c
		}
		if c := strings.Compare(a.dist, b.dist); c != 0 {
			return c
		}
		return a.procs - b.procs
	})
	if meta != nil {
		fmt.Fprintf(w, "- machine: %s, %d CPUs, %s/%s, %s, commit %s; pinning: %s\n", meta.CPUModel, meta.Cores, meta.GOOS, meta.GOARCH, meta.GoVersion, meta.Commit, meta.Pinning)
	}
	fmt.Fprintf(w, "- lock-free Mops/s per schedule (first/limit Pause calls), median (min-max) of %d rounds; x: over the reference's median of the same rounds\n\n", len(ref[keys[0]]))
	fmt.Fprintf(w, "| workload | keys | P | reference | %s |\n", strings.Join(scheds, " | "))
	fmt.Fprintf(w, "| --- | --- | --: | --: |%s\n", strings.Repeat(" --: |", len(scheds)))
	for _, k := range keys {
		rm, _, _ := stats(ref[k])
		fmt.Fprintf(w, "| %s | %s | %d | %s |", k.work, k.dist, k.procs, cell(ref[k]))
		for _, s := range scheds {
			v := cells[s][k]
			if len(v) == 0 {
				fmt.Fprint(w, " – |")
				continue
			}
			m, _, _ := stats(v)
			fmt.Fprintf(w, " %s %.2fx |", cell(v), m/rm)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// schedOrder sorts "off" first, then by first round, then by limit.
func schedOrder(s string) int {
	f, l, ok := strings.Cut(s, "/")
	if !ok {
		return -1
	}
	a, _ := strconv.Atoi(f)
	b, _ := strconv.Atoi(l)
	return a<<21 + b
}

func stats(v []float64) (med, lo, hi float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

func cell(v []float64) string {
	m, lo, hi := stats(v)
	if len(v) == 1 {
		return fmt.Sprintf("%.2f", m)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", m, lo, hi)
}
