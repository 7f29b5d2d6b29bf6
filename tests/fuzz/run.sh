#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs the protocol decoder and etcd gateway fuzzers, each for a bounded
# time; TAP output.
#   FUZZ_SECONDS (default 20)
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
secs=${FUZZ_SECONDS:-20}

# fuzz NAME WHAT: $BUILD/fuzz/fuzz_NAME on its corpus for $secs
fuzz()
{
	local bin=$BUILD/fuzz/fuzz_$1 corpus=$BUILD/fuzz/corpus-$1
	local log=$BUILD/fuzz/fuzz_$1.log runs

	if "$bin" -max_total_time="$secs" -max_len=4096 -timeout=10 \
		-artifact_prefix="$BUILD/fuzz/" \
		-print_final_stats=1 "$corpus" >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		check 0 "fuzz: $2, ${secs}s, ${runs:-?} inputs, no crash"
	else
		check 1 "fuzz: $2 crashed (reproducer in $BUILD/fuzz)"
		grep -A20 -E 'ERROR|abort|deadly' "$log" | show /dev/stdin 30
	fi
}

echo "1..2"
corpus=$BUILD/fuzz/corpus-proto
mkdir -p "$corpus"
# Seeds: one valid frame of each kind the client side sends (the seals'
# MACs are zeros: they decode, they do not open).
printf '\0\0\0\067\2\1\0\0\0\0\0\1\3web\6node-a%032d' 0 >"$corpus/hello"
printf '\0\0\0\064\2\3\0\1\0\0\0\2%040d' 0 >"$corpus/auth"
printf '\0\0\0\124\2\5\0\1\0\0\0\3\0\0\0\1%028d%040d' 7 1 >"$corpus/sync"
printf '\0\0\0\020\2\7\0\0\0\0\0\4\0\1\0\0' >"$corpus/error"
fuzz proto "protocol decoder"

# The etcd gateway's watch frames and range/txn answers; seeds captured
# from etcd 3.4.23.
mkdir -p "$BUILD/fuzz/corpus-etcd"
cp "$(dirname "$0")"/seeds/etcd/* "$BUILD/fuzz/corpus-etcd/"
fuzz etcd "etcd gateway frames and answers"
