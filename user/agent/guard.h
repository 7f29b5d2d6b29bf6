/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Adaptive protection in the agent (rules with "system", docs/rules.md): a
 * thread that every SL_ADAPT_TICK_MS samples the host (host_signals.h) and
 * the counters of each such rule, steps the rule's controller (adaptive.h)
 * and writes the threshold with a lease of SL_GUARD_LEASE_MS whose
 * fallback is count: an agent that dies or hangs leaves the rule at count,
 * never at a shedding threshold nobody lifts. A library: no signals, no
 * exit.
 */
#ifndef SLUICE_GUARD_H
#define SLUICE_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "adaptive.h"
#include "loader.h"

#ifndef SL_GUARD_LEASE_MS
#define SL_GUARD_LEASE_MS 2000 /* a threshold holds this long unrenewed */
#endif

struct sl_guard;

/*
 * Watch dp's rules with a "system" from a thread of its own. proc is
 * "/proc" (tests: a directory laid out like it); dp_lock serialises every
 * use of dp, and both must outlive the guard. 0 or -errno.
 */
int sl_guard_start(struct sl_dataplane *dp, pthread_mutex_t *dp_lock,
		   const char *proc, struct sl_guard **out);

void sl_guard_free(struct sl_guard *g);

/* Whether the rule in slot is shedding now (any thread, no lock). */
bool sl_guard_shedding(const struct sl_guard *g, uint32_t slot);

/* status's "system": one object per rule with a "system". */
cJSON *sl_guard_status(struct sl_guard *g);

/* What metrics show of one rule with a "system". */
struct sl_guard_info {
	char name[SL_NAME_MAX + 1];
	bool shedding;
	enum sl_adapt_signal why; /* while shedding */
	uint64_t sheds;		  /* times shedding started */
	double service;		  /* while shedding; 0: not measured */
	int64_t queue;		  /* -1: not watched, or none listens */
	struct sl_sys_sample host; /* the host's signals as last sampled */
};

/* Up to max rules' info into out; returns how many there are. */
size_t sl_guard_info(struct sl_guard *g, struct sl_guard_info *out,
		     size_t max);

#endif
