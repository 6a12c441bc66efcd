#!/bin/sh
# tests/ci_image.sh BUILD_DIR - what docs/ci-images.md describes: precompile
# for an architecture list with no GPU, move the cache elsewhere (it is
# content-addressed and relocatable), use it as a read-only layer with
# compiling disabled: every symbol must come from the layer.
set -eu
b=${1:-build}
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-ci-XXXXXX")
trap 'chmod -R u+w "$w"; rm -rf "$w"' EXIT
"$b/jitk" precompile --specs specs --cache "$w/built" --arch sm_90,sm_100 -j 2 >"$w/pre.txt"
tail -1 "$w/pre.txt"
mv "$w/built" "$w/image-cache"
chmod -R a-w "$w/image-cache"
# a fresh writable cache that stays empty, the image as a layer
JITK_CACHE_PATH=$w/image-cache JITK_NO_COMPILE=1 \
	"$b/jitk" precompile --specs specs --cache "$w/user" --arch sm_90,sm_100 >"$w/use.txt"
tail -1 "$w/use.txt"
grep -q ": 0 compiled, 280 cached, 0 remote, 0 failed, 0 gated$" "$w/use.txt"
[ "$(find "$w/user" -name '*.jitk' | wc -l)" = 0 ]
# a miss is an error with compiling disabled
if JITK_CACHE_PATH=$w/image-cache JITK_NO_COMPILE=1 \
	"$b/jitk" precompile static_quant_fp8 --specs specs --cache "$w/user" --arch sm_89 >"$w/miss.txt" 2>&1; then
	echo "a miss with JITK_NO_COMPILE=1 did not fail"; exit 1
fi
grep -q "compiling is disabled (JITK_NO_COMPILE)" "$w/miss.txt"
echo "ci image: ok"
