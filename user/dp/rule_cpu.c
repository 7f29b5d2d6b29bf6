// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attach.h"
#include "log.h"
#include "rule_cpu.h"
#include "sluice.skel.h"

/* The mmap stride of rule_cpu is the kernel's element size, the value
 * size rounded up to 8 bytes. */
_Static_assert(sizeof(struct sluice_rule_cpu) % 8 == 0,
	       "rule_cpu elements are their struct, back to back");

_Static_assert((SLUICE_MAX_RULE_SLOTS & (SLUICE_MAX_RULE_SLOTS - 1)) == 0,
	       "rule slot classes are powers of two up to all the slots");

static size_t rule_cpu_bytes(const struct sl_dataplane *dp)
{
	return ((size_t)dp->n_cpus << dp->rule_cpu_shift) *
	       sizeof(struct sluice_rule_cpu);
}

size_t sl_dp_rule_cpu_bytes(const struct sl_dataplane *dp)
{
	return rule_cpu_bytes(dp);
}

/* The smallest class that holds slots 0 .. slots - 1. */
static uint32_t shift_for(size_t slots)
{
	uint32_t shift = SLUICE_RULE_CPU_MIN_SHIFT;

	while ((1ul << shift) < slots && (1ul << shift) < SLUICE_MAX_RULE_SLOTS)
		shift++;
	return shift;
}

int sl_rule_cpu_size(struct sl_dataplane *dp, struct sluice_bpf *skel,
		     uint32_t shift)
{
	skel->rodata->rule_cpu_shift = shift;
	dp->rule_cpu_shift = shift;
	return bpf_map__set_max_entries(skel->maps.rule_cpu,
					(uint32_t)dp->n_cpus << shift);
}

static uint32_t log2_floor(uint32_t v)
{
	uint32_t l = 0;

	while (v >>= 1)
		l++;
	return l;
}

/*
 * The class the running data plane needs: where its layout is this
 * build's, the pinned rule_cpu's own (libbpf takes it as it is); after an
 * upgrade, the highest slot its rule_meta has in a set (rule_cpu is then
 * carried to the new class, upgrade.c), or its stride when that cannot be
 * read.
 */
uint32_t sl_rule_cpu_pinned_shift(const struct sl_dataplane *dp,
				  const struct sl_pins *pins, bool upgrading)
{
	const struct sl_layout_map *cpu, *meta;
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	char path[PATH_MAX + 16];
	uint32_t hi = 0, stride;
	int fd;

	if (!upgrading) {
		snprintf(path, sizeof(path), "%s/rule_cpu", dp->maps_dir);
		fd = bpf_obj_get(path);
		if (fd < 0)
			return SLUICE_RULE_CPU_MIN_SHIFT;
		stride = bpf_obj_get_info_by_fd(fd, &info, &len)
				 ? 0
				 : info.max_entries / (uint32_t)dp->n_cpus;
		close(fd);
		return stride ? log2_floor(stride) : SLUICE_RULE_CPU_MIN_SHIFT;
	}
	cpu = sl_layout_find(&pins->maps, "rule_cpu");
	meta = sl_layout_find(&pins->maps, "rule_meta");
	stride = cpu ? cpu->max_entries / (uint32_t)dp->n_cpus : 0;
	if (!meta || meta->value_size != sizeof(struct sluice_rule_meta))
		return stride ? shift_for(stride) : SLUICE_RULE_CPU_MIN_SHIFT;
	for (uint32_t slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++) {
		struct sluice_rule_meta m;

		if (!bpf_map_lookup_elem(meta->fd, &slot, &m) && m.set_mask)
			hi = slot + 1;
	}
	return shift_for(hi);
}

int sl_rule_cpu_map(struct sl_dataplane *dp)
{
	void *mem = mmap(NULL, rule_cpu_bytes(dp), PROT_READ | PROT_WRITE,
			 MAP_SHARED, bpf_map__fd(dp->skel->maps.rule_cpu), 0);

	if (mem == MAP_FAILED)
		return -errno;
	dp->rule_cpu = mem;
	return 0;
}

void sl_rule_cpu_unmap(struct sl_dataplane *dp)
{
	if (dp->rule_cpu)
		munmap(dp->rule_cpu, rule_cpu_bytes(dp));
	dp->rule_cpu = NULL;
}

/* The new program's rule_cpu, pinned beside the old one until it takes
 * the old one's name (a rename, which replaces it in one step; no dot in
 * the name: bpffs refuses those). */
static int pin_next_rule_cpu(const struct sl_dataplane *dp,
			     const struct sluice_bpf *next, char *tmp,
			     size_t len)
{
	if (!dp->pin_dir[0])
		return 0;
	if (snprintf(tmp, len, "%s/rule_cpu_next", dp->maps_dir) >= (int)len)
		return -ENAMETOOLONG;
	unlink(tmp);
	return bpf_obj_pin(bpf_map__fd(next->maps.rule_cpu), tmp) ? -errno : 0;
}

/* Copy every CPU's slots from the old class to the new (the old is the
 * smaller). */
static void copy_rule_cpu(const struct sl_dataplane *dp,
			  const struct sluice_rule_cpu *from,
			  uint32_t from_shift, struct sluice_rule_cpu *to)
{
	for (int cpu = 0; cpu < dp->n_cpus; cpu++)
		memcpy(&to[sluice_cpu_slot(cpu, 0, dp->rule_cpu_shift)],
		       &from[sluice_cpu_slot(cpu, 0, from_shift)],
		       sizeof(*from) << from_shift);
}

/* What the old program counted after the copy, added on each CPU (see
 * catch_up_counters() in upgrade.c). */
static void catch_up_rule_cpu(struct sl_dataplane *dp,
			      const struct sluice_rule_cpu *seen,
			      const struct sluice_rule_cpu *now,
			      uint32_t from_shift)
{
	cpu_set_t saved, one;

	sched_getaffinity(0, sizeof(saved), &saved);
	for (int cpu = 0; cpu < dp->n_cpus; cpu++) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		sched_setaffinity(0, sizeof(one), &one);
		for (uint32_t slot = 0; slot < (1u << from_shift); slot++) {
			size_t e = sluice_cpu_slot(cpu, slot, from_shift);

			if (memcmp(&seen[e], &now[e], sizeof(seen[e])))
				sl_rule_cpu_add_since(
					sl_dp_rule_cpu(dp, cpu, slot),
					&seen[e], &now[e]);
		}
	}
	sched_setaffinity(0, sizeof(saved), &saved);
}

/*
 * Give rule_cpu 2^shift slots per CPU: a new program beside the running
 * one, sharing every map but rule_cpu (and its read-only data, which
 * holds the class), takes the interfaces' links over in one update each.
 * The state of the old slots is copied before the switch; the counts of
 * the packets judged after the copy are added once the old program has
 * stopped, and the tokens taken meanwhile are lost (less is admitted).
 */
static int grow_rule_cpu(struct sl_dataplane *dp, uint32_t shift)
{
	uint32_t old_shift = dp->rule_cpu_shift;
	struct sluice_rule_cpu *old_mem = dp->rule_cpu, *seen = NULL;
	size_t old_bytes = rule_cpu_bytes(dp);
	struct sluice_bpf *next = sluice_bpf__open(), *old = dp->skel;
	char tmp[PATH_MAX + 16] = "", path[PATH_MAX + 16];
	void *mem = MAP_FAILED;
	struct bpf_map *m;
	int err = next ? 0 : -errno, i = 0;

	if (err)
		return err;
	*next->rodata = *old->rodata;
	sl_dp_autoload(dp, next);
	err = sl_rule_cpu_size(dp, next, shift);
	bpf_object__for_each_map(m, next->obj) {
		struct bpf_map *o;

		if (err || m == next->maps.rule_cpu || m == next->maps.rodata)
			continue;
		o = bpf_object__find_map_by_name(old->obj, bpf_map__name(m));
		err = o ? bpf_map__reuse_fd(m, bpf_map__fd(o)) : -ENOENT;
	}
	if (!err)
		err = sluice_bpf__load(next);
	if (!err) {
		mem = mmap(NULL, rule_cpu_bytes(dp), PROT_READ | PROT_WRITE,
			   MAP_SHARED, bpf_map__fd(next->maps.rule_cpu), 0);
		err = mem == MAP_FAILED ? -errno : 0;
	}
	if (!err)
		err = pin_next_rule_cpu(dp, next, tmp, sizeof(tmp));
	if (!err) {
		seen = malloc(old_bytes);
		err = seen ? 0 : -ENOMEM;
	}
	if (err)
		goto fail;
	memcpy(seen, old_mem, old_bytes);
	copy_rule_cpu(dp, seen, old_shift, mem);
	for (; i < dp->n_ifaces; i++) {
		err = sl_dp_link_update(dp, next, dp->ifaces[i].link_fd,
					&dp->ifaces[i].frags);
		if (err) {
			while (i--)
				sl_dp_link_update(dp, old,
						  dp->ifaces[i].link_fd,
						  &dp->ifaces[i].frags);
			goto fail;
		}
	}
	dp->skel = next;
	dp->rule_cpu = mem;
	for (i = 0; i < dp->n_ifaces; i++)
		if (dp->ifaces[i].egress && sl_tc_attach(dp, &dp->ifaces[i]))
			pr_warn("%s: the egress program could not be replaced",
				dp->ifaces[i].name);
	sl_dp_wait_for_readers();
	catch_up_rule_cpu(dp, seen, old_mem, old_shift);
	if (dp->pin_dir[0]) {
		snprintf(path, sizeof(path), "%s/rule_cpu", dp->maps_dir);
		if (rename(tmp, path))
			pr_warn("%s: cannot pin the grown rule_cpu: %s", path,
				strerror(errno));
	}
	pr_info("rule_cpu: %u slots per CPU (was %u): %.1f MiB for %d CPUs",
		1u << shift, 1u << old_shift, rule_cpu_bytes(dp) / 1048576.0,
		dp->n_cpus);
	free(seen);
	munmap(old_mem, old_bytes);
	sluice_bpf__destroy(old);
	return 0;
fail:
	if (tmp[0])
		unlink(tmp);
	if (mem != MAP_FAILED)
		munmap(mem, ((size_t)dp->n_cpus << shift) *
				    sizeof(struct sluice_rule_cpu));
	free(seen);
	dp->rule_cpu_shift = old_shift;
	sluice_bpf__destroy(next);
	return err;
}

/* The smallest class that holds slots 0 .. slots - 1. */
int sl_rule_cpu_grow(struct sl_dataplane *dp, size_t slots)
{
	return grow_rule_cpu(dp, shift_for(slots));
}

static void add_on_cpu(__u64 *counter, __u64 before, __u64 after)
{
	if (after > before)
		__atomic_fetch_add(counter, after - before, __ATOMIC_RELAXED);
}

void sl_rule_cpu_add_since(struct sluice_rule_cpu *rc,
			   const struct sluice_rule_cpu *a,
			   const struct sluice_rule_cpu *b)
{
	add_on_cpu(&rc->passed_pkts, a->passed_pkts, b->passed_pkts);
	add_on_cpu(&rc->passed_bytes, a->passed_bytes, b->passed_bytes);
	add_on_cpu(&rc->blocked_pkts, a->blocked_pkts + a->held_pkts,
		   b->blocked_pkts + b->held_pkts);
	add_on_cpu(&rc->blocked_bytes, a->blocked_bytes + a->held_bytes,
		   b->blocked_bytes + b->held_bytes);
	add_on_cpu(&rc->source_overflow, a->source_overflow,
		   b->source_overflow);
}
