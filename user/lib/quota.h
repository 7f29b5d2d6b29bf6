/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Quota allocation for cluster flows (docs/cluster.md): pure functions
 * from the live lease holders' demands to their grants.
 */
#ifndef SLUICE_QUOTA_H
#define SLUICE_QUOTA_H

#include <stddef.h>
#include <stdint.h>

/*
 * The max-min fair split of a global count, as a water level: a holder
 * with demand d gets min(d, level) + bonus. When demands exceed count,
 * bonus is 0 and level is the largest value whose allocation fits; the
 * floor leaves at most (holders above the level - 1) units unassigned.
 * When count covers every demand, level is UINT64_MAX and the spare is
 * split evenly as bonus, so a holder sees its own demand grow before the
 * next rebalance.
 */
struct sl_quota_level {
	uint64_t level;
	uint64_t bonus;
};

/*
 * What a holder is allocated for: its demand and 1/32 more. A holder
 * granted exactly its measured rate drops whatever its traffic runs above
 * that measurement, and under a sliding window each dip of its grant
 * costs a whole interval's worth of the dip.
 */
#define SL_QUOTA_HEADROOM_DIV 32

static inline uint64_t sl_quota_need(uint64_t demand)
{
	uint64_t pad = demand / SL_QUOTA_HEADROOM_DIV;

	return demand > UINT64_MAX - pad ? UINT64_MAX : demand + pad;
}

/*
 * Water-fill count over n demands in O(n) per Newton step (a few); scratch
 * holds n values for the sorting fallback. -EINVAL when n is 0.
 */
int sl_quota_global_level(uint64_t count, const uint64_t *demand, size_t n,
			  uint64_t *scratch, struct sl_quota_level *out);

static inline uint64_t sl_quota_grant(const struct sl_quota_level *l,
				      uint64_t demand)
{
	return (demand < l->level ? demand : l->level) + l->bonus;
}

/*
 * The most a holder may be granted now so that outstanding leases never
 * sum above count: others is the sum of the other holders' unexpired
 * grants.
 */
static inline uint64_t sl_quota_cap(uint64_t count, uint64_t others,
				    uint64_t want)
{
	uint64_t room = others < count ? count - others : 0;

	return want < room ? want : room;
}

#endif
