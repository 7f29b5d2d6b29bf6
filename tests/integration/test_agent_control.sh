#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The control socket cannot be stalled (docs/cli.md, "The control socket"):
#   - one idle client, 200 idle clients, a client sending its request a
#     byte at a time, a client that asks for 4096 rules' stats and never
#     reads the answer: with each of them connected, `sluice status`
#     answers in well under a second and the agent keeps its periodic
#     work (--stats-interval 1 prints a table every second);
#   - past its 64 connections the agent closes the oldest idle one, says
#     so to it, and counts it; idle clients are dropped after 5 s;
#   - the CLI's 5 s deadline covers connect: against a socket whose listen
#     queue is full, `sluice status` exits 3 after about 5 s, not later.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "agent control socket"
netns_setup actl 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
SOCK=$SL_STATE/sluice.sock
# a stalled agent answers after the 5 s deadline of the client holding
# it; a TCG guest (SLUICE_VM=1) is 10-100x slower at everything else
if [ -n "$VM" ]; then
	SLOW_MS=3000 FULL_MAX_MS=9000 WAIT=600 READY_S=120 RULES=1024
else
	SLOW_MS=1000 FULL_MAX_MS=6000 WAIT=100 READY_S=10 RULES=4096
fi

# 4096 rules: a stats answer of about 1.4 MB (1024 in a guest: 350 KB),
# more than a socket buffer
python3 - "$T/rules.json" "$RULES" <<'PY' || { echo "Bail out! rule file"; exit 1; }
import json, sys
rules = [{"name": f"r{i}", "match": {"proto": "udp", "dport": 20000 + i},
          "grade": "pps", "count": 100 + i} for i in range(int(sys.argv[2]))]
json.dump({"rules": rules}, open(sys.argv[1], "w"))
PY
sluice_bg agent --rules "$T/rules.json" --stats-interval 1
sluice_wait_ready agent "$READY_S" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

# clients MODE COUNT SECONDS: COUNT connections doing MODE for SECONDS,
# in the background (pid in CLIENTS); "ready" on stdout once connected.
#   idle    connect and send nothing
#   slow    send a status request one byte every 0.3 s
#   noread  send a stats request, never read the answer
clients()
{
	python3 -u - "$SOCK" "$@" >"$T/clients.out" 2>&1 <<'PY' &
import socket, sys, time
path, mode, count, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
conns = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    if mode == "noread":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b'{"cmd":"stats"}')
        s.shutdown(socket.SHUT_WR)
    conns.append(s)
print("ready", flush=True)
req, end, i = b'{"cmd":"status"}', time.time() + secs, 0
while time.time() < end:
    if mode == "slow" and i < len(req):
        for s in conns:
            s.send(req[i:i + 1])
        i += 1
    time.sleep(0.3)
for s in conns:
    try:
        said = s.recv(4096, socket.MSG_DONTWAIT)
        if said:
            print("told:", said.decode(errors="replace").strip())
    except OSError:
        pass
PY
	CLIENTS=$!
	netns_on_exit "kill $CLIENTS 2>/dev/null"
	for ((i = 0; i < WAIT; i++)); do
		grep -q ready "$T/clients.out" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# status_ms: wall-clock ms of one `sluice status` (host namespaces: the
# socket is a path); 0 exit required
status_ms()
{
	local t0=$EPOCHREALTIME

	"$SLUICE" status --state-dir "$SL_STATE" >"$T/status.out" 2>&1 ||
		return 1
	echo $(((${EPOCHREALTIME//[.,]/} - ${t0//[.,]/}) / 1000))
}

ctl_field() # FIELD: of status -j's "control" object
{
	"$SLUICE" status -j --state-dir "$SL_STATE" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["control"][sys.argv[1]])' "$1"
}

# tables printed by --stats-interval so far
tables()
{
	grep -c '^rule ' "$T/agent.out" 2>/dev/null
}

for mode in "idle 1" "idle 200" "slow 3" "noread 3"; do
	read -r m count <<<"$mode"
	if ! clients "$m" "$count" 3; then
		check 1 "$m x $count: the clients did not connect"
		continue
	fi
	t0=$(tables)
	worst=0 ok=0
	for ((k = 0; k < 5; k++)); do
		ms=$(status_ms) && ok=$((ok + 1))
		[ "${ms:-99999}" -gt "$worst" ] && worst=${ms:-99999}
		sleep 0.4
	done
	t1=$(tables)
	check $((ok == 5 && worst < SLOW_MS ? 0 : 1)) \
		"$m x $count connected: 5 of 5 status calls answered ($ok), the slowest in $worst ms (< $SLOW_MS)"
	check $((t1 - t0 >= 1 ? 0 : 1)) \
		"$m x $count connected: the periodic stats table kept coming ($((t1 - t0)) in 2 s)"
	wait "$CLIENTS" 2>/dev/null
done

# 200 idle clients against 64 places: the oldest were closed and told why
displaced=$(ctl_field displaced)
check $((displaced >= 136 ? 0 : 1)) \
	"past 64 connections the oldest idle ones were closed: $displaced displaced (>= 136)"
clients idle 70 0.2 && wait "$CLIENTS"
grep -q 'closed to make room' "$T/clients.out"
check $? "a displaced client is told: $(grep -m1 told "$T/clients.out" | cut -c1-100)"

# idle clients past the 5 s deadline are dropped (and told)
clients idle 2 6.5 || check 1 "clients for the deadline"
before=$(ctl_field timed_out)
sleep 6
after=$(ctl_field timed_out)
check $((after - before == 2 ? 0 : 1)) \
	"two idle clients timed out after 5 s: timed_out $before -> $after"
wait "$CLIENTS" 2>/dev/null
kill -0 "${NETNS_PID[agent]}" 2>/dev/null
check $? "the agent is still running"

# the CLI's deadline covers connect: a listener that never accepts, its
# queue full
python3 -u - "$T/full.sock" >"$T/full.out" 2>&1 <<'PY' &
import os, socket, sys, time
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(0)
held = []
for _ in range(8):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.setblocking(False)
    try:
        c.connect(path)
        held.append(c)
    except BlockingIOError:
        break
print("full", len(held), flush=True)
time.sleep(15)
PY
FULL=$!
netns_on_exit "kill $FULL 2>/dev/null"
for ((i = 0; i < 100; i++)); do
	grep -q full "$T/full.out" && break
	sleep 0.05
done
mkdir -p "$T/fulldir"
ln -s "$T/full.sock" "$T/fulldir/sluice.sock"
t0=$EPOCHREALTIME
"$SLUICE" status --state-dir "$T/fulldir" >"$T/full.cli" 2>&1
rc=$?
ms=$(((${EPOCHREALTIME//[.,]/} - ${t0//[.,]/}) / 1000))
check $((rc == 3 && ms >= 4900 && ms < FULL_MAX_MS ? 0 : 1)) \
	"a full listen queue: exit $rc (want 3) after $ms ms (5000-$FULL_MAX_MS)"
grep -q "did not answer within 5 s" "$T/full.cli"
check $? "and the CLI says so: $(head -c 120 "$T/full.cli")"
kill "$FULL" 2>/dev/null
echo "1..$n"
