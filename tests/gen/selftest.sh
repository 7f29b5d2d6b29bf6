#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# TAP self-test of the traffic tools: pktsend pacing and accuracy, the
# xdpflood rate, both rx queues, --sources, checksums as the receiving
# stack sees them, VLAN tags, and netns.sh cleanup. Needs root and native
# XDP on veth (skips otherwise) and the tools built by `make gen`.
set -u
source "$(dirname "$0")/../lib/netns.sh"

NAME="traffic tools selftest"
skip_unless_root_and_xdp "$NAME"

T=0
ok() { T=$((T + 1)); echo "ok $T - $*"; }
not_ok() { T=$((T + 1)); echo "not ok $T - $*"; }
skip() { T=$((T + 1)); echo "ok $T - $1 # SKIP $2"; }
# check DESC CMD...: one TAP line from CMD's status
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# true when awk expression $1 holds (floats welcome)
holds() { awk "BEGIN { exit !($*) }"; }
# number (or array body) under KEY in the one-line JSON file FILE
jnum() { sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p" "$1"; }
jarr() { sed -n "s/.*\"$2\": \[\([^]]*\)\].*/\1/p" "$1" | tr -d ' '; }

if ! netns_setup gentest 2; then
	echo "Bail out! cannot set up the namespaces"
	exit 1
fi
netns_bg "$NS_RX" xdppass "$GEN_BIN/xdppass" --dev veth-rx
if ! netns_wait_ready xdppass; then
	echo "Bail out! xdppass did not attach: $(cat "$NETNS_TMP/xdppass.err")"
	exit 1
fi
ok "namespaces $NS_TX/$NS_RX with xdppass on veth-rx"

OUT=$NETNS_TMP
# xdpflood's cases need live frames, which some hosts refuse
LIVE=1
live_frames_refused && LIVE=0
# live DESC: true when xdpflood can send, else DESC is skipped
live() { [ "$LIVE" = 1 ] || { skip "$1" "$LIVE_WHY"; return 1; }; }
# rx_start ARGS...: rxcount on veth-rx, bounded; rx_stop leaves $OUT/rx.out
rx_start()
{
	netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --duration 30 "$@"
	netns_wait_ready rx || { echo "# rxcount: $(cat "$OUT/rx.err")"; return 1; }
}
rx_stop() { sleep 0.2; netns_stop rx; }
tx() { timeout 70 ip netns exec "$NS_TX" "$GEN_BIN/$1" --dev veth-tx \
	--dst-mac "$RX_MAC" "${@:2}"; }

# 1. pktsend pacing: counted within 2 %, rate within 3 %, smooth.
rx_start --proto udp --dport 9 --drop
tx pktsend --rate 50000 --duration 3 >"$OUT/tx.out"
rx_stop
sent=$(jnum "$OUT/tx.out" sent) pps=$(jnum "$OUT/tx.out" pps)
got=$(jnum "$OUT/rx.out" packets) max=$(jnum "$OUT/rx.out" max_1s)
echo "# pktsend --rate 50000: sent ${sent:-?} at ${pps:-?} pps;" \
	"rxcount ${got:-?}, max_1s ${max:-?}"
check "pktsend 50k pps counted by rxcount within 2%" \
	holds "${sent:-0} > 0 && (${got:-0} - $sent)^2 <= (0.02 * $sent)^2"
check "pktsend rate within 3% of 50000 pps, any 1 s <= 51500" \
	holds "(${pps:-0} - 50000)^2 <= 1500^2 && ${max:-1e9} <= 51500"

# 2. xdpflood: what one sender core delivers through XDP_PASS.
if live "xdpflood delivers >= 500k pps"; then
	rx_start --proto udp --dport 9 --drop
	tx xdpflood --duration 2 --cpu 0 >"$OUT/tx.out"
	rx_stop
	secs=$(jnum "$OUT/tx.out" seconds) pps=$(jnum "$OUT/tx.out" pps)
	got=$(jnum "$OUT/rx.out" packets)
	rate=$(awk "BEGIN { printf \"%d\", ${got:-0} / (${secs:-0} + 1e-9) }")
	echo "# xdpflood 1 CPU: sent ${pps:-?} pps, rxcount $rate pps delivered"
	check "xdpflood delivers >= 500k pps ($rate)" holds "$rate >= 500000"
fi

# 3. two floods on CPU 0 and CPU 1 reach both rx queues.
if [ "$(nproc)" -lt 2 ]; then
	skip "xdpflood on two CPUs reaches both rx queues" "needs 2 CPUs"
elif live "xdpflood on CPU 0 and 1 reaches both rx queues"; then
	rx_start --proto udp --dport 9 --drop
	tx xdpflood --duration 2 --cpu 0 >"$OUT/tx0.out" &
	p0=$!
	tx xdpflood --duration 2 --cpu 1 >"$OUT/tx1.out" &
	p1=$!
	wait "$p0" "$p1"
	rx_stop
	got=$(jnum "$OUT/rx.out" packets) percpu=$(jarr "$OUT/rx.out" per_cpu)
	secs=$(jnum "$OUT/tx0.out" seconds)
	rate=$(awk "BEGIN { printf \"%d\", ${got:-0} / (${secs:-0} + 1e-9) }")
	echo "# xdpflood 2 CPUs: rxcount $rate pps delivered, per CPU [$percpu]"
	c0=$(cut -d, -f1 <<<"$percpu") c1=$(cut -d, -f2 <<<"$percpu")
	check "xdpflood on CPU 0 and 1 reaches both rx queues" \
		holds "${got:-0} > 0 && ${c0:-0} >= 0.2 * $got &&" \
		"${c1:-0} >= 0.2 * $got"
fi

# 4. --sources 100: 100 distinct source addresses, from both generators.
if live "xdpflood --sources 100: 100 distinct sources"; then
	rx_start --proto udp --dport 9 --drop --distinct-src
	tx xdpflood --duration 0.5 --sources 100 >/dev/null
	rx_stop
	n=$(jnum "$OUT/rx.out" distinct_src)
	check "xdpflood --sources 100: ${n:-?} distinct sources" \
		[ "${n:-0}" = 100 ]
fi
rx_start --proto udp --dport 9 --drop --distinct-src
tx pktsend --count 1000 --sources 100 --src 2001:db8::1 \
	--dst 2001:db8::2 >/dev/null
rx_stop
n=$(jnum "$OUT/rx.out" distinct_src)
check "pktsend --sources 100 (IPv6): ${n:-?} distinct sources" \
	[ "${n:-0}" = 100 ]

# 5. checksums: the receiving stack validates every packet.
# stat NAME: absolute value of a MIB counter in the rx namespace
stat() { ip netns exec "$NS_RX" nstat -asz "$1" | awk -v k="$1" \
	'$1 == k { print $2 }'; }
csum_errors()
{
	local k sum=0

	for k in IpExtInCsumErrors UdpInCsumErrors TcpInCsumErrors \
		 IcmpInCsumErrors Udp6InCsumErrors Icmp6InCsumErrors; do
		sum=$((sum + $(stat $k)))
	done
	echo "$sum"
}
# csum_case COUNTER TOOL ARGS...: COUNTER must rise by what TOOL sent
csum_case()
{
	local counter=$1 before after sent

	shift
	before=$(stat "$counter")
	tx "$@" >"$OUT/tx.out"
	sleep 0.1
	after=$(stat "$counter")
	sent=$(jnum "$OUT/tx.out" sent)
	[ "${sent:-0}" -gt 0 ] && [ $((after - before)) -ge "$sent" ] ||
		{ echo "# $*: $counter +$((after - before)), sent ${sent:-?}"; return 1; }
}
# Sources start at .10: a packet from the receiver's own address (.2) is
# a martian and would never reach a counter.
bad=0
e0=$(csum_errors)
v4="--src 198.18.0.10"
v6="--src 2001:db8::10 --dst 2001:db8::2"
csum_case UdpNoPorts pktsend --count 200 $v4 --sources 7 || bad=1
csum_case UdpNoPorts pktsend --count 200 $v4 --size 101 || bad=1
csum_case TcpOutRsts pktsend --count 200 $v4 --proto tcp --sources 7 || bad=1
csum_case IcmpInEchos pktsend --count 200 $v4 --proto icmp --sources 7 \
	--size 99 || bad=1
csum_case Udp6NoPorts pktsend --count 200 $v6 --sources 7 --size 77 || bad=1
csum_case TcpOutRsts pktsend --count 200 $v6 --proto tcp --tcp-flags ack \
	--sources 7 || bad=1
csum_case Icmp6InEchos pktsend --count 200 $v6 --proto icmpv6 \
	--sources 7 || bad=1
if [ "$LIVE" = 1 ]; then
	csum_case UdpNoPorts xdpflood --duration 0.2 --rate 50000 $v4 \
		--sources 7 --size 101 || bad=1
	csum_case TcpOutRsts xdpflood --duration 0.2 --rate 50000 $v6 \
		--proto tcp --sources 7 || bad=1
fi
e1=$(csum_errors)
check "checksums valid for UDP/TCP/ICMP over IPv4/IPv6 (errors +$((e1 - e0)))$([ "$LIVE" = 1 ] || echo ", pktsend's only")" \
	[ "$bad" = 0 ] && [ "$e1" = "$e0" ]

# 6. VLAN tags, as the receiving stack sees them.
for tag in "--vlan 10" "--qinq 100,10"; do
	rx_start --proto udp --dport 9 --drop
	tx pktsend --count 1000 $tag >/dev/null
	rx_stop
	got=$(jnum "$OUT/rx.out" packets)
	check "pktsend $tag: rxcount counts ${got:-?} of 1000" \
		[ "${got:-0}" = 1000 ]
done

# The stack untags in place; xdpflood must undo that in recycled frames.
if live "xdpflood --vlan 10: rxcount counts what it sent"; then
	rx_start --proto udp --dport 9 --drop
	tx xdpflood --duration 0.5 --vlan 10 --sources 5 >"$OUT/tx.out"
	rx_stop
	sent=$(jnum "$OUT/tx.out" sent) got=$(jnum "$OUT/rx.out" packets)
	check "xdpflood --vlan 10: rxcount counts ${got:-?} of ${sent:-?}" \
		holds "${sent:-0} > 0 && ${got:-0} >= 0.99 * $sent"
fi

# 7. rxcount filters: only IPv6 TCP to [2001:db8::2]:80 counts.
rx_start --proto tcp --dport 80 --dst 2001:db8::2 --drop
tx pktsend --count 300 $v6 --proto tcp --dport 80 >/dev/null
tx pktsend --count 100 $v6 --proto tcp --dport 81 >/dev/null
tx pktsend --count 100 $v6 --proto udp --dport 80 >/dev/null
tx pktsend --count 100 --proto tcp --dport 80 >/dev/null
rx_stop
got=$(jnum "$OUT/rx.out" packets)
check "rxcount --proto/--dport/--dst count ${got:-?} of 300" [ "${got:-0}" = 300 ]

# 8. rxcount leaves no clsact qdisc behind.
check "rxcount removed its clsact qdisc" \
	bash -c "! tc -n '$NS_RX' qdisc show dev veth-rx | grep -q clsact"

# 9. netns.sh cleans up after a failing test and after SIGTERM.
lib="$NETNS_LIB_DIR/netns.sh"
bash -c "source '$lib'; netns_setup gentestfail || exit 2;
	netns_bg \"\$NS_RX\" sleeper sleep 60; exit 1" >/dev/null 2>&1
bash -c "source '$lib'; netns_setup gentestterm || exit 2;
	netns_bg \"\$NS_RX\" sleeper sleep 60; echo ready >&2;
	sleep 60 & wait" \
	>/dev/null 2>"$OUT/term.err" &
pid=$!
for i in $(seq 50); do grep -q ready "$OUT/term.err" && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
left=$(ip netns list | grep -c -e '^gentestfail-' -e '^gentestterm-')
check "netns.sh removes namespaces on failure and SIGTERM ($left left)" \
	[ "$left" = 0 ]

echo "1..$T"
