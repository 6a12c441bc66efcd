#!/bin/sh
# tests/remote.sh BUILD_DIR - the remote tier and bundles from the command
# line: jitk precompile --remote / $JITK_REMOTE_CACHE against an nginx
# (WebDAV) this test starts on a free loopback port and stops, a remote
# that is down, a read-only client, and jitk cache pack|unpack|verify FILE
# with a bundle as the only layer under JITK_NO_COMPILE=1. Skips, saying
# so, without nginx (.ci/run installs nginx-light). test_remote.c covers
# the library against misbehaving servers.
set -u
b=${1:-build}
jitk=$b/jitk
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-remote-XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
. "$(dirname "$0")/shlib"

nginx=$(nginx_bin)
if [ -z "$nginx" ]; then
	echo "SKIP: remote: nginx not found (apt-get install nginx-light)"
	exit 77
fi
pid=$(nginx_start "$nginx" "$w") || { echo "remote: nginx did not start:"; cat "$w/error.log"; exit 1; }
port=$(cat "$w/port")
url=http://127.0.0.1:$port/fleet
syms="static_quant_fp8 rms_norm_scale_shift"
pre() { "$jitk" precompile $syms --specs specs --arch sm_90 -j 2 "$@"; }
k=$(pre --cache "$w/k" | sed -n 's/^precompiled \([0-9]*\) symbols.*/\1/p')
rm -rf "$w/k"

# Two fresh caches share compiles through the remote.
check "first cache compiles and uploads" 0 ": $k compiled, 0 cached, 0 remote, 0 failed, 0 gated\$" \
	pre --cache "$w/a" --remote "$url"
n=$((n + 1))
[ "$(find "$w/store/fleet/v1" -type f | wc -l)" = "$k" ] ||
	{ echo "FAIL: the remote holds $(find "$w/store/fleet/v1" -type f | wc -l) objects, not $k"; fails=$((fails + 1)); }
check "second cache: 0 compiled" 0 ": 0 compiled, 0 cached, $k remote, 0 failed, 0 gated\$" \
	pre --cache "$w/b" --remote "$url"
check "the progress lines say remote" 0 "^\[1/$k\] remote " pre --cache "$w/b2" --remote "$url"
check "JITK_REMOTE_CACHE" 0 ": 0 compiled, 0 cached, $k remote, 0 failed, 0 gated\$" \
	env JITK_REMOTE_CACHE="$url" "$jitk" precompile $syms --specs specs --arch sm_90 -j 2 --cache "$w/c"
check "then local hits" 0 ": 0 compiled, $k cached, 0 remote, 0 failed, 0 gated\$" \
	pre --cache "$w/b" --remote "$url"
check "what was fetched verifies" 0 ": $k entries, .*, 0 bad\$" "$jitk" cache verify --cache "$w/b"

# A remote that is down: one warning, everything compiled, exit 0.
check "remote down" 0 ": $k compiled, 0 cached, 0 remote, 0 failed, 0 gated\$" \
	pre --cache "$w/d" -j 1 --remote "http://127.0.0.1:1/x"
count "remote down: one warning" 1 "warning: remote cache http://127.0.0.1:1/x: download of .* failed"
count "remote down: no other warning" 1 "warning"

# Credentials in the remote's or the lease server's URL reach no output:
# a remote that is down under precompile; explain, which prints the
# warnings of opening them (a URL that is not one, a lease server with a
# bad port); cache stats, which does not open them.
secret="http://alice:s3cret@127.0.0.1:1/x,ftp://alice:s3cret@h/y"
lease="redis://bob:pa55@127.0.0.1:99999"
check "no secret: precompile" 0 "warning: remote cache http://\*\*\*@127.0.0.1:1/x: download of" \
	env JITK_REMOTE_CACHE="$secret" JITK_REMOTE_LEASE="$lease" "$jitk" precompile static_quant_fp8 \
	--specs specs --arch sm_90 --cache "$w/s1"
count "no secret: precompile says none" 0 "alice|s3cret|bob|pa55"
check "no secret: explain" 0 "remote cache 'ftp://\*\*\*@h/y' ignored" \
	env JITK_REMOTE_CACHE="$secret" JITK_REMOTE_LEASE="$lease" "$jitk" explain static_quant_fp8 \
	--specs specs --arch sm_90 --cache "$w/b"
count "no secret: explain says none" 0 "alice|s3cret|bob|pa55"
count "no secret: explain masks the lease server's" 1 "lease server 'redis://\*\*\*@127.0.0.1:99999' ignored"
check "no secret: cache stats" 0 " entries, " \
	env JITK_REMOTE_CACHE="$secret" JITK_REMOTE_LEASE="$lease" "$jitk" cache stats --cache "$w/b"
count "no secret: cache stats says none" 0 "alice|s3cret|bob|pa55"

# A read-only client compiles what the remote lacks and uploads nothing.
check "read-only client" 0 ": $k compiled, 0 cached, 0 remote" \
	env JITK_REMOTE_READONLY=1 "$jitk" precompile $syms --specs specs --arch sm_100 -j 2 \
	--cache "$w/ro" --remote "$url/ro"
n=$((n + 1))
[ ! -e "$w/store/fleet/ro" ] || { echo "FAIL: a read-only client uploaded"; fails=$((fails + 1)); }

# Bundles: pack every kernel for sm_90, use it as the only layer with
# compiling disabled, unpack it, verify it, damage it.
names=$(light_names "$jitk" specs)
# shellcheck disable=SC2086
all=$("$jitk" precompile $names --specs specs --arch sm_90 --cache "$w/all" | sed -n 's/.*: \([0-9]*\) compiled, 0 cached.*/\1/p')
"$jitk" precompile static_quant_fp8 --specs specs --arch sm_100 --cache "$w/all" >/dev/null 2>&1 ||
	{ echo "FAIL: precompile for sm_100"; exit 1; }
check "pack" 0 "^$w/k.jitkb: packed $all entries \([0-9]+ bytes\) from $w/all; 1 of other architectures and 0 bad left out\$" \
	"$jitk" cache pack --cache "$w/all" --arch sm_90 -o "$w/k.jitkb"
check "verify FILE" 0 "^$w/k.jitkb: $all entries, [0-9]+ bytes, 0 bad\$" "$jitk" cache verify "$w/k.jitkb"
check "the bundle as the only layer, JITK_NO_COMPILE=1" 0 ": 0 compiled, $all cached, 0 remote, 0 failed, 0 gated\$" \
	env JITK_CACHE_PATH="$w/k.jitkb" JITK_NO_COMPILE=1 "$jitk" precompile $names --specs specs --arch sm_90 \
	--cache "$w/empty"
n=$((n + 1))
[ "$(find "$w/empty" -name '*.jitk' | wc -l)" = 0 ] || { echo "FAIL: a layer hit was written"; fails=$((fails + 1)); }
check "sm_100 is not in it" 1 "is not in the cache .*JITK_NO_COMPILE" \
	env JITK_CACHE_PATH="$w/k.jitkb" JITK_NO_COMPILE=1 "$jitk" precompile static_quant_fp8 --specs specs \
	--arch sm_100 --cache "$w/empty"
check "unpack" 0 "^$w/u: unpacked $all entries \([0-9]+ bytes\) from $w/k.jitkb; 0 already there, 0 bad left out\$" \
	"$jitk" cache unpack "$w/k.jitkb" --cache "$w/u"
check "unpack again" 0 "unpacked 0 entries .*; $all already there" "$jitk" cache unpack "$w/k.jitkb" --cache "$w/u"
check "what was unpacked verifies" 0 ": $all entries, .*, 0 bad\$" "$jitk" cache verify --cache "$w/u"
cp "$w/k.jitkb" "$w/bad.jitkb"
printf '\377' | dd of="$w/bad.jitkb" bs=1 seek=400 conv=notrunc 2>/dev/null
check "verify names a damaged entry" 1 "^bad entry: key [0-9a-f]{64} \(sm_90\): checksum mismatch\$" \
	"$jitk" cache verify "$w/bad.jitkb"
check "verify counts it" 1 ", 1 bad\$" "$jitk" cache verify "$w/bad.jitkb"
check "a damaged entry is rejected once, then compiled" 0 ": 1 compiled, $((all - 1)) cached" \
	env JITK_CACHE_PATH="$w/bad.jitkb" "$jitk" precompile $names --specs specs --arch sm_90 --cache "$w/e2"
count "one warning for it" 1 "warning: cache entry [0-9a-f]{64} in bundle $w/bad.jitkb rejected: checksum mismatch"
check "a file that is no bundle" 1 "^jitk: $w/nginx.conf: not a jitk bundle \(bad magic\)\$" \
	"$jitk" cache verify "$w/nginx.conf"
check "no such bundle" 1 "^jitk: no bundle at $w/nope\$" "$jitk" cache verify "$w/nope"

# Usage errors: exit 2.
check "pack without -o" 2 "cache pack: which file\? \(-o FILE\)" "$jitk" cache pack --cache "$w/all"
check "unpack without a file" 2 "cache unpack: which bundle file\?" "$jitk" cache unpack --cache "$w/u"
check "verify FILE and --cache" 2 "a bundle FILE or --cache DIR, not both" \
	"$jitk" cache verify "$w/k.jitkb" --cache "$w/u"
check "--arch on stats" 2 "--arch is an option of 'cache pack' only" "$jitk" cache stats --arch sm_90 --cache "$w/u"
check "a bad --arch for pack" 2 "'sm_9x' is not an architecture" \
	"$jitk" cache pack --cache "$w/all" --arch sm_9x -o "$w/x.jitkb"
check "verify FILE extra" 2 "unexpected argument 'extra'" "$jitk" cache verify "$w/k.jitkb" extra

[ "$fails" = 0 ] || { echo "remote: $fails of $n checks failed"; exit 1; }
echo "remote: $n checks of --remote and the bundle commands passed"
