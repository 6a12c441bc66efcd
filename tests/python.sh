#!/bin/sh
# tests/python.sh BUILD_DIR - the Python binding's CPU tests with the
# machine's python3 (no PyTorch needed); skips where there is no python3.
set -u
b=${1:-build}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: no python3"
	exit 0
fi
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	echo "SKIP: sanitizer build (python3 itself is not instrumented; the plain build runs these)"
	exit 0
fi
JITK_LIBRARY=$(pwd)/$b/libjitk.so python3 tests/python/test_binding.py 2>&1
