#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Control-plane latency (docs/benchmarks.md): the wall-clock time of a
# `sluice` CLI call, from the call to its exit, against an agent on a veth
# in a namespace world (tests/lib/netns.sh, tests/lib/sluice.sh).
#
#   rule replace  4096 rules, alternating between two sets A and B that
#                 share no rule (other names, ports and prefixes), so that
#                 every call puts 4096 new rules in force. The CLI returns
#                 once the agent has written the snapshot (fsync) and
#                 sl_dp_apply() has switched the data plane to the new set
#                 (user/agent/commit.c agent_do_change()).
#   stats -j      with 4096 rules in force.
#   stats         the same as a table (the answer parsed with cJSON).
#   status        the baseline: the same round trip for a request that
#                 does almost nothing (after an untimed one).
#
# usage: tests/bench/bench_ctl.sh [--runs N]
# Prints a table and "target rule replace 4096 median < 50 ms: 31.2 ms OK"
# (or MISS) lines; exits 0 whatever the figures, 1 when it cannot measure,
# and prints a TAP skip (exit 0) without root or native XDP on veth.

set -u

RUNS=21
T_REPLACE=50
T_STATS=20

usage()
{
	sed -n 's/^# usage: //p' "$0"
}

while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=${2:?}; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
case "$RUNS" in
""|*[!0-9]*) usage >&2; exit 2 ;;
esac
if [ "$RUNS" -lt 1 ] || [ "$RUNS" -gt 1000 ]; then
	echo "bench_ctl: --runs 1-1000" >&2
	exit 2
fi

cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export BUILD
# shellcheck source=tests/lib/netns.sh
source tests/lib/netns.sh
# shellcheck source=tests/lib/sluice.sh
source tests/lib/sluice.sh

die()
{
	echo "bench_ctl: $*" >&2
	exit 1
}

[ -x "$SLUICE" ] || die "$SLUICE missing: run 'make all'"
command -v python3 >/dev/null || die "needs python3"
skip_unless_root_and_xdp "control-plane benchmark"

netns_setup sctl 2 || die "cannot create the namespaces"
sluice_env_setup || die "cannot mount a bpffs for the pins"

# Two sets of 4096 rules with nothing in common: 64 rules on
# dst 198.18.x.0/24 (udp dport 53 in A, tcp dport 443 in B, x = 0-63 in A
# and 64-127 in B), then 4032 rules on distinct ports (from 20000 in A,
# from 30000 in B), udp and tcp alternating, pps and cps mixed.
python3 - "$NETNS_TMP" <<'PY' || die "cannot write the rule files"
import json, sys
d = sys.argv[1]
for tag, pport, pproto, xbase, base in (("a", 53, "udp", 0, 20000),
                                         ("b", 443, "tcp", 64, 30000)):
    rules = []
    for x in range(64):
        rules.append({"name": f"{tag}-net-{x}",
                      "match": {"proto": pproto, "dport": pport,
                                "dst": f"198.18.{xbase + x}.0/24"},
                      "grade": "pps", "count": 1000 + x})
    for i in range(4096 - 64):
        proto = "udp" if i % 2 == 0 else "tcp"
        grade = "cps" if proto == "tcp" and i % 4 == 1 else "pps"
        rules.append({"name": f"{tag}-port-{i}",
                      "match": {"proto": proto, "dport": base + i},
                      "grade": grade, "count": 100 + i})
    with open(f"{d}/set-{tag}.json", "w") as f:
        json.dump({"rules": rules}, f)
PY

# CLI calls run in the host's namespaces: the control socket is a path in
# the state directory, and `ip netns exec` would add its own start-up.
cli()
{
	"$SLUICE" "$@" --state-dir "$SL_STATE"
}

sluice_start agent --rules "$NETNS_TMP/set-a.json" ||
	die "the agent did not start with 4096 rules"

# time_ms CMD...: runs CMD (stdout to $NETNS_TMP/out), sets MS to its
# wall-clock time in ms (3 decimals); fails with CMD. The agent frees the
# previous request after it has answered: a pause lets it finish, so that
# each call is timed against an idle agent.
time_ms()
{
	local t0 t1 rc

	sleep 0.05
	t0=$EPOCHREALTIME
	"$@" >"$NETNS_TMP/out" 2>"$NETNS_TMP/err"
	rc=$?
	t1=$EPOCHREALTIME
	MS=$((${t1//[.,]/} - ${t0//[.,]/})) # microseconds
	MS=$(printf '%d.%03d' $((MS / 1000)) $((MS % 1000)))
	return $rc
}

# check_replace SET VERSION: the answer names the version and 4096 rules
check_replace()
{
	python3 - "$NETNS_TMP/out" "$2" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
sys.exit(0 if a["version"] == int(sys.argv[2]) and
         a["rules_in_force"] == 4096 else 1)
PY
}

version()
{
	cli status -j | python3 -c \
		'import json, sys; print(json.load(sys.stdin)["snapshot"]["version"])'
}

T_REP=() T_STA=() T_STS=() T_TAB=()
v=$(version) || die "status failed"
for ((r = 0; r < RUNS; r++)); do
	# B on even runs, A on odd: the agent starts with A in force
	if ((r % 2 == 0)); then which=b; else which=a; fi
	v=$((v + 1))
	time_ms cli rule replace -j "$NETNS_TMP/set-$which.json" ||
		die "rule replace failed: $(cat "$NETNS_TMP/err" "$NETNS_TMP/out")"
	T_REP+=("$MS")
	check_replace "$which" "$v" ||
		die "rule replace answered $(cat "$NETNS_TMP/out"), not version $v"
	# untimed: the agent's first allocations after freeing a large
	# request cost it a few ms (malloc consolidation); the baseline is
	# the bare round trip
	cli status -j >/dev/null || die "status failed"
	time_ms cli status -j || die "status failed"
	T_STA+=("$MS")
	time_ms cli stats || die "stats failed"
	T_TAB+=("$MS")
	time_ms cli stats -j || die "stats failed"
	T_STS+=("$MS")
done
# the data plane's own view: the rules in force are the last set's
python3 - "$NETNS_TMP/out" "$which" <<'PY' ||
import json, sys
s = json.load(open(sys.argv[1]))
names = [r["name"] for r in s["rules"]]
sys.exit(0 if len(names) == 4096 and
         all(n.startswith(sys.argv[2] + "-") for n in names) else 1)
PY
	die "stats -j does not show the 4096 rules of set $which"

# stats "median min max" of the arguments
stats()
{
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'
}

read -r rep_med rep_min rep_max < <(stats "${T_REP[@]}")
read -r sta_med sta_min sta_max < <(stats "${T_STA[@]}")
read -r sts_med sts_min sts_max < <(stats "${T_STS[@]}")
read -r tab_med tab_min tab_max < <(stats "${T_TAB[@]}")
ratio()
{
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'
}
verdict()
{
	awk -v v="$1" -v t="$2" 'BEGIN { print (v + 0 < t + 0) ? "OK" : "MISS" }'
}

echo "sluice control plane: wall-clock time of one CLI call (process start" \
	"to exit), $RUNS runs each, agent on veth-rx with 4096 rules in force"
printf '%-44s %9s %8s %8s %8s\n' "call" "median ms" "min" "max" \
	"x status"
printf '%-44s %9s %8s %8s %8s\n' "sluice status -j (baseline)" \
	"$sta_med" "$sta_min" "$sta_max" "1.0"
printf '%-44s %9s %8s %8s %8s\n' "sluice rule replace -j (4096 new rules)" \
	"$rep_med" "$rep_min" "$rep_max" "$(ratio "$rep_med" "$sta_med")"
printf '%-44s %9s %8s %8s %8s\n' "sluice stats -j (4096 rules)" \
	"$sts_med" "$sts_min" "$sts_max" "$(ratio "$sts_med" "$sta_med")"
printf '%-44s %9s %8s %8s %8s\n' "sluice stats (table, 4096 rules)" \
	"$tab_med" "$tab_min" "$tab_max" "$(ratio "$tab_med" "$sta_med")"
echo "rule replace per run (ms): ${T_REP[*]}"
echo "target rule replace 4096 median < $T_REPLACE ms: $rep_med ms" \
	"$(verdict "$rep_med" "$T_REPLACE")"
echo "target stats -j 4096 median < $T_STATS ms: $sts_med ms" \
	"$(verdict "$sts_med" "$T_STATS")"
exit 0
