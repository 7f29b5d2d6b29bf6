/* SPDX-License-Identifier: GPL-2.0 */
/* Counters of the data plane, summed over CPUs. */
#ifndef SLUICE_STATS_H
#define SLUICE_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane.h"

struct sl_rule_stats {
	/* totals since the rule's slot was created */
	uint64_t passed_pkts;
	uint64_t passed_bytes;
	uint64_t blocked_pkts;	/* over the limit: dropped, or would-drop */
	uint64_t blocked_bytes;
	uint64_t source_overflow;
	/* per second over the rule's sliding window */
	double passed_pps;
	double blocked_pps;
	double passed_Bps;
	double blocked_Bps;
	uint64_t sources;	/* live per_source entries */
	uint64_t conns_open;	/* grade conns: connections counted open */
	/* a rule with a breaker: its state word and counters (rule_breaker) */
	bool has_breaker;
	struct sl_breaker_stats {
		unsigned int state; /* enum sluice_breaker_state */
		uint64_t since_ns;
		uint64_t to_state[SLUICE_BRK_STATES]; /* transitions into */
		uint64_t probes_passed, probe_success, probe_failure;
		uint64_t failed_fast; /* requests failed while open */
		/* answers seen, by enum sluice_breaker_answer */
		uint64_t answered[SLUICE_BRK_ANSWERS];
	} breaker;
};

/* The names of enum sluice_breaker_state ("closed", "open", "half_open"). */
const char *sl_breaker_state_str(unsigned int state);
/* The names of enum sluice_breaker_answer ("ok", "rst", "icmp_unreach",
 * "timeout", "slow"). */
const char *sl_breaker_answer_str(unsigned int kind);

int sl_dp_rule_stats(const struct sl_dataplane *dp, size_t rule,
		     struct sl_rule_stats *st);

/* Every rule in force at once (st[i] for dp->rules.rules[i]). Both read
 * the CPUs' counters through rule_cpu's mmap, without a syscall. */
int sl_dp_rules_stats(const struct sl_dataplane *dp, struct sl_rule_stats *st);

/*
 * The threshold in force of dp->rules.rules[rule], per second: what
 * rule_limit holds (the count, or a cluster rule's lease or fallback, the
 * fallback written beside the lease once it expired), ramped as the fast
 * path does while a warm-up runs (*warming). A warm-up or cluster rule
 * costs one map read.
 */
int sl_dp_rule_threshold(const struct sl_dataplane *dp, size_t rule,
			 uint64_t *limit, bool *warming);

int sl_dp_host_stats(const struct sl_dataplane *dp,
		     uint64_t out[SLUICE_ST_MAX]);

const char *sl_host_stat_name(int stat);

#endif
