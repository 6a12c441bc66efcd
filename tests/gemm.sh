#!/bin/sh
# tests/gemm.sh BUILD_DIR - the FP8 GEMM family (specs/gemm_fp8.yaml) with
# no GPU: explain shows its builder and its sm_100 gate, one NVRTC
# precompile for sm_90a (about a minute and 3.4 GB), whose cache entry has
# the kernel and its parameter builder; then tests/gemm_checks.c over that
# cache on the fake device (launch checks name the argument before any
# launch, M = 0 launches nothing, a good call launches the built block).
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
grep -q "^  kernel:   jitk::gemm_fp8<gemm_fp8_bias_mclass_65536>$" "$w/explain.txt"
grep -q "^  builder:  jitk::gemm_fp8_params<gemm_fp8_bias_mclass_65536> " "$w/explain.txt"
# the size class: M > 512 takes 128 x 192 tiles, M <= 512 128 x 96 over a
# 1 x 2 cluster (A's box is half a tile: each CTA multicasts its half)
sed -n '/^gemm_fp8_bias\[mclass=65536\]/,/^$/p' "$w/explain.txt" >"$w/big.txt"
sed -n '/^gemm_fp8_bias\[mclass=512\]/,/^$/p' "$w/explain.txt" >"$w/small.txt"
grep -q "b_map .*box \[192, 128\], swizzle 128" "$w/big.txt"
grep -q "a_map .*box \[128, 128\], swizzle 128" "$w/big.txt"
grep -q "tile_n=96 .*cluster_n=2 " "$w/small.txt"
grep -q "a_map .*box \[64, 128\], swizzle 128" "$w/small.txt"
grep -q "b_map .*box \[96, 128\], swizzle 128" "$w/small.txt"
if "$jitk" explain gemm_fp8 --arch sm_100a --specs specs >"$w/gate.txt" 2>&1; then
	echo "gemm_fp8 runs on sm_100a?"
	exit 1
fi
grep -q "sm_100 (tcgen05) is not written yet" "$w/gate.txt"
echo "gemm: explain in $(($(date +%s) - t0)) s"
start=$(date +%s)
"$jitk" precompile 'gemm_fp8_bias[mclass=65536]' --arch sm_90 --specs specs --cache "$w/c" -j 1 >"$w/pre.txt" 2>&1 ||
	{ cat "$w/pre.txt"; exit 1; }
grep -q ": 1 compiled, 0 cached, 0 remote, 0 failed, 0 gated$" "$w/pre.txt"
echo "gemm: precompiled gemm_fp8_bias for sm_90a in $(($(date +%s) - start)) s"
# both entry points are in the image
entry=$(find "$w/c" -name '*.jitk' | head -1)
grep -q "gemm_fp8_params" "$entry"
t1=$(date +%s)
JITK_TEST_GEMM_CACHE=$w/c "$b/tests/gemm_checks"
echo "gemm: launch checks in $(($(date +%s) - t1)) s"
echo "gemm: ok"
