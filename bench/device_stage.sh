#!/bin/sh
# bench/device_stage.sh [BUILD_DIR] [DEST] - stage what a call on the GPU
# machine runs into DEST (default .dev/b, ignored by git, small enough to
# carry): the CLI, the shared library, the test and bench binaries (no
# objects), and DEST/devlibs (bench/devlibs.sh). Then, on that machine:
# JITK_BUILD=DEST sh bench/device_run.sh STEPS, with DEST in the carry.
set -eu
b=${1:-build}
d=${2:-.dev/b}
# what it stages is built first (the test binaries come with `ninja test`
# only: a copy made before had none, and the GPU machine found no tests)
if [ "$b" = build ]; then
	ninja all test-binaries >/dev/null
fi
[ -x "$b/tests/test_gpu" ] || {
	echo "device_stage.sh: $b/tests/test_gpu is not built" >&2
	exit 1
}
rm -rf "$d"
mkdir -p "$d/tests"
cp -P "$b"/jitk "$b"/libjitk.so* "$d/"
for f in "$b"/fresh_hit "$b"/ranks "$b"/nvrtc_alone "$b"/qwen_block; do
	[ -x "$f" ] && cp "$f" "$d/"
done
for f in "$b"/tests/test_* "$b"/tests/gemm_checks; do
	case $f in *.o | *.d) continue ;; esac
	[ -x "$f" ] && cp "$f" "$d/tests/"
done
sh bench/devlibs.sh "$d" >/dev/null
du -sh "$d"
