// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sluice.skel.h"
#include "stats.h"

static size_t percpu_stride(size_t size)
{
	return (size + 7) & ~7UL;
}

/* Slots read per bpf_map_lookup_batch() call: bounds the per-CPU buffer. */
#define STATS_BATCH 256

/* Sum the per-CPU values of rule (buf) into st, rates over its window. */
static void sum_rule(const struct sl_dataplane *dp, size_t rule,
		     const char *buf, uint64_t now, struct sl_rule_stats *st)
{
	const struct sl_rule *r = &dp->rules.rules[rule];
	size_t stride = percpu_stride(sizeof(struct sluice_rule_cpu));
	uint32_t slot = dp->slots[rule];
	uint64_t bucket_ns, cur, added = 0, freed = 0;
	double span_s;

	memset(st, 0, sizeof(*st));
	bucket_ns = (uint64_t)r->interval_ms * 1000000ULL / r->sample_count;
	cur = now / bucket_ns;
	/* the buckets summed cover the window up to now: the current one
	 * only in part, so divide by the time they really cover */
	span_s = ((r->sample_count - 1) * bucket_ns + now % bucket_ns) / 1e9;
	for (int c = 0; c < dp->n_cpus; c++) {
		const struct sluice_rule_cpu *rc =
			(const void *)(buf + c * stride);

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
	if (r->per_source &&
	    !bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_src_added),
				 &slot, &added) &&
	    !bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_src_freed),
				 &slot, &freed))
		st->sources = added - freed;
}

int sl_dp_rule_stats(const struct sl_dataplane *dp, size_t rule,
		     struct sl_rule_stats *st)
{
	size_t stride = percpu_stride(sizeof(struct sluice_rule_cpu));
	uint32_t slot = dp->slots[rule];
	char *buf;

	memset(st, 0, sizeof(*st));
	buf = calloc(dp->n_cpus, stride);
	if (!buf)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_cpu), &slot,
				buf)) {
		free(buf);
		return -errno;
	}
	sum_rule(dp, rule, buf, sl_dp_now(dp), st);
	free(buf);
	return 0;
}

/*
 * rule_cpu of slots [lo, lo + n) into buf, one syscall for all; an array
 * batch starts after the key in_batch points to (none: at key 0).
 */
static int read_rule_cpu(const struct sl_dataplane *dp, uint32_t lo,
			 uint32_t n, char *buf, uint32_t *keys)
{
	int fd = bpf_map__fd(dp->skel->maps.rule_cpu);
	size_t vsz = percpu_stride(sizeof(struct sluice_rule_cpu)) *
		     dp->n_cpus;

	for (uint32_t done = 0; done < n;) {
		uint32_t prev = lo + done - 1, next;
		__u32 count = n - done;

		if (bpf_map_lookup_batch(fd, lo + done ? &prev : NULL, &next,
					 keys, buf + done * vsz, &count,
					 NULL) &&
		    errno != ENOENT)
			return -errno;
		if (!count)
			return -ENOENT;
		done += count;
	}
	return 0;
}

int sl_dp_rules_stats(const struct sl_dataplane *dp, struct sl_rule_stats *st)
{
	size_t vsz = percpu_stride(sizeof(struct sluice_rule_cpu)) *
		     dp->n_cpus;
	int32_t *rule_of = malloc(SLUICE_MAX_RULE_SLOTS * sizeof(*rule_of));
	uint32_t *keys = malloc(STATS_BATCH * sizeof(*keys));
	char *buf = malloc(STATS_BATCH * vsz);
	uint64_t now = sl_dp_now(dp);
	uint32_t lo = SLUICE_MAX_RULE_SLOTS, hi = 0;
	int err = 0;

	if (!rule_of || !keys || !buf) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t s = 0; s < SLUICE_MAX_RULE_SLOTS; s++)
		rule_of[s] = -1;
	for (size_t i = 0; i < dp->rules.n; i++) {
		uint32_t s = dp->slots[i];

		rule_of[s] = i;
		lo = s < lo ? s : lo;
		hi = s + 1 > hi ? s + 1 : hi;
	}
	/* the slots in force, in chunks: the gaps cost only their copy */
	for (uint32_t base = lo; base < hi && !err; base += STATS_BATCH) {
		uint32_t n = hi - base < STATS_BATCH ? hi - base : STATS_BATCH;

		err = read_rule_cpu(dp, base, n, buf, keys);
		for (uint32_t k = 0; k < n && !err; k++)
			if (rule_of[base + k] >= 0)
				sum_rule(dp, rule_of[base + k], buf + k * vsz,
					 now, &st[rule_of[base + k]]);
	}
out:
	free(rule_of);
	free(keys);
	free(buf);
	return err;
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
	};

	return stat >= 0 && stat < SLUICE_ST_MAX ? names[stat] : "?";
}
