#!/bin/sh
# tests/install.sh BUILD_DIR - install into a temporary DESTDIR, then build
# and run a small C program against it with pkg-config alone; the
# installed jitk must find its installed specs with no environment set.
set -eu
b=${1:-build}
dest=$(mktemp -d "${TMPDIR:-/tmp}/jitk-install-XXXXXX")
trap 'rm -rf "$dest"' EXIT
prefix=/opt/jitk-test
DESTDIR=$dest sh tools/install.sh "$prefix" "$b" >/dev/null
cat >"$dest/use.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <jitk.h>
#include <jitk/norm_scale_shift.h> /* the typed calls generated from the specs too */
int main(void)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c;
	char *text = NULL;

	o.cache_dir = ""; /* in memory: the test writes nothing outside DESTDIR */
	if (jitk_compiler_new(&c, &o)) {
		fprintf(stderr, "%s\n", jitk_error_last()->message);
		return 1;
	}
	printf("jitk %s: %zu instances\n", JITK_VERSION, jitk_instance_count(c));
	if (jitk_explain(&text, c, "fused_norm_scale_shift_fp8", "sm_90"))
		return 1;
	fputs(text, stdout);
	free(text);
	jitk_compiler_free(c);
	return 0;
}
C
flags=$(PKG_CONFIG_PATH=$dest$prefix/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --cflags --libs jitk)
echo "pkg-config --cflags --libs jitk: $flags"
san=$(sed -n 's/^san = //p' config.ninja)
cc -std=c99 -Wall -Werror $san "$dest/use.c" -o "$dest/use" $flags
env -u JITK_SPECS LD_LIBRARY_PATH="$dest$prefix/lib" "$dest/use" >"$dest/out.txt"
cat "$dest/out.txt"
# as many instances as the build tree's CLI lists from the same specs
n=$(JITK_SPECS=specs "$b/jitk" list | tail -n +2 | wc -l)
grep -q "^jitk .*: $n instances$" "$dest/out.txt"
grep -qF "fused_norm_scale_shift_fp8[hidden=3072] on sm_90: runs" "$dest/out.txt"
# the installed CLI, likewise
env -u JITK_SPECS "$dest$prefix/bin/jitk" list | grep -q "^static_quant_fp8 "
"$dest$prefix/bin/jitk" --version
echo "install: ok"
