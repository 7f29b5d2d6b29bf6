/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sources a rule drops most, from the data plane's drop samples
 * (struct sluice_drop_sample): per rule slot, the SL_DROPTOP_KEEP heaviest
 * sources by the Space-Saving algorithm (a source not kept takes the
 * lightest one's place and weight, so a source that drops more than
 * 1/SL_DROPTOP_KEEP of a rule's packets is always kept, its weight over
 * by at most the lightest), weights decaying with a half-life so that they
 * read as recent rates.
 */
#ifndef SLUICE_DROPTOP_H
#define SLUICE_DROPTOP_H

#include <stddef.h>
#include <stdint.h>

#include "sluice_abi.h"

#define SL_DROPTOP_KEEP	      32
#define SL_DROPTOP_HALF_LIFE_S 10.0

struct sl_droptop_source {
	uint8_t family;		/* 4 or 6 */
	uint8_t addr[16];	/* IPv4: the first 4 bytes */
	double weight;		/* decayed refused packets */
};

struct sl_droptop_rule {
	struct sl_droptop_source src[SL_DROPTOP_KEEP];
	size_t n;
	double total;		/* decayed refused packets of the rule */
	uint64_t since_ns;	/* its first sample */
};

struct sl_droptop {
	struct sl_droptop_rule *slot[SLUICE_MAX_RULE_SLOTS]; /* NULL: none */
	uint64_t decayed_ns;	/* weights are as of this time */
};

/* Add a sample taken at now_ns; -ENOMEM or -EINVAL (a bad slot or family:
 * the sample is dropped). */
int sl_droptop_add(struct sl_droptop *t, const struct sluice_drop_sample *s,
		   uint64_t now_ns);
/* Forget what slot holds (its rule left the set). */
void sl_droptop_clear(struct sl_droptop *t, uint32_t slot);
void sl_droptop_free(struct sl_droptop *t);

/* The per-second rate that a weight of slot, decayed to now_ns, stands
 * for: exact for a steady rate since the slot's first sample. */
double sl_droptop_rate(const struct sl_droptop *t, uint32_t slot,
		       double weight, uint64_t now_ns);

/* Slot's sources, heaviest first, at most n of them into out (weights
 * decayed to now_ns); returns how many. */
size_t sl_droptop_top(struct sl_droptop *t, uint32_t slot, uint64_t now_ns,
		      struct sl_droptop_source *out, size_t n);
/* Slot's decayed total at now_ns (0 when it has none). */
double sl_droptop_total(struct sl_droptop *t, uint32_t slot, uint64_t now_ns);

#endif
