#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The conns grade (docs/rules.md "conns") on real connections, counted
# where the server has them (ss: its established sockets), not by sluice:
#   - 7000, count 20, refuse rst: 60 clients hold connections; the server
#     never has more than 20, the other 40 are refused by a RST at once;
#     their FINs give the places back and the next 20 get in;
#   - churn: 600 connections at 300/s, each held 0.1 s, then 200 closed
#     by RST: the server never above 20;
#   - clients that vanish without FIN (their FIN and RST dropped on the
#     way): they hold their places until the server times them out (its
#     FIN on egress closes them), and no longer;
#   - 7001, idle_timeout_s 2, refuse drop, a server that never times out:
#     a vanished client's connection is forgotten by the sweep;
#   - 7002, per_source 3 a source: each of two sources holds 3;
#   - 7003, a per-client layer (3 each) and a service layer (4 in all):
#     two clients get 4 between them, neither more than 3;
# stats, top, explain and metrics say how many each rule counts open.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "conns"
netns_setup conns 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "api", "match": {"proto": "tcp", "dport": 7000}, "grade": "conns", "count": 20},
 {"name": "quiet", "match": {"proto": "tcp", "dport": 7001}, "grade": "conns", "count": 5,
  "conns": {"idle_timeout_s": 2, "refuse": "drop"}},
 {"name": "each", "match": {"proto": "tcp", "dport": 7002}, "grade": "conns", "count": 3,
  "per_source": {"max_sources": 10}},
 {"name": "client", "match": {"proto": "tcp", "dport": 7003}, "grade": "conns", "count": 3,
  "per_source": {"max_sources": 10}},
 {"name": "service", "match": {"proto": "tcp", "dport": 7003}, "grade": "conns", "count": 4,
  "layer": 1}
]}
JSON
# a second client address, whose FINs and RSTs can be made to vanish
ip -n "$NS_TX" addr add 198.18.0.3/24 dev veth-tx || { echo "Bail out! address"; exit 1; }

PORT=9466
# XDP_TX (the RSTs) on a veth reaches its peer only when the peer runs NAPI
netns_bg "$NS_TX" xdppass "$GEN_BIN/xdppass" --dev veth-tx --duration 600
netns_wait_ready xdppass 5 || { echo "Bail out! xdppass"; exit 1; }
sluice_start agent --rules "$NETNS_TMP/rules.json" --metrics "127.0.0.1:$PORT" ||
	{ echo "Bail out! the agent did not start"; exit 1; }
# 7000 and 7002 time idle clients out after 3 s (as servers do); 7001 never
netns_bg "$NS_RX" srv python3 tests/lib/connhold.py serve 7000 7002 7003 --idle 3
netns_bg "$NS_RX" srv2 python3 tests/lib/connhold.py serve 7001
netns_wait_ready srv 5 && netns_wait_ready srv2 5 ||
	{ echo "Bail out! the servers did not start"; exit 1; }

done_wait() { local p=${NETNS_PID[$1]}; wait "$p"; unset "NETNS_PID[$1]"; }
# `sluice top` in tmux, captured while the rule is full (below)
TMUX_SOCK=sluice-conns-$$
tm() { tmux -L "$TMUX_SOCK" "$@"; }
if command -v tmux >/dev/null; then
	netns_on_exit "tmux -L '$TMUX_SOCK' kill-server 2>/dev/null"
	tm new-session -d -s top -x 150 -y 20 \
		"'$SLUICE' top --state-dir '$SL_STATE' --interval 0.5"
fi

# count PORT SECS NAME: the server's established sockets, sampled
count_bg() { netns_bg "$NS_RX" "$3" python3 tests/lib/connhold.py count "$1" "$2"; }
# clients NAME HOST PORT N RATE HOLD [opts]
clients() { local n=$1; shift; netns_bg "$NS_TX" "$n" python3 tests/lib/connhold.py open "$@"; }
res() { sluice_json "d['$2']" <"$NETNS_TMP/$1.out"; }
stat() { sluice_cli stats -j | sluice_json "[r for r in d['rules'] if r['name'] == '$1'][0]['$2']"; }
open_is() { [ "$(stat "$1" conns_open)" = "$2" ]; }

# 1. 60 clients at 200/s, each holding 3 s
count_bg 7000 4 cnt1
clients c1 198.18.0.2 7000 60 200 3
done_wait c1
done_wait cnt1
max1=$(res cnt1 max)
echo "# 7000: $(cat "$NETNS_TMP/c1.out"), server's most established: $max1"
check $([ "$max1" = 20 ]; echo $?) \
	"count 20: the server held at most 20 connections at once ($max1)"
check $([ "$(res c1 established)" = 20 ] && [ "$(res c1 refused)" = 40 ]; echo $?) \
	"20 clients got in and 40 were refused by a RST ($(res c1 established) and $(res c1 refused))"
blocked=$(stat api blocked_pkts)
check $(( blocked >= 40 ? 0 : 1 )) "the rule counts the refused SYNs ($blocked)"
check $(sl_until 2 open_is api 0; echo $?) \
	"their FINs gave the places back: stats say $(stat api conns_open) open"

# 2. churn: connections opened and closed fast, by FIN then by RST
count_bg 7000 5 cnt2
clients c2 198.18.0.2 7000 600 300 0.1
done_wait c2
clients c3 198.18.0.2 7000 200 300 0.1 --close rst
done_wait c3
done_wait cnt2
max2=$(res cnt2 max)
echo "# churn: FIN $(cat "$NETNS_TMP/c2.out"), RST $(cat "$NETNS_TMP/c3.out"); server's most: $max2"
check $(( max2 <= 20 && max2 > 0 ? 0 : 1 )) \
	"churn at 300/s, closed by FIN and by RST: the server never above 20 ($max2)"
check $(( $(res c2 established) + $(res c3 established) > 200 ? 0 : 1 )) \
	"churn: places came back as connections closed ($(( $(res c2 established) + $(res c3 established) )) of 800 got in)"
check $(sl_until 2 open_is api 0; echo $?) \
	"after the churn none is counted open ($(stat api conns_open))"

# 3. clients that vanish: their FIN and RST never arrive
ip netns exec "$NS_TX" nft -f - <<'NFT' || { echo "Bail out! nft"; exit 1; }
table inet vanish {
	chain out {
		type filter hook output priority 0;
		ip saddr 198.18.0.3 tcp flags & (fin | rst) != 0 drop
	}
}
NFT
count_bg 7000 6 cnt3
clients c4 198.18.0.2 7000 20 100 0.5 --src 198.18.0.3
done_wait c4
# the vanished hold every place until the server's 3 s idle timeout
sleep 0.5
clients c5 198.18.0.2 7000 10 50 0.1
done_wait c5
check $([ "$(res c4 established)" = 20 ] && [ "$(res c5 refused)" = 10 ]; echo $?) \
	"20 clients vanish without FIN: their places stay taken, 10 newcomers refused ($(res c5 refused))"
ex_syn=$(sluice_cli explain tcp 198.18.0.1 198.18.0.2 --dport 7000 --syn 2>&1)
ex_ack=$(sluice_cli explain tcp 198.18.0.1 198.18.0.2 --dport 7000 2>&1)
echo "$ex_syn" | sed 's/^/#   /'
check $(grep -q "count connections are open" <<<"$ex_syn" &&
	grep -q "^conns:   20 of 20 open" <<<"$ex_syn" &&
	grep -q "refuses only new connections" <<<"$ex_ack"; echo $?) \
	"explain: a SYN now would be refused (20 of 20 open), a segment of a connection would pass"
sluice_cli stats >"$NETNS_TMP/stats.txt"
check $(grep -Eq '^api +enforce +0 +20 conns ' "$NETNS_TMP/stats.txt" &&
	grep -q '^conns api: 20 of 20 open$' "$NETNS_TMP/stats.txt"; echo $?) \
	"stats: the limit in conns, and a line: conns api: 20 of 20 open"
show "$NETNS_TMP/stats.txt" 9
if command -v tmux >/dev/null; then
	sl_until 2 eval "tm capture-pane -p -t top | grep -Eq '^api +enforce +20/20 conns '"
	check $? "top: api's limit cell says 20/20 conns"
	tm capture-pane -p -t top | grep -E '^(api|quiet) ' | sed 's/^/#   /'
else
	skip "top: the limit cell" "no tmux"
fi
check $(sl_until 5 open_is api 0; echo $?) \
	"the server timed the vanished out: its FINs on egress gave the places back"
clients c6 198.18.0.2 7000 10 50 0.1
done_wait c6
done_wait cnt3
max3=$(res cnt3 max)
check $([ "$(res c6 established)" = 10 ] && (( max3 <= 20 )); echo $?) \
	"then newcomers get in ($(res c6 established) of 10), and the server never held more than 20 ($max3)"

# 4. a server that never times out: the rule's idle_timeout_s forgets
clients c7 198.18.0.2 7001 5 50 0.2 --src 198.18.0.3
done_wait c7
clients c8 198.18.0.2 7001 1 1 0.1
done_wait c8
check $([ "$(res c7 established)" = 5 ] && [ "$(res c8 timed_out)" = 1 ]; echo $?) \
	"7001: 5 vanished hold its count; a sixth SYN is dropped (the client times out)"
check $(sl_until 5 open_is quiet 0; echo $?) \
	"after idle_timeout_s 2 the sweep forgets them ($(stat quiet conns_open) open)"
clients c9 198.18.0.2 7001 5 50 0.1
done_wait c9
check $([ "$(res c9 established)" = 5 ]; echo $?) \
	"and 5 new connections get in ($(res c9 established))"

# 5. per_source: 3 a source
clients c10 198.18.0.2 7002 6 100 1.5
clients c11 198.18.0.2 7002 6 100 1.5 --src 198.18.0.3
sleep 0.5
open_each=$(stat each conns_open)
sources=$(stat each sources)
done_wait c10
done_wait c11
check $([ "$(res c10 established)" = 3 ] && [ "$(res c11 established)" = 3 ]; echo $?) \
	"per_source count 3: each source holds 3 ($(res c10 established) and $(res c11 established))"
check $([ "$open_each" = 6 ] && [ "$sources" = 2 ]; echo $?) \
	"stats: 6 open over 2 sources ($open_each, $sources)"

# 6. two conns layers: each client 3, the service 4
count_bg 7003 3 cnt4
clients c12 198.18.0.2 7003 5 100 1.5
clients c13 198.18.0.2 7003 5 100 1.5 --src 198.18.0.3
done_wait c12
done_wait c13
done_wait cnt4
got12=$(res c12 established) got13=$(res c13 established)
check $(( got12 <= 3 && got13 <= 3 && got12 + got13 == 4 &&
	  $(res cnt4 max) == 4 ? 0 : 1 )) \
	"layers: two clients held to 3 each and 4 together ($got12 + $got13; the server's most $(res cnt4 max))"
check $(sl_until 2 open_is service 0 && open_is client 0; echo $?) \
	"layers: their FINs gave both layers' places back"

ip netns exec "$NS_RX" curl -sS --max-time 5 -o "$NETNS_TMP/metrics" \
	"http://127.0.0.1:$PORT/metrics"
check $(grep -q '^sluice_rule_connections_open{rule="api"} 0$' "$NETNS_TMP/metrics" &&
	promtool check metrics <"$NETNS_TMP/metrics" >/dev/null 2>&1; echo $?) \
	"metrics: sluice_rule_connections_open per conns rule, and promtool accepts them"

# a rule that cannot be a conns rule is refused; the rules stay
cat >"$NETNS_TMP/bad.json" <<JSON
{"rules": [{"name": "bad", "match": {"proto": "udp", "dport": 7000}, "grade": "conns", "count": 20}]}
JSON
err=$(sluice_cli rule replace "$NETNS_TMP/bad.json" 2>&1)
rc=$?
check $([ $rc -ne 0 ] && grep -q "conns counts TCP connections" <<<"$err" &&
	[ "$(sluice_cli rule list -j | sluice_json 'len(d["rules"])')" = 5 ]; echo $?) \
	"a udp conns rule is refused by name ($err); the five rules stay"
echo "1..$n"
