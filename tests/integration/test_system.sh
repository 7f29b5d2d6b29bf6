#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Adaptive protection on real connections (docs/rules.md, "system"): a TCP
# service in NS_RX that accepts N = 200 connections per second (listen
# backlog 128) and clients in NS_TX that start 5 N = 1000 connects per
# second, open loop, each given up after 0.9 s (one SYN each). The accept
# queue is sampled from /proc/net/tcp every 20 ms and the connections
# established counted by the clients: both independent of sluice.
#   - without a system rule the queue sits at the backlog;
#   - with "system": {"accept_queue": 64}: from 1 s after the load starts
#     the queue stays below 64, the admitted rate of every whole second is
#     within 10 % of N (the documented bound), status names the signal and
#     stats the threshold's source (adaptive);
#   - the load gone, shedding ends and the threshold is count again;
#   - kill -9 of the agent while shedding: the threshold's lease lapses
#     (2 s) and the rule is back at count (the queue fills again), and a
#     new agent sheds again.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "system"
if [ -n "$VM" ]; then
	skip "system" "host-only: $VMWHY"
	exit 0
fi
netns_setup sys 1 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

PORT=8080
N=200
TARGET=64
LOAD=tests/lib/connload.py
plain='{"rules":[{"name":"web","match":{"proto":"tcp","dport":8080},"grade":"cps","count":5000}]}'
guard='{"rules":[{"name":"web","match":{"proto":"tcp","dport":8080},"grade":"cps","count":5000,
  "system":{"accept_queue":'$TARGET'}}]}'
echo "$plain" >"$NETNS_TMP/plain.json"
echo "$guard" >"$NETNS_TMP/guard.json"

MPORT=9474
sluice_start agent --rules "$NETNS_TMP/plain.json" --metrics 127.0.0.1:$MPORT ||
	{ echo "Bail out! the agent did not start"; exit 1; }
netns_bg "$NS_RX" srv python3 "$LOAD" serve $PORT $N 128
netns_wait_ready srv 5 || { echo "Bail out! server"; exit 1; }

sys_field() { sluice_cli status -j | sluice_json "d['system'][0]['$1'] if d['system'] else None"; }

# run NAME SECONDS: the load for SECONDS, the queue sampled meanwhile
# (from 0.5 s before to 1.5 s after); load.NAME and qNAME.out in NETNS_TMP
run()
{
	local name=$1 secs=$2 qp lp

	ip netns exec "$NS_RX" python3 "$LOAD" queue $PORT $((secs + 2)) \
		>"$NETNS_TMP/q$name.out" &
	qp=$!
	sleep 0.5
	ip netns exec "$NS_TX" python3 "$LOAD" load 198.18.0.2 $PORT \
		$((5 * N)) "$secs" >"$NETNS_TMP/load.$name" &
	lp=$!
	wait $lp $qp
}

# queue NAME FROM TO: the largest and the median queue in [FROM, TO) s of
# the load
queue_stats()
{
	python3 - "$NETNS_TMP/q$1.out" "$2" "$3" <<'PY'
import json, sys
s = [q for t, q in json.load(open(sys.argv[1]))["samples"]
     if q is not None and float(sys.argv[2]) <= t - 0.5 < float(sys.argv[3])]
print(max(s), sorted(s)[len(s) // 2], len(s))
PY
}

# 1. no system rule: the backlog fills
run base 5
sleep 2
read -r qmax qmed _ <<<"$(queue_stats base 1 5)"
est=$(sluice_json "d['established']" <"$NETNS_TMP/load.base")
echo "# without a system rule: accept queue median $qmed, largest $qmax (backlog 128); $est of $((25 * N)) connects established"
check "$([ "$qmed" -ge 120 ]; echo $?)" \
	"no system rule: the accept queue sits at the backlog (median $qmed)"

# 2. with one: the queue below its target, the rate within 10 % of N
echo "$guard" | sluice_cli rule replace - >/dev/null ||
	{ echo "Bail out! rule replace"; exit 1; }
sleep 1
run guard 12 &
RUNPID=$!
sleep 6
state=$(sys_field state)
signal=$(sys_field signal)
source=$(sluice_cli stats -j | sluice_json "d['rules'][0]['threshold_source']")
thr=$(sys_field threshold)
scrape=$(ip netns exec "$NS_RX" curl -s http://127.0.0.1:$MPORT/metrics)
text=$(sluice_cli status | grep '^system ')
wait $RUNPID
read -r qmax qmed nsamp <<<"$(queue_stats guard 1 12)"
read -r q0 _ _ <<<"$(queue_stats guard 0 1)"
res=$(python3 - "$NETNS_TMP/load.guard" $N <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
ps = d["per_second"][2:]
worst = max(abs(x - n) / n for x in ps)
print(" ".join(map(str, d["per_second"])), f"{worst:.3f}", d["established"])
PY
)
secs=${res% * *}
worst=$(awk '{print $(NF-1)}' <<<"$res")
echo "# system accept_queue $TARGET: queue median $qmed, largest $qmax after the first second ($nsamp samples), $q0 in it; established per second: $secs; threshold $thr while shedding"
check "$([ "$state" = shedding ] && [ "$signal" = accept_queue ] &&
	[ "$source" = adaptive ]; echo $?)" \
	"under 5 N: status says shedding on accept_queue, stats the source adaptive ($state, $signal, $source)"
m_shed=$(grep -c '^sluice_system_shedding{rule="web",signal="accept_queue"} 1$' <<<"$scrape")
m_src=$(grep -c '^sluice_rule_threshold_source{rule="web",source="adaptive"} 1$' <<<"$scrape")
m_q=$(sed -n 's/^sluice_system_accept_queue{rule="web"} //p' <<<"$scrape")
m_rate=$(sed -n 's/^sluice_system_service_rate{rule="web"} //p' <<<"$scrape")
check "$([ "$m_shed" = 1 ] && [ "$m_src" = 1 ] && [ -n "$m_q" ] &&
	python3 -c "import sys; sys.exit(0 if 0.8 * $N <= $m_rate <= 1.2 * $N else 1)"; echo $?)" \
	"metrics: sluice_system_shedding accept_queue 1, threshold source adaptive, queue $m_q, service rate $m_rate (N $N)"
lint=$(promtool check metrics <<<"$scrape" 2>&1 | grep -iE 'system|host_')
check "$([ -z "$lint" ]; echo $?)" \
	"promtool check metrics: nothing to say about the system families${lint:+: $lint}"
check "$([[ "$text" == "system web: shedding (accept_queue)"* ]]; echo $?)" \
	"sluice status: ${text:-no system line}"
check "$([ "$qmax" -lt $TARGET ]; echo $?)" \
	"the accept queue stays below its target $TARGET from 1 s after the load starts (largest $qmax)"
check "$(python3 -c "print(0 if $worst <= 0.10 else 1)")" \
	"from the third second, each second admits within 10% of N = $N (worst $worst)"

# 3. the load gone: calm, count again
calm=1
for ((i = 0; i < 60; i++)); do
	[ "$(sys_field state)" = idle ] && [ "$(sys_field threshold)" = 5000 ] &&
		{ calm=0; break; }
	sleep 0.1
done
check $calm "the load gone: shedding ends, the threshold is count again ($(sys_field state), $(sys_field threshold))"

# 4. kill -9 while shedding: back at count after the lease, then a new
# agent sheds again
run kill 11 &
RUNPID=$!
sleep 3
sluice_kill agent
sleep 5
sluice_start agent2 || { echo "Bail out! the agent did not restart"; exit 1; }
wait $RUNPID
read -r amax _ _ <<<"$(queue_stats kill 1 2.4)"
read -r kmax _ _ <<<"$(queue_stats kill 4.5 7.5)"
read -r rmax _ _ <<<"$(queue_stats kill 9.5 11)"
echo "# kill -9 while shedding (at ~2.5 s): queue largest $amax before, $kmax from 2 s after (agent dead), $rmax from 1.5 s after a new agent started"
check "$([ "$amax" -lt $TARGET ] && [ "$kmax" -ge 120 ]; echo $?)" \
	"agent killed: its threshold lapses with its lease, the rule is back at count (queue $amax, then $kmax)"
check "$([ "$rmax" -lt $TARGET ] &&
	grep -q "system web: shedding" "$NETNS_TMP/agent2.err"; echo $?)" \
	"a new agent sheds again (queue $rmax)"
grep -q "system web: shedding, accept_queue" "$NETNS_TMP/agent.err"
check $? "the agent logs the start of shedding and its signal"
echo "1..$n"
