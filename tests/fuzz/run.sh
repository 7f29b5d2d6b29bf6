#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs the protocol decoder and etcd gateway fuzzers, each for a bounded
# time; TAP output.
#   FUZZ_SECONDS (default 20)
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
bin=$BUILD/fuzz/fuzz_proto
corpus=$BUILD/fuzz/corpus-proto
secs=${FUZZ_SECONDS:-20}
log=$BUILD/fuzz/fuzz_proto.log

echo "1..2"
mkdir -p "$corpus"
# Seeds: one valid frame of each kind the client side sends (the seals'
# MACs are zeros: they decode, they do not open).
printf '\0\0\0\067\2\1\0\0\0\0\0\1\3web\6node-a%032d' 0 >"$corpus/hello"
printf '\0\0\0\064\2\3\0\1\0\0\0\2%040d' 0 >"$corpus/auth"
printf '\0\0\0\124\2\5\0\1\0\0\0\3\0\0\0\1%028d%040d' 7 1 >"$corpus/sync"
printf '\0\0\0\020\2\7\0\0\0\0\0\4\0\1\0\0' >"$corpus/error"
if "$bin" -max_total_time="$secs" -max_len=4096 -timeout=10 \
	-artifact_prefix="$BUILD/fuzz/" \
	-print_final_stats=1 "$corpus" >"$log" 2>&1; then
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	check 0 "fuzz: protocol decoder, ${secs}s, ${runs:-?} inputs, no crash"
else
	check 1 "fuzz: protocol decoder crashed (reproducer in $BUILD/fuzz)"
	grep -A20 -E 'ERROR|abort|deadly' "$log" | show /dev/stdin 30
fi

# The etcd gateway's watch frames and range/txn answers; seeds captured
# from etcd 3.4.23 (tests/fuzz/seeds/etcd).
bin=$BUILD/fuzz/fuzz_etcd
corpus=$BUILD/fuzz/corpus-etcd
log=$BUILD/fuzz/fuzz_etcd.log
mkdir -p "$corpus"
cp "$(dirname "$0")"/seeds/etcd/* "$corpus/"
if "$bin" -max_total_time="$secs" -max_len=4096 -timeout=10 \
	-artifact_prefix="$BUILD/fuzz/" \
	-print_final_stats=1 "$corpus" >"$log" 2>&1; then
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	check 0 "fuzz: etcd gateway frames and answers, ${secs}s, ${runs:-?} inputs, no crash"
else
	check 1 "fuzz: etcd gateway parser crashed (reproducer in $BUILD/fuzz)"
	grep -A20 -E 'ERROR|abort|deadly' "$log" | show /dev/stdin 30
fi
