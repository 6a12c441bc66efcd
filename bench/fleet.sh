#!/bin/sh
# bench/fleet.sh [BUILD] [N] [SYMBOL...] - a fleet's cold start: N
# processes, each with a cache directory of its own, precompile the same
# SYMBOLs for sm_90 at once against one remote (an nginx this script
# starts on loopback) with the Redis lease (a redis-server it starts),
# as N nodes of a fleet meeting a new kernel would. Prints, per process,
# what it compiled and fetched and its wall time, and the totals: with
# the lease, one compile per key. Default: 8 processes, the FP8 GEMM's
# gemm_fp8_bias[mclass=65536,nclass=9216] (a minute of NVRTC). No GPU needed.
set -u
b=${1:-build}
nodes=${2:-8}
[ $# -gt 2 ] && shift 2 || set -- 'gemm_fp8_bias[mclass=65536,nclass=9216]'
jitk=$b/jitk
here=$(dirname "$0")
w=$(mktemp -d "${TMPDIR:-/tmp}/jitk-fleet-XXXXXX")
npid= rpid=
cleanup() {
	[ -n "$npid" ] && kill "$npid" 2>/dev/null
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
. "$here/../tests/shlib"
nginx=$(nginx_bin)
[ -n "$nginx" ] || { echo "fleet: nginx not found (apt-get install nginx-light)"; exit 1; }
npid=$(nginx_start "$nginx" "$w") || { echo "fleet: nginx did not start"; cat "$w/error.log"; exit 1; }
mkdir -p "$w/redis"
rpid=$(redis_start "$w/redis") || { echo "fleet: redis-server did not start (apt-get install redis-server)"; exit 1; }
url=http://127.0.0.1:$(cat "$w/port")/fleet
lease=redis://127.0.0.1:$(cat "$w/redis/redis.port")
start=$(date +%s.%N)
i=1
while [ "$i" -le "$nodes" ]; do
	(
		t0=$(date +%s.%N)
		JITK_REMOTE_LEASE=$lease "$jitk" precompile "$@" --arch sm_90 --specs specs \
			--cache "$w/node$i" --remote "$url" -j 1 >"$w/node$i.log" 2>&1
		echo "rc=$? $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $t0 }") s" >>"$w/node$i.log"
	) &
	i=$((i + 1))
done
wait
wall=$(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }")
compiled=0 remote=0 failed=0
i=1
while [ "$i" -le "$nodes" ]; do
	line=$(grep '^precompiled ' "$w/node$i.log" | tail -n 1)
	c=$(printf '%s\n' "$line" | sed -n 's/.*: \([0-9]*\) compiled, .*/\1/p')
	r=$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) remote, .*/\1/p')
	f=$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) failed, .*/\1/p')
	echo "node $i: ${c:-?} compiled, ${r:-?} fetched, ${f:-?} failed, $(tail -n 1 "$w/node$i.log")"
	compiled=$((compiled + ${c:-0})) remote=$((remote + ${r:-0})) failed=$((failed + ${f:-1}))
	[ "$i" = 1 ] && keys=$((${c:-0} + ${r:-0}))
	i=$((i + 1))
done
echo "fleet: $nodes processes, $keys instances, one remote with the lease: $compiled compiles, $remote fetches, $failed failed, $wall s wall"
[ "$failed" = 0 ] && [ "$compiled" = "$keys" ]
