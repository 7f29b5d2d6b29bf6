#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The agent's boot from its snapshot, and the refusals that keep "configured"
# equal to "in force" (brief, failure stories 2 and 4; docs/operations.md).
# Functional only, no traffic:
#   - a corrupt rules.json (truncated, bad JSON, a count edited under its
#     checksum, an unknown format version, empty) and no .prev: the agent
#     refuses to start (exit 1), names the file and the problem, and leaves
#     the file alone;
#   - the same with a good rules.json.prev: it starts from .prev, warns
#     loudly (naming the .prev file), and status shows from_prev and the
#     previous version in force; the next change writes a good rules.json;
#   - no snapshot and no --rules: refused, saying why;
#   - an empty rule file: refused without --allow-empty (and the snapshot
#     is left as it was), ready with it;
#   - `rule del` of the last rule without --allow-empty: refused, the rule
#     stays in force;
#   - the control socket is mode 0600; a second agent on the same state
#     directory refuses to start, and the first one goes on.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "agent snapshot"
netns_setup asnap 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

# has FILE TEXT...: every TEXT occurs in FILE (fixed strings)
has()
{
	local f=$1 t

	shift
	for t in "$@"; do
		grep -qF -- "$t" "$f" || { echo "#   missing: $t"; return 1; }
	done
}

if [ -n "${SLUICE_VM:-}" ]; then
	READY_S=120
	export SL_FG_TIMEOUT=120
else
	READY_S=10
fi
T=$NETNS_TMP
rule() # NAME PORT COUNT
{
	printf '{"name":"%s","match":{"proto":"udp","dport":%s},"grade":"pps","count":%s}' "$1" "$2" "$3"
}
echo "{\"rules\":[$(rule r1 9000 1000)]}" >"$T/v1.json"
echo "{\"rules\":[$(rule r1 9000 1000),$(rule r2 9001 2000)]}" >"$T/v2.json"
echo '{"rules":[]}' >"$T/empty.json"
CUR=$SL_STATE/rules.json
PREV=$SL_STATE/rules.json.prev
SOCK=$SL_STATE/sluice.sock

xdp_attached() { ip -n "$NS_RX" link show dev veth-rx | grep -q 'prog/xdp'; }

# ---- no snapshot, no --rules ---------------------------------------------
sluice_agent_fg "$T/fg.err"
rc=$?
check $(( rc == 1 ? 0 : 1 )) "no snapshot and no --rules: refused with exit 1 (got $rc)"
has "$T/fg.err" "no snapshot" "$CUR" "no --rules" "refusing to start" ||
	show "$T/fg.err"
check $? "  ... the message names the file and says why"
[ ! -e "$SOCK" ] && ! xdp_attached
check $? "  ... and leaves no socket behind and nothing attached"

# ---- a good snapshot at version 2, with version 1 as .prev ---------------
sluice_bg a1 --rules "$T/v1.json"
sluice_wait_ready a1 "$READY_S" ||
	{ echo "Bail out! the agent did not start"; show "$T/a1.err" 20; exit 1; }
sluice_cli rule replace "$T/v2.json" >/dev/null
check $? "setup: rule replace writes version 2"
mode=$(stat -c '%a %U %F' "$SOCK")
check $([ "$mode" = "600 root socket" ]; echo $?) \
	"the control socket is mode 0600, owned by root ($mode)"

# a second agent on the same state directory
sluice_agent_fg "$T/fg.err"
rc=$?
check $(( rc == 1 ? 0 : 1 )) "a second agent on the same state dir refuses to start (exit $rc)"
has "$T/fg.err" "another agent answers on $SOCK" || show "$T/fg.err"
check $? "  ... saying another agent answers on $SOCK"
sluice_cli status --ready && [ -S "$SOCK" ] &&
	[ "$(sluice_cli status -j | sluice_json 'd["pid"]')" = "${NETNS_PID[a1]}" ] &&
	[ "$(sluice_cli rule list -j | sluice_json 'd["version"]')" = 2 ]
check $? "  ... and the first agent still answers, ready, at version 2"

netns_stop a1
cp "$CUR" "$T/good-v2.json"
cp "$PREV" "$T/good-v1.json"
check $(python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
sys.exit(0 if (a["version"], b["version"]) == (2, 1) and
         [r["name"] for r in a["rules"]] == ["r1", "r2"] and
         [r["name"] for r in b["rules"]] == ["r1"] else 1)' \
	"$T/good-v2.json" "$T/good-v1.json"; echo $?) \
	"setup: rules.json is version 2 (r1, r2), rules.json.prev version 1 (r1)"

# ---- corrupt rules.json, no .prev: refused -------------------------------
corrupt() # CASE: write a corrupt $CUR from good-v2.json
{
	case $1 in
	truncated) head -c 300 "$T/good-v2.json" >"$CUR" ;;
	bad-json) sed '0,/"version":/s//"version"/' "$T/good-v2.json" >"$CUR" ;;
	checksum) sed '0,/"count":\t1000/s//"count":\t1001/' "$T/good-v2.json" >"$CUR" ;;
	format) sed 's/"sluice_snapshot":\t1,/"sluice_snapshot":\t2,/' "$T/good-v2.json" >"$CUR" ;;
	empty) : >"$CUR" ;;
	esac
}
declare -A WHY=(
	[truncated]="the file is truncated"
	[bad-json]="not valid JSON at line 3"
	[checksum]="checksum mismatch"
	[format]="snapshot format 2 is not supported"
	[empty]="empty file (0 bytes)"
)
rm -f "$PREV"
for c in truncated bad-json checksum format empty; do
	corrupt "$c"
	if cmp -s "$CUR" "$T/good-v2.json"; then
		check 1 "corrupt snapshot ($c): the test failed to damage the file"
		continue
	fi
	cp "$CUR" "$T/bad.json"
	sluice_agent_fg "$T/fg.err"
	rc=$?
	check $(( rc == 1 ? 0 : 1 )) "corrupt snapshot ($c), no .prev: refused with exit 1 (got $rc)"
	has "$T/fg.err" "$CUR: " "${WHY[$c]}" "refusing to start" "no $PREV to fall back to" ||
		show "$T/fg.err"
	check $? "  ... stderr names $CUR and the problem (${WHY[$c]})"
	cmp -s "$CUR" "$T/bad.json" && [ ! -e "$PREV" ] && [ ! -e "$SOCK" ]
	check $? "  ... the file is left as it was, no .prev made, no socket left"
done

# ---- corrupt rules.json, good .prev: boots from .prev, loudly ------------
corrupt checksum
cp "$T/good-v1.json" "$PREV"
sluice_bg a2
sluice_wait_ready a2 "$READY_S"
check $? "corrupt rules.json with a good .prev: the agent starts and is ready"
has "$T/a2.err" "USING THE PREVIOUS SNAPSHOT $PREV (version 1)" "$CUR: checksum mismatch" ||
	show "$T/a2.err"
check $? "  ... warning loudly on stderr, naming $PREV and why $CUR was rejected"
st=$(sluice_cli status -j)
check $([ "$(sluice_json 'd["snapshot"]["from_prev"] and d["snapshot"]["version"] == 1 and d["in_force_version"] == 1 and d["rules_in_force"] == 1' <<<"$st")" = true ]; echo $?) \
	"  ... status -j: snapshot.from_prev true, version 1 in force with its 1 rule"
check $([ "$(sluice_cli rule list -j | sluice_json '[r["name"] for r in d["rules"]] == ["r1"] and d["version"] == 1')" = true ]; echo $?) \
	"  ... rule list shows version 1's rules (r1 only)"
sluice_cli status | grep -q '\.prev'
check $? "  ... and plain status mentions the .prev copy"
echo "{\"rules\":[$(rule r3 9003 3000)]}" >"$T/r3.json"
out=$(sluice_cli rule add "$T/r3.json" -j)
check $? "  ... a change is accepted while running from .prev"
check $(python3 -c '
import json, sys
st, cur, prev, good = sys.argv[1], *(open(f).read() for f in sys.argv[2:])
d = json.loads(st); c = json.loads(cur)
ok = (not d["snapshot"]["from_prev"] and d["snapshot"]["version"] == c["version"] == 3
      and [r["name"] for r in c["rules"]] == ["r1", "r3"] and prev == good)
sys.exit(0 if ok else 1)' "$(sluice_cli status -j)" "$CUR" "$PREV" "$T/good-v1.json"; echo $?) \
	"  ... and writes a good rules.json (r1, r3) as version 3 (2 named the damaged file), keeping the good .prev; from_prev is now false"

# ---- rule del of the last rule without --allow-empty ---------------------
sluice_cli rule del r3 >/dev/null
check $? "setup: rule del r3 (r1 left)"
v=$(sluice_cli rule list -j | sluice_json 'd["version"]')
cp "$CUR" "$T/before-del.json"
sluice_cli rule del r1 >"$T/del.out" 2>"$T/del.err"
rc=$?
check $(( rc == 1 ? 0 : 1 )) "rule del of the last rule without --allow-empty: refused with exit 1 (got $rc)"
has "$T/del.err" "refusing to leave no rules in force" || show "$T/del.err"
check $? "  ... saying it would leave no rules in force"
check $([ "$(sluice_cli rule list -j | sluice_json '[r["name"] for r in d["rules"]] == ["r1"] and d["version"] == '"$v")" = true ] &&
	[ "$(sluice_rule_stat r1 count)" = 1000 ] && cmp -s "$CUR" "$T/before-del.json" &&
	sluice_cli status --ready; echo $?) \
	"  ... r1 stays in force (rule list, stats), version $v and the snapshot unchanged, still ready"
netns_stop a2

# ---- an empty rule file ---------------------------------------------------
cp "$CUR" "$T/before-empty.json"
cp "$PREV" "$T/before-empty.prev"
sluice_agent_fg "$T/fg.err" --rules "$T/empty.json"
rc=$?
check $(( rc == 1 ? 0 : 1 )) "an empty rule file without --allow-empty: refused with exit 1 (got $rc)"
has "$T/fg.err" "no rules" "--allow-empty" || show "$T/fg.err"
check $? "  ... saying there would be no rules, and how to allow it"
cmp -s "$CUR" "$T/before-empty.json" && cmp -s "$PREV" "$T/before-empty.prev"
check $? "  ... and the refused start left the snapshot and .prev as they were"
sluice_agent_fg "$T/fg.err" --rules "$T/v0-missing.json"
rc=$?
check $(( rc == 1 ? 0 : 1 )) "an unreadable rule file: refused with exit 1 (got $rc)"
has "$T/fg.err" "$T/v0-missing.json" || show "$T/fg.err"
check $? "  ... naming the file"

sluice_bg a3 --rules "$T/empty.json" --allow-empty
sluice_wait_ready a3 "$READY_S"
check $? "an empty rule file with --allow-empty: the agent starts"
sluice_cli status --ready
check $? "  ... and status --ready exits 0"
check $([ "$(sluice_cli status -j | sluice_json 'd["allow_empty"] and d["rules_in_force"] == 0 and d["ready"]')" = true ]; echo $?) \
	"  ... status -j: allow_empty, 0 rules in force, ready"
netns_stop a3

# ---- no snapshot at all, --allow-empty ------------------------------------
SL_STATE=$T/state-fresh
SOCK=$SL_STATE/sluice.sock
sluice_bg a4 --allow-empty
sluice_wait_ready a4 "$READY_S"
check $? "no snapshot, no --rules, --allow-empty: the agent starts and is ready"
sluice_cli rule add "$T/v1.json" >/dev/null && sluice_cli rule del r1 >/dev/null &&
	sluice_cli status --ready
check $? "  ... with --allow-empty, rule del of the last rule is accepted and it stays ready"
netns_stop a4
echo "1..$n"
