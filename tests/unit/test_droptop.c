/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the heaviest sources of sampled drops (user/lib/droptop.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "droptop.h"

#define SEC 1000000000ULL
#define T0  (1000 * SEC)

static struct sluice_drop_sample sample(uint32_t slot, uint8_t last_octet,
					uint32_t weight)
{
	struct sluice_drop_sample s = { .slot = slot, .weight = weight,
					.family = 4 };

	s.saddr[0] = 198;
	s.saddr[1] = 18;
	s.saddr[3] = last_octet;
	return s;
}

/* 200 light sources (weight 1 each, every 10 ms), then two heavy ones
 * among them: the heavy ones take the lightest places and are listed
 * first, though 200 > 32 sources came. */
static void test_heavy_hitters_kept(void **state)
{
	struct sl_droptop *t = calloc(1, sizeof(*t));
	struct sl_droptop_source top[SL_DROPTOP_KEEP];
	struct sluice_drop_sample s;
	uint64_t now = T0;
	size_t n;

	(void)state;
	assert_non_null(t);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 200; i++, now += 10000000ULL) {
			s = sample(7, 10 + i % 200, 1);
			assert_int_equal(sl_droptop_add(t, &s, now), 0);
			/* the heavy ones come once the table is full */
			if (round > 0 && i % 10 == 0) {
				s = sample(7, 1, 30);
				sl_droptop_add(t, &s, now);
				s = sample(7, 2, 10);
				sl_droptop_add(t, &s, now);
			}
		}
	}
	n = sl_droptop_top(t, 7, now, top, 3);
	assert_int_equal(n, 3);
	assert_int_equal(top[0].addr[3], 1);
	assert_int_equal(top[1].addr[3], 2);
	assert_true(top[0].weight > top[1].weight);
	assert_true(top[1].weight > top[2].weight);
	/* another slot saw nothing */
	assert_int_equal(sl_droptop_top(t, 8, now, top, 3), 0);
	sl_droptop_free(t);
	free(t);
}

/* A steady 1000/s in samples of 10 every 10 ms reads as 1000/s, after 3 s
 * and after 60 s (the decay corrected for the rule's age), and half that
 * a half-life after it stops. */
static void test_rate_of_a_steady_flood(void **state)
{
	struct sl_droptop *t = calloc(1, sizeof(*t));
	struct sluice_drop_sample s = sample(3, 9, 10);
	uint64_t now = T0;
	double r3 = 0, r60, a, b;

	(void)state;
	assert_non_null(t);
	for (int i = 0; i < 6000; i++, now += 10000000ULL) {
		sl_droptop_add(t, &s, now);
		if (i == 299)
			r3 = sl_droptop_rate(t, 3,
					     sl_droptop_total(t, 3, now), now);
	}
	r60 = sl_droptop_rate(t, 3, sl_droptop_total(t, 3, now), now);
	assert_true(r3 > 900 && r3 < 1100);
	assert_true(r60 > 950 && r60 < 1050);
	a = sl_droptop_total(t, 3, now);
	b = sl_droptop_total(t, 3, now + (uint64_t)(SL_DROPTOP_HALF_LIFE_S * SEC));
	assert_true(b > a / 2 * 0.95 && b < a / 2 * 1.05);
	sl_droptop_free(t);
	free(t);
}

/* A cleared slot (its rule left) starts from nothing; bad samples are
 * refused. */
static void test_clear_and_bad_samples(void **state)
{
	struct sl_droptop *t = calloc(1, sizeof(*t));
	struct sl_droptop_source top[1];
	struct sluice_drop_sample s = sample(5, 1, 100);

	(void)state;
	assert_non_null(t);
	assert_int_equal(sl_droptop_add(t, &s, T0), 0);
	sl_droptop_clear(t, 5);
	assert_int_equal(sl_droptop_top(t, 5, T0, top, 1), 0);
	assert_true(sl_droptop_total(t, 5, T0) == 0);
	s.slot = SLUICE_MAX_RULE_SLOTS;
	assert_int_equal(sl_droptop_add(t, &s, T0), -EINVAL);
	s = sample(5, 1, 1);
	s.family = 5;
	assert_int_equal(sl_droptop_add(t, &s, T0), -EINVAL);
	sl_droptop_free(t);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heavy_hitters_kept),
		cmocka_unit_test(test_rate_of_a_steady_flood),
		cmocka_unit_test(test_clear_and_bad_samples),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
