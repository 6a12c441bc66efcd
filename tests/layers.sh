#!/bin/sh
# tests/layers.sh - the dependency rule of runtime/ (docs/design.md):
# base <- spec <- build <- gpu <- families, the CLI on the public headers
# only, and no family named in the generic core. Fails naming each
# offending include or mention.
set -u
bad=0
say() { echo "layers: $*"; bad=1; }

# Which layers a file in each folder may include (besides system headers
# and the public jitk.h / jitk/version.h).
allowed() {
	case $1 in
	runtime/base/*) echo "base" ;;
	runtime/spec/*) echo "base spec" ;;
	runtime/build/*) echo "base spec build" ;;
	runtime/gpu/*) echo "base spec build gpu" ;;
	runtime/families/* | cli/* | examples/*) echo "" ;;
	esac
}

for f in runtime/base/*.[ch] runtime/spec/*.[ch] runtime/build/*.[ch] runtime/gpu/*.[ch] \
	runtime/families/*.[ch] cli/*.[ch] examples/*.c; do
	[ -e "$f" ] || continue
	ok=$(allowed "$f")
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		jitk.h | jitk/*.h) continue ;;
		cli.h | bench.h) case $f in cli/*) continue ;; esac ;;
		# configure's generated header (the packages it found), in the build dir
		packages_config.h) case $f in runtime/build/packages.c) continue ;; esac ;;
		esac
		layer=${inc%%/*}
		[ "$layer" = "$inc" ] && { say "$f includes \"$inc\" (not a layer header)"; continue; }
		case " $ok " in
		*" $layer "*) ;;
		*) say "$f includes \"$inc\": $layer/ is not below $(dirname "$f")/" ;;
		esac
	done
done

# ... and the build compiles those clients with the public include
# directory only (build.ninja's rule pcc: no -Iruntime), so that an
# internal include does not even compile.
for f in runtime/families/*.c cli/*.c examples/*.c; do
	[ -e "$f" ] || continue
	grep -qE "^build [^:]*: pcc $f\$" build.ninja ||
		say "build.ninja does not compile $f with rule pcc (the public headers only)"
done
sed -n '/^pubcflags/,/[^$]$/p' build.ninja | grep -qE -- '-Iruntime( |$)' &&
	say "build.ninja's pubcflags names -Iruntime"

# Only the driver half includes the CUDA driver's headers.
for f in runtime/base/*.[ch] runtime/spec/*.[ch] runtime/build/*.[ch] runtime/families/*.[ch]; do
	grep -qE '#include <(cuda|cudaTypedefs)\.h>' "$f" && say "$f includes a CUDA driver header"
done

# The generic core names no kernel family.
hits=$(grep -rnE 'norm_scale_shift|static_quant|input_scale|\<hidden\>' runtime \
	--include='*.c' --include='*.h' | grep -v '^runtime/families/' |
	grep -v '^runtime/include/jitk/norm.h' | grep -v 'visibility')
[ -n "$hits" ] && say "the generic core mentions a family:
$hits"

[ $bad = 0 ] && echo "layers: base <- spec <- build <- gpu <- families; CLI and families on public headers; no family in the core: ok"
exit $bad
