#!/bin/sh
# tests/ci_image.sh BUILD_DIR - what docs/ci-images.md describes: precompile
# for an architecture list with no GPU, move the cache elsewhere (it is
# content-addressed and relocatable), use it as a read-only layer with
# compiling disabled: every symbol must come from the layer. In a
# sanitizer build, over the data-only test family (the same paths through
# the library; the plain build precompiles the shipped specs' 510 kernels).
set -eu
b=${1:-build}
specs=specs miss=static_quant_fp8
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	specs=tests/families/specs miss=tadd2
fi
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-ci-XXXXXX")
trap 'chmod -R u+w "$w"; rm -rf "$w"' EXIT
. "$(dirname "$0")/shlib"
light_names "$b/jitk" "$specs" >"$w/names"
n=$(wc -l <"$w/names")
# shellcheck disable=SC2046
"$b/jitk" precompile $(cat "$w/names") --specs "$specs" --cache "$w/built" --arch sm_90,sm_100 -j 2 >"$w/pre.txt"
tail -1 "$w/pre.txt"
mv "$w/built" "$w/image-cache"
chmod -R a-w "$w/image-cache"
# a fresh writable cache that stays empty, the image as a layer
# shellcheck disable=SC2046
JITK_CACHE_PATH=$w/image-cache JITK_NO_COMPILE=1 \
	"$b/jitk" precompile $(cat "$w/names") --specs "$specs" --cache "$w/user" --arch sm_90,sm_100 >"$w/use.txt"
tail -1 "$w/use.txt"
# every instance named, for each of the two architectures
grep -q ": 0 compiled, $((2 * n)) cached, 0 remote, 0 failed, 0 gated$" "$w/use.txt"
[ "$(find "$w/user" -name '*.jitk' | wc -l)" = 0 ]
# a miss is an error with compiling disabled
if JITK_CACHE_PATH=$w/image-cache JITK_NO_COMPILE=1 \
	"$b/jitk" precompile "$miss" --specs "$specs" --cache "$w/user" --arch sm_89 >"$w/miss.txt" 2>&1; then
	echo "a miss with JITK_NO_COMPILE=1 did not fail"; exit 1
fi
grep -q "compiling is disabled (JITK_NO_COMPILE)" "$w/miss.txt"
echo "ci image: ok"
