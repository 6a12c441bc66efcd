#!/bin/sh
# bench/device_run.sh [STEPS] - what one call on the GPU machine runs, from
# the repository root, with build/ (and build/devlibs: the shared libraries
# the machine lacks) carried along. Logs go to $OUT (or /tmp/jitk-out).
# STEPS: any of tests multi axes qk famsan deploy fambench famtorch pkgs pkgops gemm memcheck memcheck_full racecheck triton sass precompile nvrtc bench plotdata
# sweep python pyops dispatch hot tune profile autotune block torch report (default all but sweep and memcheck_full). report writes $OUT/performance.md (docs/performance.md
# with this run's tables, bench/report.py) and, where matplotlib is, $OUT/img/bandwidth-h200.png;
# fetch the logs into bench/results/DATE and run bench/report.py there to update docs/.
# Every step runs even when an earlier one failed; the script exits 1 at the end, naming the
# steps that failed. JITK_BUILD: the build directory (default build).
set -u
OUT=${OUT:-/tmp/jitk-out}
b=${JITK_BUILD:-build}
mkdir -p "$OUT"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-device-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
version=$(sed -n 's/^#define JITK_VERSION "\(.*\)"/\1/p' runtime/include/jitk/version.h)
export LD_LIBRARY_PATH="$PWD/$b/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 JITK_TEST_ROOT="$PWD" JITK_LIBRARY="$PWD/$b/libjitk.so.$version"
steps=${1:-"tests multi memcheck racecheck triton sass precompile nvrtc bench plotdata python pyops dispatch torch report"}
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
failed=
# light_names: every instance of specs/ but the FP8 GEMM's (a minute of
# NVRTC each: the gemm step compiles and times those)
light_names() {
	"$b/jitk" list --specs specs | tail -n +2 | awk '$2 != "gemm_fp8" { print $1 }'
}
# ran RC NAME: print "NAME rc=RC" and remember NAME when RC is not 0.
ran() {
	echo "$2 rc=$1"
	[ "$1" = 0 ] || failed="$failed $2"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader ||
	echo "(no nvidia-smi)"
# The shipped specs allow the fused fp8 symbols from sm_90 (tests/cli_bench_script.sh checks), so
# bench and sass use them as they are; tests that need the reference's sm_100 gate make their own.
if has tests; then
	rm -rf "$tmp/dump" && mkdir -p "$tmp/dump"
	JITK_GPU_DUMP=$tmp/dump "$b/tests/test_gpu" >"$OUT/test_gpu.log" 2>&1
	ran $? test_gpu
	grep -E "^\(a\)|^graph|^large|PASSED|FAILED|SKIPPED" "$OUT/test_gpu.log"
	for t in test_runtime test_cache test_compile test_spec; do
		"$b/tests/$t" >"$OUT/$t.log" 2>&1
		ran $? $t
	done
fi
if has multi; then
	# one process over every visible device; N ranks cold-starting on one cache
	"$b/tests/test_gpu_multi" >"$OUT/multi.log" 2>&1
	ran $? test_gpu_multi
	for n in 8 32; do
		sh bench/ranks.sh "$b" "$n" >>"$OUT/multi.log" 2>&1
		ran $? "ranks_$n"
	done
	grep -E "^multi-GPU|^other device|^ranks:|PASSED|FAILED" "$OUT/multi.log"
fi
if has axes; then
	# the norm family's axes (issue 12): fused == split == host on every symbol
	"$b/tests/test_gpu_axes" >"$OUT/axes.log" 2>&1
	ran $? test_gpu_axes
	grep -E "^axis|^axes|^per_batch|^indexed|PASSED|FAILED" "$OUT/axes.log" | tail -30
fi
if has qk; then
	# QK-RMSNorm + RoPE (issue 15)
	"$b/tests/test_gpu_qk" >"$OUT/qk.log" 2>&1
	ran $? test_gpu_qk
	grep -vE "^qk_norm_rope_any|^\[ (RUN|     OK) " "$OUT/qk.log" | tail -30
fi
if has famsan; then
	# the new families under compute-sanitizer (quick matrices)
	JITK_GPU_QUICK=1 timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 \
		"$b/tests/test_gpu_axes" >"$OUT/memcheck_axes.log" 2>&1
	ran $? memcheck_axes
	JITK_GPU_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
		"$b/tests/test_gpu_qk" >"$OUT/memcheck_qk.log" 2>&1
	ran $? memcheck_qk
	JITK_GPU_QUICK=1 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 \
		"$b/tests/test_gpu_qk" >"$OUT/racecheck_qk.log" 2>&1
	ran $? racecheck_qk
	for f in memcheck_axes memcheck_qk racecheck_qk; do
		echo "$f: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$f.log" | tail -1)"
	done
fi
if has deploy; then
	# fresh-process hits, image kinds, seal and manifest on the GPU, NVTX, ncu (issue 13)
	OUT=$OUT JITK_BUILD=$b sh bench/fresh_hit.sh "${JITK_FRESH_RUNS:-30}" >"$OUT/deploy.log" 2>&1
	ran $? deploy
	grep -vE "^\[ (RUN|     OK) " "$OUT/deploy.log" | tail -40
fi
if has fambench; then
	"$b/jitk" bench --family axes --rows 4096,16384 --hidden 3072 >"$OUT/axes_bench.log" 2>&1
	ran $? axes_bench
	cat "$OUT/axes_bench.log"
	"$b/jitk" bench --family qk --reps 200 >"$OUT/qk_bench.log" 2>&1
	ran $? qk_bench
	cat "$OUT/qk_bench.log"
fi
if has famtorch; then
	python3 bench/axes_torch.py --rows 4096,16384 >"$OUT/axes_torch.log" 2>&1
	ran $? axes_torch
	grep -v Warning "$OUT/axes_torch.log" | tail -30
	python3 bench/qk_torch.py --reps 100 --lib "$PWD/$b/libjitk.so.$version" >"$OUT/qk_torch.log" 2>&1
	ran $? qk_torch
	grep -v Warning "$OUT/qk_torch.log" | tail -30
fi
if has memcheck; then
	JITK_GPU_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 3 "$b/tests/test_gpu" \
		>"$OUT/memcheck.log" 2>&1
	ran $? memcheck
	grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
fi
if has memcheck_full; then
	# the whole matrix, the 700k-row case included (slow under memcheck)
	timeout "${JITK_MEMCHECK_FULL_S:-420}" compute-sanitizer --tool memcheck --error-exitcode 3 \
		"$b/tests/test_gpu" >"$OUT/memcheck_full.log" 2>&1
	ran $? memcheck_full
	grep -E "ERROR SUMMARY|PASSED|FAILED|^large" "$OUT/memcheck_full.log" | tail -4
fi
if has racecheck; then
	JITK_GPU_QUICK=1 compute-sanitizer --tool racecheck --error-exitcode 3 "$b/tests/test_gpu" \
		>"$OUT/racecheck.log" 2>&1
	ran $? racecheck
	grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | tail -3
fi
if has triton; then
	python3 bench/triton_check.py "$tmp/dump" >"$OUT/triton.log" 2>&1
	ran $? triton
	tail -12 "$OUT/triton.log"
fi
if has sass; then
	rc=0
	# shellcheck disable=SC2046
	"$b/jitk" precompile $(light_names) --specs specs --cache "$tmp/pc" --arch sm_90,sm_100 >"$tmp/pc.log" 2>&1 || rc=1
	python3 bench/extract_cubins.py "$tmp/pc" "$tmp/cubins" >/dev/null || rc=1
	for f in "$tmp"/cubins/*.sm_90.cubin; do
		cuobjdump -sass "$f" >"$tmp/sass.txt" || rc=1
		printf '%s LDG.128=%s LDG.64=%s LDG.32=%s LDG.U16=%s STG.128=%s LDL/STL=%s\n' "$(basename "$f")" \
			"$(grep -c 'LDG.E.128' "$tmp/sass.txt")" "$(grep -c 'LDG.E.64' "$tmp/sass.txt")" \
			"$(grep -cE 'LDG.E(.CONSTANT)? ' "$tmp/sass.txt")" "$(grep -c 'LDG.E.U16' "$tmp/sass.txt")" \
			"$(grep -c 'STG.E.128' "$tmp/sass.txt")" "$(grep -cE 'LDL|STL' "$tmp/sass.txt")"
	done >"$OUT/sass.log"
	ran $rc sass
	cat "$OUT/sass.log"
fi
if has precompile; then
	rc=0
	pcnames=$(light_names)
	# JITK_PRECOMPILE_JOBS: the worker counts to time (tests/cli_bench_script.sh
	# runs the step once, with 2, on the CPU)
	for j in ${JITK_PRECOMPILE_JOBS:-16 2 1}; do
		rm -rf "$tmp/pcj"
		# shellcheck disable=SC2086
		"$b/jitk" precompile $pcnames --specs specs --cache "$tmp/pcj" --arch sm_90,sm_100 -j $j >"$tmp/pcj.log" 2>&1 || rc=1
		tail -1 "$tmp/pcj.log"
	done
	# shellcheck disable=SC2086
	"$b/jitk" precompile $pcnames --specs specs --cache "$tmp/pcj" --arch sm_90,sm_100 >"$tmp/pcj.log" 2>&1 || rc=1
	tail -1 "$tmp/pcj.log"
	for i in 1 2 3; do
		rm -rf "$tmp/pcx"
		"$b/jitk" source 'fused_norm_scale_shift_fp8[hidden=3072]' --arch sm_100 --specs specs >"$tmp/s.cu" || rc=1
		"$b/jitk" source 'fused_norm_scale_shift_fp8[hidden=3072]' --arch sm_100 --specs specs --options >"$tmp/s.opt" || rc=1
		a=$(date +%s%N)
		"$b/nvrtc_alone" "$tmp/s.cu" "$tmp/s.opt" >/dev/null || rc=1
		b_=$(date +%s%N)
		"$b/jitk" precompile 'fused_norm_scale_shift_fp8[hidden=3072]' --specs specs --cache "$tmp/pcx" --arch sm_100 \
			>"$tmp/pcx.log" 2>&1 || rc=1
		c=$(date +%s%N)
		"$b/jitk" precompile 'fused_norm_scale_shift_fp8[hidden=3072]' --specs specs --cache "$tmp/pcx" --arch sm_100 \
			>"$tmp/pcx.log" 2>&1 || rc=1
		d=$(date +%s%N)
		echo "cold compile, whole processes: nvrtc_alone $(((b_ - a) / 1000000)) ms, jitk precompile $(((c - b_) / 1000000)) ms, jitk cache hit $(((d - c) / 1000000)) ms"
	done
	ran $rc precompile
fi
if has nvrtc; then
	sh bench/nvrtc_study.sh sm_90 >"$OUT/nvrtc.log" 2>&1
	ran $? nvrtc
	grep -v warning "$OUT/nvrtc.log"
fi
if has bench; then
	"$b/jitk" bench --specs specs >"$OUT/bench.log" 2>&1
	ran $? bench
	cat "$OUT/bench.log"
fi
if has plotdata; then
	"$b/jitk" bench --specs specs --hidden 3072 --rows 128,256,512,1024,2048,4096,8192,16384 \
		--skip-jit >"$OUT/bench_plot.log" 2>&1
	ran $? "bench (plot rows)"
	grep -E "^(fused|split)" "$OUT/bench_plot.log"
fi
if has sweep; then
	python3 bench/sweep.py "$OUT/sweep.md" 3072 4096,16384 >"$tmp/sweep.log" 2>&1
	ran $? sweep
	tail -40 "$tmp/sweep.log"
fi
if has python; then
	python3 tests/python/test_binding.py >"$OUT/python.log" 2>&1
	ran $? "python binding (CPU part)"
	python3 tests/python/test_torch.py >>"$OUT/python.log" 2>&1
	ran $? "python binding (torch)"
	grep -E "^Ran|^OK|FAILED|Error" "$OUT/python.log"
fi
# build_package LOG: the package's C++ extension (jitk._torch, against this
# machine's PyTorch) and the ops' front end (jitk/ops/<family>.py, .pyi), in
# the source tree (PYTHONPATH then finds the package there); once a call.
build_package() {
	if [ -z "${jitk_package_built:-}" ]; then
		python3 bindings/python/_build/backend.py torch-ext >"$1" 2>&1
		ran $? "python _torch build"
		python3 bindings/python/_build/backend.py frontend >>"$1" 2>&1
		ran $? "python front end"
		jitk_package_built=1
	fi
	export PYTHONPATH="$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
}
if has pkgs; then
	# the families on header packages (issue 25): bytes, bandwidth, the
	# sanitizers, jitk bench from their specs, the warm first use in fresh
	# processes against a self-contained family, the stat check of the trees
	"$b/tests/test_gpu_packages" >"$OUT/pkgs.log" 2>&1
	ran $? test_gpu_packages
	grep -vE "^\[ (RUN|     OK) " "$OUT/pkgs.log" | tail -25
	for tool in memcheck racecheck; do
		timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 \
			"$b/tests/test_gpu_packages" >"$OUT/${tool}_pkgs.log" 2>&1
		ran $? "${tool}_pkgs"
		echo "${tool}_pkgs: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/${tool}_pkgs.log" | tail -1)"
	done
	for f in tma_copy per_token_quant_fp8_cub; do
		"$b/jitk" bench --family $f >"$OUT/bench_$f.log" 2>&1
		ran $? "bench_$f"
		cat "$OUT/bench_$f.log"
	done
	for n in static_quant_fp8 per_token_quant_fp8 per_token_quant_fp8_cub tma_copy; do
		for mode in compile gpu; do
			echo "fresh_hit --mode $mode $n:"
			"$b/fresh_hit" --runs 30 --mode $mode "$n" sm_90a 2>&1 | tail -4
		done
	done >"$OUT/pkgs_fresh.log" 2>&1
	ran $? pkgs_fresh
	cat "$OUT/pkgs_fresh.log"
	"$b/tests/test_packages" >"$OUT/test_packages.log" 2>&1
	ran $? test_packages
	grep -E "^package |PASSED|FAILED" "$OUT/test_packages.log"
	nproc
fi
if has pkgops; then
	build_package "$OUT/pkgops_build.log"
	python3 -m unittest -v tests.python.test_ops.HeaderPackageOpsTests >"$OUT/pkgops.log" 2>&1
	ran $? "python header-package ops"
	grep -E "^test|^Ran|^OK|FAILED|Error" "$OUT/pkgops.log" | tail -12
fi
if has gemm; then
	# the FP8 GEMM family (issue 24): its instances compiled on every core
	# into the cache the ops use, then checks and times against cuBLAS, then
	# the sanitizers on one shape
	build_package "$OUT/gemm_build.log"
	export JITK_CACHE_DIR=${JITK_CACHE_DIR:-$PWD/.dev/gemm-cache}
	start=$(date +%s.%N)
	"$b/jitk" precompile gemm_fp8 gemm_fp8_bias gemm_fp8_gelu_tanh_fp8 gemm_fp8_gelu_tanh_fp8_out \
		gemm_fp8_gate_residual gelu_tanh_quant_fp8 gelu_tanh_quant_fp8_out gate_residual \
		--arch sm_90 -j 8 >"$OUT/gemm_precompile.log" 2>&1
	ran $? "gemm precompile"
	echo "gemm precompile: $(tail -1 "$OUT/gemm_precompile.log") ($(awk "BEGIN { print $(date +%s.%N) - $start }") s wall)"
	timeout 400 python3 bench/gemm_check.py >"$OUT/gemm_check.log" 2>&1
	ran $? "gemm check"
	grep -E "^\||^geometric|^fused|^checked|FAIL|^all|failed|Error" "$OUT/gemm_check.log" | tail -60
	timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 bench/gemm_check.py --quick \
		>"$OUT/gemm_memcheck.log" 2>&1
	ran $? "gemm memcheck"
	timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 python3 bench/gemm_check.py --quick \
		>"$OUT/gemm_racecheck.log" 2>&1
	ran $? "gemm racecheck"
	for f in gemm_memcheck gemm_racecheck; do
		echo "$f: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|checks" "$OUT/$f.log" | tail -2 | tr '\n' ' ')"
	done
fi
if has pyops; then
	# the package from the source tree, then the ops and DLPack tests
	build_package "$OUT/pyops_build.log"
	JITK_SPECS=specs:tests/families/specs:tests/python/specs python3 -m unittest -v \
		tests/python/test_ops.py >"$OUT/pyops.log" 2>&1
	ran $? "python ops"
	JITK_SPECS=specs:tests/families/specs python3 -m unittest -v tests/python/test_dlpack_gpu.py >>"$OUT/pyops.log" 2>&1
	ran $? "python dlpack"
	grep -E "^Ran|^OK|FAILED|Error|opcheck" "$OUT/pyops.log" | tail -12
fi
if has dispatch; then
	# issue 26's target: torch.ops.jitk.fused_norm_scale_shift_fp8 through the
	# dispatcher against torch.add's host time on the same tensors, functional
	# and .out, three processes (the spread between them), then in turns
	build_package "$OUT/dispatch_build.log"
	for i in 1 2 3; do
		python3 bench/py_overhead.py >"$OUT/py_overhead_$i.log" 2>&1
		ran $? "dispatch host time ($i)"
		sed -n '1,16p' "$OUT/py_overhead_$i.log"
	done
	python3 bench/py_overhead.py --interleaved >"$OUT/py_overhead_turns.log" 2>&1
	ran $? "dispatch host time (in turns)"
	cat "$OUT/py_overhead_turns.log"
fi
if has hot; then
	# the C hot path: a typed launch and jitk_op_call against a raw cuLaunchKernel
	"$b/jitk" bench --rows 128 --hidden 3072 --reps 20 >"$OUT/hot.log" 2>&1
	ran $? hot
	grep -E "^hot path|^cold|^warm" "$OUT/hot.log"
fi
if has tune; then
	# tuning variants (bench/tune.py): the q-only norm instances, QK
	for set in q_only qk; do
		python3 bench/tune.py $set "$b" >"$OUT/tune_$set.log" 2>&1
		ran $? "tune $set"
		cat "$OUT/tune_$set.log"
	done
fi
if has profile; then
	# Nsight Compute on the kernels whose bandwidth is short of the target
	for c in qk norm_q norm_yq; do
		timeout 200 ncu --clock-control none --launch-skip 3 --launch-count 1 \
			--kernel-name regex:"qk_norm_rope|norm_scale_shift" --section SpeedOfLight \
			--section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
			--section WarpStateStats python3 bench/ncu_cases.py $c >"$OUT/ncu_$c.log" 2>&1
		ran $? "ncu $c"
		grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Block Limit|Stall|Warp Cycles Per Issued" "$OUT/ncu_$c.log" | head -24
	done
	# the FP8 GEMM where it trails cuBLAS (M = 512), jitk's kernel and
	# cuBLAS's on the same inputs (jitk's compiled on first use if the
	# gemm step did not precompile it)
	for s in 512:9216:3072 512:3072:12288; do
		for who in jitk cublas; do
			re=gemm_fp8
			[ $who = cublas ] && re="gemm|xmma|cutlass|nvjet|sm90"
			f="$OUT/ncu_gemm_${who}_$(echo $s | tr : x).log"
			timeout 200 ncu --clock-control none --launch-skip 3 --launch-count 1 \
				--kernel-name regex:"$re" --section SpeedOfLight --section LaunchStats \
				--section Occupancy --section ComputeWorkloadAnalysis \
				python3 bench/ncu_cases.py "gemm:$who:$s" >"$f" 2>&1
			ran $? "ncu gemm $who $s"
			grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Grid Size|Cluster Size|Waves Per SM|Registers Per|Issue Slots Busy|Executed Ipc Active" "$f" | head -12
		done
	done
fi
# Inductor's caches (FX graphs, GEMM autotuning) in an ignored folder of the
# tree, which a warm device machine keeps between calls: the autotune step
# pays the cold max-autotune compile once, the block step then measures
# every configuration in one process
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.dev/inductor}
if has autotune; then
	build_package "$OUT/autotune_build.log"
	mkdir -p "$TORCHINDUCTOR_CACHE_DIR"
	start=$(date +%s)
	timeout ${JITK_AUTOTUNE_S:-540} python3 examples/qwen_image_block.py --only B \
		>"$OUT/autotune.log" 2>&1
	ran $? "block max-autotune (cold compile, $(($(date +%s) - start)) s)"
	grep -vE "Warning|warn" "$OUT/autotune.log" | tail -12
fi
if has block; then
	# the Qwen-Image block (examples/qwen_image_block.py): byte identity, then
	# the configurations from an empty cache and from the one it filled
	build_package "$OUT/block_build.log"
	python3 examples/qwen_image_block.py --check >"$OUT/block.log" 2>&1
	ran $? "block check"
	rm -rf "$tmp/bc"
	JITK_CACHE_DIR=$tmp/bc timeout ${JITK_BLOCK_S:-400} python3 examples/qwen_image_block.py \
		--only "${JITK_BLOCK_ONLY:-acd}" >>"$OUT/block.log" 2>&1
	ran $? "block (empty cache)"
	JITK_CACHE_DIR=$tmp/bc timeout 120 python3 examples/qwen_image_block.py --only cd \
		>>"$OUT/block.log" 2>&1
	ran $? "block (warm cache)"
	grep -vE "Warning|warn" "$OUT/block.log" | tail -40
fi
if has torch; then
	python3 bench/torch_baseline.py --rows 128,1024,4096,16384 --hidden 3072 >"$OUT/torch.log" 2>&1
	ran $? torch
	grep -v Warning "$OUT/torch.log" | tail -24
fi
if has report; then
	cp docs/performance.md "$OUT/performance.md"
	python3 bench/report.py "$OUT" "$OUT/performance.md"
	ran $? report
fi
# At most 8 files come back from the machine: the logs as one archive.
( cd "$OUT" && ls *.log >/dev/null 2>&1 && tar czf logs.tar.gz *.log && rm -f *.log )
if [ -n "$failed" ]; then
	echo "device_run: failed:$failed"
	exit 1
fi
echo "device_run: every step passed"
