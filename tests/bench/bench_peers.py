# SPDX-License-Identifier: GPL-2.0
"""Tables (Markdown) and plots (gnuplot PNG) of tests/bench/bench_peers.sh.

usage: bench_peers.py RESULTS.tsv [QUICK] [PLOT_DIR]
RESULTS.tsv: section, config, key, value; the k-th value of a (section,
config, key) is run k, so ratios pair values of the same run.
"""
import os
import statistics
import subprocess
import sys
from collections import defaultdict

res, quick, plots = sys.argv[1], sys.argv[2] == "QUICK", sys.argv[3]
vals = defaultdict(list)
maps = []
for line in open(res):
    sec, cfg, key, val = line.rstrip("\n").split("\t")
    if sec == "maps":
        maps.append((cfg, key, int(val)))
        continue
    vals[(sec, cfg, key)].append(float(val))


def stat(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(xs, f="{:.0f}"):
    if not xs:
        return "n/a"
    m, lo, hi = stat(xs)
    return f"{f.format(m)} ({f.format(lo)}–{f.format(hi)})"


def configs(sec, key):
    seen = []
    for s, c, k in vals:
        if s == sec and k == key and c not in seen:
            seen.append(c)
    return seen


tag = " (QUICK: fewer, shorter runs)" if quick else ""
out = []
P = out.append

# ---- drop path: the baseline of a run is the mean of its first and
# last case (both bare XDP_DROP)
bare = [(a + b) / 2 for a, b in zip(vals[("drop", "bare", "pps")],
                                    vals[("drop", "bare-end", "pps")])]
P(f"### Drop path{tag}\n")
P("| receiver | packets/s handled | / bare XDP_DROP (same run) "
  "| softirq ns/packet | generator system ns/packet |")
P("|---|---|---|---|---|")
drop_rows = []
for c in configs("drop", "pps"):
    pps = vals[("drop", c, "pps")]
    ratio = [p / b for p, b in zip(pps, bare) if b]
    drop_rows.append((c, stat(ratio) if ratio else (0, 0, 0),
                      stat(vals[("drop", c, "softirq_ns")])))
    P(f"| {c} | {fmt(pps)} | {fmt(ratio, '{:.3f}')} | "
      f"{fmt(vals[('drop', c, 'softirq_ns')], '{:.1f}')} | "
      f"{fmt(vals[('drop', c, 'system_ns')], '{:.1f}')} |")
P("")

# ---- accuracy
P(f"### Accuracy: admitted / threshold at 2x offered{tag}\n")
lims = configs("accuracy", "1000") or ["sluice"]
thrs = sorted({int(k) for s, _, k in vals if s == "accuracy"})
P("| threshold pps | " + " | ".join(lims) + " |")
P("|---|" + "---|" * len(lims))
for t in thrs:
    P(f"| {t} | " + " | ".join(fmt(vals[("accuracy", l, str(t))], "{:.3f}")
                              for l in lims) + " |")
P("\nWhat the generators offered, / threshold, in the same runs:\n")
P("| threshold pps | " + " | ".join(lims) + " |")
P("|---|" + "---|" * len(lims))
for t in thrs:
    P(f"| {t} | " + " | ".join(fmt(vals[("offered", l, str(t))], "{:.2f}")
                              for l in lims) + " |")
P("")

# ---- fairness
P(f"### Per-source fairness: 990 polite sources at 20 pps, 10 heavy at "
  f"10000 pps, 50 pps each{tag}\n")
P("| limiter | polite packets kept | heavy admitted / allowed |")
P("|---|---|---|")
for c in configs("fairness", "polite_kept"):
    P(f"| {c} | {fmt(vals[('fairness', c, 'polite_kept')], '{:.3f}')} | "
      f"{fmt(vals[('fairness', c, 'heavy_vs_allowed')], '{:.3f}')} |")
P("")

# ---- cluster
P(f"### Cluster: token server against Redis{tag}\n")
P("| server | flow updates/s achieved | p50 µs | p99 µs | RSS KiB |")
P("|---|---|---|---|---|")
for c in configs("cluster", "rate"):
    P(f"| {c} | {fmt(vals[('cluster', c, 'rate')])} | "
      f"{fmt(vals[('cluster', c, 'p50_us')])} | "
      f"{fmt(vals[('cluster', c, 'p99_us')])} | "
      f"{fmt(vals[('memory', c, 'rss_kb')])} |")
P("")

# ---- memory
P(f"### Memory{tag}\n")
P("| what | RSS KiB |")
P("|---|---|")
for c in ("agent-1-rule", "agent-4096-rules"):
    P(f"| {c} | {fmt(vals[('memory', c, 'rss_kb')])} |")
P("")
rule_bytes = sum(b for name, _, b in maps if name.startswith("rule_"))
P(f"Kernel memory per rule slot (the rule_* maps, preallocated for "
  f"8192 slots): {rule_bytes / 8192:.0f} bytes; per tracked source "
  f"(src_table's usage before and after 1000 new sources): "
  f"{fmt(vals[('memory', 'per-source', 'bytes')])} bytes; all maps: "
  f"{sum(b for n, _, b in maps if n == 'total') / 2**20:.1f} MiB.\n")
if maps:
    P("| map | max_entries | bytes (memlock) | bytes per entry |")
    P("|---|---|---|---|")
    for name, n, b in maps:
        per = f"{b / int(n):.0f}" if n.isdigit() and int(n) else "-"
        P(f"| {name} | {n} | {b} | {per} |")
    P("")
print("\n".join(out))

if not plots:
    sys.exit(0)
os.makedirs(plots, exist_ok=True)
# the data files stay beside the results, the PNGs go to plots
work = os.path.dirname(os.path.abspath(res))
dat = os.path.join(work, "bench-peers-drop.dat")
with open(dat, "w") as f:
    for i, (c, r, s) in enumerate(drop_rows):
        f.write(f'{i} "{c}" {r[0]:.4f} {r[1]:.4f} {r[2]:.4f} '
                f'{s[0]:.2f} {s[1]:.2f} {s[2]:.2f}\n')
acc = os.path.join(work, "bench-peers-accuracy.dat")
with open(acc, "w") as f:
    for li, l in enumerate(lims):
        for t in thrs:
            xs = vals[("accuracy", l, str(t))]
            if xs:
                m, lo, hi = stat(xs)
                f.write(f"{t} {m:.4f} {lo:.4f} {hi:.4f}\n")
        f.write("\n\n")
q = " (QUICK)" if quick else ""
gp = f"""
set terminal pngcairo size 900,480 noenhanced
set style fill solid 0.5
set boxwidth 0.6
set grid y
set xtics rotate by -30
set output '{plots}/bench-peers-drop.png'
set title 'Drop path: packets/s handled / bare XDP_DROP, median, min-max{q}'
set yrange [0:*]
plot '{dat}' using 1:3:xtic(2) with boxes notitle, \\
     '' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 notitle
set output '{plots}/bench-peers-cpu.png'
set title 'Drop path: receiver softirq ns per packet, median, min-max{q}'
plot '{dat}' using 1:6:xtic(2) with boxes notitle, \\
     '' using 1:6:7:8 with yerrorbars lc rgb 'black' pt 0 notitle
set output '{plots}/bench-peers-accuracy.png'
set title 'Admitted / threshold at 2x offered, median, min-max{q}'
set xtics norotate
set logscale x
set xlabel 'threshold, packets/s'
set yrange [0:*]
plot """ + ", \\\n     ".join(
    f"'{acc}' index {i} using 1:2:3:4 with yerrorlines title '{l}'"
    for i, l in enumerate(lims))
subprocess.run(["gnuplot"], input=gp, text=True, check=True)
