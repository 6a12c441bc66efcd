#!/bin/sh
# tests/cache.sh BUILD_DIR - jitk cache stats|verify|clear|prune from the
# command line, on missing, hostile and broken caches: exit status,
# messages, and what is left on disk (test_cache.c covers the library).
set -u
b=${1:-build}
jitk=$b/jitk
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-cache-XXXXXX")
trap 'rm -rf "$w"' EXIT
. "$(dirname "$0")/shlib"

# survives NAME FILE...: each FILE is still a regular file.
survives() {
	name=$1
	shift
	n=$((n + 1))
	for f in "$@"; do
		[ -f "$f" ] && [ ! -L "$f" ] && continue
		echo "FAIL: $name: $f is gone"
		fails=$((fails + 1))
		return
	done
}

precompile() {
	"$jitk" precompile static_quant_fp8 --specs specs --cache "$c" --arch sm_90 -j 1 >/dev/null ||
		{ echo "precompile failed"; exit 1; }
}

c=$w/c
precompile
entry=$(find "$c/v1" -name '*.jitk')
shard=$(dirname "$entry")
sh=$(basename "$shard")
other=ab
[ "$sh" = ab ] && other=cd
z61=$(printf '%061d' 0)

# A missing cache is not an empty one.
check "verify of a missing cache" 1 "^jitk: no cache at $w/nope\$" "$jitk" cache verify --cache "$w/nope"
for cmd in stats clear prune; do
	check "$cmd of a missing cache" 1 "no cache at $w/nope" "$jitk" cache "$cmd" --cache "$w/nope"
done
: >"$w/a-file"
check "stats of a file" 1 "no cache at $w/a-file \(not a directory\)" "$jitk" cache stats --cache "$w/a-file"

# Usage errors: exit 2, saying what was wrong.
for v in -5 abc 0x10 0 1.5G 10Q 1Gi ""; do
	check "prune --max-bytes '$v'" 2 "jitk: --max-bytes: '$v' is not a size" \
		"$jitk" cache prune --cache "$c" --max-bytes "$v"
done
check "prune of a missing cache with a bad size: the size first" 2 "jitk: --max-bytes: 'abc' is not a size" \
	"$jitk" cache prune --cache "$w/nope" --max-bytes abc
check "cache frob" 2 "unknown cache command 'frob'" "$jitk" cache frob --cache "$c"
check "cache stats extra" 2 "unexpected argument 'extra'" "$jitk" cache stats extra --cache "$c"
check "cache alone" 2 "which command" "$jitk" cache
check "stats --max-bytes" 2 "--max-bytes is an option of 'cache prune' only" \
	"$jitk" cache stats --cache "$c" --max-bytes 1G
check "bad JITK_CACHE_MAX_BYTES" 0 "warning: JITK_CACHE_MAX_BYTES='10 G' is not a size" \
	env JITK_CACHE_MAX_BYTES="10 G" "$jitk" cache prune --cache "$c"
check "prune --max-bytes 10G" 0 "0 entries \(0 bytes\) to fit the size bound" \
	"$jitk" cache prune --cache "$c" --max-bytes 10G
check "prune --max-bytes 1 (one byte)" 0 "1 entries \([0-9]+ bytes\) to fit the size bound; 0 bytes left" \
	"$jitk" cache prune --cache "$c" --max-bytes 1

# JITK_CACHE_MAX_BYTES=1M meant 1 byte: the entry was evicted as written.
JITK_CACHE_MAX_BYTES=1M precompile
survives "JITK_CACHE_MAX_BYTES=1M keeps the entry" "$entry"

# A layer that is a file: one warning, not one per lookup.
check "a file as a layer" 0 "^jitk: warning: cache layer $w/a-file ignored: not a directory or a jitk bundle\$" \
	env JITK_CACHE_PATH="$w/a-file" "$jitk" precompile static_quant_fp8 --specs specs \
	--cache "$c" --arch sm_90,sm_100 -j 1
n=$((n + 1))
[ "$(printf '%s\n' "$out" | grep -c warning)" = 1 ] ||
	{ echo "FAIL: a file as a layer: $(printf '%s\n' "$out" | grep -c warning) warnings"; fails=$((fails + 1)); }

# Foreign files: counted apart, never removed.
mkdir -p "$c/v1/photos" "$c/v1/src"
echo jpg >"$c/v1/photos/p.jpg"
echo 'int main;' >"$c/v1/src/main.c"
echo notes >"$shard/notes.txt"
echo readme >"$c/v1/tmp/readme"
check "stats counts foreign files apart" 0 \
	": 2 entries, [0-9]+ bytes, 0 temporary files, 2 lock files, 4 foreign files\$" \
	"$jitk" cache stats --cache "$c"
check "verify names foreign files" 0 "^foreign: $c/v1/photos: not a cache file\$" \
	"$jitk" cache verify --cache "$c"
check "clear leaves foreign files" 0 "removed 2 files; 4 foreign files left alone\$" \
	"$jitk" cache clear --cache "$c"
survives "clear leaves foreign files" "$c/v1/photos/p.jpg" "$c/v1/src/main.c" "$shard/notes.txt" \
	"$c/v1/tmp/readme"
precompile
check "prune leaves foreign files" 0 "4 foreign files left alone\$" \
	"$jitk" cache prune --cache "$c" --max-bytes 1
survives "prune leaves foreign files" "$c/v1/photos/p.jpg" "$c/v1/src/main.c" "$shard/notes.txt" \
	"$c/v1/tmp/readme"

# Links to somebody's files, at a shard, at an entry name, at v1.
o=$w/outside
mkdir -p "$o"
echo precious >"$o/precious.txt"
echo x >"$o/$(basename "$entry")"
precompile
ln -s "$o" "$c/v1/$other"
ln -s "$o/precious.txt" "$shard/$sh${z61}1.jitk"
check "clear with planted links" 0 "removed 3 files" "$jitk" cache clear --cache "$c"
survives "clear does not follow links" "$o/precious.txt" "$o/$(basename "$entry")"
mv "$c/v1" "$c/v1.real"
ln -s "$o" "$c/v1"
for cmd in stats verify clear prune; do
	check "$cmd of a cache whose v1 is a link" 1 \
		"^jitk: refusing to use the cache at $c: $c/v1 is a symbolic link\$" "$jitk" cache "$cmd" --cache "$c"
done
survives "v1 as a link" "$o/precious.txt" "$o/$(basename "$entry")"
rm "$c/v1"
mv "$c/v1.real" "$c/v1"
if [ "$(id -u)" = 0 ]; then
	chown 4242:4242 "$c/v1"
	check "clear of another user's cache" 1 "$c/v1 is owned by uid 4242, not by this user \(uid 0\)" \
		"$jitk" cache clear --cache "$c"
	chown 0:0 "$c/v1"
fi

# verify and prune agree: what verify names, prune removes.
precompile
printf garbage >"$shard/$sh${z61}2.jitk"
mkdir "$shard/$sh${z61}3.jitk"
mkfifo "$shard/$sh${z61}4.jitk"
check "verify names junk" 1 "bad entry: $shard/$sh${z61}2.jitk: truncated header" \
	"$jitk" cache verify --cache "$c"
check "verify counts it" 1 ", 3 bad\$" "$jitk" cache verify --cache "$c"
check "prune removes it" 0 "removed 3 bad entries" "$jitk" cache prune --cache "$c"
check "verify is clean after prune" 0 ": 1 entries, .*, 0 bad\$" "$jitk" cache verify --cache "$c"

# An explicit --cache that cannot be written fails precompile (exit 1, one
# line, nothing compiled); it used to compile "into (memory)" and exit 0.
# So does unpack, without "compiling in memory" in its message.
mkdir -p "$w/ww/v1"
chmod 777 "$w/ww/v1"
mkfifo "$w/fifo"
pre() { "$jitk" precompile static_quant_fp8 --specs specs --arch sm_90 -j 1 "$@"; }
check "precompile into a file" 1 "^jitk: cannot precompile into $w/a-file: $w/a-file is a regular file, not a directory\$" \
	pre --cache "$w/a-file"
count "precompile into a file: one line" 1 "."
check "precompile into a FIFO" 1 "^jitk: cannot precompile into $w/fifo: $w/fifo is a FIFO, not a directory\$" \
	pre --cache "$w/fifo"
check "precompile under a file" 1 "^jitk: cannot precompile into $w/a-file/c: cannot make or write $w/a-file/c/v1: Not a directory\$" \
	pre --cache "$w/a-file/c"
check "precompile into a world-writable v1" 1 "^jitk: cannot precompile into $w/ww: $w/ww/v1 is world-writable without the sticky bit\$" \
	pre --cache "$w/ww"
count "a world-writable v1: one line" 1 "."
check "precompile with JITK_CACHE_READONLY=1" 1 "^jitk: cannot precompile into $c: the cache is read-only \(JITK_CACHE_READONLY\)\$" \
	env JITK_CACHE_READONLY=1 "$jitk" precompile static_quant_fp8 --specs specs --arch sm_90 --cache "$c"
count "JITK_CACHE_READONLY=1: one line" 1 "."
check "a FIFO as a layer says what it is" 0 "^jitk: warning: cache layer $w/fifo ignored: a FIFO, not a directory or a jitk bundle\$" \
	env JITK_CACHE_PATH="$w/fifo" "$jitk" precompile static_quant_fp8 --specs specs --cache "$c" --arch sm_90
check "pack" 0 "packed 1 entries" "$jitk" cache pack --cache "$c" -o "$w/k.jitkb"
check "unpack into a world-writable v1" 1 "^jitk: cannot unpack into $w/ww: $w/ww/v1 is world-writable without the sticky bit\$" \
	"$jitk" cache unpack "$w/k.jitkb" --cache "$w/ww"
check "unpack under a file" 1 "^jitk: cannot unpack into $w/a-file/c: cannot make or write $w/a-file/c/v1: Not a directory\$" \
	"$jitk" cache unpack "$w/k.jitkb" --cache "$w/a-file/c"
check "pack -o a FIFO" 1 "^jitk: the bundle $w/fifo is a FIFO, not a regular file: not writing it\$" \
	"$jitk" cache pack --cache "$c" -o "$w/fifo"
[ -p "$w/fifo" ] || fail "pack -o a FIFO replaced it"
ln -s "$w/k.jitkb" "$w/link.jitkb"
check "pack -o a link" 1 "^jitk: the bundle $w/link.jitkb is a symbolic link, not a regular file: not writing it\$" \
	"$jitk" cache pack --cache "$c" -o "$w/link.jitkb"
[ -L "$w/link.jitkb" ] || fail "pack -o a link replaced it"
# As root, -o /dev/null would have replaced /dev/null: a device node of
# the test's own stands in for it (a regression replaces only that one).
if [ "$(id -u)" = 0 ] && mknod "$w/null" c 1 3 2>/dev/null; then
	check "pack -o a character device" 1 "^jitk: the bundle $w/null is a character device, not a regular file: not writing it\$" \
		"$jitk" cache pack --cache "$c" -o "$w/null"
	[ -c "$w/null" ] || fail "pack -o a character device replaced it"
fi

# docs/cache-format.md gives the entry format the library writes, in the
# entry header and in the bundle header (it said 2 there after format 3).
v=$("$jitk" --version | sed -n 's/.*cache format \([0-9]*\).*/\1/p')
for what in "| 8 | 4 | format version ($v" "| 16 | 4 | the entries' format ($v," \
	"bytes of an entry file (format $v, above"; do
	n=$((n + 1))
	grep -qF -- "$what" docs/cache-format.md || fail "docs/cache-format.md lacks '$what'"
done

[ "$fails" = 0 ] || { echo "cache: $fails of $n checks failed"; exit 1; }
echo "cache: $n checks of the cache commands passed"
