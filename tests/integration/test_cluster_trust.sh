#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# What an agent believes of a token server (docs/cluster.md, "What the
# agent believes"): a real tokend whose rules or TTL do not match the
# agent's. A grant above the rule's count (avg_local), above this node's
# quota (manual), or a lease above --max-lease-ttl-ms is refused: the
# session is closed with the reason in status, the log and
# sluice_cluster_grants_refused_total, and the flow stays in fallback
# (its threshold the fallback, never the grant). The same tokend with
# matching rules, or the agent allowing the TTL, reaches cluster state.
# Then a rotation of the namespace's secret: old and new held on one side,
# SIGHUP reloads on both without dropping the session, a damaged file on
# SIGHUP changes nothing, and once the old secret is gone it is refused.
# Then an attacker (tests/lib/mitm.py): a server on the address without
# the secret, a bit flipped in a GRANTS frame on the path, a GRANTS frame
# replayed; each refused by reason, nothing of it applied. Then a term
# older than one seen: an elected replica's term, then a server of term 0.
# Then a member of the namespace that lies (tests/lib/rogue_tokend.c):
# more grants than flows asked, frames stripped of their seal, a REDIRECT
# and an AUTH_OK of term 2^63. Last, a token server's name with a
# resolver that never answers (the CLI still served), and no --secrets
# with a server off loopback (refused at the start).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh
source tests/lib/etcd.sh

skip_unless_root_and_xdp "cluster trust"
command -v curl >/dev/null || { skip "cluster trust" "no curl"; echo "1..$n"; exit 0; }
netns_setup trust 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
TD=127.0.0.1:7270
METRICS=127.0.0.1:9470
if [ -n "$VM" ]; then WAIT_S=60; else WAIT_S=10; fi

# rules COUNT QUOTA: one avg_local flow (count COUNT) and one manual flow
# (h1's quota QUOTA of 4000)
rules()
{
	cat <<EOF
{"rules": [
 {"name": "local", "match": {"proto": "udp", "dport": 9000}, "grade": "pps",
  "count": $1, "cluster": {"namespace": "web", "flow_id": 1,
  "threshold_type": "avg_local", "fallback": {"fixed": 100}}},
 {"name": "quota", "match": {"proto": "udp", "dport": 9001}, "grade": "pps",
  "count": 4000, "cluster": {"namespace": "web", "flow_id": 2,
  "threshold_type": "manual", "quotas": {"h1": $2, "h2": 500},
  "fallback": {"fixed": 100}}}
]}
EOF
}
rules 1000 1000 >"$T/agent.json"

tokend() # RULES [OPTIONS]: a token server, restarted
{
	netns_stop tokend >/dev/null 2>&1
	rm -rf "$T/td"
	mkdir -p "$T/td"
	netns_bg "$NS_RX" tokend "$SLUICE" tokend --listen "${TD_LISTEN:-$TD}" \
		--rules "$1" --state-dir "$T/td" "${@:2}"
}

agent() # [OPTIONS]: the agent, restarted; the run ends if it is not ready
{
	netns_stop agent >/dev/null 2>&1
	sluice_bg agent --rules "$T/agent.json" --token-server "$TD" \
		--node-id h1 --metrics "$METRICS" "$@"
	sluice_wait_ready agent "$WAIT_S" && return
	echo "Bail out! the agent did not start"
	show "$T/agent.err" 10
	exit 1
}

flow() # RULE FIELD
{
	sluice_cli status -j 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
for f in d["cluster"]["flows"]:
    if f["name"] == sys.argv[1]:
        print(f[sys.argv[2]])' "$1" "$2"
}

last_error()
{
	sluice_cli status -j | sluice_json 'd["cluster"]["sessions"][0]["last_error"]'
}

wait_state() # RULE STATE SECS
{
	local i

	for ((i = 0; i < $3 * 10; i++)); do
		[ "$(flow "$1" state)" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

refused() # REASON: the counter's value
{
	ip netns exec "$NS_RX" curl -sS --max-time 5 "http://$METRICS/metrics" |
		awk -v k="sluice_cluster_grants_refused_total{namespace=\"web\",reason=\"$1\"}" \
			'$1 == k { v = $2 } END { print v == "" ? -1 : v }'
}

# ---- a bad value of the option ----
sluice_agent_fg "$T/bad" --rules "$T/agent.json" --token-server "$TD" \
	--max-lease-ttl-ms 0
rc=$?
grep -q -- '--max-lease-ttl-ms' "$T/bad"
check $((rc == 2 && $? == 0 ? 0 : 1)) "--max-lease-ttl-ms 0: exit $rc (want 2), the option named"

# ---- matching rules: believed ----
tokend "$T/agent.json"
agent
wait_state local cluster "$WAIT_S" && wait_state quota cluster "$WAIT_S"
check $? "matching rules: both flows in cluster state ($(flow local limit)/$(flow quota limit))"
check $([ "$(flow local limit)" = 1000 ] && [ "$(flow quota limit)" = 1000 ] &&
	[ "$(refused over_count)" = 0 ] && [ "$(refused ttl)" = 0 ] && echo 0 || echo 1) \
	"matching rules: grants 1000 and 1000, nothing refused"

# ---- a server with a larger count: refused ----
rules 5000 1000 >"$T/server.json"
tokend "$T/server.json"
sleep 1.5
err=$(last_error)
echo "# server count 5000 against the agent's 1000: local $(flow local state) at $(flow local limit), last error: $err"
check $([ "$(flow local state)" = fallback ] && [ "$(flow local limit)" = 100 ] &&
	grep -qF "refused: local: a grant of 5000, above the rule's count 1000" <<<"$err" &&
	echo 0 || echo 1) \
	"grant over count: refused, the flow in fallback at 100, the reason in status"
n_over=$(refused over_count)
check $([ "$n_over" -ge 1 ] && echo 0 || echo 1) "... counted: grants_refused_total{reason=\"over_count\"} $n_over"
grep -qF "refused: local: a grant of 5000, above the rule's count 1000" "$T/agent.err"
check $? "... and logged"
sleep 1
check $([ "$(flow local state)" = fallback ] && [ "$(refused over_count)" -gt "$n_over" ] &&
	echo 0 || echo 1) "... still refused on every retry ($(refused over_count))"

# ---- a larger quota for this node: refused ----
rules 1000 3000 >"$T/server.json"
tokend "$T/server.json"
sleep 1.5
err=$(last_error)
check $([ "$(flow quota state)" = fallback ] &&
	grep -qF "quota: a grant of 3000, above the rule's quota for this node 1000" <<<"$err" &&
	echo 0 || echo 1) "grant over this node's quota: refused ($err)"

# ---- a lease longer than the agent believes ----
tokend "$T/agent.json" --lease-ttl-ms 60000
sleep 1.5
err=$(last_error)
check $([ "$(flow local state)" = fallback ] &&
	grep -qF "a lease of 60000 ms, above --max-lease-ttl-ms 10000" <<<"$err" &&
	[ "$(refused ttl)" -ge 1 ] && echo 0 || echo 1) \
	"TTL 60 s against --max-lease-ttl-ms 10000: refused, counted ($(refused ttl)): $err"
agent --max-lease-ttl-ms 60000
wait_state local cluster "$WAIT_S"
check $? "--max-lease-ttl-ms 60000: the same server is believed (local $(flow local state))"

# ---- a rotation of the namespace's secret (docs/cluster.md) ----
OLD=0123456789abcdef-old-0123456789
NEW=fedcba9876543210-new-fedcba9876
secrets() # FILE LINES...: a secrets file of those lines, mode 0600
{
	local f=$1

	shift
	printf '%s\n' "$@" >"$f.tmp" && chmod 0600 "$f.tmp" && mv "$f.tmp" "$f"
}
secrets "$T/td.sec" "web $OLD"
secrets "$T/ag.sec" "web $OLD" "web $NEW"
tokend "$T/agent.json" --secrets "$T/td.sec"
agent --secrets "$T/ag.sec"
wait_state local cluster "$WAIT_S"
check $? "rotation: the agent holds old and new, the server the old: cluster state (the newer refused, then the old)"
sessions() { grep -c 'cluster: namespace web: token server' "$T/agent.err"; }
s0=$(sessions)

# the server learns the new secret: SIGHUP, the session stays
secrets "$T/td.sec" "web $OLD" "web $NEW"
kill -HUP "${NETNS_PID[tokend]}"
sleep 0.5
grep -q 'tokend: SIGHUP: secrets reloaded from .*: 1 namespaces' "$T/tokend.err"
check $? "rotation: tokend reloads on SIGHUP"
# the agent keeps only the new one
secrets "$T/ag.sec" "web $NEW"
kill -HUP "${NETNS_PID[agent]}"
sleep 0.5
grep -q 'info: secrets reloaded from .*: 1 namespaces' "$T/agent.err"
check $? "rotation: the agent reloads on SIGHUP"
check $([ "$(sessions)" = "$s0" ] && [ "$(flow local state)" = cluster ] && echo 0 || echo 1) \
	"rotation: both reloads kept the session up ($(sessions) sessions, $s0 before)"

# a damaged file on SIGHUP changes nothing
chmod 0644 "$T/ag.sec"
kill -HUP "${NETNS_PID[agent]}"
sleep 0.5
grep -q 'SIGHUP: secrets not reloaded, those in use stay: .*mode 0644' "$T/agent.err" &&
	[ "$(flow local state)" = cluster ]
check $? "rotation: a file of mode 0644 on SIGHUP is refused, the secrets in use stay"
sluice_cli secrets reload >"$T/reload.out" 2>&1
rc=$?
grep -q 'secrets not reloaded, those in use stay: .*mode 0644' "$T/reload.out"
check $((rc == 1 && $? == 0 ? 0 : 1)) "rotation: \`sluice secrets reload\` of that file: exit $rc (want 1), the reason"
show "$T/reload.out" 1
chmod 0600 "$T/ag.sec"
out=$(sluice_cli secrets reload 2>&1)
check $([ $? = 0 ] && [ "$out" = "secrets reloaded: 1 namespaces" ] &&
	[ "$(sessions)" = "$s0" ] && echo 0 || echo 1) \
	"rotation: \`sluice secrets reload\`: $out, the session kept"

# the old secret removed from the server: a new session with the new one
# is believed, an agent that has only the old one is refused
secrets "$T/td.sec" "web $NEW"
kill -HUP "${NETNS_PID[tokend]}"
sleep 0.5
tokend "$T/agent.json" --secrets "$T/td.sec"
wait_state local cluster "$WAIT_S"
check $? "rotation done: a new session with the new secret reaches cluster state"
secrets "$T/ag.sec" "web $OLD"
agent --secrets "$T/ag.sec"
sleep 1.5
check $([ "$(flow local state)" = fallback ] &&
	grep -q 'authentication failed' <<<"$(last_error)" && echo 0 || echo 1) \
	"rotation done: an agent with the old secret only is refused ($(last_error))"

# ---- an attacker (docs/protocol.md, "Sealed frames") ----
TD_UP=127.0.0.1:7271
attacker() # MODE [N]: the attacker on the token server's address
{
	netns_stop mitm >/dev/null 2>&1
	netns_bg "$NS_RX" mitm python3 tests/lib/mitm.py "$1" "$TD" "$TD_UP" \
		${2:+"$2"}
	netns_wait_ready mitm 5
}
limits_seen() # SECS: every threshold the flow "local" had, sampled
{
	local i

	for ((i = 0; i < $1 * 10; i++)); do
		flow local limit
		sleep 0.1
	done | sort -u | tr '\n' ' '
}

# a server on the address that does not hold the secret
netns_stop tokend >/dev/null 2>&1
secrets "$T/ag.sec" "web $NEW"
attacker impostor || { echo "Bail out! the impostor did not start"; exit 1; }
agent --secrets "$T/ag.sec"
seen=$(limits_seen 2)
n_imp=$(refused server_auth)
check $([ "$seen" = "100 " ] && [ "$(flow local state)" = fallback ] &&
	[ "$n_imp" -ge 1 ] && echo 0 || echo 1) \
	"impostor: refused ($n_imp times, server_auth), the flow kept its fallback (thresholds seen: $seen)"
grep -qF 'does not hold the namespace secret' <<<"$(last_error)" &&
	grep -qF 'does not hold the namespace secret' "$T/agent.err" &&
	! grep -q 'GRANTS sent' "$T/mitm.err"
check $? "impostor: the reason in status and the log, no SYNC ever sent to it"

# on the path: one bit of the fifth GRANTS flipped (the flow is in cluster
# state by then), on every connection
TD_LISTEN=$TD_UP tokend "$T/agent.json" --secrets "$T/td.sec"
attacker tamper 5 || { echo "Bail out! the relay did not start"; exit 1; }
agent --secrets "$T/ag.sec"
seen=$(limits_seen 3)
n_mac=$(refused mac)
check $([ "$n_mac" -ge 1 ] && grep -q 'one bit flipped' "$T/mitm.err" &&
	grep -qw 1000 <<<"$seen" && ! grep -qw 1001 <<<"$seen" && echo 0 || echo 1) \
	"tampered GRANTS (1000 -> 1001): refused ($n_mac times, mac), never in force (thresholds seen: $seen)"
grep -qF 'a frame with a wrong MAC (tampered)' "$T/agent.err"
check $? "... and logged"

# on the path: the first GRANTS sent again as the third
attacker replay 3 || { echo "Bail out! the relay did not start"; exit 1; }
agent --secrets "$T/ag.sec"
wait_state local cluster "$WAIT_S"
sleep 1.5
n_seq=$(refused sequence)
check $([ "$n_seq" -ge 1 ] && grep -q 'replay: GRANTS 1 sent again' "$T/mitm.err" &&
	grep -qF 'a frame out of sequence (replayed or reordered)' "$T/agent.err" &&
	echo 0 || echo 1) "replayed GRANTS: refused ($n_seq times, sequence) and logged"

# ---- a term older than one seen (docs/cluster.md, "Replicas") ----
netns_stop mitm >/dev/null 2>&1
netns_stop tokend >/dev/null 2>&1
ETCD_EP=http://127.0.0.1:2379
etcd_start || { echo "Bail out! etcd did not start"; exit 1; }
mkdir -p "$T/rep" "$T/old"
netns_bg "$NS_RX" replica "$SLUICE" tokend --listen "$TD" \
	--rules "$T/agent.json" --state-dir "$T/rep" --secrets "$T/td.sec" \
	--etcd "$ETCD_EP" --election /sluice/trust --advertise "$TD"
agent --secrets "$T/ag.sec" --token-server "$TD,$TD_UP"
wait_state local cluster "$WAIT_S"
term=$(sluice_cli status -j | sluice_json 'd["cluster"]["sessions"][0]["term"]')
check $([ $? = 0 ] && [ "${term:-0}" -gt 0 ]; echo $?) \
	"an elected replica: cluster state at term $term"
# the replica gone, the next server is one without an election: term 0
netns_bg "$NS_RX" old "$SLUICE" tokend --listen "$TD_UP" \
	--rules "$T/agent.json" --state-dir "$T/old" --secrets "$T/td.sec"
netns_stop replica >/dev/null 2>&1
sleep 2.5
n_term=$(refused term)
check $([ "$n_term" -ge 1 ] && [ "$(flow local state)" = fallback ] &&
	grep -qF "an answer of term 0, older than term $term seen" "$T/agent.err" &&
	echo 0 || echo 1) \
	"a server of term 0 after term $term: refused ($n_term times, term), the flow in fallback"
netns_stop old >/dev/null 2>&1
etcd_kill

# ---- one agent in two namespaces, under traffic ----
# alpha and beta each have a flow 1 (counts 900 and 1000) on their own
# port: each session's GRANTS apply to its own flows, whichever session
# syncs in the same pass as the other
cat >"$T/two.json" <<EOF
{"rules": [
 {"name": "a", "match": {"proto": "udp", "dport": 9000}, "grade": "pps",
  "count": 900, "cluster": {"namespace": "alpha", "flow_id": 1,
  "threshold_type": "global", "fallback": {"fixed": 100}}},
 {"name": "b", "match": {"proto": "udp", "dport": 9001}, "grade": "pps",
  "count": 1000, "cluster": {"namespace": "beta", "flow_id": 1,
  "threshold_type": "global", "fallback": {"fixed": 100}}}
]}
EOF
secrets "$T/two.sec" "alpha $OLD" "beta $NEW"
tokend "$T/two.json" --secrets "$T/two.sec"
netns_stop agent >/dev/null 2>&1
sluice_bg agent --rules "$T/two.json" --token-server "$TD" --node-id h1 \
	--secrets "$T/two.sec" --metrics "$METRICS"
sluice_wait_ready agent "$WAIT_S" ||
	{ echo "Bail out! the agent did not restart"; show "$T/agent.err" 10; exit 1; }
netns_bg "$NS_RX" rxb "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
	--dport 9001 --duration 9
netns_wait_ready rxb 5 || { echo "Bail out! rxcount did not start"; exit 1; }
gens=()
for p in 9000 9001; do
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --dport "$p" --rate 2000 --duration 7 \
		>/dev/null 2>&1 &
	gens+=($!)
done
wait_state a cluster "$WAIT_S" && wait_state b cluster "$WAIT_S"
ok=$?
lims_a="" lims_b=""
for ((i = 0; i < 30; i++)); do
	lims_a+=" $(flow a limit)" lims_b+=" $(flow b limit)"
	sleep 0.1
done
lims_a=$(tr ' ' '\n' <<<"$lims_a" | sort -un | tr '\n' ' ')
lims_b=$(tr ' ' '\n' <<<"$lims_b" | sort -un | tr '\n' ' ')
check $([ $ok = 0 ] && [ "$lims_a" = " 900 " ] && [ "$lims_b" = " 1000 " ] &&
	echo 0 || echo 1) \
	"two namespaces, one agent: alpha's flow at 900 only (seen:$lims_a), beta's at 1000 only (seen:$lims_b)"
wait "${gens[@]}"
netns_stop rxb
rate=$(sluice_json 'max(d["per_second"][2:-2])' <"$T/rxb.out")
check $([ -n "$rate" ] && [ "$rate" -le 1050 ] && [ "$rate" -ge 900 ] && echo 0 || echo 1) \
	"... beta admitted at most $rate pps in a second of 2000 offered (count 1000, at rxcount)"

# ---- a member of the namespace that lies (tests/lib/rogue_tokend.c) ----
# It holds the secret, so its frames open; what they say is checked.
ROGUE=$(dirname "$SLUICE")/tests/rogue_tokend
rogue() # MODE LISTEN [ADDR]: the liar, restarted
{
	netns_stop rogue >/dev/null 2>&1
	netns_bg "$NS_RX" rogue "$ROGUE" "$1" "$2" web "$NEW" 60 ${3:+"$3"}
	netns_wait_ready rogue 5 && return
	echo "Bail out! the rogue server did not start"
	exit 1
}
TD_LISTEN=$TD_UP tokend "$T/agent.json" --secrets "$T/td.sec" --lease-ttl-ms 1000

# GRANTS with more entries than the SYNC asked for, more than any SYNC
# can carry: nothing is read past what was sent (an ASAN build reported a
# heap-buffer-overflow read here)
rogue extra "$TD"
agent --secrets "$T/ag.sec"
seen=$(limits_seen 2)
n_bad=$(refused malformed)
check $([ "$n_bad" -ge 1 ] && ! grep -qw 300 <<<"$seen" &&
	grep -qF 'refused: 2727 grants for the 2 flows of the SYNC' "$T/agent.err" &&
	echo 0 || echo 1) \
	"GRANTS of 2727 entries for 2 flows: refused ($n_bad times, malformed), 300 never in force (thresholds seen: $seen)"

# frames that must be sealed, without their seal: refused and counted
rogue unsealed-grants "$TD"
n0=$(refused unsealed)
agent --secrets "$T/ag.sec"
seen=$(limits_seen 2)
n1=$(refused unsealed)
check $([ "$n1" -gt 0 ] && ! grep -qw 300 <<<"$seen" &&
	grep -qF 'refused: a frame without a seal' "$T/agent.err" &&
	echo 0 || echo 1) \
	"GRANTS without a seal: refused, counted as unsealed ($n1), never in force (thresholds seen: $seen)"
rogue unsealed-auth-ok "$TD"
sleep 1.5
n2=$(refused unsealed)
check $([ "$n2" -gt "$n1" ] && [ "$(flow local state)" = fallback ] && echo 0 || echo 1) \
	"AUTH_OK without a seal: refused, counted as unsealed ($n1 -> $n2)"

# a REDIRECT of term 2^63 only points: the real leader (term 0) it names
# is believed
rogue redirect "$TD" "$TD_UP"
agent --secrets "$T/ag.sec"
wait_state local cluster "$WAIT_S"
check $? "a REDIRECT of term 2^63 to the real server: followed, its term not learned, cluster state"

# a server answering at term 2^63, then gone: the real server's term 0
# is refused while a lease of term 2^63 may last (--max-lease-ttl-ms),
# then believed
rogue high-term "$TD"
n0=$(refused term)
agent --secrets "$T/ag.sec" --token-server "$TD,$TD_UP" --max-lease-ttl-ms 2000
for ((i = 0; i < WAIT_S * 10; i++)); do
	term=$(sluice_cli status -j | sluice_json 'd["cluster"]["sessions"][0]["term"]')
	[ "$term" = 9223372036854775808 ] && break
	sleep 0.1
done
netns_stop rogue >/dev/null 2>&1
t0=$(date +%s%N)
# the rogue's grant (300) may still be in force: wait for the real one's
ok=1
for ((i = 0; i < (WAIT_S + 5) * 10; i++)); do
	[ "$(flow local state)" = cluster ] && [ "$(flow local limit)" = 1000 ] &&
		{ ok=0; break; }
	sleep 0.1
done
ms=$((($(date +%s%N) - t0) / 1000000))
n1=$(refused term)
check $([ $ok = 0 ] && [ "$n1" -gt "$n0" ] &&
	grep -qF 'term 9223372036854775808 unheard for 2000 ms (--max-lease-ttl-ms): no lease of it is left, term 0 believed' "$T/agent.err" &&
	echo 0 || echo 1) \
	"term 2^63, then gone: term 0 refused ($n0 -> $n1), believed after --max-lease-ttl-ms (cluster state in $ms ms)"
netns_stop agent >/dev/null 2>&1
netns_stop tokend >/dev/null 2>&1

# ---- a token server's name, and a resolver that never answers ----
# DNS goes to the other namespace, where port 53 drops everything; the
# control socket must answer meanwhile (the lookup holds no lock)
mkdir -p "/etc/netns/$NS_RX"
netns_on_exit "rm -rf '/etc/netns/$NS_RX'"
printf 'nameserver 198.18.0.1\n' >"/etc/netns/$NS_RX/resolv.conf"
printf '%s\n' 'table inet blackhole {' \
	'chain input { type filter hook input priority 0; udp dport 53 drop; tcp dport 53 drop; }' \
	'}' | ip netns exec "$NS_TX" nft -f -
agent --secrets "$T/ag.sec" --token-server tokens.sluice.test:7070
worst=0
for ((i = 0; i < 12; i++)); do
	t0=$(date +%s%N)
	sluice_cli stats -j >/dev/null 2>"$T/stats.err" || { worst=99999; show "$T/stats.err" 3; }
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$ms" -gt "$worst" ] && worst=$ms
	sleep 0.4
done
err=$(last_error)
check $([ "$worst" -lt 1000 ] && grep -qF 'cannot resolve: no answer in 2000 ms' <<<"$err" &&
	echo 0 || echo 1) \
	"a resolver that never answers: \`sluice stats\` answered in at most $worst ms over 7 s ($err)"
netns_stop agent >/dev/null 2>&1

# ---- no secrets, a token server off loopback: refused at the start ----
sluice_agent_fg "$T/unkeyed" --rules "$T/agent.json" --token-server 198.18.0.1:7070
rc=$?
grep -qF 'token server 198.18.0.1:7070 is not a loopback address: a session with it needs --secrets' "$T/unkeyed"
check $((rc != 0 && rc != 124 && $? == 0 ? 0 : 1)) \
	"no --secrets and a token server off loopback: exit $rc, the reason given"
echo "1..$n"
