#!/bin/sh
# bench/ranks.sh [BUILD_DIR] [N] - N inference ranks cold-starting together
# on one empty cache, rank i on GPU i % (visible GPUs) through
# CUDA_VISIBLE_DEVICES, as tensor-parallel engines start them. Each rank
# resolves the same kernels; the cache's lock must make the N ranks
# compile each key exactly once in total. Prints every rank's first-use
# time and the totals; exits 1 if any key was compiled more than once or a
# rank failed.
set -u
b=${1:-build}
n=${2:-8}
sel="fused_norm_scale_shift_fp8[hidden=3072] fused_scale_residual_norm_scale_shift_fp8[hidden=3072] static_quant_fp8"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -gt 0 ] || { echo "SKIP: no GPU"; exit 0; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-ranks-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export JITK_CACHE_DIR=$tmp/cache JITK_SPECS=${JITK_SPECS:-specs}
i=0
while [ "$i" -lt "$n" ]; do
	# shellcheck disable=SC2086
	RANK=$i CUDA_VISIBLE_DEVICES=$((i % ngpu)) "$b/ranks" "$tmp/go" $sel >"$tmp/rank$i.out" 2>&1 &
	i=$((i + 1))
done
sleep 1 # every rank is waiting on the signal
touch "$tmp/go"
wait
cat "$tmp"/rank*.out
fail=$(grep -L '^rank=' "$tmp"/rank*.out | wc -l)
compiles=$(sed -n 's/.*compiles=\([0-9]*\).*/\1/p' "$tmp"/rank*.out | awk '{s+=$1} END{print s+0}')
entries=$(find "$tmp/cache" -name '*.jitk' | wc -l)
times=$(sed -n 's/.*first_use_ms=\([0-9.]*\).*/\1/p' "$tmp"/rank*.out | sort -n)
echo "ranks: $n on $ngpu GPU(s); $compiles compiles in total for $entries cache entries;" \
	"first use ms min $(echo "$times" | head -1) median $(echo "$times" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')" \
	"max $(echo "$times" | tail -1); $fail rank(s) failed"
[ "$fail" = 0 ] && [ "$compiles" = "$entries" ] && [ "$entries" -gt 0 ]
