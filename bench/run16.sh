#!/usr/bin/env bash
# bench/run16.sh: the one-shot contention run for a 16-core x86-64 machine,
# in under 5 minutes, from prebuilt static binaries (no Go toolchain there).
#
# Build here, from the repository root:
#
#	make bench-matrix
#	# = (in bench/, its own module)
#	#   CGO_ENABLED=0 go build -ldflags "-X main.commit=$(git describe --always --dirty)" -o ../bin/matrix ./cmd/matrix
#	#   CGO_ENABLED=0 go build -tags grudge_nobackoff ... -o ../bin/matrix-nobackoff ./cmd/matrix
#	#   CGO_ENABLED=0 go test -c -o ../bin/sketch.test ./sketch/
#	#   and bin/COMMIT, the commit they were built at (checked below
#	#   against RUN16_COMMIT when set, so stale binaries do not spend the run)
#
# then run it there from the repository root with bin/ beside it
# (bin/ is git-ignored: carry bin/matrix, bin/matrix-nobackoff and
# bin/sketch.test and bin/COMMIT by name; bin/arm64 may be large),
# results under $OUT:
#
#	OUT=/some/dir RUN16_COMMIT=$(git describe --always --dirty) bash bench/run16.sh
#
# It writes 7 files into $OUT (the device tool brings back at most 8),
# none in a folder; results.csv and the plots are rendered here afterwards
# from results.json (bin/matrix -from results.json -out DIR):
#
#	run16.log          machine (kernel, CPU quota, load), the binaries'
#	                   commit, CPU affinity read back, timestamped
#	                   progress lines, the pinning verdict, the
#	                   clock-vs-design table and its targets (the
#	                   shared-clock ones)
#	results.md         the matrix's Markdown (targets graded at the P they
#	                   name: P=1, 2 and 16)
#	results.json       every cell and repeat, machine metadata
#	saturated.md       update-saturated (keys pinned at Hi: the lock-free
#	                   sketch writes nothing) vs update, P = 1..16
#	sketch-bench.txt   go test benchmarks of the sketch (bench/sketch) at -cpu 1,2,4,8,16
#	clock-bench.txt    BenchmarkUpdateClock: Update on each clock (default
#	                   nanotime, the tick clock, nanotime via Clock, wall)
#	nobackoff.md       lock-free hot-key cells built with -tags
#	                   grudge_nobackoff (no contention backoff), to set
#	                   against the same cells in results.md
#
# Budget (timeouts): matrix 150 s + clock split 45 s + saturated 20 s +
# go test benchmarks 50 s + clock benchmark 20 s + no-backoff cells 25 s,
# plus the kill grace (10 s for the matrix to write what it measured when
# timeout(1) stops it, 5 s for each other matrix step): 335 s at most, so
# give the device command a timeout of at least 360 s; about 4 minutes
# expected. Every matrix step starts with its warm-up (-warmup, 250ms per
# implementation of its first row, not recorded).
#
# Pinning: the matrix pins each worker and reads the mask back. Inside a
# gVisor sandbox (the log's kernel line reads 4.4.0 and /proc/version
# names gVisor) the mask is the sandbox's own and host threads are not
# pinned: cite such a run as unpinned whatever the read-back says.
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-bench-results/run16}
D=${RUN16_DURATION:-200ms} # cell duration; set shorter only to try the script out
mkdir -p "$OUT"
log="$OUT/run16.log"

for b in bin/matrix bin/matrix-nobackoff bin/sketch.test; do
	if [ ! -f "$b" ]; then
		echo "run16: $b is missing; build it first with: make bench-matrix" | tee "$log"
		exit 2
	fi
	chmod +x "$b" 2>/dev/null # a carry may drop the exec bit
done
built=$(cat bin/COMMIT 2>/dev/null || echo unknown)
if [ -n "${RUN16_COMMIT:-}" ] && [ "$built" != "$RUN16_COMMIT" ]; then
	echo "run16: bin/ was built at $built, not $RUN16_COMMIT; run make bench-matrix again" | tee "$log"
	exit 2
fi
step() { echo "== $1 $(date -u +%H:%M:%S)" >>"$log"; }

{
	echo "== run16 $(date -u +%Y-%m-%dT%H:%M:%SZ), binaries built at $built"
	echo "kernel: $(uname -r); $(head -c 200 /proc/version 2>/dev/null)"
	echo "cpu quota (cgroup cpu.max): $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)"
	echo "load: $(cat /proc/loadavg 2>/dev/null)"
	echo "nproc: $(nproc)"
	lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|On-line CPU|Thread|Core|Socket|NUMA node)' || grep -m1 'model name' /proc/cpuinfo
	echo "allowed CPUs of this shell: $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
	# Read the kernel's answer back: pin a child to the last allowed CPU
	# and ask which CPUs it may use.
	last=$(grep Cpus_allowed_list /proc/self/status | cut -f2 | tr ',' '\n' | tail -1 | sed 's/.*-//')
	if [ -n "$last" ] && command -v taskset >/dev/null 2>&1; then
		echo "taskset -c $last reads back: $(taskset -c "$last" grep Cpus_allowed_list /proc/self/status | cut -f2)"
	fi
} >"$log" 2>&1

# 1. The matrix at the targets' cells: lockfree, reference and atomicadd
#    (the targets' implementations), default clock, P = 1, 2, 8, 16:
#    3 impls x 4 workloads x 3 dists x 4 P = 144 cells of 200ms, three
#    repeats each (ranges and noise flags on every verdict), about 90 s
#    plus setup. On SIGTERM it ends after the cell in progress and still
#    writes its files. Only results.json and results.md come back: the
#    CSV and plots are rendered from the JSON afterwards.
step matrix
m=$(mktemp -d 2>/dev/null || echo "${TMPDIR:-/tmp}/run16-matrix.$$")
timeout -k 10 150 bin/matrix -clock default -impls lockfree,reference,atomicadd -count 3 \
	-workloads update,query,tryupdate-admitted,tryupdate-denied \
	-dists uniform,hot8,hot1 -procs 1,2,8,16 -duration "$D" \
	-out "$m" -plots=false >/dev/null 2>>"$log"
echo "matrix exit: $?" >>"$log"
mv "$m/results.json" "$OUT/results.json" 2>>"$log"
mv "$m/results.md" "$OUT/results.md" 2>>"$log"
rm -rf "$m"

# 2. Clock vs cell design: lockfree and reference on each default clock
#    and on the shared one, where the cached-line targets are stated
#    (hot-key writes at P=1 and 2, uniform Update at P=1): 108 cells.
step "clock split"
timeout -k 5 45 bin/matrix -clock both -impls lockfree,reference -count 1 -workloads update,updateandquery,tryupdate-admitted \
	-dists uniform,hot8,hot1 -procs 1,2,16 -duration "$D" -out "" -plots=false >>"$log" 2>&1
echo "clock split exit: $?" >>"$log"

# 3. No write when nothing changes: update-saturated (every cell pinned
#    at Hi) against update, lockfree, reference and atomicadd, P = 1..16
#    (60 cells): with many cores on one saturated key the lock-free
#    sketch's lines stay shared.
step saturated
timeout -k 5 20 bin/matrix -clock default -impls lockfree,reference,atomicadd -count 1 \
	-workloads update,update-saturated -dists hot1,hot8 -procs 1,2,4,8,16 \
	-duration "$D" -out "" -plots=false >"$OUT/saturated.md" 2>>"$log"
echo "saturated exit: $?" >>"$log"

step "sketch benchmarks"
# 4. The go test benchmarks (lockfree vs reference vs atomicadd in one
#    benchmark) at -cpu 1,2,4,8,16; feed two such files to benchstat.
(cd bench/sketch && timeout 50 ../../bin/sketch.test -test.run '^$' \
	-test.bench '^Benchmark(Update|TryUpdateDenied)$/^keys=(uniform1M|hot1)$/^mode=parallel$' \
	-test.cpu 1,2,4,8,16 -test.count 1 -test.benchtime 100ms -test.benchmem) >"$OUT/sketch-bench.txt" 2>&1
echo "sketch.test exit: $?" >>"$log"

step "clock benchmark"
# 5. The default-clock question: Update on each clock the sketch could
#    use, single thread, 3 counts (docs/design.md, "Clock").
(cd bench/sketch && timeout 20 ../../bin/sketch.test -test.run '^$' \
	-test.bench '^BenchmarkUpdateClock$' -test.count 3 -test.benchtime 100ms) >"$OUT/clock-bench.txt" 2>&1
echo "clock bench exit: $?" >>"$log"

step nobackoff
# 6. The backoff question: the lock-free hot-key cells without the
#    contention backoff (-tags grudge_nobackoff); compare with the same
#    rows of results.md.
timeout -k 5 25 bin/matrix-nobackoff -clock default -impls lockfree -count 1 \
	-workloads update,tryupdate-admitted -dists hot8,hot1 -procs 2,8,16 \
	-duration "$D" -out "" -plots=false >"$OUT/nobackoff.md" 2>>"$log"
echo "nobackoff exit: $?" >>"$log"

# The verdicts, also on stdout: the matrix's targets (results.md), then
# the shared-clock ones as the clock split graded them (read before the
# block appends to the log).
shared=$(grep -h 'shared clock |' "$log" 2>/dev/null)
{
	echo "== verdict $(date -u +%H:%M:%S)"
	grep -h '^- pinning' "$OUT/results.md" 2>/dev/null || echo "- pinning: no results.md (the matrix did not finish)"
	sed -n '/^### Targets/,$p' "$OUT/results.md" 2>/dev/null
	echo "Shared-clock targets (clock split, step 2):"
	echo "${shared:-none: the clock split did not finish}"
} | tee -a "$log"
