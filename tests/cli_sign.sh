#!/bin/sh
# tests/cli_sign.sh BUILD_DIR - provenance from the command line (issue
# 23): jitk key generate (the secret 0600; an existing file or a link is
# refused and left alone), a builder signing with JITK_SIGNING_KEY
# (precompile and cache pack), jitk cache verify --trusted-keys on a cache
# and on a bundle (exit 1 unless a trusted key signed every entry), a node
# refusing a bundle re-signed by an untrusted key (the summary counts it;
# exit 0, or 1 under JITK_NO_COMPILE), unpack leaving it out, and jitk
# explain naming an entry's origin. The remote's cases are
# tests/test_sign.c's.
set -u
b=${1:-build}
jitk=$(pwd)/$b/jitk
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-cli-sign-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/shlib"
unset JITK_SIGNING_KEY JITK_TRUSTED_KEYS JITK_REQUIRE_SIGS JITK_CACHE_PATH JITK_REMOTE_CACHE \
	JITK_NO_COMPILE
JITK_SPECS=$(pwd)/tests/families/specs
export JITK_SPECS

# keys
check "key generate" 0 '^ci-a:[A-Za-z0-9+/]{43}=$' "$jitk" key generate ci-a -o "$tmp/ci-a"
[ "$(stat -c %a "$tmp/ci-a.secret")" = 600 ] || fail "the secret key's mode is $(stat -c %a "$tmp/ci-a.secret")"
grep -qxF "$(sed -n 1p "$tmp/ci-a.public")" "$tmp/ci-a.public" || fail "no public key file"
cp "$tmp/ci-a.secret" "$tmp/before"
check "an existing key file is refused" 1 'exists \(a key file is never overwritten\)' \
	"$jitk" key generate ci-a -o "$tmp/ci-a"
cmp -s "$tmp/ci-a.secret" "$tmp/before" || fail "an existing secret key was changed"
rm "$tmp/ci-a.public" && cp "$tmp/before" "$tmp/keep.secret"
check "an existing secret key file is refused" 1 'ci-a.secret: exists' \
	"$jitk" key generate ci-a -o "$tmp/ci-a"
[ ! -e "$tmp/ci-a.public" ] || fail "a public key was written beside a refused secret key"
"$jitk" key generate ci-a -o "$tmp/a" >"$tmp/a.line" 2>/dev/null || fail "key generate ci-a"
ln -s "$tmp/elsewhere" "$tmp/l.secret"
check "a link is refused" 1 'l.secret: is a symbolic link' "$jitk" key generate l -o "$tmp/l"
[ ! -e "$tmp/elsewhere" ] || fail "a key was written through a link"
check "a bad key name" 2 "'-x' is not a key name|unknown option" "$jitk" key generate -x -o "$tmp/x"
check "a bad key name" 2 "'a:b' is not a key name" "$jitk" key generate a:b -o "$tmp/x"
check "no -o" 2 'where\? \(-o PREFIX\)' "$jitk" key generate x
check "no command" 2 'which command' "$jitk" key
check "key --help" 0 'usage: jitk key generate NAME -o PREFIX' "$jitk" key --help
"$jitk" key generate evil -o "$tmp/evil" >/dev/null 2>&1 || fail "key generate evil"
A=$(cat "$tmp/a.line")
E=$(cat "$tmp/evil.public")

# a builder signs what it compiles and packs
check "builder precompile" 0 '2 compiled, 0 cached, 0 remote, 0 failed, 0 gated$' \
	env JITK_SIGNING_KEY="$tmp/a.secret" "$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/b" -j 1
check "verify --trusted-keys" 0 '2 entries: 2 signed by trusted keys, 0 by other keys, 0 bad signatures, 0 unsigned' \
	"$jitk" cache verify --cache "$tmp/b" --trusted-keys "$A"
count "verify --trusted-keys names the signer" 2 '^signed by ci-a: .*\.jitk \(sm_90\)$'
check "verify with other keys" 1 '2 entries: 0 signed by trusted keys, 2 by other keys' \
	"$jitk" cache verify --cache "$tmp/b" --trusted-keys "$E"
count "verify with other keys" 2 '^signed by ci-a, not a trusted key: '
printf '# the builders\n%s\n' "$A" >"$tmp/keys"
check "a file of trusted keys" 0 '2 signed by trusted keys' \
	"$jitk" cache verify --cache "$tmp/b" --trusted-keys "$tmp/keys"
check "a malformed trusted key" 1 'keys:3: error: .*bogus' \
	sh -c 'echo bogus >>"$1" && "$2" cache verify --cache "$3" --trusted-keys "$1"' sh "$tmp/keys" "$jitk" "$tmp/b"
check "--trusted-keys is verify's" 2 '--trusted-keys is an option of .cache verify. only' \
	"$jitk" cache stats --cache "$tmp/b" --trusted-keys "$A"
check "pack signs" 0 'packed 2 entries' \
	env JITK_SIGNING_KEY="$tmp/a.secret" "$jitk" cache pack --cache "$tmp/b" -o "$tmp/good.jitkb"
check "pack re-signs with an untrusted key" 0 'packed 2 entries' \
	env JITK_SIGNING_KEY="$tmp/evil.secret" "$jitk" cache pack --cache "$tmp/b" -o "$tmp/evil.jitkb"
check "pack with a bad key" 1 'JITK_SIGNING_KEY .*a public key, not a secret one' \
	sh -c 'cp "$1" "$2" && chmod 600 "$2" && JITK_SIGNING_KEY=$2 "$3" cache pack --cache "$4" -o "$5"' \
	sh "$tmp/evil.public" "$tmp/pub-as-secret" "$jitk" "$tmp/b" "$tmp/x.jitkb"
[ ! -e "$tmp/x.jitkb" ] || fail "a bundle was written with a bad signing key"
check "verify a bundle --trusted-keys" 0 '2 signed by trusted keys' \
	"$jitk" cache verify "$tmp/good.jitkb" --trusted-keys "$A"
check "verify a re-signed bundle" 1 '0 signed by trusted keys, 2 by other keys' \
	"$jitk" cache verify "$tmp/evil.jitkb" --trusted-keys "$A"
count "verify a re-signed bundle names the key" 2 '^signed by evil, not a trusted key: key [0-9a-f]{64} \(sm_90\)$'

# a node trusting ci-a
check "a trusted bundle serves" 0 '0 compiled, 2 cached, 0 remote, 0 failed, 0 gated, 0 refused$' \
	env JITK_CACHE_PATH="$tmp/good.jitkb" JITK_TRUSTED_KEYS="$A" JITK_NO_COMPILE=1 \
	"$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n1" -j 1
check "a re-signed bundle is refused" 0 '2 compiled, 0 cached, 0 remote, 0 failed, 0 gated, 2 refused$' \
	env JITK_CACHE_PATH="$tmp/evil.jitkb" JITK_TRUSTED_KEYS="$A" \
	"$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n2" -j 2
check "warned once per bundle (and process)" 0 ', 2 refused$' \
	env JITK_CACHE_PATH="$tmp/evil.jitkb" JITK_TRUSTED_KEYS="$A" \
	"$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n2b" -j 1
count "warned once per bundle (and process)" 1 'warning: bundle entry .* refused: signed by a key that is not trusted'
check "refused, and no compiling" 1 '0 compiled, 0 cached, 0 remote, 2 failed, 0 gated, 2 refused$' \
	env JITK_CACHE_PATH="$tmp/evil.jitkb" JITK_TRUSTED_KEYS="$A" JITK_NO_COMPILE=1 \
	"$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n3" -j 1
[ ! -d "$tmp/n3/v1" ] || [ "$(find "$tmp/n3/v1" -name '*.jitk' | wc -l)" = 0 ] || fail "a refused entry was stored"
check "signatures not required" 0 '0 compiled, 2 cached, 0 remote, 0 failed, 0 gated$' \
	env JITK_CACHE_PATH="$tmp/evil.jitkb" JITK_TRUSTED_KEYS="$A" JITK_REQUIRE_SIGS=no \
	"$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n4" -j 1
check "JITK_REQUIRE_SIGS not a boolean" 0 "JITK_REQUIRE_SIGS='maybe' is not .*(signatures are required)" \
	env JITK_CACHE_PATH="$tmp/evil.jitkb" JITK_TRUSTED_KEYS="$A" JITK_REQUIRE_SIGS=maybe \
	"$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n5" -j 1
has_refused=$(printf '%s\n' "$out" | grep -c ', 2 refused$')
[ "$has_refused" = 1 ] || fail "JITK_REQUIRE_SIGS=maybe did not require signatures"
check "a bad trusted key stops the command" 1 'JITK_TRUSTED_KEYS: .nope. is not a public key' \
	env JITK_TRUSTED_KEYS=nope "$jitk" precompile tadd2 --arch sm_90 --cache "$tmp/n6" -j 1
check "unpack leaves refused entries out" 1 'unpacked 0 entries .* 2 bad left out' \
	env JITK_TRUSTED_KEYS="$A" "$jitk" cache unpack "$tmp/evil.jitkb" --cache "$tmp/u"
count "unpack names them" 2 '^bad entry: key .* signed by a key that is not trusted'
check "explain names the origin" 0 'origin:   taken from a bundle, signed by ci-a \(verified against the trusted keys\)' \
	env JITK_CACHE_PATH="$tmp/good.jitkb" JITK_TRUSTED_KEYS="$A" \
	"$jitk" explain 'tadd2[cols=64]' --arch sm_90 --cache "$tmp/n1"
check "explain: compiled here, signed" 0 'origin:   compiled into this cache, signed by ci-a$' \
	"$jitk" explain 'tadd2[cols=64]' --arch sm_90 --cache "$tmp/b"

echo "cli_sign: $n checks, $fails failed"
[ "$fails" = 0 ]
