// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the traffic tools: logging, option parsing, time,
 * CPU pinning and a stop flag raised by SIGINT/SIGTERM.
 */
#ifndef SLUICE_GEN_GENUTIL_H
#define SLUICE_GEN_GENUTIL_H

#include <signal.h>
#include <stdint.h>

/* Exit status that tells the test runner "skipped", as xdp-tools uses it. */
#define EXIT_SKIP 77

#define NSEC_PER_SEC  1000000000ull
#define NSEC_PER_MSEC 1000000ull

/* Longest run any generator or counter accepts, so a lost script cannot
 * leave traffic running.
 */
#define GEN_MAX_SECONDS 60.0

extern volatile sig_atomic_t gen_stop;

void gen_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int gen_catch_signals(void);
int gen_block_signals(int how);

uint64_t gen_now_ns(void);
int gen_sleep_until(uint64_t deadline_ns);

int gen_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
int gen_parse_seconds(const char *s, double max, double *out);

int gen_pin_cpu(int cpu);

#endif
