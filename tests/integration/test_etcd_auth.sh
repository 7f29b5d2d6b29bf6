#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# etcd with TLS and authentication (docs/fleet.md), against a real
# etcd-server: with --client-cert-auth, `sluice push` and an agent work
# with a client certificate and fail clearly without one or with a wrong
# CA; with `auth enable`, push, the agent and tokend's election work as
# users holding the minimum roles the docs give, a wrong password, a user
# without the role or a certificate with a CommonName fails clearly,
# secrets never show in logs or status, and tokens that expire
# (etcd's --auth-token-ttl 2 s) or that etcd forgets on a restart are
# replaced: the watch goes on and later puts reach the agent, tokend keeps
# leading.
#
# etcd runs inside the agent's namespace, on its loopback; the CA and
# certificates are made with openssl in the suite's temporary directory.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh
source tests/lib/etcd.sh

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null ||
	! command -v openssl >/dev/null; then
	echo "ok 1 - etcd auth # SKIP etcd or openssl is not installed (etcd-server, etcd-client, openssl)"
	exit 0
fi
skip_unless_root_and_xdp "etcd auth"
netns_setup etcdauth 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

T=$NETNS_TMP
P=$T/pki
KEY=/sluice/rules/web
ELECTION=/sluice/tokend/web
EP=https://127.0.0.1:2379
ETCD_EP=$EP
READY_S=10
[ -n "$VM" ] && READY_S=120
etcd_pki "$P" || { echo "Bail out! openssl failed"; show "$P/openssl.log" 20; exit 1; }
ETCD_TLS=(--client-cert-auth --trusted-ca-file "$P/ca.crt"
	--cert-file "$P/server.crt" --key-file "$P/server.key" --auth-token-ttl 2)
ECTL_ARGS=(--cacert "$P/ca.crt" --cert "$P/client.crt" --key "$P/client.key")
TLS=(--etcd-cacert "$P/ca.crt" --etcd-cert "$P/client.crt" --etcd-cert-key "$P/client.key")

echo "{\"rules\":[$(etcd_rule r1 9000 1000)]}" >"$T/v1.json"
echo "{\"rules\":[$(etcd_rule r1 9000 1000),$(etcd_rule r2 9001 2000)]}" >"$T/v2.json"
echo "{\"rules\":[$(etcd_rule r1 9000 1000),$(etcd_rule r2 9001 3000)]}" >"$T/v3.json"
echo '{"rules":[{"name":"fleet","match":{"proto":"udp","dport":9000},"grade":"pps","count":1000,"cluster":{"namespace":"web","flow_id":1,"threshold_type":"global","fallback":"share"}}]}' >"$T/tokend.json"

push() { ip netns exec "$NS_RX" "$SLUICE" push "$1" --etcd "$EP" --etcd-key "$KEY" "${@:2}"; }
st() { sluice_cli status -j | sluice_json "$1"; }
names() { sluice_cli rule list -j | sluice_json '",".join(r["name"] for r in d["rules"])'; }
# the key's value is FILE's
holds() { [ "$(ectl get "$KEY" --print-value-only)" = "$(cat "$1")" ]; }
erev() { ectl get "$KEY" -w fields | awk '$1 == "\"ModRevision\"" { print $3 }'; }
agent_start() # ARGS...: the agent on the key, with ARGS for etcd
{
	sluice_bg agent --etcd "$EP" --etcd-key "$KEY" "$@"
	sluice_wait_ready agent "$READY_S"
}
in_force() # FILE REV NAMES: the agent took FILE at REV within 10 s
{
	status_until 10 "d['config_source']['revision'] == $2 and d['config_source']['state'] == 'watching'" &&
		[ "$(names)" = "$3" ]
}

# ---- TLS: --client-cert-auth ----------------------------------------------
etcd_start "${ETCD_TLS[@]}" || { echo "Bail out! etcd did not start"; exit 1; }
push "$T/v2.json" "${TLS[@]}" >"$T/push.out" 2>&1
check $? "TLS: push with the client certificate publishes ($(head -c 80 "$T/push.out"))"
holds "$T/v2.json"
check $? "  ... etcd holds the file"
REV2=$(erev)

push "$T/v1.json" --etcd-cacert "$P/ca.crt" >"$T/push.out" 2>&1
rc=$?
# TLS 1.3: curl's reason is the server's alert or the connection it
# closed, whichever the client sees first
[ $rc = 1 ] && grep -q "^sluice: error: $T/v1.json: not published: $EP: " "$T/push.out" && holds "$T/v2.json"
check $? "TLS: without a client certificate: exit 1 ($rc), the endpoint and curl's reason named, nothing sent"
show "$T/push.out" 2
push "$T/v1.json" --etcd-cacert "$P/other-ca.crt" --etcd-cert "$P/client.crt" \
	--etcd-cert-key "$P/client.key" >"$T/push.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "not published: $EP: .*certificate problem" "$T/push.out" && holds "$T/v2.json"
check $? "TLS: with a wrong CA: exit 1 ($rc), the reason named"
show "$T/push.out" 2
push "$T/v1.json" --etcd-cacert "$T/missing.crt" >"$T/push.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--etcd-cacert $T/missing.crt: No such file" "$T/push.out"
check $? "TLS: a missing CA file: a usage error naming the file ($rc)"

sluice_bg seed --rules "$T/v1.json"
sluice_wait_ready seed "$READY_S" || { echo "Bail out! the seed agent did not start"; exit 1; }
netns_stop seed
agent_start "${TLS[@]}"
check $? "TLS: the agent with the client certificate boots"
in_force "$T/v2.json" "$REV2" r1,r2
check $? "  ... and puts the key's value in force (revision $REV2, r1,r2)" ||
	show "$NETNS_TMP/agent.err" 10
netns_stop agent
agent_start --etcd-cacert "$P/ca.crt"
status_until 10 "d['config_source']['state'] == 'unreachable'" &&
	st 'd["config_source"]["last_error"]' | grep -q "^$EP: " &&
	[ "$(st 'd["ready"]')" = true ] && [ "$(names)" = r1,r2 ]
check $? "TLS: the agent without a client certificate: unreachable, curl's reason in status, its snapshot in force"
st 'd["config_source"]["last_error"]' | show /dev/stdin 1
netns_stop agent

# ---- authentication: auth enable, a user per program ----------------------
# the minimum roles of docs/fleet.md
{
	ectl user add root --new-user-password root-pw &&
	ectl user grant-role root root &&
	ectl role add sluice-agent &&
	ectl role grant-permission sluice-agent read "$KEY" &&
	ectl role add sluice-push &&
	ectl role grant-permission sluice-push readwrite "$KEY" &&
	ectl role add sluice-tokend &&
	ectl role grant-permission sluice-tokend readwrite --prefix=true "$ELECTION/" &&
	for u in agent push tokend; do
		ectl user add "sl-$u" --new-user-password "pw-$u-s3cret" &&
		ectl user grant-role "sl-$u" "sluice-$u" || exit 1
	done &&
	ectl auth enable
} >"$T/auth.log" 2>&1 || { echo "Bail out! etcd auth setup failed"; show "$T/auth.log" 10; exit 1; }
ECTL_ARGS+=(--user root:root-pw)
for u in agent push tokend; do printf 'pw-%s-s3cret\n' "$u" >"$T/pw-$u"; done
echo wrong >"$T/pw-wrong"
USER_PUSH=(--etcd-user sl-push --etcd-password-file "$T/pw-push")

# etcd refuses a CommonName at the gateway once auth is on (its CN
# would name a user there)
push "$T/v3.json" --etcd-cacert "$P/ca.crt" --etcd-cert "$P/cn-client.crt" \
	--etcd-cert-key "$P/cn-client.key" "${USER_PUSH[@]}" >"$T/push.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "HTTP 400, not an etcd gateway answer: CommonName of client" "$T/push.out"
check $? "auth: a client certificate with a CommonName: exit 1 ($rc), etcd's reason shown"
show "$T/push.out" 1
push "$T/v3.json" "${TLS[@]}" >"$T/push.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "user name is empty" "$T/push.out"
check $? "auth: push without a user: exit 1 ($rc), etcd's reason shown"
push "$T/v3.json" "${TLS[@]}" --etcd-user sl-push --etcd-password-file "$T/pw-wrong" >"$T/push.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "not published: etcd: authentication failed for user sl-push at $EP" "$T/push.out"
check $? "auth: a wrong password: exit 1 ($rc), 'authentication failed for user sl-push at $EP'"
show "$T/push.out" 1
push "$T/v3.json" "${TLS[@]}" --etcd-user sl-agent --etcd-password-file "$T/pw-agent" >"$T/push.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "permission denied" "$T/push.out" && holds "$T/v2.json"
check $? "auth: the agent's read-only user cannot push: exit 1 ($rc), permission denied"
ip netns exec "$NS_RX" env SLUICE_ETCD_PASSWORD=pw-push-s3cret "$SLUICE" push "$T/v3.json" \
	--etcd "$EP" --etcd-key "$KEY" "${TLS[@]}" --etcd-user sl-push >"$T/push.out" 2>&1 &&
	holds "$T/v3.json"
check $? "auth: push as sl-push (password from SLUICE_ETCD_PASSWORD) publishes"
REV3=$(erev)

agent_start "${TLS[@]}" --etcd-user sl-agent --etcd-password-file "$T/pw-wrong"
status_until 10 "d['config_source']['state'] == 'unreachable'" &&
	st 'd["config_source"]["last_error"]' | grep -q "authentication failed for user sl-agent at $EP" &&
	[ "$(names)" = r1,r2 ]
check $? "auth: the agent with a wrong password: unreachable, status says authentication failed, its snapshot in force"
netns_stop agent
agent_start "${TLS[@]}" --etcd-user sl-agent --etcd-password-file "$T/pw-agent"
check $? "auth: the agent as sl-agent (read on the key) boots"
in_force "$T/v3.json" "$REV3" r1,r2 &&
	[ "$(sluice_cli rule list -j | sluice_json '[r["count"] for r in d["rules"] if r["name"] == "r2"][0]')" = 3000 ]
check $? "  ... and puts the key's value in force (revision $REV3, r2 at 3000)"

# tokens: 2 s of TTL; the watch outlives its token, a put after reaches
sleep 3
push "$T/v2.json" "${TLS[@]}" "${USER_PUSH[@]}" >"$T/push.out" 2>&1
REV4=$(erev)
in_force "$T/v2.json" "$REV4" r1,r2 &&
	[ "$(sluice_cli rule list -j | sluice_json '[r["count"] for r in d["rules"] if r["name"] == "r2"][0]')" = 2000 ]
check $? "auth: 3 s after the agent's token expired, a put reaches it (revision $REV4)"
# etcd restarted forgets every token: the agent watches again with a new one
etcd_kill
etcd_start "${ETCD_TLS[@]}" || { echo "Bail out! etcd did not restart"; exit 1; }
sleep 3
push "$T/v3.json" "${TLS[@]}" "${USER_PUSH[@]}" >"$T/push.out" 2>&1
REV5=$(erev)
in_force "$T/v3.json" "$REV5" r1,r2
check $? "auth: after etcd restarted (tokens gone), the agent authenticates again: a put in force (revision $REV5)"

# ---- tokend's election as a user ------------------------------------------
mkdir -p "$T/td" "$T/td2"
tokend_bg() # NAME DIR PASSWORD_FILE METRICS [ARGS...]
{
	netns_bg "$NS_RX" "$1" "$SLUICE" tokend --listen "127.0.0.1:$((7070 + ${4: -1}))" \
		--rules "$T/tokend.json" --state-dir "$2" --etcd "$EP" "${TLS[@]}" \
		--etcd-user sl-tokend --etcd-password-file "$3" \
		--election "$ELECTION" --advertise "127.0.0.1:$((7070 + ${4: -1}))" \
		--metrics "$4" "${@:5}"
}
tmetric() # ADDR NAME
{
	ip netns exec "$NS_RX" curl -s --max-time 0.5 "http://$1/metrics" 2>/dev/null |
		awk -v k="$2" '$1 == k { print $2 }'
}
# --election-ttl-ms 9000: a renewal every 3 s, after the 2 s token expired
tokend_bg td "$T/td" "$T/pw-tokend" 127.0.0.1:9461 --election-ttl-ms 9000
sl_until 10 eval '[ "$(tmetric 127.0.0.1:9461 sluice_tokend_leader)" = 1 ]'
check $? "auth: tokend as sl-tokend (readwrite under $ELECTION/) becomes leader"
ectl get --prefix "$ELECTION/" --print-value-only | grep -qx 127.0.0.1:7071
check $? "  ... its candidate key holds its address"
sleep 8
[ "$(tmetric 127.0.0.1:9461 sluice_tokend_leader)" = 1 ] &&
	! grep -q "election: \(lease\|campaign\|leader:\)" "$NETNS_TMP/td.err"
check $? "  ... and still leads 8 s later, renewing each time with a new token"
show "$NETNS_TMP/td.err" 3
tokend_bg td2 "$T/td2" "$T/pw-wrong" 127.0.0.1:9462
sl_until 10 grep -q "authentication failed for user sl-tokend at $EP" "$NETNS_TMP/td2.err" &&
	[ "$(tmetric 127.0.0.1:9462 sluice_tokend_leader)" = 0 ]
check $? "auth: tokend with a wrong password says so and does not lead"
netns_stop td2
netns_stop td

# ---- secrets --------------------------------------------------------------
sluice_cli status -j >"$T/status.json"
! grep -rq "pw-.*-s3cret\|root-pw" "$NETNS_TMP"/*.err "$NETNS_TMP"/*.out "$T/push.out" "$T/status.json"
check $? "no password in any log, push's output or status"
netns_stop agent

echo "1..$n"
