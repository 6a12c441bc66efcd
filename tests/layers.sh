#!/bin/sh
# tests/layers.sh - the dependency rule of runtime/ (docs/design.md):
# base <- spec <- store <- compile <- gpu, the CLI and the examples on the public
# headers only (and the typed-call headers generated from the specs), and
# no family named in the library. Fails naming each offending include or
# mention.
set -u
bad=0
say() { echo "layers: $*"; bad=1; }

# Which layers a file in each folder may include (besides system headers
# and the public jitk.h / jitk/version.h).
allowed() {
	case $1 in
	runtime/base/*) echo "base" ;;
	runtime/spec/*) echo "base spec" ;;
	runtime/store/*) echo "base spec store" ;;
	runtime/compile/*) echo "base spec store compile" ;;
	runtime/gpu/*) echo "base spec store compile gpu" ;;
	cli/* | examples/*) echo "" ;;
	esac
}

for f in runtime/base/*.[ch] runtime/spec/*.[ch] runtime/store/*.[ch] runtime/compile/*.[ch] runtime/gpu/*.[ch] \
	cli/*.[ch] examples/*.c; do
	[ -e "$f" ] || continue
	ok=$(allowed "$f")
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		jitk.h | jitk/*.h) continue ;;
		cli.h | bench.h | json.h) case $f in cli/*) continue ;; esac ;;
		# configure's generated header (the packages it found), in the build dir
		packages_config.h) case $f in runtime/compile/packages.c) continue ;; esac ;;
		esac
		layer=${inc%%/*}
		[ "$layer" = "$inc" ] && { say "$f includes \"$inc\" (not a layer header)"; continue; }
		case " $ok " in
		*" $layer "*) ;;
		*) say "$f includes \"$inc\": $layer/ is not below $(dirname "$f")/" ;;
		esac
	done
done

# The bindings see the public headers and their own (_args.h) only.
for f in bindings/python/jitk/*.c bindings/python/jitk/*.cpp bindings/python/jitk/*.h; do
	[ -e "$f" ] || continue
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		jitk.h | jitk/*.h | _args.h) ;;
		*) say "$f includes \"$inc\" (a binding sees the public headers only)" ;;
		esac
	done
done

# Angle includes: never a project header by the back door, and each
# third-party library only in the files that own it (the layering of what
# is linked: libcurl and hiredis behind optlib.c's loader, the driver's
# headers in gpu/, NVRTC in compile/).
for f in runtime/*/*.[ch] runtime/include/*.h runtime/include/jitk/*.h cli/*.[ch] examples/*.c \
	bindings/python/jitk/*.c bindings/python/jitk/*.cpp bindings/python/jitk/*.h; do
	[ -e "$f" ] || continue
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/\1/p' "$f"); do
		case $inc in
		base/* | spec/* | store/* | compile/* | gpu/* | jitk.h | jitk/*)
			say "$f includes <$inc>: project headers are included with quotes" ;;
		curl/* | hiredis/*)
			case $f in runtime/store/optlib.[ch] | runtime/store/remote.c | runtime/store/lease.c) ;;
			*) say "$f includes <$inc>: only optlib.c's users may (libjitk loads it on use)" ;;
			esac ;;
		cuda.h | cudaTypedefs.h)
			case $f in runtime/gpu/* | cli/* | examples/*) ;;
			*) say "$f includes <$inc>: the driver's headers belong to gpu/" ;;
			esac ;;
		nvrtc.h)
			case $f in runtime/compile/*) ;;
			*) say "$f includes <$inc>: NVRTC belongs to compile/" ;;
			esac ;;
		yaml.h)
			case $f in runtime/spec/*) ;;
			*) say "$f includes <$inc>: libyaml belongs to spec/" ;;
			esac ;;
		esac
	done
done

# ... and the build compiles those clients with the public include
# directory only (build.ninja's rule pcc: no -Iruntime), so that an
# internal include does not even compile.
for f in cli/*.c examples/*.c; do
	[ -e "$f" ] || continue
	grep -qE "^build [^:]*: pcc $f( \|\| typed-headers)?\$" build.ninja ||
		say "build.ninja does not compile $f with rule pcc (the public headers only)"
done
sed -n '/^pubcflags/,/[^$]$/p' build.ninja | grep -qE -- '-Iruntime( |$)' &&
	say "build.ninja's pubcflags names -Iruntime"

# Only the driver half includes the CUDA driver's headers.
for f in runtime/base/*.[ch] runtime/spec/*.[ch] runtime/store/*.[ch] runtime/compile/*.[ch]; do
	grep -qE '#include <(cuda|cudaTypedefs)\.h>' "$f" && say "$f includes a CUDA driver header"
done

# The library names no kernel family: family-specific C is generated from
# the specs (jitk header) or lives outside it.
[ -d runtime/families ] && say "runtime/families/ exists: a family's C is generated from its spec (jitk header), not in the library"
hits=$(grep -rnE 'norm_scale_shift|static_quant|input_scale|\<hidden\>' runtime \
	--include='*.c' --include='*.h' | grep -v 'visibility')
[ -n "$hits" ] && say "the library mentions a family:
$hits"

[ $bad = 0 ] && echo "layers: base <- spec <- store <- compile <- gpu; CLI, examples and bindings on public headers; angle includes where their library belongs; no family in the library: ok"
exit $bad
