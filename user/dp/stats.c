// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sluice.skel.h"
#include "conns.h"
#include "stats.h"

const char *sl_breaker_state_str(unsigned int state)
{
	/* in enum order (not designated: test_runbook.sh reads those of
	 * this file as the host counters' names) */
	static const char *const names[SLUICE_BRK_STATES] = {
		"closed", "open", "half_open",
	};

	_Static_assert(SLUICE_BRK_CLOSED == 0 && SLUICE_BRK_OPEN == 1 &&
			       SLUICE_BRK_HALF_OPEN == 2,
		       "names in enum order");

	return state < SLUICE_BRK_STATES ? names[state] : "?";
}

const char *sl_breaker_answer_str(unsigned int kind)
{
	/* in enum order, not designated (above) */
	static const char *const names[SLUICE_BRK_ANSWERS] = {
		"ok", "rst", "icmp_unreach", "timeout", "slow",
	};

	_Static_assert(SLUICE_ANS_OK == 0 && SLUICE_ANS_RST == 1 &&
			       SLUICE_ANS_ICMP_UNREACH == 2 &&
			       SLUICE_ANS_TIMEOUT == 3 &&
			       SLUICE_ANS_SLOW == 4 && SLUICE_BRK_ANSWERS == 5,
		       "names in enum order");

	return kind < SLUICE_BRK_ANSWERS ? names[kind] : "?";
}

/* One map read, for the rules that have a breaker. */
static void read_breaker(const struct sl_dataplane *dp, uint32_t slot,
			 struct sl_rule_stats *st)
{
	struct sl_breaker_stats *b = &st->breaker;
	struct sluice_breaker v;

	st->has_breaker = true;
	if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_breaker),
				&slot, &v))
		return;
	b->state = v.state & SLUICE_BRK_STATE_MASK;
	b->since_ns = v.since_ns;
	memcpy(b->to_state, v.to_state, sizeof(b->to_state));
	b->probes_passed = v.probes_passed;
	b->probe_success = v.probe_success;
	b->probe_failure = v.probe_failure;
	b->failed_fast = v.failed_fast;
	memcpy(b->answered, v.answered, sizeof(b->answered));
}

/* Sum the CPUs' state of rule into st, rates over its window. */
static void sum_rule(const struct sl_dataplane *dp, size_t rule, uint64_t now,
		     struct sl_rule_stats *st)
{
	const struct sl_rule *r = &dp->rules.rules[rule];
	uint32_t slot = dp->slots[rule];
	uint64_t bucket_ns, cur, added = 0, freed = 0;
	struct sluice_conn_count conns;
	double span_s;

	memset(st, 0, sizeof(*st));
	bucket_ns = (uint64_t)r->interval_ms * 1000000ULL / r->sample_count;
	cur = now / bucket_ns;
	/* the buckets summed cover the window up to now: the current one
	 * only in part, so divide by the time they really cover */
	span_s = ((r->sample_count - 1) * bucket_ns + now % bucket_ns) / 1e9;
	for (int c = 0; c < dp->n_cpus; c++) {
		const struct sluice_rule_cpu *rc = sl_dp_rule_cpu(dp, c, slot);

		st->passed_pkts += rc->passed_pkts;
		st->passed_bytes += rc->passed_bytes;
		/* with the drops its refusal still holds (flush_held()) */
		st->blocked_pkts += rc->blocked_pkts + rc->held_pkts;
		st->blocked_bytes += rc->blocked_bytes + rc->held_bytes;
		st->source_overflow += rc->source_overflow;
		for (uint32_t b = 0; b < r->sample_count; b++) {
			const struct sluice_bucket *bk = &rc->bucket[b];

			if (bk->id > cur || bk->id + r->sample_count <= cur)
				continue;
			st->passed_pps += bk->passed_pkts;
			st->blocked_pps += bk->blocked_pkts;
			st->passed_Bps += bk->passed_bytes;
			st->blocked_Bps += bk->blocked_bytes;
			if (b == rc->bucket_idx) {
				st->blocked_pps += rc->held_pkts;
				st->blocked_Bps += rc->held_bytes;
			}
		}
	}
	if (span_s > 0) {
		st->passed_pps /= span_s;
		st->blocked_pps /= span_s;
		st->passed_Bps /= span_s;
		st->blocked_Bps /= span_s;
	}
	if (r->breaker.enabled)
		read_breaker(dp, slot, st);
	if (r->grade == SL_GRADE_CONNS &&
	    !sl_dp_conns_count(dp, slot, &conns)) {
		st->conns_open = conns.open;
		st->sources = r->per_source ? conns.sources : 0;
	} else if (r->per_source &&
	    !bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_src_added),
				 &slot, &added) &&
	    !bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_src_freed),
				 &slot, &freed))
		st->sources = added - freed;
}

int sl_dp_rule_stats(const struct sl_dataplane *dp, size_t rule,
		     struct sl_rule_stats *st)
{
	sum_rule(dp, rule, sl_dp_now(dp), st);
	return 0;
}

int sl_dp_rules_stats(const struct sl_dataplane *dp, struct sl_rule_stats *st)
{
	uint64_t now = sl_dp_now(dp);

	for (size_t i = 0; i < dp->rules.n; i++)
		sum_rule(dp, i, now, &st[i]);
	return 0;
}

int sl_dp_rule_threshold(const struct sl_dataplane *dp, size_t rule,
			 uint64_t *limit, bool *warming)
{
	const struct sl_rule *r = &dp->rules.rules[rule];
	struct sluice_rule_cfg cfg;
	struct sluice_lease lease;

	/* sl_dp_set_limit() keeps count as rule_limit holds it */
	*limit = r->count;
	*warming = false;
	if (r->cluster.enabled || r->system.enabled) {
		if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_lease),
					&dp->slots[rule], &lease))
			return -errno;
		*limit = sluice_leased_limit(r->count, &lease, sl_dp_now(dp));
		return 0;
	}
	if (!r->warm_up)
		return 0;
	if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_cfg),
				&dp->slots[rule], &cfg))
		return -errno;
	*limit = sluice_effective_limit(&cfg, r->count, sl_dp_now(dp));
	*warming = *limit != r->count;
	return 0;
}

int sl_dp_host_stats(const struct sl_dataplane *dp,
		     uint64_t out[SLUICE_ST_MAX])
{
	uint64_t *vals = calloc(dp->n_cpus, sizeof(*vals));
	int fd = bpf_map__fd(dp->skel->maps.host_stats);

	if (!vals)
		return -ENOMEM;
	for (uint32_t k = 0; k < SLUICE_ST_MAX; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, vals))
			continue;
		for (int c = 0; c < dp->n_cpus; c++)
			out[k] += vals[c];
	}
	free(vals);
	return 0;
}

const char *sl_host_stat_name(int stat)
{
	static const char *const names[SLUICE_ST_MAX] = {
		[SLUICE_ST_UNMATCHED] = "unmatched",
		[SLUICE_ST_MALFORMED_ETH] = "malformed_eth",
		[SLUICE_ST_MALFORMED_VLAN] = "malformed_vlan",
		[SLUICE_ST_MALFORMED_IP4] = "malformed_ipv4",
		[SLUICE_ST_MALFORMED_IP6] = "malformed_ipv6",
		[SLUICE_ST_MALFORMED_L4] = "malformed_l4",
		[SLUICE_ST_FRAGMENTS] = "fragments",
		[SLUICE_ST_NO_RULE_CFG] = "no_rule_cfg",
		[SLUICE_ST_SRC_TABLE_FULL] = "source_table_full",
		[SLUICE_ST_FRAG_ORPHAN] = "unclassified_fragment_orphan",
		[SLUICE_ST_FRAG_TINY] = "unclassified_fragment_tiny",
		[SLUICE_ST_IP6_CHAIN] = "unclassified_ipv6_chain",
		[SLUICE_ST_CONN_UNTRACKED] = "conns_untracked",
		[SLUICE_ST_CONN_TABLE_FULL] = "conns_table_full",
	};

	return stat >= 0 && stat < SLUICE_ST_MAX ? names[stat] : "?";
}
