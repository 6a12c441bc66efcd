#!/bin/sh
# tests/cli_deploy.sh BUILD_DIR - the deployment commands: jitk precompile
# for a family target and from a warmup manifest (exactly its pairs, once
# each; --arch replacing the recorded architectures; malformed manifests
# refused with the line), and jitk explain --cache naming the entry a GPU
# would run (a cache holding only an sm_100f entry, on sm_103) without
# writing anything into the cache.
set -u
b=${1:-build}
jitk=$(pwd)/$b/jitk
specs=$(pwd)/tests/families/specs
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-cli-deploy-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/shlib"

# run WANT_STATUS OUT_FILE ARGS...: jitk ARGS, stdout and stderr to OUT_FILE.
run() {
	want=$1 out=$2
	shift 2
	"$jitk" "$@" >"$out" 2>&1
	got=$?
	[ "$got" = "$want" ] || { fail "jitk $* exited $got, not $want"; sed 's/^/  | /' "$out" | head -20; }
}

# --- a family target, and what explain --cache says of it
run 0 "$tmp/pre.log" precompile 'tadd2[cols=64]' --arch sm_100f --cache "$tmp/c" --specs "$specs"
has "$tmp/pre.log" ": 1 compiled, 0 cached, 0 remote, 0 failed, 0 gated"
entry=$(find "$tmp/c/v1" -name '*.jitk')
[ -n "$entry" ] || fail "no entry was written"
stamp() { stat -c '%Y %s' "$entry"; ls -R "$tmp/c" | md5sum; }
before=$(stamp)
sleep 1
run 0 "$tmp/explain.log" explain 'tadd2[cols=64]' --arch sm_103 --cache "$tmp/c" --specs "$specs"
has "$tmp/explain.log" "tadd2[cols=64] on sm_103: runs"
has "$tmp/explain.log" "  image:    sm_100f, cached in a read-only layer at $entry: sm_100f is a family target"
has "$tmp/explain.log" "    sm_103               exact  "
has "$tmp/explain.log" "    sm_100f              family $(basename "$entry" .jitk) cached: this image runs"
[ "$(stamp)" = "$before" ] || fail "explain --cache changed the cache"
# nothing for sm_90 there: it would compile
run 0 "$tmp/explain90.log" explain 'tadd2[cols=64]' --arch sm_90 --cache "$tmp/c" --specs "$specs"
has "$tmp/explain90.log" "  image:    none cached: a runtime would compile it for sm_90 (key "
# plain explain: no image lines
run 0 "$tmp/plain.log" explain 'tadd2[cols=64]' --arch sm_103 --specs "$specs"
grep -q 'image:' "$tmp/plain.log" && fail "explain without --cache talks of images"
# refusals
run 1 "$tmp/none.log" explain tadd2 --arch sm_103 --cache "$tmp/nothing-here" --specs "$specs"
has "$tmp/none.log" "jitk: no cache at $tmp/nothing-here"
[ -e "$tmp/nothing-here" ] && fail "explain --cache made a cache"
run 2 "$tmp/notgpu.log" explain tadd2 --arch sm_100f --cache "$tmp/c" --specs "$specs"
has "$tmp/notgpu.log" "jitk: --cache needs a GPU's architecture (sm_NN), not sm_100f"

# --- a manifest as JITK_MANIFEST_OUT writes it (two ranks, one repeated line)
cat >"$tmp/warm.txt" <<'EOF'
tadd2[cols=64] sm_90
tadd3[cols=256] sm_90
tadd2[cols=64] sm_90
EOF
run 0 "$tmp/m1.log" precompile --manifest "$tmp/warm.txt" --cache "$tmp/m" --specs "$specs" -j 2
has "$tmp/m1.log" "precompiled the manifest $tmp/warm.txt (2 pairs of 2 instances and 1 architectures)"
has "$tmp/m1.log" ": 2 compiled, 0 cached, 0 remote, 0 failed, 0 gated"
[ "$(find "$tmp/m/v1" -name '*.jitk' | wc -l)" = 2 ] || fail "the manifest did not make exactly 2 entries"
run 0 "$tmp/m2.log" precompile --manifest "$tmp/warm.txt" --cache "$tmp/m" --specs "$specs"
has "$tmp/m2.log" ": 0 compiled, 2 cached, 0 remote, 0 failed, 0 gated"
# --arch replaces the recorded architectures; a gate is counted, not a failure
run 0 "$tmp/m3.log" precompile --manifest "$tmp/warm.txt" --arch sm_80,sm_100f --cache "$tmp/m" --specs "$specs"
has "$tmp/m3.log" "(4 pairs of 2 instances and 2 architectures)"
has "$tmp/m3.log" ": 3 compiled, 0 cached, 0 remote, 0 failed, 1 gated"
has "$tmp/m3.log" "gated    tadd3[cols=256] sm_80"
# what is not a manifest
printf 'tadd2[cols=64] sm_90\ntadd2[cols=64]\n' >"$tmp/bad.txt"
run 1 "$tmp/bad.log" precompile --manifest "$tmp/bad.txt" --cache "$tmp/m" --specs "$specs"
has "$tmp/bad.log" "jitk: $tmp/bad.txt:2: error: expected 'INSTANCE ARCH', got 'tadd2[cols=64]'"
printf 'tadd9 sm_90\n' >"$tmp/bad2.txt"
run 1 "$tmp/bad2.log" precompile --manifest "$tmp/bad2.txt" --cache "$tmp/m" --specs "$specs"
has "$tmp/bad2.log" "jitk: $tmp/bad2.txt:1: error: "
run 1 "$tmp/missing.log" precompile --manifest "$tmp/missing.txt" --cache "$tmp/m" --specs "$specs"
has "$tmp/missing.log" "jitk: $tmp/missing.txt: cannot open: No such file or directory"
run 2 "$tmp/both.log" precompile tadd2 --manifest "$tmp/warm.txt" --specs "$specs"
has "$tmp/both.log" "jitk: NAME and --manifest exclude each other"
run 2 "$tmp/noval.log" precompile --manifest
has "$tmp/noval.log" "jitk: option '--manifest' needs a value"

if [ "$fails" = 0 ]; then
	echo "cli_deploy: family targets, explain --cache and precompile --manifest: ok"
else
	echo "cli_deploy: $fails failed"
	exit 1
fi
