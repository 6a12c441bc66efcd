#!/bin/sh
# tests/header.sh - jitk.h compiles on its own as C99 (-pedantic -Werror)
# and as C++ (g++), and a C++ translation unit can use its macros.
set -eu
b=${1:-build}
out=$(mktemp -d "${TMPDIR:-/tmp}/jitk-header-XXXXXX")
trap 'rm -rf "$out"' EXIT
cat >"$out/c.c" <<'C'
#include "jitk.h"
int main(void)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime_options r = JITK_RUNTIME_OPTIONS_INIT;
	jitk_arg a;
	a.name = "n";
	a.type = JITK_ARG_I64;
	a.v.i64 = 1;
	return (int)o.version + (int)r.version + (int)a.type + JITK_VERSION_NUMBER * 0 - 5;
}
C
cp "$out/c.c" "$out/cxx.cc"
cc -std=c99 -pedantic -Werror -Wall -Wextra -Iruntime/include -c "$out/c.c" -o "$out/c.o"
cc -std=c11 -pedantic -Werror -Wall -Wextra -Iruntime/include -c "$out/c.c" -o "$out/c11.o"
g++ -std=c++11 -pedantic -Werror -Wall -Wextra -Iruntime/include -c "$out/cxx.cc" -o "$out/cxx.o"
g++ -std=c++17 -pedantic -Werror -Wall -Wextra -Iruntime/include -c "$out/cxx.cc" -o "$out/cxx17.o"
echo "header: C99, C11, C++11 and C++17 with -pedantic -Werror: ok"
