#!/bin/sh
# tests/families_out.sh BUILD_DIR - no kernel family lives in the
# library's C (docs/design.md, "Families are data"): a copy of the tree
# (git ls-files) without any family-specific C - runtime/families/, every
# runtime/include/jitk/ header but version.h - configures and builds with
# BUILD_DIR's options (compiler, CUDA, sanitizers); the library, the CLI
# and the example build (the example's typed calls come from its spec,
# jitk header), generic tests pass there, and libjitk.so exports only
# jitk_* functions that jitk.h declares, none of them naming a family or
# a symbol of the specs.
set -eu
b=${1:-build}
command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1 ||
	{ echo "SKIP: not a git checkout (the copy is git ls-files)"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm (binutils)"; exit 77; }
[ -f config.ninja ] || { echo "families_out: run ./configure first"; exit 1; }
b=$(cd "$b" && pwd)
work=$b/families-out
rm -rf "$work"
mkdir -p "$work/src"
trap 'rm -rf "$work"' EXIT

# the working tree as git sees it (tracked and untracked files, not the
# ignored ones), without family-specific C
git ls-files -z --cached --others --exclude-standard |
	tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$work/src" -xf -
rm -rf "$work/src/runtime/families"
for h in "$work/src"/runtime/include/jitk/*.h; do
	[ "$(basename "$h")" = version.h ] || rm -f "$h"
done

# BUILD_DIR's configuration: the same compiler, toolkit, optimization and
# sanitizers; no CUTLASS (no generic test needs it) and no installing
opt() { sed -n "s/^$1 = //p" config.ninja; }
set -- --cc="$(opt cc)" --cuda="$(opt cuda)" --without-cutlass --no-install-deps
case $(opt opt) in *-O0*) set -- "$@" --debug ;; esac
san=$(opt san | sed -n 's/.*-fsanitize=\([^ ]*\).*/\1/p')
[ -n "$san" ] && set -- "$@" --sanitize="$san"
cd "$work/src"
./configure "$@" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
ninja=$(command -v ninja || command -v ninja-build)
"$ninja" -j "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)" all build/tests/test_spec \
	build/tests/test_dlpack build/tests/test_deploy >"$work/build.log" 2>&1 ||
	{ tail -n 40 "$work/build.log"; echo "families_out: the tree without family C does not build"; exit 1; }
echo "families_out: library, CLI and example built without family C"

# generic tests, in the copy
sh tests/run build test_spec test_dlpack test_deploy cli.sh >"$work/tests.log" 2>&1 ||
	{ cat "$work/tests.log"; echo "families_out: generic tests failed without family C"; exit 1; }
tail -n 1 "$work/tests.log"

# what libjitk.so exports: jitk_ functions of jitk.h, no family's name
fail=0
words=$(JITK_SPECS=specs build/jitk list | awk 'NR > 1 { sub(/\[.*/, "", $1); print $1; print $2 }' | sort -u)
[ -n "$words" ] || { echo "families_out: jitk list named no symbol"; exit 1; }
n=0
for sym in $(nm -D --defined-only build/libjitk.so | awk '{ print $NF }'); do
	n=$((n + 1))
	case $sym in
	jitk_*) ;;
	*) echo "families_out: libjitk.so exports $sym (not jitk_*)"; fail=1; continue ;;
	esac
	grep -qE "\\<$sym\\(" runtime/include/jitk.h ||
		{ echo "families_out: libjitk.so exports $sym, which jitk.h does not declare"; fail=1; }
	for w in $words; do
		case $sym in *"$w"*)
			echo "families_out: libjitk.so exports $sym, which names $w of the specs"
			fail=1 ;;
		esac
	done
done
[ "$n" -gt 0 ] || { echo "families_out: nm found no export in libjitk.so"; exit 1; }
[ $fail = 0 ] || exit 1
echo "families_out: libjitk.so exports $n functions, all of jitk.h, none naming a family or symbol: ok"
