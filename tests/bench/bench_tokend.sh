#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Token server throughput against a Redis counter per flow, same load
# (docs/benchmarks.md). Both servers pinned to one core, the load
# generator to another; private ports and directories, cleaned up.
# Then a fleet, with tokend's defaults: FLEET_AGENTS x FLEET_FLOWS every
# FLEET_PERIOD_MS, one worker thread against two, RUNS times each,
# interleaved (medians); and the same two closed loop with SAT_AGENTS.
#   AGENTS (1000) FLOWS (100) PERIOD_MS (100) BENCH_SECONDS (10)
#   SERVER_CPU (1) LOAD_CPU (0) FLEET_AGENTS (10000) FLEET_FLOWS (100)
#   FLEET_PERIOD_MS (1000) FLEET_SYNC_MS (1000) FLEET_TTL_MS (3000)
#   RUNS (3) SAT_AGENTS (1000) FLEET_ONLY (unset)
#   DAMON_OFF (unset): 1 stops the kernel's DAMON (every kdamond that
#   /sys/kernel/mm/damon/admin starts) for the run and restarts it after:
#   its pageout thread takes a core for ms at a time, and a SYNC that
#   waits behind it is the p99 (docs/benchmarks.md)
set -euo pipefail
BUILD=${BUILD:-build}
AGENTS=${AGENTS:-1000} FLOWS=${FLOWS:-100} PERIOD_MS=${PERIOD_MS:-100}
SECONDS_RUN=${BENCH_SECONDS:-10}
SERVER_CPU=${SERVER_CPU:-1} LOAD_CPU=${LOAD_CPU:-0}
FLEET_AGENTS=${FLEET_AGENTS:-10000} FLEET_FLOWS=${FLEET_FLOWS:-100}
FLEET_PERIOD_MS=${FLEET_PERIOD_MS:-1000} RUNS=${RUNS:-3}
# what tokend advises a fleet syncing every second, and its lease TTL
FLEET_SYNC_MS=${FLEET_SYNC_MS:-1000} FLEET_TTL_MS=${FLEET_TTL_MS:-3000}
SAT_AGENTS=${SAT_AGENTS:-1000}
gen=$BUILD/bench_tokend
dir=$(mktemp -d /tmp/sluice-bench-tokend.XXXXXX)
pids=()
damon_stopped=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for s in "${damon_stopped[@]}"; do echo on >"$s" || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
if [ -n "${DAMON_OFF:-}" ]; then
	for s in /sys/kernel/mm/damon/admin/kdamonds/*/state; do
		[ "$(cat "$s" 2>/dev/null)" = on ] || continue
		echo off >"$s"
		damon_stopped+=("$s")
	done
	echo "DAMON_OFF: ${#damon_stopped[@]} kdamond(s) stopped for the run"
fi

source "$(dirname "$0")/../lib/tokend_bench.sh"

ulimit -n "$(ulimit -Hn)"
bench_flows "$dir" "$FLOWS"

# One tokend with its defaults but THREADS workers on CPUS, loaded by
# AGENTS agents every PERIOD_MS (0: closed loop); its RESULT line.
fleet_run() # THREADS CPUS AGENTS PERIOD_MS
{
	local port pid

	port=$(free_port)
	taskset -c "$2" "$BUILD/sluice" tokend --listen "127.0.0.1:$port" \
		--rules "$dir/fleet.json" --state-dir "$dir/fleet-state" \
		--secrets "$dir/secrets" --learn-ms 0 --threads "$1" \
		--sync-ms "$FLEET_SYNC_MS" --lease-ttl-ms "$FLEET_TTL_MS" \
		2>>"$dir/fleet.log" &
	pid=$!
	pids+=("$pid")
	wait_port "$port"
	TOKEND_PID=$pid taskset -c "$LOAD_CPU" "$gen" tokend "$port" bench \
		"$BENCH_SECRET" "$3" "$FLEET_FLOWS" "$4" "$SECONDS_RUN" \
		>"$dir/fleet.out"
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	sed "s/^tokend:/tokend --threads $1:/" "$dir/fleet.out" |
		grep -v '^RESULT' >&2
	echo "$1 $(grep '^RESULT' "$dir/fleet.out")"
}

fleet()
{
	local r t

	mkdir -p "$dir/fleet-rules"
	bench_flows "$dir/fleet-rules" "$FLEET_FLOWS"
	mv "$dir/fleet-rules/rules.json" "$dir/fleet.json"
	echo "fleet: $FLEET_AGENTS agents x $FLEET_FLOWS flows every" \
		"$FLEET_PERIOD_MS ms, tokend's defaults, $RUNS runs of 1" \
		"and 2" \
		"workers; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	for ((r = 0; r < RUNS; r++)); do
		for t in 1 2; do
			fleet_run "$t" "$([ "$t" = 1 ] && echo "$SERVER_CPU" ||
				echo "$LOAD_CPU,$SERVER_CPU")" "$FLEET_AGENTS" \
				"$FLEET_PERIOD_MS" >>"$dir/fleet.res"
			fleet_run "$t" "$([ "$t" = 1 ] && echo "$SERVER_CPU" ||
				echo "$LOAD_CPU,$SERVER_CPU")" "$SAT_AGENTS" 0 \
				>>"$dir/sat.res"
		done
	done
	python3 - "$dir/fleet.res" "$dir/sat.res" "$FLEET_AGENTS" \
		"$FLEET_FLOWS" "$FLEET_PERIOD_MS" "$SAT_AGENTS" <<'PY'
import statistics as st, sys
def load(path):
    runs = {}
    for line in open(path):
        p = line.split()
        # THREADS RESULT tokend RATE P50 P99 CORES WAITED_MS
        runs.setdefault(p[0], []).append(
            (float(p[3]), float(p[4]), float(p[5]), float(p[6]),
             float(p[7])))
    return runs
fleet, sat = load(sys.argv[1]), load(sys.argv[2])
agents, flows, period, sat_agents = sys.argv[3:7]
med = lambda v: st.median(v)
pc = {}
for t in sorted(fleet):
    v = fleet[t]
    rate, p50, p99, cores, waited = (med([x[i] for x in v])
                                     for i in range(5))
    pc[t] = med([x[0] / x[3] for x in v if x[3] > 0])
    print("fleet: %s worker(s), %s agents x %s flows every %s ms: %.0f "
          "flow updates/s, sync p50 %.0f us p99 %.0f us, %.0f%% of one "
          "core: %.2fM flow updates/s per core, its threads waited %.1f "
          "ms for a CPU (medians of %d)"
          % (t, agents, flows, period, rate, p50, p99, 100 * cores,
             pc[t] / 1e6, waited, len(v)))
s = {t: med([x[0] for x in v]) for t, v in sat.items()}
for t in sorted(sat):
    v = sat[t]
    print("closed loop: %s worker(s), %s agents: %.0f flow updates/s, "
          "p99 %.0f us, %.0f%% of one core (medians of %d)"
          % (t, sat_agents, s[t], med([x[2] for x in v]),
             100 * med([x[3] for x in v]), len(v)))
if "1" in s and "2" in s and s["1"]:
    print("2 workers / 1: %.2f x the closed-loop flow updates/s (the load "
          "generator shares the second core)" % (s["2"] / s["1"]))
if "1" in pc and "2" in pc and pc["1"]:
    print("2 workers / 1: %.2f x the flow updates/s per core, so %.2f x "
          "one worker's on two free cores" % (pc["2"] / pc["1"],
                                               2 * pc["2"] / pc["1"]))
PY
}

if [ -n "${FLEET_ONLY:-}" ]; then
	fleet
	exit 0
fi

port=$(free_port)
taskset -c "$SERVER_CPU" "$BUILD/sluice" tokend --listen "127.0.0.1:$port" \
	--rules "$dir/rules.json" --state-dir "$dir/state" \
	--secrets "$dir/secrets" --learn-ms 0 --max-conns $((AGENTS + 16)) \
	--threads 1 \
	2>"$dir/tokend.log" &
pids+=($!)
wait_port "$port"
# CPU time of a server process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
t_start=$(date +%s.%N) c_start=$(cpu_ticks "${pids[0]}")
taskset -c "$LOAD_CPU" "$gen" tokend "$port" bench "$BENCH_SECRET" "$AGENTS" \
	"$FLOWS" "$PERIOD_MS" "$SECONDS_RUN" | tee "$dir/tokend.out"
c_end=$(cpu_ticks "${pids[0]}") t_end=$(date +%s.%N)
python3 -c 'import sys, os; c0, c1, t0, t1 = map(float, sys.argv[1:]);
print("tokend: %.0f%% of one core over the run (connect, warm-up, load)"
      % (100 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0)))' \
	"$c_start" "$c_end" "$t_start" "$t_end"
kill -TERM "${pids[0]}"

rport=$(free_port)
taskset -c "$SERVER_CPU" redis-server --port "$rport" --bind 127.0.0.1 \
	--dir "$dir" --save '' --appendonly no --maxclients $((AGENTS + 64)) \
	--daemonize no --logfile "$dir/redis.log" &
pids+=($!)
wait_port "$rport"
taskset -c "$LOAD_CPU" "$gen" redis "$rport" "$AGENTS" "$FLOWS" \
	"$PERIOD_MS" "$SECONDS_RUN" | tee "$dir/redis.out"

read -r _ _ t_rate t_p50 t_p99 _ < <(grep '^RESULT' "$dir/tokend.out")
read -r _ _ r_rate r_p50 r_p99 _ < <(grep '^RESULT' "$dir/redis.out")
python3 - "$t_rate" "$r_rate" "$t_p99" "$r_p99" <<'PY'
import sys
t, r, tp, rp = map(float, sys.argv[1:])
print("tokend / redis: %.2f x the flow updates/s; p99 %.0f us vs %.0f us"
      % (t / r if r else float("inf"), tp, rp))
PY

fleet
