/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Classification: at most three lookups whatever the number of rules.
 * 1. port_table[set][slot][dport] names the rule, or no rule, or a class
 *    for the destination trie (one array lookup, inlined by the verifier);
 * 2. lpm_v4/v6 on (class, daddr) names the rule or a class for the source;
 * 3. lpm_v4/v6 on (class, saddr) names the rule.
 * User space computes the tables so that each answer is already the
 * winner by precedence (docs/rules.md); the fast path never compares rules.
 */
#ifndef SLUICE_CLASSIFY_H
#define SLUICE_CLASSIFY_H

#include "maps.h"
#include "parse.h"

/* Rule set the fast path reads; user space flips it after filling the other. */
volatile __u32 active_set;

static __always_inline __u32 port_index(__u8 slot, __u16 dport)
{
	if (slot < SLUICE_PORTED_SLOTS)
		return slot * 65536 + dport;
	return SLUICE_PORTED_SLOTS * 65536 + (slot - SLUICE_PORTED_SLOTS);
}

static __always_inline __u32 lpm_lookup(const struct sluice_pkt *p,
					__u32 class_id, const __u8 *addr)
{
	__u32 *ref;

	if (p->family == 4) {
		struct sluice_lpm4_key k4 = {
			.prefixlen = 32 + 32,
			.class_id = class_id,
		};

		__builtin_memcpy(k4.addr, addr, 4);
		ref = bpf_map_lookup_elem(&lpm_v4, &k4);
	} else {
		struct sluice_lpm6_key k6 = {
			.prefixlen = 32 + 128,
			.class_id = class_id,
		};

		__builtin_memcpy(k6.addr, addr, 16);
		ref = bpf_map_lookup_elem(&lpm_v6, &k6);
	}
	return ref ? *ref : SLUICE_REF_NONE;
}

/* Returns the rule slot + 1 that judges p, or 0 for none. */
static __always_inline __u32 classify(const struct sluice_pkt *p)
{
	__u32 idx = port_index(p->slot, p->dport);
	struct sluice_port_ref *pref;
	__u32 ref;

	if (active_set & 1)
		idx += SLUICE_SET_SPACE;
	pref = bpf_map_lookup_elem(&port_table, &idx);
	if (!pref)
		return SLUICE_REF_NONE;
	ref = p->family == 4 ? pref->v4 : pref->v6;
	if (!(ref & SLUICE_REF_LPM))
		return ref;
	ref = lpm_lookup(p, ref & ~SLUICE_REF_LPM, p->daddr);
	if (!(ref & SLUICE_REF_LPM))
		return ref;
	ref = lpm_lookup(p, ref & ~SLUICE_REF_LPM, p->saddr);
	/* a source-stage answer is always final */
	return ref & SLUICE_REF_LPM ? SLUICE_REF_NONE : ref;
}

#endif
