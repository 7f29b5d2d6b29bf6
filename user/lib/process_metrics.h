/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prometheus' standard process metrics (process_cpu_seconds_total,
 * process_resident_memory_bytes, ...), the names every client library
 * exports, read from /proc/self at each scrape. Both programs' scrapes
 * carry them (docs/metrics.md).
 */
#ifndef SLUICE_PROCESS_METRICS_H
#define SLUICE_PROCESS_METRICS_H

#include <stdint.h>

#include "metrics.h"

struct sl_process_stats {
	double cpu_seconds;	  /* user + system */
	uint64_t resident_bytes;
	uint64_t virtual_bytes;
	double start_time;	  /* Unix time, seconds */
	uint64_t open_fds;
	uint64_t max_fds;	  /* the soft RLIMIT_NOFILE */
};

/*
 * The fields of /proc/PID/stat (stat) and the boot time of /proc/stat
 * (proc_stat) that the metrics need, with the clock's ticks per second
 * and the page size: 0, or -EINVAL when a text is not what the kernel
 * writes. open_fds and max_fds are left alone.
 */
int sl_process_stats_parse(const char *stat, const char *proc_stat,
			   long ticks, long page_size,
			   struct sl_process_stats *out);

/* This process's, from proc (normally "/proc"): 0 or -errno. */
int sl_process_stats_read(const char *proc, struct sl_process_stats *out);

/* The process_* families of st. */
void sl_metrics_process(struct sl_metrics *m,
			const struct sl_process_stats *st);

/*
 * This process's families, read now; nothing when /proc cannot be read
 * (a scrape is still worth its other families).
 */
void sl_metrics_process_self(struct sl_metrics *m);

#endif
