#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# match.vlan on real tagged frames: sluice on veth-rx, one paced pktsend
# per group at twice its rule's count (AF_PACKET: every frame a fresh skb,
# so the stack's in-place untagging cannot corrupt later frames), all at
# once. Each group has its own dport, so one rxcount per group at tc
# ingress counts what it admitted, independently of sluice:
#   - VLAN 100 (IPv4), QinQ 10/200 (the inner tag counts; a rule on the
#     outer VID 10 must not judge it), VLAN 300 (IPv6) and untagged plus
#     priority-tagged (VID 0, sharing the "untagged" rule) each admit
#     their count within 3% per second once the opening burst has left
#     the window (the whole seconds from the third on);
#   - the untagged and priority-tagged senders, on two CPUs, share their
#     rule as they share its load, within 3 points;
#   - VLAN 400, which no VLAN rule names, falls to a rule without a VLAN
#     and passes in full;
#   - sluice's passed counters agree with rxcount's per rule.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "match.vlan"
if [ -n "$VM" ]; then
	skip "match.vlan" "host-only: $VMWHY"
	exit 0
fi
netns_setup vlan 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

DUR=${VLAN_DUR:-6}
cat >"$NETNS_TMP/rules.json" <<'EOF'
{"rules": [
 {"name": "v100", "match": {"proto": "udp", "vlan": 100}, "grade": "pps", "count": 2000},
 {"name": "outer-10", "match": {"proto": "udp", "vlan": 10}, "grade": "pps", "count": 1},
 {"name": "v200", "match": {"proto": "udp", "vlan": 200}, "grade": "pps", "count": 1000},
 {"name": "v300-v6", "match": {"proto": "udp", "vlan": 300, "dst": "2001:db8::/32"}, "grade": "pps", "count": 1500},
 {"name": "untagged", "match": {"proto": "udp", "vlan": "untagged"}, "grade": "pps", "count": 3000},
 {"name": "other-udp", "match": {"proto": "udp"}, "grade": "pps", "count": 1000000}
]}
EOF
sluice_start agent --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

# group dport rate cpu "pktsend options"
GROUPS_=(
	"v100 9100 4000 0 --vlan 100"
	"qinq 9200 2000 1 --qinq 10,200"
	"v6 9300 3000 0 --vlan 300 --src 2001:db8::1 --dst 2001:db8::2"
	"bare 9001 2800 1"
	"prio 9002 3200 0 --vlan 0"
	"v400 9400 2000 1 --vlan 400"
)
for g in "${GROUPS_[@]}"; do
	set -- $g
	netns_bg "$NS_RX" "rx-$1" "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
		--dport "$2" --drop --duration $((DUR + 5))
	netns_wait_ready "rx-$1" 5 ||
		{ echo "Bail out! rxcount for $1 not ready"; exit 1; }
done
pids=()
for g in "${GROUPS_[@]}"; do
	set -- $g
	name=$1 dport=$2 rate=$3 cpu=$4
	shift 4
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --dport "$dport" --rate "$rate" \
		--duration "$DUR" --cpu "$cpu" "$@" >"$NETNS_TMP/tx-$name" &
	pids+=($!)
done
wait "${pids[@]}"
sleep 0.5
for g in "${GROUPS_[@]}"; do
	set -- $g
	netns_stop "rx-$1"
done
sluice_cli stats -j >"$NETNS_TMP/stats.json"
[ -n "${VLAN_KEEP:-}" ] && cp -r "$NETNS_TMP" "$VLAN_KEEP"

# per group: sent, admitted (rxcount), the mean of its whole seconds
python3 - "$NETNS_TMP" "${GROUPS_[@]%% *}" >"$NETNS_TMP/res" <<'PY'
import json, sys
d = sys.argv[1]
for name in sys.argv[2:]:
    tx = json.load(open(f"{d}/tx-{name}"))
    rx = json.load(open(f"{d}/rx-{name}.out"))
    bins = rx["per_second"]
    nz = [i for i, c in enumerate(bins) if c]
    # the first bin holds the opening burst (a window's worth at once)
    # and the next one less, while that burst leaves the sliding window
    full = bins[nz[0] + 2:nz[-1]] if len(nz) > 3 else [0]
    print(name, tx["sent"], rx["packets"], round(sum(full) / len(full)))
PY
declare -A SENT RX RATE
while read -r name sent rx rate; do
	SENT[$name]=$sent RX[$name]=$rx RATE[$name]=$rate
	echo "# $name: sent $sent, admitted $rx, $rate pps from the third second"
done <"$NETNS_TMP/res"
passed()
{
	python3 -c '
import json, sys
print(next(int(r["passed_pkts"]) for r in json.load(open(sys.argv[1]))["rules"]
           if r["name"] == sys.argv[2]))' "$NETNS_TMP/stats.json" "$1"
}

within()	# value count pct
{
	python3 -c "import sys; v, c, p = map(float, sys.argv[1:]); sys.exit(abs(v - c) > p / 100 * c)" "$@"
}

# rule group... count
for c in "v100 v100 2000" "v200 qinq 1000" "v300-v6 v6 1500" \
	 "untagged bare prio 3000"; do
	set -- $c
	rule=$1 count=${*: -1} rate=0 rx=0
	for grp in "${@:2:$#-2}"; do
		rate=$((rate + ${RATE[$grp]:-0}))
		rx=$((rx + ${RX[$grp]:-0}))
	done
	within "$rate" "$count" 3
	check $? "$rule (${*:2:$#-2}): admitted $rate pps within 3% of $count"
	p=$(passed "$rule")
	check $(( p == rx ? 0 : 1 )) \
		"$rule: sluice passed $p = rxcount $rx"
done
# both untagged kinds draw on the one rule from two CPUs, at rates a
# little apart: each one's share of what the rule admitted is its share
# of what was sent, within 3 points (bpf/admit.h: fair_want(); with
# chunk-sized requests a sender's phase against the tick moved its share
# by up to 10 points)
python3 -c '
import sys
b, p, sb, sp = map(float, sys.argv[1:])
sys.exit(abs(b / (b + p) - sb / (sb + sp)) > 0.03)' \
	"${RATE[bare]:-0}" "${RATE[prio]:-1}" "${SENT[bare]:-0}" "${SENT[prio]:-1}"
check $? "untagged ${RATE[bare]:-0} and priority-tagged ${RATE[prio]:-0} pps share the rule as they share the load (sent ${SENT[bare]:-0}, ${SENT[prio]:-0}) within 3 points"
check $(( $(passed outer-10) == 0 ? 0 : 1 )) \
	"QinQ 10/200 is not judged by the rule on the outer VID 10 (passed $(passed outer-10))"
check $(( ${RX[v400]:-0} == ${SENT[v400]:-1} && ${SENT[v400]:-0} > 0 ? 0 : 1 )) \
	"VLAN 400 (no VLAN rule): all ${SENT[v400]:-0} sent admitted (${RX[v400]:-0})"
check $(( $(passed other-udp) == ${RX[v400]:-0} ? 0 : 1 )) \
	"VLAN 400 judged by other-udp (passed $(passed other-udp))"
echo "1..$n"
