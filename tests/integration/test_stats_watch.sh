#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `sluice stats --watch 1` rates against an independent counter: a rule of
# 2000 pkt/s offered 5000 pkt/s by a paced pktsend; rxcount counts the
# admitted packets at tc ingress. The rates of each frame after the first
# (the counters' change over the agent's clock, as top computes them):
# passed/s within 4 % of rxcount's admitted second each, 1.5 % on average;
# dropped/s within 5 % of offered minus admitted. The sliding window's
# estimate, which --watch showed before, was off by 2.5-10 % on average.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "stats --watch"
netns_setup statswatch 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }
T=$NETNS_TMP
COUNT=${COUNT:-2000}
OFFERED=${OFFERED:-5000}

printf '{"rules":[{"name":"w","match":{"proto":"udp","dport":9000},"grade":"pps","count":%s}]}\n' \
	"$COUNT" >"$T/rules.json"
sluice_start agent --rules "$T/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
	--dport 9000 --drop --duration 13
netns_wait_ready rx 5 || { echo "Bail out! rxcount not ready"; exit 1; }
ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx --dst-mac "$RX_MAC" \
	--dport 9000 --duration 11 --rate "$OFFERED" >"$T/gen.json" &
gen=$!
sleep 2
# seven frames, a second apart, while the flood is steady
timeout --preserve-status -s INT 6.5 ip netns exec "$NS_RX" "$SLUICE" stats --watch 1 \
	--state-dir "$SL_STATE" >"$T/watch" 2>"$T/watch.err"
rc=$?
wait "$gen"
sleep 0.5
netns_stop rx
check $((rc == 0 ? 0 : 1)) "stats --watch stopped by SIGINT exits 0 (got $rc)"

# rows of rule w: name mode layer count unit passed/s dropped/s ...
res=$(python3 - "$T/watch" "$T/rx.out" "$T/gen.json" <<'PY'
import json, sys
frames = [l.split() for l in open(sys.argv[1]) if l.startswith("w ")]
rx = json.load(open(sys.argv[2]))
gen = json.load(open(sys.argv[3]))
def num(s):
    return float(s[:-1]) * 1e3 if s.endswith("k") else float(s)
passed = [num(f[5]) for f in frames[1:]]
dropped = [num(f[6]) for f in frames[1:]]
bins = rx["per_second"]
nz = [i for i, c in enumerate(bins) if c]
full = bins[nz[0] + 1:nz[-1]]
admitted = sum(full) / len(full)
offered = gen["sent"] / gen["seconds"]
worst_p = max(abs(p - admitted) / admitted for p in passed)
worst_d = max(abs(d - (offered - admitted)) / (offered - admitted)
              for d in dropped)
mean_p = abs(sum(passed) / len(passed) - admitted) / admitted
print(len(passed), round(admitted), round(offered), round(100 * worst_p, 1),
      round(100 * mean_p, 1),
      round(100 * worst_d, 1), " ".join(f"{p:.0f}/{d:.0f}"
                                       for p, d in zip(passed, dropped)))
PY
)
read -r nframes admitted offered worst_p mean_p worst_d frames <<<"$res"
echo "# rxcount admitted $admitted/s of $offered/s offered; stats --watch" \
     "passed/dropped per frame: $frames"
check $((${nframes:-0} >= 4 ? 0 : 1)) "stats --watch printed $nframes frames after the first"
check $(python3 -c "print(0 if ${worst_p:-100} <= 4 else 1)") \
	"passed/s of every frame within 4 % of rxcount's admitted second (worst ${worst_p}%)"
check $(python3 -c "print(0 if ${mean_p:-100} <= 1.5 else 1)") \
	"passed/s on average within 1.5 % of rxcount's (${mean_p}%)"
check $(python3 -c "print(0 if ${worst_d:-100} <= 5 else 1)") \
	"dropped/s of every frame within 5 % of offered - admitted (worst ${worst_d}%)"
echo "1..$n"
