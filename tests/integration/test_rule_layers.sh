#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Layers (docs/rules.md "layer") on real packets, counted where the stack
# delivers them (UDP sockets, by port and source /24), not by sluice. Two
# services, each with a per-source layer 0 (by /24) and an aggregate layer
# 1; every sender sends 400 datagrams at 200/s for 2 s:
#   - UDP 9000, pps 20 a /24, 200 in all: two sources, each held to its
#     own 20/s though the service has room (layer 0 binds);
#   - UDP 9001, pps 1000 a /24, 60 in all: four sources, the four together
#     held to 60/s though each is under its own count (layer 1 binds);
#   - the monitoring /24 wins 9000's layer 0 with an allow (priority 10):
#     all 400 arrive and the service's count does not see them.
# Then each layer's counters are checked against the sockets' and each
# other's (every packet layer 0 passes is judged by layer 1), and stats,
# explain and the metrics say which layer each rule is in; a rule moved
# to another layer keeps its counters, and a bad layer is refused.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "layers"
netns_setup lay 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

N=400 RATE=200
cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "per-24", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": 20,
  "per_source": {"prefix_v4": 24, "max_sources": 100}},
 {"name": "service", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": 200, "layer": 1},
 {"name": "per-24b", "match": {"proto": "udp", "dport": 9001}, "grade": "pps", "count": 1000,
  "per_source": {"prefix_v4": 24, "max_sources": 100}},
 {"name": "serviceb", "match": {"proto": "udp", "dport": 9001}, "grade": "pps", "count": 60, "layer": 1},
 {"name": "monitoring", "match": {"src": "198.18.5.0/24"}, "action": "allow", "priority": 10}
]}
JSON
netns_no_rp_filter "$NS_RX" ||
	{ echo "Bail out! namespace setup failed"; exit 1; }

PORT=9465
sluice_start agent --rules "$NETNS_TMP/rules.json" --metrics "127.0.0.1:$PORT" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

# datagrams at the sockets by port and source /24, until 2 s without one
netns_bg "$NS_RX" udprx tests/lib/udpcount.py 198.18.0.2 9000 9001
netns_wait_ready udprx 5 || { echo "Bail out! the receiver did not start"; exit 1; }
declare -A SRC=([a]=198.18.7.1 [b]=198.18.8.1 [monitoring]=198.18.5.7
		[c]=198.18.9.1 [d]=198.18.10.1 [e]=198.18.11.1 [f]=198.18.12.1)
declare -A DPORT=([a]=9000 [b]=9000 [monitoring]=9000
		  [c]=9001 [d]=9001 [e]=9001 [f]=9001)
sl_send_sources "$N" "$RATE"
got() { sluice_json "d.get('${DPORT[$1]} ${SRC[$1]%.*}', 0)" <"$NETNS_TMP/udprx.out"; }
echo "# received by source: $(cat "$NETNS_TMP/udprx.out")"

# 2 s of sending: one window from idle, then count a second
within() { (( $1 >= $2 && $1 <= 3 * $2 + $2 / 10 )); echo $?; }
check $(( $(within "$(got a)" 20) || $(within "$(got b)" 20) )) \
	"9000, layer 0: each source /24 held to its 20/s though the service has room: $(got a) and $(got b) arrive"
total=0 each=""
for k in c d e f; do
	total=$(( total + $(got $k) ))
	each+=" $(got $k)"
done
min_each=$(printf '%s\n' $each | sort -n | head -1)
check $(within "$total" 60) \
	"9001, layer 1: four sources under their own 1000/s held to 60/s together: $total arrive ($each)"
check $(( min_each > 0 ? 0 : 1 )) \
	"9001: every source gets some of the service's count (fewest $min_each)"
check $([ "$(got monitoring)" = "$N" ]; echo $?) \
	"the monitoring /24's allow in layer 0: $(got monitoring) of $N arrive, past both limits"

sluice_cli stats -j >"$NETNS_TMP/stats.json"
stat() { sluice_json "[r for r in d['rules'] if r['name'] == '$1'][0]['$2']" <"$NETNS_TMP/stats.json"; }
for r in per-24 service per-24b serviceb; do
	echo "# $r: passed $(stat $r passed_pkts), blocked $(stat $r blocked_pkts)"
done
check $([ "$(stat service passed_pkts)" = $(( $(got a) + $(got b) )) ] &&
	[ "$(stat serviceb passed_pkts)" = "$total" ]; echo $?) \
	"stats: each service layer passed what its socket got from the sources ($(stat service passed_pkts), $(stat serviceb passed_pkts))"
consistent() { # $1 layer 0, $2 layer 1, $3 packets sent
	[ "$(stat "$1" passed_pkts)" = $(( $(stat "$2" passed_pkts) + $(stat "$2" blocked_pkts) )) ] &&
	[ "$(stat "$1" blocked_pkts)" = $(( $3 - $(stat "$1" passed_pkts) )) ]
}
check $(consistent per-24 service $(( 2 * N )) && consistent per-24b serviceb $(( 4 * N )); echo $?) \
	"stats: every packet layer 0 passed was judged by layer 1 (none of the monitoring's); layer 0 judged all"
check $([ "$(stat service blocked_pkts)" = 0 ] && [ "$(stat per-24b blocked_pkts)" = 0 ]; echo $?) \
	"stats: the layer with room dropped nothing ($(stat service blocked_pkts), $(stat per-24b blocked_pkts))"
check $([ "$(stat per-24 layer)" = 0 ] && [ "$(stat service layer)" = 1 ]; echo $?) \
	"stats -j: each rule's layer"
check $(sluice_cli stats | grep -Eq "^service +enforce +1 +200 pkt/s "; echo $?) \
	"sluice stats: the layer column"

ex=$(sluice_cli explain udp 198.18.7.1 198.18.0.2 --dport 9000)
echo "$ex" | sed 's/^/#   /'
check $(echo "$ex" | grep -q "^layer 0: per-24 (enforce, pps 20): " &&
	echo "$ex" | grep -q "^layer 1: service (enforce, pps 200): "; echo $?) \
	"explain: a packet of a source is judged by both layers, each named"
ex=$(sluice_cli explain udp 198.18.5.7 198.18.0.2 --dport 9000 -j)
check $([ "$(sluice_json '" ".join([d["rule"], d["verdict"]] + [l["rule"] + ":" + l["verdict"] for l in d["layers"]])' <<<"$ex")" = "monitoring pass monitoring:pass service:not_reached" ]; echo $?) \
	"explain -j: the monitoring packet is the allow's, and the service layer is not reached"

ip netns exec "$NS_RX" curl -sS --max-time 5 -o "$NETNS_TMP/metrics" \
	"http://127.0.0.1:$PORT/metrics"
grep -E '^sluice_rule_info' "$NETNS_TMP/metrics" | sed 's/^/#   /'
check $(grep -q '^sluice_rule_info{rule="service",mode="enforce",action="limit",grade="pps",per_source="false",layer="1"} 1' "$NETNS_TMP/metrics" &&
	grep -q '^sluice_rule_info{rule="per-24",mode="enforce",action="limit",grade="pps",per_source="true",layer="0"} 1' "$NETNS_TMP/metrics"; echo $?) \
	"metrics: sluice_rule_info has each rule's layer"

# moving a rule to another layer keeps its counters (the layer is not
# its identity), and a bad layer is refused with the rules kept
before=$(stat service passed_pkts)
sed 's/"layer": 1/"layer": 2/' "$NETNS_TMP/rules.json" >"$NETNS_TMP/moved.json"
sluice_cli rule replace "$NETNS_TMP/moved.json" >/dev/null 2>&1
sluice_cli stats -j >"$NETNS_TMP/stats.json"
check $([ "$(stat service layer)" = 2 ] && [ "$(stat service passed_pkts)" = "$before" ]; echo $?) \
	"a rule moved to layer 2 keeps its counters ($(stat service passed_pkts) passed)"
sed 's/"layer": 1/"layer": 4/' "$NETNS_TMP/rules.json" >"$NETNS_TMP/bad.json"
out=$(sluice_cli rule replace "$NETNS_TMP/bad.json" 2>&1)
rc=$?
echo "$out" | sed 's/^/#   /'
sluice_cli stats -j >"$NETNS_TMP/stats.json"
check $(( rc != 0 ? 0 : 1 )) "layer 4 is refused (exit $rc)"
check $(echo "$out" | grep -q "rule 'service': field 'layer': must be between 0 and 3, got 4" &&
	[ "$(stat service layer)" = 2 ]; echo $?) \
	"the error names the rule and the field, and the rules in force stay"
echo "1..$n"
