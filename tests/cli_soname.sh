#!/bin/sh
# tests/cli_soname.sh BUILD_DIR - the build tree has the names an installed
# libjitk has (libjitk.so -> libjitk.so.0 -> libjitk.so.VERSION, the SONAME
# being libjitk.so.0), so that a program linked with -LBUILD -ljitk starts,
# with LD_LIBRARY_PATH=BUILD or with an rpath and no LD_LIBRARY_PATH.
set -eu
b=${1:-build}
version=$(sed -n 's/^#define JITK_VERSION "\(.*\)"/\1/p' runtime/include/jitk/version.h)
so_version=$(sed -n 's/^so_version = //p' build.ninja)
[ "$so_version" = "$version" ] || { echo "build.ninja so_version $so_version is not JITK_VERSION $version"; exit 1; }
[ -f "$b/libjitk.so.$version" ] && [ ! -L "$b/libjitk.so.$version" ] ||
	{ echo "$b/libjitk.so.$version is not a file"; exit 1; }
[ "$(readlink "$b/libjitk.so.0")" = "libjitk.so.$version" ] || { echo "$b/libjitk.so.0 does not point at libjitk.so.$version"; exit 1; }
[ "$(readlink "$b/libjitk.so")" = "libjitk.so.0" ] || { echo "$b/libjitk.so does not point at libjitk.so.0"; exit 1; }
if command -v readelf >/dev/null 2>&1; then
	readelf -d "$b/libjitk.so.$version" | grep -q 'Library soname: \[libjitk.so.0\]' ||
		{ echo "the SONAME is not libjitk.so.0"; exit 1; }
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-soname-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#include <jitk.h>
int main(void)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c;

	o.specs = "specs";
	o.cache_dir = "";
	if (jitk_compiler_new(&c, &o)) {
		fprintf(stderr, "%s\n", jitk_error_last()->message);
		return 1;
	}
	printf("%zu instances\n", jitk_instance_count(c));
	jitk_compiler_free(c);
	return 0;
}
C
san=$(sed -n 's/^san = //p' config.ninja)
abs=$(cd "$b" && pwd)
# shellcheck disable=SC2086
cc -std=c99 -Wall -Werror $san -Iruntime/include "$tmp/use.c" -o "$tmp/use" -L"$b" -ljitk
# shellcheck disable=SC2086
cc -std=c99 -Wall -Werror $san -Iruntime/include "$tmp/use.c" -o "$tmp/use-rpath" -L"$b" -ljitk \
	-Wl,-rpath,"$abs"
# the library counts as many instances as the CLI lists
want="$("$b/jitk" list --specs specs | tail -n +2 | wc -l) instances"
out=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$b" "$tmp/use")
[ "$out" = "$want" ] || { echo "linked with -L$b -ljitk, LD_LIBRARY_PATH=$b: '$out'"; exit 1; }
out=$(env -u LD_LIBRARY_PATH "$tmp/use-rpath")
[ "$out" = "$want" ] || { echo "linked with -L$b -ljitk and an rpath: '$out'"; exit 1; }
# libcurl and hiredis are loaded when the fleet tier is used, never linked
# (a machine with only the driver runs the rest); without them the tier
# says why it is off and the work goes on.
if command -v readelf >/dev/null 2>&1; then
	if readelf -d "$b/libjitk.so.$version" | grep NEEDED | grep -Eq 'libcurl|libhiredis'; then
		echo "libjitk links libcurl or hiredis:"
		readelf -d "$b/libjitk.so.$version" | grep NEEDED
		exit 1
	fi
fi
without() { # VAR: precompile with that library missing, its warnings
	env "$1" JITK_REMOTE_CACHE=http://127.0.0.1:9 JITK_REMOTE_LEASE=redis://127.0.0.1:9 \
		JITK_LOG=warn "$b/jitk" precompile tadd3 --arch sm_90 --specs tests/families/specs \
		--cache "$tmp/cache-${1%%=*}" 2>&1 >/dev/null || { echo "precompile with $1 failed"; exit 1; }
}
err=$(without JITK_LIBCURL=/nonexistent/libcurl.so.4)
case $err in
*"remote cache not used: it needs libcurl, and /nonexistent/libcurl.so.4 could not be loaded"*) ;;
*) echo "no word that the remote is off without libcurl: $err"; exit 1 ;;
esac
err=$(without JITK_LIBHIREDIS=/nonexistent/libhiredis.so)
case $err in
*"not used: leases need hiredis, and /nonexistent/libhiredis.so could not be loaded"*) ;;
*) echo "no word that leases are off without hiredis: $err"; exit 1 ;;
esac
echo "soname: $b/libjitk.so -> libjitk.so.0 -> libjitk.so.$version; -L$b -ljitk programs start; libcurl and hiredis loaded only by the fleet tier"
