#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The errors an operator meets on day one (docs/operations.md):
#   - a --pin-dir that is not on a bpf filesystem: exit 1, the message says
#     so and how to mount one, and nothing is created there;
#   - a start that fails at an interface (one good, one missing): exit 1,
#     the good interface is detached again and no pin is left behind;
#   - the same failure over a running data plane (an agent restarting with
#     a bad --iface): the running data plane stays attached and pinned;
#   - maps pinned without any link: `sluice down` removes them, says so,
#     exits 0;
#   - another program on the interface's XDP hook: exit 1, the message
#     names it and how to detach it, and it stays attached;
#   - the log: "<3>" sd-daemon prefixes when stderr is the journal's stream
#     (JOURNAL_STREAM is its dev:ino), an ISO-8601 UTC timestamp otherwise,
#     one JSON object a line with --log-format json, --log-level.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "agent day-one errors"
netns_setup aerr 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
# a TCG guest (SLUICE_VM=1) starts and fails 10-100x slower
if [ -n "$VM" ]; then READY_S=120; export SL_FG_TIMEOUT=120; else READY_S=10; fi
# the log checks run an agent that starts and keeps running: long enough
# for its start's lines (2-3 s in a guest), not the 120 s a failure gets
LOG_S=5
[ -n "$VM" ] && LOG_S=20

xdp_attached() # DEV: an XDP program on DEV in NS_RX
{
	ip -n "$NS_RX" -d link show dev "$1" | grep -q 'prog/xdp'
}

# not a bpf filesystem: $T is on the host's /tmp
mkdir -p "$T/plain"
sluice_agent_fg "$T/fg1" --rules rules/demo.json --pin-dir "$T/plain/pins"
rc=$?
grep -q "$T/plain/pins is not on a bpf filesystem" "$T/fg1" &&
	grep -q "mount -t bpf bpf /sys/fs/bpf" "$T/fg1"
check $((rc == 1 && $? == 0 ? 0 : 1)) \
	"--pin-dir off bpffs: exit $rc (want 1), the message names it and the mount"
show "$T/fg1" 3
check $([ -e "$T/plain/pins" ] && echo 1 || echo 0) \
	"--pin-dir off bpffs: nothing was created there"

# a fresh start that fails at its second interface
sluice_agent_fg "$T/fg2" --rules rules/demo.json --iface veth-rx,nope0
rc=$?
grep -q "nope0: cannot attach" "$T/fg2"
check $((rc == 1 && $? == 0 ? 0 : 1)) \
	"--iface veth-rx,nope0: exit $rc (want 1), nope0 named"
show "$T/fg2" 3
check $([ -e "$SL_PIN" ] && echo 1 || echo 0) \
	"a failed fresh start leaves no pins ($(ls "$SL_PIN" 2>/dev/null | wc -l) left)"
xdp_attached veth-rx
check $((! $? ? 1 : 0)) "a failed fresh start detached veth-rx again"

# a running data plane, then a restart with a bad --iface
sluice_bg agent1 --rules rules/demo.json
sluice_wait_ready agent1 "$READY_S" ||
	{ echo "Bail out! the agent did not start"; exit 1; }
sluice_kill agent1
sluice_agent_fg "$T/fg3" --iface veth-rx,nope0
rc=$?
xdp_attached veth-rx
attached=$?
check $((rc == 1 && attached == 0 ? 0 : 1)) \
	"a failed restart (exit $rc) leaves the running data plane attached"
check $([ -e "$SL_LINK" ] && sl_pinned_map rule_meta &&
	echo 0 || echo 1) "and pinned (link and maps)"

# maps without a link: the link's pin gone while no agent holds it
rm "$SL_LINK"
for ((i = 0; i < 50; i++)); do
	xdp_attached veth-rx || break
	sleep 0.1
done
ip netns exec "$NS_RX" "$SLUICE" down --iface veth-rx --pin-dir "$SL_PIN" \
	>"$T/down" 2>&1
rc=$?
grep -q "held maps but no link" "$T/down"
check $((rc == 0 && $? == 0 ? 0 : 1)) \
	"down over maps without a link: exit $rc (want 0), it says it removed them"
show "$T/down" 3
check $([ -e "$SL_PIN" ] && echo 1 || echo 0) "and the pin directory is gone"
ip netns exec "$NS_RX" "$SLUICE" down --iface veth-rx --pin-dir "$SL_PIN" \
	>"$T/down2" 2>&1
rc=$?
grep -q "nothing pinned" "$T/down2"
check $((rc == 1 && $? == 0 ? 0 : 1)) \
	"down with nothing pinned at all: exit $rc (want 1), 'nothing pinned'"

# another program on the XDP hook: named, left alone, exit 1
netns_bg "$NS_RX" xdppass "$GEN_BIN/xdppass" --dev veth-rx --duration 120
netns_wait_ready xdppass 5 || { echo "Bail out! xdppass"; exit 1; }
sluice_agent_fg "$T/fg5" --rules rules/demo.json
rc=$?
grep -q "veth-rx: another XDP program is attached (id [0-9]*, xdppass, native mode)" \
	"$T/fg5" && grep -q "ip link set dev veth-rx xdp off" "$T/fg5" &&
	ip -n "$NS_RX" -d link show dev veth-rx | grep -q 'name xdppass'
check $((rc == 1 && $? == 0 ? 0 : 1)) \
	"another XDP program on veth-rx: exit $rc (want 1), named with how to detach it, and left attached"
show "$T/fg5" 3
netns_stop xdppass

# the log, on an agent that refuses a bad rule file (and one that starts)
printf '{"rules":[{"name":"x","match":{},"grade":"pps","count":0}]}\n' \
	>"$T/bad.json"
: >"$T/journal"
JOURNAL_STREAM=$(stat -c %d:%i "$T/journal") \
	ip netns exec "$NS_RX" "$SLUICE" agent --iface veth-rx \
	--state-dir "$T/st1" --pin-dir "$SL_PIN" --rules "$T/bad.json" \
	2>>"$T/journal"
rc=$?
show "$T/journal" 2
grep -q '^<3>sluice: error: ' "$T/journal"
check $((rc == 1 && $? == 0 ? 0 : 1)) \
	"stderr is the journal's stream: errors carry <3> (exit $rc)"
JOURNAL_STREAM=1:1 ip netns exec "$NS_RX" "$SLUICE" agent --iface veth-rx \
	--state-dir "$T/st1" --pin-dir "$SL_PIN" --rules "$T/bad.json" \
	2>"$T/plain.log"
show "$T/plain.log" 1
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z sluice: error: ' \
	"$T/plain.log" && ! grep -q '^<' "$T/plain.log"
check $? "stderr elsewhere: an ISO-8601 UTC timestamp, no <N>"
ip netns exec "$NS_RX" "$SLUICE" agent --iface veth-rx --state-dir "$T/st1" \
	--pin-dir "$SL_PIN" --rules "$T/bad.json" --log-format json \
	2>"$T/json.log"
python3 - "$T/json.log" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs and all({"time", "level", "msg"} <= r.keys() for r in recs)
assert any(r["level"] == "error" for r in recs)
PY
check $? "--log-format json: every line one JSON object with time, level, msg"
SL_FG_TIMEOUT=$LOG_S sluice_agent_fg "$T/quiet" --rules rules/demo.json \
	--log-level error
grep -q 'info:' "$T/quiet"
check $((! $?)) "--log-level error: no info lines"
SL_FG_TIMEOUT=$LOG_S sluice_agent_fg "$T/loud" --rules rules/demo.json \
	--log-level debug
grep -q 'info:' "$T/loud"
check $? "--log-level debug: info lines too"
echo "1..$n"
