#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Rules from etcd (docs/fleet.md): the time from a put of the key to its
# revision in force on each of N agents. One etcd and N agents in one
# namespace, each agent on a veth of its own with its own state and pin
# directories; etcd on that namespace's loopback. A put goes through
# etcd's JSON gateway; once every agent's metrics show its revision in
# force, each agent's time of the apply
# (sluice_config_source_last_change_timestamp_seconds, its own clock) less
# the put's start is its latency.
#
# usage: tests/bench/bench_etcd.sh [--agents N] [--puts N]
# Prints p50 and p99 over every agent and put, and of the slowest agent
# of each put; exits 0 whatever the
# figures, 1 when it cannot measure, and prints a TAP skip (exit 0)
# without root, native XDP on veth or etcd.

set -u

AGENTS=4
PUTS=20
while [ $# -gt 0 ]; do
	case $1 in
	--agents) AGENTS=$2; shift 2 ;;
	--puts) PUTS=$2; shift 2 ;;
	*) echo "usage: $0 [--agents N] [--puts N]" >&2; exit 2 ;;
	esac
done

cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/etcd.sh

if ! command -v etcd >/dev/null; then
	echo "ok 1 - etcd fan-out # SKIP etcd is not installed (etcd-server)"
	exit 0
fi
skip_unless_root_and_xdp "etcd fan-out"
netns_setup betcd 1 || { echo "netns setup failed" >&2; exit 1; }
sluice_env_setup || { echo "bpffs setup failed" >&2; exit 1; }
T=$NETNS_TMP
EP=http://127.0.0.1:2379
ETCD_EP=$EP
KEY=/sluice/bench

rule() { printf '{"name":"%s","match":{"proto":"udp","dport":%s},"grade":"pps","count":%s}' "$@"; }
echo "{\"rules\":[$(rule r1 9000 1000),$(rule r2 9001 2000)]}" >"$T/a.json"
echo "{\"rules\":[$(rule r1 9000 1000),$(rule r2 9001 3000)]}" >"$T/b.json"

etcd_start >&2 || exit 1
ectl put "$KEY" "$(cat "$T/a.json")" >/dev/null ||
	{ echo "cannot put $KEY" >&2; exit 1; }

ports=()
for ((k = 0; k < AGENTS; k++)); do
	ip -n "$NS_RX" link add "b$k" type veth peer name "b$k-peer" &&
		ip -n "$NS_RX" link set "b$k" up &&
		ip -n "$NS_RX" link set "b$k-peer" up ||
		{ echo "veth b$k failed" >&2; exit 1; }
	mkdir -p "$T/state$k"
	netns_on_exit "ip netns exec '$NS_RX' '$SLUICE' down --iface b$k --pin-dir '$SL_BPFFS/pin$k'"
	# --allow-empty: no snapshot yet, the rules come from etcd
	netns_bg "$NS_RX" "agent$k" "$SLUICE" agent --iface "b$k" \
		--state-dir "$T/state$k" --pin-dir "$SL_BPFFS/pin$k" \
		--allow-empty --etcd "$EP" --etcd-key "$KEY" \
		--metrics "127.0.0.1:$((9500 + k))"
	ports+=($((9500 + k)))
done

ip netns exec "$NS_RX" python3 - "$EP" "$KEY" "$PUTS" "$T/a.json" "$T/b.json" "${ports[@]}" <<'PY'
import base64, json, statistics, sys, time, urllib.request
ep, key, puts, files, ports = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:6], sys.argv[6:]
b64 = lambda b: base64.b64encode(b).decode()
def metrics(port):
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=1).read().decode()
    except OSError:
        return {}
    return dict(l.split()[:2] for l in text.splitlines()
                if l.startswith("sluice_config_source_"))
def revision(port):
    return int(float(metrics(port).get("sluice_config_source_revision", -1)))
def put(value):
    req = urllib.request.Request(ep + "/v3/kv/put",
        json.dumps({"key": b64(key.encode()), "value": b64(value)}).encode(),
        {"Content-Type": "application/json"})
    return int(json.load(urllib.request.urlopen(req))["header"]["revision"])
def wait_all(rev, t0, limit=10):
    done = set()
    while len(done) < len(ports):
        for p in ports:
            if p not in done and revision(p) >= rev:
                done.add(p)
        if time.monotonic() - t0 > limit:
            sys.exit("revision %d in force on %d of %d agents after %d s" % (rev, len(done), len(ports), limit))
        time.sleep(0.002)
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]
# the agents are up once the first value is in force everywhere
wait_all(put(open(files[0], "rb").read()), time.monotonic(), 30)
every, slowest = [], []
for i in range(puts):
    value = open(files[(i + 1) % 2], "rb").read()
    t0, w0 = time.monotonic(), time.time()
    rev = put(value)
    wait_all(rev, t0)
    # each agent's own clock of its apply (the same host's wall clock):
    # no polling delay in the figure
    ms = [(float(metrics(p)["sluice_config_source_last_change_timestamp_seconds"]) - w0) * 1000
          for p in ports]
    every += ms
    slowest.append(max(ms))
print("put -> in force, %d agents, %d puts: every agent p50 %.0f ms, p99 %.0f ms (max %.0f); "
      "the slowest agent of a put p50 %.0f ms, p99 %.0f ms" % (len(ports), puts,
      pct(every, 0.5), pct(every, 0.99), max(every), pct(slowest, 0.5), pct(slowest, 0.99)))
PY
