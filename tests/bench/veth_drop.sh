#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Drop-path throughput over veth (docs/benchmarks.md): build/xdpflood sends
# live frames out of veth-tx, as fast as it can, for the whole run; on
# veth-rx the sluice agent holds one udp rule of count 1 pps. Meanwhile
# build/bench_veth swaps the program on the agent's bpf_link every phase
# (100 ms) among a bare XDP_DROP that never reads the frame (the issue's
# baseline), the same headers parsed then XDP_DROP (tests/bench/bare.bpf.c)
# and sluice, and reads each phase's rate from veth-rx's rx packet counter
# (every frame handed to XDP, dropped ones included). A phase's ratio is
# to the mean of the bare phases before and after it, and the median over
# the cycles is reported: neighbouring phases see the same machine, whose
# speed drifts. The rule's own counters must show every frame of sluice's
# phases judged, and all but ~1 per second dropped, or the run fails.
#
# usage: tests/bench/veth_drop.sh [--seconds S] [--phase-ms MS] [--cpu N]
# Prints a table and "target veth drop >= 0.9: 0.912 OK" (or MISS); exits 0
# whatever the figures, 1 when it cannot measure, and prints a TAP skip
# (exit 0) without root or native XDP on veth.

set -u

SECONDS_TOTAL=30
PHASE_MS=100
CPU=
TARGET=0.9
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
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
case "$SECONDS_TOTAL$PHASE_MS$CPU" in
*[!0-9]*) usage >&2; exit 2 ;;
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
sluice_env_setup || die "cannot mount a bpffs for the pins"
cat >"$NETNS_TMP/flood.json" <<'EOF'
{"rules": [{"name": "flood", "match": {"proto": "udp", "dport": 9000},
	    "grade": "pps", "count": 1}]}
EOF
sluice_start agent --xdp-mode native --rules "$NETNS_TMP/flood.json" \
	--stats-interval 0 || die "the agent did not come up"

# rule totals "passed blocked" from the agent
sluice_totals()
{
	sluice_cli stats -j | jq -r '.rules[0] | "\(.passed_pkts) \(.blocked_pkts)"'
}

read -r p0 b0 < <(sluice_totals)
[ -n "${b0:-}" ] || die "no totals from the agent"
ip netns exec "$NS_TX" "$BUILD/xdpflood" --dev veth-tx --dst-mac "$RX_MAC" \
	--dport 9000 --duration $((SECONDS_TOTAL + 3)) --cpu "$CPU" \
	--repeat "$FLOOD_REPEAT" >"$NETNS_TMP/xdpflood.out" 2>&1 &
FLOOD=$!
netns_on_exit "kill $FLOOD 2>/dev/null"
# the first call's set-up, before the phases start
sleep 1
out=$(ip netns exec "$NS_RX" taskset -c "$SWAP_CPU" "$BENCH_VETH" \
	--dev veth-rx --link "$SL_LINK" --seconds "$SECONDS_TOTAL" \
	--phase-ms "$PHASE_MS") || die "bench_veth failed"
wait "$FLOOD" || die "xdpflood failed: $(cat "$NETNS_TMP/xdpflood.out")"
read -r p1 b1 < <(sluice_totals)

# every frame of sluice's phases judged by the rule (it also judged the
# frames of the settling time after each swap), dropped but for ~1 a second
seen=$(jq .sluice_packets <<<"$out")
judged=$(((b1 - b0) + (p1 - p0)))
if [ "$judged" -lt $((seen * 99 / 100)) ] ||
   [ $((p1 - p0)) -gt $((SECONDS_TOTAL * 2 + 4)) ]; then
	die "sluice's phases received $seen frames; the rule judged $judged" \
		"and passed $((p1 - p0))"
fi

ratio_of()
{
	jq -r --arg n "$1" '.receivers[] | select(.name == $n) |
		"\(.median_pps) \(.ratio) \(.ratio_q1) \(.ratio_q3) \(.cycles)"' \
		<<<"$out"
}

read -r _ sb _ _ cycles < <(ratio_of sluice)
sb_str=$(awk -v r="$sb" 'BEGIN { printf "%.3f", r }')
ok=$(awk -v r="$sb" -v t="$TARGET" \
	'BEGIN { print (r + 0 >= t + 0) ? "OK" : "MISS" }')

echo "veth drop path: xdpflood live frames, 64-byte UDP to port 9000, on" \
	"CPU $CPU for $SECONDS_TOTAL s; the program on veth-rx's link swapped" \
	"every $PHASE_MS ms, $cycles cycles of bare, parse, sluice;" \
	"sluice's rule judged $judged frames, passed $((p1 - p0))"
printf '%-34s %11s  %s\n' "receiver on veth-rx" "median pps" \
	"ratio to bare (median, quartiles)"
for who in bare parse sluice; do
	case $who in
	bare) name="bare XDP_DROP (drop_only)" ;;
	parse) name="parse + XDP_DROP (bare_drop)" ;;
	sluice) name="sluice agent, udp rule count 1" ;;
	esac
	read -r pps r q1 q3 _ < <(ratio_of "$who")
	printf '%-34s %11s  %.3f (%.3f-%.3f)\n' "$name" "$pps" "$r" "$q1" "$q3"
done
echo "target veth drop >= $TARGET: $sb_str $ok"
exit 0
