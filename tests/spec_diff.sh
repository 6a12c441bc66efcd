#!/bin/sh
# tests/spec_diff.sh [BUILD_DIR [REV]] - the spec loader of the working tree
# against the one of revision REV (default $JITK_SPEC_DIFF_REV; without one
# the test skips): both are built with tests/spec_dump.c, which prints
# everything the loader makes of an input - the status, message and detail
# of an error; the whole model, every instance specialized on six
# architectures, the translation unit, jitk_describe and jitk_explain of a
# spec set - and the two outputs must be byte-identical for:
#   the spec sets specs/, tests/families/specs and both together, and
#   specs/ of every branch in $JITK_SPEC_DIFF_BRANCHES (with its templates);
#   every file of tests/specs/bad and tests/specs/good;
#   fuzz/corpus and $JITK_SPEC_DIFF_CORPUS (a directory, e.g. a grown fuzz
#   corpus), loaded as the fuzzer does;
#   the mutations tests/spec_mutate.py makes of every spec above.
# Prints the number of inputs; on a difference, the first lines of the diff.
set -u
b=${1:-build}
rev=${2:-${JITK_SPEC_DIFF_REV:-}}
if [ -z "$rev" ]; then
	echo "SKIP: no revision to compare with (tests/spec_diff.sh BUILD REV, or JITK_SPEC_DIFF_REV)"
	exit 77
fi
git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "spec_diff: no revision '$rev'"; exit 1; }
python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3 with PyYAML is needed for the mutations"; exit 77; }
cuda=$(sed -n 's/^cuda = //p' config.ninja)
cudalib=$(sed -n 's/^cudalib = //p' config.ninja)
san=$(sed -n 's/^san = //p' config.ninja)
cfg() { sed -n "s/^$1 = //p" config.ninja; }
flags="$(cfg yaml_cflags) $(cfg crypto_cflags) $(cfg curl_cflags) $(cfg hiredis_cflags) $(cfg xxhash_cflags) $(cfg hash_cflags) $(cfg nvtx_cflags)"
libs="$(cfg yaml_libs) $(cfg crypto_libs) $(cfg curl_libs) $(cfg hiredis_libs)"
work=$(mktemp -d "${TMPDIR:-/tmp}/jitk-specdiff-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old" "$work/new"
git archive "$rev" runtime | tar -x -C "$work/old" || exit 1
cp -R runtime "$work/new/"

# (-I BUILD_DIR: compile/packages_config.h, which configure writes there)
build() { # tree output
	cc -std=c11 -D_GNU_SOURCE -O1 -g -Werror=incompatible-pointer-types $san -DJITK_COMPILE_HALF -DJITK_DATADIR=\"/nonexistent\" $flags \
		-I"$1/runtime/include" -I"$1/runtime" -I"$b" -I"$cuda/include" tests/spec_dump.c \
		$(ls "$1"/runtime/*/*.c | grep -v "/runtime/gpu/") -o "$2" \
		$libs -L"$cudalib" -Wl,-rpath,"$cudalib" -lnvrtc -ldl -lpthread -lm \
		2>"$2.log" || { cat "$2.log"; echo "spec_diff: cannot build $2"; exit 1; }
}
build "$work/old" "$work/old/dump" &
build "$work/new" "$work/new/dump"
wait $! || exit 1
[ -x "$work/old/dump" ] || exit 1

# Inputs: spec sets, single files, buffers (name, files), mutations of the specs.
sets="specs tests/families/specs specs:tests/families/specs"
mutsrc="specs/*.yaml tests/families/specs/*.yaml tests/specs/good/*.yaml"
for br in ${JITK_SPEC_DIFF_BRANCHES:-}; do
	git rev-parse --verify -q "$br^{commit}" >/dev/null || { echo "spec_diff: no branch $br"; exit 1; }
	mkdir -p "$work/br/$br"
	git archive "$br" specs templates | tar -x -C "$work/br/$br" || exit 1
	sets="$sets $work/br/$br/specs"
done
n=0
mutate() { # dir name files...
	d=$1 name=$2
	shift 2
	python3 tests/spec_mutate.py "$work/mut/$d" "$@" >/dev/null || exit 1
	echo "$name" >"$work/mut/$d.name"
}
mkdir -p "$work/mut"
i=0
for f in $mutsrc; do
	i=$((i + 1))
	mutate "m$i" "$(dirname "$f")/fuzz.yaml" "$f"
done
for br in ${JITK_SPEC_DIFF_BRANCHES:-}; do
	for f in "$work/br/$br"/specs/*.yaml; do
		i=$((i + 1))
		mutate "m$i" "$work/br/$br/specs/fuzz.yaml" "$f"
	done
done

run() { # dump output
	for s in $sets; do
		echo "### set $s"
		"$1" --dirs "$s"
	done
	"$1" --files tests/specs/bad/*.yaml tests/specs/good/*.yaml specs/*.yaml
	"$1" --buffers specs/fuzz.yaml fuzz/corpus/*
	if [ -n "${JITK_SPEC_DIFF_CORPUS:-}" ]; then
		find "$JITK_SPEC_DIFF_CORPUS" -type f | sort | xargs "$1" --buffers specs/fuzz.yaml
	fi
	for m in "$work"/mut/*.name; do
		d=${m%.name}
		ls "$d" | sed "s|^|$d/|" | xargs "$1" --buffers "$(cat "$m")"
	done
}
run "$work/old/dump" >"$work/old.out" 2>&1 &
run "$work/new/dump" >"$work/new.out" 2>&1
wait $!
n=$(grep -c '^== ' "$work/new.out")
errs=$(grep -c '^message=' "$work/new.out")
if ! cmp -s "$work/old.out" "$work/new.out"; then
	diff "$work/old.out" "$work/new.out" | head -60
	echo "spec_diff: the loader differs from $rev's ($n inputs, $(wc -c <"$work/new.out") bytes of output)"
	exit 1
fi
echo "spec_diff: identical to $rev for $(echo $sets | wc -w) spec sets and $n inputs ($errs errors, $(wc -c <"$work/new.out") bytes of output)"
