#!/bin/sh
# tests/cli_bench_script.sh BUILD_DIR - bench/device_run.sh on the CPU:
# it parses; what it assumes of the specs holds (it benchmarks the shipped
# specs, which must run the fused fp8 symbols on sm_90, the H200, and no
# bench script rewrites a spec with a pattern that may stop matching); a
# step that fails makes it exit 1 naming the step, after the later steps
# ran; the precompile step passes on the CPU.
set -u
b=${1:-build}
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	echo "SKIP: sanitizer build (this checks bench scripts and the shipped specs; the plain build runs it)"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-bench-script-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/shlib"
sh -n bench/device_run.sh || fail "bench/device_run.sh does not parse"
if grep -n 'sed .*specs/' bench/*.sh; then
	fail "a bench script rewrites a spec with sed: benchmark the shipped specs (or check the pattern here)"
fi
for s in fused_norm_scale_shift_fp8 fused_scale_residual_norm_scale_shift_fp8; do
	for h in 1536 3072 5120; do # the hidden sizes jitk bench times
		"$b/jitk" explain "$s[hidden=$h]" --arch sm_90 --specs specs | head -n 1 |
			grep -qxF "$s[hidden=$h] on sm_90: runs" ||
			fail "$s[hidden=$h] does not run on sm_90 with the shipped specs: jitk bench on the H200 needs it"
	done
done
"$b/jitk" bench --help | grep -q "bench/run" && fail "jitk bench --help names bench/run, which does not exist"

# jitk bench's clean L2 flush is a spec family it writes to a temporary
# directory: taken from cli/bench_util.c, it loads and compiles for sm_90 and
# sm_100 (the bench runs it through the generic call)
if command -v python3 >/dev/null 2>&1; then
	mkdir -p "$tmp/flush"
	python3 - "$tmp/flush" <<'PY' || fail "cannot take the flush family out of cli/bench_util.c"
import ast, re, sys
src = open("cli/bench_util.c").read()
for var, name in (("flush_yaml", "l2_flush.yaml"), ("flush_cuh", "l2_flush.cuh")):
    body = re.search(r"static const char %s\[\] =\n(.*?);\n" % var, src, re.S).group(1)
    text = "".join(ast.literal_eval('"%s"' % lit) for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', body))
    open(sys.argv[1] + "/" + name, "w").write(text)
PY
	"$b/jitk" explain l2_read_flush --arch sm_90 --specs "$tmp/flush" | head -n 1 |
		grep -qx "l2_read_flush on sm_90: runs" || fail "the flush family does not run on sm_90"
	"$b/jitk" precompile --specs "$tmp/flush" --cache "$tmp/flush/c" --arch sm_90,sm_100 -j 1 \
		>"$tmp/flush.log" 2>&1 &&
		grep -q ": 2 compiled, 0 cached, 0 remote, 0 failed, 0 gated" "$tmp/flush.log" ||
		{ fail "the flush family does not compile"; cat "$tmp/flush.log"; }
fi

# the scripts the GPU machine runs parse, and bench/tune.py's spec rewrites
# still match the shipped specs (every variant loads and compiles)
if command -v python3 >/dev/null 2>&1; then
	python3 -c 'import ast, sys
for f in sys.argv[1:]:
    ast.parse(open(f).read(), f)' bench/*.py examples/*.py tests/python/*.py 2>"$tmp/pyc.log" ||
		{ fail "a Python script does not compile"; cat "$tmp/pyc.log"; }
	python3 bench/tune.py --check "$b" >"$tmp/tune.log" 2>&1 ||
		{ fail "bench/tune.py --check"; cat "$tmp/tune.log"; }
fi

# a failing step (a cache miss with compiling disabled), then one that passes
JITK_NO_COMPILE=1 OUT=$tmp/out JITK_BUILD=$b sh bench/device_run.sh "precompile" >"$tmp/fail.log" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "device_run.sh with a failing step exited $rc, not 1"
tail -n 1 "$tmp/fail.log" | grep -qx "device_run: failed: precompile" ||
	{ fail "device_run.sh did not name the failed step"; tail -5 "$tmp/fail.log"; }
JITK_PRECOMPILE_JOBS=2 OUT=$tmp/out JITK_BUILD=$b sh bench/device_run.sh "precompile" >"$tmp/pass.log" 2>&1
rc=$?
[ "$rc" = 0 ] || { fail "device_run.sh precompile on the CPU exited $rc"; tail -8 "$tmp/pass.log"; }
grep -q "^precompile rc=0$" "$tmp/pass.log" || fail "no 'precompile rc=0' line"
n=$(($(light_names "$b/jitk" specs | wc -l) * 2))
grep -q "$n compiled, 0 cached, 0 remote, 0 failed, 0 gated" "$tmp/pass.log" ||
	fail "the precompile step did not compile $n kernels (every instance but the GEMM's, sm_90 and sm_100)"
[ "$fails" = 0 ] || { echo "cli_bench_script: $fails failed"; exit 1; }
echo "bench script: parses, benchmarks the shipped specs, fails loudly: ok"
