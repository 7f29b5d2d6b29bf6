#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Jumbo frames (docs/operations.md, "Jumbo frames"): at MTU 9000 veth,
# like a NIC's driver, refuses an XDP program that cannot take a frame in
# several buffers. The agent attaches sluice_xdp_frags there, in native
# mode, and charges each frame whole:
#   - MTU 1500: native, the one-buffer program (multi_buffer false);
#   - MTU 9000: native, multi_buffer true (generic mode before);
#   - 8000-byte datagrams, each one frame, 100 a second for 3 s against
#     bps 40000: the datagrams received at the socket within the count
#     (charged by the first buffer only, about 2.3 x as many passed);
#   - an agent restarted adopts the link, still multi-buffer.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "jumbo frames"
netns_setup jumbo 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

BPS=40000 PAYLOAD=8000 DUR=3
# a frame: Ethernet 14, IPv4 20, UDP 8
FRAME=$((PAYLOAD + 42))
cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "bps9100", "match": {"proto": "udp", "dport": 9100}, "grade": "bps", "count": $BPS}
]}
JSON

iface_field()
{
	sluice_cli status -j | sluice_json "d['interfaces'][0]['$1']"
}

sluice_start agent --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }
mode=$(iface_field mode) mb=$(iface_field multi_buffer)
[ "$mode" = native ] && [ "$mb" = false ]
check $? "MTU 1500: $mode mode, multi_buffer $mb (the one-buffer program)"

netns_stop agent
ip netns exec "$NS_RX" "$SLUICE" down --iface veth-rx --pin-dir "$SL_PIN" \
	>/dev/null &&
	ip -n "$NS_TX" link set veth-tx mtu 9000 &&
	ip -n "$NS_RX" link set veth-rx mtu 9000 ||
	{ echo "Bail out! cannot set MTU 9000"; exit 1; }
sluice_start agent2 --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start at MTU 9000"; exit 1; }
mode=$(iface_field mode) mb=$(iface_field multi_buffer)
[ "$mode" = native ] && [ "$mb" = true ]
check $? "MTU 9000: $mode mode, multi_buffer $mb (sluice_xdp_frags)"

# 100 datagrams a second for DUR s to 9100; prints "received sent"
jumbo_flow()
{
	local sent

	netns_bg "$NS_RX" udprx tests/lib/udpcount.py 198.18.0.2 9100
	netns_wait_ready udprx 5 || { echo 0 0; return; }
	sent=$(ip netns exec "$NS_TX" python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end, n = time.monotonic() + '"$DUR"', 0
while time.monotonic() < end:
    s.sendto(b"j" * '"$PAYLOAD"', ("198.18.0.2", 9100))
    n += 1
    time.sleep(0.01)
print(n)')
	wait "${NETNS_PID[udprx]}" 2>/dev/null
	echo "$(sluice_json "sum(d.values())" <"$NETNS_TMP/udprx.out") $sent"
}

read -r got sent <<<"$(jumbo_flow)"
# one window from idle, then the count a second
max=$((BPS * (DUR + 1) / FRAME))
sluice_cli stats -j >"$NETNS_TMP/stats.json"
judged=$(sluice_json "[r['passed_bytes'] + r['blocked_bytes'] for r in d['rules'] if r['name'] == 'bps9100'][0]" \
	<"$NETNS_TMP/stats.json")
frags=$(sluice_json "d['host']['fragments']" <"$NETNS_TMP/stats.json")
[ "$got" -ge 1 ] && [ "$got" -le "$max" ]
check $? "$PAYLOAD-byte datagrams, one frame each, against bps $BPS for $DUR s: $got received (at most $max)"
# every frame sent, charged its FRAME bytes, none an IP fragment
[ "$sent" -ge 1 ] && [ "$judged" -eq $((sent * FRAME)) ] && [ "$frags" = 0 ]
check $? "sluice charged whole frames: $judged bytes judged for $sent frames of $FRAME sent; $frags IP fragments"

netns_stop agent2
sluice_start agent3 --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start again"; exit 1; }
mode=$(iface_field mode) mb=$(iface_field multi_buffer)
adopted=$(iface_field adopted)
read -r got sent <<<"$(jumbo_flow)"
[ "$adopted" = true ] && [ "$mode" = native ] && [ "$mb" = true ] &&
	[ "$got" -ge 1 ] && [ "$got" -le "$max" ]
check $? "restarted: the link adopted ($adopted), $mode, multi_buffer $mb; $got datagrams received (at most $max)"
echo "1..$n"
