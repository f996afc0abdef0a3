package matrix

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Result is one cell of the matrix: the summary of its repeats (see
// combine) and every repeat's throughput and latency percentiles, in
// round order.
type Result struct {
	Clock       string  `json:"clock"`         // clock mode
	Impl        string  `json:"impl"`          // implementation
	Workload    string  `json:"workload"`      // workload
	Dist        string  `json:"dist"`          // key distribution
	Procs       int     `json:"procs"`         // GOMAXPROCS = workers
	Count       int     `json:"count"`         // repeats measured
	Ops         uint64  `json:"ops"`           // operations, all workers, all repeats
	Seconds     float64 `json:"seconds"`       // per repeat from the common start to the last worker's last op, summed
	Mops        float64 `json:"mops"`          // median over the repeats of ops/seconds, in millions per second
	MopsMin     float64 `json:"mops_min"`      // the slowest repeat
	MopsMax     float64 `json:"mops_max"`      // the fastest repeat
	MopsQ1      float64 `json:"mops_q1"`       // quartiles of the repeats (type 7)
	MopsQ3      float64 `json:"mops_q3"`       //
	Spread      float64 `json:"spread"`        // (MopsMax-MopsMin)/Mops
	Noisy       bool    `json:"noisy"`         // Spread > Meta.Spread (and Count > 1)
	P50Ns       float64 `json:"p50_ns"`        // medians over the repeats of the latency percentiles of the sampled ops
	P99Ns       float64 `json:"p99_ns"`        //
	P999Ns      float64 `json:"p999_ns"`       //
	Samples     int     `json:"samples"`       // latency samples kept (reservoirs), all repeats
	Mallocs     uint64  `json:"mallocs"`       // runtime.MemStats.Mallocs delta over the timed regions (all goroutines), all repeats
	AllocsPerOp float64 `json:"allocs_per_op"` // Mallocs / Ops
	MemBytes    int64   `json:"mem_bytes"`     // footprint of the structure (the largest of the repeats)
	MemSource   string  `json:"mem_source"`    // "sizes" (Sizes().Total) or "heap" (live-heap delta)
	AdmitRate   float64 `json:"admit_rate"`    // TryUpdate workloads: admitted/ops; else 0
	Pinned      int     `json:"pinned"`        // workers whose affinity read back as their one CPU, fewest of the repeats
	Base        string  `json:"base"`          // implementation Ratio compares with
	Ratio       float64 `json:"ratio"`         // Mops / Mops of Base (medians) in the same clock/workload/dist/procs; 0 if absent
	RatioMin    float64 `json:"ratio_min"`     // MopsMin / Base's MopsMax; 0 if absent
	RatioMax    float64 `json:"ratio_max"`     // MopsMax / Base's MopsMin; 0 if absent or unbounded (a repeat of Base measured 0)
	RatioNoisy  bool    `json:"ratio_noisy"`   // this cell or Base's is Noisy

	MopsRuns []float64 `json:"mops_runs"` // every repeat's Mops/s, in round order
	P50Runs  []float64 `json:"p50_runs"`  // every repeat's p50, ns
	P99Runs  []float64 `json:"p99_runs"`  //
	P999Runs []float64 `json:"p999_runs"` //
}

// Meta describes the machine and the run; every output carries it.
type Meta struct {
	CPUModel     string   `json:"cpu_model"`
	Cores        int      `json:"cores"` // the CPUs the run may use (UsableCPUs): its affinity set, or fewer under a CPU quota
	GOARCH       string   `json:"goarch"`
	GOOS         string   `json:"goos"`
	GoVersion    string   `json:"go_version"`
	Commit       string   `json:"commit"`
	Date         string   `json:"date"`
	Command      string   `json:"command"`
	Pinning      string   `json:"pinning"` // "took", "partial" or "unpinned", with counts
	Timer        string   `json:"timer"`
	TimerPairNs  float64  `json:"timer_pair_ns"`
	SampleEvery  int      `json:"sample_every"`
	SampleCostNs float64  `json:"sample_cost_ns"`
	Config       string   `json:"config"`
	DurationMs   float64  `json:"duration_ms"` // per repeat of a cell
	WarmupMs     float64  `json:"warmup_ms"`   // the unrecorded warm-up of each implementation of the first row; 0: none
	Count        int      `json:"count"`       // repeats per cell (rounds)
	Spread       float64  `json:"spread"`      // the -spread flag threshold
	Procs        []int    `json:"procs"`
	Impls        []string `json:"impls"`
	Workloads    []string `json:"workloads"`
	Dists        []string `json:"dists"`
	Clocks       []string `json:"clocks"`
	WallSeconds  float64  `json:"wall_seconds"`      // the whole run
	Stopped      string   `json:"stopped,omitempty"` // why the run ended before its last cell; "" when complete
}

// Report is a whole run.
type Report struct {
	Meta    Meta     `json:"meta"`
	Results []Result `json:"results"`
}

// baseOf names the implementation impl's Ratio is computed against: the
// mutex rotator for the lock-free rotator, the mutex sketch for everyone
// else (the reference itself included, ratio 1).
func baseOf(impl string) string {
	if impl == ImplRotator {
		return ImplRefRotator
	}
	return ImplReference
}

// fillRatios sets Base and Ratio of every result from the others.
func fillRatios(rs []Result) {
	type k struct {
		clock, impl, work, dist string
		procs                   int
	}
	idx := map[k]Result{}
	for _, r := range rs {
		idx[k{r.Clock, r.Impl, r.Workload, r.Dist, r.Procs}] = r
	}
	for i := range rs {
		r := &rs[i]
		r.Base = baseOf(r.Impl)
		r.Ratio, r.RatioMin, r.RatioMax, r.RatioNoisy = 0, 0, 0, false
		b, ok := idx[k{r.Clock, r.Base, r.Workload, r.Dist, r.Procs}]
		if !ok || b.Mops <= 0 {
			continue
		}
		if r.Impl == r.Base {
			r.Ratio, r.RatioMin, r.RatioMax, r.RatioNoisy = 1, 1, 1, r.Noisy
			continue
		}
		rr := ratioOf(r, &b)
		r.Ratio, r.RatioNoisy = rr.v, rr.noisy
		if !math.IsNaN(rr.lo) {
			r.RatioMin = rr.lo
		}
		if !math.IsNaN(rr.hi) && !math.IsInf(rr.hi, 0) { // JSON has no Inf
			r.RatioMax = rr.hi
		}
	}
}

// WriteJSON writes rep as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(rep)
}

// ReadJSON reads what WriteJSON wrote.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("matrix: reading JSON: %w", err)
	}
	return &rep, nil
}

// csvColumns are Result's JSON names in field order: the CSV header.
func csvColumns() []string {
	t := reflect.TypeFor[Result]()
	cols := make([]string, t.NumField())
	for i := range cols {
		cols[i] = strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
	}
	return cols
}

// WriteCSV writes rep as CSV: "# key: value" comment lines with the
// metadata, a header of Result's JSON names, one row per cell: the
// summary, then the per-repeat columns (mops_runs, p50_runs, ...), each a
// ';'-separated list in round order. Floats are written in Go's shortest
// round-trip form.
func WriteCSV(w io.Writer, rep *Report) error {
	mj, err := json.Marshal(rep.Meta)
	if err != nil {
		return err
	}
	var mm map[string]any
	if err := json.Unmarshal(mj, &mm); err != nil {
		return err
	}
	for _, k := range metaKeys() {
		b, _ := json.Marshal(mm[k])
		if _, err := fmt.Fprintf(w, "# %s: %s\n", k, b); err != nil {
			return err
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns()); err != nil {
		return err
	}
	for _, r := range rep.Results {
		v := reflect.ValueOf(r)
		row := make([]string, v.NumField())
		for i := range row {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				row[i] = f.String()
			case reflect.Int, reflect.Int64:
				row[i] = strconv.FormatInt(f.Int(), 10)
			case reflect.Uint64:
				row[i] = strconv.FormatUint(f.Uint(), 10)
			case reflect.Float64:
				row[i] = strconv.FormatFloat(f.Float(), 'g', -1, 64)
			case reflect.Bool:
				row[i] = strconv.FormatBool(f.Bool())
			case reflect.Slice:
				vs := make([]string, f.Len())
				for j := range vs {
					vs[j] = strconv.FormatFloat(f.Index(j).Float(), 'g', -1, 64)
				}
				row[i] = strings.Join(vs, ";")
			default:
				return fmt.Errorf("matrix: CSV cannot write field kind %v", f.Kind())
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// metaKeys are Meta's JSON names in field order.
func metaKeys() []string {
	t := reflect.TypeFor[Meta]()
	ks := make([]string, t.NumField())
	for i := range ks {
		ks[i] = strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
	}
	return ks
}

// ReadCSV reads what WriteCSV wrote, metadata included.
func ReadCSV(r io.Reader) (*Report, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	var body strings.Builder
	meta := map[string]json.RawMessage{}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			k, v, ok := strings.Cut(strings.TrimRight(rest, "\n"), ": ")
			if !ok {
				return nil, fmt.Errorf("matrix: CSV metadata line %q has no ': '", line)
			}
			meta[k] = json.RawMessage(v)
			continue
		}
		body.WriteString(line)
	}
	mj, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mj, &rep.Meta); err != nil {
		return nil, fmt.Errorf("matrix: CSV metadata: %w", err)
	}
	rows, err := csv.NewReader(strings.NewReader(body.String())).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("matrix: reading CSV: %w", err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("matrix: CSV has no header")
	}
	if got, want := strings.Join(rows[0], ","), strings.Join(csvColumns(), ","); got != want {
		return nil, fmt.Errorf("matrix: CSV header %q; want %q", got, want)
	}
	for n, row := range rows[1:] {
		var res Result
		v := reflect.ValueOf(&res).Elem()
		for i, s := range row {
			f := v.Field(i)
			var err error
			switch f.Kind() {
			case reflect.String:
				f.SetString(s)
			case reflect.Int, reflect.Int64:
				var x int64
				x, err = strconv.ParseInt(s, 10, 64)
				f.SetInt(x)
			case reflect.Uint64:
				var x uint64
				x, err = strconv.ParseUint(s, 10, 64)
				f.SetUint(x)
			case reflect.Float64:
				var x float64
				x, err = strconv.ParseFloat(s, 64)
				f.SetFloat(x)
			case reflect.Bool:
				var x bool
				x, err = strconv.ParseBool(s)
				f.SetBool(x)
			case reflect.Slice:
				if s == "" {
					break
				}
				parts := strings.Split(s, ";")
				xs := make([]float64, len(parts))
				for j, p := range parts {
					if xs[j], err = strconv.ParseFloat(p, 64); err != nil {
						break
					}
				}
				f.Set(reflect.ValueOf(xs))
			}
			if err != nil {
				return nil, fmt.Errorf("matrix: CSV row %d column %s: %w", n+1, rows[0][i], err)
			}
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}
