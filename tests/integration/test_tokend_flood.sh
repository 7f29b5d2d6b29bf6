#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# An unauthenticated flood against a real tokend (docs/cluster.md,
# "Overload and limits"): thousands of idle TCP connections that never
# send a HELLO. Real agents (build/bench_tokend: sessions sealed as an
# agent's) must still be served, HELLO answered and grants given, not
# ERROR BUSY: handshakes have their own budget (--max-handshakes), the
# oldest evicted for a new one, and sessions count apart (--max-conns).
# Then the same with the fd limit at 256 (prlimit): accept4 fails with
# EMFILE, and tokend must neither spin (its CPU over 5 s, from
# /proc/PID/stat) nor lock the agents out. Also: a state dir or secrets
# file that another user could change is refused. About 25 s.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh
source tests/lib/tokend_bench.sh

BENCH=${BENCH:-$GEN_BIN/bench_tokend}
if [ "$(id -u)" -ne 0 ]; then
	echo "ok 1 - tokend flood # SKIP needs root (a network namespace)"
	echo "1..1"
	exit 0
fi
[ -x "$BENCH" ] || { echo "Bail out! $BENCH is missing: make test-bins"; exit 1; }
netns_setup tdflood 1 || { echo "Bail out! netns setup failed"; exit 1; }
_netns_tmp || { echo "Bail out! no temporary directory"; exit 1; }
T=$NETNS_TMP
PORT=7400
METRICS=127.0.0.1:9480
FLOOD=5000
mkdir -p "$T/td"
chmod 0700 "$T/td"
bench_flows "$T" 1

# flood.py HOST PORT N SECONDS: N idle connections, held SECONDS, then
# closed; "ready" on stderr once every connect is under way
cat >"$T/flood.py" <<'PY'
import resource, socket, sys, time
host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
socks = []
for _ in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((host, port))
    socks.append(s)
print("ready", file=sys.stderr, flush=True)
time.sleep(hold)
print("opened %d" % len(socks), file=sys.stderr, flush=True)
PY

tokend() # [PRLIMIT ARGS...]: a token server on PORT, restarted
{
	netns_stop tokend >/dev/null 2>&1
	netns_bg "$NS_RX" tokend "$@" "$SLUICE" tokend --listen "127.0.0.1:$PORT" \
		--rules "$T/rules.json" --state-dir "$T/td" --secrets "$T/secrets" \
		--metrics "$METRICS"
	ip netns exec "$NS_RX" bash -c "$(declare -f wait_port); wait_port $PORT"
}

metric() # NAME: its value, -1 if absent
{
	ip netns exec "$NS_RX" curl -sS --max-time 5 "http://$METRICS/metrics" |
		awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? -1 : v }'
}

# 6 agents, one flow, a sync every 100 ms for 2 + 1 s; "RESULT" when every
# one authenticated and was answered
agents()
{
	ip netns exec "$NS_RX" timeout 20 "$BENCH" tokend "$PORT" bench \
		"$BENCH_SECRET" 6 1 100 1 >"$T/bench.out" 2>"$T/bench.err"
}

cpu_ticks() # PID: utime + stime
{
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# ---- who may change the state dir and the secrets ----
chmod 0777 "$T/td"
ip netns exec "$NS_RX" timeout 5 "$SLUICE" tokend --listen "127.0.0.1:$PORT" \
	--rules "$T/rules.json" --state-dir "$T/td" 2>"$T/bad.err"
rc=$?
grep -qF -- "--state-dir $T/td: owner uid 0, mode 0777: it must be owned by uid 0" "$T/bad.err"
check $((rc != 0 && $? == 0 ? 0 : 1)) "a world-writable --state-dir: refused, exit $rc ($(head -c 150 "$T/bad.err"))"
chmod 0700 "$T/td"
cp "$T/secrets" "$T/secrets.nobody"
chown nobody "$T/secrets.nobody"
ip netns exec "$NS_RX" timeout 5 "$SLUICE" tokend --listen "127.0.0.1:$PORT" \
	--rules "$T/rules.json" --state-dir "$T/td" --secrets "$T/secrets.nobody" 2>"$T/bad.err"
rc=$?
grep -qF "$T/secrets.nobody: owner uid 65534" "$T/bad.err"
check $((rc != 0 && $? == 0 ? 0 : 1)) "a secrets file of user nobody: refused, exit $rc"

# ---- thousands of idle connections, the default limits ----
tokend || { echo "Bail out! tokend did not start"; show "$T/tokend.err"; exit 1; }
netns_bg "$NS_RX" flood python3 "$T/flood.py" 127.0.0.1 "$PORT" "$FLOOD" 8
netns_wait_ready flood 10 || { echo "Bail out! the flood did not start"; show "$T/flood.err"; exit 1; }
sleep 1
agents
rc=$?
echo "# $FLOOD idle connections: $(head -n 1 "$T/bench.out")$(head -c 200 "$T/bench.err")"
check $((rc == 0 && $(grep -c '^RESULT tokend' "$T/bench.out") == 1 ? 0 : 1)) \
	"$FLOOD idle connections: 6 real agents authenticated and granted (exit $rc)"
busy=$(metric 'sluice_tokend_connections_refused_total{reason="max_conns"}')
evicted=$(metric 'sluice_tokend_connections_closed_total{reason="evicted"}')
hs=$(metric sluice_tokend_handshakes)
check $([ "$busy" = 0 ] && [ "$evicted" -gt 0 ] && [ "$hs" -le 1024 ] && echo 0 || echo 1) \
	"no session refused BUSY ($busy); $evicted idle handshakes evicted, $hs open (--max-handshakes 1024)"
netns_stop flood >/dev/null 2>&1

# ---- out of fds: prlimit 256 ----
tokend prlimit --nofile=256 || { echo "Bail out! tokend did not start"; show "$T/tokend.err"; exit 1; }
pid=${NETNS_PID[tokend]}
tck=$(getconf CLK_TCK)
c0=$(cpu_ticks "$pid")
t0=$(date +%s.%N)
netns_bg "$NS_RX" flood python3 "$T/flood.py" 127.0.0.1 "$PORT" 2000 6
netns_wait_ready flood 10 || { echo "Bail out! the flood did not start"; show "$T/flood.err"; exit 1; }
agents
rc=$?
echo "# 2000 idle connections, 256 fds: $(head -n 1 "$T/bench.out")$(head -c 200 "$T/bench.err")"
check $((rc == 0 && $(grep -c '^RESULT tokend' "$T/bench.out") == 1 ? 0 : 1)) \
	"2000 idle connections past 256 fds: 6 real agents authenticated and granted (exit $rc)"
sleep "$(awk -v t0="$t0" -v now="$(date +%s.%N)" 'BEGIN { d = 5 - (now - t0); print (d > 0 ? d : 0) }')"
c1=$(cpu_ticks "$pid")
cpu=$(awk -v d=$((c1 - c0)) -v hz="$tck" 'BEGIN { printf "%.2f", d / hz }')
exhausted=$(metric sluice_tokend_accept_fd_exhausted_total)
echo "# tokend CPU over the 5 s of the flood: $cpu s; accepts out of fds: $exhausted"
check $(awk -v c="$cpu" 'BEGIN { print c < 0.5 ? 0 : 1 }') "out of fds: tokend used $cpu s of CPU in 5 s (< 0.5: no spin)"
check $([ "$exhausted" -gt 0 ] && grep -q 'tokend: accept: Too many open files' "$T/tokend.err" &&
	[ "$(grep -c 'tokend: accept:' "$T/tokend.err")" -le 2 ] && echo 0 || echo 1) \
	"EMFILE counted ($exhausted) and logged at most once per 10 s"
netns_stop flood >/dev/null 2>&1
netns_stop tokend
check $? "tokend stopped cleanly"
echo "1..$n"
