#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# per_source under a forged-source churn, on real packets (docs/rules.md,
# per_source; docs/architecture.md, the sketch tier). One rule, count 100
# pps per source, max_sources 2000; four groups, each to its own
# destination address so that an rxcount per group counts what sluice
# admitted of it, independently:
#   - 20 established polite sources at 50 pps each, from the start;
#   - 2 heavy sources at 5000 pps each, from the start;
#   - a churn of 120,000 forged sources (live frames, as fast as one core
#     sends them: 3.3 Mpps, about 27 pps each, on an idle machine; from
#     pktsend, about 0.4 Mpps, where the host refuses live frames) from 2 s;
#   - 10 new polite sources at 50 pps each, from 3 s, inside the churn.
# The polite keep what they send, old and new; the heavy are held to
# 100 pps each; the churn takes no exact entries, so the table never fills.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "source churn"
if [ -n "$VM" ]; then
	skip "source churn" "host-only: $VMWHY"
	exit 0
fi
netns_setup churn 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP

cat >"$T/rules.json" <<'EOF'
{"rules": [{"name": "api", "match": {"proto": "udp", "dport": 9000},
  "grade": "pps", "count": 100,
  "per_source": {"max_sources": 2000}}]}
EOF
sluice_start agent --rules "$T/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

# group NAME DST: an rxcount of what reaches DST (after XDP)
for g in old:198.18.0.10 heavy:198.18.0.12 churn:198.18.0.13 new:198.18.0.11; do
	netns_bg "$NS_RX" "rx_${g%%:*}" "$GEN_BIN/rxcount" --dev veth-rx \
		--proto udp --dport 9000 --dst "${g#*:}" --drop --duration 14
	netns_wait_ready "rx_${g%%:*}" 5 ||
		{ echo "Bail out! rxcount ${g%%:*} not ready"; exit 1; }
done
send() # NAME DST SRC SOURCES RATE SECONDS CPU
{
	sl_bg "PID_$1" ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --dst "$2" --src "$3" --sources "$4" \
		--dport 9000 --rate "$5" --duration "$6" --cpu "$7" \
		>"$T/gen_$1.json"
}
send old 198.18.0.10 198.18.1.1 20 1000 10 0
send heavy 198.18.0.12 198.18.2.1 2 10000 10 0
sleep 2
# unpaced: the churn's noise in the sketch as high as this machine makes it
pick_flood_gen
sl_bg PID_churn ip netns exec "$NS_TX" "$GEN_BIN/$FLOOD_GEN" --dev veth-tx \
	--dst-mac "$RX_MAC" --dst 198.18.0.13 --src 198.18.32.0 \
	--sources 120000 --dport 9000 --duration 6 --cpu 1 \
	>"$T/gen_churn.json"
sleep 1
send new 198.18.0.11 198.18.3.1 10 500 5 0
sleep 1.5
entries=$(sluice_rule_stat api sources)
for g in old heavy churn new; do sl_wait "$(eval echo \$PID_$g)"; done
sleep 0.5
for g in old heavy churn new; do netns_stop "rx_$g"; done

res=$(python3 - "$T" <<'PY'
import json, sys
T = sys.argv[1]
def js(path):
    text = open(path).read()
    return json.loads(text[text.index("{"):])
out = []
for g in ("old", "heavy", "churn", "new"):
    sent = js(f"{T}/gen_{g}.json")["sent"]
    got = js(f"{T}/rx_{g}.out")["packets"]
    out += [str(sent), str(got)]
print(" ".join(out))
PY
)
read -r s_old g_old s_heavy g_heavy s_churn g_churn s_new g_new <<<"$res"
echo "# sent/admitted: established polite $s_old/$g_old, heavy $s_heavy/$g_heavy, churn $s_churn/$g_churn ($((s_churn / 6)) pps), new polite $s_new/$g_new; exact entries 1.5 s into the churn: $entries"
check $(python3 -c "print(0 if $g_old >= 0.99 * $s_old else 1)") \
	"established polite sources keep what they send ($g_old of $s_old)"
check $(python3 -c "print(0 if $g_new >= 0.95 * $s_new else 1)") \
	"new polite sources inside the churn keep what they send ($g_new of $s_new)"
# 2 sources x 100 pps x 10 s, and their first interval's burst
check $(python3 -c "print(0 if 0.9 * 2000 <= $g_heavy <= 1.1 * 2200 else 1)") \
	"heavy sources held to 100 pps each over 10 s ($g_heavy, bound 2000-2200)"
check $(python3 -c "print(0 if int('${entries:-99999}') < 100 else 1)") \
	"the churn takes no exact entries (${entries} live of max_sources 2000)"
echo "1..$n"
