#!/bin/sh
# tests/cli_bench_script.sh BUILD_DIR - bench/device_run.sh on the CPU:
# it parses; what it assumes of the specs holds (it benchmarks the shipped
# specs, which must run the fused fp8 symbols on sm_90, the H200, and no
# bench script rewrites a spec with a pattern that may stop matching); a
# step that fails makes it exit 1 naming the step, after the later steps
# ran; the precompile step passes on the CPU.
set -u
b=${1:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-bench-script-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

sh -n bench/device_run.sh || fail "bench/device_run.sh does not parse"
if grep -n 'sed .*specs/' bench/*.sh; then
	fail "a bench script rewrites a spec with sed: benchmark the shipped specs (or check the pattern here)"
fi
for s in fused_norm_scale_shift_fp8 fused_scale_residual_norm_scale_shift_fp8; do
	"$b/jitk" explain $s --arch sm_90 --specs specs | head -n 1 | grep -qx "$s on sm_90: runs" ||
		fail "$s does not run on sm_90 with the shipped specs: jitk bench on the H200 needs it"
done
"$b/jitk" bench --help | grep -q "bench/run" && fail "jitk bench --help names bench/run, which does not exist"

# a failing step (a cache miss with compiling disabled), then one that passes
JITK_NO_COMPILE=1 OUT=$tmp/out JITK_BUILD=$b sh bench/device_run.sh "precompile" >"$tmp/fail.log" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "device_run.sh with a failing step exited $rc, not 1"
tail -n 1 "$tmp/fail.log" | grep -qx "device_run: failed: precompile" ||
	{ fail "device_run.sh did not name the failed step"; tail -5 "$tmp/fail.log"; }
OUT=$tmp/out JITK_BUILD=$b sh bench/device_run.sh "precompile" >"$tmp/pass.log" 2>&1
rc=$?
[ "$rc" = 0 ] || { fail "device_run.sh precompile on the CPU exited $rc"; tail -8 "$tmp/pass.log"; }
grep -q "^precompile rc=0$" "$tmp/pass.log" || fail "no 'precompile rc=0' line"
grep -q "38 compiled, 0 cached, 0 failed, 0 gated" "$tmp/pass.log" || fail "the precompile step did not compile 38 kernels"
[ "$fails" = 0 ] || { echo "cli_bench_script: $fails failed"; exit 1; }
echo "bench script: parses, benchmarks the shipped specs, fails loudly: ok"
