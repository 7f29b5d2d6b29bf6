/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the pinned layout's shapes and carrying values between
 * two layouts (user/dp/layout.c), over BTF built here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "layout.h"

/* Old: { u64 a; u32 b; u64 gone; u64 arr[4]; struct { u64 x, y; } in; } */
struct old_v {
	uint64_t a;
	uint32_t b;
	uint32_t pad;
	uint64_t gone;
	uint64_t arr[4];
	struct { uint64_t x, y; } in;
};

/* New: { u64 fresh; u64 b; u32 a; u64 arr[2]; struct { u64 y, x; } in; } */
struct new_v {
	uint64_t fresh;
	uint64_t b;
	uint32_t a;
	uint32_t pad;
	uint64_t arr[2];
	struct { uint64_t y, x; } in;
};

static int u32_id, u64_id;

static struct btf *ints(void)
{
	struct btf *btf = btf__new_empty();

	assert_non_null(btf);
	u32_id = btf__add_int(btf, "u32", 4, 0);
	u64_id = btf__add_int(btf, "u64", 8, 0);
	return btf;
}

static int inner(struct btf *btf, bool swapped)
{
	int id = btf__add_struct(btf, "in", 16);

	btf__add_field(btf, swapped ? "y" : "x", u64_id, 0, 0);
	btf__add_field(btf, swapped ? "x" : "y", u64_id, 64, 0);
	return id;
}

static struct btf *old_btf(int *value)
{
	struct btf *btf = ints();
	int in = inner(btf, false);
	int arr = btf__add_array(btf, u32_id, u64_id, 4);

	*value = btf__add_struct(btf, "v", sizeof(struct old_v));
	btf__add_field(btf, "a", u64_id, offsetof(struct old_v, a) * 8, 0);
	btf__add_field(btf, "b", u32_id, offsetof(struct old_v, b) * 8, 0);
	btf__add_field(btf, "gone", u64_id, offsetof(struct old_v, gone) * 8,
		       0);
	btf__add_field(btf, "arr", arr, offsetof(struct old_v, arr) * 8, 0);
	btf__add_field(btf, "in", in, offsetof(struct old_v, in) * 8, 0);
	return btf;
}

static struct btf *new_btf(int *value)
{
	struct btf *btf = ints();
	int in = inner(btf, true);
	int arr = btf__add_array(btf, u32_id, u64_id, 2);

	*value = btf__add_struct(btf, "v", sizeof(struct new_v));
	btf__add_field(btf, "fresh", u64_id,
		       offsetof(struct new_v, fresh) * 8, 0);
	btf__add_field(btf, "b", u64_id, offsetof(struct new_v, b) * 8, 0);
	btf__add_field(btf, "a", u32_id, offsetof(struct new_v, a) * 8, 0);
	btf__add_field(btf, "arr", arr, offsetof(struct new_v, arr) * 8, 0);
	btf__add_field(btf, "in", in, offsetof(struct new_v, in) * 8, 0);
	return btf;
}

static struct sl_layout_map map_of(const struct btf *btf, int value,
				   uint32_t size)
{
	struct sl_layout_map m = {
		.name = "v", .fd = -1, .type = BPF_MAP_TYPE_ARRAY,
		.key_size = 4, .value_size = size, .max_entries = 8,
		.btf = btf, .key_type = u32_id, .value_type = value,
	};

	return m;
}

static void test_carry_by_name(void **state)
{
	int ov, nv;
	struct btf *ob = old_btf(&ov), *nb = new_btf(&nv);
	struct sl_layout_map from = map_of(ob, ov, sizeof(struct old_v));
	struct sl_layout_map to = map_of(nb, nv, sizeof(struct new_v));
	struct old_v src = { .a = 0x1122334455667788ULL, .b = 7, .gone = 9,
			     .arr = { 1, 2, 3, 4 }, .in = { .x = 10, .y = 20 } };
	struct new_v dst;
	struct sl_carry_plan plan;

	assert_int_equal(sl_layout_plan(&from, &to, false, &plan), 0);
	memset(&dst, 0, sizeof(dst));
	sl_layout_apply(&plan, &src, &dst);
	assert_int_equal(dst.fresh, 0);	/* new: stays zero */
	assert_int_equal(dst.b, 7);		/* widened */
	assert_int_equal(dst.a, 0x55667788);	/* narrowed */
	assert_int_equal(dst.arr[0], 1);
	assert_int_equal(dst.arr[1], 2);	/* shortened to 2 */
	assert_int_equal(dst.in.x, 10);	/* moved inside the struct */
	assert_int_equal(dst.in.y, 20);
	assert_non_null(strstr(plan.diff, "new fresh"));
	assert_non_null(strstr(plan.diff, "dropped gone"));
	assert_non_null(strstr(plan.diff, "narrowed a"));
	assert_non_null(strstr(plan.diff, "shortened arr"));
	assert_null(strstr(plan.diff, "in.x"));
	sl_layout_plan_free(&plan);
	btf__free(ob);
	btf__free(nb);
}

/* Two BTF objects describing the same value: one copy of the whole. */
static void test_same_shape(void **state)
{
	int a, b;
	struct btf *ba = old_btf(&a), *bb = old_btf(&b);
	struct sl_layout_map ma = map_of(ba, a, sizeof(struct old_v));
	struct sl_layout_map mb = map_of(bb, b, sizeof(struct old_v));
	struct sl_carry_plan plan;

	assert_int_equal(sl_layout_plan(&ma, &mb, false, &plan), 0);
	assert_int_equal(plan.n, 1);
	assert_int_equal(plan.op[0].ssize, sizeof(struct old_v));
	assert_string_equal(plan.diff, "");
	sl_layout_plan_free(&plan);
	btf__free(ba);
	btf__free(bb);
}

/* Without type information only equal sizes can be carried. */
static void test_no_btf(void **state)
{
	struct sl_layout_map a = map_of(NULL, 0, 16), b = map_of(NULL, 0, 24);
	struct sl_carry_plan plan;

	assert_int_not_equal(sl_layout_plan(&a, &b, false, &plan), 0);
	b.value_size = 16;
	assert_int_equal(sl_layout_plan(&a, &b, false, &plan), 0);
	assert_int_equal(plan.n, 1);
	sl_layout_plan_free(&plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_carry_by_name),
		cmocka_unit_test(test_same_shape),
		cmocka_unit_test(test_no_btf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
