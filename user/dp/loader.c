// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/if_link.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "loader.h"
#include "log.h"
#include "rules_json.h"
#include "sluice.skel.h"
#include "upgrade.h"
#include "util.h"

/* Class ids of the two rule sets never overlap in the tries. */
static const uint32_t set_class_base[SLUICE_NUM_SETS] = { 1, 0x40000000 };

/* A verifier log's reason is at its end: its last lines are kept. */
#define VERIFIER_TAIL_LINES 24

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	enum sl_log_level to = level == LIBBPF_WARN ? SL_LOG_WARN
						    : SL_LOG_DEBUG;
	char *text, *line, *next, *from;
	int skip = 0;

	if (level == LIBBPF_DEBUG || vasprintf(&text, fmt, ap) < 0)
		return 0;
	from = text;
	if (strstr(text, "-- BEGIN PROG LOAD LOG --")) {
		int lines = 0;

		for (char *c = text; *c; c++)
			lines += *c == '\n';
		skip = lines > VERIFIER_TAIL_LINES + 1
			       ? lines - VERIFIER_TAIL_LINES - 1
			       : 0;
	}
	for (line = from; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (line != from && skip > 0) {
			if (!--skip)
				sl_log(to, "libbpf:   ... (the log's last %d "
				       "lines:)", VERIFIER_TAIL_LINES);
			continue;
		}
		sl_log(to, "libbpf: %s", line);
	}
	free(text);
	return 0;
}

int sl_dp_map_fd(const struct sl_dataplane *dp, const char *name)
{
	struct bpf_map *m =
		bpf_object__find_map_by_name(dp->skel->obj, name);

	return m ? bpf_map__fd(m) : -ENOENT;
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

static int mkdir_p(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static const char *dirname_of(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	if (strrchr(out, '/'))
		*strrchr(out, '/') = 0;
	return out;
}

/*
 * Pins only survive the process on a BPF filesystem. Checked on the
 * deepest part of dir that exists, before anything is created, so a
 * wrong --pin-dir leaves nothing behind.
 */
static int check_bpffs(const char *dir)
{
	char path[PATH_MAX], *slash;
	struct statfs st;

	snprintf(path, sizeof(path), "%s", dir);
	while (statfs(path, &st)) {
		if (errno != ENOENT)
			return -errno;
		slash = strrchr(path, '/');
		if (!slash || slash == path) {
			snprintf(path, sizeof(path), "/");
			continue;
		}
		*slash = '\0';
	}
	if (st.f_type != BPF_FS_MAGIC) {
		pr_err("%s is not on a bpf filesystem (%s is not one): mount "
		       "-t bpf bpf /sys/fs/bpf, or choose a --pin-dir on one",
		       dir, path);
		return -ENOTSUP;
	}
	return 0;
}

static int set_pin_paths(struct sl_dataplane *dp, const char *dir)
{
	char path[PATH_MAX], name[64];
	struct bpf_map *m;
	int err;

	bpf_object__for_each_map(m, dp->skel->obj) {
		/* read-only data is per program instance; a frozen map
		 * cannot be reopened for writing anyway */
		if (m == dp->skel->maps.rodata)
			continue;
		sl_layout_pin_name(bpf_map__name(m), name, sizeof(name));
		if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
		    (int)sizeof(path))
			return -ENAMETOOLONG;
		err = bpf_map__set_pin_path(m, path);
		if (err)
			return err;
	}
	return 0;
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
static int adopt(struct sl_dataplane *dp)
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

#define N_SLOT_STATE_MAPS 5

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
}

static bool map_pinned(const struct bpf_map *map)
{
	const char *path = bpf_map__pin_path(map);

	return path && !access(path, F_OK);
}

/* Before the load: does an earlier agent's slot state wait at the pin
 * paths (libbpf will reuse it)? Then no slot is known to be clean. */
static bool slot_state_pinned(const struct sl_dataplane *dp)
{
	struct slot_map maps[N_SLOT_STATE_MAPS];

	slot_state_maps(dp, maps);
	for (int i = 0; i < N_SLOT_STATE_MAPS; i++)
		if (map_pinned(maps[i].map))
			return true;
	return map_pinned(dp->skel->maps.rule_cpu);
}

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

static int size_rule_cpu(struct sl_dataplane *dp, struct sluice_bpf *skel,
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
static uint32_t pinned_shift(const struct sl_dataplane *dp,
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

static int map_rule_cpu(struct sl_dataplane *dp)
{
	void *mem = mmap(NULL, rule_cpu_bytes(dp), PROT_READ | PROT_WRITE,
			 MAP_SHARED, bpf_map__fd(dp->skel->maps.rule_cpu), 0);

	if (mem == MAP_FAILED)
		return -errno;
	dp->rule_cpu = mem;
	return 0;
}

static void unmap_rule_cpu(struct sl_dataplane *dp)
{
	if (dp->rule_cpu)
		munmap(dp->rule_cpu, rule_cpu_bytes(dp));
	dp->rule_cpu = NULL;
}

/*
 * Which pinned maps the program takes: the running data plane's where the
 * layout is this build's (an agent restart), new ones beside them where it
 * is not (an upgrade, upgrade.h), and what no link runs with goes.
 */
static int choose_pins(struct sl_dataplane *dp, struct sl_pins *pins,
		       struct sl_layout *next, bool *upgrading)
{
	char probe[PATH_MAX + 16];
	int err, gone;

	*upgrading = false;
	err = check_bpffs(dp->pin_dir);
	if (!err)
		err = mkdir_p(dp->pin_dir);
	if (!err)
		err = sl_layout_of_object(dp->skel->obj, dp->skel->maps.rodata,
					  next);
	if (err)
		return err;
	dp->layout = next->id;
	sl_pins_maps_dir(dp->pin_dir, next->id, dp->maps_dir,
			 sizeof(dp->maps_dir));
	err = sl_pins_open(dp->pin_dir, dp->maps_dir, pins);
	if (err)
		return err;
	*upgrading = pins->maps.n && strcmp(pins->maps_dir, dp->maps_dir);
	/* the id leaves rule_cpu's size out; its shape does not */
	err = size_rule_cpu(dp, dp->skel,
			    pinned_shift(dp, pins, *upgrading));
	sl_layout_free(next);
	if (!err)
		err = sl_layout_of_object(dp->skel->obj, dp->skel->maps.rodata,
					  next);
	if (err)
		return err;
	if (*upgrading) {
		/* an upgrade that stopped half-way left these */
		sl_pins_remove_maps(dp->maps_dir, false);
		err = sl_upgrade_prepare(next, pins);
	} else if (pins->n_links && !pins->maps.n) {
		pr_warn("the running program's maps are not pinned in %s: the "
			"rules start with fresh state", dp->pin_dir);
	}
	gone = sl_pins_remove_other(dp->pin_dir, *upgrading ? pins->maps_dir
							     : dp->maps_dir);
	if (gone)
		pr_info("%s: removed %d pinned maps no link runs with",
			dp->pin_dir, gone);
	if (!err)
		err = mkdir_p(dp->maps_dir);
	if (!err)
		err = set_pin_paths(dp, dp->maps_dir);
	snprintf(probe, sizeof(probe), "%s/rule_meta", dp->maps_dir);
	dp->adopted = *upgrading || !access(probe, F_OK);
	return err;
}

int sl_dp_load(struct sl_dataplane *dp, const struct sl_dp_opts *opts)
{
	struct sl_pins pins = { .prog_fd = -1 };
	struct sl_layout next = { 0 };
	bool reused_state, upgrading = false;
	int err;

	memset(dp, 0, sizeof(*dp));
	libbpf_set_print(libbpf_print);
	dp->n_cpus = libbpf_num_possible_cpus();
	if (dp->n_cpus <= 0)
		return dp->n_cpus ? dp->n_cpus : -EINVAL;
	if (opts->sized_cpus > dp->n_cpus)
		dp->n_cpus = opts->sized_cpus;
	dp->slot_state = calloc(SLUICE_MAX_RULE_SLOTS,
				sizeof(*dp->slot_state));
	if (!dp->slot_state)
		return -ENOMEM;
	dp->skel = sluice_bpf__open();
	if (!dp->skel) {
		err = -errno;
		goto fail;
	}
	dp->skel->rodata->nr_cpus = dp->n_cpus;
	/* without pins: the smallest class, grown by the applies */
	err = size_rule_cpu(dp, dp->skel, SLUICE_RULE_CPU_MIN_SHIFT);
	if (err)
		goto fail;
	dp->skel->rodata->test_clock = opts->test_clock;
	dp->skel->rodata->unclassified_verdict =
		opts->pass_unclassified ? XDP_PASS : XDP_DROP;
	if (opts->pin_dir) {
		snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", opts->pin_dir);
		err = choose_pins(dp, &pins, &next, &upgrading);
		if (err)
			goto fail;
	}
	reused_state = upgrading || slot_state_pinned(dp);
	/* libbpf reuses maps already pinned at their pin path, and pins
	 * the ones it creates */
	err = sluice_bpf__load(dp->skel);
	if (!err)
		err = map_rule_cpu(dp);
	if (!err && opts->pin_dir)
		err = sl_layout_pin_btf(dp->skel->obj, dp->maps_dir);
	if (!err && upgrading)
		err = sl_upgrade_finish(dp, &next, &pins);
	if (err)
		goto fail;
	dp->upgraded = upgrading;
	/* created maps are all zeros */
	for (uint32_t slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++)
		dp->slot_state[slot].clean = !reused_state;
	if (dp->adopted) {
		err = adopt(dp);
		if (err)
			goto fail;
	}
	sl_pins_close(&pins);
	sl_layout_free(&next);
	return 0;
fail:
	unmap_rule_cpu(dp);
	sluice_bpf__destroy(dp->skel);
	/* the running data plane is as it was: only what we made goes */
	if (upgrading)
		sl_pins_remove_maps(dp->maps_dir, false);
	sl_pins_close(&pins);
	sl_layout_free(&next);
	free(dp->slot_state);
	memset(dp, 0, sizeof(*dp));
	return err;
}

size_t sl_dp_slots_in_force(const struct sl_dataplane *dp)
{
	size_t n = 0;

	for (uint32_t i = 0; i < SLUICE_MAX_RULE_SLOTS; i++)
		n += dp->slot_state[i].in_force;
	return n;
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
static void drop_sources(struct sl_dataplane *dp, uint8_t *drop)
{
	struct sl_src_victims v = { 0 };

	if (!scan_sources(dp, other_slot, drop, &v))
		delete_sources(dp, &v, v.n);
	sl_src_victims_free(&v);
}

/* The CPUs' source token caches may hold tokens of an earlier rule that
 * had this slot: empty them all (rare: when a per_source rule is created). */
static int clear_source_caches(struct sl_dataplane *dp)
{
	int fd = bpf_map__fd(dp->skel->maps.src_cache);
	__u32 n = bpf_map__max_entries(dp->skel->maps.src_cache);
	size_t vsz = ((sizeof(struct sluice_src_cached) + 7) & ~7UL) *
		     dp->n_cpus;
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
		drop_sources(dp, drop);
		err = clear_source_caches(dp);
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

/* XDP runs in an RCU read-side section and MEMBARRIER_CMD_GLOBAL waits
 * for a grace period. */
void sl_dp_wait_for_readers(void)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
		usleep(10000);
}

static int tc_attach(struct sl_dataplane *dp, struct sl_iface *ifc);

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
	err = size_rule_cpu(dp, next, shift);
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
	for (; i < dp->n_ifaces; i++)
		if (bpf_link_update(dp->ifaces[i].link_fd,
				    bpf_program__fd(next->progs.sluice_xdp),
				    NULL)) {
			err = -errno;
			while (i--)
				bpf_link_update(dp->ifaces[i].link_fd,
						bpf_program__fd(old->progs.sluice_xdp),
						NULL);
			goto fail;
		}
	dp->skel = next;
	dp->rule_cpu = mem;
	for (i = 0; i < dp->n_ifaces; i++)
		if (dp->ifaces[i].egress && tc_attach(dp, &dp->ifaces[i]))
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
	ret = grow_rule_cpu(dp, shift_for(need));
	if (ret)
		snprintf(err, errlen,
			 "rule slot %zu is beyond rule_cpu's %u per CPU, and "
			 "a data plane with more could not take over: %s",
			 need - 1, 1u << dp->rule_cpu_shift, strerror(-ret));
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
	ret = sl_compile(rs, slots, set_class_base[set], SLUICE_MAX_LPM / 2,
			 &comp, err, errlen);
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
		drop_sources(dp, dp->retired_sources);
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

const char *const sl_xdp_mode_names[] = {
	[SL_XDP_AUTO] = "auto",
	[SL_XDP_NATIVE] = "native",
	[SL_XDP_GENERIC] = "generic",
	NULL,
};

const char *sl_xdp_mode_str(enum sl_xdp_mode mode)
{
	return mode <= SL_XDP_GENERIC ? sl_xdp_mode_names[mode] : "auto";
}

static bool any_breaker(const struct sl_ruleset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->rules[i].breaker.enabled)
			return true;
	return false;
}

static libbpf_print_fn_t tc_print;

/* The kernel's answers to a tc call whose failure is expected and handled
 * (no clsact qdisc to detach from: "Parent Qdisc doesn't exists"; one
 * there already: "Exclusivity flag on") are not worth a warning. */
static int tc_quiet(enum libbpf_print_level level, const char *fmt,
		    va_list ap)
{
	if (strstr(fmt, "Kernel error message"))
		return 0;
	return tc_print ? tc_print(level, fmt, ap) : 0;
}

int sl_tc_detach(int ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = SL_TC_HANDLE,
		    .priority = SL_TC_PRIO);
	int err;

	tc_print = libbpf_set_print(tc_quiet);
	err = bpf_tc_detach(&hook, &o);
	libbpf_set_print(tc_print);
	return err;
}

/* Our filter on ifc's clsact egress, replacing an earlier agent's. */
static int tc_attach(struct sl_dataplane *dp, struct sl_iface *ifc)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifc->ifindex,
		    .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = SL_TC_HANDLE,
		    .priority = SL_TC_PRIO, .flags = BPF_TC_F_REPLACE,
		    .prog_fd = bpf_program__fd(dp->skel->progs.sluice_egress));
	int err;

	tc_print = libbpf_set_print(tc_quiet);
	err = bpf_tc_hook_create(&hook);
	libbpf_set_print(tc_print);
	if (err && err != -EEXIST)
		return err;
	err = bpf_tc_attach(&hook, &o);
	if (!err)
		ifc->egress = true;
	return err;
}

/* Still there? Deleting a clsact qdisc (another tool's) takes it along. */
static bool tc_attached(const struct sl_iface *ifc)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifc->ifindex,
		    .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = SL_TC_HANDLE,
		    .priority = SL_TC_PRIO);

	return !bpf_tc_query(&hook, &o);
}

int sl_dp_sync_egress(struct sl_dataplane *dp)
{
	bool want = any_breaker(&dp->rules);
	int err = 0, e;

	for (int i = 0; i < dp->n_ifaces; i++) {
		struct sl_iface *ifc = &dp->ifaces[i];

		if (want && ifc->egress && !tc_attached(ifc)) {
			pr_warn("%s: the egress program was removed (with its "
				"clsact qdisc?): attaching it again", ifc->name);
			ifc->egress = false;
		}
		if (want && !ifc->egress) {
			e = tc_attach(dp, ifc);
		} else if (!want && ifc->egress) {
			e = sl_tc_detach(ifc->ifindex);
			ifc->egress = false;
		} else {
			continue;
		}
		if (e) {
			pr_warn("%s: egress program: %s", ifc->name,
				strerror(-e));
			err = err ? err : e;
		}
	}
	return err;
}

static int link_xdp(struct sl_dataplane *dp, int ifindex, __u32 flags)
{
	LIBBPF_OPTS(bpf_link_create_opts, lopts, .flags = flags);
	int fd = bpf_link_create(bpf_program__fd(dp->skel->progs.sluice_xdp),
				 ifindex, BPF_XDP, &lopts);

	return fd < 0 ? -errno : fd;
}

static enum sl_xdp_mode attached_mode(int ifindex)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	if (bpf_xdp_query(ifindex, 0, &q))
		return SL_XDP_AUTO;
	return q.attach_mode == XDP_ATTACHED_SKB ? SL_XDP_GENERIC
						 : SL_XDP_NATIVE;
}

/*
 * A link pinned by an earlier agent on this interface: point it at our
 * program instance (same maps; one atomic swap, no gap) and keep it.
 * Returns the fd, or -ENOENT when there is none to adopt.
 */
static int adopt_link(struct sl_dataplane *dp, const char *path, int ifindex)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return -ENOENT;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    info.type != BPF_LINK_TYPE_XDP || info.xdp.ifindex != (__u32)ifindex) {
		/* the interface went away and came back: a stale pin */
		close(fd);
		unlink(path);
		return -ENOENT;
	}
	if (bpf_link_update(fd, bpf_program__fd(dp->skel->progs.sluice_xdp),
			    NULL)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int sl_dp_attach(struct sl_dataplane *dp, const char *ifname,
		 enum sl_xdp_mode mode)
{
	char path[PATH_MAX] = "", dir[PATH_MAX];
	struct sl_iface *ifc;
	int ifindex, fd;

	if (dp->n_ifaces == SL_MAX_IFACES)
		return -E2BIG;
	ifindex = if_nametoindex(ifname);
	if (!ifindex)
		return -ENODEV;
	ifc = &dp->ifaces[dp->n_ifaces];
	memset(ifc, 0, sizeof(*ifc));
	snprintf(ifc->name, sizeof(ifc->name), "%s", ifname);
	ifc->ifindex = ifindex;

	if (dp->pin_dir[0]) {
		sl_pins_link_path(dp->pin_dir, ifname, path, sizeof(path));
		fd = adopt_link(dp, path, ifindex);
		if (fd >= 0) {
			ifc->link_fd = fd;
			ifc->adopted = true;
			ifc->mode = attached_mode(ifindex);
			if (mode != SL_XDP_AUTO && mode != ifc->mode)
				pr_warn("%s: kept the running data plane in %s "
					"mode although %s was asked; run "
					"`sluice down` first to change it",
					ifname, sl_xdp_mode_str(ifc->mode),
					sl_xdp_mode_str(mode));
			dp->n_ifaces++;
			/* an earlier agent's filter runs its program:
			 * ours replaces it */
			if (!any_breaker(&dp->rules))
				sl_tc_detach(ifindex);
			else if ((fd = tc_attach(dp, ifc)))
				pr_warn("%s: egress program: %s", ifname,
					strerror(-fd));
			return 0;
		}
		if (fd != -ENOENT)
			return fd;
	}

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
	if (path[0] && (mkdir_p(dirname_of(path, dir, sizeof(dir))) ||
			bpf_obj_pin(fd, path))) {
		int err = -errno;

		close(fd);
		return err;
	}
	ifc->link_fd = fd;
	dp->n_ifaces++;
	/* without it the breakers see no answers; limits still hold */
	sl_dp_sync_egress(dp);
	return 0;
}

bool sl_dp_iface_attached(const struct sl_iface *ifc)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);

	return !bpf_obj_get_info_by_fd(ifc->link_fd, &info, &len) &&
	       info.xdp.ifindex == (__u32)ifc->ifindex;
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

void sl_dp_set_test_time(struct sl_dataplane *dp, uint64_t now_ns)
{
	dp->skel->bss->test_now_ns = now_ns;
}

uint64_t sl_dp_now(const struct sl_dataplane *dp)
{
	if (dp->skel->rodata->test_clock)
		return dp->skel->bss->test_now_ns;
	return sl_now_ns();
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

void sl_dp_destroy(struct sl_dataplane *dp)
{
	if (dp->skel)
		sl_dp_retire(dp);
	for (int i = 0; i < dp->n_ifaces; i++) {
		/* a tc filter outlives the process: unpinned, it goes */
		if (!dp->pin_dir[0] && dp->ifaces[i].egress)
			sl_tc_detach(dp->ifaces[i].ifindex);
		close(dp->ifaces[i].link_fd);
	}
	unmap_rule_cpu(dp);
	if (dp->skel)
		sluice_bpf__destroy(dp->skel);
	sl_ruleset_free(&dp->rules);
	free(dp->slots);
	free(dp->slot_state);
	free(dp->lpm);
	memset(dp, 0, sizeof(*dp));
}

static bool any_link(const char *pin_dir)
{
	char dir[PATH_MAX];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/links", pin_dir);
	if ((d = opendir(dir))) {
		while (!found && (de = readdir(d)))
			found = de->d_name[0] != '.';
		closedir(d);
	}
	if (!found && (d = opendir(pin_dir))) {
		while (!found && (de = readdir(d)))
			found = !strncmp(de->d_name, "link-", 5);
		closedir(d);
	}
	return found;
}

/* Remove the pinned maps and the directory when no link is left in it;
 * true when there were maps to remove. */
static bool remove_if_no_link(const char *pin_dir)
{
	char dir[PATH_MAX];
	int n;

	if (any_link(pin_dir))
		return false;
	n = sl_pins_remove_other(pin_dir, NULL);
	snprintf(dir, sizeof(dir), "%s/links", pin_dir);
	rmdir(dir);
	rmdir(pin_dir);
	return n > 0;
}

int sl_pins_down(const char *pin_dir, const char *ifname, bool *maps_removed)
{
	char path[PATH_MAX];
	int fd, err = 0;

	*maps_removed = false;
	sl_pins_link_path(pin_dir, ifname, path, sizeof(path));
	fd = bpf_obj_get(path);
	if (fd < 0) {
		/* pinned before layouts had ids */
		snprintf(path, sizeof(path), "%s/link-%s", pin_dir, ifname);
		fd = bpf_obj_get(path);
	}
	if (fd < 0) {
		err = -errno;
		/* maps without any link: what a failed start left */
		if (err == -ENOENT)
			*maps_removed = remove_if_no_link(pin_dir);
		return err;
	}
	/* detach even if some other process still holds the link */
	if (if_nametoindex(ifname))
		sl_tc_detach(if_nametoindex(ifname));
	if (bpf_link_detach(fd))
		err = -errno;
	close(fd);
	if (err)
		return err;
	unlink(path);
	*maps_removed = remove_if_no_link(pin_dir);
	return 0;
}

/* The active rule set of pinned maps: set_gen's low bit in the bss. */
static int pinned_active_set(const struct sl_layout *l, uint32_t *active)
{
	const struct sl_layout_map *bss = NULL;
	uint32_t key = 0, gen;
	uint8_t *val;
	int off, err;

	for (int i = 0; i < l->n; i++) {
		size_t n = strlen(l->maps[i].name);

		if (n > 4 && !strcmp(l->maps[i].name + n - 4, "_bss"))
			bss = &l->maps[i];
	}
	if (!bss)
		return -ENOENT;
	off = sl_layout_var_offset(bss, "set_gen");
	if (off < 0 || off + sizeof(gen) > bss->value_size)
		return -ENOENT;
	val = malloc(bss->value_size);
	if (!val)
		return -ENOMEM;
	err = bpf_map_lookup_elem(bss->fd, &key, val) ? -errno : 0;
	memcpy(&gen, val + off, sizeof(gen));
	free(val);
	*active = gen & 1;
	return err;
}

int sl_pins_view(const char *pin_dir, struct sl_pins_view *v)
{
	const struct sl_layout_map *meta;
	struct sl_pins p;
	uint32_t active;
	int err;

	memset(v, 0, sizeof(*v));
	err = sl_pins_open(pin_dir, "", &p);
	if (!err && !p.n_links)
		err = -ENOENT;
	for (int i = 0; !err && i < p.n_links; i++) {
		struct bpf_link_info info = { 0 };
		__u32 len = sizeof(info);

		snprintf(v->ifaces[i].name, sizeof(v->ifaces[i].name), "%s",
			 p.links[i].ifname);
		if (!bpf_obj_get_info_by_fd(p.links[i].fd, &info, &len))
			v->ifaces[i].ifindex = info.xdp.ifindex;
		v->n_ifaces++;
	}
	meta = sl_layout_find(&p.maps, "rule_meta");
	if (!err && (!meta || meta->value_size != sizeof(struct sluice_rule_meta)))
		err = -ENODATA;
	if (!err && pinned_active_set(&p.maps, &active))
		err = -ENODATA;
	if (!err)
		v->rules = calloc(meta->max_entries + 1, sizeof(*v->rules));
	if (!err && !v->rules)
		err = -ENOMEM;
	for (uint32_t slot = 0; !err && slot < meta->max_entries; slot++) {
		struct sl_slot_state *st = &v->rules[v->n_rules];
		struct sluice_rule_meta m;

		if (bpf_map_lookup_elem(meta->fd, &slot, &m) ||
		    !(m.set_mask & (1u << active)))
			continue;
		st->in_force = true;
		st->def_hash = m.def_hash;
		memcpy(st->name, m.name, sizeof(st->name) - 1);
		v->n_rules++;
	}
	sl_pins_close(&p);
	return err;
}

void sl_pins_view_free(struct sl_pins_view *v)
{
	free(v->rules);
	memset(v, 0, sizeof(*v));
}

void sl_dp_abandon(struct sl_dataplane *dp)
{
	char path[PATH_MAX];

	if (!dp->pin_dir[0])
		return;
	for (int i = 0; i < dp->n_ifaces; i++) {
		if (dp->ifaces[i].adopted)
			continue;
		if (dp->ifaces[i].egress)
			sl_tc_detach(dp->ifaces[i].ifindex);
		bpf_link_detach(dp->ifaces[i].link_fd);
		sl_pins_link_path(dp->pin_dir, dp->ifaces[i].name, path,
				  sizeof(path));
		unlink(path);
	}
	if (!dp->adopted)
		remove_if_no_link(dp->pin_dir);
}
