#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Type=notify, checked against a real NOTIFY_SOCKET (systemd's protocol: a
# datagram of NAME=VALUE lines) rather than trusted:
#   - READY=1 comes once, and when it comes the rules are in force: the
#     XDP program is on the interface and `status --ready` says so;
#   - STATUS= names the snapshot version, the rules and the interfaces,
#     and follows a rule change;
#   - a start refused for an empty rule set sends no READY=1;
#   - SIGTERM sends STOPPING=1 and the data plane stays attached.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "agent notify"
netns_setup anot 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
# a TCG guest (SLUICE_VM=1) starts the agent 10-100x slower
if [ -n "$VM" ]; then WAIT_S=120; else WAIT_S=10; fi
export WAIT_S

# listen SOCKET LOG: every datagram on LOG, one line each ("|" between
# its lines); on READY=1, whether XDP was on veth-rx at that moment
listen()
{
	python3 -u - "$1" "$2" "$NS_RX" <<'PY' &
import os, socket, subprocess, sys
path, log, ns = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(int(os.environ["WAIT_S"]) * 3)
with open(log, "a", buffering=1) as f:
    while True:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            break
        line = msg.strip().replace("\n", "|")
        if "READY=1" in msg.split("\n"):
            link = subprocess.run(["ip", "-n", ns, "-d", "link", "show",
                                   "dev", "veth-rx"], capture_output=True,
                                  text=True).stdout
            line += " xdp=" + ("yes" if "prog/xdp" in link else "no")
        f.write(line + "\n")
PY
	LISTENER=$!
	netns_on_exit "kill $LISTENER 2>/dev/null"
	for ((i = 0; i < 50; i++)); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# a refused start: empty rules, no --allow-empty
echo '{"rules": []}' >"$T/empty.json"
listen "$T/n0.sock" "$T/n0.log" || { echo "Bail out! listener"; exit 1; }
NOTIFY_SOCKET=$T/n0.sock SL_FG_TIMEOUT=$WAIT_S \
	sluice_agent_fg "$T/fg0" --rules "$T/empty.json"
rc=$?
sleep 0.2
check $((rc != 0 && $(grep -c 'READY=1' "$T/n0.log") == 0 ? 0 : 1)) \
	"an empty rule set: exit $rc, and no READY=1 ($(tr '\n' ' ' <"$T/n0.log"))"
kill "$LISTENER" 2>/dev/null

listen "$T/n1.sock" "$T/n1.log" || { echo "Bail out! listener"; exit 1; }
NOTIFY_SOCKET=$T/n1.sock sluice_bg agent --rules rules/demo.json
# wait_log PATTERN: until the listener logged it (WAIT_S at most)
wait_log()
{
	for ((i = 0; i < WAIT_S * 20; i++)); do
		grep -q "$1" "$T/n1.log" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
wait_log 'READY=1'

sluice_cli status --ready >/dev/null 2>&1
ready=$?
check $((ready == 0 ? 0 : 1)) "READY=1 came, and status --ready agrees"
grep -q 'READY=1.* xdp=yes' "$T/n1.log"
check $? "when READY=1 came XDP was already on veth-rx: $(grep READY "$T/n1.log")"
check $(($(grep -c 'READY=1' "$T/n1.log") == 1 ? 0 : 1)) "READY=1 came once"
grep -q 'STATUS=snapshot version 1, 2 rules in force on 1 interfaces' \
	"$T/n1.log"
check $? "STATUS= names the snapshot, its rules and the interfaces"

echo '{"rules": [{"name": "one", "match": {}, "grade": "pps", "count": 5}]}' \
	>"$T/one.json"
sluice_cli rule replace "$T/one.json" >/dev/null
wait_log 'STATUS=snapshot version 2, 1 rules in force on 1 interfaces' 
check $? "STATUS= follows a rule change: $(tail -n1 "$T/n1.log")"

netns_stop agent
wait_log 'STOPPING=1' 
check $? "SIGTERM sends STOPPING=1"
ip -n "$NS_RX" -d link show dev veth-rx | grep -q 'prog/xdp'
check $? "and the data plane stays attached"
echo "1..$n"
