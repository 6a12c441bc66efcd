#!/bin/sh
# tests/spec_oom.sh [BUILD_DIR] - every allocation of a spec load failing in
# turn: tests/spec_dump.c built with -DSPEC_DUMP_OOM replaces malloc, loads
# each spec of specs/, tests/families/specs and tests/specs/{good,bad} once
# per allocation with that one failing, and requires the load to end as it
# does without failures or with JITK_ENOMEM "out of memory", having freed
# everything it allocated. Skips in a sanitizer build (the sanitizers
# replace malloc themselves).
set -u
b=${1:-build}
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	echo "SKIP: sanitizer build (spec_oom replaces malloc; the plain pass runs it)"
	exit 77
fi
cuda=$(sed -n 's/^cuda = //p' config.ninja)
cudalib=$(sed -n 's/^cudalib = //p' config.ninja)
# the library's own compile flags and libraries, as configure found them
cfg() { sed -n "s/^$1 = //p" config.ninja; }
flags="$(cfg yaml_cflags) $(cfg crypto_cflags) $(cfg curl_cflags) $(cfg hiredis_cflags) $(cfg xxhash_cflags) $(cfg hash_cflags) $(cfg nvtx_cflags)"
libs="$(cfg yaml_libs) $(cfg crypto_libs) $(cfg curl_libs) $(cfg hiredis_libs)"
mkdir -p "$b/tests"
cc -std=c11 -D_GNU_SOURCE -O1 -g -Werror=incompatible-pointer-types -DSPEC_DUMP_OOM -DJITK_COMPILE_HALF -DJITK_DATADIR=\"/nonexistent\" $flags \
	-Iruntime/include -Iruntime -I"$b" -I"$cuda/include" tests/spec_dump.c runtime/base/*.c \
	runtime/spec/*.c runtime/store/*.c runtime/compile/*.c -o "$b/tests/spec_oom" $libs -L"$cudalib" \
	-Wl,-rpath,"$cudalib" -lnvrtc -ldl -lpthread -lm || { echo "spec_oom: cannot build"; exit 1; }
"$b/tests/spec_oom" --oom specs/*.yaml tests/families/specs/*.yaml tests/specs/good/*.yaml \
	tests/specs/bad/*.yaml >"$b/tests/spec_oom.log"
if [ $? != 0 ]; then
	grep FAIL "$b/tests/spec_oom.log"
	echo "spec_oom: FAILED"
	exit 1
fi
awk '/^oom /{n++; a+=$3; e+=$8} END {printf "spec_oom: %d files, %d allocations failed one at a time, %d loads JITK_ENOMEM, none leaked\n", n, a, e}' "$b/tests/spec_oom.log"
