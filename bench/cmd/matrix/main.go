// Command matrix runs the contention benchmark matrix (package
// bench/matrix) and prints it as Markdown on stdout, with a progress line
// per cell on stderr, and writes results.csv, results.json, results.md and
// PNG plots into -out (default bench-results/). `make bench` runs it with
// the defaults; -h lists the flags.
//
//	go run ./cmd/matrix                                   # the default matrix
//	go run ./cmd/matrix -impls lockfree,reference -workloads update -dists hot8 -duration 100ms
//	go run ./cmd/matrix -from ../bench-results/results.json -out /tmp/replot  # tables and plots again, no run
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lfgrudge/grudge/bench/matrix"
)

// commit is set with -ldflags "-X main.commit=..." by builds that cannot
// ask git at run time (bench/run16.sh's prebuilt binary).
var commit string

func main() {
	o, err := matrix.ParseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.Commit == "" {
		o.Commit = commit
	}
	// The first SIGINT or SIGTERM (timeout(1) sends one) ends the run
	// after the cell in progress; what was measured is still written.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rep *matrix.Report
	if o.From != "" {
		rep, err = readReport(o.From)
	} else {
		rep, err = matrix.Run(ctx, o, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := matrix.WriteMarkdown(os.Stdout, rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop() // a second signal kills, as usual
	if rep.Meta.Stopped != "" {
		fmt.Fprintln(os.Stderr, "matrix:", rep.Meta.Stopped)
	}
	if o.Out != "" {
		paths, err := matrix.WriteFiles(rep, o.Out, o.Plots)
		for _, p := range paths {
			fmt.Fprintln(os.Stderr, "wrote", p)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// readReport reads a results.json that an earlier run wrote.
func readReport(path string) (*matrix.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return matrix.ReadJSON(f)
}
