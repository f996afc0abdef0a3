#!/usr/bin/env bash
# bench/backoff16.sh: the many-core follow-up to bench/run16.sh, in about
# 3 minutes, from the same prebuilt static binaries (make bench-matrix:
# bin/matrix, bin/asm.test, bin/COMMIT). Three questions:
#
#  1. The contention backoff's schedule on this machine: lock-free Update
#     and admitted TryUpdate on hot1 and hot8 at P = 2, 8, 16 under each
#     schedule of $BACKOFF16_SCHEDULES (matrix -backoff: "off", or F/L =
#     F Pause calls in the first round, doubling up to L; 32/1024 is the
#     build's), the reference once per round beside them; rounds
#     interleave the schedules, rotating their order each round.
#  2. What a Pause costs here (the schedule counts Pause calls, not
#     time): asm's BenchmarkPause, 3 counts.
#  3. The noisy P=16 targets again with 5 repeats (uniform Update,
#     hot1/hot8 Update, tryupdate-denied hot8), and the shared-clock
#     targets at P = 1, 2 with 3 repeats (run16's clock split has one).
#
# Files in $OUT (at most 8 come back from the device tool):
#
#	backoff16.log   machine, affinity read-back, progress, exits
#	pause.txt       BenchmarkPause
#	sweep.tar.gz    sweep/<round>-<schedule>.json and .md (the reference
#	                as <round>-reference), for bench/cmd/backoffsum
#	targets16.md    step 3's P=16 matrix (5 repeats)
#	shared12.md     step 3's shared-clock matrix (3 repeats)
#
# Summarise here afterwards:
#	tar -xzf sweep.tar.gz && (cd bench && go run ./cmd/backoffsum ../sweep)
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-bench-results/backoff16}
D=${BACKOFF16_DURATION:-200ms}
ROUNDS=${BACKOFF16_ROUNDS:-3}
SCHEDS=${BACKOFF16_SCHEDULES:-off 4/64 8/256 16/512 32/1024 64/2048 128/4096}
mkdir -p "$OUT"
log="$OUT/backoff16.log"
for b in bin/matrix bin/asm.test; do
	if [ ! -f "$b" ]; then
		echo "backoff16: $b is missing; build it first with: make bench-matrix" | tee "$log"
		exit 2
	fi
	chmod +x "$b" 2>/dev/null
done
built=$(cat bin/COMMIT 2>/dev/null || echo unknown)
if [ -n "${RUN16_COMMIT:-}" ] && [ "$built" != "$RUN16_COMMIT" ]; then
	echo "backoff16: bin/ was built at $built, not $RUN16_COMMIT; run make bench-matrix again" | tee "$log"
	exit 2
fi
{
	echo "== backoff16 $(date -u +%Y-%m-%dT%H:%M:%SZ), binaries built at $built"
	echo "kernel: $(uname -r); load: $(cat /proc/loadavg 2>/dev/null); nproc: $(nproc)"
	lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node)' || grep -m1 'model name' /proc/cpuinfo
	echo "allowed CPUs of this shell: $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
} >"$log" 2>&1
step() { echo "== $1 $(date -u +%H:%M:%S)" >>"$log"; }

step pause
timeout 20 bin/asm.test -test.run '^$' -test.bench '^BenchmarkPause$' -test.count 3 -test.benchtime 100ms >"$OUT/pause.txt" 2>&1
echo "pause exit: $?" >>"$log"

step sweep
sw=$(mktemp -d 2>/dev/null || echo "${TMPDIR:-/tmp}/backoff16.$$")
mkdir -p "$sw/sweep"
read -r -a sched <<<"$SCHEDS"
n=${#sched[@]}
sweep() { # round, name, extra matrix flags...
	local r=$1 name=$2
	shift 2
	local f=${name//\//-}
	timeout -k 5 30 bin/matrix "$@" -clock default -count 1 -q \
		-workloads update,tryupdate-admitted -dists hot8,hot1 -procs 2,8,16 \
		-duration "$D" -out "$sw/tmp" -plots=false >/dev/null 2>>"$log"
	echo "round $r $name exit: $?" >>"$log"
	mv "$sw/tmp/results.json" "$sw/sweep/$r-$f.json" 2>>"$log"
	mv "$sw/tmp/results.md" "$sw/sweep/$r-$f.md" 2>>"$log"
}
for ((r = 1; r <= ROUNDS; r++)); do
	sweep "$r" reference -impls reference
	for ((i = 0; i < n; i++)); do
		s=${sched[$(((i + r - 1) % n))]}
		sweep "$r" "$s" -impls lockfree -backoff "$s"
	done
done
tar -czf "$OUT/sweep.tar.gz" -C "$sw" sweep 2>>"$log"
rm -rf "$sw"

step "targets P=16"
timeout -k 5 45 bin/matrix -clock default -impls lockfree,reference,atomicadd -count 5 -q \
	-workloads update,tryupdate-denied -dists uniform,hot8,hot1 -procs 16 \
	-duration "$D" -out "" -plots=false >"$OUT/targets16.md" 2>>"$log"
echo "targets16 exit: $?" >>"$log"

step "shared clock P=1,2"
timeout -k 5 45 bin/matrix -clock shared -impls lockfree,reference -count 3 -q \
	-workloads update,updateandquery,tryupdate-admitted -dists uniform,hot8,hot1 -procs 1,2 \
	-duration "$D" -out "" -plots=false >"$OUT/shared12.md" 2>>"$log"
echo "shared12 exit: $?" >>"$log"
step done
cat "$log"
