// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "layout.h"
#include "util.h"

#define MAX_DEPTH 16

static uint64_t mix(uint64_t h, uint64_t v)
{
	return sl_fnv1a(h, &v, sizeof(v));
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	return sl_fnv1a(h, s, strlen(s) + 1);
}

/* Through typedefs, qualifiers and variables to the type that has a shape. */
static const struct btf_type *resolve(const struct btf *btf, uint32_t *id)
{
	const struct btf_type *t = btf__type_by_id(btf, *id);

	for (int i = 0; t && i < MAX_DEPTH &&
			(btf_is_mod(t) || btf_is_typedef(t) || btf_is_var(t));
	     i++) {
		*id = t->type;
		t = btf__type_by_id(btf, *id);
	}
	return t;
}

static bool is_integer(const struct btf_type *t)
{
	return btf_is_int(t) || btf_is_enum(t) || btf_is_enum64(t);
}

/* Members of a struct or union, and the variables of a section, alike. */
struct field {
	const char *name;
	uint32_t type;
	uint32_t bit_off;
	uint32_t bitfield;
};

static int fields(const struct btf *btf, const struct btf_type *t, int i,
		  struct field *f)
{
	if (btf_is_datasec(t)) {
		const struct btf_var_secinfo *v = &btf_var_secinfos(t)[i];
		const struct btf_type *var = btf__type_by_id(btf, v->type);

		f->name = var ? btf__name_by_offset(btf, var->name_off) : "";
		f->type = v->type;
		f->bit_off = v->offset * 8;
		f->bitfield = 0;
	} else {
		const struct btf_member *m = &btf_members(t)[i];

		f->name = btf__name_by_offset(btf, m->name_off);
		f->type = m->type;
		f->bit_off = btf_member_bit_offset(t, i);
		f->bitfield = btf_member_bitfield_size(t, i);
	}
	if (!f->name)
		f->name = "";
	return 0;
}

static uint64_t type_shape(const struct btf *btf, uint32_t id, uint64_t h,
			   int depth)
{
	const struct btf_type *t;

	if (!btf || depth > MAX_DEPTH)
		return mix(h, 0);
	t = resolve(btf, &id);
	if (!t)
		return mix(h, 0);
	h = mix(h, btf_kind(t));
	if (btf_is_int(t))
		return mix(mix(h, t->size), *(const uint32_t *)(t + 1));
	if (is_integer(t))
		return mix(h, t->size);
	if (btf_is_array(t))
		return type_shape(btf, btf_array(t)->type,
				  mix(h, btf_array(t)->nelems), depth + 1);
	if (btf_is_composite(t) || btf_is_datasec(t)) {
		h = mix(mix(h, t->size), btf_vlen(t));
		for (int i = 0; i < btf_vlen(t); i++) {
			struct field f;

			fields(btf, t, i, &f);
			h = mix(mix(mix_str(h, f.name), f.bit_off), f.bitfield);
			h = type_shape(btf, f.type, h, depth + 1);
		}
		return h;
	}
	return mix(h, btf_is_ptr(t) ? 8 : t->size);
}

static uint64_t shape_of(const struct sl_layout_map *m, uint32_t max_entries)
{
	uint64_t h = mix_str(SL_FNV1A_INIT, m->name);

	h = mix(mix(mix(h, m->type), m->key_size), m->value_size);
	h = mix(mix(h, max_entries), m->flags);
	h = type_shape(m->btf, m->key_type, h, 0);
	return type_shape(m->btf, m->value_type, h, 0);
}

static void map_shape(struct sl_layout_map *m)
{
	m->shape = shape_of(m, m->max_entries);
	m->id_shape = strcmp(m->name, "rule_cpu") ? m->shape : shape_of(m, 0);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct sl_layout_map *)a)->name,
		      ((const struct sl_layout_map *)b)->name);
}

static void layout_id(struct sl_layout *l)
{
	uint64_t h = SL_FNV1A_INIT;

	qsort(l->maps, l->n, sizeof(l->maps[0]), by_name);
	for (int i = 0; i < l->n; i++)
		h = mix(h, l->maps[i].id_shape);
	l->id = h;
}

void sl_layout_pin_name(const char *map_name, char *out, size_t len)
{
	snprintf(out, len, "%s", map_name);
	for (char *p = out; *p; p++)
		if (*p == '.')
			*p = '_';
}

int sl_layout_of_object(struct bpf_object *obj, const struct bpf_map *skip,
			struct sl_layout *l)
{
	const struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map;

	memset(l, 0, sizeof(*l));
	bpf_object__for_each_map(map, obj) {
		struct sl_layout_map *m = &l->maps[l->n];

		if (map == skip)
			continue;
		if (l->n == SL_LAYOUT_MAX_MAPS)
			return -E2BIG;
		sl_layout_pin_name(bpf_map__name(map), m->name,
				   sizeof(m->name));
		m->fd = -1;
		m->obj_map = map;
		m->type = bpf_map__type(map);
		m->key_size = bpf_map__key_size(map);
		m->value_size = bpf_map__value_size(map);
		m->max_entries = bpf_map__max_entries(map);
		m->flags = bpf_map__map_flags(map);
		m->btf = btf;
		m->key_type = bpf_map__btf_key_type_id(map);
		m->value_type = bpf_map__btf_value_type_id(map);
		/* a section's map gets its type id at load time: find it */
		if (btf && !m->value_type) {
			const char *sec = strchr(bpf_map__name(map), '.');
			int id = sec ? btf__find_by_name_kind(btf, sec,
							      BTF_KIND_DATASEC)
				     : -ENOENT;

			m->value_type = id > 0 ? id : 0;
		}
		map_shape(m);
		l->n++;
	}
	layout_id(l);
	return 0;
}

/* The types of a layout's maps, pinned beside them by the agent that made
 * them (sl_layout_pin_btf); NULL when there are none. */
static struct btf *pinned_btf(const char *dir)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info), key = 0;
	struct btf *btf = NULL;
	char path[PATH_MAX];
	void *raw = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, SL_LAYOUT_BTF_PIN);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return NULL;
	if (!bpf_obj_get_info_by_fd(fd, &info, &len) && info.value_size &&
	    (raw = malloc(info.value_size)) &&
	    !bpf_map_lookup_elem(fd, &key, raw))
		btf = btf__new(raw, info.value_size);
	free(raw);
	close(fd);
	return libbpf_get_error(btf) ? NULL : btf;
}

int sl_layout_pin_btf(struct bpf_object *obj, const char *dir)
{
	const struct btf *btf = bpf_object__btf(obj);
	__u32 size = 0, key = 0;
	char path[PATH_MAX];
	const void *raw;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, SL_LAYOUT_BTF_PIN);
	if (!btf || !access(path, F_OK))
		return 0;
	raw = btf__raw_data(btf, &size);
	if (!raw)
		return -ENOMEM;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sluice_btf", sizeof(key),
			    size, 1, NULL);
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(fd, &key, raw, BPF_ANY) || bpf_obj_pin(fd, path))
		err = -errno;
	close(fd);
	return err;
}

/*
 * A map's key and value types in a layout's pinned BTF, by the map's pin
 * name: a variable of the ".maps" section, whose definition's key and
 * value members point to them, or a data section (".bss" is pinned as
 * "..._bss"). Not by the kernel's type ids: a map shared from an older
 * build carries the ids of that build's BTF, which need not be this one's.
 */
static bool types_by_name(const struct btf *btf, const char *pin,
			  uint32_t *key, uint32_t *value)
{
	uint32_t n = btf__type_cnt(btf);

	for (uint32_t id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const struct btf_var_secinfo *vs;
		const char *name;
		char sec[64];
		size_t ls, lp;

		if (!btf_is_datasec(t))
			continue;
		name = btf__name_by_offset(btf, t->name_off);
		if (strcmp(name, ".maps")) {
			sl_layout_pin_name(name, sec, sizeof(sec));
			ls = strlen(sec);
			lp = strlen(pin);
			if (ls > lp || strcmp(pin + lp - ls, sec))
				continue;
			*key = 0;
			*value = id;
			return true;
		}
		vs = btf_var_secinfos(t);
		for (uint16_t i = 0; i < btf_vlen(t); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			const struct btf_type *def;
			const struct btf_member *mb;

			if (!var || strcmp(btf__name_by_offset(btf, var->name_off),
					   pin))
				continue;
			def = btf__type_by_id(btf, var->type);
			if (!def || !btf_is_struct(def))
				return false;
			*key = *value = 0;
			mb = btf_members(def);
			for (uint16_t j = 0; j < btf_vlen(def); j++, mb++) {
				const char *m = btf__name_by_offset(btf,
								    mb->name_off);
				const struct btf_type *ptr =
					btf__type_by_id(btf, mb->type);

				if (!ptr || !btf_is_ptr(ptr))
					continue;
				if (!strcmp(m, "key"))
					*key = ptr->type;
				else if (!strcmp(m, "value"))
					*value = ptr->type;
			}
			return true;
		}
	}
	return false;
}

int sl_layout_var_offset(const struct sl_layout_map *m, const char *var)
{
	const struct btf_type *t = m->btf ? btf__type_by_id(m->btf,
							     m->value_type)
					  : NULL;
	const struct btf_var_secinfo *vs;

	if (!t || !btf_is_datasec(t))
		return -ENOENT;
	vs = btf_var_secinfos(t);
	for (uint16_t i = 0; i < btf_vlen(t); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(m->btf, vs->type);

		if (v && !strcmp(btf__name_by_offset(m->btf, v->name_off), var))
			return vs->offset;
	}
	return -ENOENT;
}

int sl_layout_of_pins(const char *dir, const uint32_t *ids, uint32_t n_ids,
		      struct sl_layout *l)
{
	bool own_btf;
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);
	int err = 0;

	memset(l, 0, sizeof(*l));
	if (!d)
		return -errno;
	l->btf = pinned_btf(dir);
	own_btf = l->btf != NULL;
	while (!err && (de = readdir(d))) {
		struct bpf_map_info info = { 0 };
		__u32 len = sizeof(info);
		struct sl_layout_map *m;
		bool used = false;
		int fd;

		if (de->d_type != DT_REG || !strncmp(de->d_name, "link-", 5) ||
		    !strcmp(de->d_name, SL_LAYOUT_BTF_PIN))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = bpf_obj_get(path);
		if (fd < 0)
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len) || !info.type) {
			close(fd);
			continue;
		}
		for (uint32_t i = 0; i < n_ids && !used; i++)
			used = ids[i] == info.id;
		l->n_used += used;
		if (l->n == SL_LAYOUT_MAX_MAPS) {
			close(fd);
			err = -E2BIG;
			break;
		}
		m = &l->maps[l->n++];
		if (snprintf(m->name, sizeof(m->name), "%s", de->d_name) >=
		    (int)sizeof(m->name))
			m->name[0] = 0; /* not one of ours: matches nothing */
		m->fd = fd;
		m->type = info.type;
		m->key_size = info.key_size;
		m->value_size = info.value_size;
		m->max_entries = info.max_entries;
		m->flags = info.map_flags;
		if (own_btf) {
			m->btf = types_by_name(l->btf, m->name, &m->key_type,
					       &m->value_type)
					 ? l->btf
					 : NULL;
			continue;
		}
		/* a layout before pinned BTF (one build made all its maps):
		 * the kernel's copy, which needs CAP_SYS_ADMIN */
		m->key_type = info.btf_key_type_id;
		m->value_type = info.btf_value_type_id;
		if (info.btf_id && !l->btf)
			l->btf = btf__load_from_kernel_by_id(info.btf_id);
		m->btf = info.btf_id ? l->btf : NULL;
	}
	closedir(d);
	for (int i = 0; i < l->n; i++)
		map_shape(&l->maps[i]);
	layout_id(l);
	if (err)
		sl_layout_free(l);
	return err;
}

void sl_layout_free(struct sl_layout *l)
{
	for (int i = 0; i < l->n; i++)
		if (l->maps[i].fd >= 0)
			close(l->maps[i].fd);
	btf__free(l->btf);
	memset(l, 0, sizeof(*l));
}

const struct sl_layout_map *sl_layout_find(const struct sl_layout *l,
					   const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->maps[i].name, name))
			return &l->maps[i];
	return NULL;
}

/* ---- carrying values ---- */

struct planner {
	const struct btf *sb, *db;
	struct sl_carry_plan *p;
	int err;
};

static void note(struct planner *c, const char *what, const char *path)
{
	size_t len = strlen(c->p->diff);

	if (len + 1 < sizeof(c->p->diff))
		snprintf(c->p->diff + len, sizeof(c->p->diff) - len, "%s%s %s",
			 len ? "; " : "", what, path[0] ? path : "(value)");
}

static void add_op(struct planner *c, uint32_t soff, uint32_t doff,
		   uint32_t ssize, uint32_t dsize)
{
	struct sl_carry_plan *p = c->p;
	struct sl_carry_op *last = p->n ? &p->op[p->n - 1] : NULL;

	/* runs that follow each other on both sides are one copy */
	if (last && ssize == dsize && last->ssize == last->dsize &&
	    last->soff + last->ssize == soff &&
	    last->doff + last->dsize == doff) {
		last->ssize += ssize;
		last->dsize += dsize;
		return;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		void *op = realloc(p->op, cap * sizeof(*p->op));

		if (!op) {
			c->err = -ENOMEM;
			return;
		}
		p->op = op;
		p->cap = cap;
	}
	p->op[p->n++] = (struct sl_carry_op){ soff, doff, ssize, dsize };
}

static void plan_type(struct planner *c, uint32_t sid, uint32_t soff,
		      uint32_t did, uint32_t doff, const char *path,
		      int depth);

static void plan_fields(struct planner *c, const struct btf_type *st,
			uint32_t soff, const struct btf_type *dt,
			uint32_t doff, const char *path, int depth)
{
	char sub[256];

	for (int i = 0; i < btf_vlen(dt); i++) {
		struct field df, sf;
		int j;

		fields(c->db, dt, i, &df);
		snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "",
			 df.name);
		for (j = 0; j < btf_vlen(st); j++) {
			fields(c->sb, st, j, &sf);
			if (!strcmp(sf.name, df.name))
				break;
		}
		if (j == btf_vlen(st) || !df.name[0]) {
			note(c, "new", sub);
			continue;
		}
		if (sf.bitfield || df.bitfield || sf.bit_off % 8 ||
		    df.bit_off % 8) {
			note(c, "not carried (a bit field)", sub);
			continue;
		}
		plan_type(c, sf.type, soff + sf.bit_off / 8, df.type,
			  doff + df.bit_off / 8, sub, depth + 1);
	}
	for (int j = 0; j < btf_vlen(st); j++) {
		struct field sf, df;
		int i;

		fields(c->sb, st, j, &sf);
		for (i = 0; i < btf_vlen(dt); i++) {
			fields(c->db, dt, i, &df);
			if (!strcmp(sf.name, df.name))
				break;
		}
		if (i == btf_vlen(dt)) {
			snprintf(sub, sizeof(sub), "%s%s%s", path,
				 path[0] ? "." : "", sf.name);
			note(c, "dropped", sub);
		}
	}
}

static void plan_type(struct planner *c, uint32_t sid, uint32_t soff,
		      uint32_t did, uint32_t doff, const char *path, int depth)
{
	const struct btf_type *st = resolve(c->sb, &sid);
	const struct btf_type *dt = resolve(c->db, &did);

	if (!st || !dt || depth > MAX_DEPTH) {
		c->err = -EINVAL;
		return;
	}
	/* the same shape: one copy */
	if (type_shape(c->sb, sid, 0, 0) == type_shape(c->db, did, 0, 0)) {
		long ssz = btf__resolve_size(c->sb, sid);
		long dsz = btf__resolve_size(c->db, did);

		if (ssz <= 0 || dsz <= 0 || ssz != dsz)
			c->err = -EINVAL;
		else
			add_op(c, soff, doff, ssz, dsz);
		return;
	}
	if (is_integer(st) && is_integer(dt) && st->size <= 8 &&
	    dt->size <= 8) {
		if (dt->size < st->size)
			note(c, "narrowed", path);
		add_op(c, soff, doff, st->size, dt->size);
		return;
	}
	if (btf_is_array(st) && btf_is_array(dt)) {
		const struct btf_array *sa = btf_array(st), *da = btf_array(dt);
		uint32_t n = sa->nelems < da->nelems ? sa->nelems : da->nelems;
		long ssz = btf__resolve_size(c->sb, sa->type);
		long dsz = btf__resolve_size(c->db, da->type);
		size_t mark = strlen(c->p->diff);

		if (ssz <= 0 || dsz <= 0) {
			c->err = -EINVAL;
			return;
		}
		if (sa->nelems > da->nelems)
			note(c, "shortened", path);
		for (uint32_t i = 0; i < n && !c->err; i++) {
			plan_type(c, sa->type, soff + i * ssz, da->type,
				  doff + i * dsz, path, depth + 1);
			/* what an element's carry says, once */
			if (i == 0)
				mark = strlen(c->p->diff);
			else
				c->p->diff[mark] = 0;
		}
		return;
	}
	if ((btf_is_composite(st) && btf_is_composite(dt)) ||
	    (btf_is_datasec(st) && btf_is_datasec(dt))) {
		plan_fields(c, st, soff, dt, doff, path, depth);
		return;
	}
	note(c, "changed kind, not carried", path);
}

int sl_layout_plan(const struct sl_layout_map *from,
		   const struct sl_layout_map *to, bool key,
		   struct sl_carry_plan *plan)
{
	struct planner c = { .sb = from->btf, .db = to->btf, .p = plan };
	uint32_t ssize = key ? from->key_size : from->value_size;
	uint32_t dsize = key ? to->key_size : to->value_size;
	uint32_t sid = key ? from->key_type : from->value_type;
	uint32_t did = key ? to->key_type : to->value_type;

	memset(plan, 0, sizeof(*plan));
	if (!c.sb || !c.db || !sid || !did) {
		/* no type information: only an equal size is understood */
		if (ssize != dsize)
			return -EINVAL;
		add_op(&c, 0, 0, ssize, dsize);
	} else {
		plan_type(&c, sid, 0, did, 0, "", 0);
	}
	if (c.err)
		sl_layout_plan_free(plan);
	return c.err;
}

static uint64_t load_uint(const uint8_t *p, uint32_t size)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (size) {
	case 1: memcpy(&u8, p, 1); return u8;
	case 2: memcpy(&u16, p, 2); return u16;
	case 4: memcpy(&u32, p, 4); return u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

static void store_uint(uint8_t *p, uint32_t size, uint64_t v)
{
	uint8_t u8 = v;
	uint16_t u16 = v;
	uint32_t u32 = v;

	switch (size) {
	case 1: memcpy(p, &u8, 1); break;
	case 2: memcpy(p, &u16, 2); break;
	case 4: memcpy(p, &u32, 4); break;
	default: memcpy(p, &v, 8); break;
	}
}

void sl_layout_apply(const struct sl_carry_plan *plan, const void *src,
		     void *dst)
{
	const uint8_t *s = src;
	uint8_t *d = dst;

	for (size_t i = 0; i < plan->n; i++) {
		const struct sl_carry_op *op = &plan->op[i];

		if (op->ssize == op->dsize)
			memcpy(d + op->doff, s + op->soff, op->ssize);
		else
			store_uint(d + op->doff, op->dsize,
				   load_uint(s + op->soff, op->ssize));
	}
}

void sl_layout_plan_free(struct sl_carry_plan *plan)
{
	free(plan->op);
	plan->op = NULL;
	plan->n = plan->cap = 0;
}
