#!/bin/sh
# tests/fuzz.sh [BUILD_DIR [SECONDS [KEEP_DIR]]] - build the spec loader's
# libFuzzer target with clang (ASan + UBSan) and run it for SECONDS (default
# 20; the committed corpus came from longer runs), seeded with fuzz/corpus,
# the repository's specs and the good and bad test specs (their template
# paths rewritten to resolve from specs/). KEEP_DIR, when given, receives
# the grown corpus. Skips, saying so, where clang cannot build libFuzzer
# targets.
set -u
b=${1:-build}
secs=${2:-20}
cuda=$(sed -n 's/^cuda = //p' config.ninja)
yaml=$(pkg-config --cflags --libs yaml-0.1)
crypto=$(pkg-config --cflags --libs libcrypto)
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	echo "SKIP: sanitizer build (the fuzz target is instrumented itself; the plain pass runs it)"
	exit 77
fi
mkdir -p "$b/fuzz"
if ! command -v clang >/dev/null 2>&1 ||
   ! clang -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -g -O1 \
	-Iruntime/include -Iruntime -I"$cuda/include" fuzz/spec_fuzz.c runtime/spec/spec.c \
	runtime/spec/ytree.c runtime/spec/expr.c runtime/spec/options.c runtime/base/text.c runtime/base/error.c runtime/base/file.c runtime/base/hash.c runtime/base/arch.c runtime/base/arena.c runtime/store/image.c runtime/compile/instance.c \
	-o "$b/fuzz/spec_fuzz" $yaml $crypto 2>"$b/fuzz/build.log"; then
	echo "SKIP: clang with libFuzzer is not available (see $b/fuzz/build.log)"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/jitk-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp fuzz/corpus/* specs/*.yaml "$work/" 2>/dev/null
for f in tests/specs/bad/*.yaml tests/specs/good/*.yaml; do
	sed 's|\.\./\.\./\.\./templates/|../templates/|' "$f" >"$work/test-$(basename "$(dirname "$f")")-$(basename "$f")"
done
"$b/fuzz/spec_fuzz" -dict=fuzz/spec.dict -max_total_time="$secs" -max_len=65536 \
	-timeout=5 -rss_limit_mb=2048 -print_final_stats=1 "$work" >"$b/fuzz/run.log" 2>&1
rc=$?
[ $# -ge 3 ] && { mkdir -p "$3" && cp "$work"/* "$3"/; }
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|ERROR|SUMMARY" "$b/fuzz/run.log"
[ $rc = 0 ] || { tail -40 "$b/fuzz/run.log"; echo "fuzz: FAILED"; exit 1; }
echo "fuzz: $secs s, no finding"
