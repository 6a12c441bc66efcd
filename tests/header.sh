#!/bin/sh
# tests/header.sh - jitk.h compiles on its own as C99 (-pedantic -Werror)
# and as C++ (g++), and a C++ translation unit can use its macros; so do
# the typed-call headers `jitk header` writes for every family of the
# specs (and of the test families), all included together.
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

# the typed calls of every family, generated and compiled together
fams=
for dir in specs tests/families/specs; do
	for f in $(JITK_SPECS=$dir "$b/jitk" list | awk 'NR > 1 { print $2 }' | sort -u); do
		mkdir -p "$out/$dir/jitk"
		"$b/jitk" header "$f" --specs "$dir" -o "$out/$dir/jitk/$f.h"
		fams="$fams $dir:$f"
	done
done
[ -n "$fams" ] || { echo "header: jitk list named no family"; exit 1; }
{
	for df in $fams; do printf '#include "jitk/%s.h"\n' "${df#*:}"; done
	printf 'int main(void)\n{\n\treturn 0;\n}\n'
} >"$out/typed.c"
cp "$out/typed.c" "$out/typed.cc"
inc="-Iruntime/include -I$out/specs -I$out/tests/families/specs"
cc -std=c99 -pedantic -Werror -Wall -Wextra -Wshadow -Wmissing-prototypes $inc -c "$out/typed.c" -o "$out/typed.o"
g++ -std=c++11 -pedantic -Werror -Wall -Wextra -Wshadow $inc -c "$out/typed.cc" -o "$out/typed_cxx.o"
# the same text twice is the same file (restat keeps what includes it)
"$b/jitk" header static_quant_fp8 --specs specs -o "$out/again.h"
cmp -s "$out/again.h" "$out/specs/jitk/static_quant_fp8.h" ||
	{ echo "header: jitk header wrote two different texts for one spec"; exit 1; }
echo "header: C99, C11, C++11 and C++17 with -pedantic -Werror, and the typed calls of $(echo "$fams" | wc -w) families: ok"
