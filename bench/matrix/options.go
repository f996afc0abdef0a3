package matrix

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Implementation names.
const (
	ImplLockfree   = "lockfree"
	ImplReference  = "reference"
	ImplRotator    = "rotator"
	ImplRefRotator = "refrotator"
	ImplAtomicAdd  = "atomicadd"
	ImplRateMap    = "ratemap"
)

// Workload names.
const (
	WorkUpdate          = "update"
	WorkUpdateSaturated = "update-saturated"
	WorkQuery           = "query"
	WorkUpdateAndQuery  = "updateandquery"
	WorkTryUpdateAdmit  = "tryupdate-admitted"
	WorkTryUpdateDenied = "tryupdate-denied"
	WorkMix90           = "mix90"
)

// Key distribution names.
const (
	DistUniform = "uniform"
	DistZipf    = "zipf"
	DistHot8    = "hot8"
	DistHot1    = "hot1"
)

// Clock modes.
const (
	ClockDefault = "default" // each implementation on its own default clock
	ClockShared  = "shared"  // every implementation on SharedClock
)

// AllImpls, AllWorkloads, AllDists and AllClocks list every name in the
// order the matrix runs and reports them.
var (
	AllImpls     = []string{ImplLockfree, ImplReference, ImplRotator, ImplRefRotator, ImplAtomicAdd, ImplRateMap}
	AllWorkloads = []string{WorkUpdate, WorkUpdateSaturated, WorkQuery, WorkUpdateAndQuery, WorkTryUpdateAdmit, WorkTryUpdateDenied, WorkMix90}
	AllDists     = []string{DistUniform, DistZipf, DistHot8, DistHot1}
	AllClocks    = []string{ClockDefault, ClockShared}
)

// DefaultImpls is the default -impls: the lock-free sketch, the mutex
// reference it is measured against and the atomic-add lower bound, the
// implementations the targets name. The rotators and ratemap
// (whose 2^20-limiter fill costs seconds per group and round) run with
// -impls all or by name.
var DefaultImpls = []string{ImplLockfree, ImplReference, ImplAtomicAdd}

// Defaults of Options. DefaultCount repeats of DefaultDuration over the
// DefaultImpls cells were chosen so that the default matrix takes about
// 5.5 minutes on two cores (the Makefile's bench comment has the
// measured wall time): fewer cells rather than fewer repeats.
const (
	DefaultDuration    = 250 * time.Millisecond
	DefaultWarmup      = 250 * time.Millisecond
	DefaultOut         = "bench-results"
	DefaultSampleEvery = 64
	DefaultKeys        = 1 << 20
	DefaultStream      = 1 << 20
	DefaultLevels      = 4
	DefaultCells       = 100_000
	DefaultSeed        = 1
	DefaultCount       = 3
	DefaultSpread      = 0.25
)

// Options selects the cells of a matrix run and how each is measured. The
// zero value is not useful; start from DefaultOptions or ParseFlags.
type Options struct {
	Impls     []string      // implementations, in AllImpls order, each once
	Workloads []string      // workloads, in AllWorkloads order, each once
	Dists     []string      // key distributions, in AllDists order, each once
	Clocks    []string      // clock modes, in AllClocks order, each once
	Procs     []int         // GOMAXPROCS values (= workers per cell), strictly ascending, each >= 1
	Duration  time.Duration // timed region of each repeat of a cell, > 0
	Warmup    time.Duration // before round 1: the first cell's row runs once this long, unrecorded; 0: none
	Count     int           // repeats per cell, >= 1: round r runs every cell once, then round r+1
	Spread    float64       // flag a cell whose (max-min)/median of Mops/s exceeds this; >= 0
	Out       string        // output folder; "" writes no files
	Plots     bool          // write PNG plots into Out

	SampleEvery int    // time 1 op in SampleEvery; a power of two >= 1
	Keys        int    // key universe size for uniform and zipf, >= 8
	Stream      int    // per-worker key-index stream length; a power of two
	Levels      uint32 // sketch L
	Cells       uint32 // sketch M
	Seed        uint64 // seed of the key universe and the streams

	// Backoff is the lock-free writers' contention backoff for this run
	// (atom.SetContentionBackoff): "" keeps the build's (32/1024, or off
	// under -tags grudge_nobackoff), "off" retries lost CASes at once,
	// "F/L" spins F Pause calls in the first round, doubling up to L.
	// The schedule is process-wide while Run runs; Run restores the
	// build's when it returns.
	Backoff string

	From   string // a results.json to report on instead of running; "" runs
	Commit string // commit to report; "" means look it up (see Meta)
	Quiet  bool   // no progress lines
}

// DefaultProcs returns 1, 2, 4, ... up to and including the CPUs the
// run may use (UsableCPUs; added when not a power of two).
func DefaultProcs() []int {
	n := UsableCPUs()
	var ps []int
	for p := 1; p < n; p *= 2 {
		ps = append(ps, p)
	}
	return append(ps, n)
}

// DefaultOptions returns the default matrix: DefaultImpls on every
// workload and dist, on both clock modes, for DefaultProcs, DefaultCount
// times.
func DefaultOptions() Options {
	return Options{
		Impls:       slices.Clone(DefaultImpls),
		Workloads:   slices.Clone(AllWorkloads),
		Dists:       slices.Clone(AllDists),
		Clocks:      slices.Clone(AllClocks),
		Procs:       DefaultProcs(),
		Duration:    DefaultDuration,
		Warmup:      DefaultWarmup,
		Count:       DefaultCount,
		Spread:      DefaultSpread,
		Out:         DefaultOut,
		Plots:       true,
		SampleEvery: DefaultSampleEvery,
		Keys:        DefaultKeys,
		Stream:      DefaultStream,
		Levels:      DefaultLevels,
		Cells:       DefaultCells,
		Seed:        DefaultSeed,
	}
}

// ParseFlags parses the command line of bench/cmd/matrix into Options.
// Usage and errors go to output; -h returns flag.ErrHelp.
func ParseFlags(args []string, output io.Writer) (Options, error) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("matrix", flag.ContinueOnError)
	fs.SetOutput(output)
	impls := fs.String("impls", strings.Join(DefaultImpls, ","), "implementations, comma-separated, or all: "+strings.Join(AllImpls, ","))
	works := fs.String("workloads", "all", "workloads, comma-separated, or all: "+strings.Join(AllWorkloads, ","))
	dists := fs.String("dists", "all", "key distributions, comma-separated, or all: "+strings.Join(AllDists, ","))
	clocks := fs.String("clock", "both", "clock modes: default (each implementation's own), shared (all read hw.Nanotime()/1e6), or both")
	procs := fs.String("procs", "", "GOMAXPROCS values (workers per cell), comma-separated; empty means 1,2,4,... up to the usable CPUs (affinity set and CPU quota)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "timed region of each repeat of a cell")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "before the first round, run each implementation of the first cell's row this long, unrecorded (0: no warm-up)")
	fs.IntVar(&o.Count, "count", o.Count, "repeats per cell, interleaved: every cell runs once per round, for count rounds")
	fs.Float64Var(&o.Spread, "spread", o.Spread, "flag a cell (and its ratios) when (max-min)/median of its repeats' Mops/s exceeds this")
	fs.StringVar(&o.Out, "out", o.Out, "output folder for results.csv, results.json, results.md and PNG plots; empty writes none")
	fs.BoolVar(&o.Plots, "plots", o.Plots, "write PNG plots into -out")
	fs.IntVar(&o.SampleEvery, "sample", o.SampleEvery, "time 1 op in this many (power of two)")
	fs.IntVar(&o.Keys, "keys", o.Keys, "key universe size for uniform and zipf")
	fs.IntVar(&o.Stream, "stream", o.Stream, "per-worker pre-generated key-index stream length (power of two), cycled")
	levels := fs.Uint("levels", uint(o.Levels), "sketch levels L")
	cells := fs.Uint("cells", uint(o.Cells), "sketch cells per level M")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the key universe and the key streams")
	fs.StringVar(&o.Commit, "commit", o.Commit, "commit to report (default: git rev-parse --short HEAD, then the build's vcs.revision)")
	fs.BoolVar(&o.Quiet, "q", o.Quiet, "no progress lines on stderr")
	fs.StringVar(&o.Backoff, "backoff", o.Backoff, "lock-free contention backoff for this run: F/L (first round F Pause calls, doubling up to L), off, or empty for the build's")
	fs.StringVar(&o.From, "from", o.From, "re-render the Markdown, files and plots of a saved results.json instead of running (other flags but -out and -plots are still checked, then not used)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("matrix: unexpected arguments %q", fs.Args())
	}
	var err error
	if o.Impls, err = parseNames("impls", *impls, AllImpls); err != nil {
		return o, err
	}
	if o.Workloads, err = parseNames("workloads", *works, AllWorkloads); err != nil {
		return o, err
	}
	if o.Dists, err = parseNames("dists", *dists, AllDists); err != nil {
		return o, err
	}
	if *clocks == "both" {
		*clocks = "all"
	}
	if o.Clocks, err = parseNames("clock", *clocks, AllClocks); err != nil {
		return o, err
	}
	if *procs != "" {
		if o.Procs, err = parseProcs(*procs); err != nil {
			return o, err
		}
	}
	// Range-checked before the conversion: 2^32 + 1 would wrap to 1.
	if *levels > math.MaxUint32 {
		return o, fmt.Errorf("matrix: levels must be in [1, 8]; got %d", *levels)
	}
	if *cells > math.MaxUint32 {
		return o, fmt.Errorf("matrix: cells must be at most %d; got %d", uint32(math.MaxUint32), *cells)
	}
	o.Levels, o.Cells = uint32(*levels), uint32(*cells)
	return o, o.Validate()
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	switch {
	case len(o.Impls) == 0 || len(o.Workloads) == 0 || len(o.Dists) == 0 || len(o.Clocks) == 0:
		return errors.New("matrix: impls, workloads, dists and clock must each name at least one")
	case len(o.Procs) == 0:
		return errors.New("matrix: procs must name at least one GOMAXPROCS value")
	case o.Duration <= 0:
		return fmt.Errorf("matrix: duration must be > 0; got %v", o.Duration)
	case o.Warmup < 0:
		return fmt.Errorf("matrix: warmup must be >= 0; got %v", o.Warmup)
	case o.Count < 1:
		return fmt.Errorf("matrix: count must be >= 1; got %d", o.Count)
	case !(o.Spread >= 0):
		return fmt.Errorf("matrix: spread must be >= 0; got %v", o.Spread)
	case o.SampleEvery < 1 || bits.OnesCount(uint(o.SampleEvery)) != 1:
		return fmt.Errorf("matrix: sample must be a power of two >= 1; got %d", o.SampleEvery)
	case o.Keys < 8 || o.Keys > 1<<31:
		return fmt.Errorf("matrix: keys must be in [8, 2^31]; got %d", o.Keys)
	case o.Stream < 1 || bits.OnesCount(uint(o.Stream)) != 1:
		return fmt.Errorf("matrix: stream must be a power of two >= 1; got %d", o.Stream)
	case o.Levels < 1 || o.Levels > 8:
		return fmt.Errorf("matrix: levels must be in [1, 8]; got %d", o.Levels)
	case o.Cells < 1:
		return fmt.Errorf("matrix: cells must be >= 1; got %d", o.Cells)
	}
	if _, _, err := ParseBackoff(o.Backoff); err != nil {
		return err
	}
	for _, l := range []struct {
		field        string
		names, known []string
	}{{"impls", o.Impls, AllImpls}, {"workloads", o.Workloads, AllWorkloads}, {"dists", o.Dists, AllDists}, {"clocks", o.Clocks, AllClocks}} {
		if err := checkNames(l.field, l.names, l.known); err != nil {
			return err
		}
	}
	for i, p := range o.Procs {
		if p < 1 {
			return fmt.Errorf("matrix: procs must be >= 1; got %d", p)
		}
		if i > 0 && p <= o.Procs[i-1] {
			return fmt.Errorf("matrix: procs must be strictly ascending; got %v", o.Procs)
		}
	}
	return nil
}

// checkNames reports a name of names not in known, or names out of
// known's order or repeated.
func checkNames(field string, names, known []string) error {
	last := -1
	for _, n := range names {
		i := slices.Index(known, n)
		if i < 0 {
			return fmt.Errorf("matrix: %s: unknown name %q; known: %s", field, n, strings.Join(known, ","))
		}
		if i <= last {
			return fmt.Errorf("matrix: %s must be in the order %s, each once; got %s", field, strings.Join(known, ","), strings.Join(names, ","))
		}
		last = i
	}
	return nil
}

// parseNames splits a comma-separated list, checks every name against
// known, drops duplicates and returns the names in known's order. "all"
// selects every known name.
func parseNames(flagName, s string, known []string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(known), nil
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("matrix: -%s: unknown name %q; known: %s", flagName, f, strings.Join(known, ","))
		}
		seen[f] = true
	}
	var out []string
	for _, k := range known {
		if seen[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("matrix: -%s: empty list", flagName)
	}
	return out, nil
}

// parseProcs parses "1,2,4" into sorted, de-duplicated positive ints.
func parseProcs(s string) ([]int, error) {
	var ps []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 {
			return nil, fmt.Errorf("matrix: -procs: %q is not a positive integer", f)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, errors.New("matrix: -procs: empty list")
	}
	slices.Sort(ps)
	return slices.Compact(ps), nil
}

// ParseBackoff parses Options.Backoff: "" (keep the build's) and "off"
// both give 0, 0 (Run tells them apart by the string),
// "F/L" gives F, L with 1 <= F <= L <= 2^20.
func ParseBackoff(s string) (first, limit uint32, err error) {
	if s == "" || s == "off" {
		return 0, 0, nil
	}
	f, l, ok := strings.Cut(s, "/")
	a, err1 := strconv.ParseUint(f, 10, 32)
	b, err2 := strconv.ParseUint(l, 10, 32)
	if !ok || err1 != nil || err2 != nil || a < 1 || a > b || b > 1<<20 {
		return 0, 0, fmt.Errorf("matrix: backoff must be off or F/L with 1 <= F <= L <= 2^20; got %q", s)
	}
	return uint32(a), uint32(b), nil
}
