#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Circuit breaking on real packets: a TCP service in NS_RX behind sluice,
# clients in NS_TX. The service is stopped (the kernel answers RST) and
# started again; the breaker must
#   - leave sluice_egress off the interface while no rule has a breaker;
#   - open at the min_request_amount-th error of a fresh stat_interval;
#   - while open, answer every SYN with a RST from XDP (the service is up
#     again, so any refusal is sluice's), IPv4 and IPv6, within 1 ms of the
#     SYN (the median and 95th percentile of connect() to ECONNREFUSED);
#   - after open_ms let exactly `probes` SYNs through, and close once they
#     all succeed (one by one, and in a burst of 10);
#   - open again when a probe finds the service still down.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "breaker"
netns_setup brk 1 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

PORT=8080
OPEN_MS=3000
STAT_MS=2000
PROBES=3
PROBE=tests/lib/tcpprobe.py

plain='{"rules":[{"name":"web","match":{"proto":"tcp","dport":8080},"grade":"cps","count":100000}]}'
breaker='{"rules":[{"name":"web","match":{"proto":"tcp","dport":8080},"grade":"cps","count":100000,
  "breaker":{"strategy":"error_ratio","threshold":0.5,"open_ms":'$OPEN_MS',"min_request_amount":5,
  "stat_interval_ms":'$STAT_MS',"probes":'$PROBES'}}]}'

echo "$plain" >"$NETNS_TMP/plain.json"
MPORT=9473
sluice_start agent --rules "$NETNS_TMP/plain.json" --metrics 127.0.0.1:$MPORT ||
	{ echo "Bail out! the agent did not start"; exit 1; }
# XDP_TX on a veth reaches its peer only when the peer runs NAPI
netns_bg "$NS_TX" xdppass "$GEN_BIN/xdppass" --dev veth-tx --duration 600
netns_wait_ready xdppass 5 || { echo "Bail out! xdppass"; exit 1; }

egress_filters()
{
	tc -n "$NS_RX" filter show dev veth-rx egress 2>/dev/null |
		grep -c sluice_egress
}

server_up()
{
	netns_bg "$NS_RX" srv python3 "$PROBE" serve $PORT
	netns_wait_ready srv 5
}

server_down() { netns_stop srv; }

# connect HOST N [ARGS]: the JSON of N connects from NS_TX
connect() { ip netns exec "$NS_TX" python3 "$PROBE" connect "$1" $PORT "${@:2}"; }

# outcomes JSON: "ok ok rst ..."
outcomes() { python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["out"]))'; }

brk() { sluice_cli stats -j | sluice_json "[r for r in d['rules'] if r['name'] == 'web'][0]['breaker']['$1']"; }

# open_now: with the service down, 4 errors in a fresh window (one
# client run: well inside stat_interval) leave it closed, the 5th opens
# it; prints 5, or what it saw
open_now()
{
	local st4

	connect 198.18.0.2 4 --align-ms $STAT_MS >/dev/null
	st4=$(brk state)
	connect 198.18.0.2 1 >/dev/null
	if [ "$st4" = closed ] && [ "$(brk state)" = open ]; then
		echo 5
	else
		echo "4:$st4,5:$(brk state)"
	fi
}

# wait_open_ms: until open_ms has passed since the breaker opened
wait_open_ms() { sleep $(( OPEN_MS / 1000 )).2; }

# 1. no breaker: no egress program; the kernel's own RST, for comparison
server_up || { echo "Bail out! server"; exit 1; }
check "$([ "$(egress_filters)" = 0 ]; echo $?)" \
	"no rule with a breaker: no egress program on veth-rx"
res=$(connect 198.18.0.2 5 | outcomes)
check "$([ "$res" = "ok ok ok ok ok" ]; echo $?)" \
	"the service answers (got: $res)"
server_down
res=$(connect 198.18.0.2 20 | tee "$NETNS_TMP/kernel.json" | outcomes)
check "$([ "$res" = "$(printf 'rst %.0s' {1..20} | sed 's/ $//')" ]; echo $?)" \
	"service down, no breaker: the kernel refuses every SYN"
server_up

echo "$breaker" | sluice_cli rule replace - >/dev/null
check "$([ "$(egress_filters)" = 1 ]; echo $?)" \
	"a rule with a breaker: sluice_egress attached on veth-rx egress"
tc -n "$NS_RX" qdisc del dev veth-rx clsact
for ((i = 0; i < 30; i++)); do
	[ "$(egress_filters)" = 1 ] && break
	sleep 0.1
done
check "$([ "$(egress_filters)" = 1 ] &&
	grep -q 'egress program was removed' "$NETNS_TMP/agent.err"; echo $?)" \
	"its clsact qdisc deleted: the agent attaches sluice_egress again within $((i / 10)).$((i % 10)) s"
res=$(connect 198.18.0.2 10 | outcomes)
check "$([ "$res" = "$(echo ok ok ok ok ok ok ok ok ok ok)" ] &&
	[ "$(brk state)" = closed ] && [ "$(brk answers)" -ge 10 ]; echo $?)" \
	"closed: 10 connects succeed, 10 SYN-ACKs counted (answers $(brk answers))"

# 2. the service goes down: it opens at the 5th error of a window
server_down
n_err=$(open_now)
check "$([ "$n_err" = 5 ]; echo $?)" \
	"service down: 4 errors in a fresh window leave it closed, the 5th opens it (min_request_amount 5; $n_err)"

# 3. open: the service is back, yet every SYN gets sluice's RST at once
server_up
ff0=$(brk failed_fast)
connect 198.18.0.2 20 >"$NETNS_TMP/open4.json"
connect 2001:db8::2 10 >"$NETNS_TMP/open6.json"
ff1=$(brk failed_fast)
r4=$(outcomes <"$NETNS_TMP/open4.json")
r6=$(outcomes <"$NETNS_TMP/open6.json")
check "$([ "$r4" = "$(printf 'rst %.0s' {1..20} | sed 's/ $//')" ] &&
	[ "$r6" = "$(printf 'rst %.0s' {1..10} | sed 's/ $//')" ]; echo $?)" \
	"open: 20 IPv4 and 10 IPv6 SYNs refused although the service listens"
check "$([ $((ff1 - ff0)) = 30 ]; echo $?)" \
	"open: failed_fast counts the 30 (delta $((ff1 - ff0)))"
lat=$(python3 - "$NETNS_TMP/open4.json" "$NETNS_TMP/open6.json" \
	"$NETNS_TMP/kernel.json" <<'PY'
import json, sys
us = sorted(sum((json.load(open(f))["us"] for f in sys.argv[1:3]), []))
k = sorted(u for u, o in zip(*(lambda d: (d["us"], d["out"]))(json.load(open(sys.argv[3])))) if o == "rst")
q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))]
print(q(us, 0.5), q(us, 0.95), us[-1], q(k, 0.5) if k else -1)
PY
)
read -r med p95 max kmed <<<"$lat"
echo "# SYN -> RST while open (connect() to ECONNREFUSED): median $med us," \
	"p95 $p95 us, max $max us; the kernel's own RST (service down): median $kmed us"
check "$([ "$med" -lt 1000 ] && [ "$p95" -lt 1000 ]; echo $?)" \
	"open: a client's SYN gets its RST within 1 ms (median $med us, p95 $p95 us)"

# 4. half-open: exactly 3 probes, then closed
wait_open_ms
pp0=$(brk probes_passed)
s1=$(connect 198.18.0.2 1 | outcomes); st1=$(brk state)
s2=$(connect 198.18.0.2 1 | outcomes); st2=$(brk state)
s3=$(connect 198.18.0.2 1 | outcomes); st3=$(brk state)
check "$([ "$s1 $s2 $s3" = "ok ok ok" ] && [ "$st1 $st2 $st3" = "half_open half_open closed" ]; echo $?)" \
	"half-open: probes 1, 2, 3 succeed; it stays half-open until the 3rd closes it ($st1 $st2 $st3)"
check "$([ $(( $(brk probes_passed) - pp0 )) = $PROBES ] && [ "$(brk probe_success)" -ge 3 ]; echo $?)" \
	"half-open: exactly $PROBES probes passed"
res=$(connect 198.18.0.2 5 | outcomes)
check "$([ "$res" = "ok ok ok ok ok" ]; echo $?)" "closed again: connects succeed"

# 5. a burst in half-open: still exactly 3 probes
server_down
n_err=$(open_now)
server_up
wait_open_ms
pp0=$(brk probes_passed); ff0=$(brk failed_fast)
res=$(connect 198.18.0.2 10 --burst | outcomes)
pp1=$(brk probes_passed); ff1=$(brk failed_fast)
nok=$(wc -w <<<"${res//rst/}")
echo "# burst of 10 SYNs in half-open: $res (failed fast: $((ff1 - ff0)))"
check "$([ "$n_err" = 5 ] && [ $((pp1 - pp0)) = $PROBES ] && [ "$(brk state)" = closed ] &&
	[ $((nok + ff1 - ff0)) = 10 ]; echo $?)" \
	"half-open burst: exactly $PROBES probes passed, the rest were failed fast or passed once closed ($nok ok; opened after $n_err errors, $((pp1 - pp0)) probes, $(brk state))"

# 5b. probes whose answers are held back (nft drops the SYN-ACKs before
# egress): a burst of 10 in half-open gets exactly 3 through, 7 RSTs;
# with no verdict for open_ms it opens again
if command -v nft >/dev/null; then
	server_down
	n_err=$(open_now)
	server_up
	wait_open_ms
	ip netns exec "$NS_RX" nft -f - <<'NFT'
table inet brk {
	chain out {
		type filter hook output priority 0;
		tcp sport 8080 tcp flags & (syn | ack) == (syn | ack) drop
	}
}
NFT
	pp0=$(brk probes_passed); ff0=$(brk failed_fast); opened=$(brk opened)
	res=$(connect 198.18.0.2 10 --burst --timeout 0.3 | outcomes)
	pp1=$(brk probes_passed); ff1=$(brk failed_fast); st=$(brk state)
	nto=$(grep -o timeout <<<"$res" | wc -l)
	nrst=$(grep -o rst <<<"$res" | wc -l)
	echo "# burst of 10 SYNs in half-open, answers held: $res"
	check "$([ "$n_err" = 5 ] && [ $((pp1 - pp0)) = $PROBES ] && [ "$nto" = $PROBES ] &&
		[ "$nrst" = 7 ] && [ $((ff1 - ff0)) = 7 ] && [ "$st" = half_open ]; echo $?)" \
		"half-open, probes unanswered: exactly $PROBES of a burst of 10 pass, 7 get RSTs ($nto timeouts, $nrst rst; opened after $n_err errors, $((pp1 - pp0)) probes, $st)"
	wait_open_ms
	res=$(connect 198.18.0.2 1 | outcomes)
	check "$([ "$res" = rst ] && [ "$(brk state)" = open ] &&
		[ $(( $(brk opened) - opened )) = 1 ]; echo $?)" \
		"half-open with no verdict for open_ms: open again ($(brk state))"
	# after the half-open ended: the server's retransmitted SYN-ACKs
	# would have been counted as the probes' answers
	ip netns exec "$NS_RX" nft delete table inet brk
	wait_open_ms
	res=$(connect 198.18.0.2 $PROBES | outcomes)
	check "$([ "$(brk state)" = closed ]; echo $?)" \
		"and closed by the next $PROBES probes once answers flow ($res)"
else
	skip "half-open, probes unanswered" "nft not installed"
fi

# 6. the service is still down when the probe comes: open again
server_down
n_err=$(open_now)
opened=$(brk opened); pf0=$(brk probe_failure)
wait_open_ms
res=$(connect 198.18.0.2 1 | outcomes)
st=$(brk state)
check "$([ "$n_err" = 5 ] && [ "$res" = rst ] && [ "$st" = open ] &&
	[ $(( $(brk probe_failure) - pf0 )) = 1 ] && [ $(( $(brk opened) - opened )) = 1 ]; echo $?)" \
	"reopening: a probe answered by the kernel's RST opens it again ($st)"
ff0=$(brk failed_fast)
res=$(connect 198.18.0.2 3 | outcomes)
check "$([ "$res" = "rst rst rst" ] && [ $(( $(brk failed_fast) - ff0 )) = 3 ]; echo $?)" \
	"reopened: the next SYNs are failed fast"

# what an operator reads: stats, metrics, the log
sleep 1.2
scrape=$(ip netns exec "$NS_RX" curl -s http://127.0.0.1:$MPORT/metrics)
m_open=$(grep -c '^sluice_breaker_state{rule="web",state="open"} 1$' <<<"$scrape")
m_trans=$(sed -n 's/^sluice_breaker_transitions_total{rule="web",to="open"} //p' <<<"$scrape")
m_fail=$(sed -n 's/^sluice_breaker_probes_total{rule="web",result="failure"} //p' <<<"$scrape")
check "$([ "$m_open" = 1 ] && [ "$m_trans" = "$(brk opened)" ] && [ "$m_fail" -ge 1 ]; echo $?)" \
	"metrics: sluice_breaker_state open 1, transitions to open $m_trans, probe failures $m_fail"
if command -v promtool >/dev/null; then
	lint=$(promtool check metrics <<<"$scrape" 2>&1 | grep -i breaker)
	check "$([ -z "$lint" ]; echo $?)" \
		"promtool check metrics: nothing to say about the breaker families${lint:+: $lint}"
else
	skip "promtool check metrics" "no promtool"
fi
text=$(sluice_cli stats | grep '^breaker web: open')
check "$([ -n "$text" ]; echo $?)" "sluice stats: ${text:-no breaker line}"
text=$(sluice_cli status | grep '^breakers:')
eg=$(sluice_cli status -j | sluice_json "d['interfaces'][0]['egress']")
check "$([ "$text" = "breakers: web open" ] && [ "$eg" = true ]; echo $?)" \
	"sluice status: '${text:-no breakers line}', veth-rx egress $eg"
check "$(grep -q 'breaker web: open' "$NETNS_TMP/agent.err" &&
	grep -q 'breaker web: closed' "$NETNS_TMP/agent.err"; echo $?)" \
	"the agent logs the transitions ($(grep -c 'breaker web:' "$NETNS_TMP/agent.err") lines)"

# 7. the last breaker goes: so does the egress program
echo "$plain" | sluice_cli rule replace - >/dev/null
check "$([ "$(egress_filters)" = 0 ]; echo $?)" \
	"no rule with a breaker again: sluice_egress detached"

# 8. without an agent the breaker goes on; a new agent takes the filter
# over; `sluice down` removes it
egress_prog() {
	tc -n "$NS_RX" filter show dev veth-rx egress 2>/dev/null |
		sed -n 's/.*sluice_egress.* id \([0-9]*\).*/\1/p'
}
echo "$breaker" | sluice_cli rule replace - >/dev/null
prog0=$(egress_prog)
sluice_kill agent
server_down
connect 198.18.0.2 5 --align-ms $STAT_MS >/dev/null
server_up
res=$(connect 198.18.0.2 3 | outcomes)
check "$([ "$res" = "rst rst rst" ] && [ "$(egress_filters)" = 1 ]; echo $?)" \
	"agent killed (kill -9): 5 errors still open the breaker, SYNs get RSTs while the service listens ($res)"
sluice_start agent2 --metrics 127.0.0.1:$MPORT ||
	{ echo "Bail out! the agent did not restart"; exit 1; }
prog1=$(egress_prog)
check "$([ "$(egress_filters)" = 1 ] && [ -n "$prog1" ] && [ "$prog1" != "$prog0" ] &&
	[ "$(brk state)" = open ]; echo $?)" \
	"a new agent replaces the egress program (id $prog0 -> $prog1) and reads the open breaker the data plane kept"
sluice_kill agent2
ip netns exec "$NS_RX" "$SLUICE" down --iface veth-rx --pin-dir "$SL_PIN" >/dev/null 2>&1
check "$([ "$(egress_filters)" = 0 ]; echo $?)" "sluice down: the egress program is gone too"

echo "1..$n"
