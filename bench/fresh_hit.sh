#!/bin/sh
# bench/fresh_hit.sh [RUNS] - on the GPU machine, from the repository root
# with build/ built: the first cache hit in fresh processes (bench/fresh_hit
# in its three modes), the deployment GPU test, and, where the tools are
# installed, the NVTX ranges of a resolve under Nsight Systems and the
# norm kernels under Nsight Compute. Logs go to $OUT (or /tmp/jitk-out).
# Every step runs even when an earlier one failed; exit 1 at the end when
# one did, naming it. JITK_BUILD: the build directory (default build).
set -u
OUT=${OUT:-/tmp/jitk-out}
b=${JITK_BUILD:-build}
runs=${1:-50}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$b/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
failed=
ran() {
	echo "$2 rc=$1"
	[ "$1" = 0 ] || failed="$failed $2"
}
name='fused_norm_scale_shift_fp8[hidden=3072]'

# jitk's share of the first resolve (compile half, in a runtime), the whole
# first jitk_kernel_get, and the CPU-only path, each in $runs fresh processes
for mode in gpu-share gpu compile; do
	"$b/fresh_hit" --runs "$runs" --mode "$mode" "$name" >"$OUT/fresh_hit-$mode.log" 2>&1
	ran $? "fresh_hit-$mode"
	cat "$OUT/fresh_hit-$mode.log"
done

"$b/tests/test_deploy_gpu" >"$OUT/test_deploy_gpu.log" 2>&1
ran $? test_deploy_gpu
grep -E "^GPU|^image|^sealed|^manifest|^deploy|PASSED|FAILED|SKIP" "$OUT/test_deploy_gpu.log"

if command -v nsys >/dev/null 2>&1; then
	nsys profile --trace=nvtx,cuda --force-overwrite=true -o "$OUT/deploy" \
		"$b/tests/test_deploy_gpu" >"$OUT/nsys.log" 2>&1
	ran $? nsys-profile
	{ nsys stats --report nvtx_sum "$OUT/deploy.nsys-rep" 2>/dev/null ||
		nsys stats --report nvtxsum "$OUT/deploy.nsys-rep"; } >"$OUT/nsys-nvtx.txt" 2>&1
	ran $? nsys-stats
	grep -E "resolve|cache lookup|compile|load" "$OUT/nsys-nvtx.txt" | head -20
else
	echo "nsys: not installed, skipped"
fi

if command -v ncu >/dev/null 2>&1; then
	JITK_GPU_QUICK=1 ncu --clock-control none -k regex:norm_scale_shift -c 4 --section LaunchStats \
		"$b/tests/test_gpu" >"$OUT/ncu.log" 2>&1
	ran $? ncu
	grep -E "norm_scale_shift" "$OUT/ncu.log" | head -8
else
	echo "ncu: not installed, skipped"
fi

if [ -n "$failed" ]; then
	echo "failed:$failed"
	exit 1
fi
