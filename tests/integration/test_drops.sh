#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# sluice drops on real packets: three sources flood one pps rule at 3000,
# 1500 and 500 pps (AF_PACKET, paced) for 4 s while a second rule drops
# nothing:
#   - the flooded rule is listed, the quiet one is not;
#   - its sources come heaviest first, each one's share of the sampled
#     drops within 0.1 of its share of what was dropped (by what each
#     sent: the rule admits 200/s of 5000);
#   - the rule's dropped/s is within 20 % of its blocked counter's rate
#     over the flood;
#   - `drops RULE` of a quiet rule lists it with no source, of an unknown
#     one exits 1 naming it; -n bounds the sources.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "drops"
netns_setup drops 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

cat >"$NETNS_TMP/rules.json" <<'JSON'
{"rules": [
 {"name": "flooded", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": 200},
 {"name": "quiet", "match": {"proto": "udp", "dport": 9100}, "grade": "pps", "count": 1000000}
]}
JSON
sluice_start agent --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

DUR=4
blocked0=$(sluice_rule_stat flooded blocked_pkts)
pids=()
for s in "198.18.0.11 3000 0" "198.18.0.12 1500 1" "198.18.0.13 500 1"; do
	set -- $s
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --src "$1" --proto udp --dport 9000 \
		--rate "$2" --cpu "$3" --duration "$DUR" >"$NETNS_TMP/tx-$1" &
	pids+=($!)
done
ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx --dst-mac "$RX_MAC" \
	--proto udp --dport 9100 --rate 500 --duration "$DUR" >/dev/null &
pids+=($!)
wait "${pids[@]}"
blocked1=$(sluice_rule_stat flooded blocked_pkts)
sluice_cli drops -j >"$NETNS_TMP/drops.json"
sed 's/^/# /' "$NETNS_TMP/drops.json" | head -40

python3 - "$NETNS_TMP" "$blocked0" "$blocked1" "$DUR" <<'PY' >"$NETNS_TMP/checks"
import json, sys
d, b0, b1, dur = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ans = json.load(open(f"{d}/drops.json"))
rules = {r["name"]: r for r in ans["rules"]}
def out(ok, what):
    print(f"{0 if ok else 1}\t{what}")
out("flooded" in rules and "quiet" not in rules,
    f"the flooded rule is listed, the quiet one not ({sorted(rules)})")
r = rules.get("flooded", {"sources": [], "dropped_per_s": 0})
srcs = [s["addr"] for s in r["sources"]]
want = ["198.18.0.11", "198.18.0.12", "198.18.0.13"]
out(srcs[:3] == want, f"sources heaviest first: {srcs[:3]}")
sent = {a: json.load(open(f"{d}/tx-{a}"))["sent"] for a in want}
total = sum(sent.values())
# the rule admits count x dur of them, in proportion to what each sent
dropped = {a: sent[a] * (1 - 200 * dur / total) for a in want}
share = {s["addr"]: s["share"] for s in r["sources"]}
for a in want:
    w = dropped[a] / sum(dropped.values())
    got = share.get(a, 0)
    out(abs(got - w) <= 0.1,
        f"{a}: {got:.2f} of the sampled drops, {w:.2f} of those dropped")
rate = (b1 - b0) / dur
est = r["dropped_per_s"]
out(abs(est - rate) <= 0.2 * rate,
    f"dropped/s {est:.0f} within 20 % of the blocked counter's {rate:.0f}")
PY
while IFS=$'\t' read -r st what; do
	check "$st" "$what"
done <"$NETNS_TMP/checks"

n_src=$(sluice_cli drops flooded -n 2 -j | sluice_json 'len(d["rules"][0]["sources"])')
check $(( n_src == 2 ? 0 : 1 )) "drops flooded -n 2: 2 sources ($n_src)"
q=$(sluice_cli drops quiet -j | sluice_json '(d["rules"][0]["name"], len(d["rules"][0]["sources"]))')
check $([ "$q" = "('quiet', 0)" ]; echo $?) "drops quiet: listed, no source ($q)"
out=$(sluice_cli drops nosuch 2>&1)
rc=$?
check $([ $rc -eq 1 ] && grep -q "no rule 'nosuch'" <<<"$out"; echo $?) \
	"drops nosuch: exit $rc, the error names the rule"
human=$(sluice_cli drops)
check $(grep -q "^flooded: " <<<"$human" &&
	grep -q "^198.18.0.11 " <<<"$human"; echo $?) \
	"the human answer heads each rule and lists its sources"
echo "$human" | sed 's/^/#   /'
echo "1..$n"
