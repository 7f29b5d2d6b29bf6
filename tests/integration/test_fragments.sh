#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The fragment evasions, on real packets through the stack, counted where
# the stack delivers them (a listener, a UDP socket), not by sluice:
#   - 200 SYNs to tcp/8080 (cps 10), each as two IPv4 fragments whose
#     first holds 8 bytes of TCP: at most 10 SYN_RECV (200 before);
#   - 200 UDP6 datagrams to 9000 (pps 10) behind 9 destination-options
#     headers: at most 10 received (200 before);
#   - 8000-byte UDP datagrams to 9100 (bps 40000, 6 fragments each at MTU
#     1500): the bytes received within the rule's count (the later
#     fragments went uncharged before: about 5 x);
#   - with --pass-unclassified the first two pass as before.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "fragments"
netns_setup frag 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

BPS=40000
cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "syn8080", "match": {"proto": "tcp", "dport": 8080}, "grade": "cps", "count": 10},
 {"name": "udp9000", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": 10},
 {"name": "bps9100", "match": {"proto": "udp", "dport": 9100}, "grade": "bps", "count": $BPS}
]}
JSON
# request socks stay in SYN_RECV: no cookies, room for all 200, and the
# SYN-ACKs to 198.18.1.x go to the sender's namespace, which drops them
# (not local, no forwarding) instead of answering RST
ip netns exec "$NS_RX" sysctl -qw net.ipv4.tcp_syncookies=0 \
	net.ipv4.tcp_max_syn_backlog=4096 &&
	ip -n "$NS_RX" route add 198.18.1.0/24 via 198.18.0.1 ||
	{ echo "Bail out! namespace setup failed"; exit 1; }

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# SYNs as tiny fragments; prints the listener's SYN_RECV count
syn_recv()
{
	netns_bg "$NS_RX" listen "$PY" -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.2", 8080))
s.listen(4096)
print("ready", file=sys.stderr, flush=True)
time.sleep(60)'
	netns_wait_ready listen 5 || { echo 0; return; }
	ip netns exec "$NS_TX" "$PY" tests/lib/fragsend.py veth-tx "$RX_MAC" \
		syn-frag 200
	sleep 1
	ip netns exec "$NS_RX" ss -Htn state syn-recv '( sport = :8080 )' |
		wc -l
	netns_stop listen
}

# UDP datagrams at a socket for secs after the sender command ($3...);
# prints "datagrams bytes"
udp_recv()
{
	local addr=$1 port=$2

	shift 2
	netns_bg "$NS_RX" udprx "$PY" -c '
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", file=sys.stderr, flush=True)
# the sender may take seconds to start (python in a TCG guest); the
# marker sent after it, or 1.5 s of quiet after a datagram, ends the count
s.settimeout(15)
n = b = 0
try:
    while True:
        d = s.recv(65536)
        if d == b"end":
            break
        b += len(d)
        n += 1
        s.settimeout(1.5)
except socket.timeout:
    pass
print(n, b)' "$addr" "$port"
	netns_wait_ready udprx 5 || { echo "0 0"; return; }
	ip netns exec "$NS_TX" "$@"
	# a plain datagram behind them (a limit may drop it: then the quiet)
	ip netns exec "$NS_TX" "$PY" -c '
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
socket.socket(fam, socket.SOCK_DGRAM).sendto(b"end", (sys.argv[1], int(sys.argv[2])))' "$addr" "$port"
	wait "${NETNS_PID[udprx]}" 2>/dev/null
	cat "$NETNS_TMP/udprx.out"
}

evasions()
{
	local what=$1 syn udp6

	syn=$(syn_recv)
	udp6=$(udp_recv 2001:db8::2 9000 "$PY" tests/lib/fragsend.py veth-tx \
		"$RX_MAC" udp6-dstopts 200)
	udp6=${udp6%% *}
	echo "# $what: SYN_RECV $syn of 200 tiny-fragment SYNs, UDP6 $udp6 of 200 behind 9 destination options"
	SYN=$syn UDP6=$udp6
}

sluice_start agent --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }
evasions "default"
[ "$SYN" -le 10 ]
check $? "200 SYNs as two fragments (8 bytes of TCP first) against cps 10: $SYN SYN_RECV at the listener (at most 10)"
[ "$UDP6" -le 10 ]
check $? "200 UDP6 datagrams behind 9 destination-options headers against pps 10: $UDP6 received (at most 10)"

# 8000-byte datagrams, 100 a second for 3 s: 2.4 MB offered to 40000 B/s
DUR=3
# (no process substitution: the test guests have no /dev/fd)
got=$(udp_recv 198.18.0.2 9100 "$PY" -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + '"$DUR"'
while time.monotonic() < end:
    s.sendto(b"y" * 8000, ("198.18.0.2", 9100))
    time.sleep(0.01)')
read -r dg bytes <<<"$got"
# frames are 8000 + 6 x 34 bytes of headers; one window from idle, then
# the count a second
max=$((BPS * (DUR + 1)))
[ "$bytes" -le "$max" ] && [ "$dg" -ge 1 ]
check $? "8000-byte UDP datagrams (6 fragments) against bps $BPS for ${DUR} s: $dg datagrams, $bytes bytes received (at most $max)"
sluice_cli stats -j >"$NETNS_TMP/stats.json"
python3 - "$NETNS_TMP/stats.json" <<'PY' >"$NETNS_TMP/host"
import json, sys
h = json.load(open(sys.argv[1]))["host"]
print(" ".join("%s=%s" % (k, v) for k, v in sorted(h.items())
               if k.startswith("unclassified") or k == "fragments"))
PY
grep -q "unclassified_fragment_tiny=200" "$NETNS_TMP/host" &&
	grep -q "unclassified_ipv6_chain=200" "$NETNS_TMP/host"
check $? "sluice stats counts each reason: $(cat "$NETNS_TMP/host")"

netns_stop agent
sluice_start agent2 --rules "$NETNS_TMP/rules.json" --pass-unclassified ||
	{ echo "Bail out! the agent did not start again"; exit 1; }
evasions "--pass-unclassified"
[ "$SYN" -ge 190 ] && [ "$UDP6" -ge 190 ]
check $? "--pass-unclassified passes them as before: $SYN SYN_RECV, $UDP6 UDP6 datagrams (of 200 each)"
echo "1..$n"
