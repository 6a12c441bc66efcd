#!/bin/sh
# bench/gemm_device.sh - one device call for the FP8 GEMM family (issue 24)
# after bench/device_run.sh gemm's checks: the Qwen-Image block with jitk's
# GEMMs ((e), (E)) beside (b), (c), the block's fused == split check, then
# compute-sanitizer memcheck and racecheck on one shape of every epilogue.
# Carry JITK_BUILD (.dev/b) and the cutlass package (JITK_PACKAGE_CUTLASS).
set -u
OUT=${OUT:-/tmp/jitk-out}
b=${JITK_BUILD:-build}
export LD_LIBRARY_PATH="$PWD/$b/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1 \
	JITK_TEST_ROOT="$PWD" JITK_LIBRARY="$PWD/$b/libjitk.so.0.2.0" PYTHONPATH="$PWD/bindings/python"
export JITK_CACHE_DIR=${JITK_CACHE_DIR:-$PWD/.dev/gemm-cache}
# the package's C++ extension (the ops) and its front end, in the source tree
python3 bindings/python/_build/backend.py torch-ext >"$OUT/package_build.log" 2>&1 &&
	python3 bindings/python/_build/backend.py frontend >>"$OUT/package_build.log" 2>&1
echo "package build rc=$?"
t0=$(date +%s)
"$b/jitk" precompile gemm_fp8_bias gemm_fp8_gelu_tanh_fp8 gemm_fp8_gate_residual gemm_fp8 gemm_fp8_gelu_tanh_fp8_out \
	gelu_tanh_quant_fp8 gelu_tanh_quant_fp8_out gate_residual --arch sm_90 -j 8 >"$OUT/precompile.log" 2>&1
echo "precompile rc=$? $(tail -1 "$OUT/precompile.log") ($(($(date +%s) - t0)) s)"
timeout 150 python3 examples/qwen_image_block.py --check >"$OUT/block_check.log" 2>&1
echo "block check rc=$?"; tail -6 "$OUT/block_check.log"
timeout 280 python3 examples/qwen_image_block.py --only bceE --no-autotune >"$OUT/block.log" 2>&1
echo "block rc=$?"; tail -14 "$OUT/block.log"
for tool in memcheck racecheck; do
	timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 python3 bench/gemm_check.py --quick \
		>"$OUT/gemm_$tool.log" 2>&1
	echo "$tool rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|checks" "$OUT/gemm_$tool.log" | tail -2 | tr '\n' ' ')"
done
