#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The Grafana dashboard, deploy/grafana/sluice.json (docs/metrics.md):
#   - it is a dashboard: every panel has an id of its own and a place,
#     every target an expression, every variable it uses is defined;
#   - every PromQL expression (panel targets and the selectors of the
#     label_values() variables, Grafana's variables replaced by valid
#     values) passes `promtool check rules` as a recording rule;
#   - every metric name they use is documented in docs/metrics.md, and is
#     in the scrape of a running agent with a plain, a shadow, a
#     per_source, a breaker, a system and a cluster rule, serving tokens
#     itself (so the token server's families are in it too): a metric
#     renamed in the code or the docs breaks this test.
# DASHBOARD=FILE checks another file (to see this test fail).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

DASHBOARD=${DASHBOARD:-deploy/grafana/sluice.json}
PY="python3 tests/lib/dashboard.py"
command -v promtool >/dev/null ||
	{ skip "dashboard" "no promtool (Debian's prometheus package)"; echo "1..$n"; exit 0; }
skip_unless_root_and_xdp "dashboard"
netns_setup dashboard 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
PORT=9464
if [ -n "$VM" ]; then READY_S=120; MAX_TIME=20; else READY_S=10; MAX_TIME=2; fi

# ---- the queries, by promtool ----
count=$($PY rules "$DASHBOARD" "$T/rules.yml" 2>"$T/problems")
check $? "$DASHBOARD: $count queries; panels, targets and variables well formed"
show "$T/problems" 10
promtool check rules "$T/rules.yml" >"$T/promtool" 2>&1
rc=$?
check $((rc == 0 && count > 0 ? 0 : 1)) \
	"promtool check rules: all $count queries as recording rules: exit $rc"
[ $rc = 0 ] || show "$T/promtool" 10

# ---- the names, against the docs and a real scrape ----
$PY names "$DASHBOARD" >"$T/names" 2>/dev/null
$PY docs docs/metrics.md >"$T/documented"
undocumented=$(comm -23 "$T/names" "$T/documented" | tr '\n' ' ')
check $(($(wc -l <"$T/names") > 0 && ${#undocumented} == 0 ? 0 : 1)) \
	"every one of the $(wc -l <"$T/names") metric names is in docs/metrics.md${undocumented:+; not: $undocumented}"

cat >"$T/rules.json" <<'EOF'
{"rules": [
 {"name": "plain", "match": {"proto": "udp", "dport": 9000}, "grade": "pps",
  "count": 1000},
 {"name": "trial", "match": {"proto": "udp", "dport": 9001}, "grade": "pps",
  "count": 1000, "mode": "shadow"},
 {"name": "per-client", "match": {"proto": "tcp", "dport": 8443},
  "grade": "pps", "count": 500, "per_source": {"max_sources": 1000}},
 {"name": "api-breaker", "match": {"proto": "tcp", "dport": 8080},
  "grade": "cps", "count": 5000,
  "breaker": {"strategy": "error_ratio", "threshold": 0.5, "open_ms": 5000}},
 {"name": "guard", "match": {"proto": "tcp", "dport": 8081}, "grade": "cps",
  "count": 20000, "system": {"accept_queue": 256, "floor": 100}},
 {"name": "fleet", "match": {"proto": "udp", "dport": 9002}, "grade": "pps",
  "count": 2000, "cluster": {"namespace": "web", "flow_id": 1,
  "threshold_type": "global", "fallback": "share"}}
]}
EOF
sluice_bg agent --rules "$T/rules.json" --metrics 127.0.0.1:$PORT \
	--serve-tokens 127.0.0.1:7071 --node-id h1
sluice_wait_ready agent "$READY_S" ||
	{ echo "Bail out! the agent did not start"; show "$T/agent.err" 10; exit 1; }
# the cluster flow's families come with its first lease
for ((i = 0; i < 100; i++)); do
	ip netns exec "$NS_RX" curl -sS --max-time "$MAX_TIME" -o "$T/scrape" \
		"http://127.0.0.1:$PORT/metrics" &&
		grep -q '^sluice_cluster_flow_state{rule="fleet",state="cluster"} 1' \
			"$T/scrape" && break
	sleep 0.1
done
$PY scrape "$T/scrape" >"$T/scraped"
check $(($(wc -l <"$T/scraped") > 50 ? 0 : 1)) \
	"the agent's scrape: $(wc -l <"$T/scraped") sample names"
unscraped=$(comm -23 "$T/names" "$T/scraped" | tr '\n' ' ')
check $(($(wc -l <"$T/names") > 0 && ${#unscraped} == 0 ? 0 : 1)) \
	"every one of the $(wc -l <"$T/names") metric names is in the scrape${unscraped:+; not: $unscraped}"
echo "1..$n"
