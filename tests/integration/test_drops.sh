#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# sluice drops on real packets: against one pps rule of count 200, a
# sender of 198.18.0.11 at 4000 pps on CPU 0 and one cycling 198.18.0.20
# to .23 at 2000 pps on CPU 1 (500 each, interleaved), paced, for 4 s,
# while a second rule drops nothing:
#   - the flooded rule is listed, the quiet one is not;
#   - 198.18.0.11 comes first; each source's share of the sampled drops is
#     within 0.1 (.11) or 0.05 (the others) of its share of what was
#     dropped (by what each sent: the rule admits 200/s of 6000);
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
for s in "198.18.0.11 4000 0 1" "198.18.0.20 2000 1 4"; do
	set -- $s
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --src "$1" --sources "$4" --proto udp \
		--dport 9000 --rate "$2" --cpu "$3" --duration "$DUR" \
		>"$NETNS_TMP/tx-$1" &
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
out(srcs[:1] == ["198.18.0.11"] and len(srcs) == 5,
    f"198.18.0.11 first, 5 sources: {srcs}")
t11 = json.load(open(f"{d}/tx-198.18.0.11"))["sent"]
t20 = json.load(open(f"{d}/tx-198.18.0.20"))["sent"]
sent = {"198.18.0.11": t11}
for k in range(4):
    sent[f"198.18.0.{20 + k}"] = t20 / 4
total = sum(sent.values())
# the rule admits count x dur of them, in proportion to what each sent
dropped = {a: n * (1 - 200 * dur / total) for a, n in sent.items()}
share = {s["addr"]: s["share"] for s in r["sources"]}
for a in sent:
    w = dropped[a] / sum(dropped.values())
    got = share.get(a, 0)
    tol = 0.1 if a == "198.18.0.11" else 0.05
    out(abs(got - w) <= tol,
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
