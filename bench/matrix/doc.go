// Package matrix runs the contention benchmark matrix: every selected
// implementation x workload x key distribution x GOMAXPROCS x clock mode
// is one cell, measured -count times by P pinned worker threads, and
// reported as Markdown tables, results.csv, results.json and PNG plots
// that say how sure they are.
//
// The default matrix (DefaultOptions, `make bench`) is lockfree,
// reference and atomicadd on every workload and dist, both clock modes,
// P = 1, 2, 4, ... up to the usable CPUs (UsableCPUs), 3 repeats of 250ms per cell; -impls all adds
// the rotators and ratemap.
//
// # Implementations
//
// All take the same keys and hash (XXH3, seed 0, the sketch.Index layout)
// and are configured with L=4, M=100_000, decay.Exponential(1), Lo=0,
// Hi=1e12 where they have such parameters:
//
//	lockfree    sketch.New                      (default clock: runtime monotonic ms)
//	reference   reference.New                   (default clock: time.Now().UnixMilli())
//	rotator     rotator.New, 2 generations, Period 1s
//	refrotator  reference.NewRotator, 2 generations, Period 1s (Closed after the cell)
//	atomicadd   L rows of atomic.Int64, fetch-add, min of the results, no
//	            decay, no clamp, no clock: the lower bound, as pingora-limits
//	            builds its estimator
//	ratemap     sync.Map from string(key) to *rate.Limiter (see RateMap)
//
// With -clock=default each implementation reads its own default clock;
// with -clock=shared every sketch and rotator reads SharedClock
// (hw.Nanotime()/1e6) and ratemap reads the same reading as a time.Time,
// so the lockfree/reference ratio under shared is the gain of the cell
// design alone and the rest of the default-clock ratio is the clock's.
// atomicadd reads no clock and runs under clock=default only.
//
// # Workloads
//
//	update              Update(k, 1)
//	update-saturated    Update(k, 1e12 = Hi) on keys pre-filled with Hi: every
//	                    cell pinned at Hi, so after the first write of each
//	                    millisecond an Update changes nothing (the lock-free
//	                    sketch then writes nothing; ratemap: drained buckets)
//	query               Query(k)
//	updateandquery      UpdateAndQuery(k, 1)
//	tryupdate-admitted  TryUpdate(k, 1, 1e12 = Hi): every call admitted
//	tryupdate-denied    TryUpdate(k, 1, 1) on keys pre-filled with 1e9: the
//	                    abuse path, (almost) every call denied
//	mix90               9 Query then 1 Update, repeating
//
// Before timing, every key of the distribution's universe is filled once
// (Update(k, 1), or 1e9 for tryupdate-denied), so the cells hold decaying
// non-zero scores and every page is faulted in. Each cell gets a fresh
// structure, except ratemap: one filled map (2^20 limiters take seconds to
// insert and ~200 MB) serves all its cells of one clock, dist and bucket
// mode, which run back to back at the end of each clock pass; its cells
// change only token counts.
//
// # Key distributions
//
// A universe of -keys (default 2^20, "1M") 16-byte keys: key i is a
// bijective mix of i and -seed, built by each worker into its own buffer
// (a server has the key in cache when it asks), so keys add no cache
// misses. uniform draws from all of them, zipf ranks them with
// math/rand/v2's Zipf (s=1.1, v=1: P(rank k) ∝ (1+k)^-1.1), hot8 draws
// from the first 8, hot1 uses the first. Each worker's stream of key
// indexes (-stream long, cycled) is generated before the timed region.
//
// # Repeats
//
// Every cell is measured -count times (default 3), interleaved: round r
// runs every cell once, in the order above, then round r+1 does, so a
// drift of the machine (a noisy neighbour, frequency, the page cache)
// lands on every cell alike rather than on one cell's repeats:
//
//	for r := range count {
//	    for _, c := range cells { runs[c] = append(runs[c], measure(c)) }
//	}
//
// Each repeat sets its cell up as a run of one round would: a fresh,
// filled structure, or for ratemap the group's map, filled once per group
// per round. A cell's Result is the summary of its repeats: Mops is the
// median of the repeats' Mops/s, with MopsMin, MopsMax and the quartiles
// MopsQ1, MopsQ3 (linear interpolation, R's type 7); Spread is
// (MopsMax-MopsMin)/Mops and Noisy is Spread > -spread (default 0.25).
// P50Ns, P99Ns and P999Ns are medians of the repeats' percentiles; every
// repeat's Mops/s and percentiles stay in MopsRuns, P50Runs, P99Runs and
// P999Runs, in round order. Ops, Seconds, Samples and Mallocs are sums
// over the repeats. Ratio is the median over the base's median, with
// RatioMin = MopsMin/base MopsMax, RatioMax = MopsMax/base MopsMin, and
// RatioNoisy when either side is Noisy.
//
// # Outputs
//
// Markdown (stdout and results.md): per clock mode a throughput table,
// "median (min–max)" per cell with ⚠ on a Noisy cell and on a ratio
// either side of which is Noisy (a footnote says so), the ratios
// lockfree/reference, rotator/refrotator and atomicadd/lockfree of the
// medians; a latency table (medians); with -clock both, the two clocks'
// medians and ratios of the same run side by side (Clock vs cell
// design); memory and allocations; the targets, from medians.
// results.csv: "# key: value" metadata lines, then one row per cell, the
// summary columns and the per-repeat columns as ';'-separated lists.
// results.json: the Report, the per-repeat values as arrays. Plots, per
// clock mode: throughput-<clock>.png (Mops/s vs P per workload x dist,
// min–max error bars, atomicadd a dashed reference line that does not
// set the y-range, noted when off scale), ratio-<clock>.png
// (lockfree/reference and rotator/refrotator vs P per dist, one line per
// workload, log2 axis, 1.0x marked, error bars from the ratio bounds)
// and latency-<clock>.png; legends sit in a column beside the tiles, and
// the colours are Okabe–Ito's with a marker and dash pattern per line.
// -from results.json renders all of them again from a saved run.
//
// # Measurement
//
// A repeat of a cell builds (ratemap: reuses) a filled structure, sets GOMAXPROCS to
// P and starts P workers. Worker i locks its goroutine to an OS thread, binds
// the thread to CPU i mod n of the process's allowed set
// (sched_setaffinity), reads the mask back and records whether pinning
// took. Then each worker runs:
//
//	deadline := start + duration              // start: one reading for all workers
//	for {
//	    t0 := now(); op(next key); t1 := now()   // 1 op in SampleEvery is timed
//	    reservoir.add(t1 - t0)
//	    if t1 >= deadline { break }
//	    repeat SampleEvery-1 times: op(next key)  // untimed
//	}
//	end := now()
//
// now() is hrtime.TSC (RDTSC) where hrtime reports an invariant TSC, and
// hrtime.Now otherwise (time.Now; arm64). A repeat's throughput is all
// workers' ops over the time from the common start to the last worker's
// end, so a worker that gets its CPU late (more workers than CPUs, a noisy
// neighbour) cannot inflate it. Latency percentiles are nearest-rank
// over the workers' reservoir samples (uniform per worker, weighted by
// each worker's sampled-op count); a sample includes one timer read,
// whose cost is measured at start-up and printed with the results.
// Allocations per op are the runtime.MemStats Mallocs delta across the
// timed region (every goroutine's, the runtime's included) over the ops.
// Memory is Sizes().Total where the structure has it; for ratemap, the
// live-heap delta (after GC) from before construction to after the fill,
// which grows with the number of keys.
package matrix
