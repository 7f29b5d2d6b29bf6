// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "pins.h"

#define MAX_PROG_MAPS 64

void sl_pins_link_path(const char *pin_dir, const char *ifname, char *out,
		       size_t len)
{
	snprintf(out, len, "%s/links/%s", pin_dir, ifname);
}

void sl_pins_maps_dir(const char *pin_dir, uint64_t layout, char *out,
		      size_t len)
{
	snprintf(out, len, "%s/layout-%016llx", pin_dir,
		 (unsigned long long)layout);
}

static void add_link(struct sl_pins *p, const char *path, const char *ifname,
		     bool flat)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);
	struct sl_pinned_link *l;
	int fd;

	if (p->n_links == SL_MAX_IFACES)
		return;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    info.type != BPF_LINK_TYPE_XDP) {
		close(fd);
		return;
	}
	l = &p->links[p->n_links++];
	snprintf(l->ifname, sizeof(l->ifname), "%s", ifname);
	snprintf(l->path, sizeof(l->path), "%s", path);
	l->fd = fd;
	l->flat = flat;
	if (p->prog_fd < 0)
		p->prog_fd = bpf_prog_get_fd_by_id(info.prog_id);
}

static void open_links(const char *pin_dir, struct sl_pins *p)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/links", pin_dir);
	if ((d = opendir(dir))) {
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", dir,
				     de->d_name) < (int)sizeof(path))
				add_link(p, path, de->d_name, false);
		}
		closedir(d);
	}
	if ((d = opendir(pin_dir))) {
		while ((de = readdir(d))) {
			if (strncmp(de->d_name, "link-", 5))
				continue;
			snprintf(path, sizeof(path), "%s/%s", pin_dir,
				 de->d_name);
			add_link(p, path, de->d_name + 5, true);
		}
		closedir(d);
	}
}

/* Keep the candidate that holds more of the program's maps; without their
 * ids, the first that holds any. */
static void consider(struct sl_pins *p, const char *dir, bool flat,
		     const uint32_t *ids, uint32_t n_ids)
{
	struct sl_layout l;

	if (sl_layout_of_pins(dir, ids, n_ids, &l))
		return;
	if (!l.n || l.n_used < p->maps.n_used ||
	    (l.n_used == p->maps.n_used && p->maps.n)) {
		sl_layout_free(&l);
		return;
	}
	sl_layout_free(&p->maps);
	p->maps = l;
	snprintf(p->maps_dir, sizeof(p->maps_dir), "%s", dir);
	p->flat = flat;
}

int sl_pins_open(const char *pin_dir, const char *prefer, struct sl_pins *p)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	uint32_t ids[MAX_PROG_MAPS];
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;

	memset(p, 0, sizeof(*p));
	p->prog_fd = -1;
	open_links(pin_dir, p);
	if (!p->n_links)
		return 0;
	/* the program's map ids need CAP_SYS_ADMIN (a prog fd by id);
	 * without them the layout in use is this build's, else the one
	 * pinned */
	info.nr_map_ids = MAX_PROG_MAPS;
	info.map_ids = (uintptr_t)ids;
	if (p->prog_fd < 0 || bpf_obj_get_info_by_fd(p->prog_fd, &info, &len))
		info.nr_map_ids = 0;
	if (info.nr_map_ids > MAX_PROG_MAPS)
		return -E2BIG;
	consider(p, prefer, false, ids, info.nr_map_ids);
	consider(p, pin_dir, true, ids, info.nr_map_ids);
	d = opendir(pin_dir);
	while (d && (de = readdir(d))) {
		if (de->d_type != DT_DIR || strncmp(de->d_name, "layout-", 7))
			continue;
		if (snprintf(dir, sizeof(dir), "%s/%s", pin_dir, de->d_name) <
			    (int)sizeof(dir) && strcmp(dir, prefer))
			consider(p, dir, false, ids, info.nr_map_ids);
	}
	if (d)
		closedir(d);
	return 0;
}

void sl_pins_close(struct sl_pins *p)
{
	for (int i = 0; i < p->n_links; i++)
		close(p->links[i].fd);
	if (p->prog_fd >= 0)
		close(p->prog_fd);
	sl_layout_free(&p->maps);
	memset(p, 0, sizeof(*p));
	p->prog_fd = -1;
}

int sl_pins_remove_maps(const char *dir, bool flat)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_type != DT_REG || !strncmp(de->d_name, "link-", 5))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n += !unlink(path);
	}
	closedir(d);
	if (!flat)
		rmdir(dir);
	return n;
}

int sl_pins_remove_other(const char *pin_dir, const char *keep)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(pin_dir);
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || strncmp(de->d_name, "layout-", 7))
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", pin_dir, de->d_name);
		if (!keep || strcmp(dir, keep))
			n += sl_pins_remove_maps(dir, false);
	}
	closedir(d);
	if (!keep || strcmp(pin_dir, keep))
		n += sl_pins_remove_maps(pin_dir, true);
	return n;
}

int sl_pins_mkdir(const char *dir)
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
bool sl_pins_remove_unlinked(const char *pin_dir)
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
