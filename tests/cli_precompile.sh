#!/bin/sh
# tests/cli_precompile.sh BUILD_DIR - how jitk precompile counts and
# reports: only a gate is "gated" (exit 0); a failed compile or a cache
# miss under JITK_NO_COMPILE is "failed", with its message, exit 1; and a
# worker process that dies (here: SIGKILLed by this test while NVRTC works
# on a slow template) makes the parent name the item and the reason, count
# it failed, and finish the other items.
set -u
b=${1:-build}
jitk=$(pwd)/$b/jitk
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-cli-pre-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/shlib"

mkdir -p "$tmp/specs"
# A template the test can make slow: 2^D inlined copies of a small body
# (D=16 keeps NVRTC busy for many seconds; the test never waits for it).
cat >"$tmp/specs/t.cuh" <<'EOF'
#pragma once
namespace clit {
template <int D> struct tree {
	__device__ __forceinline__ static float f(float x, float y)
	{
		return tree<D - 1>::f(x * 1.0001f + y, y) * tree<D - 1>::f(__sinf(x), y + 1.0f);
	}
};
template <> struct tree<0> {
	__device__ __forceinline__ static float f(float x, float y) { return __cosf(x * y); }
};
template <class P>
__global__ void k(float *out, long long n)
{
	out[threadIdx.x] = tree<P::depth>::f(out[threadIdx.x], (float)n);
}
}
EOF
family() { # NAME DEPTH [GATE]
	gates=
	[ -z "${3:-}" ] || gates=$(printf 'gates:\n  - arch: { min: %s }\n    reason: this test gates it' "$3")
	cat <<EOF
family: $1
template: t.cuh
kernel: clit::k
params: {}
$gates
tuning:
  - { depth: $2 }
args:
  out: { type: f32, shape: [n] }
  n: { type: i64 }
launch:
  grid: 1
  block: 32
symbols:
  $1: { params: {} }
EOF
}
family slow 16 >"$tmp/specs/slow.yaml"
family quick 1 sm_90 >"$tmp/specs/quick.yaml"
mkdir -p "$tmp/broken"
family broken 1 | sed 's/template: t.cuh/template: broken.cuh/' >"$tmp/broken/broken.yaml"
printf 'namespace clit { this is not C++ }\n' >"$tmp/broken/broken.cuh"
family quick 1 sm_90 | sed "s|template: t.cuh|template: $tmp/specs/t.cuh|" >"$tmp/broken/quick.yaml"

# run NAME ARGS...: jitk precompile with stdout in NAME.out, stderr in
# NAME.err, exit status in $rc.
run() {
	n=$1
	shift
	"$jitk" precompile "$@" >"$tmp/$n.out" 2>"$tmp/$n.err"
	rc=$?
}

# --- counting: gated, failed (compile error), compiled
run count --specs "$tmp/broken" --cache "$tmp/c1" --arch sm_80,sm_90 -j 2
[ "$rc" = 1 ] || fail "a failed compile: exit $rc, not 1"
has "$tmp/count.out" "1 compiled, 0 cached, 0 remote, 2 failed, 1 gated"
has "$tmp/count.out" "FAILED   broken sm_80"
has "$tmp/count.out" "FAILED   broken sm_90"
has "$tmp/count.out" "gated    quick sm_80"
has "$tmp/count.err" "jitk: compiling broken () for sm_90 failed:"
has "$tmp/count.err" "jitk: compiling broken () for sm_80 failed:"
# only gates: exit 0
run gated quick --specs "$tmp/broken" --cache "$tmp/c1" --arch sm_80,sm_89
[ "$rc" = 0 ] || fail "only gated items: exit $rc, not 0"
has "$tmp/gated.out" "0 compiled, 0 cached, 0 remote, 0 failed, 2 gated"
# a miss with compiling disabled is a failure, named
JITK_NO_COMPILE=1 run nocomp quick --specs "$tmp/broken" --cache "$tmp/c2" --arch sm_90
[ "$rc" = 1 ] || fail "JITK_NO_COMPILE miss: exit $rc, not 1"
has "$tmp/nocomp.out" "0 compiled, 0 cached, 0 remote, 1 failed, 0 gated"
has "$tmp/nocomp.err" "quick for sm_90 is not in the cache"

# --- size classes that tune alike: one translation unit, compiled once
# (each pair is next in spec order; the workers take the second of each
# last, when it is a cache hit instead of a wait on the lock)
mkdir -p "$tmp/sizes"
family sz 1 | sed -e "s|template: t.cuh|template: $tmp/specs/t.cuh|" \
	-e 's|^params: {}|params:\n  wide: { type: bool }\n  mclass: { type: int, values: [512, 4096], size_of: n }|' \
	-e 's|^  - { depth: 1 }|&\n  - when: { wide: [true] }\n    depth: 2|' \
	-e 's|^  sz: { params: {} }|  sz: { params: { wide: [false, true], mclass: [512, 4096] } }|' \
	>"$tmp/sizes/sz.yaml"
# (and no more workers than units: two, though four were allowed)
run sizes sz --specs "$tmp/sizes" --cache "$tmp/c4" --arch sm_90 -j 4
[ "$rc" = 0 ] || fail "size classes: exit $rc"
has "$tmp/sizes.out" "with 2 processes: 2 compiled, 2 cached, 0 remote, 0 failed, 0 gated"
for i in "sz[wide=false,mclass=512]" "sz[wide=false,mclass=4096]" "sz[wide=true,mclass=512]" \
	"sz[wide=true,mclass=4096]"; do
	[ "$(grep -cF " $i sm_90" "$tmp/sizes.out")" = 1 ] || fail "size classes: $i not reported once"
done

# --- a worker that dies
# children PID: the pids of PID's children.
children() {
	parent=$1
	for f in /proc/[0-9]*/stat; do
		s=$(cat "$f" 2>/dev/null) || continue
		rest=${s##*) } # after "pid (comm) ": state ppid ...
		# shellcheck disable=SC2086
		set -- $rest
		[ "${2:-}" = "$parent" ] || continue
		p=${f#/proc/}
		echo "${p%/stat}"
	done
}
# kill_worker NAME OUTFILE (in the background): wait (at most 60 s) until
# NAME's source was dumped (its worker is compiling it) and every other
# item was reported, then SIGKILL the workers still running (only NAME's
# is left). Creates $tmp/nokill when that moment never came.
kill_worker() {
	i=0
	while [ $i -lt 600 ] && kill -0 "$pid" 2>/dev/null; do
		if ls "$tmp/dump/$1".sm_90.*.cu >/dev/null 2>&1 &&
			grep -q "compiled quick sm_90" "$2"; then
			for c in $(children "$pid"); do kill -KILL "$c" 2>/dev/null; done
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	: >"$tmp/nokill"
	kill -KILL "$pid" 2>/dev/null
}

for jobs in 2 1; do
	rm -rf "$tmp/dump" "$tmp/c3"
	# -j 1: the one worker takes slow first (spec order), dies, and a new
	# worker is started for quick; -j 2: the other worker builds quick.
	JITK_DUMP_DIR=$tmp/dump "$jitk" precompile slow quick --specs "$tmp/specs" --cache "$tmp/c3" \
		--arch sm_90 -j $jobs >"$tmp/die$jobs.out" 2>"$tmp/die$jobs.err" &
	pid=$!
	kill_worker slow "$tmp/die$jobs.out" &
	killer=$!
	wait $pid
	rc=$?
	wait $killer
	[ ! -e "$tmp/nokill" ] || fail "-j $jobs: the worker compiling slow never showed up"
	[ "$rc" = 1 ] || fail "-j $jobs, a worker killed: exit $rc, not 1"
	has "$tmp/die$jobs.err" "jitk: worker killed by signal 9 (Killed) while compiling slow for sm_90"
	has "$tmp/die$jobs.out" "FAILED   slow sm_90"
	has "$tmp/die$jobs.out" "1 compiled, 0 cached, 0 remote, 1 failed, 0 gated"
done

[ "$fails" = 0 ] || { echo "cli_precompile: $fails failed"; exit 1; }
echo "cli_precompile: counting, failures and dead workers: ok"
