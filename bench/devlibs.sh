#!/bin/sh
# bench/devlibs.sh [BUILD_DIR] - copy into BUILD_DIR/devlibs the shared
# libraries that jitk's binaries need and the GPU machine's image lacks
# (that image has CUDA, Python and compilers, not libyaml, cmocka,
# hiredis, or libcurl and its dependencies): every library they link but
# the C runtime's and CUDA's, so that bench/device_run.sh can run the
# binaries built here.
set -eu
b=${1:-build}
mkdir -p "$b/devlibs"
for f in "$b/jitk" "$b/libjitk.so" "$b"/tests/test_*; do
	case $f in *.o | *.d) continue ;; esac
	[ -x "$f" ] || [ -f "$f" ] || continue
	ldd "$f" 2>/dev/null | awk '/=> \// { print $3 }'
done | sort -u | grep -vE '/(libc|libm|libdl|librt|libresolv|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libnvrtc[^/]*)\.so' |
	while read -r lib; do
	cp -L "$lib" "$b/devlibs/"
done
ls "$b/devlibs"
