// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attach.h"
#include "log.h"
#include "rule_cpu.h"
#include "sluice.skel.h"
#include "upgrade.h"
#include "util.h"

int sl_upgrade_prepare(const struct sl_layout *next, struct sl_pins *p)
{
	for (int i = 0; i < p->maps.n; i++) {
		if (p->maps.maps[i].btf)
			continue;
		pr_err("upgrade: cannot read the types (BTF) of the running "
		       "map %s in %s, so its state cannot be carried to this "
		       "layout: no BTF is pinned beside it (a release before "
		       "layout ids), and reading it from the kernel needs "
		       "CAP_SYS_ADMIN", p->maps.maps[i].name, p->maps_dir);
		return -EPERM;
	}
	for (int i = 0; i < next->n; i++) {
		const struct sl_layout_map *m = &next->maps[i];
		const struct sl_layout_map *old = sl_layout_find(&p->maps,
								 m->name);
		int err;

		if (!old || old->shape != m->shape)
			continue;
		err = bpf_map__reuse_fd(m->obj_map, old->fd);
		if (err)
			return err;
		p->shared[i] = true;
	}
	return 0;
}

static bool is_percpu(uint32_t type)
{
	return type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       type == BPF_MAP_TYPE_PERCPU_HASH ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static bool is_array(uint32_t type)
{
	return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~7UL;
}

/* n a multiple of 8 (values are 8-byte strided) */
static bool all_zero(const uint8_t *p, size_t n)
{
	const uint64_t *w = (const uint64_t *)p;

	for (size_t i = 0; i < n / 8; i++)
		if (w[i])
			return false;
	return true;
}

static size_t mmap_len(const struct sl_layout_map *m)
{
	size_t page = sysconf(_SC_PAGESIZE);

	return (m->max_entries * round8(m->value_size) + page - 1) &
	       ~(page - 1);
}

/*
 * A carried map. The first copy takes every element and notes the ones
 * in use; a map the fast path writes with every packet is copied again,
 * those elements only, just before the switch.
 */
struct carried {
	const struct sl_layout_map *from, *to;
	/* rule_cpu: slots per CPU on each side (0: elements map 1:1) */
	uint32_t from_stride, to_stride;
	struct sl_carry_plan kplan, vplan;
	uint32_t *live;		/* arrays: the elements in use */
	size_t n_live;
	uint8_t *seen;		/* mmapable arrays: the contents copied */
	size_t elements;
};

static int note_live(struct carried *c, uint32_t idx)
{
	if (!(c->n_live & (c->n_live + 1)) || !c->live) {
		/* grows at 1, 3, 7, ...: each time n_live + 1 is a power
		 * of two */
		void *p = realloc(c->live, 2 * (c->n_live + 1) *
						   sizeof(*c->live));

		if (!p)
			return -ENOMEM;
		c->live = p;
	}
	c->live[c->n_live++] = idx;
	return 0;
}

/* Both sides mmapable: element by element in memory. */
/* Where element i of the old map goes in the new one; SIZE_MAX: nowhere
 * (a slot beyond the new class, which no slot in force reaches). */
static size_t carried_index(const struct carried *c, size_t i)
{
	size_t cpu, slot;

	if (!c->from_stride)
		return i;
	cpu = i / c->from_stride;
	slot = i % c->from_stride;
	if (slot >= c->to_stride ||
	    (cpu + 1) * c->to_stride > c->to->max_entries)
		return SIZE_MAX;
	return cpu * c->to_stride + slot;
}

static int carry_mmap(struct carried *c, bool again)
{
	const struct sl_layout_map *from = c->from, *to = c->to;
	size_t ss = round8(from->value_size), ds = round8(to->value_size);
	uint32_t n = c->from_stride || from->max_entries < to->max_entries
			     ? from->max_entries
			     : to->max_entries;
	uint8_t *src, *dst;
	int err = 0;

	src = mmap(NULL, mmap_len(from), PROT_READ, MAP_SHARED, from->fd, 0);
	if (src == MAP_FAILED)
		return -errno;
	dst = mmap(NULL, mmap_len(to), PROT_READ | PROT_WRITE, MAP_SHARED,
		   bpf_map__fd(to->obj_map), 0);
	if (dst == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	if (again) {
		for (size_t k = 0; k < c->n_live; k++) {
			size_t i = c->live[k], j = carried_index(c, i);

			memcpy(c->seen + i * ss, src + i * ss, ss);
			sl_layout_apply(&c->vplan, c->seen + i * ss,
					dst + j * ds);
		}
		goto out;
	}
	c->seen = malloc((size_t)n * ss);
	if (!c->seen) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(c->seen, src, (size_t)n * ss);
	c->elements = n;
	for (uint32_t i = 0; i < n && !err; i++) {
		size_t j = carried_index(c, i);

		if (j == SIZE_MAX || all_zero(c->seen + i * ss, ss))
			continue;
		sl_layout_apply(&c->vplan, c->seen + i * ss, dst + j * ds);
		err = note_live(c, i);
	}
out:
	if (dst != MAP_FAILED)
		munmap(dst, mmap_len(to));
	munmap(src, mmap_len(from));
	return err;
}

/* A per-CPU array that became a flat one, CPU c's elements from c x the
 * old size (src_cache): each CPU's value goes to its own element. */
static bool flattened(const struct sl_layout_map *from,
		      const struct sl_layout_map *to)
{
	return from->type == BPF_MAP_TYPE_PERCPU_ARRAY &&
	       to->type == BPF_MAP_TYPE_ARRAY;
}

static int carry_flattened(int to_fd, uint32_t stride, uint32_t idx,
			   const uint8_t *values, size_t size, int cpus)
{
	for (int cpu = 0; cpu < cpus; cpu++) {
		uint32_t key = (uint32_t)cpu * stride + idx;

		if (bpf_map_update_elem(to_fd, &key, values + cpu * size,
					BPF_ANY))
			return -errno;
	}
	return 0;
}

/* Through the syscalls: every element of an array (again: those in use),
 * every key otherwise. */
static int carry_elems(struct carried *c, int n_cpus, bool again)
{
	const struct sl_layout_map *from = c->from, *to = c->to;
	int cpus = is_percpu(from->type) ? n_cpus : 1;
	size_t ss = round8(from->value_size), ds = round8(to->value_size);
	uint8_t *sv = calloc(cpus, ss), *dv = calloc(cpus, ds);
	uint8_t *sk = calloc(1, from->key_size), *dk = calloc(1, to->key_size);
	uint8_t *prev = NULL;
	int to_fd = bpf_map__fd(to->obj_map), err = 0;
	bool array = is_array(to->type);
	uint32_t idx = 0;
	size_t k = 0;

	if (!sv || !dv || !sk || !dk) {
		err = -ENOMEM;
		goto out;
	}
	for (;; idx++) {
		if (array && again) {
			if (k == c->n_live)
				break;
			idx = c->live[k++];
		}
		if (array) {
			if (idx >= from->max_entries || idx >= to->max_entries)
				break;
			memcpy(sk, &idx, sizeof(idx));
			memcpy(dk, &idx, sizeof(idx));
		} else {
			if (bpf_map_get_next_key(from->fd, prev, sk))
				break;
			prev = sk;
			memset(dk, 0, to->key_size);
			sl_layout_apply(&c->kplan, sk, dk);
		}
		if (bpf_map_lookup_elem(from->fd, sk, sv) ||
		    (!again && all_zero(sv, (size_t)cpus * ss)))
			continue;
		memset(dv, 0, (size_t)cpus * ds);
		for (int cpu = 0; cpu < cpus; cpu++)
			sl_layout_apply(&c->vplan, sv + cpu * ss, dv + cpu * ds);
		if (flattened(from, to))
			err = carry_flattened(to_fd, from->max_entries, idx,
					      dv, ds, cpus);
		else if (bpf_map_update_elem(to_fd, dk, dv, BPF_ANY))
			err = -errno;
		if (err)
			break;
		if (!again)
			err = array ? note_live(c, idx) : 0;
		if (!array)
			c->n_live++;
	}
out:
	free(sv);
	free(dv);
	free(sk);
	free(dk);
	return err;
}

static int carry_map(struct carried *c, int n_cpus, bool again)
{
	const struct sl_layout_map *from = c->from, *to = c->to;
	int err = 0;

	if (!again && from->type != to->type && !flattened(from, to)) {
		pr_err("upgrade: map %s changed its type (%u to %u): its "
		       "state cannot be carried", to->name, from->type,
		       to->type);
		return -EINVAL;
	}
	if (!again) {
		err = sl_layout_plan(from, to, false, &c->vplan);
		if (!err && !is_array(to->type))
			err = sl_layout_plan(from, to, true, &c->kplan);
	}
	if (err) {
		pr_err("upgrade: map %s: no field-by-field way from the "
		       "running layout to this one: %s", to->name,
		       strerror(-err));
		return err;
	}
	if ((from->flags & to->flags & BPF_F_MMAPABLE) &&
	    to->type == BPF_MAP_TYPE_ARRAY)
		err = carry_mmap(c, again);
	else
		err = carry_elems(c, n_cpus, again);
	if (err)
		pr_err("upgrade: carrying map %s: %s", to->name,
		       strerror(-err));
	else if (!again)
		pr_info("upgrade: carried %s (%zu entries in use)%s%s",
			to->name, c->n_live, c->vplan.diff[0] ? ": " : "",
			c->vplan.diff);
	return err;
}


/* rule_cpu's slots per CPU in a layout (2^shift; an older build's 8192). */
static uint32_t cpu_stride(const struct sl_layout_map *m, int n_cpus)
{
	return m->max_entries / (uint32_t)n_cpus;
}

/*
 * What the old program counted between the copy of rule_cpu and the
 * switch, added to the new totals. The fast path adds to a CPU's element
 * with plain loads and stores; an atomic add made on that same CPU is one
 * instruction, which the XDP softirq cannot split, so neither loses the
 * other's count.
 */
static void catch_up_counters(struct sl_dataplane *dp, struct carried *c)
{
	const struct sl_layout_map *from = c->from;
	const struct sl_carry_plan *plan = &c->vplan;
	size_t ss = round8(from->value_size);
	uint32_t fs = cpu_stride(from, dp->n_cpus);
	cpu_set_t saved, one;
	uint8_t *now;

	if (!c->seen)
		return;
	now = mmap(NULL, mmap_len(from), PROT_READ, MAP_SHARED, from->fd, 0);
	if (now == MAP_FAILED)
		return;
	sched_getaffinity(0, sizeof(saved), &saved);
	for (int cpu = 0; cpu < dp->n_cpus; cpu++) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* an offline CPU runs no program: any add is safe there */
		sched_setaffinity(0, sizeof(one), &one);
		for (uint32_t slot = 0; slot < fs; slot++) {
			size_t e = (size_t)cpu * fs + slot;
			struct sluice_rule_cpu a = { 0 }, b = { 0 };

			if (e >= c->elements ||
			    slot >= (1u << dp->rule_cpu_shift) ||
			    !memcmp(c->seen + e * ss, now + e * ss, ss))
				continue;
			sl_layout_apply(plan, c->seen + e * ss, &a);
			sl_layout_apply(plan, now + e * ss, &b);
			sl_rule_cpu_add_since(sl_dp_rule_cpu(dp, cpu, slot),
					      &a, &b);
		}
	}
	sched_setaffinity(0, sizeof(saved), &saved);
	munmap(now, mmap_len(from));
}

/* State the fast path changes with every packet: carried last, just
 * before the switch, so that the old program's gap is short. */
static bool is_hot(const struct sl_dataplane *dp, const char *name)
{
	char bss[32];

	sl_layout_pin_name(bpf_map__name(dp->skel->maps.bss), bss,
			   sizeof(bss));
	return !strcmp(name, "rule_budget") || !strcmp(name, "rule_cpu") ||
	       !strcmp(name, bss);
}

static int switch_links(struct sl_dataplane *dp, struct sl_pins *p)
{
	for (int i = 0; i < p->n_links; i++) {
		bool frags;
		int err = sl_dp_link_update(dp, dp->skel, p->links[i].fd,
					    &frags);

		if (!err)
			continue;

		pr_err("upgrade: %s: cannot switch the link to the new "
		       "program: %s", p->links[i].ifname, strerror(-err));
		while (i--)
			bpf_link_update(p->links[i].fd, p->prog_fd, NULL);
		return err;
	}
	return 0;
}

/* Links pinned beside flat maps move to links/IF. */
static void move_flat_links(const struct sl_dataplane *dp, struct sl_pins *p)
{
	char dir[PATH_MAX], path[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/links", dp->pin_dir);
	mkdir(dir, 0700);
	for (int i = 0; i < p->n_links; i++) {
		struct sl_pinned_link *l = &p->links[i];

		if (!l->flat)
			continue;
		sl_pins_link_path(dp->pin_dir, l->ifname, path, sizeof(path));
		if (bpf_obj_pin(l->fd, path))
			pr_warn("upgrade: %s: cannot pin the link at %s: %s",
				l->ifname, path, strerror(errno));
		else
			unlink(l->path);
	}
}

int sl_upgrade_finish(struct sl_dataplane *dp, const struct sl_layout *next,
		      struct sl_pins *p)
{
	struct carried carried[SL_LAYOUT_MAX_MAPS] = { 0 };
	struct carried *cpu_state = NULL;
	int n_carried = 0, n_shared = 0, err = 0;
	uint64_t t_hot, t_copied, t_switch;

	for (int i = 0; i < next->n && !err; i++) {
		const struct sl_layout_map *to = &next->maps[i];
		struct carried *c = &carried[n_carried];

		if (p->shared[i]) {
			n_shared++;
			continue;
		}
		c->from = sl_layout_find(&p->maps, to->name);
		c->to = to;
		if (!c->from) {
			pr_info("upgrade: %s is new, it starts empty", to->name);
			continue;
		}
		n_carried++;
		if (!strcmp(to->name, "rule_cpu")) {
			/* a CPU's slots move with the class */
			c->from_stride = cpu_stride(c->from, dp->n_cpus);
			c->to_stride = 1u << dp->rule_cpu_shift;
			cpu_state = c;
		}
		err = carry_map(c, dp->n_cpus, false);
	}
	t_hot = sl_now_ns();
	for (int i = 0; i < n_carried && !err; i++)
		if (is_hot(dp, carried[i].to->name))
			err = carry_map(&carried[i], dp->n_cpus, true);
	t_copied = sl_now_ns();
	if (!err)
		err = switch_links(dp, p);
	t_switch = sl_now_ns();
	if (!err) {
		sl_dp_wait_for_readers();
		if (cpu_state)
			catch_up_counters(dp, cpu_state);
		move_flat_links(dp, p);
		sl_pins_remove_maps(p->maps_dir, p->flat);
		pr_info("upgrade: the pinned layout %s became layout-%016llx "
			"on %d links: %d maps shared, %d carried; the old "
			"program ran %.1f ms after the last copy of the fast "
			"path's state (%.1f ms of copy, %.1f ms to switch)",
			p->flat ? "before layout ids" :
			strrchr(p->maps_dir, '/') + 1,
			(unsigned long long)next->id, p->n_links, n_shared,
			n_carried, (t_switch - t_hot) / 1e6,
			(t_copied - t_hot) / 1e6, (t_switch - t_copied) / 1e6);
	}
	for (int i = 0; i < n_carried; i++) {
		sl_layout_plan_free(&carried[i].kplan);
		sl_layout_plan_free(&carried[i].vplan);
		free(carried[i].live);
		free(carried[i].seen);
	}
	return err;
}
