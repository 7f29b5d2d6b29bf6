#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `sluice agent --metrics` and `sluice tokend --metrics` (docs/metrics.md),
# with light, counted traffic (3000 packets at 2000 pps per case):
#   - a bad --metrics value exits 2 naming the option, before anything is
#     attached; a taken address exits 1 and says so;
#   - an enforcing rule: sluice_rule_passed_packets_total equals what
#     rxcount counted behind it at tc ingress, and passed + dropped what
#     pktsend sent; a shadow rule reports would-drops and no drops;
#   - `promtool check metrics` has nothing to say about a scrape, with 2
#     rules, with a cluster flow and 4096 rules, and about tokend's;
#   - / is a landing page (HTML) that links to /metrics, for the agent and
#     tokend; another path is 404, another method 405 (Allow: GET, HEAD),
#     HEAD has no body;
#   - the process_* metrics of both are plausible: started during this
#     test, fds open and fewer than the limit, memory resident;
#   - a scrape answers (curl --max-time) while a control-socket client and
#     an HTTP client stall half-way through their requests, and while the
#     cluster thread syncs;
#   - a cluster flow: in cluster state, the threshold's source is its lease
#     and the session is up; the token server killed, it reads fallback
#     and the session down; tokend counts the flow's holder and its syncs;
#     with --serve-tokens the embedded server's metrics are in the agent's
#     scrape.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "metrics"
command -v curl >/dev/null || { skip "metrics" "no curl"; echo "1..$n"; exit 0; }
netns_setup metrics 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
PORT=9464
URL=http://127.0.0.1:$PORT/metrics
TD_PORT=7070
TD_URL=http://127.0.0.1:9465/metrics
SENT=3000
if [ -n "$VM" ]; then READY_S=120; MAX_TIME=20; else READY_S=10; MAX_TIME=2; fi
HAVE_PROMTOOL=$(command -v promtool >/dev/null && echo 1)
T_START=$(date +%s)

# scrape FILE [URL]: the metrics into FILE; curl's status
scrape()
{
	ip netns exec "$NS_RX" curl -sS --max-time "$MAX_TIME" \
		-o "$1" "${2:-$URL}"
}

# metric FILE SAMPLE: the value of SAMPLE (name{labels} as written), or
# -1
metric()
{
	awk -v k="$2" '$1 == k { v = $2 } END { print (v == "" ? -1 : v) }' "$1"
}

# promtool_check FILE WHAT: `promtool check metrics` exits 0, says nothing
promtool_check()
{
	if [ -z "$HAVE_PROMTOOL" ]; then
		skip "promtool check metrics: $2" "no promtool"
		return
	fi
	promtool check metrics <"$1" >"$T/lint" 2>&1
	local rc=$? said

	said=$(wc -l <"$T/lint")
	check $((rc == 0 && said == 0 ? 0 : 1)) \
		"promtool check metrics: $2: exit $rc, $said lines said"
	show "$T/lint" 5
}

# process_check FILE WHAT: the process_* samples of a scrape are
# plausible for a process that this test started
process_check()
{
	local said

	said=$(python3 - "$1" "$T_START" "$(date +%s)" <<'PY'
import sys
m = {}
for line in open(sys.argv[1]):
    if not line.startswith("#") and line.strip():
        k, v = line.split()[:2]
        m[k] = float(v)
t0, now = int(sys.argv[2]), int(sys.argv[3])
g = lambda k: m.get(k, -1)
bad = []
if not t0 - 1 <= g("process_start_time_seconds") <= now + 1:
    bad.append("start time %s not in [%d, %d]"
               % (g("process_start_time_seconds"), t0 - 1, now + 1))
if not 0 < g("process_open_fds") < g("process_max_fds"):
    bad.append("open fds %s, max %s" % (g("process_open_fds"),
                                        g("process_max_fds")))
if not 0 < g("process_resident_memory_bytes") <= g("process_virtual_memory_bytes"):
    bad.append("rss %s, vsz %s" % (g("process_resident_memory_bytes"),
                                   g("process_virtual_memory_bytes")))
if not 0 <= g("process_cpu_seconds_total") < now - t0 + 60:
    bad.append("cpu %s s" % g("process_cpu_seconds_total"))
print("; ".join(bad) if bad else
      "started %.0f s into the test, %d fds of %d, rss %.1f MB, cpu %.2f s"
      % (g("process_start_time_seconds") - t0, g("process_open_fds"),
         g("process_max_fds"), g("process_resident_memory_bytes") / 2**20,
         g("process_cpu_seconds_total")))
sys.exit(1 if bad else 0)
PY
)
	check $? "$2: process metrics: $said"
}

# landing_check URL WHAT: / is HTML that links to /metrics; /nope is 404
landing_check()
{
	local code type

	read -r code type <<<"$(ip netns exec "$NS_RX" curl -s -o "$T/body" \
		-w '%{http_code} %{content_type}' --max-time "$MAX_TIME" "$1/")"
	grep -q '<a href="/metrics">' "$T/body"
	check $((code == 200 && $? == 0 ? 0 : 1)) \
		"$2: GET /: $code (want 200), $type, links to /metrics"
	code=$(ip netns exec "$NS_RX" curl -s -o "$T/body" -w '%{http_code}' \
		--max-time "$MAX_TIME" "$1/nope")
	check $((code == 404 ? 0 : 1)) "$2: GET /nope: $code (want 404): $(cat "$T/body")"
}

xdp_attached() # an XDP program on veth-rx
{
	ip -n "$NS_RX" -d link show dev veth-rx | grep -q 'prog/xdp'
}

cat >"$T/rules.json" <<'EOF'
{"rules": [
 {"name": "enf", "match": {"proto": "udp", "dport": 9000}, "grade": "pps",
  "count": 1000},
 {"name": "shadow", "match": {"proto": "udp", "dport": 9001}, "grade": "pps",
  "count": 1000, "mode": "shadow"}
]}
EOF

# ---- bad values, before anything is attached ----
for v in 127.0.0.1:99999 127.0.0.1:0 localhost:$PORT $PORT "[::1]"; do
	sluice_agent_fg "$T/bad" --rules "$T/rules.json" --metrics "$v"
	rc=$?
	grep -qF -- "--metrics: '$v' is not ADDR:PORT" "$T/bad"
	said=$?
	xdp_attached
	check $((rc == 2 && said == 0 && $? != 0 ? 0 : 1)) \
		"--metrics $v: exit $rc (want 2), the option named, nothing attached"
done
show "$T/bad" 1

sluice_bg agent --rules "$T/rules.json" --metrics 127.0.0.1:$PORT
sluice_wait_ready agent "$READY_S" ||
	{ echo "Bail out! the agent did not start"; show "$T/agent.err" 10; exit 1; }

# a second agent (its own state and pins) on the same address
mkdir -p "$T/state2"
ip netns exec "$NS_RX" timeout -s KILL 10 "$SLUICE" agent --iface veth-rx \
	--state-dir "$T/state2" --pin-dir "$SL_BPFFS/other" \
	--rules "$T/rules.json" --metrics 127.0.0.1:$PORT >"$T/inuse" 2>&1
rc=$?
grep -qF -- "--metrics 127.0.0.1:$PORT: Address already in use" "$T/inuse"
check $((rc == 1 && $? == 0 ? 0 : 1)) \
	"--metrics on a taken address: exit $rc (want 1), it says so"
show "$T/inuse" 2
check $([ -e "$SL_BPFFS/other" ] && echo 1 || echo 0) \
	"... before it loaded anything (no pins)"

# ---- counted traffic against an enforcing and a shadow rule ----
# send_counted DPORT: SENT packets, rxcount behind sluice; "sent rx"
send_counted()
{
	netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
		--dport "$1" --drop --duration 20
	netns_wait_ready rx 5 || { echo "0 0"; return; }
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --dport "$1" --count "$SENT" --rate 2000 \
		>"$T/gen.out"
	sleep 0.5
	netns_stop rx
	python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["sent"], json.load(open(sys.argv[2]))["packets"])' \
		"$T/gen.out" "$NETNS_TMP/rx.out"
}

read -r sent rx <<<"$(send_counted 9000)"
scrape "$T/m1"
check $? "scrape after the enforcing case"
passed=$(metric "$T/m1" 'sluice_rule_passed_packets_total{rule="enf"}')
dropped=$(metric "$T/m1" 'sluice_rule_dropped_packets_total{rule="enf"}')
would=$(metric "$T/m1" 'sluice_rule_would_drop_packets_total{rule="enf"}')
echo "# enforcing: sent $sent, rxcount $rx, passed $passed, dropped $dropped"
check $((sent == SENT && passed == rx ? 0 : 1)) \
	"enforcing: passed_packets_total $passed = rxcount's $rx"
check $((passed + dropped == sent && dropped > 0 && would == 0 ? 0 : 1)) \
	"enforcing: passed $passed + dropped $dropped = sent $sent, would_drop $would = 0"

read -r sent rx <<<"$(send_counted 9001)"
scrape "$T/m2"
passed=$(metric "$T/m2" 'sluice_rule_passed_packets_total{rule="shadow"}')
dropped=$(metric "$T/m2" 'sluice_rule_dropped_packets_total{rule="shadow"}')
would=$(metric "$T/m2" 'sluice_rule_would_drop_packets_total{rule="shadow"}')
echo "# shadow: sent $sent, rxcount $rx, passed $passed, would_drop $would"
check $((sent == SENT && rx == sent && passed + would == sent ? 0 : 1)) \
	"shadow: rxcount $rx = sent $sent = passed $passed + would_drop $would"
check $((would > 0 && dropped == 0 ? 0 : 1)) \
	"shadow: would_drop $would > 0, dropped $dropped = 0"
bytes=$(metric "$T/m2" 'sluice_rule_would_drop_bytes_total{rule="shadow"}')
check $((bytes == would * 64 ? 0 : 1)) \
	"shadow: would_drop_bytes $bytes = $would x 64-byte frames"
check $([ "$(metric "$T/m2" sluice_ready)" = 1 ] &&
	[ "$(metric "$T/m2" sluice_rules_in_force)" = 2 ] &&
	[ "$(metric "$T/m2" 'sluice_interface_attached{interface="veth-rx",mode="native"}')" = 1 ] &&
	echo 0 || echo 1) "ready 1, 2 rules in force, veth-rx attached (native)"
promtool_check "$T/m2" "2 rules"

# ---- what else the server answers ----
process_check "$T/m2" "agent"
landing_check "http://127.0.0.1:$PORT" "agent"
code=$(ip netns exec "$NS_RX" curl -s -D "$T/hdr" -o "$T/body" \
	-w '%{http_code}' --max-time "$MAX_TIME" -X POST -d x "$URL")
grep -qi '^Allow: GET, HEAD' "$T/hdr"
check $((code == 405 && $? == 0 ? 0 : 1)) \
	"POST /metrics: $code (want 405), Allow: GET, HEAD: $(cat "$T/body")"
ip netns exec "$NS_RX" curl -s -I -o "$T/hdr" --max-time "$MAX_TIME" "$URL"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$T/hdr"
check $? "HEAD /metrics: the exposition format's content type"

# ---- stalled clients: half a control request, half an HTTP request ----
ip netns exec "$NS_RX" python3 -u - "$SL_STATE/sluice.sock" "$PORT" \
	>"$T/stall.out" 2>&1 <<'PY' &
import socket, sys, time
ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ctl.connect(sys.argv[1])
ctl.send(b'{"cmd":"sta')
http = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
http.send(b"GET /metr")
print("ready", flush=True)
time.sleep(4)
PY
STALL=$!
netns_on_exit "kill $STALL 2>/dev/null"
for ((i = 0; i < 100; i++)); do
	grep -q ready "$T/stall.out" && break
	sleep 0.05
done
t0=$EPOCHREALTIME
scrape "$T/m3"
rc=$?
ms=$(((${EPOCHREALTIME//[.,]/} - ${t0//[.,]/}) / 1000))
check $((rc == 0 && $(metric "$T/m3" sluice_ready) == 1 ? 0 : 1)) \
	"a scrape while two clients stall: curl $rc, $ms ms (--max-time $MAX_TIME s)"
wait $STALL 2>/dev/null

# ---- a cluster flow: standalone tokend with its own metrics ----
cat >"$T/cluster.json" <<'EOF'
{"rules": [
 {"name": "enf", "match": {"proto": "udp", "dport": 9000}, "grade": "pps",
  "count": 1000},
 {"name": "fleet", "match": {"proto": "udp", "dport": 9002}, "grade": "pps",
  "count": 2000, "cluster": {"namespace": "web", "flow_id": 1,
  "threshold_type": "global", "fallback": "share"}}
]}
EOF
netns_bg "$NS_RX" tokend "$SLUICE" tokend --listen 127.0.0.1:$TD_PORT \
	--rules "$T/cluster.json" --state-dir "$T/tokend" \
	--metrics 127.0.0.1:9465
netns_stop agent
sluice_bg agent --rules "$T/cluster.json" --metrics 127.0.0.1:$PORT \
	--token-server 127.0.0.1:$TD_PORT --node-id h1
sluice_wait_ready agent "$READY_S" ||
	{ echo "Bail out! the cluster agent did not start"; show "$T/agent.err" 10; exit 1; }

# wait_flow STATE SECS: scrape until fleet's state is STATE; every scrape
# must answer within --max-time while the cluster thread syncs
wait_flow()
{
	local i

	for ((i = 0; i < $2 * 10; i++)); do
		scrape "$T/mc" || return 2
		[ "$(metric "$T/mc" "sluice_cluster_flow_state{rule=\"fleet\",state=\"$1\"}")" = 1 ] &&
			return 0
		sleep 0.1
	done
	return 1
}
wait_flow cluster 10
check $? "fleet reaches cluster state (every scrape answered meanwhile)"
check $([ "$(metric "$T/mc" 'sluice_rule_threshold_source{rule="fleet",source="lease"}')" = 1 ] &&
	[ "$(metric "$T/mc" 'sluice_rule_threshold_source{rule="enf",source="static"}')" = 1 ] &&
	[ "$(metric "$T/mc" 'sluice_cluster_session_up{namespace="web"}')" = 1 ] &&
	[ "$(metric "$T/mc" "sluice_cluster_session_server{namespace=\"web\",server=\"127.0.0.1:$TD_PORT\"}")" = 1 ] &&
	echo 0 || echo 1) \
	"in cluster state: fleet's threshold from its lease, enf's static, the session up"
syncs=$(metric "$T/mc" 'sluice_cluster_sync_seconds_count{namespace="web"}')
left=$(metric "$T/mc" 'sluice_cluster_lease_remaining_seconds{rule="fleet"}')
check $(python3 -c "print(0 if $syncs >= 3 and 0 < $left <= 1 else 1)") \
	"sync round trips observed ($syncs), lease remaining $left s (TTL 1 s)"
promtool_check "$T/mc" "a cluster flow"
scrape "$T/td" "$TD_URL"
check $? "tokend's scrape"
check $([ "$(metric "$T/td" 'sluice_tokend_flow_holders{namespace="web",flow_id="1",rule="fleet"}')" = 1 ] &&
	[ "$(metric "$T/td" 'sluice_tokend_flow_threshold{namespace="web",flow_id="1",rule="fleet"}')" = 2000 ] &&
	[ "$(metric "$T/td" sluice_tokend_connections)" = 1 ] &&
	[ "$(metric "$T/td" 'sluice_tokend_frames_received_total{type="sync"}')" -ge 3 ] &&
	echo 0 || echo 1) \
	"tokend: fleet has 1 holder and threshold 2000, 1 connection, its syncs counted"
promtool_check "$T/td" "tokend"
process_check "$T/td" "tokend"
landing_check "http://127.0.0.1:9465" "tokend"

kill -KILL "${NETNS_PID[tokend]}"
wait "${NETNS_PID[tokend]}" 2>/dev/null
unset "NETNS_PID[tokend]"
wait_flow fallback 5
check $? "the token server killed: fleet in fallback within 5 s"
check $([ "$(metric "$T/mc" 'sluice_rule_threshold_source{rule="fleet",source="fallback"}')" = 1 ] &&
	[ "$(metric "$T/mc" 'sluice_cluster_session_up{namespace="web"}')" = 0 ] &&
	echo 0 || echo 1) "... its threshold from the fallback, the session down"

# the embedded token server's families in the agent's own scrape
netns_stop agent
sluice_bg agent --rules "$T/cluster.json" --metrics 127.0.0.1:$PORT \
	--serve-tokens 127.0.0.1:$((TD_PORT + 1)) --node-id h1
sluice_wait_ready agent "$READY_S" ||
	{ echo "Bail out! the embedded server's agent did not start"; show "$T/agent.err" 10; exit 1; }
wait_flow cluster 10
check $([ $? = 0 ] &&
	[ "$(metric "$T/mc" 'sluice_tokend_flow_holders{namespace="web",flow_id="1",rule="fleet"}')" = 1 ] &&
	[ "$(grep -c '^sluice_build_info' "$T/mc")" = 1 ] &&
	echo 0 || echo 1) \
	"--serve-tokens: in cluster state, the embedded server's holder in the same scrape"
promtool_check "$T/mc" "the agent with an embedded token server"

# ---- 4096 rules ----
python3 - "$T/many.json" <<'PY'
import json, sys
rules = [{"name": f"r{i}", "match": {"proto": "udp", "dport": 20000 + i},
          "grade": "pps", "count": 100 + i} for i in range(4096)]
json.dump({"rules": rules}, open(sys.argv[1], "w"))
PY
version=$(metric "$T/mc" sluice_snapshot_version)
sluice_cli rule replace "$T/many.json" >/dev/null
check $? "rule replace with 4096 rules"
times=()
for ((i = 0; i < 5; i++)); do
	times+=("$(ip netns exec "$NS_RX" curl -sS -o "$T/m4" \
		-w '%{time_total}' --max-time "$MAX_TIME" "$URL")")
done
echo "# scrape of 4096 rules ($(wc -c <"$T/m4") bytes): ${times[*]} s"
check $([ "$(metric "$T/m4" sluice_rules_in_force)" = 4096 ] &&
	[ "$(metric "$T/m4" sluice_snapshot_rules)" = 4096 ] &&
	[ "$(metric "$T/m4" sluice_snapshot_version)" = $((version + 1)) ] &&
	[ "$(metric "$T/m4" 'sluice_rule_threshold{rule="r4095"}')" = 4195 ] &&
	echo 0 || echo 1) "4096 rules in force, snapshot version $((version + 1)), r4095's threshold"
promtool_check "$T/m4" "4096 rules"

echo "1..$n"
