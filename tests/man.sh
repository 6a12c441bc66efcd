#!/bin/sh
# tests/man.sh - docs/jitk.1 renders with man -l, without warnings, and
# documents every command of jitk --help.
set -eu
b=${1:-build}
if ! command -v man >/dev/null 2>&1; then
	echo "SKIP: no man command"
	exit 77
fi
w=$(MANWIDTH=80 man --warnings -l docs/jitk.1 2>&1 >/dev/null || true)
[ -z "$w" ] || { echo "man warnings: $w"; exit 1; }
page=$(MANWIDTH=80 man -l docs/jitk.1 2>/dev/null)
for cmd in list explain source precompile "cache stats" "cache verify" "cache clear" "cache prune" \
	"cache pack" "cache unpack" bench "key generate" header; do
	echo "$page" | grep -q "^       $cmd" || { echo "man page lacks '$cmd'"; exit 1; }
done
# every variable the library or the CLI reads (from their sources)
vars=$(grep -rhoE '"JITK_[A-Z_]+"' runtime cli | tr -d '"' | sort -u)
[ -n "$vars" ] || { echo "man.sh: found no JITK_ variable in the sources"; exit 1; }
for var in $vars; do
	echo "$page" | grep -q "$var" || { echo "man page lacks $var"; exit 1; }
done
# every option of jitk bench's usage, and every one of its families
usage=$("$b/jitk" bench --help | sed '/^$/q')
for opt in $(echo "$usage" | grep -oE -- '--[a-z-]+' | sort -u); do
	echo "$page" | grep -q -- "$opt" || { echo "man page lacks jitk bench $opt"; exit 1; }
done
families=$(echo "$usage" | sed -n 's/.*--family \([a-z|]*\).*/\1/p' | tr '|' ' ')
[ -n "$families" ] || { echo "man.sh: jitk bench --help names no family"; exit 1; }
for f in $families; do
	echo "$page" | grep -qE -- "--family +$f" || { echo "man page lacks jitk bench --family $f"; exit 1; }
done
for cmd in list explain source precompile cache bench key header; do
	"$b/jitk" "$cmd" --help >/dev/null || { echo "jitk $cmd --help failed"; exit 1; }
done
echo "man: renders cleanly and covers every command and variable"
