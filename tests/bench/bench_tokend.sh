#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Token server throughput against a Redis counter per flow, same load
# (docs/benchmarks.md). Both servers pinned to one core, the load
# generator to another; private ports and directories, cleaned up.
#   AGENTS (1000) FLOWS (100) PERIOD_MS (100) BENCH_SECONDS (10)
#   SERVER_CPU (1) LOAD_CPU (0)
set -euo pipefail
BUILD=${BUILD:-build}
AGENTS=${AGENTS:-1000} FLOWS=${FLOWS:-100} PERIOD_MS=${PERIOD_MS:-100}
SECONDS_RUN=${BENCH_SECONDS:-10}
SERVER_CPU=${SERVER_CPU:-1} LOAD_CPU=${LOAD_CPU:-0}
gen=$BUILD/bench_tokend
dir=$(mktemp -d /tmp/sluice-bench-tokend.XXXXXX)
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT

source "$(dirname "$0")/../lib/tokend_bench.sh"

ulimit -n "$(ulimit -Hn)"
bench_flows "$dir" "$FLOWS"

port=$(free_port)
taskset -c "$SERVER_CPU" "$BUILD/sluice" tokend --listen "127.0.0.1:$port" \
	--rules "$dir/rules.json" --state-dir "$dir/state" \
	--secrets "$dir/secrets" --learn-ms 0 --max-conns $((AGENTS + 16)) \
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

read -r _ _ t_rate t_p50 t_p99 < <(grep '^RESULT' "$dir/tokend.out")
read -r _ _ r_rate r_p50 r_p99 < <(grep '^RESULT' "$dir/redis.out")
python3 - "$t_rate" "$r_rate" "$t_p99" "$r_p99" <<'PY'
import sys
t, r, tp, rp = map(float, sys.argv[1:])
print("tokend / redis: %.2f x the flow updates/s; p99 %.0f us vs %.0f us"
      % (t / r if r else float("inf"), tp, rp))
PY
