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
// over the rounds), and the schedule's median over the reference's, both
// over the rounds that measured both: backoff16.sh stops each run at a
// timeout, and a stopped run's results.json lacks the cells it did not
// reach, so a side may miss a round the other has. The rows are the cells
// any schedule or the reference measured; where no reference run reached
// a row's cell, the reference column and every ratio of that row read "–".
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
	// cells[schedule][key][round] = that round's Mops/s. Keyed by round,
	// not appended in file order, so that a ratio divides by the
	// reference of the same rounds (see sameRounds).
	cells := map[string]map[key]rounds{}
	allRounds := map[string]bool{}
	var meta *matrix.Meta
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		round, sched, ok := strings.Cut(base, "-")
		if !ok {
			return fmt.Errorf("%s: want <round>-<schedule>.json", f)
		}
		allRounds[round] = true
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
			cells[sched] = map[key]rounds{}
		}
		for _, r := range rep.Results {
			k := key{r.Workload, r.Dist, r.Procs}
			if cells[sched][k] == nil {
				cells[sched][k] = rounds{}
			}
			cells[sched][k][round] = append(cells[sched][k][round], r.Mops)
		}
	}
	ref, ok := cells["reference"]
	if !ok {
		return fmt.Errorf("no <round>-reference.json in %s", dir)
	}
	if len(ref) == 0 {
		// Every reference run stopped or failed before its first cell:
		// there is nothing to divide by, and a table of the schedules
		// alone, every ratio "–", would not be the comparison asked for.
		return fmt.Errorf("the <round>-reference.json files in %s hold no cells", dir)
	}
	var scheds []string
	for s := range cells {
		if s != "reference" {
			scheds = append(scheds, s)
		}
	}
	slices.SortFunc(scheds, func(a, b string) int { return schedOrder(a) - schedOrder(b) })
	// The rows are the cells of every schedule, the reference's and the
	// others' (the union): backoff16.sh runs every side under one
	// timeout, so a slow reference may stop before cells a schedule
	// reached, and those measurements would otherwise vanish from the
	// table without a word. Such a row prints "–" for the reference and
	// the ratio.
	seen := map[key]bool{}
	var keys []key
	for _, c := range cells {
		for k := range c {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
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
	// The rounds of the sweep, counted over every file: any one row may
	// lack rounds whose run stopped before its cell.
	fmt.Fprintf(w, "- lock-free Mops/s per schedule (first/limit Pause calls), median (min-max) of %d rounds (of fewer where a stopped run lacks the cell); "+
		"x: the schedule's median over the reference's median, both over the rounds that measured both\n\n", len(allRounds))
	fmt.Fprintf(w, "| workload | keys | P | reference | %s |\n", strings.Join(scheds, " | "))
	fmt.Fprintf(w, "| --- | --- | --: | --: |%s\n", strings.Repeat(" --: |", len(scheds)))
	for _, k := range keys {
		refCell := "–" // no reference run reached this cell
		if len(ref[k]) > 0 {
			refCell = cell(ref[k].all())
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s |", k.work, k.dist, k.procs, refCell)
		for _, s := range scheds {
			v := cells[s][k]
			if len(v) == 0 {
				fmt.Fprint(w, " – |")
				continue
			}
			sv, rv := sameRounds(v, ref[k])
			if len(sv) == 0 {
				// No round measured both: there is no ratio to print.
				fmt.Fprintf(w, " %s – |", cell(v.all()))
				continue
			}
			sm, _, _ := stats(sv)
			rm, _, _ := stats(rv)
			fmt.Fprintf(w, " %s %.2fx |", cell(v.all()), sm/rm)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// rounds holds one cell's Mops/s by round (the <round> of its file name).
type rounds map[string][]float64

// all returns the values of every round.
func (r rounds) all() []float64 {
	var v []float64
	for _, x := range r {
		v = append(v, x...)
	}
	return v
}

// sameRounds returns the values of s and of ref in the rounds that both
// have, so that their medians compare the same rounds' machine state.
func sameRounds(s, ref rounds) (sv, rv []float64) {
	for round, x := range s {
		if y, ok := ref[round]; ok {
			sv = append(sv, x...)
			rv = append(rv, y...)
		}
	}
	return sv, rv
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
