#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# allow and deny on real packets, counted where the stack delivers them (a
# UDP socket, by source), not by sluice. UDP to 9000 is limited to pps 50;
# five senders each send 400 datagrams at 200/s:
#   - from the monitoring /24 (allow, priority 10): all 400 arrive;
#   - from a denied /16 (deny, priority 10): none arrive;
#   - from a partner /24 inside it (allow, more specific): all 400;
#   - from a /24 under a shadow deny: all 400, counted as would-drop;
#   - from anywhere else: the limit's (at most 50 a second + one window).
# Then sluice's own counters are compared with those: stats, drops, explain,
# metrics (the
# action label; promtool checks the scrape), and a rule file whose deny
# has a count is refused with the rules in force left as they were.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "actions"
netns_setup act 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

N=400 RATE=200 COUNT=50
cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "monitoring", "match": {"src": "198.18.5.0/24"}, "action": "allow", "priority": 10},
 {"name": "bad-net", "match": {"src": "198.19.0.0/16"}, "action": "deny", "priority": 10},
 {"name": "partner", "match": {"src": "198.19.7.0/24"}, "action": "allow", "priority": 10},
 {"name": "trial", "match": {"src": "198.18.6.0/24"}, "action": "deny", "mode": "shadow", "priority": 10},
 {"name": "udp9000", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": $COUNT}
]}
JSON
netns_no_rp_filter "$NS_RX" ||
	{ echo "Bail out! namespace setup failed"; exit 1; }

PORT=9464
sluice_start agent --rules "$NETNS_TMP/rules.json" --metrics "127.0.0.1:$PORT" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

# datagrams at the socket by source /24, until 2 s without one
netns_bg "$NS_RX" udprx tests/lib/udpcount.py 198.18.0.2 9000
netns_wait_ready udprx 5 || { echo "Bail out! the receiver did not start"; exit 1; }
declare -A SRC=([monitoring]=198.18.5.7 [bad]=198.19.200.1
		[partner]=198.19.7.3 [trial]=198.18.6.9 [other]=198.18.9.4)
sl_send_sources "$N" "$RATE"
got() { sluice_json "d.get('9000 ${SRC[$1]%.*}', 0)" <"$NETNS_TMP/udprx.out"; }
echo "# received by source: $(cat "$NETNS_TMP/udprx.out")"

check $([ "$(got monitoring)" = "$N" ]; echo $?) \
	"allow on the monitoring /24: $(got monitoring) of $N arrive, past the limit of $COUNT/s"
check $([ "$(got bad)" = 0 ]; echo $?) \
	"deny on a /16: $(got bad) of $N arrive"
check $([ "$(got partner)" = "$N" ]; echo $?) \
	"allow on a /24 inside the denied /16 (more specific): $(got partner) of $N arrive"
check $([ "$(got trial)" = "$N" ]; echo $?) \
	"a shadow deny: $(got trial) of $N arrive"
# 2 s of sending: one window from idle, then count a second
other=$(got other)
check $(( other >= COUNT && other <= 3 * COUNT + COUNT / 10 ? 0 : 1 )) \
	"anyone else is limited: $other of $N arrive (count $COUNT/s over 2 s)"

sluice_cli stats -j >"$NETNS_TMP/stats.json"
stat() { sluice_json "[r for r in d['rules'] if r['name'] == '$1'][0]['$2']" <"$NETNS_TMP/stats.json"; }
check $([ "$(stat monitoring action)" = allow ] &&
	[ "$(stat monitoring passed_pkts)" = "$N" ] &&
	[ "$(stat monitoring blocked_pkts)" = 0 ]; echo $?) \
	"stats: monitoring is an allow, passed $(stat monitoring passed_pkts), blocked $(stat monitoring blocked_pkts)"
check $([ "$(stat bad-net action)" = deny ] &&
	[ "$(stat bad-net blocked_pkts)" = "$N" ] &&
	[ "$(stat bad-net passed_pkts)" = 0 ]; echo $?) \
	"stats: bad-net is a deny, blocked $(stat bad-net blocked_pkts), passed $(stat bad-net passed_pkts)"
check $([ "$(stat trial blocked_pkts)" = "$N" ] &&
	[ "$(stat trial passed_pkts)" = 0 ]; echo $?) \
	"stats: the shadow deny counts $(stat trial blocked_pkts) would-drop"
check $(sluice_json '"count" not in [r for r in d["rules"] if r["name"] == "bad-net"][0] and "threshold" not in [r for r in d["rules"] if r["name"] == "bad-net"][0]' <"$NETNS_TMP/stats.json" | grep -qx true; echo $?) \
	"stats -j: a deny rule has no count or threshold"
table=$(sluice_cli stats)
echo "$table" | grep -E "^(bad-net|monitoring) " | sed 's/^/#   /'
check $(echo "$table" | grep -Eq "^bad-net +enforce +0 +deny " &&
	echo "$table" | grep -Eq "^monitoring +enforce +0 +allow "; echo $?) \
	"sluice stats: the limit column says allow and deny"

ip netns exec "$NS_RX" curl -sS --max-time 5 -o "$NETNS_TMP/metrics" \
	"http://127.0.0.1:$PORT/metrics"
metrics=$(cat "$NETNS_TMP/metrics")
echo "$metrics" | grep -E '^sluice_rule_(info|dropped_packets_total|would_drop_packets_total)\{rule="(bad-net|trial|udp9000)"' |
	sed 's/^/#   /'
check $(echo "$metrics" | grep -q '^sluice_rule_info{rule="bad-net",mode="enforce",action="deny",grade="",per_source="false",layer="0"} 1' &&
	echo "$metrics" | grep -q '^sluice_rule_info{rule="udp9000",mode="enforce",action="limit",grade="pps",per_source="false",layer="0"} 1' &&
	echo "$metrics" | grep -q "^sluice_rule_dropped_packets_total{rule=\"bad-net\"} $N\$" &&
	echo "$metrics" | grep -q "^sluice_rule_would_drop_packets_total{rule=\"trial\"} $N\$" &&
	! echo "$metrics" | grep -q '^sluice_rule_threshold{rule="bad-net"}'; echo $?) \
	"metrics: sluice_rule_info has the action, the deny's drops (and the shadow deny's would-drops) are counted, it has no threshold"
if command -v promtool >/dev/null; then
	said=$(promtool check metrics <"$NETNS_TMP/metrics" 2>&1)
	check $(( $? == 0 ? 0 : 1 )) "promtool check metrics: clean${said:+ ($said)}"
else
	skip "promtool check metrics" "no promtool"
fi

# sluice drops: the deny's drops are sampled (one in 61: about 6 of its
# 400), by source, its sender's 4
sluice_cli drops bad-net -j >"$NETNS_TMP/drops.json"
srcs=$(sluice_json 'sorted(s["addr"] for s in d["rules"][0]["sources"]) if d["rules"] and d["rules"][0]["name"] == "bad-net" else []' <"$NETNS_TMP/drops.json")
check $(python3 -c 'import json, sys; v = json.loads(sys.argv[1]); sys.exit(not (len(v) >= 2 and set(v) <= {"198.19.200.%d" % k for k in range(1, 5)}))' "$srcs"; echo $?) \
	"drops: the deny's sampled drops name its sender's sources ($srcs)"

# sluice explain: the rule and its action's verdict
ex=$(sluice_cli explain udp 198.19.200.1 198.18.0.2 --dport 9000)
echo "$ex" | sed 's/^/#   /'
check $(echo "$ex" | grep -qx "rule:    bad-net (enforce, deny)" &&
	echo "$ex" | grep -qx "verdict: drop: a deny rule drops every packet"; echo $?) \
	"explain: a packet from the denied /16 is the deny's, dropped"
ex=$(sluice_cli explain udp 198.19.7.3 198.18.0.2 --dport 9000 -j)
check $([ "$(sluice_json 'd["rule"] + " " + d["action"] + " " + d["verdict"] + " " + str("count" in d)' <<<"$ex")" = "partner allow pass False" ]; echo $?) \
	"explain -j: the partner's packet is the allow's, passed, no count"

# a deny with a count: refused by name, the rules in force stay
sed 's/"action": "deny", "priority": 10}/"action": "deny", "count": 5, "priority": 10}/' \
	"$NETNS_TMP/rules.json" >"$NETNS_TMP/bad.json"
ver=$(sluice_json 'd["version"]' <<<"$(sluice_cli rule list -j)")
out=$(sluice_cli rule replace "$NETNS_TMP/bad.json" 2>&1)
rc=$?
echo "$out" | sed 's/^/#   /'
check $(( rc != 0 ? 0 : 1 )) "a deny with a count is refused (exit $rc)"
check $(echo "$out" | grep -q "rule 'bad-net': field 'count': only with action \"limit\""; echo $?) \
	"the error names the rule and the field"
check $([ "$(sluice_json 'd["version"]' <<<"$(sluice_cli rule list -j)")" = "$ver" ]; echo $?) \
	"the rules in force stay (version $ver)"
echo "1..$n"
