#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Where the rules come from (docs/operations.md, "Where the rules come
# from"): an agent started with --rules FILE, changed through the CLI:
#   - a restart with the same, unchanged FILE keeps the CLI's changes,
#     and says so;
#   - `rule save` writes the rules in force as a rule file that `check`
#     and `rule replace` read back, and `rule replace` of the rules in
#     force changes nothing (the version is kept);
#   - `--dry-run` of add, del and replace shows the change and makes none;
#   - FILE edited after the CLI changed the rules: the start is refused,
#     naming both, the data plane keeps the rules in force; with
#     --replace-snapshot the file wins and the log names what went;
#   - FILE edited with no CLI change since: the file is taken;
#   - `push --dry-run` shows what a push would change of the etcd key and
#     publishes nothing.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh
source tests/lib/etcd.sh

skip_unless_root_and_xdp "rule source"
netns_setup rsrc 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
if [ -n "$VM" ]; then WAIT_S=120; else WAIT_S=10; fi

rule() # NAME PORT COUNT
{
	printf '{"name":"%s","match":{"proto":"udp","dport":%s},"grade":"pps","count":%s}' "$1" "$2" "$3"
}
ruleset() # FILE RULE...
{
	local f=$1 IFS=,

	shift
	echo "{\"rules\":[$*]}" >"$f"
}
names() { sluice_cli rule list -j | sluice_json '" ".join(r["name"] + ":" + str(r["count"]) for r in d["rules"])'; }
version() { sluice_cli rule list -j | sluice_json 'd["version"]'; }
agent() # [OPTIONS]: (re)start the agent with --rules $T/base.json
{
	netns_stop agent >/dev/null 2>&1
	sluice_bg agent --rules "$T/base.json" "$@"
	sluice_wait_ready agent "$WAIT_S"
}

ruleset "$T/base.json" "$(rule a 9000 1000)" "$(rule b 9001 2000)"
ruleset "$T/more.json" "$(rule c 9002 3000)"
agent || { echo "Bail out! the agent did not start"; show "$T/agent.err" 10; exit 1; }
sluice_cli rule add "$T/more.json" >/dev/null
check $([ "$(names)" = "a:1000 b:2000 c:3000" ] && echo 0 || echo 1) \
	"rule add: c in force with a and b ($(names))"

# ---- a restart with the file unchanged keeps the CLI's change ----
v0=$(version)
agent || { echo "Bail out! the agent did not restart"; show "$T/agent.err" 10; exit 1; }
check $([ "$(names)" = "a:1000 b:2000 c:3000" ] && [ "$(version)" = "$v0" ] &&
	echo 0 || echo 1) \
	"restart with the same --rules: the CLI's rule c kept, version $v0 kept ($(names), version $(version))"
grep -qF "keeping the snapshot (version $v0): the CLI changed the rules since $T/base.json was loaded, and the file did not change; the file would have removed c" "$T/agent.err"
check $? "... and the log says so, naming rule c"

# ---- rule save, and a replace that changes nothing ----
sluice_cli rule save "$T/saved.json" >"$T/save.out" 2>&1
rc=$?
ip netns exec "$NS_RX" "$SLUICE" check "$T/saved.json" >/dev/null 2>&1
check $((rc == 0 && $? == 0 ? 0 : 1)) "rule save: exit $rc, the file passes check ($(cat "$T/save.out"))"
out=$(sluice_cli rule replace "$T/saved.json" 2>&1)
check $([ "$out" = "rules unchanged: version $v0 kept, 3 in force" ] &&
	[ "$(version)" = "$v0" ] && echo 0 || echo 1) \
	"rule replace of the saved rules: '$out', version $(version)"
sluice_cli rule save - >"$T/stdout.json" 2>/dev/null
cmp -s "$T/saved.json" "$T/stdout.json"
check $? "rule save -: the same document on stdout"

# ---- --dry-run ----
out=$(sluice_cli rule del c b --dry-run 2>&1)
check $([ "$out" = "dry run, nothing changed (version $v0): removed b, c" ] &&
	[ "$(names)" = "a:1000 b:2000 c:3000" ] && [ "$(version)" = "$v0" ] &&
	echo 0 || echo 1) "rule del --dry-run: '$out', nothing changed"
ruleset "$T/next.json" "$(rule a 9000 1500)" "$(rule d 9003 10)"
out=$(sluice_cli rule replace "$T/next.json" --dry-run 2>&1)
check $([ "$out" = "dry run, nothing changed (version $v0): added d; removed b, c; changed a" ] &&
	[ "$(version)" = "$v0" ] && echo 0 || echo 1) "rule replace --dry-run: '$out'"
out=$(sluice_cli rule replace "$T/next.json" --dry-run -j 2>&1)
check $([ "$(sluice_json 'd["diff"]["added"] == ["d"] and d["dry_run"]' <<<"$out")" = true ] &&
	echo 0 || echo 1) "... -j: the diff as JSON"

# ---- the file edited after the CLI changed the rules: refused ----
ruleset "$T/base.json" "$(rule a 9000 1111)" "$(rule b 9001 2000)"
netns_stop agent >/dev/null 2>&1
sluice_agent_fg "$T/refused.err" --rules "$T/base.json"
rc=$?
grep -qF "$T/base.json changed since it was loaded, and the CLI changed the snapshot (version $v0) since too: refusing to drop the changes of either (the file would have removed c; changed a)" "$T/refused.err"
check $((rc != 0 && rc != 124 && $? == 0 ? 0 : 1)) \
	"file edited and CLI changes: start refused (exit $rc), both named"
show "$T/refused.err" 3
python3 - "$SL_STATE/rules.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if [r["name"] for r in d["rules"]] == ["a", "b", "c"] else 1)
PY
check $? "... the snapshot left as it was (a, b, c)"
agent --replace-snapshot ||
	{ echo "Bail out! the agent did not start"; show "$T/agent.err" 10; exit 1; }
check $([ "$(names)" = "a:1111 b:2000" ] &&
	grep -qF "$T/base.json replaces the snapshot (version $v0, changed by the CLI): removed c; changed a" "$T/agent.err" &&
	echo 0 || echo 1) "--replace-snapshot: the file wins ($(names)), the log names what went"

# ---- the file edited, no CLI change since: taken ----
v1=$(version)
ruleset "$T/base.json" "$(rule a 9000 1111)" "$(rule b 9001 2222)"
agent || { echo "Bail out! the agent did not restart"; show "$T/agent.err" 10; exit 1; }
check $([ "$(names)" = "a:1111 b:2222" ] && [ "$(version)" = $((v1 + 1)) ] &&
	grep -qF "$T/base.json changed since version $v1: changed b" "$T/agent.err" &&
	echo 0 || echo 1) "file edited, no CLI change: taken ($(names), version $(version))"
netns_stop agent >/dev/null 2>&1

# ---- push --dry-run ----
ETCD_EP=http://127.0.0.1:2379
etcd_start || { echo "Bail out! etcd did not start"; exit 1; }
push() { ip netns exec "$NS_RX" "$SLUICE" push --etcd "$ETCD_EP" --etcd-key /sluice/rules "$@"; }
push "$T/base.json" >/dev/null
rev=$(ectl get /sluice/rules -w json | sluice_json 'd["kvs"][0]["mod_revision"]')
out=$(push "$T/next.json" --dry-run 2>&1)
rev2=$(ectl get /sluice/rules -w json | sluice_json 'd["kvs"][0]["mod_revision"]')
check $([ "$out" = "dry run, nothing published (/sluice/rules at revision $rev): added d; removed b; changed a" ] &&
	[ "$rev2" = "$rev" ] && echo 0 || echo 1) "push --dry-run: '$out', the key still at revision $rev2"
etcd_kill
echo "1..$n"
