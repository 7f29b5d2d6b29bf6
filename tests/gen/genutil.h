// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the traffic tools: logging, sleeping, CPU pinning
 * a stop flag raised by SIGINT/SIGTERM, and the medians the benchmarks
 * report; numbers and the clock come
 * from user/lib/util.h.
 */
#ifndef SLUICE_GEN_GENUTIL_H
#define SLUICE_GEN_GENUTIL_H

#include <signal.h>
#include <stdint.h>

#include "util.h" /* the checked parsers and the clock of user/lib */

/* Exit status that tells the test runner "skipped", as xdp-tools uses it. */
#define EXIT_SKIP 77


/* Longest run any generator or counter accepts, so a lost script cannot
 * leave traffic running.
 */
#define GEN_MAX_SECONDS 60.0

extern volatile sig_atomic_t gen_stop;

void gen_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int gen_catch_signals(void);
int gen_block_signals(int how);

int gen_sleep_until(uint64_t deadline_ns);


int gen_pin_cpu(int cpu);

/* The median of v[0..n) (n >= 1), and its extremes when asked; v is left
 * as it was. */
double gen_median(const double *v, int n, double *min, double *max);

#endif
