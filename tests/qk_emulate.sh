#!/bin/sh
# tests/qk_emulate.sh BUILD_DIR - templates/qk_norm_rope.cuh compiled for the
# host and run there (tests/qk_emulate/: CUDA threads as fibers, shuffles
# and barriers exact, fp32 rounding as on the GPU): the kernels' logic -
# fused == split, views, strides, positions, out of place, vector widths
# and tunings giving the same bytes, every vector access inside its buffer
# and aligned - checked without a GPU. The PTX helpers of common.cuh have
# host versions (tests/qk_emulate/common_host.h); the rest of common.cuh
# is the real file's. Skips without a C++17 compiler.
set -eu
cxx=${CXX:-g++}
if ! command -v "$cxx" >/dev/null 2>&1; then
	echo "qk_emulate: SKIP: no C++ compiler ($cxx)"
	exit 77
fi
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-qkemu-XXXXXX")
trap 'rm -rf "$w"' EXIT
cp templates/qk_norm_rope.cuh "$w/"
{
	echo '#pragma once'
	echo '#include "common_host.h"'
	echo 'namespace jitk {'
	sed -n '/^\/\/ Sum over each aligned group/,/^} \/\/ namespace jitk/p' templates/common.cuh
} >"$w/common.cuh"
"$cxx" -std=c++17 -O1 -ffp-contract=off -Wall -Wno-unused-parameter -Wno-unknown-pragmas -I"$w" -Itests/qk_emulate -Itests \
	tests/qk_emulate/drive.cc tests/qk_emulate/emu.cc -o "$w/drive"
"$w/drive"
