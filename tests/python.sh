#!/bin/sh
# tests/python.sh BUILD_DIR - the Python binding's CPU tests on the source
# tree with the machine's python3 (no PyTorch needed; with PyTorch, the op
# tests on the CPU run too); skips where there is no python3.
set -u
b=${1:-build}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: no python3"
	exit 77
fi
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	echo "SKIP: sanitizer build (python3 itself is not instrumented; the plain build runs these)"
	exit 77
fi
JITK_LIBRARY=$(pwd)/$b/libjitk.so python3 -m unittest -q tests/python/test_binding.py \
	tests/python/test_package.py 2>&1 || exit 1
# its own process: it registers the ops with the test family's specs
JITK_LIBRARY=$(pwd)/$b/libjitk.so python3 tests/python/test_torch_cpu.py 2>&1
