#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Warm-up rules on real packets (docs/rules.md, "behavior: reject and
# warm_up"): count 20000, period_s 5, cold_factor 4, against a paced flood
# of 50k pps. The threshold is
#     threshold(t) = 5000 + 15000 * t / 5   for t < 5 s,   20000 after,
# It bounds the packets admitted in every 1 s window, as count does for a
# "reject" rule, and a flood is paced at it (docs/architecture.md), so second
# k after the rule started (k = 0, 1, ...) should admit the threshold's
# mean over that second: 9500, 12500, 15500, 18500, 20000, ... from k = 1.
# Checked within 10% for every second but the first (which holds the
# initial burst), counted at tc ingress by rxcount, independently of
# sluice:
#   1. from a fresh start (no pinned data plane): the agent starts under
#      the flood; the ramp runs from its attach (when `status --ready`
#      first succeeds, to within a few tens of ms);
#   2. a new ramp (a `rule replace` with a new rule) and, 2 s into it, the
#      agent killed with SIGKILL and started again from its snapshot: it
#      adopts the data plane, and the ramp goes on where it was instead of
#      starting again (that would drop the rate to ~5000 for a second).
# The seconds are bins of the rxcount samples on the wall clock (rx_csv_py
# in tests/lib/sluice.sh), from the moment the rule started.
# Under SLUICE_VM=1 the curve checks are skipped; the functional checks
# (adoption, the rule's totals going on across the restart) still run.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "agent warm-up"
netns_setup awrm 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

if [ -n "$VM" ]; then
	RATE=2500 COUNT=1000 READY_S=120
else
	RATE=50000 COUNT=20000 READY_S=10
fi
PERIOD=5 COLD=4 HOLD=8
T=$NETNS_TMP
warm() # NAME
{
	printf '{"rules":[{"name":"%s","match":{"proto":"udp","dport":9000},"grade":"pps","count":%s,"behavior":{"warm_up":{"period_s":%s,"cold_factor":%s}}}]}\n' \
		"$1" "$COUNT" "$PERIOD" "$COLD" >"$T/$1.json"
}
warm w1
warm w2

netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
	--dport 9000 --drop --duration 60 --csv "$T/rx.csv"
rx_wait_ready rx seen_rx 5 || { echo "Bail out! rxcount did not start"; exit 1; }
FLOOD_S=$(( 2 * HOLD + 4 ))
[ -n "$VM" ] && FLOOD_S=50
sl_bg gen ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
	--dst-mac "$RX_MAC" --dport 9000 --rate "$RATE" --duration "$FLOOD_S" \
	--cpu 0 >"$T/gen.out"
sleep 1

# ---- 1. fresh start under the flood -------------------------------------
sluice_bg a1 --rules "$T/w1.json"
sluice_wait_ready a1 "$READY_S"
rc=$?
sl_mark t_a
check $rc "fresh start: the agent with the warm-up rule is ready under the flood" ||
	{ show "$T/a1.err" 20; echo "Bail out! no agent"; exit 1; }
check $([ "$(sluice_cli status -j | sluice_json 'd["adopted"]')" = false ]; echo $?) \
	"fresh start: a new data plane (adopted false)"
check $([ "$(sluice_cli rule list -j | sluice_json 'd["rules"][0]["behavior"]')" = \
	'{"warm_up": {"cold_factor": '$COLD', "period_s": '$PERIOD'}}' ]; echo $?) \
	"the rule is in force with its warm_up behavior"
sleep "$HOLD"

# ---- 2. a new ramp, and an agent restart 2 s into it ---------------------
sl_mark t_b0
sluice_cli rule replace "$T/w2.json" >/dev/null
rc=$?
sl_mark t_b1
check $rc "rule replace with a new warm-up rule (a new ramp)"
sleep 2
before=$(sluice_rule_stat w2 passed_pkts)
sl_mark t_kill
sluice_kill a1
sluice_bg a2
sluice_wait_ready a2 "$READY_S"
rc=$?
sl_mark t_c
check $rc "the agent, killed 2 s into the ramp, is ready again" \
	"$(python3 -c "print(f'{$t_c - $t_kill:.2f}')") s after the kill"
check $([ "$(sluice_cli status -j | sluice_json 'd["adopted"] and d["interfaces"][0]["adopted"]')" = true ]; echo $?) \
	"  ... it adopted the running data plane"
after=$(sluice_rule_stat w2 passed_pkts)
check $(( ${after:-0} >= ${before:-1} && ${before:-0} > 0 ? 0 : 1 )) \
	"  ... and w2's totals went on ($before -> $after)"
if [ -n "$VM" ]; then
	kill -TERM "$gen" 2>/dev/null
	sl_wait "$gen"
	skip "fresh start: admitted per second follows the ramp within 10%" "$VMWHY"
	skip "restart during the ramp: the ramp goes on" "$VMWHY"
	echo "1..$n"
	exit 0
fi
python3 -c "import time; time.sleep(max(0, $t_b1 + $HOLD + 0.3 - time.time()))"
kill -TERM "$gen" 2>/dev/null
sl_wait "$gen"
sleep 0.3
netns_stop rx
sl_mark t_end

# expected and admitted per second from a start time
curve=$(rx_csv_py "$T/rx.csv" "$seen_rx" "$t_end" "$t_a" \
	"$(python3 -c "print(($t_b0 + $t_b1) / 2)")" "$HOLD" "$COUNT" \
	"$PERIOD" "$COLD" <<'PY'
ta, tb = float(args[0]), float(args[1])
hold, cnt, period, cold_factor = map(int, args[2:])
cold = cnt // cold_factor
def threshold(t):
    return cold + (cnt - cold) * t / period if t < period else cnt
def want(k):
    # paced at the threshold: its mean over [k, k + 1]
    return sum(threshold(k + (i + 0.5) / 100) for i in range(100)) / 100
for name, t in (("fresh", ta), ("restart", tb)):
    got = bins(t, hold)
    bad = [k for k in range(1, hold) if abs(got[k] - want(k)) > 0.1 * want(k)]
    print(name, ",".join(f"{g:.0f}" for g in got),
          ",".join(f"{want(k):.0f}" for k in range(hold)),
          ",".join(map(str, bad)) or "-")
PY
)
[ "$(wc -l <<<"$curve")" = 2 ] || { check 1 "the rxcount series could be analysed"; echo "1..$n"; exit 1; }
while read -r name got want bad; do
	echo "# $name: admitted per second $got"
	echo "# $name: the curve       $want"
	if [ "$name" = fresh ]; then
		check $([ "$bad" = - ]; echo $?) \
			"fresh start: admitted per second follows the ramp within 10% after the first second (off in seconds: $bad)"
	else
		check $([ "$bad" = - ]; echo $?) \
			"restart 2 s into a ramp: the ramp goes on, within 10% after the first second (off in seconds: $bad)"
	fi
done <<<"$curve"
echo "1..$n"
