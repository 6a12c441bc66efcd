#!/bin/sh
# build.sh - compile gemm_proto for sm_90a with nvcc, no GPU needed.
#
#   CUTLASS_DIR=DIR sh bench/gemm_proto/build.sh [-j N] [CONFIG...]
#
# CUTLASS_DIR: where `pip install --target DIR nvidia-cutlass==4.2.0.0`
# put the wheel (the headers are DIR/cutlass_library/source/include), or
# a CUTLASS checkout (DIR/include). Without it, python3's cutlass_library
# is tried. -j N: parallel compiles (default 2). Objects newer than the
# template and the harness headers are kept (FORCE=1 rebuilds them). CONFIG...: build only
# these configurations (names below); default all.
#
# Output in bench/gemm_proto/build/: gemm_proto (the binary to carry to
# the H200), one object and one ptxas log per configuration, and
# build.txt: compile seconds, registers/spills per kernel, cubin sizes
# and the count of WGMMA (HGMMA) and TMA (UTMALDG/UTMASTG) instructions.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$here/build
jobs=2

# name schedule scheduler tile_m tile_n tile_k cluster_m cluster_n stages fast_accum full
# full = 1: every epilogue; 0: none and bias only (mainloop sweep).
# Without fast accumulation the accumulators are kept twice (WGMMA's and
# the fp32 promotion target), so tiles of more than 128 x 192 per
# consumer warp group spill; with it, 128 x 256 fits.
CONFIGS='
coop_128x128_c2x1      cooperative persistent 128 128 128 2 1 0 false 1
coop_128x128_c1x2      cooperative persistent 128 128 128 1 2 0 false 0
coop_128x192_c1x1      cooperative persistent 128 192 128 1 1 0 false 1
pp_64x128_c1x1         pingpong    persistent  64 128 128 1 1 0 false 1
pp_64x192_c1x2         pingpong    persistent  64 192 128 1 2 0 false 0
coop_128x128_sk        cooperative stream_k   128 128 128 1 1 0 false 1
coop_128x256_c2x1_fa   cooperative persistent 128 256 128 2 1 0 true  1
coop_256x128_c1x2_fa   cooperative persistent 256 128 128 1 2 0 true  0
pp_128x128_c1x2_fa     pingpong    persistent 128 128 128 1 2 0 true  1
pp_64x256_c1x1_fa      pingpong    persistent  64 256 128 1 1 0 true  0
coop_128x256_sk_fa     cooperative stream_k   128 256 128 1 1 0 true  0
'

while [ $# -gt 0 ]; do
	case $1 in
	-j) jobs=$2; shift 2 ;;
	-j*) jobs=${1#-j}; shift ;;
	-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
	-*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done

find_cutlass() {
	if [ -n "${CUTLASS_INC:-}" ] && [ -f "$CUTLASS_INC/cutlass/cutlass.h" ]; then
		CUTLASS_UTIL=$(dirname "$CUTLASS_INC")/tools/util/include
		return 0
	fi
	d=${CUTLASS_DIR:-}
	if [ -z "$d" ]; then
		d=$(python3 -c 'import cutlass_library, os; print(os.path.dirname(os.path.dirname(cutlass_library.__file__)))' 2>/dev/null || true)
	fi
	for inc in "$d/cutlass_library/source/include" "$d/include" "$d/source/include"; do
		if [ -f "$inc/cutlass/cutlass.h" ]; then
			CUTLASS_INC=$inc
			CUTLASS_UTIL=$(dirname "$inc")/tools/util/include
			return 0
		fi
	done
	echo "build.sh: no CUTLASS headers: set CUTLASS_DIR (pip install --target DIR nvidia-cutlass==4.2.0.0)" >&2
	exit 2
}
find_cutlass
[ -f "$CUTLASS_UTIL/cutlass/util/packed_stride.hpp" ] || {
	echo "build.sh: no $CUTLASS_UTIL/cutlass/util/packed_stride.hpp" >&2; exit 2; }

NVCC=${NVCC:-nvcc}
FLAGS="-std=c++17 -O3 -arch=sm_90a -DNDEBUG --expt-relaxed-constexpr -Xptxas -v
 -I$root/templates -I$here -I$CUTLASS_INC -I$CUTLASS_UTIL"

compile_one() { # the fields of one CONFIGS line
	name=$1 sched=$2 scheduler=$3 tm=$4 tn=$5 tk=$6 cm=$7 cn=$8 stages=$9
	shift 9; fast=$1 full=$2
	o=$out/inst_$name.o
	if [ -z "${FORCE:-}" ] && [ -f "$o" ] && [ -f "$out/inst_$name.time" ]; then
		stale=
		for dep in "$root/templates/gemm_fp8.cuh" "$root/templates/common.cuh" \
			"$here/gemm_fp8_host.cuh" "$here/registry.h" "$here/instances.cu"; do
			[ "$dep" -nt "$o" ] && stale=1
		done
		[ -z "$stale" ] && { echo "up to date: $name"; return 0; }
	fi
	t0=$(date +%s)
	if nice $NVCC $FLAGS -DCFG_NAME=$name -DCFG_SCHED=$sched -DCFG_SCHEDULER=$scheduler \
		-DCFG_TM=$tm -DCFG_TN=$tn -DCFG_TK=$tk -DCFG_CM=$cm -DCFG_CN=$cn \
		-DCFG_STAGES=$stages -DCFG_FAST=$fast -DCFG_FULL=$full \
		-c "$here/instances.cu" -o "$out/inst_$name.o" > "$out/inst_$name.log" 2>&1; then
		echo "$name $(( $(date +%s) - t0 )) s" > "$out/inst_$name.time"
		echo "built $name in $(( $(date +%s) - t0 )) s"
	else
		echo "build.sh: $name failed, see $out/inst_$name.log" >&2
		tail -20 "$out/inst_$name.log" >&2
		exit 1
	fi
}

if [ "${1:-}" != "" ] && [ "${ONE:-}" = 1 ]; then
	compile_one "$@"
	exit 0
fi

mkdir -p "$out"
want="$*"
lines=$(echo "$CONFIGS" | while read -r name rest; do
	[ -n "$name" ] || continue
	if [ -z "$want" ] || echo " $want " | grep -q " $name "; then echo "$name $rest"; fi
done)
[ -n "$lines" ] || { echo "build.sh: no configuration matches: $want" >&2; exit 2; }

echo "$lines" | ONE=1 CUTLASS_INC="$CUTLASS_INC" xargs -P "$jobs" -L 1 sh "$0" ||
	{ echo "build.sh: a configuration failed" >&2; exit 1; }

t0=$(date +%s)
nice $NVCC $FLAGS -Xcompiler -fopenmp -c "$here/gemm_proto.cu" -o "$out/gemm_proto.o" \
	> "$out/gemm_proto.log" 2>&1 || { tail -30 "$out/gemm_proto.log" >&2; exit 1; }
echo "built gemm_proto.o in $(( $(date +%s) - t0 )) s"
objs=$(echo "$lines" | while read -r name rest; do echo "$out/inst_$name.o"; done)
cudalib=$(dirname "$(dirname "$(command -v "$NVCC")")")/lib64
$NVCC -arch=sm_90a -o "$out/gemm_proto" "$out/gemm_proto.o" $objs -lcublasLt \
	-Xcompiler -fopenmp -Xlinker -rpath -Xlinker "$cudalib"

# What was built: compile time, registers and spills, cubin size, instructions.
# CUOBJDUMP: cuobjdump to count the instructions (default: the one on PATH
# or next to nvcc; skipped when there is none).
set +e
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$(dirname "$(command -v "$NVCC")")/cuobjdump")}
{
	echo "# gemm_proto build: nvcc $($NVCC --version | tail -1), $(nproc) cores"
	cat "$out"/inst_*.time 2>/dev/null
	for f in "$out"/inst_*.log; do
		n=$(basename "$f" .log)
		awk -v n="$n" '/Compiling entry function/ { k=$0; sub(/.*gemm_fp8I/, "", k); sub(/EEvN.*/, "", k) }
			/spill stores/ { s=$0 } /Used [0-9]+ registers/ { print n, k ":", $0, "|", s }' "$f" |
			sed -e 's/1PILNS_12GemmEpilogueE0ELb0ELb0EEE/ none/' -e 's/1PILNS_12GemmEpilogueE1ELb1ELb0EEE/ bias/' \
			    -e 's/1PILNS_12GemmEpilogueE2ELb1ELb0EEE/ gelu_tanh_fp8/' \
			    -e 's/1PILNS_12GemmEpilogueE2ELb1ELb1EEE/ gelu_tanh_fp8+out/' \
			    -e 's/1PILNS_12GemmEpilogueE3ELb1ELb0EEE/ gate_residual/' -e 's/ptxas info    : //'
	done
	if [ -x "$CUOBJDUMP" ]; then
		for o in $objs; do
			rm -rf "$out/elf" && mkdir -p "$out/elf"
			(cd "$out/elf" && "$CUOBJDUMP" -xelf all "$o" > /dev/null 2>&1)
			"$CUOBJDUMP" -sass "$o" > "$out/sass.txt" 2>/dev/null
			printf '%s: cubin %s bytes (%s kernels), QGMMA (WGMMA e4m3) %s, UTMALDG %s, UTMASTG %s\n' \
				"$(basename "$o")" "$(cat "$out"/elf/*.cubin 2>/dev/null | wc -c)" \
				"$(grep -c 'Function : ' "$out/sass.txt")" \
				"$(grep -c 'QGMMA' "$out/sass.txt")" "$(grep -c 'UTMALDG' "$out/sass.txt")" \
				"$(grep -c 'UTMASTG' "$out/sass.txt")"
		done
		rm -rf "$out/elf" "$out/sass.txt"
	else
		echo "(no cuobjdump: instruction counts skipped; set CUOBJDUMP)"
	fi
	ls -l "$out/gemm_proto" | awk '{ print "binary", $5, "bytes" }'
} > "$out/build.txt"
cat "$out/build.txt"
