/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pinned layout: the maps a data plane's program uses, each with its
 * shape (map type, sizes, flags and the BTF layout of key and value, down
 * to every field's name and offset). The layout's id is a hash of the
 * shapes, so two builds whose maps agree in every respect share it and an
 * agent can tell, from the pins alone, whether it can adopt them as they
 * are. Where a map's shape changed, its values are carried field by field,
 * matched by name through both sides' BTF.
 */
#ifndef SLUICE_LAYOUT_H
#define SLUICE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#define SL_LAYOUT_MAX_MAPS 32

struct sl_layout_map {
	char name[32];		/* pin name: the map's name, '.' as '_' */
	int fd;			/* pinned side; -1 for an object's map */
	struct bpf_map *obj_map; /* object side; NULL for a pinned map */
	uint32_t type, key_size, value_size, max_entries, flags;
	const struct btf *btf;	/* NULL: the map has no type information */
	uint32_t key_type, value_type;
	uint64_t shape;
	/* the shape in the layout id: rule_cpu's size is the data plane's
	 * rule slot class, chosen at each load and grown on apply, so it is
	 * left out (one layout, one pin directory, whatever the class) */
	uint64_t id_shape;
};

struct sl_layout {
	uint64_t id;
	int n;
	int n_used;
	struct sl_layout_map maps[SL_LAYOUT_MAX_MAPS];
	struct btf *btf;	/* the pinned maps' BTF, owned */
};

/* An opened object's maps before the load (all but skip). */
int sl_layout_of_object(struct bpf_object *obj, const struct bpf_map *skip,
			struct sl_layout *l);

/* Beside a layout's maps: the types of its program (the object's BTF) in a
 * map of its own, readable without the CAP_SYS_ADMIN that loading another
 * program's BTF from the kernel needs. */
#define SL_LAYOUT_BTF_PIN "btf"
int sl_layout_pin_btf(struct bpf_object *obj, const char *dir);

/* The maps pinned in dir; n_used counts those whose ids are in ids[] (the
 * ones a program uses). The fds are the layout's to close. */
int sl_layout_of_pins(const char *dir, const uint32_t *ids, uint32_t n_ids,
		      struct sl_layout *l);

void sl_layout_free(struct sl_layout *l);

const struct sl_layout_map *sl_layout_find(const struct sl_layout *l,
					   const char *name);

/* The offset of variable var in a data section map (".bss"); -ENOENT. */
int sl_layout_var_offset(const struct sl_layout_map *m, const char *var);

/* A map's pin name (bpffs refuses names with dots, as in "sluice_b.bss"). */
void sl_layout_pin_name(const char *map_name, char *out, size_t len);

/*
 * How to carry one value (key: one key) of from's shape into to's: fields
 * matched by name, integers widened or narrowed, arrays element by element
 * up to the shorter, runs that agree copied whole. What to has and from
 * lacks stays as the destination held it (zero, in a fresh buffer).
 */
struct sl_carry_op {
	uint32_t soff, doff, ssize, dsize; /* equal sizes: a copy of ssize */
};

struct sl_carry_plan {
	struct sl_carry_op *op;
	size_t n, cap;
	char diff[512];	/* what a carry drops and what it leaves at zero */
};

int sl_layout_plan(const struct sl_layout_map *from,
		   const struct sl_layout_map *to, bool key,
		   struct sl_carry_plan *plan);

/* Per-CPU values: once per CPU, at the CPU's stride on both sides. */
void sl_layout_apply(const struct sl_carry_plan *plan, const void *src,
		     void *dst);

void sl_layout_plan_free(struct sl_carry_plan *plan);

#endif
