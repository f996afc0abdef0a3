package matrix

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/hw"
)

// reservoirCap is each worker's latency-sample capacity per cell
// (512 KiB); past it, the reservoir keeps a uniform sample.
const reservoirCap = 1 << 16

// cell names one measurement.
type cell struct {
	clock, impl, dist string
	work              workload
	procs             int
}

// cells enumerates o's matrix in run order. Per clock mode: every cell
// but ratemap's by workload, dist, procs, then implementation, so the
// implementations compared in one row run back to back; then ratemap's,
// grouped by dist and bucket mode, so that one pre-filled map serves a
// whole group (see runner.rateMap).
func cells(o *Options) ([]cell, error) {
	var cs []cell
	ws := make([]workload, len(o.Workloads))
	for i, wn := range o.Workloads {
		w, err := workloadByName(wn)
		if err != nil {
			return nil, err
		}
		ws[i] = w
	}
	for _, clk := range o.Clocks {
		for _, w := range ws {
			for _, d := range o.Dists {
				for _, p := range o.Procs {
					for _, im := range o.Impls {
						if im != ImplRateMap && runsUnder(im, clk) {
							cs = append(cs, cell{clk, im, d, w, p})
						}
					}
				}
			}
		}
		if !slices.Contains(o.Impls, ImplRateMap) {
			continue
		}
		for _, d := range o.Dists {
			for _, drain := range []bool{false, true} {
				for _, w := range ws {
					if rateDrains(w) != drain {
						continue
					}
					for _, p := range o.Procs {
						cs = append(cs, cell{clk, ImplRateMap, d, w, p})
					}
				}
			}
		}
	}
	return cs, nil
}

// rateDrains reports whether ratemap runs w with drained buckets: the
// abuse path, and update-saturated (a bucket's "pinned at Hi" is empty).
func rateDrains(w workload) bool {
	return w.name == WorkTryUpdateDenied || w.name == WorkUpdateSaturated
}

// runner holds what the cells of one run share.
type runner struct {
	o       *Options
	tm      *Timer
	u       *Universe
	cpus    []int
	streams map[string][][]uint32 // dist -> per-worker index streams

	// rate is the pre-filled ratemap of the current group of ratemap
	// cells, nil outside one. Filling a map of 2^20 limiters takes
	// seconds and leaves a pointer-heavy heap that every GC must mark,
	// so one map serves every cell of its (clock, dist, bucket mode)
	// group: the pre-fill inserted every key, so the cells change only
	// token counts, and with a 2^30 burst (or, drained, a refill of one
	// token per key per second) no cell's outcome depends on another's.
	rate    *instance
	rateKey rateGroup
	rateMem int64

	// measure runs one repeat of one cell: runCell, or a test's fake.
	measure func(c cell) (res Result, pinWhy string, err error)
}

// rateGroup identifies the cells that share one ratemap.
type rateGroup struct {
	clock, dist string
	drain       bool
}

// stream returns the key-index streams of workers 0..workers-1 for dist,
// generating (in parallel) those not made for an earlier cell.
func (r *runner) stream(dist string, workers int) ([][]uint32, error) {
	have := r.streams[dist]
	if len(have) >= workers {
		return have[:workers], nil
	}
	ss := make([][]uint32, workers)
	copy(ss, have)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := len(have); i < workers; i++ {
		wg.Go(func() {
			ss[i], errs[i] = Stream(dist, r.u.Len(), r.o.Stream, r.o.Seed, i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	r.streams[dist] = ss
	return ss, nil
}

// Run measures every cell of o o.Count times and returns the report; it
// prints one progress line per cell per round to progress unless that is
// nil or o.Quiet. The repeats are interleaved: round r runs every cell
// once, in the order of cells, then round r+1 does, so a drift of the
// machine (a neighbour, thermal state) hits every cell alike instead of
// one cell's repeats. Each repeat builds (ratemap: reuses within its
// group and round) a filled structure, as in a run of one round. Run
// changes GOMAXPROCS during each repeat and restores it after. When ctx
// is done, Run finishes the repeat in progress and returns the cells
// measured so far, each summarising the repeats it got, with
// Meta.Stopped saying so.
func Run(ctx context.Context, o Options, progress io.Writer) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Quiet {
		progress = nil
	}
	if o.Backoff != "" {
		first, limit, _ := ParseBackoff(o.Backoff) // checked by Validate
		atom.SetContentionBackoff(first, limit)
		defer atom.ResetContentionBackoff() // this run's only (audit 137)
	}
	t0 := time.Now()
	cs, err := cells(&o)
	if err != nil {
		return nil, err
	}
	r := &runner{o: &o, tm: NewTimer(), cpus: hw.AllowedCPUs(), streams: map[string][][]uint32{}}
	if len(r.cpus) == 0 {
		r.cpus = allowedCPUsFallback()
	}
	r.measure = r.runCell
	ov := MeasureOverhead(r.tm)
	r.u = NewUniverse(o.Keys, o.Seed)

	rep := &Report{Meta: baseMeta(&o)}
	m := &rep.Meta
	m.Timer, m.TimerPairNs, m.SampleEvery, m.SampleCostNs = r.tm.Name(), ov.PairNs, o.SampleEvery, ov.SampleNs
	m.Config = configString(&o)
	m.DurationMs = float64(o.Duration) / 1e6
	m.Count, m.Spread = o.Count, o.Spread
	m.Procs, m.Impls, m.Workloads, m.Dists, m.Clocks = o.Procs, o.Impls, o.Workloads, o.Dists, o.Clocks
	if progress != nil {
		fmt.Fprintf(progress, "matrix: %d cells x %d rounds of %v on %d CPUs (allowed %v); timer %s, pair %.1f ns, sample cost %.1f ns / %d ops\n",
			len(cs), o.Count, o.Duration, m.Cores, r.cpus, m.Timer, ov.PairNs, ov.SampleNs, o.SampleEvery)
	}
	m.WarmupMs = float64(o.Warmup) / 1e6
	if err := r.warmup(ctx, cs, progress); err != nil {
		return nil, err
	}
	rs, err := r.rounds(ctx, cs, progress, t0)
	if err != nil {
		return nil, err
	}
	r.rate = nil
	for i, runs := range rs.runs {
		if len(runs) == 0 {
			continue
		}
		res := combine(runs, o.Spread)
		res.Clock, res.Impl, res.Workload, res.Dist, res.Procs = cs[i].clock, cs[i].impl, cs[i].work.name, cs[i].dist, cs[i].procs
		rep.Results = append(rep.Results, res)
	}
	fillRatios(rep.Results)
	m.Stopped = rs.stopped
	switch {
	case rs.n == 0:
		m.Pinning = "no cell ran"
	case rs.full == rs.n:
		m.Pinning = fmt.Sprintf("took: every worker of all %d cell runs read back its own CPU", rs.full)
	case rs.full == 0:
		m.Pinning = "unpinned: " + rs.why
	default:
		m.Pinning = fmt.Sprintf("partial: %d of %d cell runs fully pinned; first failure: %s", rs.full, rs.n, rs.why)
	}
	m.WallSeconds = time.Since(t0).Seconds()
	return rep, nil
}

// warmup runs the first row of cs (the cells that share cs[0]'s clock,
// workload, dist and P: one per implementation) once each for o.Warmup
// before round 1, and discards what they measured. Without it the first
// measured cell ran cold: a fresh process's first timed region pays for
// the CPU's frequency ramp, the first page faults of the streams and the
// runtime's first GC cycles (uniform Update at P=1 read 0.70x in one
// run's first cell and 2x in every later one). Each implementation runs
// its own code, so each gets its turn. The row's cells are picked from
// all of cs, not only the leading run of them: cells puts ratemap's at
// the end of its clock's pass, and its cell of the row is one of them
// (its warm-up fills a ratemap, which round 1 does not reuse). A done
// ctx skips the rest.
func (r *runner) warmup(ctx context.Context, cs []cell, progress io.Writer) error {
	if r.o.Warmup <= 0 || len(cs) == 0 {
		return nil
	}
	d := r.o.Duration
	r.o.Duration = r.o.Warmup
	defer func() { r.o.Duration = d }()
	first := cs[0]
	for _, c := range cs {
		if c.clock != first.clock || c.work.name != first.work.name || c.dist != first.dist || c.procs != first.procs {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		res, _, err := r.measure(c)
		if err != nil {
			return fmt.Errorf("matrix: warm-up clock=%s impl=%s workload=%s dist=%s P=%d: %w", c.clock, c.impl, c.work.name, c.dist, c.procs, err)
		}
		if progress != nil {
			fmt.Fprintf(progress, "[warm-up, not recorded] clock=%s impl=%s workload=%s keys=%s P=%d: %.2f Mops/s\n",
				c.clock, c.impl, c.work.name, c.dist, c.procs, res.Mops)
		}
	}
	r.rate = nil
	return nil
}

// roundsResult is what rounds measured.
type roundsResult struct {
	runs    [][]Result // per cell (cells' order), its repeats in round order
	n, full int        // repeats run, and those with every worker pinned
	why     string     // the first pinning failure
	stopped string     // why the rounds ended early; "" when complete
}

// rounds runs r.o.Count rounds; each runs every cell of cs once, in
// order, through r.measure. A new round starts with no ratemap kept, so
// every round fills its own.
func (r *runner) rounds(ctx context.Context, cs []cell, progress io.Writer, t0 time.Time) (roundsResult, error) {
	out := roundsResult{runs: make([][]Result, len(cs))}
	count := r.o.Count
	total := count * len(cs)
	for round := range count {
		r.rate = nil
		for i, c := range cs {
			if err := ctx.Err(); err != nil {
				out.stopped = fmt.Sprintf("stopped after %d of %d cell runs (round %d of %d): %v", out.n, total, round+1, count, context.Cause(ctx))
				return out, nil
			}
			c0 := time.Now()
			res, pinWhy, err := r.measure(c)
			if err != nil {
				return out, fmt.Errorf("matrix: cell clock=%s impl=%s workload=%s dist=%s P=%d round %d: %w", c.clock, c.impl, c.work.name, c.dist, c.procs, round+1, err)
			}
			out.runs[i] = append(out.runs[i], res)
			out.n++
			if res.Pinned == res.Procs {
				out.full++
			} else if out.why == "" {
				out.why = pinWhy
			}
			if progress != nil {
				done := time.Since(t0)
				eta := time.Duration(float64(done) / float64(out.n) * float64(total-out.n))
				fmt.Fprintf(progress, "[round %d/%d cell %d/%d eta %v] clock=%s impl=%s workload=%s keys=%s P=%d: %.2f Mops/s p50=%.0fns p99=%.0fns p99.9=%.0fns allocs/op=%.3g pinned=%d/%d (%.2fs)\n",
					round+1, count, i+1, len(cs), eta.Round(time.Second), c.clock, c.impl, c.work.name, c.dist, c.procs,
					res.Mops, res.P50Ns, res.P99Ns, res.P999Ns, res.AllocsPerOp, res.Pinned, res.Procs, time.Since(c0).Seconds())
			}
		}
	}
	return out, nil
}

func allowedCPUsFallback() []int {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// configString describes the fixed parameters for the report.
func configString(o *Options) string {
	bo := ""
	if o.Backoff != "" {
		bo = "; lock-free contention backoff " + o.Backoff
	}
	return fmt.Sprintf("L=%d M=%d decay=Exponential(%g/s) Lo=0 Hi=%g hash=XXH3 seed 0; rotators: %d generations, Period %v; "+
		"tryupdate-admitted limit %g; tryupdate-denied: fill %g, limit %g; ratemap: %g token/s, burst 2^30 (denied: %g token/s, burst 1, drained); "+
		"keys: %d x %dB, zipf s=%g v=%g; stream %d indexes/worker%s",
		o.Levels, o.Cells, float64(lambda), sketchHi, rotatorGens, rotatorPeriod,
		admitLimit, denyFill, float64(denyLimit), float64(rateLimit), rateDenyLimit, o.Keys, KeyLen, ZipfS, float64(ZipfV), o.Stream, bo)
}

// runCell measures one repeat of one cell (a Result with Count 1).
// pinWhy explains a pinning failure.
func (r *runner) runCell(c cell) (res Result, pinWhy string, err error) {
	res = Result{Clock: c.clock, Impl: c.impl, Workload: c.work.name, Dist: c.dist, Procs: c.procs, Count: 1}
	streams, err := r.stream(c.dist, c.procs)
	if err != nil {
		return res, "", err
	}

	var ms runtime.MemStats
	var inst *instance
	if c.impl == ImplRateMap {
		inst, err = r.rateMap(c)
		if err != nil {
			return res, "", err
		}
		res.MemBytes, res.MemSource = r.rateMem, "heap"
	} else {
		r.rate = nil // leave no map of limiters for the GC to mark
		runtime.GC()
		inst, err = r.fresh(c)
		if err != nil {
			return res, "", err
		}
		defer inst.close()
		if sz, ok := inst.target.(sizer); ok {
			res.MemBytes, res.MemSource = int64(sz.Sizes().Total), "sizes"
		}
	}

	ws := make([]*worker, c.procs)
	for i := range ws {
		ws[i] = &worker{cpu: r.cpus[i%len(r.cpus)], stream: streams[i], u: r.u, key: make([]byte, KeyLen)}
		ws[i].res.init(reservoirCap, uint64(i)+1)
	}
	prev := runtime.GOMAXPROCS(c.procs)
	var ready, done sync.WaitGroup
	g := &gate{start: make(chan struct{})}
	for _, w := range ws {
		ready.Add(1)
		done.Add(1)
		go w.run(inst.target, c.work, r.tm, r.o.SampleEvery, &ready, &done, g)
	}
	ready.Wait()
	runtime.ReadMemStats(&ms)
	m0 := ms.Mallocs
	g.t0 = r.tm.Now()
	g.deadline = g.t0 + r.tm.Ticks(r.o.Duration)
	close(g.start)
	done.Wait()
	runtime.ReadMemStats(&ms)
	m1 := ms.Mallocs
	runtime.GOMAXPROCS(prev)

	var adm uint64
	var last int64
	rs := make([]*reservoir, len(ws))
	for i, w := range ws {
		res.Ops += w.ops
		adm += w.admitted
		last = max(last, w.end)
		if w.pinned {
			res.Pinned++
		} else if pinWhy == "" {
			pinWhy = w.why
		}
		rs[i] = &w.res
		res.Samples += len(w.res.vals)
	}
	res.Seconds = r.tm.Nanos(last-g.t0) / 1e9
	if res.Seconds > 0 {
		res.Mops = float64(res.Ops) / res.Seconds / 1e6
	}
	p := percentiles(mergeReservoirs(rs, r.tm.NsPerTick), 0.50, 0.99, 0.999)
	for i := range p {
		if p[i] != p[i] { // NaN: no samples
			p[i] = 0
		}
	}
	res.P50Ns, res.P99Ns, res.P999Ns = p[0], p[1], p[2]
	res.Mallocs = m1 - m0
	if res.Ops > 0 {
		res.AllocsPerOp = float64(m1-m0) / float64(res.Ops)
		if c.work.isTry() {
			res.AdmitRate = float64(adm) / float64(res.Ops)
		}
	}

	return res, pinWhy, nil
}

// fresh builds and pre-fills the structure of a non-ratemap cell.
func (r *runner) fresh(c cell) (*instance, error) {
	inst, err := build(r.o, c.impl, c.clock, c.work)
	if err != nil {
		return nil, err
	}
	prefill(inst.target, r.u, distSize(c.dist, r.u.Len()), c.work.fill)
	runtime.GC()
	return &inst, nil
}

// rateMap returns the pre-filled ratemap of c's group, building it (and
// measuring its live heap) when the group starts. The map is never
// closed: it holds no goroutine.
func (r *runner) rateMap(c cell) (*instance, error) {
	g := rateGroup{c.clock, c.dist, rateDrains(c.work)}
	if r.rate != nil && r.rateKey == g {
		return r.rate, nil
	}
	r.rate = nil
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	inst, err := build(r.o, c.impl, c.clock, c.work)
	if err != nil {
		return nil, err
	}
	prefill(inst.target, r.u, distSize(c.dist, r.u.Len()), c.work.fill)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.rate, r.rateKey, r.rateMem = &inst, g, int64(ms.HeapAlloc)-int64(heap0)
	return r.rate, nil
}

// prefill visits the first n keys of u once, in parallel: Fill where the
// target has it, else Update(k, fill).
func prefill(t Target, u *Universe, n int, fill float64) {
	f, hasFill := t.(filler)
	g := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for part := range g {
		wg.Go(func() {
			k := make([]byte, KeyLen)
			for i := part; i < n; i += g {
				u.Put(k, uint32(i))
				if hasFill {
					f.Fill(k, fill)
				} else {
					t.Update(k, fill)
				}
			}
		})
	}
	wg.Wait()
}

// worker is one pinned thread of a cell. Its fields are written by its
// goroutine and read by Run after done.Wait.
type worker struct {
	cpu    int       // CPU to pin to
	stream []uint32  // key indexes, len a power of two, cycled
	u      *Universe // the keys
	key    []byte    // KeyLen bytes: the key of the current op
	res    reservoir // latency samples, ticks

	ops      uint64 // operations done
	admitted uint64 // TryUpdates admitted
	end      int64  // timer reading at the end of the worker's last op
	pinned   bool   // affinity read back as {cpu}
	why      string // why pinning failed
	sink     float64
}

// gate starts the workers of a cell together: t0 and deadline are set
// before start is closed, so every worker reads them after <-start.
type gate struct {
	start        chan struct{}
	t0, deadline int64 // timer readings: the start, and when to stop
}

// run pins the thread, waits for the gate, then runs the workload until
// the gate's deadline, timing 1 op in every. Workers that get the CPU late
// (more workers than CPUs, or a noisy neighbour) still stop at the common
// deadline, so the cell's throughput is ops over one wall-clock window.
func (w *worker) run(t Target, wl workload, tm *Timer, every int, ready, done *sync.WaitGroup, g *gate) {
	defer done.Done()
	undo, took, why := hw.PinThread(w.cpu)
	defer undo()
	w.pinned, w.why = took, why
	ready.Done()
	<-g.start

	stream, u, k := w.stream, w.u, w.key
	mask := len(stream) - 1
	pos, mix := 0, 0
	var ops, adm uint64
	var sink float64
	deadline := g.deadline
	for {
		u.Put(k, stream[pos])
		pos = (pos + 1) & mask
		a := tm.Now()
		d, s := do(t, &wl, k, &mix)
		b := tm.Now()
		w.res.add(b - a)
		adm += d
		sink += s
		ops++
		if b >= deadline {
			break
		}
		for j := 1; j < every; j++ {
			u.Put(k, stream[pos])
			pos = (pos + 1) & mask
			d, s := do(t, &wl, k, &mix)
			adm += d
			sink += s
		}
		ops += uint64(every - 1)
	}
	w.end = tm.Now()
	w.ops, w.admitted, w.sink = ops, adm, sink
}

// do performs one operation of wl on key k and returns whether a
// TryUpdate was admitted and the value a read returned. mix counts mix90's
// position: 9 queries, then an update.
func do(t Target, wl *workload, k []byte, mix *int) (admitted uint64, v float64) {
	switch wl.op {
	case opUpdate:
		t.Update(k, wl.delta)
	case opQuery:
		v = t.Query(k)
	case opUpdateAndQuery:
		v = t.UpdateAndQuery(k, wl.delta)
	case opTryUpdate:
		if t.TryUpdate(k, wl.delta, wl.limit) {
			admitted = 1
		}
	case opMix90:
		if *mix == 9 {
			*mix = 0
			t.Update(k, wl.delta)
		} else {
			*mix++
			v = t.Query(k)
		}
	}
	return admitted, v
}

// sortedProcs returns the distinct procs values in rs, ascending.
func sortedProcs(rs []Result) []int {
	var ps []int
	for _, r := range rs {
		ps = append(ps, r.Procs)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}
