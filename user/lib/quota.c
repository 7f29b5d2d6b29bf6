// SPDX-License-Identifier: GPL-2.0
/* Max-min fair water filling for global cluster flows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "quota.h"

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Water filling by sorting: O(n log n), for any input. */
static void level_sorted(uint64_t count, const uint64_t *demand, size_t n,
			 uint64_t *scratch, struct sl_quota_level *out)
{
	uint64_t left = count;
	size_t i;

	memcpy(scratch, demand, n * sizeof(*scratch));
	qsort(scratch, n, sizeof(*scratch), u64_cmp);
	/* Smallest demands first: each takes its demand or an even share. */
	for (i = 0; i < n; i++) {
		uint64_t share = left / (n - i);

		if (scratch[i] > share) {
			out->level = share;
			out->bonus = 0;
			return;
		}
		left -= scratch[i];
	}
	out->level = UINT64_MAX;
	out->bonus = left / n;
}

/*
 * The level is the largest L with f(L) = sum(min(d, L)) <= count. f is
 * concave and piecewise linear, so Newton's step from below,
 * L += (count - f(L)) / #(d > L), stays below and ends when the slack is
 * less than the slope; each step but the last crosses a demand, and few
 * do in practice. Past NEWTON_MAX steps, sort instead.
 */
#define NEWTON_MAX 16

int sl_quota_global_level(uint64_t count, const uint64_t *demand, size_t n,
			  uint64_t *scratch, struct sl_quota_level *out)
{
	uint64_t sum = 0, level;
	size_t i;
	int step;

	if (!n)
		return -EINVAL;
	for (i = 0; i < n && sum <= count; i++)
		sum += demand[i] <= count ? demand[i] : count + 1;
	if (sum <= count) {
		out->level = UINT64_MAX;
		out->bonus = (count - sum) / n;
		return 0;
	}
	level = count / n; /* f(count / n) <= count */
	for (step = 0; step < NEWTON_MAX; step++) {
		uint64_t f = 0, above = 0;

		for (i = 0; i < n; i++) {
			if (demand[i] > level) {
				f += level;
				above++;
			} else {
				f += demand[i];
			}
		}
		/* some demand is above the level, or sum would fit */
		if (count - f < above) {
			out->level = level;
			out->bonus = 0;
			return 0;
		}
		level += (count - f) / above;
	}
	level_sorted(count, demand, n, scratch, out);
	return 0;
}
