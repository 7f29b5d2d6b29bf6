/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Compilation of a rule set into classification tables: the port table of
 * one rule set and the LPM trie entries it refers to. Pure computation, no
 * BPF calls; the loader writes the result into the maps.
 */
#ifndef SLUICE_COMPILE_H
#define SLUICE_COMPILE_H

#include "rules.h"
#include "sluice_abi.h"

struct sl_lpm_entry {
	uint8_t family; /* 4 or 6 */
	uint8_t plen;	/* address bits */
	uint32_t class_id;
	uint8_t addr[16];
	uint32_t ref;
};

struct sl_compiled {
	uint32_t *port; /* SLUICE_SET_SPACE references, at sluice_port_key() */
	struct sl_lpm_entry *lpm;
	size_t n_lpm;
	size_t cap_lpm;
	uint32_t n_classes;
	uint32_t n_lpm4, n_lpm6;
	uint32_t needs_l4;	/* SLUICE_NEED_* of this set (bpf/frag.h) */
	/* chains[i] is chains map entry chain_base + i (SLUICE_REF_CHAIN) */
	struct sluice_chain *chains;
	uint32_t n_chains;
	uint32_t chain_base;
};

/*
 * Precedence: < 0 when a judges a packet that both match, > 0 for b.
 * Priority, then protocol, dst prefix, src prefix, port range, file order.
 */
int sl_rule_cmp(const struct sl_rule *a, const struct sl_rule *b);

/*
 * Compile rs; slots[i] is the rule slot of rs->rules[i]. Class ids are
 * allocated from class_base up, so two sets can share a trie, and chains
 * from chain_base up (set * SLUICE_MAX_CHAINS).
 * Returns 0, -ENOMEM, or -E2BIG (with a message) when the tables would
 * exceed their maps.
 */
int sl_compile(const struct sl_ruleset *rs, const uint32_t *slots,
	       uint32_t class_base, uint32_t chain_base,
	       uint32_t max_lpm_per_family, struct sl_compiled *out,
	       char *err, size_t errlen);

void sl_compiled_free(struct sl_compiled *c);

/* The map value of a rule's configuration. */
void sl_rule_cfg(const struct sl_rule *r, struct sluice_rule_cfg *cfg);
/* The data-plane configuration of a rule's breaker; all zeros for none. */
void sl_breaker_cfg(const struct sl_rule *r, struct sluice_breaker_cfg *cfg);

#endif
