#!/usr/bin/env bash
# bench/race16.sh: the race-enabled test suites on every CPU of a lent
# many-core machine (no Go toolchain there), each binary run from its
# package directory. Summary in $OUT/race16.log, every log in
# $OUT/racelogs.tgz. Build here (static, so the race runtime needs no libc
# there; each binary is named after its package path, and
# bin/race/LIST pairs it with its directory):
#
#	mkdir -p bin/race
#	(cd tests && CGO_ENABLED=1 go test -race -c \
#		-ldflags '-s -w -linkmode=external -extldflags "-static"' \
#		-o ../bin/race/tests_limit.test ./limit/)   # and so on
#	echo "tests_limit tests/limit" >> bin/race/LIST
#	tar -C bin -cf - race | xz -6 > bin/race.txz    # 20 suites: 43 MB, under the 64 MiB carry
#
# then carry bin/race.txz and this script, and run
# OUT=$OUT RACE_BUDGET=280 bash bench/race16.sh (RACE_ONLY="a b" runs
# some suites only; a suite gets at most 120 s and what the budget has
# left).
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/race16out}; mkdir -p "$OUT"
log=$OUT/race16.log; R=${RACE_DIR:-/tmp/race16}; mkdir -p "$R" "$R/logs"
{ echo "== race16 $(date -u +%FT%TZ) kernel $(uname -r) nproc $(nproc) load $(cat /proc/loadavg)"; grep -m1 'model name' /proc/cpuinfo; } >"$log"
if [ ! -d "$R/race" ]; then
	(xz -dc bin/race.txz 2>/dev/null || python3 -c "import lzma,sys;sys.stdout.buffer.write(lzma.open('bin/race.txz').read())") | tar -C "$R" -xf - || { echo "unpack failed" >>"$log"; exit 2; }
fi
end=$(( $(date +%s) + ${RACE_BUDGET:-290} ))
while read -r n d; do
	[ -n "${RACE_ONLY:-}" ] && [[ " $RACE_ONLY " != *" $n "* ]] && continue
	left=$(( end - $(date +%s) ))
	if [ "$left" -lt 15 ]; then echo "SKIPPED (budget) $n" >>"$log"; continue; fi
	t=$(( left < 120 ? left : 120 ))
	s=$(date +%s.%N)
	(cd "$d" && timeout -k 5 "$t" "$R/race/$n.test" -test.count=1 -test.timeout "$((t - 5))s" >"$R/logs/$n.log" 2>&1)
	rc=$?
	el=$(echo "$(date +%s.%N) - $s" | bc 2>/dev/null || echo "?")
	if [ "$rc" -eq 0 ]; then echo "ok   $n ${el}s" >>"$log"; else
		echo "FAIL $n rc=$rc ${el}s" >>"$log"
		grep -n -E "^(--- FAIL|WARNING: DATA RACE|panic:|FAIL)" "$R/logs/$n.log" | head -20 >>"$log"
	fi
done <"$R/race/LIST"
tar -C "$R" -czf "$OUT/racelogs.tgz" logs
echo "== done $(date -u +%T)" >>"$log"; cat "$log"
