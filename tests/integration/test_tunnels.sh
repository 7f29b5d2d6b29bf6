#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# IP-in-IP and GRE on real packets: the kernel's own ipip and gre devices
# in both namespaces carry UDP to 9000 (pps 10) and SYNs to 8080 (cps 10)
# over the veth, where sluice sees them encapsulated; counted where the
# receiving stack delivers them after decapsulation (a UDP socket, the
# connections a listener holds), not by sluice. The host's kernel may
# lack ipip and ip_gre: the vmtest guests' Debian kernels have them.
#   - by default (--tunnels outer) the tunnelled packets are judged by
#     their outer header, which no rule matches: all 200 arrive;
#   - with --tunnels inner they are judged as the packets inside: at most
#     the rule's count arrives, through either tunnel.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "tunnels"
if ! modprobe -q ipip 2>/dev/null || ! modprobe -q ip_gre 2>/dev/null; then
	skip "tunnels" "no ipip or ip_gre module"
	exit 0
fi
netns_setup tun 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

# tunnel NAME TYPE ARGS...: its inner addresses 198.18.90.x (ipip) or
# 198.18.91.x (gre), .1 the sender's, .2 the receiver's
tunnel()
{
	local name=$1 net=$2 end ns here there addr peer

	shift 2
	for end in tx rx; do
		if [ $end = tx ]; then
			ns=$NS_TX here=198.18.0.1 there=198.18.0.2
			addr=$net.1 peer=$net.2
		else
			ns=$NS_RX here=198.18.0.2 there=198.18.0.1
			addr=$net.2 peer=$net.1
		fi
		ip -n "$ns" link add "$name" type "$@" local $here \
			remote $there &&
			ip -n "$ns" addr add "$addr/32" peer "$peer/32" \
				dev "$name" &&
			ip -n "$ns" link set "$name" up || return 1
	done
}
# the veth's neighbours known first: a tunnel's first packets would wait
# on ARP, and all but a few be dropped
tunnel tip 198.18.90 ipip &&
	tunnel tgre 198.18.91 gre key 42 &&
	ip -n "$NS_TX" neigh replace 198.18.0.2 lladdr "$RX_MAC" \
		dev veth-tx &&
	ip -n "$NS_RX" neigh replace 198.18.0.1 lladdr "$TX_MAC" \
		dev veth-rx ||
	{ echo "Bail out! tunnel setup failed"; exit 1; }
ip netns exec "$NS_RX" sysctl -qw net.ipv4.tcp_syncookies=0 \
	net.ipv4.tcp_max_syn_backlog=4096 ||
	{ echo "Bail out! namespace setup failed"; exit 1; }

cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "udp9000", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": 10},
 {"name": "syn8080", "match": {"proto": "tcp", "dport": 8080}, "grade": "cps", "count": 10}
]}
JSON

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# datagrams to ADDR:9000 received of 200 sent through its tunnel
udp_through()
{
	netns_bg "$NS_RX" udprx "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], 9000))
print("ready", file=sys.stderr, flush=True)
# the sender may take seconds to start in a slow guest; then it is done
# once nothing came for 1.5 s
s.settimeout(15)
n = 0
try:
    while True:
        s.recv(2048)
        n += 1
        s.settimeout(1.5)
except socket.timeout:
    pass
print(n)' "$1"
	netns_wait_ready udprx 5 || { echo 0; return; }
	# a slow guest loses a tunnel's first datagrams: 20 to a port no
	# rule matches go first
	ip netns exec "$NS_TX" "$PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(20):
    s.sendto(b"w", (sys.argv[1], 9999))
time.sleep(0.3)
t0 = time.monotonic()
for i in range(200):
    s.sendto(b"x%03d" % i, (sys.argv[1], 9000))
print(time.monotonic() - t0)' "$1" >"$NETNS_TMP/sent_for"
	wait "${NETNS_PID[udprx]}" 2>/dev/null
	echo "$(cat "$NETNS_TMP/udprx.out") $(cat "$NETNS_TMP/sent_for")"
}

# connections a listener on ADDR:8080 took into its accept queue of 200
# SYNs through its tunnel, counted 0.9 s after the first, before the
# client retransmits any SYN
syn_through()
{
	netns_bg "$NS_RX" listen "$PY" -c '
import socket, sys, time
s = socket.socket()
s.bind((sys.argv[1], 8080))
s.listen(4096)
print("ready", file=sys.stderr, flush=True)
time.sleep(60)' "$1"
	netns_wait_ready listen 5 || { echo 0; return; }
	# non-blocking connects: one SYN each
	ip netns exec "$NS_TX" "$PY" -c '
import socket, sys, time
t0 = time.monotonic()
socks = []
for i in range(200):
    c = socket.socket()
    c.setblocking(False)
    c.connect_ex((sys.argv[1], 8080))
    socks.append(c)
time.sleep(max(0, 0.8 - (time.monotonic() - t0)))
# closed before the first retransmission: a connecting socket goes
# quietly, and the listener keeps what it took
for c in socks:
    c.close()
print(time.monotonic() - t0)' "$1" >"$NETNS_TMP/sent_for"
	# the connections the listener took: its queue, with the half-open
	ip netns exec "$NS_RX" ss -Htln '( sport = :8080 )' |
		awk '{ n += $2 } END { printf "%d ", n }'
	cat "$NETNS_TMP/sent_for"
	netns_stop listen
}

# the most a rule of count 10 a second admits from idle while packets
# come for SECONDS: a window's 10 for each second begun, and at most one
# admission slot more (a slow guest takes over a second for 200)
most()
{
	python3 -c "import math; print(10 * math.ceil($1) + 2)"
}

run_all()
{
	read -r IPIP_UDP IPIP_T <<<"$(udp_through 198.18.90.2)"
	sleep 1.1
	read -r GRE_UDP GRE_T <<<"$(udp_through 198.18.91.2)"
	sleep 1.1
	read -r GRE_SYN SYN_T <<<"$(syn_through 198.18.91.2)"
	echo "# $1: UDP through ipip $IPIP_UDP (sent in $IPIP_T s), through gre $GRE_UDP ($GRE_T s); connections through gre $GRE_SYN ($SYN_T s), of 200 each"
}

sluice_start agent --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }
run_all "--tunnels outer"
# a slow guest loses some datagrams on the way, but far more than the
# rules' counts arrive
[ "$IPIP_UDP" -ge 100 ] && [ "$GRE_UDP" -ge 100 ] && [ "$GRE_SYN" -ge 100 ]
check $? "by default the tunnels are judged by their outer header, which no rule matches: ipip $IPIP_UDP, gre $GRE_UDP datagrams, $GRE_SYN connections of 200 each"

netns_stop agent
sleep 1.1
sluice_start agent2 --rules "$NETNS_TMP/rules.json" --tunnels inner ||
	{ echo "Bail out! the agent did not start again"; exit 1; }
run_all "--tunnels inner"
sluice_cli stats -j >"$NETNS_TMP/stats.json"
python3 - "$NETNS_TMP/stats.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
print("# host:", " ".join("%s=%s" % kv for kv in sorted(st["host"].items()) if kv[1]))
for r in st.get("rules", []):
    print("# rule %s: passed %s blocked %s" % (r.get("name"), r.get("passed_pkts"), r.get("blocked_pkts")))
PY
max=$(most "$IPIP_T")
[ "$IPIP_UDP" -ge 1 ] && [ "$IPIP_UDP" -le "$max" ]
check $? "--tunnels inner: 200 datagrams to udp 9000 (pps 10) through ipip: $IPIP_UDP received (1 to $max)"
max=$(most "$GRE_T")
[ "$GRE_UDP" -ge 1 ] && [ "$GRE_UDP" -le "$max" ]
check $? "--tunnels inner: 200 datagrams through gre (key 42): $GRE_UDP received (1 to $max)"
max=$(most "$SYN_T")
[ "$GRE_SYN" -ge 1 ] && [ "$GRE_SYN" -le "$max" ]
check $? "--tunnels inner: 200 SYNs to tcp 8080 (cps 10) through gre: $GRE_SYN connections at the listener (1 to $max)"
echo "1..$n"
