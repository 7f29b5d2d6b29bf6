# SPDX-License-Identifier: GPL-2.0
"""Tables (Markdown) and plots (gnuplot PNG) of tests/bench/bench_peers.sh.

usage: bench_peers.py RESULTS.tsv [QUICK] [PLOT_DIR]
RESULTS.tsv: section, config, key, value; the k-th value of a (section,
config, key) is run k, so ratios pair values of the same run. Section
failover: value "FILE T0_MS KILL_S RESTART_S", FILE bench_failover's
output; tablecache: the slab caches counted.
"""
import os
import statistics
import subprocess
import sys
from collections import defaultdict

res, quick, plots = sys.argv[1], sys.argv[2] == "QUICK", sys.argv[3]
vals = defaultdict(list)
maps = []
failover = defaultdict(list)  # limiter: [(bins, t0 ms, kill s, restart s)]
caches = defaultdict(list)    # table config: the slab caches that grew
for line in open(res):
    sec, cfg, key, val = line.rstrip("\n").split("\t")
    if sec == "maps":
        maps.append((cfg, key, int(val)))
        continue
    if sec == "failover":
        path, t0, tk, tr = val.split()
        failover[cfg].append((path, float(t0), float(tk), float(tr)))
        continue
    if sec == "tablecache":
        caches[cfg].append(val)
        continue
    vals[(sec, cfg, key)].append(float(val))


def stat(xs):
    if not xs:  # a part not run (PARTS)
        return (float("nan"),) * 3
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

# ---- cluster through a kill -9: what a fleet admitted, over the last
# second (the sum of ten 100 ms bins), against count
def fo_read(path):
    bins, count = [], 0
    for line in open(path):
        p = line.split()
        if p[0] == "BIN":
            bins.append(tuple(float(x) for x in p[2:6]))
        elif p[0] == "RESULT":
            count = float(p[p.index("count") + 1])
            flows = float(p[p.index("flows") + 1])
            agents = float(p[p.index("agents") + 1])
    return bins, count, agents * flows


FO_POLICIES = {"tokend": [("tokend", 0)],
               "redis": [("redis fail-open", 0), ("redis fail-closed", 1)],
               "redis-lua": [("redis-lua fail-open", 0),
                             ("redis-lua fail-closed", 1)]}
fo_series = defaultdict(list)  # name: per run, [(t since kill, S / count)]
fo_stats = defaultdict(lambda: defaultdict(list))
for mode, runs in failover.items():
    for path, t0, tk, tr in runs:
        bins, count, flow_agents = fo_read(path)
        kill = tk - t0 / 1000
        down = tr - tk
        for name, col in FO_POLICIES[mode]:
            pts = []
            for i in range(9, len(bins)):
                t = (i + 1) * 0.1 - kill
                pts.append((t, sum(b[col] for b in bins[i - 9:i + 1]) /
                            count))
            fo_series[name].append(pts)
            st = fo_stats[name]
            after = [v for t, v in pts if t >= 0]
            st["before"].append(statistics.median(
                v for t, v in pts if -2 <= t < 0))
            st["outage"].append(statistics.median(
                v for t, v in pts if 1 <= t <= down))
            st["peak"].append(max(after))
            st["over"].append(0.1 * sum(v > 1.1 for v in after))
            st["under"].append(0.1 * sum(v < 0.9 for v in after))
            # back: from when on the last second stayed within 0.9-1.1
            j = len(pts)
            while j > 0 and 0.9 <= pts[j - 1][1] <= 1.1:
                j -= 1
            if j < len(pts):
                st["back"].append(max(0.0, pts[j][0] - down))
            if mode == "tokend":
                idx = [((i + 1) * 0.1 - kill, b[2])
                       for i, b in enumerate(bins)]
                st["fallback"].append(next(
                    (t for t, n in idx if t >= 0 and n == 0), float("nan")))
                st["leased"].append(next(
                    (t - down for t, n in idx
                     if t >= down and n == flow_agents), float("nan")))
if fo_stats:
    P(f"### Cluster through a kill -9 of the server{tag}\n")
    P("What the fleet admitted in the last second, / count: before the "
      "kill (its last 2 s), during the outage (from 1 s after the kill to "
      "the restart), the largest after the kill; seconds above 1.1 x "
      "count and below 0.9 x count from the kill on; after the restart, "
      "when the last second was back within 0.9-1.1 x count for good.\n")
    P("| limiter | before | outage | peak | s > 1.1 x count "
      "| s < 0.9 x count | back after the restart, s |")
    P("|---|---|---|---|---|---|---|")
    for name, st in fo_stats.items():
        P(f"| {name} | {fmt(st['before'], '{:.3f}')} | "
          f"{fmt(st['outage'], '{:.3f}')} | {fmt(st['peak'], '{:.3f}')} | "
          f"{fmt(st['over'], '{:.1f}')} | {fmt(st['under'], '{:.1f}')} | "
          f"{fmt(st['back'], '{:.1f}')} |")
    if "tokend" in fo_stats:
        st = fo_stats["tokend"]
        P(f"\ntokend: every agent's flows in fallback "
          f"{fmt(st['fallback'], '{:.1f}')} s after the kill; all back "
          f"under a lease {fmt(st['leased'], '{:.1f}')} s after the "
          f"restart.")
    P("")

# ---- the tables' own memory
if any(s == "table" for s, _, _ in vals):
    P(f"### Kernel memory per tracked source{tag}\n")
    tlims = ["sluice", "nft-meter", "hashlimit"]
    ns_ = sorted({int(c.rsplit("-", 1)[1]) for s, c, _ in vals
                  if s == "table"})
    P("Slab bytes per source (the caches that grew by half the sources "
      "or more, / sources), and the entries each limiter reported:\n")
    P("| sources | " + " | ".join(f"{l} bytes | {l} entries"
                                  for l in tlims) + " |")
    P("|---|" + "---|---|" * len(tlims))
    for n in ns_:
        P(f"| {n} | " + " | ".join(
            f"{fmt(vals[('table', f'{l}-{n}', 'slab_bytes')], '{:.0f}')} | "
            f"{fmt(vals[('table', f'{l}-{n}', 'entries')])}"
            for l in tlims) + " |")
    P("\nThe caches counted (each run's):\n")
    for l in tlims:
        seen = sorted({c for n in ns_ for c in caches[f"{l}-{n}"]})
        P(f"- {l}: {', '.join(seen)}")
    P("")

# ---- memory
P(f"### Memory{tag}\n")
P("| what | RSS KiB |")
P("|---|---|")
for c in ("agent-1-rule", "agent-4096-rules"):
    P(f"| {c} | {fmt(vals[('memory', c, 'rss_kb')])} |")
P("")
rule_bytes = sum(b for name, _, b in maps
                 if name.startswith("rule_") and name != "rule_cpu")
cpu = [(int(n), b) for name, n, b in maps if name == "rule_cpu"]
P(f"Kernel memory per rule slot (the rule_* maps but rule_cpu, "
  f"preallocated for 8192 slots): {rule_bytes / 8192:.0f} bytes; "
  f"rule_cpu, sized by the slots in force: "
  f"{cpu[0][1] / 2**20 if cpu else 0:.2f} MiB with 1 rule "
  f"({cpu[0][0] if cpu else 0} elements), "
  f"{fmt(vals[('memory', 'rule-cpu-4096-rules', 'bytes')])} bytes with "
  f"4096; per tracked source "
  f"(src_table's usage as bpftool reports it, before and after the "
  f"sources of the table above): "
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
if fo_series:
    # each run's points on a 100 ms grid from its kill, the median per point
    fo = os.path.join(work, "bench-peers-failover.dat")
    names = list(fo_series)
    downs = [tr - tk for runs in failover.values() for _, _, tk, tr in runs]
    with open(fo, "w") as f:
        for name in names:
            grid = defaultdict(list)
            for pts in fo_series[name]:
                for t, v in pts:
                    grid[round(t, 1)].append(v)
            for t in sorted(grid):
                if t >= -2:
                    f.write(f"{t:.1f} {statistics.median(grid[t]):.4f}\n")
            f.write("\n\n")
    gp += f"""
set output '{plots}/bench-peers-failover.png'
set title 'Admitted by the fleet in the last second / count; kill -9 at 0, restart at {statistics.median(downs):.1f} s; median of runs{q}'
unset logscale x
set xlabel 'seconds since the kill -9'
set ylabel 'admitted in the last second / count'
set yrange [0:2.2]
set key bottom right
set arrow 1 from {statistics.median(downs):.2f}, graph 0 to {statistics.median(downs):.2f}, graph 1 nohead dt 2
set arrow 2 from 0, graph 0 to 0, graph 1 nohead dt 2
plot 1.1 with lines dt 3 lc rgb 'black' title '1.1 x count', \\
     """ + ", \\\n     ".join(
        f"'{fo}' index {i} using 1:2 with lines lw 2 title '{n}'"
        for i, n in enumerate(names))
subprocess.run(["gnuplot"], input=gp, text=True, check=True)
