#!/bin/bash
# bench/gemm_classes.sh - one device call for the FP8 GEMM's size classes
# (issue 24): what a class's new tiles need before they count, in the
# order that matters if the call is cut short. Logs go to $OUT/L, packed
# into $OUT/logs.tgz after every step. A step starts only if its own
# time limit still ends inside LIM seconds (default 560), else it is
# skipped, saying so: the call never runs into the device's limit. Run it
# with bash (bash bench/gemm_classes.sh).
#
#   1. the package's extension (built on the machine) beside `jitk
#      precompile` of the GEMM family and its split path for sm_90;
#   1b. test_gpu's scratch family (the runtime's io: scratch on the GPU);
#   2. bench/gemm_check.py: bytes (float64 reference, fused == split,
#      every M class and N class) and times against cuBLAS in one process;
#   2b. bench/py_overhead.py with JITK_TORCH_ONE_BLOCK 0 and 1 (issue 26);
#   3. bench/tune.py gemm --only TUNE (default: split- and stream-K at M <= 512, the
#      144-column M <= 512 tiles, and ping-pong on 128 x 96 tiles, for the
#      plain GEMM and for the GELU epilogue alone), its cache kept, its
#      winners written to $OUT/L/gemm_fp8.tuned.yaml;
#   3b. the tuned spec (TUNED, or step 3's winners): its instances
#      precompiled, then bench/gemm_check.py over it (bytes and times);
#   4. Nsight Compute of cuBLAS and jitk at the M = 512 shapes NCU names
#      (default the three not yet profiled: 3072 x 3072, 12288 x 3072,
#      3072 x 12288);
#   5. the Qwen-Image block, (b), (c), (e) and (E) (examples/qwen_image_block.py).
#
# STEPS names the steps after the first to run (default: scratch check
# tune tuned overhead ncu block).
#
# Carry the build (JITK_BUILD, default .dev/b from bench/device_stage.sh)
# and the cutlass package's include directory (or .dev/cutlass_inc.tgz,
# a tar of it), and optionally .dev/cache, a cache precompiled for sm_90.
set -u
OUT=${OUT:-/tmp/jitk-out}
b=${JITK_BUILD:-.dev/b}
LIM=${LIM:-560}
# the steps after the first, by name (the first always runs)
STEPS=${STEPS-scratch check tune tuned overhead ncu block}
for s in $STEPS; do
	case $s in scratch | check | overhead | tune | tuned | ncu | block) ;;
	*) echo "gemm_classes.sh: unknown step '$s' (scratch check tune tuned overhead ncu block)" >&2; exit 2 ;;
	esac
done
TUNE=${TUNE:-'split-K|stream-K|M<=512: 128x144|ping-pong 128x96'}
# TUNED: a gemm_fp8.yaml that tune.py wrote (step 3's, or one carried from
# an earlier call): step 3b checks its bytes and times it against cuBLAS
TUNED=${TUNED:-}
NCU=${NCU:-"512:3072:3072 512:12288:3072 512:3072:12288"}
version=$(sed -n 's/^#define JITK_VERSION "\(.*\)"/\1/p' runtime/include/jitk/version.h)
export JITK_PACKAGE_CUTLASS=${JITK_PACKAGE_CUTLASS:-$PWD/.pydeps/cutlass_library/source/include}
# the package's headers may come packed (CUTLASS_TGZ: a tar of include/,
# a tenth of the tree's size in the carry); the key hashes the tree, not
# where it lies
CUTLASS_TGZ=${CUTLASS_TGZ:-.dev/cutlass_inc.tgz}
if [ ! -d "$JITK_PACKAGE_CUTLASS" ] && [ -f "$CUTLASS_TGZ" ]; then
	mkdir -p /tmp/jitk-cutlass && tar xzf "$CUTLASS_TGZ" -C /tmp/jitk-cutlass &&
		JITK_PACKAGE_CUTLASS=/tmp/jitk-cutlass/include
fi
[ -f "$JITK_PACKAGE_CUTLASS/cutlass/cutlass.h" ] || {
	echo "gemm_classes.sh: no cutlass headers at $JITK_PACKAGE_CUTLASS (carry them or $CUTLASS_TGZ)" >&2
	exit 2
}
export LD_LIBRARY_PATH="$PWD/$b/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1 \
	JITK_TEST_ROOT="$PWD" JITK_LIBRARY="$PWD/$b/libjitk.so.$version" PYTHONPATH="$PWD/bindings/python"
export JITK_CACHE_DIR=${JITK_CACHE_DIR:-/tmp/jitk-gemm-cache}
# CACHE_SEED: a cache precompiled elsewhere for sm_90 (carried), copied in
# first; where this machine's NVRTC or CUDA headers differ, its keys miss
# and step 1 compiles as before
CACHE_SEED=${CACHE_SEED:-.dev/cache}
if [ -d "$CACHE_SEED" ] && [ ! -e "$JITK_CACHE_DIR" ]; then
	cp -a "$CACHE_SEED" "$JITK_CACHE_DIR"
fi
L=$OUT/L
mkdir -p "$L"
t0=$(date +%s)
save() { tar czf "$OUT/logs.tgz" -C "$OUT" L; }
# fits N NAME: a step limited to N seconds still ends inside LIM
fits() {
	[ $(($(date +%s) - t0 + $1)) -lt "$LIM" ] && return 0
	echo "skipped: $2 (needs about $1 s, $(($(date +%s) - t0)) s used of $LIM)"
	return 1
}
stamp() { echo "$1 rc=$2 ($(($(date +%s) - t0)) s)"; }
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	echo "cores $(nproc)"
	# the header packages' hashes here (a carried cache hits where they match)
	"$b/jitk" explain 'gemm_fp8[mclass=512,nclass=9216]' --arch sm_90 | grep -o '[a-z]* sha256:[0-9a-f]*'
	echo "seeded cache: $(find "$JITK_CACHE_DIR" -type f 2>/dev/null | wc -l) files"
} | tee "$L/gpu.txt"

# 1. the extension and the instances, side by side
(python3 bindings/python/_build/backend.py torch-ext && python3 bindings/python/_build/backend.py frontend) \
	>"$L/ext_build.log" 2>&1 &
ext=$!
# (no precompiled header: it gains a GEMM nothing; docs/spec-format.md)
JITK_PCH=0 timeout $((LIM / 2)) "$b/jitk" precompile gemm_fp8 gemm_fp8_bias gemm_fp8_gelu_tanh_fp8 gemm_fp8_gelu_tanh_fp8_out \
	gemm_fp8_gate_residual gelu_tanh_quant_fp8 gelu_tanh_quant_fp8_out gate_residual --arch sm_90 \
	-j "$(nproc)" >"$L/precompile.log" 2>&1
stamp precompile $?
tail -1 "$L/precompile.log"
wait $ext
stamp extension $?
save

# 1b. the runtime's scratch on the GPU (test_gpu's scratch family: the
# parts through scratch == one pass, on one stream, two, and a graph)
if want scratch && fits 90 scratch; then
	JITK_TEST_ONLY=scratch JITK_TEST_TIMEOUT=60 timeout 80 "$b/tests/test_gpu" >"$L/scratch.log" 2>&1
	stamp "test_gpu scratch" $?
	grep -E "scratch family|PASSED|FAILED|SKIP" "$L/scratch.log"
	save
fi

# 2. bytes and times against cuBLAS
if want check && fits 200 gemm_check; then
	timeout 200 python3 bench/gemm_check.py >"$L/gemm_check.log" 2>&1
	stamp gemm_check $?
	grep -E "^FAIL|checks|geometric|^\| (4096|512) " "$L/gemm_check.log"
	save
fi

# 2b. the dispatcher's host time (issue 26 reads it on an H200), with the
# functional outputs in one block of the allocator and without
if want overhead && fits 150 py_overhead; then
	for ob in 0 1; do
		JITK_TORCH_ONE_BLOCK=$ob timeout 70 python3 bench/py_overhead.py --calls 8000 \
			>"$L/py_overhead_ob$ob.log" 2>&1
		stamp "py_overhead one block=$ob" $?
		grep -E "^check|^torch.ops|^dispatcher|^one output" "$L/py_overhead_ob$ob.log"
	done
	save
fi

# 3. tiles per class
# (its cache is step 1's: the shipped units are built already)
if want tune && fits 300 tune; then
	timeout 300 python3 bench/tune.py gemm "$b" --only "$TUNE" --cache "$JITK_CACHE_DIR" \
		--write "$L/gemm_fp8.tuned.yaml" >"$L/tune.log" 2>&1
	stamp tune $?
	grep -E "^# class|FAILED" "$L/tune.log"
	save
fi

# 3b. the tuned spec (TUNED, else step 3's): its instances, then its bytes
# (fused == split, the float64 reference) and times against cuBLAS
[ -z "$TUNED" ] && [ -s "$L/gemm_fp8.tuned.yaml" ] && TUNED=$L/gemm_fp8.tuned.yaml
if want tuned && [ -n "$TUNED" ] && fits 260 tuned; then
	T=$(python3 bench/tune.py --specs-with "$TUNED" /tmp/jitk-tuned)
	diff specs/gemm_fp8.yaml "$TUNED" | grep '^>' >"$L/tuned.diff"
	JITK_PCH=0 timeout 100 "$b/jitk" precompile gemm_fp8 gemm_fp8_bias gemm_fp8_gelu_tanh_fp8 \
		gemm_fp8_gelu_tanh_fp8_out gemm_fp8_gate_residual --specs "$T" --arch sm_90 \
		-j "$(nproc)" >"$L/tuned_precompile.log" 2>&1
	stamp "tuned precompile" $?
	tail -1 "$L/tuned_precompile.log"
	JITK_SPECS=$T timeout 150 python3 bench/gemm_check.py >"$L/gemm_check_tuned.log" 2>&1
	stamp "gemm_check tuned" $?
	grep -E "^FAIL|checks|geometric|^\| (4096|512) " "$L/gemm_check_tuned.log"
	save
fi

# 4. what cuBLAS runs at the other M = 512 shapes, and ours beside it
for s in $(want ncu && echo "$NCU"); do
	fits 120 "ncu $s" || break
	for who in cublas jitk; do
		re=$([ $who = jitk ] && echo gemm_fp8 || echo "nvjet|xmma|cutlass|sm90_")
		f=$L/ncu_${who}_${s//:/x}.log
		timeout 60 ncu --clock-control none --kernel-name regex:"$re" --launch-skip 3 --launch-count 1 \
			--section SpeedOfLight --section LaunchStats python3 bench/ncu_cases.py "gemm:$who:$s" >"$f" 2>&1
		stamp "ncu $who $s" $?
		grep -E '==PROF== Profiling|Duration' "$f" | tr -s ' '
	done
	save
done

# 5. the block
if want block && fits 240 block; then
	timeout 240 python3 examples/qwen_image_block.py --only bceE --no-autotune >"$L/block.log" 2>&1
	stamp block $?
	tail -14 "$L/block.log"
fi
echo "total $(($(date +%s) - t0)) s"
save
