#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Upgrading across a change of the pinned layout (docs/operations.md,
# "Upgrading"), all under one paced flood (50k pps against a udp rule of
# count 20000):
#   1. the previous release runs the data plane: built from PREV, the last
#      commit whose maps lay flat in the pin directory;
#   2. this build takes it over: its maps have the same shapes but
#      rule_cpu's (has_breaker, added since), so they are shared and
#      re-pinned under layout-ID, rule_cpu carried, the link moves to links/;
#      src_cache, a per-CPU array there and a flat one here, moves each
#      CPU's lines to its own range;
#   3. "probe", this tree with a field added at the head of the fast
#      path's per-CPU state, the budget, a source's state, the slot
#      metadata and the .bss: the upgrade carries those maps field by field;
#   4. this build again (a downgrade, made the same way); 3 and 4 without
#      CAP_SYS_ADMIN: the layout's BTF is pinned beside its maps;
#   5. the previous release again, which cannot read layouts: it is refused
#      (exits non-zero) and changes nothing;
#   6. this build restarts over its own layout (a plain adoption).
# Over the whole flood no 1 s window (sliding) admits above 1.05 x count,
# and from 2 s in (a fresh rule's first burst and the pacing after it are
# over; the first upgrade is at 2.5 s) no second below 0.95 x count (its
# seconds, from the flood's start; a second in which the sender stalled
# more than 25 ms is named and not judged, and all but two at most are
# judged: the pacing's ripple alone takes sliding
# windows to 0.96 x count without any upgrade, docs/operations.md); each agent's counters go on from the last one's; at the end
# sluice's passed total equals what rxcount saw at tc ingress.
# Host only: it builds two other trees (tests/tests.mk keeps it out of VMs).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

PREV=eac1319a4c1299ebe7f956071e1dcf895986d47b
COUNT=20000 RATE=50000 RULE=udp9000

skip_unless_root_and_xdp "upgrade"
if ! git cat-file -e "$PREV^{commit}" 2>/dev/null; then
	skip "upgrade from the previous release" \
		"commit $PREV is not in this clone (shallow?)"
	echo "1..$n"
	exit 0
fi
netns_setup upgr 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

pyok() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; echo $?; }

# ---- the three builds ----------------------------------------------------
B=$NETNS_TMP/builds
mkdir -p "$B/prev" "$B/probe"
git archive "$PREV" | tar -x -C "$B/prev"
tar -c Makefile bpf user tests/tests.mk deploy | tar -x -C "$B/probe"
sed -i -e '/^struct sluice_\(rule_cpu\|budget\|src_state\|rule_meta\) {$/a\
\t__u64 layout_probe;' "$B/probe/bpf/sluice_abi.h"
sed -i -e '/^volatile __u32 set_gen;$/i\
volatile __u64 layout_probe;' "$B/probe/bpf/maps.h"
probes=$(cat "$B/probe/bpf/sluice_abi.h" "$B/probe/bpf/maps.h" | grep -c layout_probe)
for t in prev probe; do
	make -C "$B/$t" -j2 build/sluice >"$B/$t.log" 2>&1 ||
		{ echo "Bail out! building $t failed"; tail -5 "$B/$t.log"; exit 1; }
done
check $((probes == 5 ? 0 : 1)) "built the previous release and probe ($probes of 5 fields added)"
declare -A BIN=([prev]=$B/prev/build/sluice [probe]=$B/probe/build/sluice \
		[cur]=$SLUICE)

# and a per_source rule, whose sources fill the CPUs' src_cache lines
printf '{"rules":[{"name":"%s","match":{"proto":"udp","dport":9000},"grade":"pps","count":%s},
{"name":"src9001","match":{"proto":"udp","dport":9001},"grade":"pps","count":1000,"per_source":{"max_sources":1000}}]}\n' \
	"$RULE" "$COUNT" >"$NETNS_TMP/rules.json"

xdp_prog() { ip -n "$NS_RX" -d link show dev veth-rx | sed -n 's/.*prog\/xdp id \([0-9]*\).*/\1/p'; }
# NAME BUILD [ARGS...]: the agent of BUILD in the background; with NOCAP
# set, without CAP_SYS_ADMIN (as in the Kubernetes DaemonSet)
agent()
{
	local name=$1 build=$2 drop=()

	shift 2
	[ -n "${NOCAP:-}" ] && drop=(capsh --drop=cap_sys_admin -- -c 'exec "$@"' agent)
	netns_bg "$NS_RX" "$name" "${drop[@]}" "${BIN[$build]}" agent \
		--iface veth-rx --state-dir "$SL_STATE" --pin-dir "$SL_PIN" "$@"
}
ready() { SLUICE=${BIN[$2]} sluice_wait_ready "$1" 20; }
passed() { SLUICE=${BIN[$1]} sluice_rule_stat "$RULE" passed_pkts; }
blocked() { SLUICE=${BIN[$1]} sluice_rule_stat "$RULE" blocked_pkts; }
layouts() { ls -d "$SL_PIN"/layout-* 2>/dev/null | wc -l; }

# One step: stop the agent running FROM, start TO's, compare the counters.
step() # N FROM TO WHAT
{
	local k=$1 from=$2 to=$3 what=$4 p0 b0 p1 b1

	p0=$(passed "$from") b0=$(blocked "$from")
	sl_mark tm
	echo "# ($k) $(python3 -c "print(f'{$tm - $t_flood:.2f}')") s into the flood"
	netns_stop "a$((k - 1))"
	agent "a$k" "$to"
	if ! ready "a$k" "$to"; then
		check 1 "($k) $what: the agent is ready"
		sed 's/^/#   /' "$NETNS_TMP/a$k.err"
		return 1
	fi
	p1=$(passed "$to") b1=$(blocked "$to")
	echo "# ($k) passed $p0 -> $p1, blocked $b0 -> $b1"
	check $(( p0 > 0 && b0 > 0 && p1 >= p0 && b1 >= b0 ? 0 : 1 )) \
		"($k) $what: the counters go on ($p0 -> $p1 passed, $b0 -> $b1 blocked)"
}

agent a1 prev --rules "$NETNS_TMP/rules.json"
ready a1 prev || { echo "Bail out! the previous release did not start"; sed 's/^/# /' "$NETNS_TMP/a1.err"; exit 1; }
check $([ -e "$SL_PIN/link-veth-rx" ] && [ -e "$SL_PIN/rule_meta" ]; echo $?) \
	"(1) the previous release pins flat: link-veth-rx and its maps in $SL_PIN"

# 64 sources of its own on each CPU, then their lines in the previous
# release's per-CPU src_cache (no packet of the flood reaches that map)
for cpu in 0 1; do
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --dport 9001 --src 198.18.$((cpu + 4)).1 \
		--sources 64 --count 640 \
		--rate 20000 --cpu $cpu >/dev/null
done
bpftool -j map dump pinned "$SL_PIN/src_cache" >"$NETNS_TMP/src_cache.prev"

netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
	--dport 9000 --drop --duration 60 --csv "$NETNS_TMP/rx.csv"
rx_wait_ready rx seen_rx 5 || { echo "Bail out! rxcount did not start"; exit 1; }
sl_mark t_flood
sl_bg FLOOD_PID ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
	--dst-mac "$RX_MAC" --dport 9000 --rate "$RATE" --duration 26 \
	--cpu 0 >"$NETNS_TMP/flood.gen"
sleep 2.5

step 2 prev cur "previous release -> this build" || exit 1
log=$NETNS_TMP/a2.err
# since the previous release rule_cpu gained has_breaker (breakers),
# rule_cfg sketch_seed (the per_source sketch), host_stats the reasons of
# unclassified packets and the .bss needs_l4 (fragments); src_table its
# ring in one-word slots (memory: a source's window starts afresh, its
# pacing clock is carried); src_cache a light source's chunk (scaling);
# rule_budget the demand word of fair shares (its pad)
grep -q "upgrade: the pinned layout before layout ids became layout-" "$log" &&
	grep -q " 7 carried" "$log" &&
	grep -q "upgrade: carried rule_budget (.*): new demand; dropped pad" "$log" &&
	grep -q "upgrade: carried src_table (.*): new slots" "$log" &&
	grep -q "upgrade: carried src_cache (.*): new light_left" "$log" &&
	grep -q "upgrade: carried rule_cpu (.*): new has_breaker" "$log" &&
	grep -q "upgrade: carried rule_cfg (.*): new sketch_seed" "$log" &&
	grep -q "upgrade: carried host_stats " "$log" &&
	grep -q "upgrade: carried sluice_b_bss (.*): new needs_l4" "$log"
check $? "(2) it says it upgraded the flat layout, carrying rule_cpu (its new has_breaker), rule_cfg (its new sketch_seed), host_stats, the .bss (its new needs_l4), src_table (its new slots), src_cache (its light chunks) and rule_budget (its demand word) and sharing every other map"
grep "upgrade:" "$log" | sed 's/^/#   /'
# each CPU's line of the per-CPU map went to CPU x 4096 + its index in
# the flat one; the key (its first 24 bytes) is the same in both layouts
bpftool -j map dump pinned "$(ls -d "$SL_PIN"/layout-*)/src_cache" \
	>"$NETNS_TMP/src_cache.cur"
lines=$(python3 - "$NETNS_TMP/src_cache.prev" "$NETNS_TMP/src_cache.cur" <<'PY'
import json, sys
def key_bytes(v):
    return [int(b, 16) for b in v[:24]]
prev = json.load(open(sys.argv[1]))
cur = {int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little"): e["value"]
       for e in json.load(open(sys.argv[2]))}
stride = len(prev)
lines = wrong = 0
for e in prev:
    idx = int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little")
    for pc in e["values"]:
        k = key_bytes(pc["value"])
        if not any(k):
            continue
        lines += 1
        if key_bytes(cur.get(pc["cpu"] * stride + idx, [])) != k:
            wrong += 1
cur_lines = sum(1 for v in cur.values() if any(key_bytes(v)))
print(lines, wrong, cur_lines)
PY
)
read -r lines wrong cur_lines <<<"$lines"
check $(( lines >= 64 && wrong == 0 && cur_lines == lines ? 0 : 1 )) \
	"(2) src_cache's per-CPU lines ($lines, $wrong misplaced) are each at CPU x 4096 + index in its flat layout, and no other ($cur_lines there)"
st=$(SLUICE=${BIN[cur]} sluice_cli status -j)
check $([ "$(sluice_json 'd["upgraded"] and d["adopted"]' <<<"$st")" = true ]; echo $?) \
	"(2) status -j: upgraded and adopted"
cur_layout=$(sluice_json 'd["pinned_layout"]' <<<"$st")
check $([ -e "$SL_LINK" ] && [ ! -e "$SL_PIN/link-veth-rx" ] &&
	[ ! -e "$SL_PIN/rule_meta" ] && [ -e "$SL_PIN/layout-$cur_layout/rule_meta" ] &&
	[ "$(layouts)" = 1 ]; echo $?) \
	"(2) the link is at links/veth-rx, the maps under layout-$cur_layout only"
sleep 2

prog_before=$(xdp_prog)
NOCAP=1 step 3 cur probe "this build -> probe (a changed layout), without CAP_SYS_ADMIN" || exit 1
log=$NETNS_TMP/a3.err
grep "upgrade:" "$log" | sed 's/^/#   /'
capeff=$(sed -n 's/^CapEff:\t//p' "/proc/${NETNS_PID[a3]}/status")
check $(( (0x$capeff >> 21) & 1 ? 1 : 0 )) \
	"(3) the agent ran without CAP_SYS_ADMIN (CapEff $capeff)"
ok=0
for m in rule_cpu rule_budget rule_meta src_table sluice_b_bss; do
	grep -q "upgrade: carried $m (.*: new layout_probe" "$log" || { ok=1; echo "# not carried with the new field: $m"; }
done
check $ok "(3) it carried the five changed maps, each saying the new field starts at zero"
st=$(SLUICE=${BIN[probe]} sluice_cli status -j)
probe_layout=$(sluice_json 'd["pinned_layout"]' <<<"$st")
check $([ "$probe_layout" != "$cur_layout" ] && [ "$(layouts)" = 1 ] &&
	[ -e "$SL_PIN/layout-$probe_layout/rule_cpu" ] &&
	[ "$(xdp_prog)" != "$prog_before" ]; echo $?) \
	"(3) a new program on the same link, the maps under layout-$probe_layout only"
sleep 2

NOCAP=1 step 4 probe cur "probe -> this build (a downgrade), without CAP_SYS_ADMIN" || exit 1
log=$NETNS_TMP/a4.err
grep -q "upgrade: carried rule_cpu (.*dropped layout_probe" "$log"
check $? "(4) it carried rule_cpu back, saying the probe's field is dropped"
check $([ "$(layouts)" = 1 ] && [ -e "$SL_PIN/layout-$cur_layout/rule_cpu" ]; echo $?) \
	"(4) the maps are under this build's layout-$cur_layout again"
sleep 2

p0=$(passed cur)
prog_before=$(xdp_prog)
netns_stop a4
sl_mark tm
echo "# (5) $(python3 -c "print(f'{$tm - $t_flood:.2f}')") s into the flood"
SL_FG_TIMEOUT=15 SLUICE=${BIN[prev]} sluice_agent_fg "$NETNS_TMP/a5.err"
rc=$?
sed 's/^/#   /' "$NETNS_TMP/a5.err" | tail -n 3
check $(( rc != 0 && rc != 124 ? 0 : 1 )) \
	"(5) the previous release over this layout: refused (exit $rc)"
check $([ "$(xdp_prog)" = "$prog_before" ] && [ -e "$SL_LINK" ] &&
	[ -e "$SL_PIN/layout-$cur_layout/rule_cpu" ] && [ "$(layouts)" = 1 ] &&
	[ ! -e "$SL_PIN/rule_meta" ]; echo $?) \
	"(5) and nothing changed: the same program on the link, this layout pinned, no flat maps left"
sleep 1.5
sl_mark tm
echo "# (6) $(python3 -c "print(f'{$tm - $t_flood:.2f}')") s into the flood"
agent a6 cur
ready a6 cur
check $? "(6) this build restarts over its own layout"
st=$(SLUICE=${BIN[cur]} sluice_cli status -j)
p1=$(passed cur)
check $([ "$(sluice_json 'd["adopted"] and not d["upgraded"]' <<<"$st")" = true ] &&
	(( p1 >= p0 )); echo $?) "(6) it adopts (no upgrade), passed goes on ($p0 -> $p1)"

sl_wait "$FLOOD_PID"
sl_mark t_fend
sleep 0.5
netns_stop rx
sl_mark t_end
passed=$(passed cur)
read -r rxpk sent <<<"$(python3 -c '
import json, sys
rx = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
print(rx["packets"], g["sent"])' "$NETNS_TMP/rx.out" "$NETNS_TMP/flood.gen")"
echo "# sent $sent; rxcount $rxpk; sluice passed $passed"
check $(( passed == rxpk ? 0 : 1 )) \
	"sluice's passed total over every upgrade ($passed) = rxcount's ($rxpk)"
read -r maxw minsec minw judged secs stalled <<<"$(rx_csv_py "$NETNS_TMP/rx.csv" "$seen_rx" \
	"$t_end" "$t_flood" "$t_fend" "$NETNS_TMP/flood.gen" "$RATE" <<'PY'
tf, te = map(float, args[:2])
rate = float(args[3])
n = int(te - tf - 2.2)
secs = bins(tf + 2.0, n)
# seconds in which the sender itself stalled (gave up more than 25 ms of
# packets) say nothing about sluice: they are named, not judged
lost = [0.0] * n
for at_s, skipped in json.load(open(args[2]))["stalls"]:
    k = int(at_s - skipped / rate - 2.0)
    if 0 <= k < n:
        lost[k] += skipped
judged = [s for s, l in zip(secs, lost) if l / rate <= 0.025]
stalled = [f"{k + 2}s:{l / rate * 1000:.0f}ms" for k, l in enumerate(lost)
           if l / rate > 0.025]
print(f"{max_window(tf, te):.0f} {min(judged):.0f} "
      f"{min_window(tf + 2.0, te - 0.2):.0f} {len(judged)} {n} "
      f"{','.join(stalled) or 'none'}")
lo = min((count(tf + x / 100, tf + x / 100 + 1), x / 100)
         for x in range(200, int((te - tf - 1.2) * 100)))
print(f"# the smallest 1 s window starts {lo[1]:.2f} s into the flood",
      file=sys.stderr)
print("# admitted per 0.5 s from the flood's start:",
      " ".join(f"{b:.0f}" for b in bins(tf, int(2 * (te - tf)), 0.5)),
      file=sys.stderr)
PY
)"
echo "# 1 s windows over the flood: largest $maxw; smallest second $minsec," \
     "smallest 1 s sliding window $minw (count $COUNT)"
echo "# seconds the sender stalled in (not judged): $stalled"
check $(pyok "$maxw <= 1.05 * $COUNT") \
	"no 1 s window (sliding) above 1.05 x count: largest $maxw"
check $(pyok "$minsec >= 0.95 * $COUNT and $judged >= $secs - 2") \
	"no second of the flood below 0.95 x count: smallest $minsec ($judged of $secs seconds judged)"
echo "1..$n"
