#!/bin/sh
# tests/cli.sh BUILD_DIR - the jitk command used carelessly or with
# hostile arguments. Every usage error (unknown option, missing or extra
# argument, malformed architecture, bad -j) exits 2 and says what was
# wrong on its first line, before the usage text; an unknown symbol exits
# 1 with a "did you mean"; nothing crashes or hangs. And the naming rule:
# a bare symbol selects all its instances, selectors name some, source
# needs exactly one; precompile's progress and summary lines.
set -u
b=${1:-build}
jitk=$b/jitk
specs=specs
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0 fails=0

# expect RC FIRST_LINE ARGS...: jitk ARGS exits RC and the first line of
# its stderr is FIRST_LINE exactly.
expect() {
	want=$1 line=$2
	shift 2
	n=$((n + 1))
	timeout 60 "$jitk" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	got=$(head -n 1 "$tmp/err")
	if [ "$rc" != "$want" ] || [ "$got" != "$line" ]; then
		echo "FAIL: jitk $* -> exit $rc (want $want)"
		echo "  want: $line"
		echo "  got:  $got"
		fails=$((fails + 1))
	fi
}

usage_list=$("$jitk" list --help | head -n 1)
# usage errors: the message, then the usage text, exit 2
expect 2 "jitk: unexpected argument 'extra'" list static_quant_fp8 extra
[ "$(sed -n 2p "$tmp/err")" = "$usage_list" ] || { echo "FAIL: list NAME extra: no usage after the message"; fails=$((fails + 1)); }
expect 2 "jitk: unknown option '-s'" list -s x
expect 2 "jitk: unknown option '--spec' (did you mean '--specs'?)" list --spec specs
expect 2 "jitk: unknown option '--arch'" list --arch sm_90
expect 2 "jitk: missing COMMAND"
expect 2 "jitk: unknown command 'frob'" frob
expect 2 "jitk: unknown command 'lst' (did you mean 'list'?)" lst
expect 2 "jitk: unknown option '--frob'" --frob
expect 2 "jitk: unexpected argument 'x'" --version x
expect 2 "jitk: missing symbol NAME" explain --arch sm_90 --specs $specs
expect 2 "jitk: unexpected argument 'b'" explain a b --arch sm_90 --specs $specs
expect 2 "jitk: missing --arch ARCH" explain static_quant_fp8 --specs $specs
expect 2 "jitk: option '--arch' needs a value" explain static_quant_fp8 --arch
expect 2 "jitk: 'sm_9x' is not an architecture (sm_90, sm_100a, compute_90...)" \
	explain static_quant_fp8 --arch sm_9x --specs $specs
expect 2 "jitk: '' is not an architecture (sm_90, sm_100a, compute_90...)" \
	explain static_quant_fp8 --arch= --specs $specs
expect 2 "jitk: 'sm_90;rm -rf ~' is not an architecture (sm_90, sm_100a, compute_90...)" \
	explain static_quant_fp8 --arch 'sm_90;rm -rf ~' --specs $specs
# (issue 22 #19: a newline in it is quoted, the message stays one line)
nl='
'
expect 2 "jitk: 'sm_90\\n' is not an architecture (sm_90, sm_100a, compute_90...)" \
	explain static_quant_fp8 --arch "sm_90$nl" --specs $specs
expect 2 "jitk: 'sm_90\\n' is not an architecture (sm_90, sm_100a, compute_90...)" \
	precompile --arch "sm_100,sm_90$nl" --specs $specs --cache "$tmp/c"
expect 2 "jitk: missing --arch ARCH" source static_quant_fp8 --specs $specs
expect 2 "jitk: option '--options' takes no value" source static_quant_fp8 --arch sm_90 --options=yes
expect 2 "jitk: 'compute_' is not an architecture (sm_90, sm_100a, compute_90...)" \
	source static_quant_fp8 --arch compute_ --specs $specs
expect 2 "jitk: unknown option '--max-bytes'" precompile --max-bytes 5
for j in abc 0 -3 99999999999 '' 4x ' 4' 1025; do
	expect 2 "jitk: -j '$j' is not a number from 1 to 1024" precompile -j "$j" --specs $specs
done
expect 2 "jitk: -j 'x' is not a number from 1 to 1024" precompile -jx --specs $specs
expect 2 "jitk: -j '0' is not a number from 1 to 1024" precompile --jobs=0 --specs $specs
expect 2 "jitk: empty architecture in 'sm_90,,sm_100'" precompile --arch sm_90,,sm_100 --specs $specs
expect 2 "jitk: empty architecture in 'sm_90,'" precompile --arch sm_90, --specs $specs
expect 2 "jitk: 'sm_80x' is not an architecture (sm_90, sm_100a, compute_90...)" \
	precompile --arch sm_90,sm_80x --specs $specs
long=$(head -c 300 /dev/zero | tr '\0' 9)
expect 2 "jitk: 'sm_99999999999999999999...' is not an architecture (sm_90, sm_100a, compute_90...)" \
	precompile --arch "sm_$long" --specs $specs

# unknown symbols: exit 1, with the nearest name
expect 1 "jitk: no symbol named 'fused_norm_scale_shif' (did you mean 'fused_norm_scale_shift'? see jitk list)" \
	explain fused_norm_scale_shif --arch sm_90 --specs $specs
expect 1 "jitk: no symbol named 'static_quant' (did you mean 'static_quant_fp8'? see jitk list)" \
	source static_quant --arch sm_90 --specs $specs
expect 1 "jitk: no symbol named 'static_quant_fp9' (did you mean 'static_quant_fp8'? see jitk list)" \
	precompile static_quant_fp9 --arch sm_90 --specs $specs --cache "$tmp/c"
expect 1 "jitk: no symbol named 'zzz' (see jitk list)" explain zzz --arch sm_90 --specs $specs
expect 1 "jitk: no symbol named 'extra' (see jitk list)" list extra --specs $specs
# malformed and ambiguous selectors: exit 1, saying what is wrong
expect 1 "jitk: 'static_quant_fp8[': column 18: expected param=value after '[' (a selector is symbol[param=value,...])" \
	explain 'static_quant_fp8[' --arch sm_90 --specs $specs
# (issue 22 #7: nothing after the ']' is ignored; the selector is quoted
# with a caret under the column)
expect 1 "jitk: 'copy_heads[head_dim=64][head_dim=128]': column 24: unexpected text after the selector's ']' (a selector is symbol[param=value,...])" \
	list 'copy_heads[head_dim=64][head_dim=128]' --specs $specs
[ "$(sed -n 3p "$tmp/err")" = "      |                        ^" ] ||
	{ echo "FAIL: a malformed selector's caret"; cat "$tmp/err"; fails=$((fails + 1)); }
expect 1 "jitk: 'fused_norm_scale_shift_fp8' names 3 instances; name one: fused_norm_scale_shift_fp8[hidden=3072], fused_norm_scale_shift_fp8[hidden=1536], fused_norm_scale_shift_fp8[hidden=5120]" \
	source fused_norm_scale_shift_fp8 --arch sm_90 --specs $specs
# a 100 kB name and one with terminal escapes: refused, no crash; the
# message quotes the first 96 bytes and escapes control characters
big=$(head -c 100000 /dev/zero | tr '\0' a)
expect 1 "jitk: no symbol named '$(head -c 96 /dev/zero | tr '\0' a)...' (see jitk list)" \
	explain "$big" --arch sm_90 --specs $specs
# (the symbol's name ends where a selector's '[' starts)
esc=$(printf 'x\033[2J')
expect 1 "jitk: no symbol named 'x\\x1b' (see jitk list)" explain "$esc" --arch sm_90 --specs $specs

# 3000 names (more than any fixed table): each instance once
set --
i=0
while [ $i -lt 3000 ]; do
	set -- "$@" static_quant_fp8
	i=$((i + 1))
done
n=$((n + 1))
"$jitk" precompile "$@" --arch sm_90 --specs $specs --cache "$tmp/c" -j 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" != 0 ] || ! grep -q "precompiled 1 symbols x 1 architectures .*: 1 compiled, 0 cached, 0 remote, 0 failed, 0 gated" "$tmp/out"; then
	echo "FAIL: precompile with 3000 names: exit $rc"
	sed 's/^/  | /' "$tmp/out" "$tmp/err" | tail -5
	fails=$((fails + 1))
fi
# -jN and --jobs=N are accepted
n=$((n + 1))
if ! "$jitk" precompile static_quant_fp8 --arch sm_90 --specs $specs --cache "$tmp/c" -j4 >"$tmp/out" 2>&1 ||
	! grep -q ": 0 compiled, 1 cached, 0 remote, 0 failed, 0 gated" "$tmp/out"; then
	echo "FAIL: precompile -j4"
	fails=$((fails + 1))
fi

# names: a bare symbol selects all its instances, a selector those it names
# has_lines NAME FILE WANT: FILE's lines are exactly WANT.
has_lines() {
	n=$((n + 1))
	if [ "$(cat "$2")" != "$3" ]; then
		echo "FAIL: $1:"
		sed 's/^/  | /' "$2" | head -20
		fails=$((fails + 1))
	fi
}
"$jitk" list 'fused_norm_scale_shift_fp8[hidden=1536]' --specs $specs | awk '{ print $1, $NF }' >"$tmp/out"
has_lines "list with a selector" "$tmp/out" "NAME GATES
fused_norm_scale_shift_fp8[hidden=1536] sm_89+,sm_90+"
# every instance: as many lines as the symbols' own lists add up to
"$jitk" list --specs $specs | awk 'NR > 1 { print $1 }' >"$tmp/all"
for s in $(sed 's/\[.*//' "$tmp/all" | sort -u); do
	"$jitk" list "$s" --specs $specs | awk 'NR > 1 { print $1 }'
done | sort >"$tmp/each"
sort "$tmp/all" | cmp -s - "$tmp/each" && echo same >"$tmp/out" || echo differ >"$tmp/out"
has_lines "list: every instance, once, as the symbols list them" "$tmp/out" "same"
"$jitk" explain fused_norm_scale_shift_fp8 --arch sm_90 --specs $specs | grep ' on ' >"$tmp/out"
has_lines "explain of a bare name" "$tmp/out" "fused_norm_scale_shift_fp8[hidden=3072] on sm_90: runs
fused_norm_scale_shift_fp8[hidden=1536] on sm_90: runs
fused_norm_scale_shift_fp8[hidden=5120] on sm_90: runs"
"$jitk" source 'fused_norm_scale_shift_fp8[hidden=1536]' --arch sm_90 --specs $specs --options |
	tail -n 1 >"$tmp/out"
has_lines "source --options of one instance" "$tmp/out" \
	"name-expression jitk::norm_scale_shift<fused_norm_scale_shift_fp8_hidden_1536>"
"$jitk" precompile fused_norm_scale_shift_fp8 'fused_norm_scale_shift[hidden=5120]' \
	'fused_norm_scale_shift_fp8[hidden=1536]' --arch sm_90 --specs $specs --cache "$tmp/c" -j 2 |
	grep -v '^precompiled' | sed 's/^\[[0-9]*\/[0-9]*\] //' | sort >"$tmp/out"
has_lines "precompile with selectors (each instance once)" "$tmp/out" "compiled fused_norm_scale_shift[hidden=5120] sm_90
compiled fused_norm_scale_shift_fp8[hidden=1536] sm_90
compiled fused_norm_scale_shift_fp8[hidden=3072] sm_90
compiled fused_norm_scale_shift_fp8[hidden=5120] sm_90"
# a compile whose cache entry cannot be written counts as compiled, and says so
c2=$tmp/c2
"$jitk" precompile static_quant_fp8 --arch sm_90 --specs $specs --cache "$c2" -j 1 >/dev/null
entry=$(find "$c2/v1" -name '*.jitk')
"$jitk" cache clear --cache "$c2" >/dev/null
rmdir "$(dirname "$entry")"
: >"$(dirname "$entry")"
"$jitk" precompile static_quant_fp8 --arch sm_90 --specs $specs --cache "$c2" -j 1 >"$tmp/out" 2>"$tmp/err"
sed 's/ in [0-9.]* s / in T s /' "$tmp/out" >"$tmp/out2"
has_lines "precompile, the cache not written" "$tmp/out2" "[1/1] compiled static_quant_fp8 sm_90 (in memory only: not written to the cache)
precompiled 1 symbols x 1 architectures (sm_90) into $c2 in T s with 1 processes: 1 compiled, 0 cached, 0 remote, 0 failed, 0 gated"
grep -q "^jitk: warning: cannot write cache entry $entry" "$tmp/err" ||
	{ echo "FAIL: no warning naming the entry that could not be written"; fails=$((fails + 1)); }
"$jitk" --version | sed 's/NVRTC [0-9]*\.[0-9]*/NVRTC N.N/' >"$tmp/out"
has_lines "--version" "$tmp/out" "jitk $(sed -n 's/^#define JITK_VERSION "\(.*\)"/\1/p' runtime/include/jitk/version.h) (NVRTC N.N, cache format $(sed -n 's/^#define JITK_CACHE_FORMAT \([0-9]*\).*/\1/p' runtime/store/cache.h))"

# bench: its usage errors come before it looks for a GPU
expect 2 "jitk: option '--rows' needs a value" bench --rows
expect 2 "jitk: --rows '1,x' is not a list of numbers from 1 to 16777216" bench --rows 1,x
expect 2 "jitk: --rows '1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17' has more than 16 numbers" \
	bench --rows 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
expect 2 "jitk: --hidden '99999999999' is not a list of numbers from 8 to 65536" bench --hidden 99999999999
expect 2 "jitk: --reps '4' is not a number from 5 to 100000" bench --reps 4
expect 2 "jitk: --reps '99999999999' is not a number from 5 to 100000" bench --reps 99999999999
expect 2 "jitk: unknown option '--frob'" bench --frob
expect 2 "jitk: unexpected argument 'x'" bench x
usage_bench=$("$jitk" bench --help | head -n 1)
expect 2 "jitk: --family 'nope' is not one of norm, axes, qk, all: no family 'nope' in the specs (did you mean 'rope'?)" bench --family nope
[ "$(sed -n 2p "$tmp/err")" = "$usage_bench" ] ||
	{ echo "FAIL: bench --family nope: no usage after the message"; fails=$((fails + 1)); }
expect 2 "jitk: --family 'tma_cop' is not one of norm, axes, qk, all: no family 'tma_cop' in the specs (did you mean 'tma_copy'?)" bench --family tma_cop
expect 1 "jitk bench: family rope declares no benchmark cases (its spec has no bench key: docs/spec-format.md)" bench --family rope
expect 2 "jitk: option '--family' needs a value" bench --family
expect 2 "jitk: option '--heads' does not apply to --family norm" bench --heads 24,24
expect 2 "jitk: option '--rows' does not apply to --family qk" bench --family qk --rows 128
expect 2 "jitk: option '--programmatic' does not apply to --family axes" bench --family axes --programmatic
expect 2 "jitk: --heads '24' is not HQ,HK (two numbers)" bench --family qk --heads 24
expect 2 "jitk: --heads '24,24,8' has more than 2 numbers" bench --family qk --heads 24,24,8
expect 2 "jitk: --family axes needs even --rows (two batches), not 4097" bench --family axes --rows 4096,4097
expect 2 "jitk: --family all needs even --rows (two batches), not 1" bench --family all --rows 1
n=$((n + 1))
if "$jitk" bench --help | grep -q "bench/run"; then
	echo "FAIL: jitk bench --help names bench/run, which does not exist"
	fails=$((fails + 1))
fi

# bench where no GPU is visible: every family says it needs one, as the
# norm's always did, exit 1, and prints nothing on stdout
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES
nogpu=$("$jitk" bench 2>&1 >/dev/null | head -n 1)
n=$((n + 1))
case $nogpu in
"jitk bench: needs a GPU: "*) ;;
*) echo "FAIL: jitk bench without a GPU said '$nogpu'"; fails=$((fails + 1)) ;;
esac
for f in norm axes qk all; do
	expect 1 "$nogpu" bench --family $f --reps 5
	[ -s "$tmp/out" ] && { echo "FAIL: jitk bench --family $f without a GPU printed on stdout"; fails=$((fails + 1)); }
done
expect 1 "$nogpu" bench --family qk --heads 12,4 --specs $specs
expect 1 "$nogpu" bench --family axes --rows 128,4096 --hidden 3072
unset CUDA_VISIBLE_DEVICES

# The default specs (next to the library: build/../specs) are named by
# their real path in messages, not "build/../specs/x.yaml".
n=$((n + 1))
got=$(env -u JITK_SPECS "$jitk" explain fused_norm_scale_shift_fp8 --arch sm_89 2>&1 | grep -m 1 'reason:')
case $got in
*"/../"*) echo "FAIL: explain names a spec path with '..': $got"; fails=$((fails + 1)) ;;
*"[$(pwd -P)/specs/norm_scale_shift.yaml:"*) ;;
*) echo "FAIL: explain's gate reason names no spec path under $(pwd -P)/specs: $got"; fails=$((fails + 1)) ;;
esac

# Every build/PROGRAM the README's examples run is built by its two
# commands (ninja cache, ninja test): build/qwen_block was built by neither.
ninja=$(command -v ninja || command -v ninja-build || true)
if [ -n "$ninja" ] && cmds=$("$ninja" -t commands cache test 2>/dev/null); then
	for prog in $(sed -n 's|^build/\([a-z_]*\) .*|\1|p' README.md | sort -u); do
		n=$((n + 1))
		printf '%s\n' "$cmds" | grep -q -- "-o $b/$prog\( \|\$\)" ||
			{ echo "FAIL: README runs build/$prog, which neither ninja cache nor ninja test builds"; fails=$((fails + 1)); }
	done
fi

# What the README's examples write (-o FILE) lands where git ignores it, not
# as an untracked file in the source tree (kernels.jitkb did).
if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
	for out in $(sed -n 's|^build/.* -o \([^ ]*\).*|\1|p' README.md); do
		n=$((n + 1))
		git check-ignore -q "$out" ||
			{ echo "FAIL: the README's example writes $out, which git does not ignore"; fails=$((fails + 1)); }
	done
fi

[ "$fails" = 0 ] || { echo "cli: $fails of $n invocations failed"; exit 1; }
echo "cli: $n invocations: hostile ones refused with the right message and status, names as documented"
