#!/bin/sh
# bench/nvrtc_study.sh [ARCH] - where a cold compile's time goes, and what
# NVRTC's precompiled headers (--pch) change: NVRTC alone on jitk's
# translation unit of fused_norm_scale_shift_fp8, with and without --pch;
# an empty kernel (NVRTC's floor); and the same unit with the CUDA bf16/fp8
# headers a header-based template would include, with and without --pch.
# Each case: 5 compiles in one process, the first paying NVRTC's start-up;
# prints the median of compiles 2-5. Needs build/ (ninja) and the CUDA headers.
set -eu
arch=${1:-sm_90}
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
build/jitk source 'fused_norm_scale_shift_fp8[hidden=3072]' --arch "$arch" --specs specs >"$w/tu.cu"
build/jitk source 'fused_norm_scale_shift_fp8[hidden=3072]' --arch "$arch" --specs specs --options >"$w/opt"
grep -v '^name-expression' "$w/opt" >"$w/opt.plain"
{ cat "$w/opt"; echo "--pch"; echo "--pch-dir=$w/pch"; } >"$w/opt.pch"
{ printf '#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n'; cat "$w/tu.cu"; } >"$w/hdr.cu"
{ cat "$w/opt"; echo "-I$cuda/include"; } >"$w/opt.hdr"
{ cat "$w/opt.hdr"; echo "--pch"; echo "--pch-dir=$w/pchh"; } >"$w/opt.hdrpch"
printf '__global__ void empty_kernel() {}\n' >"$w/empty.cu"
sed "s/^--gpu-architecture=sm_/--gpu-architecture=compute_/" "$w/opt" >"$w/opt.ptx"
{ cat "$w/opt"; echo "--split-compile=0"; } >"$w/opt.split"
mkdir -p "$w/pch" "$w/pchh"
run() { # label source options
	NVRTC_ALONE_REPS=5 build/nvrtc_alone "$2" "$3" >"$w/log" 2>"$w/err" || { echo "$1: failed"; cat "$w/err"; return; }
	first=$(sed -n 's/^compile 1: \(.*\) ms/\1/p' "$w/log")
	med=$(sed -n 's/^compile [2-5]: \(.*\) ms/\1/p' "$w/log" | sort -n | sed -n 2,3p | awk '{s+=$1} END {printf "%.1f", s/NR}')
	printf '%-44s first %7.1f ms, then %6s ms\n' "$1" "$first" "$med"
}
run "jitk's unit (no #include)" "$w/tu.cu" "$w/opt"
run "jitk's unit, --pch" "$w/tu.cu" "$w/opt.pch"
run "jitk's unit, to PTX only (no ptxas)" "$w/tu.cu" "$w/opt.ptx"
run "jitk's unit, --split-compile=0" "$w/tu.cu" "$w/opt.split"
run "empty kernel (NVRTC's floor)" "$w/empty.cu" "$w/opt.plain"
run "unit + cuda_bf16.h + cuda_fp8.h" "$w/hdr.cu" "$w/opt.hdr"
run "unit + cuda_bf16.h + cuda_fp8.h, --pch" "$w/hdr.cu" "$w/opt.hdrpch"
grep -i "using precompiled header" "$w/err" | sed "s|$w/||" | head -1 || true
