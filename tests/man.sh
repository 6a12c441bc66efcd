#!/bin/sh
# tests/man.sh - docs/jitk.1 renders with man -l, without warnings, and
# documents every command of jitk --help.
set -eu
b=${1:-build}
if ! command -v man >/dev/null 2>&1; then
	echo "SKIP: no man command"
	exit 0
fi
w=$(MANWIDTH=80 man --warnings -l docs/jitk.1 2>&1 >/dev/null || true)
[ -z "$w" ] || { echo "man warnings: $w"; exit 1; }
page=$(MANWIDTH=80 man -l docs/jitk.1 2>/dev/null)
for cmd in list explain source precompile "cache stats" "cache verify" "cache clear" "cache prune" \
	"cache pack" "cache unpack" bench; do
	echo "$page" | grep -q "^       $cmd" || { echo "man page lacks '$cmd'"; exit 1; }
done
for var in JITK_CACHE_DIR JITK_CACHE_PATH JITK_SPECS JITK_NO_COMPILE JITK_FORCE_COMPILE JITK_LOG JITK_DUMP_DIR JITK_CACHE_MAX_BYTES JITK_CACHE_READONLY \
	JITK_REMOTE_CACHE JITK_REMOTE_READONLY JITK_REMOTE_LEASE; do
	echo "$page" | grep -q "$var" || { echo "man page lacks $var"; exit 1; }
done
for cmd in list explain source precompile cache bench; do
	"$b/jitk" "$cmd" --help >/dev/null || { echo "jitk $cmd --help failed"; exit 1; }
done
echo "man: renders cleanly and covers every command and variable"
