// SPDX-License-Identifier: GPL-2.0
/* The sources a rule drops most (droptop.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "droptop.h"

/* Bring every weight to now_ns: e^(-lambda t), lambda = ln 2 / half-life. */
static void decay(struct sl_droptop *t, uint64_t now_ns)
{
	double f;

	if (now_ns <= t->decayed_ns)
		return;
	f = exp2(-(double)(now_ns - t->decayed_ns) / 1e9 /
		 SL_DROPTOP_HALF_LIFE_S);
	t->decayed_ns = now_ns;
	for (size_t i = 0; i < SLUICE_MAX_RULE_SLOTS; i++) {
		struct sl_droptop_rule *r = t->slot[i];

		if (!r)
			continue;
		r->total *= f;
		for (size_t k = 0; k < r->n; k++)
			r->src[k].weight *= f;
	}
}

static bool same(const struct sl_droptop_source *s, uint8_t family,
		 const uint8_t addr[16])
{
	return s->family == family && !memcmp(s->addr, addr, 16);
}

int sl_droptop_add(struct sl_droptop *t, const struct sluice_drop_sample *s,
		   uint64_t now_ns)
{
	struct sl_droptop_rule *r;
	size_t k, lightest = 0;

	if (s->slot >= SLUICE_MAX_RULE_SLOTS ||
	    (s->family != 4 && s->family != 6))
		return -EINVAL;
	/* decaying costs a pass over the rules: once a second at most */
	if (now_ns > t->decayed_ns + 1000000000ULL || !t->decayed_ns)
		decay(t, now_ns);
	r = t->slot[s->slot];
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		r->since_ns = now_ns;
		t->slot[s->slot] = r;
	}
	r->total += s->weight;
	for (k = 0; k < r->n; k++) {
		if (same(&r->src[k], s->family, s->saddr)) {
			r->src[k].weight += s->weight;
			return 0;
		}
		if (r->src[k].weight < r->src[lightest].weight)
			lightest = k;
	}
	if (r->n < SL_DROPTOP_KEEP) {
		k = r->n++;
		r->src[k].weight = 0;
	} else {
		k = lightest;
	}
	r->src[k].family = s->family;
	memcpy(r->src[k].addr, s->saddr, 16);
	r->src[k].weight += s->weight;
	return 0;
}

void sl_droptop_clear(struct sl_droptop *t, uint32_t slot)
{
	if (slot < SLUICE_MAX_RULE_SLOTS) {
		free(t->slot[slot]);
		t->slot[slot] = NULL;
	}
}

void sl_droptop_free(struct sl_droptop *t)
{
	for (size_t i = 0; i < SLUICE_MAX_RULE_SLOTS; i++)
		sl_droptop_clear(t, i);
}

double sl_droptop_rate(const struct sl_droptop *t, uint32_t slot,
		       double weight, uint64_t now_ns)
{
	const struct sl_droptop_rule *r =
		slot < SLUICE_MAX_RULE_SLOTS ? t->slot[slot] : NULL;
	double age, mass;

	if (!r || now_ns <= r->since_ns)
		return 0;
	/* a steady rate x since the first sample decays to x times the
	 * integral of 2^(-s / half-life) over its age */
	age = (now_ns - r->since_ns) / 1e9;
	mass = SL_DROPTOP_HALF_LIFE_S / M_LN2 *
	       (1 - exp2(-age / SL_DROPTOP_HALF_LIFE_S));
	return weight / mass;
}

static int heavier_first(const void *a, const void *b)
{
	double x = ((const struct sl_droptop_source *)a)->weight;
	double y = ((const struct sl_droptop_source *)b)->weight;

	return (x < y) - (x > y);
}

size_t sl_droptop_top(struct sl_droptop *t, uint32_t slot, uint64_t now_ns,
		      struct sl_droptop_source *out, size_t n)
{
	struct sl_droptop_source all[SL_DROPTOP_KEEP];
	struct sl_droptop_rule *r;

	if (slot >= SLUICE_MAX_RULE_SLOTS || !(r = t->slot[slot]))
		return 0;
	decay(t, now_ns);
	memcpy(all, r->src, r->n * sizeof(*all));
	qsort(all, r->n, sizeof(*all), heavier_first);
	if (n > r->n)
		n = r->n;
	memcpy(out, all, n * sizeof(*out));
	return n;
}

double sl_droptop_total(struct sl_droptop *t, uint32_t slot, uint64_t now_ns)
{
	if (slot >= SLUICE_MAX_RULE_SLOTS || !t->slot[slot])
		return 0;
	decay(t, now_ns);
	return t->slot[slot]->total;
}
