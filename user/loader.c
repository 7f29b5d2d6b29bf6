// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <linux/if_link.h>
#include <linux/membarrier.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "loader.h"
#include "log.h"
#include "sluice.skel.h"

/* Class ids of the two rule sets never overlap in the tries. */
static const uint32_t set_class_base[SLUICE_NUM_SETS] = { 1, 0x40000000 };

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	char buf[512];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	sl_log(level == LIBBPF_WARN ? SL_LOG_WARN : SL_LOG_DEBUG, "libbpf: %s",
	       buf);
	return 0;
}

int sl_dp_map_fd(const struct sl_dataplane *dp, const char *name)
{
	struct bpf_map *m =
		bpf_object__find_map_by_name(dp->skel->obj, name);

	return m ? bpf_map__fd(m) : -ENOENT;
}

int sl_dp_load(struct sl_dataplane *dp, const struct sl_dp_opts *opts)
{
	int err;

	memset(dp, 0, sizeof(*dp));
	libbpf_set_print(libbpf_print);
	dp->n_cpus = libbpf_num_possible_cpus();
	if (dp->n_cpus <= 0)
		return dp->n_cpus ? dp->n_cpus : -EINVAL;
	dp->skel = sluice_bpf__open();
	if (!dp->skel)
		return -errno;
	dp->skel->rodata->nr_cpus = dp->n_cpus;
	dp->skel->rodata->test_clock = opts->test_clock;
	dp->skel->rodata->malformed_verdict =
		opts->drop_malformed ? XDP_DROP : XDP_PASS;
	err = sluice_bpf__load(dp->skel);
	if (err) {
		sluice_bpf__destroy(dp->skel);
		dp->skel = NULL;
		return err;
	}
	return 0;
}

static bool same_definition(const struct sl_rule *a, const struct sl_rule *b)
{
	struct sl_rule x = *a, y = *b;

	/* position and priority only steer classification, which lives in
	 * the set tables; everything else is the rule's slot state */
	x.file_index = y.file_index = 0;
	x.has_priority = y.has_priority = false;
	x.priority = y.priority = 0;
	return !memcmp(&x, &y, sizeof(x));
}

static int percpu_zero(struct sl_dataplane *dp, int fd, uint32_t key,
		       size_t value_size)
{
	size_t sz = ((value_size + 7) & ~7UL) * dp->n_cpus;
	void *zero = calloc(1, sz);
	int err;

	if (!zero)
		return -ENOMEM;
	err = bpf_map_update_elem(fd, &key, zero, BPF_ANY) ? -errno : 0;
	free(zero);
	return err;
}

/*
 * Source entries for which keep() is false, deleted after the walk:
 * deleting during bpf_map_get_next_key() would restart it.
 */
static int sweep_sources(struct sl_dataplane *dp,
			 bool (*keep)(struct sl_dataplane *dp,
				      const struct sluice_src_key *k,
				      const struct sluice_src_state *st,
				      void *arg),
			 void *arg)
{
	int fd = bpf_map__fd(dp->skel->maps.src_table);
	int freed_fd = bpf_map__fd(dp->skel->maps.rule_src_freed);
	struct sluice_src_key key, *prev = NULL, *victims = NULL;
	size_t n = 0, cap = 0;
	int deleted = 0;

	while (!bpf_map_get_next_key(fd, prev, &key)) {
		struct sluice_src_state st;

		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &st) ||
		    keep(dp, &key, &st, arg))
			continue;
		if (n == cap) {
			void *p;

			cap = cap ? cap * 2 : 1024;
			p = realloc(victims, cap * sizeof(*victims));
			if (!p)
				break;
			victims = p;
		}
		victims[n++] = key;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t freed;

		if (bpf_map_delete_elem(fd, &victims[i]))
			continue;
		deleted++;
		if (victims[i].family != SLUICE_SRC_OVERFLOW_FAMILY &&
		    !bpf_map_lookup_elem(freed_fd, &victims[i].rule, &freed)) {
			freed++;
			bpf_map_update_elem(freed_fd, &victims[i].rule, &freed,
					    BPF_ANY);
		}
	}
	free(victims);
	return deleted;
}

static bool other_slot(struct sl_dataplane *dp, const struct sluice_src_key *k,
		       const struct sluice_src_state *st, void *arg)
{
	return k->rule != *(uint32_t *)arg;
}

static void drop_sources(struct sl_dataplane *dp, uint32_t slot)
{
	sweep_sources(dp, other_slot, &slot);
}

/* Fresh state for a slot: its configuration and zeroed counters. */
static int init_slot(struct sl_dataplane *dp, uint32_t slot,
		     const struct sl_rule *r)
{
	struct sluice_bpf *s = dp->skel;
	struct sluice_rule_cfg cfg;
	struct sluice_budget budget = { 0 };
	uint64_t zero = 0;
	int err = 0;

	sl_rule_cfg(r, &cfg);
	if (bpf_map_update_elem(bpf_map__fd(s->maps.rule_budget), &slot,
				&budget, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(s->maps.rule_limit), &slot,
				&r->count, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(s->maps.rule_src_added), &slot,
				&zero, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(s->maps.rule_src_freed), &slot,
				&zero, BPF_ANY))
		return -errno;
	err = percpu_zero(dp, bpf_map__fd(s->maps.rule_cpu), slot,
			  sizeof(struct sluice_rule_cpu));
	if (err)
		return err;
	if (r->per_source)
		drop_sources(dp, slot);
	/* configuration last: it is what makes the slot live */
	if (bpf_map_update_elem(bpf_map__fd(s->maps.rule_cfg), &slot, &cfg,
				BPF_ANY))
		return -errno;
	return 0;
}

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

static int write_port_table(struct sl_dataplane *dp, uint32_t set,
			    const struct sluice_port_ref *port)
{
	int fd = bpf_map__fd(dp->skel->maps.port_table);
	uint32_t *keys = malloc(SLUICE_SET_SPACE * sizeof(*keys));
	__u32 count = SLUICE_SET_SPACE;
	int err;

	if (!keys)
		return -ENOMEM;
	for (uint32_t i = 0; i < SLUICE_SET_SPACE; i++)
		keys[i] = set * SLUICE_SET_SPACE + i;
	err = bpf_map_update_batch(fd, keys, port, &count, NULL) ? -errno : 0;
	free(keys);
	return err;
}

/* Waits until no XDP program still runs with the old set: XDP runs in an
 * RCU read-side section and MEMBARRIER_CMD_GLOBAL waits for a grace
 * period. */
static void wait_for_readers(void)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
		usleep(10000);
}

static int copy_ruleset(const struct sl_ruleset *rs, struct sl_ruleset *out)
{
	out->n = rs->n;
	out->rules = calloc(rs->n ? rs->n : 1, sizeof(*out->rules));
	if (!out->rules)
		return -ENOMEM;
	memcpy(out->rules, rs->rules, rs->n * sizeof(*rs->rules));
	return 0;
}

static int assign_slots(struct sl_dataplane *dp, const struct sl_ruleset *rs,
			uint32_t *slots, bool *fresh, char *err,
			size_t errlen)
{
	uint8_t *used = calloc(SLUICE_MAX_RULE_SLOTS, 1);
	uint32_t next = 0;

	if (!used)
		return -ENOMEM;
	for (size_t i = 0; i < dp->rules.n; i++)
		used[dp->slots[i]] = 1;
	for (size_t i = 0; i < rs->n; i++) {
		fresh[i] = true;
		for (size_t j = 0; j < dp->rules.n; j++) {
			if (!strcmp(rs->rules[i].name, dp->rules.rules[j].name) &&
			    same_definition(&rs->rules[i],
					    &dp->rules.rules[j])) {
				slots[i] = dp->slots[j];
				fresh[i] = false;
				break;
			}
		}
		if (!fresh[i])
			continue;
		while (next < SLUICE_MAX_RULE_SLOTS && used[next])
			next++;
		if (next == SLUICE_MAX_RULE_SLOTS) {
			free(used);
			snprintf(err, errlen,
				 "no free rule slot: %zu rules in force and "
				 "%zu in the new set exceed %u",
				 dp->rules.n, rs->n, SLUICE_MAX_RULE_SLOTS);
			return -E2BIG;
		}
		used[next] = 1;
		slots[i] = next;
	}
	free(used);
	return 0;
}

int sl_dp_apply(struct sl_dataplane *dp, const struct sl_ruleset *rs,
		char *err, size_t errlen)
{
	uint32_t set = !(dp->skel->bss->active_set & 1);
	struct sl_compiled comp = { 0 };
	struct sl_ruleset copy = { 0 };
	uint32_t *slots;
	bool *fresh;
	size_t written = 0;
	int ret;

	slots = calloc(rs->n ? rs->n : 1, sizeof(*slots));
	fresh = calloc(rs->n ? rs->n : 1, sizeof(*fresh));
	if (!slots || !fresh) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = assign_slots(dp, rs, slots, fresh, err, errlen);
	if (ret)
		goto fail;
	ret = sl_compile(rs, slots, set_class_base[set], SLUICE_MAX_LPM / 2,
			 &comp, err, errlen);
	if (ret)
		goto fail;
	ret = copy_ruleset(rs, &copy);
	if (ret)
		goto fail;

	for (size_t i = 0; i < rs->n && !ret; i++)
		if (fresh[i])
			ret = init_slot(dp, slots[i], &rs->rules[i]);
	if (!ret)
		ret = write_port_table(dp, set, comp.port);
	for (; written < comp.n_lpm && !ret; written++)
		ret = lpm_write(dp, &comp.lpm[written], false);
	if (ret) {
		snprintf(err, errlen, "writing the rule set into the maps: %s",
			 strerror(-ret));
		while (written--)
			lpm_write(dp, &comp.lpm[written], true);
		goto fail;
	}

	dp->skel->bss->active_set = set;
	wait_for_readers();

	for (size_t i = 0; i < dp->n_lpm; i++)
		lpm_write(dp, &dp->lpm[i], true);
	free(dp->lpm);
	dp->lpm = comp.lpm;
	dp->n_lpm = comp.n_lpm;
	comp.lpm = NULL;
	sl_compiled_free(&comp);

	for (size_t j = 0; j < dp->rules.n; j++) {
		bool kept = false;

		for (size_t i = 0; i < rs->n && !kept; i++)
			kept = slots[i] == dp->slots[j];
		if (!kept && dp->rules.rules[j].per_source)
			drop_sources(dp, dp->slots[j]);
	}
	sl_ruleset_free(&dp->rules);
	dp->rules = copy;
	free(dp->slots);
	dp->slots = slots;
	free(fresh);
	return 0;
fail:
	sl_compiled_free(&comp);
	sl_ruleset_free(&copy);
	free(slots);
	free(fresh);
	return ret;
}

const char *sl_xdp_mode_str(enum sl_xdp_mode mode)
{
	switch (mode) {
	case SL_XDP_NATIVE:
		return "native";
	case SL_XDP_GENERIC:
		return "generic";
	default:
		return "auto";
	}
}

int sl_xdp_mode_parse(const char *s, enum sl_xdp_mode *mode)
{
	if (!strcmp(s, "auto"))
		*mode = SL_XDP_AUTO;
	else if (!strcmp(s, "native"))
		*mode = SL_XDP_NATIVE;
	else if (!strcmp(s, "generic"))
		*mode = SL_XDP_GENERIC;
	else
		return -EINVAL;
	return 0;
}

static int link_xdp(struct sl_dataplane *dp, int ifindex, __u32 flags)
{
	LIBBPF_OPTS(bpf_link_create_opts, lopts, .flags = flags);
	int fd = bpf_link_create(bpf_program__fd(dp->skel->progs.sluice_xdp),
				 ifindex, BPF_XDP, &lopts);

	return fd < 0 ? -errno : fd;
}

int sl_dp_attach(struct sl_dataplane *dp, const char *ifname,
		 enum sl_xdp_mode mode)
{
	struct sl_iface *ifc;
	int ifindex, fd;

	if (dp->n_ifaces == SL_MAX_IFACES)
		return -E2BIG;
	ifindex = if_nametoindex(ifname);
	if (!ifindex)
		return -ENODEV;
	ifc = &dp->ifaces[dp->n_ifaces];
	fd = mode == SL_XDP_GENERIC ? -EOPNOTSUPP
				    : link_xdp(dp, ifindex, XDP_FLAGS_DRV_MODE);
	if (fd >= 0) {
		ifc->mode = SL_XDP_NATIVE;
	} else if (mode == SL_XDP_NATIVE) {
		return fd;
	} else {
		if (mode == SL_XDP_AUTO)
			pr_warn("%s: native XDP unavailable (%s), using generic "
				"XDP: slower, runs after the kernel allocates "
				"an skb", ifname, strerror(-fd));
		fd = link_xdp(dp, ifindex, XDP_FLAGS_SKB_MODE);
		if (fd < 0)
			return fd;
		ifc->mode = SL_XDP_GENERIC;
	}
	snprintf(ifc->name, sizeof(ifc->name), "%s", ifname);
	ifc->ifindex = ifindex;
	ifc->link_fd = fd;
	dp->n_ifaces++;
	return 0;
}

int sl_dp_set_limit(struct sl_dataplane *dp, const char *rule_name,
		    uint64_t count)
{
	int fd = bpf_map__fd(dp->skel->maps.rule_limit);

	for (size_t i = 0; i < dp->rules.n; i++) {
		if (strcmp(dp->rules.rules[i].name, rule_name))
			continue;
		if (bpf_map_update_elem(fd, &dp->slots[i], &count, BPF_ANY))
			return -errno;
		dp->rules.rules[i].count = count;
		return 0;
	}
	return -ENOENT;
}

void sl_dp_set_test_time(struct sl_dataplane *dp, uint64_t now_ns)
{
	dp->skel->bss->test_now_ns = now_ns;
}

uint64_t sl_dp_now(const struct sl_dataplane *dp)
{
	struct timespec ts;

	if (dp->skel->rodata->test_clock)
		return dp->skel->bss->test_now_ns;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static bool recently_seen(struct sl_dataplane *dp,
			  const struct sluice_src_key *k,
			  const struct sluice_src_state *st, void *arg)
{
	struct sluice_rule_cfg cfg;

	if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_cfg), &k->rule,
				&cfg))
		return true;
	return st->last_seen_ns + 2 * cfg.interval_ns > *(uint64_t *)arg;
}

int sl_dp_gc_sources(struct sl_dataplane *dp)
{
	uint64_t now = sl_dp_now(dp);

	return sweep_sources(dp, recently_seen, &now);
}

void sl_dp_destroy(struct sl_dataplane *dp)
{
	for (int i = 0; i < dp->n_ifaces; i++)
		close(dp->ifaces[i].link_fd);
	if (dp->skel)
		sluice_bpf__destroy(dp->skel);
	sl_ruleset_free(&dp->rules);
	free(dp->slots);
	free(dp->lpm);
	memset(dp, 0, sizeof(*dp));
}
