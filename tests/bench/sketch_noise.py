#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The per_source sketch under a churn of forged sources at line rate: a
model of its rows (bpf/admit.h, sketch_count() and sketch_level()),
count-min's update against conservative update, with the load per counter
of R packets a second over 4 rows of 2^18 counters, scaled to fewer
counters so that it runs in seconds. Prints, over many fresh sources, the
estimate (what a source that sent nothing is told) and the estimate less
the level (another four counters, unwritten), which is what decides
whether a source takes an entry: for a count c it does when that reaches
c / 2 less what the source sent.

    tests/bench/sketch_noise.py [--rate 148.8e6] [--bits 12] [--probes N]
"""
import argparse
import random

ROWS = 4


def run(rate, bits, probes, conservative, seed):
    width = 1 << bits
    # the packets of one second on 2^bits counters a row, at the load per
    # counter that rate puts on 2^18
    packets = int(rate / (1 << 18) * width)
    rnd = random.Random(seed)
    rows = [[0] * width for _ in range(ROWS)]
    for _ in range(packets):
        idx = [rnd.randrange(width) for _ in range(ROWS)]
        if conservative:
            to = min(rows[r][idx[r]] for r in range(ROWS)) + 1
            for r in range(ROWS):
                if rows[r][idx[r]] < to:
                    rows[r][idx[r]] = to
        else:
            for r in range(ROWS):
                rows[r][idx[r]] += 1

    def estimate():
        return min(rows[r][rnd.randrange(width)] for r in range(ROWS))

    est = sorted(estimate() for _ in range(probes))
    diff = sorted(estimate() - estimate() for _ in range(probes))
    return packets, est, diff


def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=148.8e6)
    ap.add_argument("--bits", type=int, default=12)
    ap.add_argument("--probes", type=int, default=100000)
    a = ap.parse_args()
    print(f"{a.rate / 1e6:.1f} Mpps of one-packet sources over one second, "
          f"{ROWS} rows (modelled on 2^{a.bits} counters a row)")
    print("update        packets  estimate p50/p99.99/max  "
          "estimate - level p0.01/p50/p99.99/max")
    for cons in (False, True):
        n, est, diff = run(a.rate, a.bits, a.probes, cons, 27)
        name = "conservative" if cons else "count-min"
        print(f"{name:<13} {n:>8}  {pct(est, .5):>6} {pct(est, .9999):>6} "
              f"{est[-1]:>6}        {pct(diff, .0001):>6} {pct(diff, .5):>6} "
              f"{pct(diff, .9999):>6} {diff[-1]:>6}")


if __name__ == "__main__":
    main()
