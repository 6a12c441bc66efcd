#!/bin/sh
# run.sh - on the H200, in one call: gemm_proto's checks and timings,
# then the checks again under compute-sanitizer (small shapes).
#
#   sh bench/gemm_proto/run.sh [gemm_proto options]
#
# Needs bench/gemm_proto/build/gemm_proto, built without a GPU by
# build.sh and carried (git ignores build/). Without it, and with
# CUTLASS_DIR set, it builds first (minutes of device time).
# Writes to $OUT (else bench/gemm_proto/build/results): gemm_proto.log
# (everything), summary.md (printed at the end), checks.csv, perf.csv,
# gpu.txt, instances.txt, memcheck.log and racecheck.log.
# SANITIZE="memcheck racecheck" (the default) picks the tools; "none" skips.
# Time limits (s): the whole script keeps within BUDGET=570; the main run
# within MAIN_TIMEOUT=300, each sanitizer within SANITIZER_TIMEOUT=150 (or
# what is left), each smoke test within 25 (a few seconds when it passes).
set -u
start=$(date +%s)
# seconds left of BUDGET (default 570: one device call is 600 at most),
# less $1, never above $2
left() {
	l=$(( ${BUDGET:-570} - ($(date +%s) - start) - $1 ))
	[ $l -gt $2 ] && l=$2
	echo $l
}
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/build/gemm_proto
out=${OUT:-$here/build/results}
mkdir -p "$out"
if [ ! -x "$bin" ]; then
	if [ -n "${CUTLASS_DIR:-}" ]; then
		sh "$here/build.sh" -j "$(nproc)" || exit 2
	else
		echo "run.sh: no $bin: build it with build.sh and carry it" >&2
		exit 2
	fi
fi
if command -v nvcc > /dev/null; then
	cudalib=$(dirname "$(dirname "$(command -v nvcc)")")/lib64
	LD_LIBRARY_PATH=$cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
fi
if ldd "$bin" | grep -q "not found"; then
	echo "run.sh: missing libraries:" >&2
	ldd "$bin" | grep "not found" >&2
	exit 2
fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
	--format=csv > "$out/gpu.txt" 2>&1
"$bin" --list > "$out/instances.txt"

# Smoke test, one process per configuration (M = 127, N = K = 3072): a
# configuration that crashes or hangs is left out of the main run instead
# of taking it down; one whose checks fail (exit 1) stays in, for the data.
configs=
case " $* " in
*" --configs "*) ;;
*)
	: > "$out/smoke.txt"
	for c in $(awk '{ print $1 }' "$out/instances.txt" | uniq); do
		timeout 25 "$bin" --configs "$c" --no-perf --ms 127 --shapes 1 > "$out/smoke_$c.log" 2>&1
		s=$?
		echo "smoke $c: exit $s" >> "$out/smoke.txt"
		[ $s -le 1 ] && configs=${configs:+$configs,}$c
	done
	if [ -z "$configs" ]; then
		cat "$out/gpu.txt" "$out/smoke.txt"
		tail -5 "$out"/smoke_*.log | head -40
		echo "run.sh: every configuration failed its smoke test" >&2
		exit 1
	fi
	set -- --configs "$configs" "$@"
	;;
esac

t0=$(date +%s)
timeout "$(left 60 "${MAIN_TIMEOUT:-300}")" "$bin" --out "$out" "$@" > "$out/gemm_proto.log" 2>&1
rc=$?
echo "gemm_proto: exit $rc after $(( $(date +%s) - t0 )) s" >> "$out/summary.md"
[ -f "$out/smoke.txt" ] && grep -v ': exit 0$' "$out/smoke.txt" >> "$out/summary.md"

san=${SANITIZE:-memcheck racecheck}
if [ "$san" != none ] && command -v compute-sanitizer > /dev/null; then
	for tool in $san; do
		case $tool in
		memcheck) args="--no-perf --ms 1,127,512 --shapes 1" ;;
		racecheck) args="--no-perf --ms 127 --shapes 1 --configs coop_128x128_c2x1,pp_64x128_c1x1,coop_128x128_sk" ;;
		*) args="--no-perf --ms 127 --shapes 1" ;;
		esac
		t=$(left 0 "${SANITIZER_TIMEOUT:-150}")
		if [ "$t" -lt 30 ]; then
			echo "compute-sanitizer $tool: skipped, the time budget is spent" >> "$out/summary.md"
			continue
		fi
		t0=$(date +%s)
		timeout "$t" compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin" $args \
			> "$out/$tool.log" 2>&1
		s=$?
		echo "compute-sanitizer $tool ($args): exit $s after $(( $(date +%s) - t0 )) s," \
			"$(grep -c '^=========' "$out/$tool.log") sanitizer lines;" \
			"$(tail -1 "$out/$tool.log")" >> "$out/summary.md"
		[ $s -eq 0 ] || [ $rc -ne 0 ] || rc=$s
	done
elif [ "$san" != none ]; then
	echo "compute-sanitizer not found: sanitizer runs skipped" >> "$out/summary.md"
fi

cat "$out/gpu.txt" "$out/summary.md"
grep '^FAIL\|^note' "$out/gemm_proto.log" | head -20
exit $rc
