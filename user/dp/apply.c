// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "attach.h"
#include "conns.h"
#include "log.h"
#include "rule_cpu.h"
#include "rules_json.h"
#include "sluice.skel.h"
#include "sources.h"
#include "util.h"

/* Class ids of the two rule sets never overlap in the tries. */
static const uint32_t set_class_base[SLUICE_NUM_SETS] = { 1, 0x40000000 };

static int lpm_write(struct sl_dataplane *dp, const struct sl_lpm_entry *e,
		     bool del)
{
	int fd;

	if (e->family == 4) {
		struct sluice_lpm4_key k = { .prefixlen = 32 + e->plen,
					     .class_id = e->class_id };

		memcpy(k.addr, e->addr, 4);
		fd = bpf_map__fd(dp->skel->maps.lpm_v4);
		return (del ? bpf_map_delete_elem(fd, &k)
			    : bpf_map_update_elem(fd, &k, &e->ref, BPF_ANY))
			       ? -errno
			       : 0;
	} else {
		struct sluice_lpm6_key k = { .prefixlen = 32 + e->plen,
					     .class_id = e->class_id };

		memcpy(k.addr, e->addr, 16);
		fd = bpf_map__fd(dp->skel->maps.lpm_v6);
		return (del ? bpf_map_delete_elem(fd, &k)
			    : bpf_map_update_elem(fd, &k, &e->ref, BPF_ANY))
			       ? -errno
			       : 0;
	}
}

static bool in_set(uint32_t class_id, uint32_t set)
{
	uint32_t next = set + 1 < SLUICE_NUM_SETS ? set_class_base[set + 1]
						  : SLUICE_REF_LPM;

	return class_id >= set_class_base[set] && class_id < next;
}

/* Trie entries of the active set are kept (to delete after the next
 * swap); those of the other set are leftovers of an interrupted apply. */
static int adopt_lpm(struct sl_dataplane *dp, uint32_t active)
{
	struct bpf_map *maps[2] = { dp->skel->maps.lpm_v4,
				    dp->skel->maps.lpm_v6 };
	size_t cap = 0;

	for (int f = 0; f < 2; f++) {
		int fd = bpf_map__fd(maps[f]);
		struct sluice_lpm6_key key, *prev = NULL;

		while (!bpf_map_get_next_key(fd, prev, &key)) {
			struct sl_lpm_entry e = {
				.family = f ? 6 : 4,
				.plen = key.prefixlen - 32,
				.class_id = key.class_id,
			};

			prev = &key;
			memcpy(e.addr, key.addr, f ? 16 : 4);
			if (bpf_map_lookup_elem(fd, &key, &e.ref))
				continue;
			if (dp->n_lpm == cap) {
				void *p;

				cap = cap ? cap * 2 : 256;
				p = realloc(dp->lpm, cap * sizeof(*dp->lpm));
				if (!p)
					return -ENOMEM;
				dp->lpm = p;
			}
			dp->lpm[dp->n_lpm++] = e;
		}
	}
	for (size_t i = 0; i < dp->n_lpm;) {
		if (in_set(dp->lpm[i].class_id, active)) {
			i++;
			continue;
		}
		lpm_write(dp, &dp->lpm[i], true);
		dp->lpm[i] = dp->lpm[--dp->n_lpm];
	}
	return 0;
}

/* Rebuild what the maps hold from rule_meta and the tries. */
int sl_dp_adopt(struct sl_dataplane *dp)
{
	int meta_fd = bpf_map__fd(dp->skel->maps.rule_meta);
	int cfg_fd = bpf_map__fd(dp->skel->maps.rule_cfg);
	uint32_t active = dp->skel->bss->set_gen & 1;

	for (uint32_t slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++) {
		struct sl_slot_state *st = &dp->slot_state[slot];
		struct sluice_rule_meta meta;
		struct sluice_rule_cfg cfg;

		if (bpf_map_lookup_elem(meta_fd, &slot, &meta) ||
		    !(meta.set_mask & (1u << active)))
			continue;
		st->in_force = true;
		st->def_hash = meta.def_hash;
		memcpy(st->name, meta.name, sizeof(st->name) - 1);
		if (!bpf_map_lookup_elem(cfg_fd, &slot, &cfg))
			st->per_source = cfg.flags & SLUICE_RULE_PER_SOURCE;
	}
	return adopt_lpm(dp, active);
}

struct slot_map {
	struct bpf_map *map;
	size_t value_size; /* as user space reads and writes it */
};

#define N_SLOT_STATE_MAPS 6

/* What packets and the source collector write for a slot, besides
 * rule_cpu (written through its mmap): zero before the slot serves a new
 * rule. */
static void slot_state_maps(const struct sl_dataplane *dp,
			    struct slot_map out[N_SLOT_STATE_MAPS])
{
	const struct sluice_bpf *s = dp->skel;

	out[0] = (struct slot_map){ s->maps.rule_budget,
				    sizeof(struct sluice_budget) };
	out[1] = (struct slot_map){ s->maps.rule_src_added, sizeof(uint64_t) };
	out[2] = (struct slot_map){ s->maps.rule_src_freed, sizeof(uint64_t) };
	/* user space writes it, but a new rule must not inherit a lease */
	out[3] = (struct slot_map){ s->maps.rule_lease,
				    sizeof(struct sluice_lease) };
	out[4] = (struct slot_map){ s->maps.rule_breaker,
				    sizeof(struct sluice_breaker) };
	out[5] = (struct slot_map){ s->maps.conn_rule,
				    sizeof(struct sluice_conn_count) };
}

static bool map_pinned(const struct bpf_map *map)
{
	const char *path = bpf_map__pin_path(map);

	return path && !access(path, F_OK);
}

/* Before the load: does an earlier agent's slot state wait at the pin
 * paths (libbpf will reuse it)? Then no slot is known to be clean. */
bool sl_dp_slot_state_pinned(const struct sl_dataplane *dp)
{
	struct slot_map maps[N_SLOT_STATE_MAPS];

	slot_state_maps(dp, maps);
	for (int i = 0; i < N_SLOT_STATE_MAPS; i++)
		if (map_pinned(maps[i].map))
			return true;
	return map_pinned(dp->skel->maps.rule_cpu);
}

/* Keys per batch: bounds the buffer of zeros. */
#define BATCH_KEYS 256

/*
 * Write n values of vsz bytes each at keys of an array map, one syscall
 * for all of them; zeros when vals is NULL, BATCH_KEYS keys at a time.
 */
static int write_batch(int fd, const uint32_t *keys, const void *vals,
		       size_t vsz, size_t n)
{
	size_t chunk = vals || n < BATCH_KEYS ? n : BATCH_KEYS;
	void *zero = vals ? NULL : calloc(chunk ? chunk : 1, vsz);
	int err = 0;

	if (!vals && !zero)
		return -ENOMEM;
	for (size_t off = 0; off < n && !err; off += chunk) {
		__u32 count = n - off < chunk ? n - off : chunk;
		const void *v = vals ? (const char *)vals + off * vsz : zero;

		if (bpf_map_update_batch(fd, keys + off, v, &count, NULL))
			err = -errno;
	}
	free(zero);
	return err;
}

/* Zero the state of slots that no program runs with (slot_state_maps). */
static int clear_slots(struct sl_dataplane *dp, const uint32_t *keys,
		       size_t n)
{
	struct slot_map maps[N_SLOT_STATE_MAPS];
	int err = 0;

	slot_state_maps(dp, maps);
	for (int i = 0; i < N_SLOT_STATE_MAPS && !err; i++)
		err = write_batch(bpf_map__fd(maps[i].map), keys, NULL,
				  maps[i].value_size, n);
	for (int c = 0; c < dp->n_cpus && !err; c++)
		for (size_t i = 0; i < n; i++)
			memset(sl_dp_rule_cpu(dp, c, keys[i]), 0,
			       sizeof(struct sluice_rule_cpu));
	return err;
}

static void fill_meta(struct sluice_rule_meta *meta, const char *name,
		      uint64_t def_hash, uint32_t set_mask)
{
	memset(meta, 0, sizeof(*meta));
	snprintf(meta->name, sizeof(meta->name), "%s", name);
	meta->def_hash = def_hash;
	meta->set_mask = set_mask;
}

/* A conn_epoch no rule had: the clock in microseconds, so that an agent
 * restarted on a pinned data plane does not repeat its predecessor's. */
static uint32_t next_conn_epoch(struct sl_dataplane *dp)
{
	uint32_t t = (uint32_t)(sl_now_ns() / 1000);

	dp->conn_epoch = (int32_t)(t - dp->conn_epoch) > 0 ? t
							   : dp->conn_epoch + 1;
	return dp->conn_epoch;
}

/*
 * Fresh state for the new slots: configuration and zeroed counters. Most
 * were zeroed when they left a set (sl_dp_retire); the rest are here.
 */
static int init_slots(struct sl_dataplane *dp, const struct sl_ruleset *rs,
		      const uint32_t *slots, const uint64_t *hashes,
		      const bool *fresh, uint32_t set)
{
	struct sluice_bpf *s = dp->skel;
	uint32_t *keys = calloc(rs->n ? rs->n : 1, sizeof(*keys));
	uint32_t *dirty = calloc(rs->n ? rs->n : 1, sizeof(*dirty));
	struct sluice_rule_meta *meta = calloc(rs->n ? rs->n : 1,
					       sizeof(*meta));
	struct sluice_rule_cfg *cfg = calloc(rs->n ? rs->n : 1, sizeof(*cfg));
	struct sluice_breaker_cfg *bcfg = calloc(rs->n ? rs->n : 1,
						 sizeof(*bcfg));
	uint64_t *limit = calloc(rs->n ? rs->n : 1, sizeof(*limit));
	uint8_t *drop = calloc(SLUICE_MAX_RULE_SLOTS, 1);
	bool per_source = false;
	size_t n = 0, n_dirty = 0;
	int err;

	if (!keys || !dirty || !meta || !cfg || !bcfg || !limit || !drop) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < rs->n; i++) {
		const struct sl_rule *r = &rs->rules[i];

		if (!fresh[i])
			continue;
		keys[n] = slots[i];
		fill_meta(&meta[n], r->name, hashes[i], 1u << set);
		sl_rule_cfg(r, &cfg[n]);
		sl_breaker_cfg(r, &bcfg[n]);
		/* a cluster rule's total ramps on the token server; a local
		 * ramp on top would starve a node joining a warm cluster */
		if (r->cluster.enabled)
			cfg[n].warm_period_ms = 0;
		else if (r->warm_up)
			cfg[n].warm_start_ns = sl_dp_now(dp);
		/* this rule's, not a connection of the slot's last rule */
		cfg[n].conn_epoch = next_conn_epoch(dp);
		limit[n] = dp->first_limit ? dp->first_limit(r,
							     dp->first_limit_arg)
					   : r->count;
		drop[slots[i]] = r->per_source;
		per_source |= r->per_source;
		if (!dp->slot_state[slots[i]].clean)
			dirty[n_dirty++] = slots[i];
		n++;
	}
	err = write_batch(bpf_map__fd(s->maps.rule_meta), keys, meta,
			  sizeof(*meta), n);
	if (!err)
		err = write_batch(bpf_map__fd(s->maps.rule_limit), keys, limit,
				  sizeof(*limit), n);
	/* sources first: deleting one counts it in rule_src_freed */
	if (!err && per_source) {
		sl_dp_drop_sources(dp, drop);
		err = sl_dp_clear_source_caches(dp);
	}
	if (!err)
		err = clear_slots(dp, dirty, n_dirty);
	if (!err)
		err = write_batch(bpf_map__fd(s->maps.breaker_cfg), keys, bcfg,
				  sizeof(*bcfg), n);
	/* a byte no program writes: the slot's SYNs (tcp) or datagrams
	 * (udp) ask the breaker */
	for (size_t i = 0; !err && i < n; i++)
		for (int c = 0; bcfg[i].open_ns && c < dp->n_cpus; c++)
			sl_dp_rule_cpu(dp, c, keys[i])->has_breaker =
				bcfg[i].udp ? SLUICE_BRK_ON_UDP
					    : SLUICE_BRK_ON_SYN;
	/* configuration last: it is what makes a slot live */
	if (!err)
		err = write_batch(bpf_map__fd(s->maps.rule_cfg), keys, cfg,
				  sizeof(*cfg), n);
out:
	free(keys);
	free(dirty);
	free(meta);
	free(cfg);
	free(bcfg);
	free(limit);
	free(drop);
	return err;
}

/* The set is not read by the fast path: the last flip left it. */
static void write_port_table(struct sl_dataplane *dp, uint32_t set,
			     const uint32_t *port)
{
	memcpy(dp->skel->bss->port_table + set * SLUICE_SET_SPACE, port,
	       SLUICE_SET_SPACE * sizeof(*port));
}

/* Slots in force, found by name. */
static int index_slots(struct sl_dataplane *dp, struct sl_index *ix)
{
	int err = sl_index_init(ix, SLUICE_MAX_RULE_SLOTS);

	for (uint32_t s = 0; !err && s < SLUICE_MAX_RULE_SLOTS; s++)
		if (dp->slot_state[s].in_force)
			err = sl_index_add(ix, sl_fnv1a_str(dp->slot_state[s].name),
					   s);
	return err;
}

/* A rule keeps the slot in force of its name and identity (or of the
 * text hash an earlier agent pinned: sl_rule_pinned_as()). */
static int assign_slots(struct sl_dataplane *dp, const struct sl_ruleset *rs,
			const uint64_t *hashes, uint32_t *slots, bool *fresh,
			char *err, size_t errlen)
{
	uint8_t *taken = calloc(SLUICE_MAX_RULE_SLOTS, 1);
	struct sl_index index = { 0 };
	uint32_t next = 0;

	if (!taken || index_slots(dp, &index)) {
		free(taken);
		sl_index_free(&index);
		return -ENOMEM;
	}
	for (size_t i = 0; i < rs->n; i++) {
		const char *name = rs->rules[i].name;
		uint64_t h = hashes[i], nh = sl_fnv1a_str(name);
		size_t cursor = 0;
		int64_t s;

		fresh[i] = true;
		while ((s = sl_index_next(&index, nh, &cursor)) >= 0) {
			struct sl_slot_state *st = &dp->slot_state[s];

			if (!taken[s] && !strcmp(st->name, name) &&
			    sl_rule_pinned_as(&rs->rules[i], h, st->def_hash)) {
				slots[i] = s;
				taken[s] = 1;
				fresh[i] = false;
				break;
			}
		}
	}
	sl_index_free(&index);
	for (size_t i = 0; i < rs->n; i++) {
		if (!fresh[i])
			continue;
		while (next < SLUICE_MAX_RULE_SLOTS &&
		       (taken[next] || dp->slot_state[next].in_force))
			next++;
		if (next == SLUICE_MAX_RULE_SLOTS) {
			free(taken);
			snprintf(err, errlen,
				 "no free rule slot: %zu rules in force and "
				 "%zu in the new set exceed %u",
				 sl_dp_slots_in_force(dp), rs->n,
				 SLUICE_MAX_RULE_SLOTS);
			return -E2BIG;
		}
		taken[next] = 1;
		slots[i] = next++;
	}
	free(taken);
	return 0;
}

/*
 * rule_meta of the rules kept from the set in force (!fresh): in both
 * sets while both may run (set_mask 3), or in the new one only.
 */
static int write_kept_meta(struct sl_dataplane *dp,
			   const struct sl_ruleset *rs, const uint32_t *slots,
			   const uint64_t *hashes, const bool *fresh,
			   uint32_t set_mask,
			   uint32_t *keys, struct sluice_rule_meta *meta)
{
	size_t n = 0;

	for (size_t i = 0; i < rs->n; i++) {
		if (fresh[i])
			continue;
		keys[n] = slots[i];
		fill_meta(&meta[n++], rs->rules[i].name, hashes[i], set_mask);
	}
	return write_batch(bpf_map__fd(dp->skel->maps.rule_meta), keys, meta,
			   sizeof(*meta), n);
}

/* Grow rule_cpu's class, before the new set is written, when one of its
 * slots is beyond it (slots are taken lowest first: the class follows
 * the rules in force, both sets during a swap). */
static int fit_rule_cpu(struct sl_dataplane *dp, const uint32_t *slots,
			size_t n, char *err, size_t errlen)
{
	size_t need = 0;
	int ret;

	for (size_t i = 0; i < n; i++)
		if (slots[i] + 1 > need)
			need = slots[i] + 1;
	if (need <= (1ul << dp->rule_cpu_shift))
		return 0;
	ret = sl_rule_cpu_grow(dp, need);
	if (ret)
		snprintf(err, errlen,
			 "rule slot %zu is beyond rule_cpu's %u per CPU, and "
			 "a data plane with more could not take over: %s",
			 need - 1, 1u << dp->rule_cpu_shift, strerror(-ret));
	return ret;
}

/* The set's chains, at its part of the chains map (keys: scratch of
 * SLUICE_MAX_RULE_SLOTS). */
static int write_chains(struct sl_dataplane *dp, const struct sl_compiled *c,
			uint32_t *keys)
{
	int fd = bpf_map__fd(dp->skel->maps.chains), ret = 0;

	for (uint32_t off = 0; off < c->n_chains && !ret;
	     off += SLUICE_MAX_RULE_SLOTS) {
		uint32_t n = c->n_chains - off;

		if (n > SLUICE_MAX_RULE_SLOTS)
			n = SLUICE_MAX_RULE_SLOTS;
		for (uint32_t i = 0; i < n; i++)
			keys[i] = c->chain_base + off + i;
		ret = write_batch(fd, keys, c->chains + off,
				  sizeof(*c->chains), n);
	}
	return ret;
}

int sl_dp_apply(struct sl_dataplane *dp, const struct sl_ruleset *rs,
		char *err, size_t errlen)
{
	uint32_t set;
	struct sl_compiled comp = { 0 };
	struct sl_ruleset copy = { 0 };
	uint8_t *in_new = calloc(SLUICE_MAX_RULE_SLOTS, 1);
	uint8_t *drop = calloc(SLUICE_MAX_RULE_SLOTS, 1);
	uint32_t *keys = calloc(SLUICE_MAX_RULE_SLOTS, sizeof(*keys));
	uint32_t *retired = calloc(SLUICE_MAX_RULE_SLOTS, sizeof(*retired));
	struct sluice_rule_meta *meta = calloc(SLUICE_MAX_RULE_SLOTS,
					       sizeof(*meta));
	uint64_t *hashes = calloc(rs->n ? rs->n : 1, sizeof(*hashes));
	uint32_t *slots = calloc(rs->n ? rs->n : 1, sizeof(*slots));
	bool *fresh = calloc(rs->n ? rs->n : 1, sizeof(*fresh));
	bool any_drop = false;
	size_t written = 0, n = 0;
	int ret;

	if (!in_new || !drop || !keys || !retired || !meta || !hashes ||
	    !slots || !fresh) {
		ret = -ENOMEM;
		goto out;
	}
	/* the set written next is the one the last flip left */
	sl_dp_retire(dp);
	set = (dp->skel->bss->set_gen + 1) & 1;
	sl_rule_def_hashes(rs, hashes);
	ret = assign_slots(dp, rs, hashes, slots, fresh, err, errlen);
	if (ret)
		goto out;
	ret = fit_rule_cpu(dp, slots, rs->n, err, errlen);
	if (ret)
		goto out;
	ret = sl_compile(rs, slots, set_class_base[set],
			 set * SLUICE_MAX_CHAINS, SLUICE_MAX_LPM / 2, &comp,
			 err, errlen);
	if (ret)
		goto out;
	ret = sl_ruleset_copy(rs, 0, &copy);
	if (ret)
		goto out;

	ret = init_slots(dp, rs, slots, hashes, fresh, set);
	if (!ret)
		ret = write_kept_meta(dp, rs, slots, hashes, fresh, 3u, keys,
				      meta);
	if (!ret) {
		write_port_table(dp, set, comp.port);
		dp->skel->bss->needs_l4[set] = comp.needs_l4;
	}
	if (!ret)
		ret = write_chains(dp, &comp, keys);
	for (; written < comp.n_lpm && !ret; written++)
		ret = lpm_write(dp, &comp.lpm[written], false);
	if (ret) {
		snprintf(err, errlen, "writing the rule set into the maps: %s",
			 strerror(-ret));
		while (written--)
			lpm_write(dp, &comp.lpm[written], true);
		goto out;
	}

	/* one store: the next generation, whose low bit is set; release:
	 * after the port table, which is written through the same mmap */
	__atomic_store_n(&dp->skel->bss->set_gen, dp->skel->bss->set_gen + 1,
			 __ATOMIC_RELEASE);
	dp->retire_pending = true;
	dp->retired_lpm = dp->lpm;
	dp->n_retired_lpm = dp->n_lpm;
	dp->lpm = comp.lpm;
	dp->n_lpm = comp.n_lpm;
	comp.lpm = NULL;
	sl_compiled_free(&comp);

	/* the maps now say which slots the new set uses (the fresh ones
	 * say so already); slots that left the set lose their sources */
	for (size_t i = 0; i < rs->n; i++)
		in_new[slots[i]] = 1;
	for (uint32_t s = 0; s < SLUICE_MAX_RULE_SLOTS; s++) {
		struct sl_slot_state *st = &dp->slot_state[s];

		if (!st->in_force || in_new[s])
			continue;
		st->in_force = false;
		retired[n] = s;
		fill_meta(&meta[n++], "", 0, 0);
		drop[s] = st->per_source;
		any_drop |= st->per_source;
	}
	write_batch(bpf_map__fd(dp->skel->maps.rule_meta), retired, meta,
		    sizeof(*meta), n);
	if (any_drop) {
		dp->retired_sources = drop;
		drop = NULL;
	}
	if (n) {
		dp->retired_slots = retired;
		dp->n_retired_slots = n;
		retired = NULL;
	}
	write_kept_meta(dp, rs, slots, hashes, fresh, 1u << set, keys, meta);
	for (size_t i = 0; i < rs->n; i++) {
		struct sl_slot_state *st = &dp->slot_state[slots[i]];

		st->in_force = true;
		st->clean = false;
		st->per_source = rs->rules[i].per_source;
		st->def_hash = hashes[i];
		snprintf(st->name, sizeof(st->name), "%s", rs->rules[i].name);
	}
	sl_ruleset_free(&dp->rules);
	dp->rules = copy;
	free(dp->slots);
	dp->slots = slots;
	__atomic_add_fetch(&dp->rules_gen, 1, __ATOMIC_RELEASE);
	slots = NULL;
	if (sl_dp_sync_egress(dp))
		pr_warn("breakers: the egress program could not be attached "
			"on every interface: their SYN answers go uncounted");
	/* the connections of rules that left go now, not at the next
	 * second's sweep: their tuples are free for the rules in force */
	ret = sl_dp_sweep_conns(dp);
	if (ret)
		pr_warn("sweeping the connections of conns rules: %s",
			strerror(-ret));
	ret = 0;
out:
	sl_compiled_free(&comp);
	if (ret)
		sl_ruleset_free(&copy);
	free(slots);
	free(fresh);
	free(hashes);
	free(keys);
	free(retired);
	free(meta);
	free(in_new);
	free(drop);
	return ret;
}

void sl_dp_retire(struct sl_dataplane *dp)
{
	if (!dp->retire_pending)
		return;
	sl_dp_wait_for_readers();
	for (size_t i = 0; i < dp->n_retired_lpm; i++)
		lpm_write(dp, &dp->retired_lpm[i], true);
	if (dp->retired_sources)
		sl_dp_drop_sources(dp, dp->retired_sources);
	/* after the sources: deleting one counts in rule_src_freed; a slot
	 * that fails to clear stays dirty, zeroed when it is next used */
	if (!clear_slots(dp, dp->retired_slots, dp->n_retired_slots))
		for (size_t i = 0; i < dp->n_retired_slots; i++)
			dp->slot_state[dp->retired_slots[i]].clean = true;
	free(dp->retired_lpm);
	free(dp->retired_sources);
	free(dp->retired_slots);
	dp->retired_lpm = NULL;
	dp->n_retired_lpm = 0;
	dp->retired_sources = NULL;
	dp->retired_slots = NULL;
	dp->n_retired_slots = 0;
	dp->retire_pending = false;
}

int sl_dp_set_limit(struct sl_dataplane *dp, const char *rule_name,
		    uint64_t count, const struct sluice_lease *lease)
{
	static const struct sluice_lease none;
	int limit_fd = bpf_map__fd(dp->skel->maps.rule_limit);
	int lease_fd = bpf_map__fd(dp->skel->maps.rule_lease);

	for (size_t i = 0; i < dp->rules.n; i++) {
		const uint32_t *slot = &dp->slots[i];

		if (strcmp(dp->rules.rules[i].name, rule_name))
			continue;
		/* a reader between the writes sees the new expiry with the
		 * old grant, or the new limit with the old expiry: either
		 * way what one of the two states allows */
		if ((lease && bpf_map_update_elem(lease_fd, slot, lease,
						  BPF_ANY)) ||
		    bpf_map_update_elem(limit_fd, slot, &count, BPF_ANY) ||
		    (!lease && bpf_map_update_elem(lease_fd, slot, &none,
						   BPF_ANY)))
			return -errno;
		dp->rules.rules[i].count = count;
		return 0;
	}
	return -ENOENT;
}

int sl_dp_get_limit(const struct sl_dataplane *dp, size_t idx,
		    uint64_t *count)
{
	int fd = bpf_map__fd(dp->skel->maps.rule_limit);

	if (idx >= dp->rules.n)
		return -ENOENT;
	return bpf_map_lookup_elem(fd, &dp->slots[idx], count) ? -errno : 0;
}
