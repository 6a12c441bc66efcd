#!/bin/sh
# tests/hooks.sh BUILD_DIR - the cache's test hooks (a write delay, fault
# injection, a pretended uid) exist only in the test build
# (tests/tests.ninja): the shipped libraries and the jitk binary hold no
# "JITK_TEST_" string and no "jitk__test_" symbol, and no environment
# variable can reach a hook.
set -eu
b=${1:-build}
fail=0
# The check must be able to see a hook where there is one.
strings -a "$b/tests/cache_hooks.o" | grep -q '^jitk__test_assume_uid$' ||
	{ echo "hooks: cannot see the hooks in $b/tests/cache_hooks.o"; exit 1; }
for f in "$b/libjitk.so" "$b/libjitk.a" "$b/libjitk-compile.a" "$b/jitk"; do
	[ -f "$f" ] || { echo "hooks: $f is missing"; exit 1; }
	for s in JITK_TEST_ jitk__test_; do
		if strings -a "$f" | grep -q "$s"; then
			echo "hooks: $f contains '$s':"
			strings -a "$f" | grep "$s" | sort -u | sed 's/^/  /'
			fail=1
		fi
	done
	if nm -a "$f" 2>/dev/null | grep -q 'jitk__test_'; then
		echo "hooks: $f has a jitk__test_ symbol"
		fail=1
	fi
done
if nm -D "$b/libjitk.so" | grep -q 'jitk__test_'; then
	echo "hooks: $b/libjitk.so exports a jitk__test_ symbol"
	fail=1
fi
[ "$fail" = 0 ] || exit 1
echo "hooks: none in libjitk.so, libjitk.a, libjitk-compile.a or jitk"
