#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `sluice status` with no agent: after a kill -9 the pinned data plane
# still enforces, and status says so from the pins (dp/ sl_pins_view):
# the attached interface, the rules version (the snapshot's, when its
# rules are the pinned ones) and the rule names in force, exit 4. With
# nothing pinned either it stays "cannot reach the agent", exit 3.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "status without an agent"
netns_setup stnoagent 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP

cat >"$T/rules.json" <<'J'
{"rules": [
 {"name": "dns", "match": {"proto": "udp", "dport": 53}, "grade": "pps", "count": 100},
 {"name": "web-syn", "match": {"proto": "tcp", "dport": 443}, "grade": "cps", "count": 50,
  "breaker": {"strategy": "error_count", "threshold": 5, "open_ms": 1000}}
]}
J
cat >"$T/more.json" <<'J'
{"rules": [
 {"name": "ntp", "match": {"proto": "udp", "dport": 123}, "grade": "pps", "count": 10}
]}
J
sluice_start agent --rules "$T/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }
sluice_cli rule add "$T/more.json" >/dev/null ||
	{ echo "Bail out! rule add"; exit 1; }
grep -q 'info: rules at version 2: 3 in force; added ntp$' "$T/agent.err"
check $? "the agent logs which rules a change added"
version=$(sluice_cli status -j | jq .in_force_version)
sluice_cli rule list | grep -q '^breaker web-syn: {"strategy":"error_count"'
check $? "rule list prints the breaker settings"
sluice_kill agent

st() { ip netns exec "$NS_RX" "$SLUICE" status --state-dir "$SL_STATE" "$@"; }
st --pin-dir "$SL_PIN" >"$T/out" 2>"$T/err"
rc=$?
show "$T/out"
check $((rc == 4 ? 0 : 1)) "killed agent, pinned data plane: exit $rc (want 4)"
grep -q 'cannot reach the agent' "$T/err"
check $? "stderr still says the agent cannot be reached"
grep -q '^NO AGENT: .* is enforcing' "$T/out"
check $? "stdout says no agent, data plane enforcing"
grep -q '^interfaces: veth-rx$' "$T/out"
check $? "the attached interface: veth-rx"
grep -q "^in force:  3 rules, version $version\$" "$T/out"
check $? "3 rules in force, version $version (the snapshot's)"
grep -q '^rules: .*dns' "$T/out" && grep -q '^rules: .*web-syn' "$T/out" &&
	grep -q '^rules: .*ntp' "$T/out"
check $? "the rule names in force: dns, web-syn, ntp"

st -j --pin-dir "$SL_PIN" >"$T/json" 2>/dev/null
rc=$?
jq -e --argjson v "$version" '.agent == false and .rules_in_force == 3 and
	.in_force_version == $v and (.rules | sort) == ["dns","ntp","web-syn"]
	and .interfaces[0].name == "veth-rx" and .interfaces[0].attached' \
	"$T/json" >/dev/null
check $((rc == 4 && $? == 0 ? 0 : 1)) "-j: the same as JSON, exit $rc"

# a snapshot that is not what is pinned: the version is not claimed
python3 - "$SL_STATE/rules.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["rules"] = s["rules"][:1]
json.dump(s, open(sys.argv[1] + ".x", "w"))
PY
mv "$SL_STATE/rules.json" "$T/snap.keep" && mv "$SL_STATE/rules.json.x" "$SL_STATE/rules.json"
st --pin-dir "$SL_PIN" >"$T/out2" 2>/dev/null
grep -q '^in force:  3 rules, version unknown' "$T/out2"
check $? "a snapshot other than the pinned rules: version unknown"
mv "$T/snap.keep" "$SL_STATE/rules.json"

# adopting the data plane (its breaker's clsact there already) and taking
# it down without a breaker or a clsact: no tc noise ("Exclusivity flag
# on", "Parent Qdisc doesn't exists" before)
sluice_start agent2 || { echo "Bail out! the agent did not adopt"; exit 1; }
sluice_cli rule replace "$T/more.json" >/dev/null ||
	{ echo "Bail out! rule replace"; exit 1; }
netns_stop agent2
ip netns exec "$NS_RX" tc qdisc del dev veth-rx clsact 2>/dev/null
show "$T/agent2.err"
grep -Eiq 'qdisc|kernel error' "$T/agent2.err"
check $((! $?)) "adopt and stop: no kernel tc message in the agent's log"
ip netns exec "$NS_RX" "$SLUICE" down --iface veth-rx --pin-dir "$SL_PIN" \
	>"$T/down" 2>"$T/down.err"
rc=$?
show "$T/down.err"
check $((rc == 0 ? 0 : 1)) "down: exit $rc"
check $([ -s "$T/down.err" ]; echo $((! $?))) "down: nothing on stderr"

mkdir -p "$SL_BPFFS/empty"
st --pin-dir "$SL_BPFFS/empty" >"$T/out3" 2>"$T/err3"
rc=$?
grep -q 'no data plane pinned' "$T/err3"
check $((rc == 3 && $? == 0 ? 0 : 1)) "nothing pinned: exit $rc (want 3), it says so"
echo "1..$n"
