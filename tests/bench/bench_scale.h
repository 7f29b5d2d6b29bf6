/* SPDX-License-Identifier: GPL-2.0 */
/* bench_xdp --threads N: each path's scaling over CPUs (bench_scale.c). */
#ifndef SLUICE_BENCH_SCALE_H
#define SLUICE_BENCH_SCALE_H

/* Prints each path's 1- and threads-thread figures; runs rounds, median
 * reported; only: a substring of the paths to run, or NULL. Returns the
 * exit status. */
int bench_scale(int threads, int runs, const char *only);

#endif
