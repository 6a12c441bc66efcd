#!/bin/sh
# tests/gemm.sh BUILD_DIR - the FP8 GEMM family (specs/gemm_fp8.yaml) with
# no GPU: explain shows its builder, its size classes on sm_90a and
# sm_100a and its gate on sm_120; one NVRTC precompile of gemm_fp8_bias
# for sm_90a and one for sm_100a, side by side (about a minute and 3.4 GB
# each), whose cache entries have the kernel and its parameter builder
# and serve the N class that tunes alike too (one translation unit);
# the sm_100a cubin's SASS has tcgen05's instructions and no local memory
# (with cuobjdump; skipped, saying so, without it); then
# tests/gemm_checks.c over that cache on the fake device as an sm_90 and
# as an sm_100 GPU (launch checks name the argument before any launch,
# M = 0 launches nothing, a good call launches the built block). The
# sm_100a instance has never run on a GPU: this is all it is checked by.
set -eu
b=${1:-build}
jitk=$b/jitk
t0=$(date +%s)
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-gemm-XXXXXX")
trap 'rm -rf "$w"' EXIT
if ! "$jitk" explain gemm_fp8_bias --arch sm_90a --specs specs >"$w/explain.txt" 2>&1; then
	if grep -q "header package cutlass" "$w/explain.txt"; then
		echo "skip: no cutlass header package here ($(head -1 "$w/explain.txt"))"
		exit 77
	fi
	cat "$w/explain.txt"
	exit 1
fi
# the size classes: M > 512 takes 128 x 192 tiles whatever N (both N
# classes: one kernel); M <= 512 128 x 96 over a 1 x 2 cluster (A's box is
# half a tile: each CTA multicasts its half), and with N > 9216 128 x 192
# over a 2 x 1 (B's box half a tile)
sed -n '/^gemm_fp8_bias\[mclass=65536,nclass=9216\]/,/^$/p' "$w/explain.txt" >"$w/big.txt"
sed -n '/^gemm_fp8_bias\[mclass=65536,nclass=65536\]/,/^$/p' "$w/explain.txt" >"$w/bigwide.txt"
sed -n '/^gemm_fp8_bias\[mclass=512,nclass=9216\]/,/^$/p' "$w/explain.txt" >"$w/small.txt"
sed -n '/^gemm_fp8_bias\[mclass=512,nclass=65536\]/,/^$/p' "$w/explain.txt" >"$w/smallwide.txt"
for f in big bigwide; do
	grep -q "^  kernel:   jitk::gemm_fp8<gemm_fp8_bias_mclass_65536>$" "$w/$f.txt"
	grep -q "^  builder:  jitk::gemm_fp8_params<gemm_fp8_bias_mclass_65536> " "$w/$f.txt"
	grep -q "tile_n=192 .*cluster_m=1 cluster_n=1 .*sm100=0 block_threads=384 " "$w/$f.txt"
done
# explain says which instances are one translation unit: M > 512's three
# N classes; at M <= 512 the first two (they tune alike, named for the
# first), not the third
grep -qF "shares:   gemm_fp8_bias[mclass=65536,nclass=3072], gemm_fp8_bias[mclass=65536,nclass=65536] (one translation unit" "$w/big.txt"
grep -qF "shares:   gemm_fp8_bias[mclass=65536,nclass=3072], gemm_fp8_bias[mclass=65536,nclass=9216] (one translation unit" "$w/bigwide.txt"
grep -qF "shares:   gemm_fp8_bias[mclass=512,nclass=3072] (one translation unit" "$w/small.txt"
if grep -q "shares:" "$w/smallwide.txt"; then echo "gemm_fp8_bias[mclass=512,nclass=65536] shares a unit?"; exit 1; fi
grep -q "b_map .*box \[192, 128\], swizzle 128" "$w/big.txt"
grep -q "a_map .*box \[128, 128\], swizzle 128" "$w/big.txt"
grep -q "^  kernel:   jitk::gemm_fp8<gemm_fp8_bias_mclass_512_nclass_3072>$" "$w/small.txt"
grep -q "tile_n=96 .*cluster_m=1 cluster_n=2 " "$w/small.txt"
grep -q "a_map .*box \[64, 128\], swizzle 128" "$w/small.txt"
grep -q "b_map .*box \[96, 128\], swizzle 128" "$w/small.txt"
grep -q "^  kernel:   jitk::gemm_fp8<gemm_fp8_bias_mclass_512_nclass_65536>$" "$w/smallwide.txt"
grep -q "tile_n=192 .*cluster_m=2 cluster_n=1 " "$w/smallwide.txt"
grep -q "a_map .*box \[128, 128\], swizzle 128" "$w/smallwide.txt"
grep -q "b_map .*box \[96, 128\], swizzle 128" "$w/smallwide.txt"
# sm_100a: the 1-SM UMMA kernel, 128 x 256 tiles (M <= 512: 128 x 128),
# no cluster in either class, 256 threads
"$jitk" explain gemm_fp8_bias --arch sm_100a --specs specs >"$w/explain100.txt" 2>&1 ||
	{ cat "$w/explain100.txt"; exit 1; }
# (the N class tunes nothing there: one kernel per M class)
sed -n '/^gemm_fp8_bias\[mclass=65536,nclass=9216\]/,/^$/p' "$w/explain100.txt" >"$w/big100.txt"
sed -n '/^gemm_fp8_bias\[mclass=512,nclass=65536\]/,/^$/p' "$w/explain100.txt" >"$w/small100.txt"
grep -q "^  target:   sm_100a$" "$w/big100.txt"
grep -q "tile_n=256 .*cluster_m=1 cluster_n=1 .*sm100=1 block_threads=256 " "$w/big100.txt"
grep -q "b_map .*box \[256, 128\], swizzle 128" "$w/big100.txt"
grep -q "^  kernel:   jitk::gemm_fp8<gemm_fp8_bias_mclass_65536>$" "$w/big100.txt"
grep -q "tile_n=128 .*cluster_m=1 cluster_n=1 .*sm100=1 " "$w/small100.txt"
grep -q "a_map .*box \[128, 128\], swizzle 128" "$w/small100.txt"
grep -q "^  kernel:   jitk::gemm_fp8<gemm_fp8_bias_mclass_512>$" "$w/small100.txt"
# sm_120 (consumer Blackwell) has no tcgen05: gated, with the reason
if "$jitk" explain gemm_fp8 --arch sm_120 --specs specs >"$w/gate.txt" 2>&1; then
	echo "gemm_fp8 runs on sm_120?"
	exit 1
fi
grep -q "sm_120 has no tcgen05" "$w/gate.txt"
# the epilogue's descriptors: 32-column boxes (64-byte swizzle for bf16);
# a tile whose columns are not a multiple of 32 (144, on a copy of the
# spec) takes 16-column ones, swizzled as CUTLASS lays out 32-byte bf16
# and 16-byte e4m3 rows (32 bytes, none); one that is not a multiple of
# 16 is refused at the spec's constraint
grep -q "out_map .*box \[128, 32\], swizzle 64" "$w/big.txt"
mkdir -p "$w/t"
cp -R specs templates "$w/t/"
sed 's/^    tile_n: 96$/    tile_n: 144/' specs/gemm_fp8.yaml >"$w/t/specs/gemm_fp8.yaml"
"$jitk" explain 'gemm_fp8_gelu_tanh_fp8_out[mclass=512,nclass=9216]' --arch sm_90a --specs "$w/t/specs" >"$w/x144.txt" 2>&1 ||
	{ cat "$w/x144.txt"; exit 1; }
grep -q "tile_n=144 .*epi_n=16 " "$w/x144.txt"
grep -q "b_map .*box \[144, 128\], swizzle 128" "$w/x144.txt"
grep -q "out_map .*box \[128, 16\], swizzle 32," "$w/x144.txt"
grep -q "q_map .*box \[128, 16\], swizzle 0," "$w/x144.txt"
sed 's/^    tile_n: 96$/    tile_n: 136/' specs/gemm_fp8.yaml >"$w/t/specs/gemm_fp8.yaml"
if "$jitk" explain 'gemm_fp8[mclass=512]' --arch sm_90a --specs "$w/t/specs" >"$w/x136.txt" 2>&1; then
	echo "a 136-column tile was taken"
	exit 1
fi
grep -q "tiles are 16-column multiples" "$w/x136.txt"
# split-K (scheduler 1) at M <= 512: the runtime's scratch, sized by the
# spec; 17 splits are refused at the constraint
cp specs/gemm_fp8.yaml "$w/t/specs/gemm_fp8.yaml"
printf '  - when: { mclass: [512] }\n    scheduler: 1\n    splits: 2\n    tile_n: 192\n    cluster_m: 2\n    cluster_n: 1\n' >"$w/sk.txt"
sed -i "/^  - when: { mclass: \[512\], nclass: \[65536\] }$/{
r $w/sk.txt
N
}" "$w/t/specs/gemm_fp8.yaml"
"$jitk" explain 'gemm_fp8_bias[mclass=512,nclass=3072]' --arch sm_90a --specs "$w/t/specs" >"$w/sk90.txt" 2>&1 ||
	{ cat "$w/sk90.txt"; exit 1; }
grep -q "scheduler=1 splits=2 " "$w/sk90.txt"
grep -q "^    ws  *scratch f32 " "$w/sk90.txt"
"$jitk" explain 'gemm_fp8_bias[mclass=65536,nclass=3072]' --arch sm_90a --specs "$w/t/specs" >"$w/sk90big.txt" 2>&1
grep -q "scheduler=0 splits=1 " "$w/sk90big.txt"
sed -i 's/^    splits: 2$/    splits: 17/' "$w/t/specs/gemm_fp8.yaml"
if "$jitk" explain 'gemm_fp8_bias[mclass=512,nclass=3072]' --arch sm_90a --specs "$w/t/specs" >"$w/sk1.txt" 2>&1; then
	echo "split-K in 17 splits was taken"
	exit 1
fi
grep -q "scheduler 1 takes 1 (stream-K) to 16 (split-K) splits" "$w/sk1.txt"
echo "gemm: explain in $(($(date +%s) - t0)) s"
start=$(date +%s)
# (no PCH: the second target's compile would make one and gain nothing)
JITK_PCH=0 "$jitk" precompile 'gemm_fp8_bias[mclass=65536,nclass=65536]' --arch sm_90,sm_100 --specs specs \
	--cache "$w/c" -j 2 >"$w/pre.txt" 2>&1 || { cat "$w/pre.txt"; exit 1; }
grep -q ": 2 compiled, 0 cached, 0 remote, 0 failed, 0 gated$" "$w/pre.txt"
# the other N class of M > 512 is the same translation unit: cached
"$jitk" precompile 'gemm_fp8_bias[mclass=65536,nclass=9216]' --arch sm_90,sm_100 --specs specs \
	--cache "$w/c" >"$w/pre2.txt" 2>&1 || { cat "$w/pre2.txt"; exit 1; }
grep -q ": 0 compiled, 2 cached, 0 remote, 0 failed, 0 gated$" "$w/pre2.txt"
echo "gemm: precompiled gemm_fp8_bias for sm_90a and sm_100a (2 at a time) in $(($(date +%s) - start)) s"
# both entry points are in each image
for entry in $(find "$w/c" -name '*.jitk'); do
	grep -q "gemm_fp8_params" "$entry"
done
# the sm_100a image: tcgen05.mma (UTCQMMA: kind::f8f6f4), tcgen05.ld
# (LDTM), TMA loads and stores, no local memory in either kernel
# (the toolkit's, else the wheels configure put into .pydeps/; cuobjdump
# runs nvdisasm from its PATH)
tools=
for d in "${CUDA_HOME:-/usr/local/cuda}/bin" /usr/local/cuda/bin .pydeps/nvidia/cu13/bin; do
	[ -x "$d/cuobjdump" ] && [ -x "$d/nvdisasm" ] && { tools=$d; break; }
done
if [ -z "$tools" ] || ! command -v python3 >/dev/null 2>&1; then
	echo "gemm: note: no cuobjdump and nvdisasm (or python3) here: the sm_100a SASS checks did not run"
else
	cuobjdump=$tools/cuobjdump
	PATH=$tools:$PATH
	python3 bench/extract_cubins.py "$w/c" "$w/cubins" >/dev/null
	cubin=$(ls "$w"/cubins/*.sm_100a.cubin)
	"$cuobjdump" -sass "$cubin" >"$w/sass.txt"
	"$cuobjdump" --dump-resource-usage "$cubin" >"$w/res.txt"
	for insn in UTCQMMA LDTM UTMALDG UTMASTG; do
		grep -q "$insn" "$w/sass.txt" || { echo "no $insn in the sm_100a SASS"; exit 1; }
	done
	if grep -qE "LDL|STL" "$w/sass.txt" || [ "$(grep -c " LOCAL:0 " "$w/res.txt")" != 2 ]; then
		echo "the sm_100a kernels use local memory:"
		cat "$w/res.txt"
		exit 1
	fi
	echo "gemm: sm_100a SASS: $(grep -c UTCQMMA "$w/sass.txt") UTCQMMA, $(grep -c LDTM "$w/sass.txt") LDTM," \
		"$(sed -n 's/.*REG:\([0-9]*\).*/\1/p' "$w/res.txt" | head -1) registers, no local memory"
fi
t1=$(date +%s)
JITK_TEST_GEMM_CACHE=$w/c "$b/tests/gemm_checks"
JITK_TEST_GEMM_CACHE=$w/c JITK_TEST_GEMM_CC=100 "$b/tests/gemm_checks"
echo "gemm: launch checks (sm_90, sm_100) in $(($(date +%s) - t1)) s"
echo "gemm: ok"
