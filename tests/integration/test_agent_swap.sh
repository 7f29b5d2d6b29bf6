#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Atomic rule-set swap under a flood (docs/architecture.md, "Two rule
# sets"): `rule replace` flips between two sets A and B a few hundred times
# while two paced floods run, and no packet may see a mix of the two.
#
# The design, and why a torn view would show:
#
#   flow P: udp to 198.18.0.2:9000, paced (pktsend, 10k pps, exact count)
#   flow Q: udp to 198.18.0.2:9001, bursts at line rate (xdpflood, 1M pps
#           on average): many packets in flight at the instant of a flip
#           (pktsend under SLUICE_VM=1, and at 300k pps on a host that
#           refuses live frames)
#
#   rule  match                          A           B
#   x     udp 9000, dst 198.18.0.0/24    priority 2  priority 1
#   y     udp 9000, dst 198.18.0.2/32    priority 1  priority 2
#   keep  udp 9001, dst 198.18.0.0/24    (no priority, in both)
#   only-a udp 9002 (no traffic)         present     -
#   only-b udp 9003 (no traffic)         -           present
#
# Every count is 1e11: nothing is dropped, and a packet's judge shows in
# the counters. Priority is not part of a rule's definition, so x, y and
# keep keep their slots and totals across every flip, while each flip
# still writes a complete new port table and new trie entries: A judges P
# with x, B with y (y's longer prefix loses to x's priority in A and wins
# in B). only-a and only-b are created fresh and freed at every flip. All
# of P and Q needs the trie stage (every rule has a dst), so a packet that
# met one set's port table and the other set's (deleted or not yet
# written) trie entries finds no rule.
#
# What a torn or stale view would do, and the check that sees it:
#   - a packet that found no rule (old trie entries deleted before the
#     readers left, a port table written in place, a flip before the new
#     set was complete) passes unjudged: the rule totals then fall short
#     of the packets rxcount (tc ingress, independent of sluice) and the
#     senders counted; check: x + y = sent to 9000, x + y + keep =
#     rxcount, exactly; host.unmatched and no_rule_cfg do not grow. The
#     line-rate bursts of Q make a flip land on packets being classified:
#     a variant of sluice that deletes the old trie entries without
#     waiting for the RCU grace period fails these checks;
#   - a packet judged through a slot that was freed or re-initialised
#     under it lands in only-a/only-b or in a zeroed slot: only-a and
#     only-b must count nothing; x, y and keep must never go backwards
#     and must add up as above;
#   - a packet judged by the set that is no longer active: after each
#     acknowledged replace (the agent waited for an RCU grace period), two
#     stats reads in a row must see the inactive set's winner (y under A,
#     x under B) standing still, while the active one moves.
# Also: every replace is acknowledged and the version goes up by exactly
# one per flip.
#
# Before the flips, under both floods, a replace by A and 100 rules more
# (no traffic) gives the set slots beyond rule_cpu's 64 a CPU: the agent
# grows it, a new program with a larger rule_cpu taking the link over
# (docs/architecture.md, "rule_cpu follows the rules in force"); the exact
# counts below cover that switch too.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "agent swap"
netns_setup aswp 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }


if [ -n "${SLUICE_VM:-}" ]; then
	# no xdpflood in a TCG guest: its test runs re-patch the XDP
	# dispatcher while veth runs it, and a 6.12 guest died of that
	# (Oops: int3 in bpf_dispatcher_xdp_func)
	RATE=300 QGEN=pktsend QRATE=1000 FLIPS=60 FLIP_S=40 READY_S=120
	MINFLIPS=4 GAP=0.1
else
	pick_flood_gen
	RATE=10000 QGEN=$FLOOD_GEN QRATE=1000000 FLIPS=2000 FLIP_S=35
	READY_S=10 MINFLIPS=100 GAP=0
	[ "$QGEN" = xdpflood ] || QRATE=300000
fi
T=$NETNS_TMP

# no stray packets on veth-rx: IPv6 on veth-tx would send router
# solicitations and MLD reports (they would count as unmatched)
ip netns exec "$NS_TX" sysctl -qw net.ipv6.conf.veth-tx.disable_ipv6=1

python3 - "$T" <<'PY'
import json, sys
T = sys.argv[1]
def rule(name, port, dst=None, prio=None):
    r = {"name": name, "match": {"proto": "udp", "dport": port},
         "grade": "pps", "count": 100000000000}
    if dst:
        r["match"]["dst"] = dst
    if prio:
        r["priority"] = prio
    return r
A = [rule("x", 9000, "198.18.0.0/24", 2), rule("y", 9000, "198.18.0.2/32", 1),
     rule("keep", 9001, "198.18.0.0/24"), rule("only-a", 9002, "198.18.0.0/24")]
B = [rule("x", 9000, "198.18.0.0/24", 1), rule("y", 9000, "198.18.0.2/32", 2),
     rule("keep", 9001, "198.18.0.0/24"), rule("only-b", 9003, "198.18.0.0/24")]
json.dump({"rules": A}, open(f"{T}/A.json", "w"))
pad = [rule(f"pad{i}", 9100 + i, "198.18.0.0/24") for i in range(100)]
json.dump({"rules": A + pad}, open(f"{T}/Apad.json", "w"))
json.dump({"rules": B}, open(f"{T}/B.json", "w"))
PY

sluice_bg agent --rules "$T/A.json"
sluice_wait_ready agent "$READY_S" ||
	{ echo "Bail out! the agent did not start"; show "$T/agent.err" 20; exit 1; }
sluice_cli stats -j >"$T/stats0.json"

netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --proto udp --drop \
	--duration 60
netns_wait_ready rx 5 || { echo "Bail out! rxcount did not start"; exit 1; }
sl_bg g1 ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
	--dst-mac "$RX_MAC" --dport 9000 --rate "$RATE" \
	--duration $((FLIP_S + 10)) --cpu 0 >"$T/gen.9000"
sl_bg g2 ip netns exec "$NS_TX" "$GEN_BIN/$QGEN" --dev veth-tx \
	--dst-mac "$RX_MAC" --dport 9001 --rate "$QRATE" \
	--duration $((FLIP_S + 10)) --cpu 1 >"$T/gen.9001"
sleep 0.5
"$SLUICE" rule replace "$T/Apad.json" -j --state-dir "$SL_STATE" \
	>"$T/grow.out" 2>&1
grow=$?
sleep 0.5

# The flips: `sluice rule replace` (the CLI), then two stats reads on the
# control socket (GAP s apart), alternately A and B, at most FLIPS times
# or FLIP_S s.
python3 - "$SLUICE" "$SL_STATE" "$T" "$FLIPS" "$FLIP_S" "$GAP" >"$T/flips.out" <<'PY'
import json, socket, subprocess, sys, time
sluice, state, T, flips, budget, gap = sys.argv[1], sys.argv[2], sys.argv[3], \
    int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
def stats():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(f"{state}/sluice.sock")
    s.sendall(b'{"cmd":"stats"}')
    s.shutdown(socket.SHUT_WR)
    buf = b""
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        buf += b
    s.close()
    d = json.loads(buf)
    return {r["name"]: r["passed_pkts"] + r["blocked_pkts"] for r in d["rules"]}, d["host"]
res = {"flips": 0, "acked": 0, "failed": [], "versions_ok": True,
       "stale": [], "active_moved": 0, "backwards": [], "only_counted": [],
       "present_wrong": []}
last = {}
version = None
t_end = time.monotonic() + budget
k = 0
while k < flips and time.monotonic() < t_end:
    name = "B" if k % 2 == 0 else "A"
    k += 1
    res["flips"] = k
    try:
        p = subprocess.run([sluice, "rule", "replace", f"{T}/{name}.json",
                            "-j", "--state-dir", state],
                           capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            res["failed"].append(f"flip {k}: exit {p.returncode}: {p.stderr.strip()}")
            break
        res["acked"] += 1
        v = json.loads(p.stdout)["version"]
        s1, _ = stats()
        time.sleep(gap)
        s2, _ = stats()
    except Exception as e:
        res["failed"].append(f"flip {k}: {e!r}")
        break
    if version is not None and v != version + 1:
        res["versions_ok"] = False
    version = v
    winner, loser = ("y", "x") if name == "B" else ("x", "y")
    only = "only-b" if name == "B" else "only-a"
    gone = "only-a" if name == "B" else "only-b"
    if sorted(s1) != sorted(["x", "y", "keep", only]) or gone in s2:
        res["present_wrong"].append(f"flip {k} ({name}): {sorted(s1)}")
    if s2[loser] != s1[loser]:
        res["stale"].append(f"flip {k} ({name}): {loser} moved by {s2[loser] - s1[loser]}")
    if s2[winner] > s1[winner]:
        res["active_moved"] += 1
    for r in ("x", "y", "keep"):
        for s in (s1, s2):
            if s[r] < last.get(r, 0):
                res["backwards"].append(f"flip {k}: {r} {last[r]} -> {s[r]}")
            last[r] = s[r]
    for s in (s1, s2):
        if s.get(only, 0):
            res["only_counted"].append(f"flip {k}: {only} = {s[only]}")
res["last_version"] = version
print(json.dumps(res))
PY
rc=$?
kill -TERM "$g1" "$g2" 2>/dev/null
sl_wait "$g1" "$g2"
sleep 0.3
netns_stop rx
sluice_cli stats -j >"$T/stats1.json"
[ "$rc" = 0 ] || { echo "# the flip driver failed"; show "$T/flips.out"; }

python3 - "$T" <<'PY' >"$T/summary"
import json, sys
T = sys.argv[1]
f = json.load(open(f"{T}/flips.out"))
s0, s1 = (json.load(open(f"{T}/stats{i}.json")) for i in (0, 1))
tot = {r["name"]: r["passed_pkts"] + r["blocked_pkts"] for r in s1["rules"]}
blocked = sum(r["blocked_pkts"] for r in s1["rules"])
sent = {p: json.load(open(f"{T}/gen.{p}"))["sent"] for p in (9000, 9001)}
rx = json.load(open(f"{T}/rx.out"))["packets"]
print(f"flips={f['flips']} acked={f['acked']} versions_ok={int(f['versions_ok'])} "
      f"last_version={f['last_version'] or 0} stale={len(f['stale'])} "
      f"active_moved={f['active_moved']} backwards={len(f['backwards'])} "
      f"only_counted={len(f['only_counted'])} present_wrong={len(f['present_wrong'])} "
      f"x={tot.get('x', -1)} y={tot.get('y', -1)} keep={tot.get('keep', -1)} "
      f"blocked={blocked} sent9000={sent[9000]} sent9001={sent[9001]} rx={rx} "
      f"unmatched={s1['host']['unmatched'] - s0['host']['unmatched']} "
      f"no_rule_cfg={s1['host']['no_rule_cfg'] - s0['host']['no_rule_cfg']}")
for k in ("failed", "stale", "backwards", "only_counted", "present_wrong"):
    for line in f[k][:5]:
        print(f"detail {k}: {line}")
PY
echo "# $(head -n1 "$T/summary")"
grep '^detail' "$T/summary" | sed 's/^/#   /'
declare -A S=()
for kv in $(head -n1 "$T/summary"); do S[${kv%%=*}]=${kv#*=}; done

check $(( grow == 0 ? 0 : 1 )) \
	"under the floods, 104 rules grow rule_cpu: $(grep -o 'rule_cpu: [0-9]* slots per CPU (was [0-9]*)' "$T/agent.err" | head -n1)"
check $(grep -q 'rule_cpu: 128 slots per CPU (was 64)' "$T/agent.err"; echo $?) \
	"  ... from 64 to 128 slots a CPU, a new program on the link"
check $(( ${S[acked]:-0} == ${S[flips]:-1} && ${S[flips]:-0} >= MINFLIPS ? 0 : 1 )) \
	"every one of ${S[flips]:-0} replaces (A<->B, CLI) was acknowledged"
check $(( ${S[versions_ok]:-0} == 1 && ${S[last_version]:-0} == 2 + ${S[acked]:-0} ? 0 : 1 )) \
	"the version went up by one per flip (2 -> ${S[last_version]:-?})"
check $(( ${S[present_wrong]:-1} == 0 ? 0 : 1 )) \
	"after each flip stats shows exactly the new set's rules"
check $(( ${S[stale]:-1} == 0 ? 0 : 1 )) \
	"after each acknowledged flip the old set's winner stands still (stale judgments: ${S[stale]:-?})"
check $(( ${S[active_moved]:-0} * 2 >= ${S[flips]:-1} ? 0 : 1 )) \
	"  ... while the new set's winner counted (moved after ${S[active_moved]:-0} of ${S[flips]:-0} flips)"
check $(( ${S[only_counted]:-1} == 0 ? 0 : 1 )) \
	"only-a/only-b (fresh at every flip, no traffic) never counted a packet"
check $(( ${S[backwards]:-1} == 0 ? 0 : 1 )) \
	"x, y and keep never went backwards across the flips"
check $(( ${S[x]:-0} > 0 && ${S[y]:-0} > 0 && ${S[x]:-0} + ${S[y]:-0} == ${S[sent9000]:--1} ? 0 : 1 )) \
	"every packet to 9000 judged by x or y: ${S[x]:-?} + ${S[y]:-?} = sent ${S[sent9000]:-?}"
check $(python3 -c "import sys; sys.exit(0 if 0.999 * ${S[sent9001]:-1} <= ${S[keep]:--1} <= ${S[sent9001]:-0} else 1)"; echo $?) \
	"keep (in both sets, unchanged) counted the 9001 flood across all flips: ${S[keep]:-?} of ${S[sent9001]:-?} sent ($QGEN)"
check $(( ${S[x]:-0} + ${S[y]:-0} + ${S[keep]:-0} == ${S[rx]:--1} && ${S[blocked]:-1} == 0 ? 0 : 1 )) \
	"rxcount (tc ingress) saw exactly the judged packets: ${S[rx]:-?}, none blocked"
check $(( ${S[unmatched]:-1} == 0 && ${S[no_rule_cfg]:-1} == 0 ? 0 : 1 )) \
	"no packet went unmatched or to a slot without configuration (unmatched +${S[unmatched]:-?}, no_rule_cfg +${S[no_rule_cfg]:-?})"
echo "1..$n"
