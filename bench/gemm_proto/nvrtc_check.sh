#!/bin/sh
# nvrtc_check.sh - compile one jitk::gemm_fp8 instance through NVRTC alone
# (bench/nvrtc_alone.c), the way jitk's generated translation unit will:
# the template, then the parameter struct, then the kernel's name
# expression; prints NVRTC's time and the cubin size, with ptxas -v.
#
#   CUTLASS_DIR=DIR sh bench/gemm_proto/nvrtc_check.sh [EPILOGUE] [SCHEDULE TM TN CM CN FAST]
#
# EPILOGUE: none, bias, gelu_tanh_fp8, gate_residual (default bias);
# default geometry: cooperative 128 128 2 1 false. NVRTC_ALONE_REPS=N
# compiles N times in one process. Output in bench/gemm_proto/build/nvrtc/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
epi=${1:-bias}
sched=${2:-cooperative} tm=${3:-128} tn=${4:-128} cm=${5:-2} cn=${6:-1} fast=${7:-false}
d=${CUTLASS_DIR:-}
inc=
for c in "$d/cutlass_library/source/include" "$d/include"; do
	[ -f "$c/cutlass/cutlass.h" ] && inc=$c && break
done
[ -n "$inc" ] || { echo "nvrtc_check.sh: set CUTLASS_DIR" >&2; exit 2; }
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
out=$here/build/nvrtc
mkdir -p "$out"
cc -O2 -o "$out/nvrtc_alone" "$root/bench/nvrtc_alone.c" -I"$cuda/include" \
	-L"$cuda/lib64" -lnvrtc -Wl,-rpath,"$cuda/lib64"
name=gemm_fp8_${sched}_${tm}x${tn}_c${cm}x${cn}_${epi}
cat > "$out/$name.cu" <<EOT
// jitk translation unit (hand-made): family gemm_fp8, target sm_90a
#include "gemm_fp8.cuh"
struct $name {
  static constexpr int tile_m = $tm;
  static constexpr int tile_n = $tn;
  static constexpr int tile_k = 128;
  static constexpr int cluster_m = $cm;
  static constexpr int cluster_n = $cn;
  static constexpr int stages = 0;
  static constexpr jitk::GemmSchedule schedule = jitk::GemmSchedule::$sched;
  static constexpr jitk::GemmScheduler scheduler = jitk::GemmScheduler::persistent;
  static constexpr bool fast_accum = $fast;
  static constexpr jitk::GemmEpilogue epilogue = jitk::GemmEpilogue::$epi;
  static constexpr bool bias = true;
  static constexpr bool gelu_out = false;
};
EOT
cat > "$out/$name.opts" <<EOT
--gpu-architecture=sm_90a
--std=c++17
--fmad=true
--ftz=false
--prec-div=true
--prec-sqrt=true
-default-device
--device-int128
-DNDEBUG
--ptxas-options=-v
-I$root/templates
-I$inc
-I$cuda/include/cccl
-I$cuda/include
name-expression jitk::gemm_fp8<$name>
EOT
/usr/bin/time -f "wall %e s, max RSS %M KB" nice "$out/nvrtc_alone" "$out/$name.cu" "$out/$name.opts" \
	"$out/$name.cubin" 2>&1 | grep -v "^$" | grep -E "cubin|wall|spill|Used|->|error" | head -20
