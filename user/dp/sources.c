// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sluice.skel.h"
#include "sources.h"

#define SRC_BATCH 4096 /* entries per lookup_batch call (a bucket's fit) */

/*
 * Append to v the source entries for which keep() is false, reading the
 * table SRC_BATCH entries per syscall. Deleting is left to
 * delete_sources(): deleting during the walk would upset its order.
 */
static int scan_sources(struct sl_dataplane *dp,
			bool (*keep)(struct sl_dataplane *dp,
				     const struct sluice_src_key *k,
				     const struct sluice_src_state *st,
				     void *arg),
			void *arg, struct sl_src_victims *v)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	int fd = bpf_map__fd(dp->skel->maps.src_table);
	struct sluice_src_key *keys = malloc(SRC_BATCH * sizeof(*keys));
	struct sluice_src_state *vals = malloc(SRC_BATCH * sizeof(*vals));
	/* opaque batch positions (bucket ids of the hash map) */
	struct sluice_src_key pos[2];
	bool first = true, done = false;
	int err = 0;

	if (!keys || !vals) {
		err = -ENOMEM;
		goto out;
	}
	while (!done) {
		__u32 count = SRC_BATCH;

		if (bpf_map_lookup_batch(fd, first ? NULL : &pos[0], &pos[1],
					 keys, vals, &count, &opts)) {
			if (errno != ENOENT) {
				err = -errno;
				break;
			}
			done = true; /* the last, maybe empty, batch */
		}
		pos[0] = pos[1];
		first = false;
		for (__u32 i = 0; i < count; i++) {
			if (keep(dp, &keys[i], &vals[i], arg))
				continue;
			if (v->n == v->cap) {
				size_t cap = v->cap ? v->cap * 2 : 1024;
				void *p = realloc(v->keys, cap * sizeof(*v->keys));

				if (!p) {
					err = -ENOMEM;
					goto out;
				}
				v->keys = p;
				v->cap = cap;
			}
			v->keys[v->n++] = keys[i];
		}
	}
out:
	free(keys);
	free(vals);
	return err;
}

/* Delete v's entries from v->next, at most max, counting each slot's
 * freed sources; returns how many went (one already gone is skipped). */
static int delete_sources(struct sl_dataplane *dp, struct sl_src_victims *v,
			  size_t max)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	int fd = bpf_map__fd(dp->skel->maps.src_table);
	int freed_fd = bpf_map__fd(dp->skel->maps.rule_src_freed);
	uint32_t *per_slot = calloc(SLUICE_MAX_RULE_SLOTS, sizeof(*per_slot));
	size_t end = v->n - v->next > max ? v->next + max : v->n;
	int deleted = 0;

	if (!per_slot)
		return -ENOMEM;
	while (v->next < end) {
		__u32 count = end - v->next;
		int err = bpf_map_delete_batch(fd, &v->keys[v->next], &count,
					       &opts)
				  ? -errno
				  : 0;

		for (__u32 k = 0; k < count; k++, v->next++) {
			const struct sluice_src_key *key = &v->keys[v->next];

			deleted++;
			if (key->family != SLUICE_SRC_OVERFLOW_FAMILY &&
			    key->rule < SLUICE_MAX_RULE_SLOTS)
				per_slot[key->rule]++;
		}
		if (err == -ENOENT) {
			v->next++; /* the data plane or a retire was first */
		} else if (err) {
			v->next = v->n; /* the next scan tries again */
			break;
		}
	}
	for (uint32_t s = 0; s < SLUICE_MAX_RULE_SLOTS; s++) {
		uint64_t freed;

		if (!per_slot[s] ||
		    bpf_map_lookup_elem(freed_fd, &s, &freed))
			continue;
		freed += per_slot[s];
		bpf_map_update_elem(freed_fd, &s, &freed, BPF_ANY);
	}
	free(per_slot);
	return deleted;
}

void sl_src_victims_free(struct sl_src_victims *v)
{
	free(v->keys);
	memset(v, 0, sizeof(*v));
}

static bool other_slot(struct sl_dataplane *dp, const struct sluice_src_key *k,
		       const struct sluice_src_state *st, void *arg)
{
	return k->rule >= SLUICE_MAX_RULE_SLOTS || !((uint8_t *)arg)[k->rule];
}

/* Delete the source entries of the slots marked in drop (one walk). */
void sl_dp_drop_sources(struct sl_dataplane *dp, uint8_t *drop)
{
	struct sl_src_victims v = { 0 };

	if (!scan_sources(dp, other_slot, drop, &v))
		delete_sources(dp, &v, v.n);
	sl_src_victims_free(&v);
}

/* The CPUs' source token caches may hold tokens of an earlier rule that
 * had this slot: empty them all (rare: when a per_source rule is created). */
int sl_dp_clear_source_caches(struct sl_dataplane *dp)
{
	int fd = bpf_map__fd(dp->skel->maps.src_cache);
	__u32 n = bpf_map__max_entries(dp->skel->maps.src_cache);
	size_t vsz = sizeof(struct sluice_src_cached);
	uint32_t *keys = malloc(n * sizeof(*keys));
	void *zero = calloc(n, vsz);
	int err = 0;

	if (!keys || !zero) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		keys[i] = i;
	if (bpf_map_update_batch(fd, keys, zero, &n, NULL))
		err = -errno;
out:
	free(keys);
	free(zero);
	return err;
}

/* An idle source's slot interval, read once per slot and scan. */
struct idle_scan {
	uint64_t now;
	uint64_t *interval_ns; /* per slot; UINT64_MAX: not read yet */
};

static bool recently_seen(struct sl_dataplane *dp,
			  const struct sluice_src_key *k,
			  const struct sluice_src_state *st, void *arg)
{
	struct idle_scan *sc = arg;
	struct sluice_rule_cfg cfg;

	if (k->rule >= SLUICE_MAX_RULE_SLOTS)
		return false;
	if (sc->interval_ns[k->rule] == UINT64_MAX) {
		if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_cfg),
					&k->rule, &cfg))
			return true;
		sc->interval_ns[k->rule] = cfg.interval_ns;
	}
	return st->last_seen_ns + 2 * sc->interval_ns[k->rule] > sc->now;
}

int sl_dp_gc_scan(struct sl_dataplane *dp, struct sl_src_victims *v)
{
	struct idle_scan sc = {
		.now = sl_dp_now(dp),
		.interval_ns = malloc(SLUICE_MAX_RULE_SLOTS * sizeof(uint64_t)),
	};
	int err;

	v->n = v->next = 0;
	v->rules_gen = __atomic_load_n(&dp->rules_gen, __ATOMIC_ACQUIRE);
	if (!sc.interval_ns)
		return -ENOMEM;
	memset(sc.interval_ns, 0xff, SLUICE_MAX_RULE_SLOTS * sizeof(uint64_t));
	err = scan_sources(dp, recently_seen, &sc, v);
	free(sc.interval_ns);
	return err;
}

int sl_dp_gc_collect(struct sl_dataplane *dp, struct sl_src_victims *v)
{
	/* a rule set applied since the scan may have given a slot of
	 * these sources to another rule: the next scan decides again */
	if (v->rules_gen != dp->rules_gen) {
		v->next = v->n;
		return 0;
	}
	return delete_sources(dp, v, SL_GC_CHUNK);
}

int sl_dp_gc_sources(struct sl_dataplane *dp)
{
	struct sl_src_victims v = { 0 };
	int err = sl_dp_gc_scan(dp, &v), deleted = 0;

	while (!err && v.next < v.n) {
		err = sl_dp_gc_collect(dp, &v);
		deleted += err > 0 ? err : 0;
		err = err < 0 ? err : 0;
	}
	sl_src_victims_free(&v);
	return err ? err : deleted;
}
