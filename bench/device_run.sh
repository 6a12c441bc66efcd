#!/bin/sh
# bench/device_run.sh [STEPS] - what one call on the GPU machine runs, from
# the repository root, with build/ (and build/devlibs: the shared libraries
# the machine lacks) carried along. Logs go to $OUT (or /tmp/jitk-out).
# STEPS: any of tests memcheck racecheck triton sass precompile nvrtc bench plotdata sweep python
# torch report (default all but sweep). report writes $OUT/performance.md (docs/performance.md
# with this run's tables, bench/report.py) and, where matplotlib is, $OUT/img/bandwidth-h200.png;
# fetch the logs into bench/results/DATE and run bench/report.py there to update docs/.
set -u
OUT=${OUT:-/tmp/jitk-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/build/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 JITK_TEST_ROOT="$PWD" JITK_LIBRARY="$PWD/build/libjitk.so"
steps=${1:-"tests memcheck racecheck triton sass precompile nvrtc bench plotdata python torch report"}
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
# A spec set that allows the fused fp8 symbols on sm_90 (tests do the same).
rm -rf /tmp/specs90 && mkdir -p /tmp/specs90
sed "s|      - arch: { min: sm_100 }|      - arch: { min: sm_90 }|; s|template: ../templates/|template: $PWD/templates/|" \
	specs/norm_scale_shift.yaml >/tmp/specs90/norm_scale_shift.yaml
sed "s|template: ../templates/|template: $PWD/templates/|" specs/static_quant_fp8.yaml >/tmp/specs90/static_quant_fp8.yaml
if has tests; then
	rm -rf /tmp/dump && mkdir -p /tmp/dump
	JITK_GPU_DUMP=/tmp/dump build/tests/test_gpu >"$OUT/test_gpu.log" 2>&1
	echo "test_gpu rc=$?"; grep -E "^\(a\)|^graph|^large|PASSED|FAILED|SKIPPED" "$OUT/test_gpu.log"
	for t in test_runtime test_cache test_compile test_spec; do
		build/tests/$t >"$OUT/$t.log" 2>&1; echo "$t rc=$?"
	done
fi
if has memcheck; then
	JITK_GPU_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/test_gpu \
		>"$OUT/memcheck.log" 2>&1
	echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
fi
if has racecheck; then
	JITK_GPU_QUICK=1 compute-sanitizer --tool racecheck --error-exitcode 3 build/tests/test_gpu \
		>"$OUT/racecheck.log" 2>&1
	echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | tail -3
fi
if has triton; then
	python3 bench/triton_check.py /tmp/dump >"$OUT/triton.log" 2>&1; echo "triton rc=$?"
	tail -12 "$OUT/triton.log"
fi
if has sass; then
	rm -rf /tmp/pc /tmp/cubins
	build/jitk precompile --specs /tmp/specs90 --cache /tmp/pc --arch sm_90,sm_100 >/dev/null
	python3 bench/extract_cubins.py /tmp/pc /tmp/cubins >/dev/null
	for f in /tmp/cubins/*.sm_90.cubin; do
		cuobjdump -sass "$f" >/tmp/sass.txt
		printf '%s LDG.128=%s LDG.64=%s LDG.32=%s LDG.U16=%s STG.128=%s LDL/STL=%s\n' "$(basename "$f")" \
			"$(grep -c 'LDG.E.128' /tmp/sass.txt)" "$(grep -c 'LDG.E.64' /tmp/sass.txt)" \
			"$(grep -cE 'LDG.E(.CONSTANT)? ' /tmp/sass.txt)" "$(grep -c 'LDG.E.U16' /tmp/sass.txt)" \
			"$(grep -c 'STG.E.128' /tmp/sass.txt)" "$(grep -cE 'LDL|STL' /tmp/sass.txt)"
	done >"$OUT/sass.log"
	cat "$OUT/sass.log"
fi
if has precompile; then
	for j in 16 2 1; do
		rm -rf /tmp/pcj
		build/jitk precompile --specs specs --cache /tmp/pcj --arch sm_90,sm_100 -j $j | tail -1
	done
	build/jitk precompile --specs specs --cache /tmp/pcj --arch sm_90,sm_100 | tail -1
	for i in 1 2 3; do
		rm -rf /tmp/pcx
		build/jitk source fused_norm_scale_shift_fp8 --arch sm_100 --specs specs >/tmp/s.cu
		build/jitk source fused_norm_scale_shift_fp8 --arch sm_100 --specs specs --options >/tmp/s.opt
		a=$(date +%s%N); build/nvrtc_alone /tmp/s.cu /tmp/s.opt >/dev/null; b=$(date +%s%N)
		build/jitk precompile 'fused_norm_scale_shift_fp8[hidden=3072]' --specs specs --cache /tmp/pcx --arch sm_100 >/dev/null; c=$(date +%s%N)
		build/jitk precompile 'fused_norm_scale_shift_fp8[hidden=3072]' --specs specs --cache /tmp/pcx --arch sm_100 >/dev/null; d=$(date +%s%N)
		echo "cold compile, whole processes: nvrtc_alone $(( (b-a)/1000000 )) ms, jitk precompile $(( (c-b)/1000000 )) ms, jitk cache hit $(( (d-c)/1000000 )) ms"
	done
fi
if has nvrtc; then
	sh bench/nvrtc_study.sh sm_90 2>&1 | grep -v warning | tee "$OUT/nvrtc.log"
fi
if has bench; then
	build/jitk bench --specs /tmp/specs90 >"$OUT/bench.log" 2>&1; echo "bench rc=$?"
	cat "$OUT/bench.log"
fi
if has plotdata; then
	build/jitk bench --specs /tmp/specs90 --hidden 3072 --rows 128,256,512,1024,2048,4096,8192,16384 \
		--skip-jit >"$OUT/bench_plot.log" 2>&1
	echo "bench (plot rows) rc=$?"; grep -E "^(fused|split)" "$OUT/bench_plot.log"
fi
if has sweep; then
	python3 bench/sweep.py "$OUT/sweep.md" 3072 4096,16384 2>&1 | tail -40
fi
if has python; then
	python3 tests/python/test_binding.py >"$OUT/python.log" 2>&1; echo "python binding (CPU part) rc=$?"
	python3 tests/python/test_torch.py >>"$OUT/python.log" 2>&1; echo "python binding (torch) rc=$?"
	grep -E "^Ran|^OK|FAILED|Error" "$OUT/python.log"
fi
if has torch; then
	python3 bench/torch_baseline.py --rows 128,1024,4096,16384 --hidden 3072 >"$OUT/torch.log" 2>&1
	echo "torch rc=$?"; cat "$OUT/torch.log" | grep -v Warning | tail -24
fi
if has report; then
	cp docs/performance.md "$OUT/performance.md"
	python3 bench/report.py "$OUT" "$OUT/performance.md"
fi
