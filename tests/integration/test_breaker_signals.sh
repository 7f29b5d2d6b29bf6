#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The breaker's signals besides a RST to a SYN, on real packets (services
# in NS_RX behind sluice, clients in NS_TX; docs/rules.md, "breaker"):
#   1. udp: an echo service stopped (the kernel answers ICMP port
#      unreachable) opens the breaker at the min_request_amount-th error of
#      a fresh window; while open its datagrams are dropped although the
#      echo is back (IPv4 and IPv6); after open_ms the probes' replies
#      close it;
#   2. tcp, SYNs not answered: a service that stops calling accept() with
#      a backlog of 0, so that the kernel drops the SYNs once its accept
#      queue is full: the clients' retransmitted SYNs open the breaker
#      (timeouts); new SYNs then get XDP's RST; once a service accepts
#      again the probes close it;
#   3. slow_request_ratio: a request/response service that answers in
#      300 ms (max_rt_ms 100) opens it; while open connects are refused;
#      answering at once again, the probes (IPv6) close it.
# The kernel's ICMP rate limit is off in NS_RX, so that each refused
# datagram gets its error (docs/rules.md: by default a burst of about 6 a
# client, then one a second).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "breaker signals"
netns_setup brks 1 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

OPEN_MS=6000
STAT_MS=4000
PROBE=tests/lib/tcpprobe.py
MPORT=9474

ip netns exec "$NS_RX" sysctl -qw net.ipv4.icmp_ratelimit=0 \
	net.ipv6.icmp.ratelimit=0 ||
	{ echo "Bail out! sysctl icmp ratelimit"; exit 1; }

# name proto port breaker-members: one rule of the set
rule()
{
	printf '{"name":"%s","match":{"proto":"%s","dport":%s},"grade":"pps","count":1000000,"breaker":{"open_ms":%s,"stat_interval_ms":%s,"min_request_amount":5,"probes":2,%s}}' \
		"$1" "$2" "$3" $OPEN_MS $STAT_MS "$4"
}
printf '{"rules":[%s,%s,%s]}\n' \
	"$(rule dns udp 5353 '"strategy":"error_ratio","threshold":0.5')" \
	"$(rule web tcp 8080 '"strategy":"error_ratio","threshold":0.5')" \
	"$(rule api tcp 8081 '"strategy":"slow_request_ratio","threshold":0.5,"max_rt_ms":100')" \
	>"$NETNS_TMP/rules.json"
sluice_start agent --rules "$NETNS_TMP/rules.json" --metrics 127.0.0.1:$MPORT ||
	{ echo "Bail out! the agent did not start"; exit 1; }
# XDP_TX on a veth reaches its peer only when the peer runs NAPI
netns_bg "$NS_TX" xdppass "$GEN_BIN/xdppass" --dev veth-tx --duration 600
netns_wait_ready xdppass 5 || { echo "Bail out! xdppass"; exit 1; }

# client CMD HOST PORT N [ARGS]: the outcomes of N requests from NS_TX
client()
{
	ip netns exec "$NS_TX" python3 "$PROBE" "$1" "$2" "$3" "$4" "${@:5}" |
		python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["out"]))'
}

# brk RULE FIELD: a field of the rule's breaker in `sluice stats -j`;
# FIELD answered.KIND for an answer count
brk()
{
	sluice_cli stats -j | python3 -c '
import json, sys
b = [r for r in json.load(sys.stdin)["rules"] if r["name"] == sys.argv[1]][0]["breaker"]
for k in sys.argv[2].split("."):
    b = b[k]
print(b)' "$1" "$2"
}

# all WORD N: N times WORD, as client() prints them
all() { printf "$1 %.0s" $(seq "$2") | sed 's/ $//'; }

wait_open_ms() { sleep $((OPEN_MS / 1000)).2; }

# ---- 1. udp ----------------------------------------------------------------
udp_up()
{
	netns_bg "$NS_RX" echo python3 "$PROBE" udp-serve 5353
	netns_wait_ready echo 5
}
udp_up || { echo "Bail out! udp echo"; exit 1; }
res=$(client udp 198.18.0.2 5353 10)
check "$([ "$res" = "$(all ok 10)" ] && [ "$(brk dns state)" = closed ] &&
	[ "$(brk dns answered.ok)" -ge 10 ]; echo $?)" \
	"udp: the echo answers 10 datagrams, 10 replies counted ok ($(brk dns answered.ok))"
netns_stop echo
res4=$(client udp 198.18.0.2 5353 4 --align-ms $STAT_MS)
st4=$(brk dns state)
res5=$(client udp 198.18.0.2 5353 1)
check "$([ "$res4 $res5" = "$(all rst 5)" ] && [ "$st4" = closed ] &&
	[ "$(brk dns state)" = open ]; echo $?)" \
	"udp: the echo stopped, 4 port unreachable in a fresh window leave it $st4, the 5th opens it ($(brk dns state); clients: $res4 $res5)"
udp_up || { echo "Bail out! udp echo"; exit 1; }
ff0=$(brk dns failed_fast)
res4=$(client udp 198.18.0.2 5353 5 --timeout 0.1)
res6=$(client udp 2001:db8::2 5353 5 --timeout 0.1)
ff1=$(brk dns failed_fast)
check "$([ "$res4 $res6" = "$(all timeout 10)" ] && [ $((ff1 - ff0)) = 10 ]; echo $?)" \
	"udp: open, 5 IPv4 and 5 IPv6 datagrams dropped although the echo is back (failed fast $((ff1 - ff0)))"
wait_open_ms
res=$(client udp 2001:db8::2 5353 1)
st1=$(brk dns state)
res2=$(client udp 198.18.0.2 5353 1)
check "$([ "$res $res2" = "ok ok" ] && [ "$st1 $(brk dns state)" = "half_open closed" ]; echo $?)" \
	"udp: after open_ms, the 2 probes' replies close it ($st1, then $(brk dns state))"
res=$(client udp 198.18.0.2 5353 5)
check "$([ "$res" = "$(all ok 5)" ]; echo $?)" "udp: closed again, datagrams answered"

# ---- 2. tcp: SYNs not answered -------------------------------------------------
netns_bg "$NS_RX" stuck python3 "$PROBE" serve 8080 --no-accept --backlog 0
netns_wait_ready stuck 5 || { echo "Bail out! stuck server"; exit 1; }
# the accept queue's one place taken, the next SYN dropped: ok timeout
fill=$(client connect 198.18.0.2 8080 2 --timeout 0.3)
to0=$(brk web answered.timeout)
res=$(client connect 198.18.0.2 8080 6 --burst --timeout 1.5 --align-ms $STAT_MS)
to1=$(brk web answered.timeout)
nok=$(grep -o ok <<<"$res" | wc -l)
# each gives up after 1.5 s: 1 s after its SYN it was sent again
echo "# accept queue full ($fill): a burst of 6 connects: $res"
check "$([ "$fill" = "ok timeout" ] && [ $((to1 - to0)) -ge 5 ] && [ "$nok" = 0 ] &&
	[ "$(brk web state)" = open ]; echo $?)" \
	"tcp: SYNs dropped by a full accept queue: their retransmissions are $((to1 - to0)) timeouts and open it ($(brk web state))"
ff0=$(brk web failed_fast)
res=$(client connect 198.18.0.2 8080 5)
check "$([ "$res" = "$(all rst 5)" ] && [ $(( $(brk web failed_fast) - ff0 )) = 5 ]; echo $?)" \
	"tcp: open, new SYNs get XDP's RST at once ($res)"
netns_stop stuck
netns_bg "$NS_RX" srv python3 "$PROBE" serve 8080
netns_wait_ready srv 5 || { echo "Bail out! server"; exit 1; }
wait_open_ms
res=$(client connect 198.18.0.2 8080 1)
st1=$(brk web state)
res2=$(client connect 2001:db8::2 8080 1)
check "$([ "$res $res2" = "ok ok" ] && [ "$st1 $(brk web state)" = "half_open closed" ]; echo $?)" \
	"tcp: a service that accepts again: the 2 probes close it ($st1, then $(brk web state))"

# ---- 3. slow_request_ratio -------------------------------------------------
DELAY=$NETNS_TMP/delay
echo 0 >"$DELAY"
netns_bg "$NS_RX" rr python3 "$PROBE" rr-serve 8081 "$DELAY"
netns_wait_ready rr 5 || { echo "Bail out! rr server"; exit 1; }
res=$(client rr 198.18.0.2 8081 10)
check "$([ "$res" = "$(all ok 10)" ] && [ "$(brk api answered.ok)" = 10 ] &&
	[ "$(brk api answered.slow)" = 0 ] && [ "$(brk api state)" = closed ]; echo $?)" \
	"slow: 10 requests answered at once: 10 fast responses, closed"
echo 0.3 >"$DELAY"
res4=$(client rr 198.18.0.2 8081 4 --timeout 1 --align-ms $STAT_MS)
st4=$(brk api state)
res5=$(client rr 198.18.0.2 8081 1 --timeout 1)
check "$([ "$res4 $res5" = "$(all ok 5)" ] && [ "$st4" = closed ] &&
	[ "$(brk api state)" = open ] && [ "$(brk api answered.slow)" = 5 ]; echo $?)" \
	"slow: answered in 300 ms (max_rt_ms 100): 4 slow leave it $st4, the 5th opens it ($(brk api state), $(brk api answered.slow) slow)"
ff0=$(brk api failed_fast)
res=$(client rr 198.18.0.2 8081 3)
check "$([ "$res" = "$(all rst 3)" ] && [ $(( $(brk api failed_fast) - ff0 )) = 3 ]; echo $?)" \
	"slow: open, connects refused by XDP's RST ($res)"
echo 0 >"$DELAY"
wait_open_ms
res=$(client rr 2001:db8::2 8081 1)
st1=$(brk api state)
res2=$(client rr 2001:db8::2 8081 1)
check "$([ "$res $res2" = "ok ok" ] && [ "$st1 $(brk api state)" = "half_open closed" ]; echo $?)" \
	"slow: fast again, the 2 IPv6 probes' responses close it ($st1, then $(brk api state))"

# what an operator reads
scrape=$(ip netns exec "$NS_RX" curl -s http://127.0.0.1:$MPORT/metrics)
m() { sed -n "s/^sluice_breaker_answers_total{rule=\"$1\",answer=\"$2\"} //p" <<<"$scrape"; }
check "$([ "$(m dns icmp_unreach)" -ge 5 ] && [ "$(m web timeout)" -ge 5 ] &&
	[ "$(m api slow)" -ge 5 ] && [ "$(m api ok)" -ge 12 ]; echo $?)" \
	"metrics: sluice_breaker_answers_total icmp_unreach $(m dns icmp_unreach) (dns), timeout $(m web timeout) (web), slow $(m api slow) and ok $(m api ok) (api)"
text=$(sluice_cli stats | grep '^breaker api:')
check "$(grep -q ' slow$' <<<"$text"; echo $?)" "sluice stats: ${text:-no breaker line}"

echo "1..$n"
