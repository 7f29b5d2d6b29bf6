#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Drop-path throughput over veth (docs/benchmarks.md), end to end, per
# case: build/xdpflood sends live frames out of veth-tx, as fast as it
# can, for the whole of a case; on veth-rx the sluice agent holds the
# case's rules. Meanwhile build/bench_veth swaps the program on the
# agent's bpf_link every phase (100 ms) among a bare XDP_DROP that never
# reads the frame, the same headers parsed then XDP_DROP
# (tests/bench/bare.bpf.c) and sluice, and reads each phase's rate from
# veth-rx's rx packet counter (every frame handed to XDP, dropped ones
# included). Ratios are to the mean of the bare (or parse) phases before
# and after, and the median over the cycles is reported: neighbouring
# phases see the same machine, whose speed drifts. The rule's own
# counters must show every frame of sluice's phases judged, and nearly
# all dropped, or the run fails.
#
# Cases: rule (udp dport 9000 pps count 1), trie (the same among 4,096
# rules, each with a destination prefix: classified through the
# destination trie), per_source (one rule per source, count 1, against
# a flood cycling over SOURCES (65,536) forged sources); all: each in turn.
#
# usage: tests/bench/veth_drop.sh [--seconds S] [--phase-ms MS] [--cpu N] [--case C]
# Prints a table and the targets (OK or MISS); exits 0 whatever the
# figures, 1 when it cannot measure, and prints a TAP skip (exit 0)
# without root or native XDP on veth.

set -u

SECONDS_TOTAL=30
PHASE_MS=100
CPU=
CASE=rule
SOURCES=${SOURCES:-65536}
# frames per test_run call: each call costs ~25 ms of set-up here, which
# must not land in the phases as a gap (at 16 Mpps this is ~6 s a call)
FLOOD_REPEAT=100000000

usage()
{
	sed -n 's/^# usage: //p' "$0"
}

while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECONDS_TOTAL=${2:?}; shift 2 ;;
	--phase-ms) PHASE_MS=${2:?}; shift 2 ;;
	--cpu) CPU=${2:?}; shift 2 ;;
	--case) CASE=${2:?}; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
case "$SECONDS_TOTAL$PHASE_MS$CPU" in
*[!0-9]*) usage >&2; exit 2 ;;
esac
case $CASE in
rule|trie|per_source) CASES=$CASE ;;
all) CASES="rule trie per_source" ;;
*) echo "veth_drop: --case rule, trie, per_source or all" >&2; exit 2 ;;
esac
# the flood runs 3 s longer, and xdpflood stops any load at 60 s
if [ "$SECONDS_TOTAL" -lt 3 ] || [ "$SECONDS_TOTAL" -gt 57 ] ||
   [ "$PHASE_MS" -lt 20 ] || [ "$PHASE_MS" -gt 2000 ]; then
	echo "veth_drop: --seconds 3-57, --phase-ms 20-2000" >&2
	exit 2
fi

cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export BUILD
BENCH_VETH=$BUILD/bench_veth
# shellcheck source=tests/lib/netns.sh
source tests/lib/netns.sh
# shellcheck source=tests/lib/sluice.sh
source tests/lib/sluice.sh

die()
{
	echo "veth_drop: $*" >&2
	exit 1
}

[ -x "$BUILD/xdpflood" ] || die "$BUILD/xdpflood missing: run 'make gen'"
[ -x "$BENCH_VETH" ] || die "$BENCH_VETH missing: run 'make bench-bins'"
[ -x "$SLUICE" ] || die "$SLUICE missing: run 'make all'"
command -v jq >/dev/null || die "needs jq"
skip_unless_root_and_xdp "veth drop benchmark"

# the flood's CPU: the highest one by default, like bench_xdp; the
# swapping, which sleeps most of the time, on another when there is one
[ -n "$CPU" ] || CPU=$(($(nproc) - 1))
SWAP_CPU=$(((CPU + 1) % $(nproc)))

netns_setup sbench 2 || die "cannot create the namespaces"
# its rates need live frames: pktsend's tenth of them would measure pktsend
if live_frames_refused; then
	echo "veth_drop: skipped: xdpflood cannot send here ($LIVE_WHY);" \
	     "build/bench_xdp measures the program's cost"
	exit 0
fi
sluice_env_setup || die "cannot mount a bpffs for the pins"
flood_rule='"name": "flood", "grade": "pps", "count": 1'
cat >"$NETNS_TMP/rule.json" <<EOF
{"rules": [{$flood_rule, "match": {"proto": "udp", "dport": 9000}}]}
EOF
cat >"$NETNS_TMP/per_source.json" <<EOF
{"rules": [{$flood_rule, "match": {"proto": "udp", "dport": 9000},
	    "per_source": {"max_sources": 100000}}]}
EOF
{
	printf '{"rules": [{%s, "match": {"proto": "udp", "dport": 9000, ' \
		"$flood_rule"
	printf '"dst": "198.18.0.2/32"}}'
	for ((i = 1; i < 4096; i++)); do
		printf ',\n{"name": "r%d", "grade": "pps", "count": 1000, ' "$i"
		printf '"match": {"proto": "udp", "dport": 9000, '
		printf '"dst": "10.%d.%d.0/24"}}' $((i / 256)) $((i % 256))
	done
	printf ']}\n'
} >"$NETNS_TMP/trie.json"
first=${CASES%% *}
sluice_start agent --xdp-mode native --rules "$NETNS_TMP/$first.json" \
	--stats-interval 0 || die "the agent did not come up"

# the flood rule's totals "passed blocked" from the agent
sluice_totals()
{
	sluice_cli stats -j | jq -r '.rules[] | select(.name == "flood") |
		"\(.passed_pkts) \(.blocked_pkts)"'
}

# One case: its rules in force, its flood, bench_veth's JSON in
# $NETNS_TMP/CASE.out, "CASE judged passed" appended to $NETNS_TMP/judged.
run_case() # CASE
{
	local c=$1 p0 b0 p1 b1 seen judged flood sources=1

	[ "$c" = per_source ] && sources=$SOURCES
	if [ "$c" != "$first" ]; then
		sluice_cli rule replace "$NETNS_TMP/$c.json" >/dev/null ||
			die "$c: the rules were not applied"
	fi
	read -r p0 b0 < <(sluice_totals)
	[ -n "${b0:-}" ] || die "$c: no totals from the agent"
	ip netns exec "$NS_TX" "$BUILD/xdpflood" --dev veth-tx \
		--dst-mac "$RX_MAC" --dport 9000 --sources "$sources" \
		--duration $((SECONDS_TOTAL + 3)) --cpu "$CPU" \
		--repeat "$FLOOD_REPEAT" >"$NETNS_TMP/xdpflood.out" 2>&1 &
	flood=$!
	netns_on_exit "kill $flood 2>/dev/null"
	# the first call's set-up, before the phases start
	sleep 1
	ip netns exec "$NS_RX" taskset -c "$SWAP_CPU" "$BENCH_VETH" \
		--dev veth-rx --link "$SL_LINK" --seconds "$SECONDS_TOTAL" \
		--phase-ms "$PHASE_MS" >"$NETNS_TMP/$c.out" ||
		die "$c: bench_veth failed"
	wait "$flood" ||
		die "$c: xdpflood failed: $(cat "$NETNS_TMP/xdpflood.out")"
	read -r p1 b1 < <(sluice_totals)

	# every frame of sluice's phases judged by the rule (it also judged
	# the frames of the settling time after each swap), dropped but for
	# ~1 a second (a source, per_source)
	seen=$(jq .sluice_packets "$NETNS_TMP/$c.out")
	judged=$(((b1 - b0) + (p1 - p0)))
	if [ "$judged" -lt $((seen * 99 / 100)) ] ||
	   [ $((p1 - p0)) -gt $(((SECONDS_TOTAL * 2 + 4) * sources)) ]; then
		die "$c: sluice's phases received $seen frames; the rule" \
			"judged $judged and passed $((p1 - p0))"
	fi
	echo "$c $judged $((p1 - p0))" >>"$NETNS_TMP/judged"
}

for c in $CASES; do
	run_case "$c"
done

# "median_pps ratio q1 q3" of receiver $2 in case $1
ratio_of()
{
	jq -r --arg n "$2" '.receivers[] | select(.name == $n) |
		"\(.median_pps) \(.ratio) \(.ratio_q1) \(.ratio_q3)"' \
		"$NETNS_TMP/$1.out"
}

# "ratio q1 q3 added_ns q1 q3" of sluice to the parse in case $1
to_parse()
{
	jq -r '.sluice_to_parse | "\(.ratio) \(.ratio_q1) \(.ratio_q3) \(.added_ns) \(.added_ns_q1) \(.added_ns_q3)"' \
		"$NETNS_TMP/$1.out"
}

echo "veth drop path: xdpflood live frames, 64-byte UDP to port 9000, on" \
	"CPU $CPU, $SECONDS_TOTAL s a case; the program on veth-rx's link" \
	"swapped every $PHASE_MS ms among bare, parse and sluice"
while read -r c judged passed; do
	echo "  $c: the rule judged $judged frames, passed $passed"
done <"$NETNS_TMP/judged"
printf '%-30s %11s  %-21s %-21s %s\n' "receiver on veth-rx" "median pps" \
	"to bare (quartiles)" "to parse" "ns added to the parse"
for c in $CASES; do
	for who in bare parse sluice; do
		read -r pps r q1 q3 < <(ratio_of "$c" "$who")
		case $who in
		bare) name="$c: bare XDP_DROP" ;;
		parse) name="$c: parse + XDP_DROP" ;;
		sluice) name="$c: sluice" ;;
		esac
		if [ "$who" != sluice ]; then
			printf '%-30s %11s  %.3f (%.3f-%.3f)\n' "$name" "$pps" \
				"$r" "$q1" "$q3"
			continue
		fi
		read -r pr pq1 pq3 ns nq1 nq3 < <(to_parse "$c")
		printf '%-30s %11s  %.3f (%.3f-%.3f)   %.3f (%.3f-%.3f)   %.1f (%.1f-%.1f)\n' \
			"$name" "$pps" "$r" "$q1" "$q3" "$pr" "$pq1" "$pq3" \
			"$ns" "$nq1" "$nq3"
	done
done
# docs/benchmarks.md's targets: the drop path at 0.95 of the parse's
# rate; per_source within twice the parse's time a packet
for c in $CASES; do
	case $c in
	rule) t=0.95 ;;
	per_source) t=0.5 ;;
	*) continue ;;
	esac
	read -r pr _ < <(to_parse "$c")
	awk -v c="$c" -v r="$pr" -v t="$t" 'BEGIN {
		printf "target veth %s, sluice / parse >= %s: %.3f %s\n", c,
			t, r, (r + 0 >= t + 0) ? "OK" : "MISS" }'
done
exit 0
