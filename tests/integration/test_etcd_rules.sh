#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Rules from etcd (docs/fleet.md), against a real etcd-server: the agent
# boots from its snapshot with etcd down; takes the key's value once etcd
# is up and every put after, keeping the counters of unchanged rules;
# refuses invalid, empty and deleted values with the rules in force
# unchanged; keeps enforcing and stays ready while etcd is down and says
# since when; resumes the watch from its revision after an outage (the
# latest applied, none twice) and re-reads after a compaction; boots the
# etcd-sourced snapshot with etcd down and applies nothing when the key
# is at the snapshot's revision, falling over past a dead endpoint;
# refuses local rule changes (managed); `sluice push` checks, publishes,
# and compares and swaps; a manifest's body is fetched, checked against
# its sha256 (half a body refused, a missing one retried) and survives a
# compaction, and a rule file as the value still works; bad options are
# usage errors.
#
# etcd runs inside the agent's namespace, on that namespace's own
# loopback: its ports are free by construction, and nothing outside sees
# it. Its data dir is under the suite's temporary directory.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh
source tests/lib/etcd.sh

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
	echo "ok 1 - etcd rules # SKIP etcd is not installed (etcd-server, etcd-client)"
	exit 0
fi
skip_unless_root_and_xdp "etcd rules"
netns_setup etcd 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

T=$NETNS_TMP
KEY=/sluice/rules
EP=http://127.0.0.1:2379
ETCD_EP=$EP
METRICS=127.0.0.1:9464
READY_S=10
[ -n "$VM" ] && READY_S=120
CUR=$SL_STATE/rules.json

echo "{\"rules\":[$(etcd_rule r1 9000 1000)]}" >"$T/v1.json"
echo "{\"rules\":[$(etcd_rule r1 9000 1000),$(etcd_rule r2 9001 2000)]}" >"$T/v2.json"
echo "{\"rules\":[$(etcd_rule r1 9000 1000),$(etcd_rule r2 9001 3000)]}" >"$T/v3.json"
echo "{\"rules\":[$(etcd_rule r1 9000 1000),$(etcd_rule r2 9001 -5)]}" >"$T/invalid.json"
echo '{"rules":[]}' >"$T/empty.json"
echo '{"rules":[],"allow_empty":true}' >"$T/explicit-empty.json"

eput() { ectl put "$KEY" "$(cat "$1")" >/dev/null; }
# the key's mod_revision
erev()
{
	ectl get "$KEY" -w json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["kvs"][0]["mod_revision"] if d.get("kvs") else 0)'
}
st() { sluice_cli status -j | sluice_json "$1"; }
names() { sluice_cli rule list -j | sluice_json '",".join(r["name"] for r in d["rules"])'; }
snap() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$CUR" "$1"; }
metric() { ip netns exec "$NS_RX" curl -s "http://$METRICS/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
# applies REV: how many times the agent's log says REV was put in force
applies() { grep -c "etcd: $KEY at revision $1 in force" "$T/agent.err"; }
send() # PORT N: N packets to PORT, paced
{
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --dport "$1" --count "$2" --rate 1000 \
		>/dev/null 2>&1
}
AGENT_ARGS=(--etcd "$EP" --etcd-key "$KEY" --metrics "$METRICS")
# the cases that stop the agent (SIGSTOP) must not leave it stopped for
# the cleanup's SIGTERM, which a stopped process never acts on: agent_bg
# registers a SIGCONT that runs before it
agent_bg()
{
	sluice_bg agent "${AGENT_ARGS[@]}"
	netns_on_exit "kill -CONT ${NETNS_PID[agent]} 2>/dev/null"
}

# ---- boot from the snapshot with etcd down --------------------------------
sluice_bg seed --rules "$T/v1.json"
sluice_wait_ready seed "$READY_S" || { echo "Bail out! the seed agent did not start"; exit 1; }
netns_stop seed
agent_bg
sluice_wait_ready agent "$READY_S"
check $? "etcd down: the agent boots from its snapshot and is ready"
[ "$(names)" = r1 ] && [ "$(st 'd["rules_in_force"]')" = 1 ]
check $? "  ... with the snapshot's rules in force (r1)"
status_until 5 'd["config_source"]["state"] == "unreachable" and d["config_source"]["unreachable_since"] is not None'
check $? "  ... and status says etcd is unreachable, and since when"
send 9000 100
[ "$(sluice_rule_stat r1 passed_pkts)" = 100 ]
check $? "  ... r1 judges packets (100 passed)"

# ---- etcd comes up with a value ------------------------------------------
etcd_start || { echo "Bail out! etcd did not start"; exit 1; }
eput "$T/v2.json"
REV2=$(erev)
status_until 10 "d['config_source']['revision'] == $REV2 and d['config_source']['state'] == 'watching'"
check $? "etcd up with a value: applied (revision $REV2), status watching at it"
[ "$(names)" = r1,r2 ] && [ "$(snap 'd["source"]["revision"]')" = "$REV2" ] &&
	[ "$(snap 'd["source"]["etcd_key"]')" = "$KEY" ]
check $? "  ... the rules in force are the value's, the snapshot records key and revision"
[ "$(sluice_rule_stat r1 passed_pkts)" = 100 ]
check $? "  ... r1 unchanged: its counters kept (100)"
[ "$(metric sluice_config_source_up)" = 1 ] && [ "$(metric sluice_config_source_revision)" = "$REV2" ]
check $? "  ... metrics: source up, revision $REV2"
sluice_cli status | grep -qx "source:    etcd $KEY, revision $REV2, watching"
check $? "  ... and \`sluice status\` says so in one line"

# ---- a new valid value ---------------------------------------------------
eput "$T/v3.json"
REV3=$(erev)
status_until 2 "d['config_source']['revision'] == $REV3"
check $? "a put is in force within 2 s (revision $REV3)"
[ "$(sluice_cli rule list -j | sluice_json '[r["count"] for r in d["rules"] if r["name"] == "r2"][0]')" = 3000 ] &&
	[ "$(sluice_rule_stat r1 passed_pkts)" = 100 ]
check $? "  ... r2 changed to 3000, r1's counters kept"
# put -> in force, N times: a put through the gateway, then the revision
# in force polled from the metrics every 2 ms
ip netns exec "$NS_RX" python3 - "$EP" "$KEY" "$METRICS" "$T/v2.json" "$T/v3.json" >"$T/latency" <<'PY'
import base64, json, statistics, sys, time, urllib.request
ep, key, metrics, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
b64 = lambda b: base64.b64encode(b).decode()
def post(path, body):
    req = urllib.request.Request(ep + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))
def in_force():
    text = urllib.request.urlopen("http://%s/metrics" % metrics).read().decode()
    for line in text.splitlines():
        if line.startswith("sluice_config_source_revision "):
            return int(float(line.split()[1]))
ms = []
for i in range(20):
    value = open(files[i % 2], "rb").read()
    t0 = time.monotonic()
    rev = int(post("/v3/kv/put", {"key": b64(key.encode()), "value": b64(value)})["header"]["revision"])
    while in_force() != rev:
        if time.monotonic() - t0 > 5:
            sys.exit("revision %d not in force after 5 s" % rev)
        time.sleep(0.002)
    ms.append((time.monotonic() - t0) * 1000)
print("%.0f %.0f %.0f" % (statistics.median(ms), min(ms), max(ms)))
PY
check $? "20 puts in a row: each in force within 5 s"
read -r LAT_MED LAT_MIN LAT_MAX <"$T/latency"
echo "# put -> in force on one agent, 20 puts: median ${LAT_MED:-?} ms, min ${LAT_MIN:-?}, max ${LAT_MAX:-?}"
eput "$T/v3.json"
REV3=$(erev)
status_until 5 "d['config_source']['revision'] == $REV3"
VERSION=$(sluice_cli rule list -j | sluice_json 'd["version"]')

# ---- an invalid value ----------------------------------------------------
eput "$T/invalid.json"
REVBAD=$(erev)
status_until 5 "d['config_source']['last_refused'] is not None and d['config_source']['last_refused']['revision'] == $REVBAD"
check $? "an invalid value is refused (revision $REVBAD)"
[ "$(st 'd["config_source"]["revision"]')" = "$REV3" ] &&
	[ "$(sluice_cli rule list -j | sluice_json 'd["version"]')" = "$VERSION" ] &&
	[ "$(st 'd["ready"]')" = true ]
check $? "  ... the rules in force stay (revision $REV3, snapshot version $VERSION), ready"
st 'd["config_source"]["last_refused"]["error"]' | grep -q "rule 'r2'.*count"
check $? "  ... status names the error (rule r2, count)"
[ "$(metric sluice_config_source_refused_total)" = 1 ] &&
	grep -q "etcd: $KEY at revision $REVBAD refused" "$T/agent.err"
check $? "  ... and so do the metrics (refused_total 1) and the log"

# ---- empty, explicit empty -----------------------------------------------
eput "$T/empty.json"
REVE=$(erev)
status_until 5 "d['config_source']['last_refused']['revision'] == $REVE"
check $? "an empty value is refused"
[ "$(names)" = r1,r2 ] && st 'd["config_source"]["last_refused"]["error"]' | grep -q 'allow_empty'
check $? "  ... the rules stay, the error says how to mean it (allow_empty)"
eput "$T/explicit-empty.json"
REVX=$(erev)
status_until 5 "d['config_source']['revision'] == $REVX"
check $? "an explicit empty value (\"allow_empty\": true) is applied"
[ "$(st 'd["rules_in_force"]')" = 0 ] && [ "$(st 'd["ready"]')" = true ]
check $? "  ... no rules in force, and the agent is ready"
eput "$T/v3.json"
REV3=$(erev)
status_until 5 "d['config_source']['revision'] == $REV3 and d['rules_in_force'] == 2"
check $? "setup: back to v3 (revision $REV3)"

# ---- local changes refused -----------------------------------------------
sluice_cli rule add "$T/v1.json" >"$T/add.out" 2>"$T/add.err"
rc=$?
[ "$rc" = 1 ] && grep -q "\[managed\]" "$T/add.err" && grep -q "$KEY" "$T/add.err" &&
	grep -q "sluice push" "$T/add.err"
check $? "local rule add: exit 1 ($rc), code managed, naming the key and sluice push"
show "$T/add.err" 2
[ "$(names)" = r1,r2 ]
check $? "  ... and the rules are unchanged"

# ---- etcd killed ---------------------------------------------------------
killed_at=$(date -u +%s)
etcd_kill
status_until 5 'd["config_source"]["state"] == "unreachable"'
check $? "etcd killed: status says unreachable"
since=$(st 'd["config_source"]["unreachable_since"]')
since_s=$(date -u -d "$since" +%s 2>/dev/null || echo 0)
(( since_s >= killed_at && since_s <= killed_at + 5 )) &&
	sluice_cli status | grep -q "^source:    etcd $KEY, revision $REV3, unreachable since $since"
check $? "  ... since $since, the kill's second or after ($killed_at), also in \`sluice status\`"
[ "$(st 'd["ready"]')" = true ] && [ "$(names)" = r1,r2 ] &&
	[ -n "$(st 'd["config_source"]["unreachable_since"]')" ] &&
	[ "$(metric sluice_config_source_up)" = 0 ]
check $? "  ... ready, the rules still in force, since when, metric up 0"
before=$(sluice_rule_stat r1 passed_pkts)
send 9000 50
[ "$(sluice_rule_stat r1 passed_pkts)" = $((before + 50)) ]
check $? "  ... and r1 still judges packets"

# ---- etcd back with puts made meanwhile: the agent resumes its watch ------
kill -STOP "${NETNS_PID[agent]}"
etcd_start || { echo "Bail out! etcd did not restart"; exit 1; }
eput "$T/v2.json"; R_A=$(erev)
eput "$T/v3.json"; R_B=$(erev)
eput "$T/v2.json"; R_C=$(erev)
kill -CONT "${NETNS_PID[agent]}"
status_until 15 "d['config_source']['revision'] == $R_C and d['config_source']['state'] == 'watching'"
check $? "etcd back, 3 puts made meanwhile: the agent ends on the latest ($R_C)"
[ "$(sluice_cli rule list -j | sluice_json '[r["count"] for r in d["rules"] if r["name"] == "r2"][0]')" = 2000 ] &&
	[ "$(snap 'd["source"]["revision"]')" = "$R_C" ]
check $? "  ... the latest in force and in the snapshot"
twice=0
for r in $REV2 $REV3 $REVX $R_A $R_B $R_C; do
	[ "$(applies "$r")" -le 1 ] || twice=1
done
[ "$(applies "$R_C")" = 1 ] && [ $twice = 0 ]
check $? "  ... no revision applied twice (the log's applies per revision)"

# ---- compaction: the agent's revision is gone when it comes back ----------
kill -STOP "${NETNS_PID[agent]}"
etcd_kill
etcd_start || { echo "Bail out! etcd did not restart"; exit 1; }
for f in v3 v2 v3; do eput "$T/$f.json"; done
R_L=$(erev)
ectl compact "$R_L" >/dev/null
kill -CONT "${NETNS_PID[agent]}"
status_until 15 "d['config_source']['revision'] == $R_L and d['config_source']['state'] == 'watching'"
check $? "puts then a compaction while the agent was away: it ends on the latest ($R_L)"
grep -q "was compacted" "$T/agent.err" && [ "$(applies "$R_L")" = 1 ] &&
	[ "$(snap 'd["source"]["revision"]')" = "$R_L" ]
check $? "  ... having re-read the key (logged), applied once, in the snapshot"

# ---- restart with etcd down: the etcd-sourced snapshot boots ---------------
etcd_kill
netns_stop agent
mv "$T/agent.err" "$T/agent1.err"
# from now on a dead endpoint first: the agent falls over to the next
AGENT_ARGS=(--etcd "http://127.0.0.1:2399,$EP" --etcd-key "$KEY" --metrics "$METRICS")
agent_bg
sluice_wait_ready agent "$READY_S" && [ "$(names)" = r1,r2 ] &&
	[ "$(st 'd["config_source"]["revision"]')" = "$R_L" ]
check $? "restart with etcd down: ready on the etcd-sourced snapshot (revision $R_L)"
etcd_start || { echo "Bail out! etcd did not restart"; exit 1; }
status_until 15 "d['config_source']['state'] == 'watching' and d['config_source']['endpoint'] == '$EP'"
check $? "  ... etcd back: watching, on the second endpoint ($EP; the first is dead)"
sleep 0.5
[ "$(grep -c "etcd: $KEY at revision .* in force" "$T/agent.err")" = 0 ]
check $? "  ... and nothing applied: the key is at the snapshot's revision"

# ---- sluice push ---------------------------------------------------------
push() { ip netns exec "$NS_RX" "$SLUICE" push "$@" --etcd "$EP" --etcd-key "$KEY"; }
before=$(erev)
push "$T/invalid.json" >"$T/push.out" 2>"$T/push.err"
rc=$?
[ "$rc" = 1 ] && grep -q "invalid" "$T/push.err" && [ "$(erev)" = "$before" ]
check $? "push of an invalid file: exit 1 ($rc), the error printed, nothing sent"
push "$T/empty.json" >"$T/push.out" 2>"$T/push.err"
rc=$?
[ "$rc" = 1 ] && grep -q "allow_empty" "$T/push.err" && [ "$(erev)" = "$before" ]
check $? "push of an empty file: exit 1 ($rc), nothing sent"
push "$T/v3.json" >"$T/push.out" 2>"$T/push.err"
rc=$?
R_P=$(erev)
[ "$rc" = 0 ] && grep -q "at revision $R_P\$" "$T/push.out" && [ "$R_P" -gt "$before" ]
check $? "push of a valid file: exit 0, prints the new revision ($R_P)"
status_until 5 "d['config_source']['revision'] == $R_P"
check $? "  ... and the agent puts it in force"
push "$T/v2.json" --if-revision "$before" >"$T/push.out" 2>"$T/push.err"
rc=$?
[ "$rc" = 1 ] && grep -q "is at revision $R_P, not $before" "$T/push.err" && [ "$(erev)" = "$R_P" ]
check $? "push --if-revision $before (stale): exit 1 ($rc), naming the current revision, nothing written"
show "$T/push.err" 1
push "$T/v2.json" --if-revision "$R_P" >"$T/push.out" 2>"$T/push.err"
rc=$?
R_Q=$(erev)
[ "$rc" = 0 ] && [ "$R_Q" -gt "$R_P" ] && grep -q "at revision $R_Q\$" "$T/push.out"
check $? "push --if-revision $R_P (current): published at $R_Q"
ip netns exec "$NS_RX" "$SLUICE" push "$T/v1.json" --etcd "$EP" --etcd-key /sluice/other \
	--if-revision 0 >"$T/push.out" 2>"$T/push.err" &&
	! ip netns exec "$NS_RX" "$SLUICE" push "$T/v1.json" --etcd "$EP" \
		--etcd-key /sluice/other --if-revision 0 >"$T/push.out" 2>"$T/push.err"
check $? "push --if-revision 0: creates a missing key, then refuses as it exists"

# ---- a deleted key -------------------------------------------------------
status_until 5 "d['config_source']['revision'] == $R_Q"
ectl del "$KEY" >/dev/null
status_until 5 "d['config_source']['last_refused'] is not None and 'deleted' in d['config_source']['last_refused']['error']"
check $? "the key deleted: refused, saying so"
[ "$(names)" = r1,r2 ] && [ "$(st 'd["ready"]')" = true ]
check $? "  ... the rules stay in force, ready"

# ---- manifests: the rule file from a body server, checked ----------------
# (docs/fleet.md, pushes to a large fleet) The key holds a manifest of a
# few hundred bytes; the agent fetches the body it names from a static
# HTTP server and checks its size and sha256 before it is a value.
manifest_cases()
{
	local BODIES=$T/bodies BURL=http://127.0.0.1:8081 R_M S2 S3 REVH REVB REVM R_1 R_2 R_O
	local r2count='[r["count"] for r in d["rules"] if r["name"] == "r2"][0]'
	sha() { sha256sum "$1" | cut -d' ' -f1; }
	# FILE SHA: a manifest of FILE's size naming SHA at the body server
	manifest() { printf '{"sluice_manifest":1,"sha256":"%s","size":%s,"rules":2,"urls":["%s/%s.json"]}' \
		"$2" "$(stat -c %s "$1")" "$BURL" "$2"; }
	mkdir -p "$BODIES"
	netns_bg "$NS_RX" httpd busybox httpd -f -p 127.0.0.1:8081 -h "$BODIES"
	S2=$(sha "$T/v2.json")
	S3=$(sha "$T/v3.json")

	push "$T/v3.json" --body-url "$BURL" --body-dir "$BODIES" >"$T/push.out" 2>"$T/push.err"
	rc=$?
	R_M=$(erev)
	[ "$rc" = 0 ] && [ "$(ectl get "$KEY" --print-value-only | wc -c)" -lt 400 ] &&
		cmp -s "$BODIES/$S3.json" "$T/v3.json" && grep -q "at revision $R_M\$" "$T/push.out"
	check $? "push --body-url --body-dir: the body written as <sha256>.json, a manifest under 400 bytes published ($R_M)"
	show "$T/push.err" 2
	status_until 5 "d['config_source']['revision'] == $R_M and d['config_source']['body']['sha256'] == '$S3'"
	check $? "  ... the agent fetches the body, checks it and puts it in force (status names its sha256)"
	[ "$(sluice_cli rule list -j | sluice_json "$r2count")" = 3000 ] &&
		[ "$(snap 'd["source"]["revision"]')" = "$R_M" ]
	check $? "  ... the body's rules in force (r2 3000), the snapshot at the manifest's revision"
	push "$T/v1.json" --dry-run >"$T/push.out" 2>"$T/push.err"
	rc=$?
	[ "$rc" = 0 ] && grep -q "^dry run, nothing published ($KEY at revision $R_M): removed r2" "$T/push.out" &&
		[ "$(erev)" = "$R_M" ]
	check $? "push --dry-run against a manifest: compared with its body (removed r2), nothing published"
	show "$T/push.out" 1

	# half of v2 under v2's name: what a server may serve mid-copy
	head -c 60 "$T/v2.json" >"$BODIES/$S2.json"
	ectl put "$KEY" "$(manifest "$T/v2.json" "$S2")" >/dev/null
	REVH=$(erev)
	status_until 5 "d['config_source']['last_refused'] is not None and d['config_source']['last_refused']['revision'] == $REVH"
	check $? "a manifest whose body is not its sha256 (half a file): refused (revision $REVH)"
	[ "$(sluice_cli rule list -j | sluice_json "$r2count")" = 3000 ] &&
		[ "$(st 'd["config_source"]["revision"]')" = "$R_M" ] &&
		st 'd["config_source"]["last_refused"]["error"]' | grep -q "sha256" &&
		grep -q "etcd: $KEY at revision $REVH refused, the rules in force stay: .*sha256" "$T/agent.err"
	check $? "  ... nothing of it applied: r2 3000 and revision $R_M stay, the error names the sha256"

	# v2 and 4 MiB more under v2's name: cut off past the manifest's size
	{ cat "$T/v2.json"; head -c 4194304 /dev/zero; } >"$BODIES/$S2.json"
	ectl put "$KEY" "$(manifest "$T/v2.json" "$S2")" >/dev/null
	REVB=$(erev)
	status_until 5 "d['config_source']['last_refused'] is not None and d['config_source']['last_refused']['revision'] == $REVB"
	check $? "a manifest whose body server sends more than its size: refused (revision $REVB)"
	[ "$(sluice_cli rule list -j | sluice_json "$r2count")" = 3000 ] &&
		st 'd["config_source"]["last_refused"]["error"]' | grep -q "more than the manifest's $(stat -c %s "$T/v2.json") bytes"
	check $? "  ... not read past it, nothing applied: $(st 'd["config_source"]["last_refused"]["error"]')"

	rm -f "$BODIES/$S2.json"
	ectl put "$KEY" "$(manifest "$T/v2.json" "$S2")" >/dev/null
	REVM=$(erev)
	status_until 5 "d['config_source']['state'] == 'unreachable' and '404' in d['config_source']['last_error']"
	check $? "a manifest whose body is missing (HTTP 404): not applied, status says why"
	[ "$(sluice_cli rule list -j | sluice_json "$r2count")" = 3000 ] && [ "$(st 'd["ready"]')" = true ]
	check $? "  ... the rules in force stay (r2 3000), ready"
	cp "$T/v2.json" "$BODIES/$S2.json"
	status_until 10 "d['config_source']['revision'] == $REVM and d['config_source']['state'] == 'watching'"
	check $? "  ... the body appears: fetched again and in force ($REVM)"
	[ "$(sluice_cli rule list -j | sluice_json "$r2count")" = 2000 ] &&
		[ "$(snap 'd["source"]["revision"]')" = "$REVM" ]
	check $? "  ... r2 2000, the snapshot at $REVM"

	# compaction: etcd restarted (the watch broken) while the agent is
	# stopped, two manifests, then compacted
	kill -STOP "${NETNS_PID[agent]}"
	etcd_kill
	etcd_start || { echo "Bail out! etcd did not restart"; exit 1; }
	push "$T/v3.json" --body-url "$BURL" --body-dir "$BODIES" >/dev/null 2>&1; R_1=$(erev)
	push "$T/v1.json" --body-url "$BURL" --body-dir "$BODIES" >/dev/null 2>&1; R_2=$(erev)
	ectl compact "$R_2" >/dev/null
	kill -CONT "${NETNS_PID[agent]}"
	status_until 15 "d['config_source']['revision'] == $R_2 and d['config_source']['state'] == 'watching'"
	check $? "two manifests then a compaction while the agent was away: it ends on the latest ($R_2)"
	[ "$(names)" = r1 ] && [ "$(applies "$R_2")" = 1 ] && [ "$(applies "$R_1")" = 0 ]
	check $? "  ... its body in force (r1 alone), applied once, the one between not at all"

	# --body-dir keeps the newest bodies: v3 then v1 above, v2 now
	S1=$(sha "$T/v1.json")
	push "$T/v2.json" --body-url "$BURL" --body-dir "$BODIES" --keep-bodies 2 >/dev/null 2>&1
	kept=$(cd "$BODIES" && ls | sort | tr '\n' ' ')
	want=$(printf '%s\n' "$S1.json" "$S1.json.gz" "$S2.json" "$S2.json.gz" | sort | tr '\n' ' ')
	[ "$kept" = "$want" ]
	check $? "push --keep-bodies 2: --body-dir holds the two newest bodies and their .gz, v3's gone ($kept)"

	# a rule file as the value, as `sluice push` wrote it before manifests
	eput "$T/v2.json"
	R_O=$(erev)
	status_until 5 "d['config_source']['revision'] == $R_O and d['config_source']['body'] is None"
	[ $? = 0 ] && [ "$(names)" = r1,r2 ]
	check $? "a rule file as the value (the format before manifests) is still applied ($R_O), its rules in force"

	push "$T/v3.json" --body-url "$BURL/nowhere" >"$T/push.out" 2>"$T/push.err"
	rc=$?
	[ "$rc" = 1 ] && grep -q "does not serve it: .*404" "$T/push.err" && [ "$(erev)" = "$R_O" ]
	check $? "push --body-url to a server without the body: exit 1 ($rc), nothing published"
	show "$T/push.err" 1
	netns_stop httpd
}
if command -v busybox >/dev/null; then
	manifest_cases
else
	skip "manifests" "busybox (its httpd: the body server) is not installed"
fi

# ---- tokend's flows from etcd --------------------------------------------
# tokend boots from --rules (count 500), then serves the key's value and
# every valid put; a refused one leaves the flows served as they were.
TKEY=/sluice/tokend-rules
TMETRICS=127.0.0.1:9465
crule() # COUNT: a cluster rule file
{
	printf '{"rules":[{"name":"fleet","match":{"proto":"udp","dport":9000},"grade":"pps","count":%s,"cluster":{"namespace":"web","flow_id":1,"threshold_type":"global"}}]}' "$1"
}
crule 500 >"$T/td.json"
tmetric() { ip netns exec "$NS_RX" curl -s "http://$TMETRICS/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
THRESH='sluice_tokend_flow_threshold{namespace="web",flow_id="1",rule="fleet"}'
tmetric_is() { [ "$(tmetric "$1")" = "$2" ]; }
wait_tmetric() { sl_until "$1" tmetric_is "$2" "$3"; } # SECS METRIC VALUE
ectl put "$TKEY" "$(crule 1000)" >/dev/null
netns_bg "$NS_RX" tokend "$SLUICE" tokend --listen 127.0.0.1:7070 \
	--rules "$T/td.json" --state-dir "$T/tdstate" --etcd "$EP" \
	--etcd-key "$TKEY" --metrics "$TMETRICS"
wait_tmetric 5 "$THRESH" 1000
check $? "tokend --etcd-key: boots from --rules (500), then serves the key's value (count $(tmetric "$THRESH"))"
ectl put "$TKEY" "$(crule 2000)" >/dev/null
wait_tmetric 5 "$THRESH" 2000
check $? "  ... and a put after (count $(tmetric "$THRESH"))"
ectl put "$TKEY" '{"rules":[{"name":"fleet"' >/dev/null
ectl put "$TKEY" "$(etcd_rule r1 9000 100 | sed 's/^/{"rules":[/; s/$/]}/')" >/dev/null
wait_tmetric 5 sluice_config_source_refused_total 2
rc=$?
[ $rc = 0 ] && [ "$(tmetric "$THRESH")" = 2000 ] &&
	grep -q "refused, the rules served stay: .*no rule has a cluster object" "$T/tokend.err"
check $? "  ... an invalid value and one without cluster rules refused (2), count 2000 still served"
kill -HUP "${NETNS_PID[tokend]}"
sleep 0.5
[ "$(tmetric "$THRESH")" = 2000 ]
check $? "  ... SIGHUP does not read --rules while etcd is the source"
netns_stop tokend
netns_bg "$NS_RX" tokend "$SLUICE" tokend --listen 127.0.0.1:7070 \
	--rules "$T/td.json" --state-dir "$T/tdstate" --metrics "$TMETRICS"
wait_tmetric 5 "$THRESH" 500
crule 700 >"$T/td.json"
kill -HUP "${NETNS_PID[tokend]}"
wait_tmetric 5 "$THRESH" 700
check $? "tokend without --etcd-key: SIGHUP serves --rules again (count $(tmetric "$THRESH"))"
echo '{"rules":[' >"$T/td.json"
kill -HUP "${NETNS_PID[tokend]}"
sleep 0.5
[ "$(tmetric "$THRESH")" = 700 ] && grep -q "SIGHUP: $T/td.json not served" "$T/tokend.err"
check $? "  ... a broken file on SIGHUP: refused, count 700 still served"
netns_stop tokend

# ---- bad options: usage errors before anything is loaded -----------------
ip netns exec "$NS_RX" "$SLUICE" agent --iface veth-rx --state-dir "$T/bad" \
	--pin-dir "$SL_BPFFS/bad" --etcd 127.0.0.1:2379 --etcd-key "$KEY" 2>"$T/bad.err"
rc=$?
[ "$rc" = 2 ] && grep -q "'127.0.0.1:2379': not a URL" "$T/bad.err" && [ ! -e "$SL_BPFFS/bad" ]
check $? "--etcd without http://: exit 2 ($rc), saying so, nothing loaded"
ip netns exec "$NS_RX" "$SLUICE" agent --iface veth-rx --state-dir "$T/bad" \
	--pin-dir "$SL_BPFFS/bad" --etcd "$EP" 2>"$T/bad.err"
rc=$?
[ "$rc" = 2 ] && grep -q -- "--etcd needs --etcd-key (the rules) or --election" "$T/bad.err"
check $? "--etcd without --etcd-key or --election: exit 2 ($rc)"
ip netns exec "$NS_RX" "$SLUICE" agent --iface veth-rx --state-dir "$T/bad" \
	--pin-dir "$SL_BPFFS/bad" --etcd "$EP" --election /e --advertise 127.0.0.1:1 2>"$T/bad.err"
rc=$?
[ "$rc" = 2 ] && grep -q -- "--election needs --serve-tokens and --etcd" "$T/bad.err"
check $? "--election without --serve-tokens: exit 2 ($rc)"
ip netns exec "$NS_RX" "$SLUICE" tokend --listen 127.0.0.1:7070 --rules "$T/td.json" --state-dir "$T/bad" \
	--etcd-key "$TKEY" 2>"$T/bad.err"
rc=$?
[ "$rc" = 2 ] && grep -q -- "--etcd-key needs --etcd" "$T/bad.err"
check $? "tokend --etcd-key without --etcd: exit 2 ($rc)"

echo "1..$n"
