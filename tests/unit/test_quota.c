/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the cluster quota allocation (user/quota.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "quota.h"

#define MAXN 64

static uint64_t scratch[MAXN];

/*
 * The properties of a max-min fair allocation, checked from scratch:
 * sum <= count; nobody above its demand while someone is short; a short
 * holder gets at least as much as anyone else, less one unit of rounding;
 * less than a unit per short holder left unassigned while someone is
 * short (the level is a floor); when nobody is short every holder gets
 * at least its demand.
 */
static void check_fair(uint64_t count, const uint64_t *d, const uint64_t *g,
		       size_t n)
{
	uint64_t sum = 0, max_g = 0;
	size_t i, n_short = 0;

	for (i = 0; i < n; i++) {
		sum += g[i];
		if (g[i] > max_g)
			max_g = g[i];
		if (g[i] < d[i])
			n_short++;
	}
	if (sum > count)
		fail_msg("sum %llu > count %llu", (unsigned long long)sum,
			 (unsigned long long)count);
	if (!n_short)
		return;
	if (count - sum >= n_short)
		fail_msg("someone is short but %llu of %llu is unassigned",
			 (unsigned long long)(count - sum),
			 (unsigned long long)count);
	for (i = 0; i < n; i++) {
		if (g[i] > d[i])
			fail_msg("holder %zu gets %llu above its demand %llu "
				 "while another is short",
				 i, (unsigned long long)g[i],
				 (unsigned long long)d[i]);
		if (g[i] < d[i] && g[i] + 1 < max_g)
			fail_msg("short holder %zu gets %llu, another gets "
				 "%llu",
				 i, (unsigned long long)g[i],
				 (unsigned long long)max_g);
	}
}

/* Every holder's grant as the token server computes it: the level, then
 * each holder's grant from it (user/tokensrv/flows.c). */
static void alloc(uint64_t count, const uint64_t *d, uint64_t *g, size_t n)
{
	struct sl_quota_level l;

	assert_int_equal(sl_quota_global_level(count, d, n, scratch, &l), 0);
	for (size_t i = 0; i < n; i++)
		g[i] = sl_quota_grant(&l, d[i]);
	check_fair(count, d, g, n);
}

static void test_examples(void **state)
{
	uint64_t g[MAXN];

	(void)state;
	/* the skew over capacity: 40000/5000/5000/5000 of 20000 */
	{
		const uint64_t d[] = {40000, 5000, 5000, 5000};

		alloc(20000, d, g, 4);
		assert_true(g[0] == 5000 && g[1] == 5000 && g[2] == 5000 &&
			    g[3] == 5000);
	}
	{
		const uint64_t d[] = {40000, 1000, 2000, 5000};

		alloc(20000, d, g, 4);
		assert_true(g[0] == 12000 && g[1] == 1000 && g[2] == 2000 &&
			    g[3] == 5000);
	}
	/* under capacity: 12000/2000/2000/2000 of 20000, spare split evenly
	 * so that each sees its demand grow */
	{
		const uint64_t d[] = {12000, 2000, 2000, 2000};

		alloc(20000, d, g, 4);
		assert_true(g[0] == 12500 && g[1] == 2500 && g[2] == 2500 &&
			    g[3] == 2500);
	}
	/* rounding: 10 over 3 equal demands, the unit the floor leaves
	 * stays unassigned */
	{
		const uint64_t d[] = {100, 100, 100};

		alloc(10, d, g, 3);
		assert_true(g[0] == 3 && g[1] == 3 && g[2] == 3);
	}
	/* zero demand still gets a share of the spare, and nothing when
	 * others are short */
	{
		const uint64_t d[] = {0, 50};

		alloc(100, d, g, 2);
		assert_true(g[0] == 25 && g[1] == 75);
		alloc(40, d, g, 2);
		assert_true(g[0] == 0 && g[1] == 40);
	}
	/* one holder takes it all; zero count gives nothing */
	{
		const uint64_t d[] = {UINT64_MAX};

		alloc(1000, d, g, 1);
		assert_true(g[0] == 1000);
		alloc(0, d, g, 1);
		assert_true(g[0] == 0);
	}
	{
		struct sl_quota_level l;

		assert_int_equal(sl_quota_global_level(10, NULL, 0, scratch,
							&l),
				 -EINVAL);
	}
}

static void test_level(void **state)
{
	const uint64_t d[] = {40000, 1000, 2000, 5000};
	struct sl_quota_level l;

	(void)state;
	assert_int_equal(sl_quota_global_level(20000, d, 4, scratch, &l), 0);
	assert_true(l.level == 12000 && l.bonus == 0);
	/* a holder that was not in the computation gets min(demand, level) */
	assert_true(sl_quota_grant(&l, 300) == 300);
	assert_true(sl_quota_grant(&l, 90000) == 12000);
	assert_int_equal(sl_quota_global_level(20000, d + 1, 3, scratch, &l),
			 0);
	assert_true(l.level == UINT64_MAX && l.bonus == 4000);
	assert_true(sl_quota_grant(&l, 1000) == 5000);
}

/* A holder is allocated for its demand and 1/32 more, saturating. */
static void test_need(void **state)
{
	const uint64_t d[] = {40000, 1000, 2000, 5000};
	uint64_t need[4];
	struct sl_quota_level l;

	(void)state;
	assert_true(sl_quota_need(0) == 0);
	assert_true(sl_quota_need(31) == 31);
	assert_true(sl_quota_need(3200) == 3300);
	assert_true(sl_quota_need(UINT64_MAX - 1) == UINT64_MAX);
	assert_true(sl_quota_need(UINT64_MAX) == UINT64_MAX);
	/* docs/cluster.md's example: the short holders' headroom comes out
	 * of the heavy one's grant */
	for (int i = 0; i < 4; i++)
		need[i] = sl_quota_need(d[i]);
	assert_int_equal(sl_quota_global_level(20000, need, 4, scratch, &l),
			 0);
	assert_true(l.level == 11751 && l.bonus == 0);
	assert_true(sl_quota_grant(&l, need[1]) == 1031);
	assert_true(sl_quota_grant(&l, need[3]) == 5156);
}

static void test_cap(void **state)
{
	(void)state;
	assert_true(sl_quota_cap(100, 30, 50) == 50);
	assert_true(sl_quota_cap(100, 60, 50) == 40);
	assert_true(sl_quota_cap(100, 100, 50) == 0);
	assert_true(sl_quota_cap(100, 250, 50) == 0);
}

/* xorshift64*: a fixed seed, so a failure reproduces */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}

static void test_random_properties(void **state)
{
	uint64_t d[MAXN], g[MAXN], g2[MAXN];

	(void)state;
	for (int iter = 0; iter < 20000; iter++) {
		size_t n = 1 + rnd() % MAXN, i;
		uint64_t scale = 1ULL << (rnd() % 40);
		uint64_t count = rnd() % (scale * 4 + 1);
		uint64_t total = 0;

		for (i = 0; i < n; i++) {
			d[i] = rnd() % (scale + 1);
			total += d[i];
		}
		alloc(count, d, g, n);
		/* covering every demand: every holder gets at least it */
		if (total <= count) {
			for (i = 0; i < n; i++)
				assert_true(g[i] >= d[i]);
		}
		/* more demand never lowers the grant while others are fixed
		 * and the holder was short */
		i = rnd() % n;
		if (g[i] < d[i] && d[i] < UINT64_MAX / 2) {
			uint64_t before = g[i];

			d[i] += 1 + rnd() % (scale + 1);
			alloc(count, d, g2, n);
			assert_true(g2[i] + 1 >= before);
		}
	}
}

/* Demands spread over many magnitudes: many Newton steps, or the sort. */
static void test_spread_demands(void **state)
{
	uint64_t d[MAXN], g[MAXN], total = 0;

	(void)state;
	for (int i = 0; i < MAXN; i++) {
		d[i] = (1ULL << (i % 48)) + i;
		total += d[i];
	}
	for (uint64_t count = 0; count <= total; count += total / 97 + 1)
		alloc(count, d, g, MAXN);
	alloc(total - 1, d, g, MAXN);
	alloc(total, d, g, MAXN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_examples),
		cmocka_unit_test(test_level),
		cmocka_unit_test(test_need),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_random_properties),
		cmocka_unit_test(test_spread_demands),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
