/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Classification: at most four lookups whatever the number of rules.
 * 1. port_table[set][family][slot][dport] names the rule, or no rule, or a
 *    class for the VLAN stage or the destination trie (one load);
 * 1a. only where some rule matches a VLAN: lpm_v4 on (class, VID) names
 *    the rule or a class for the destination, through the same cache as 2;
 * 2. lpm_v4/v6 on (class, daddr) names the rule or a class for the source;
 *    a per-CPU cache of recent answers sits in front of it, since the
 *    destinations of a host's traffic are its own few addresses;
 * 3. lpm_v4/v6 on (class, saddr) names the rule.
 * User space computes the tables so that each answer is already the
 * winner by precedence (docs/rules.md); the fast path never compares rules.
 */
#ifndef SLUICE_CLASSIFY_H
#define SLUICE_CLASSIFY_H

#include "maps.h"
#include "parse.h"

/* The address at addr (in the packet, bounds checked) as words; an IPv4
 * address fills w[0]. Packet loads may be unaligned. */
static __always_inline void addr_words(const struct sluice_pkt *p,
				       const __u8 *addr, __u32 w[4])
{
	const __u32 *a = (const __u32 *)addr;

	w[0] = a[0];
	w[1] = w[2] = w[3] = 0;
	if (p->family == 6) {
		w[1] = a[1];
		w[2] = a[2];
		w[3] = a[3];
	}
}

static __always_inline __u32 lpm_lookup(bool v6, __u32 class_id,
					const __u32 w[4])
{
	__u32 *ref;

	if (!v6) {
		struct sluice_lpm4_key k4 = {
			.prefixlen = 32 + 32,
			.class_id = class_id,
		};

		__builtin_memcpy(k4.addr, w, 4);
		ref = bpf_map_lookup_elem(&lpm_v4, &k4);
	} else {
		struct sluice_lpm6_key k6 = {
			.prefixlen = 32 + 128,
			.class_id = class_id,
		};

		__builtin_memcpy(k6.addr, w, 16);
		ref = bpf_map_lookup_elem(&lpm_v6, &k6);
	}
	return ref ? *ref : SLUICE_REF_NONE;
}

/* A trie answer through this CPU's cache: class_fam is class_id with
 * SLUICE_DST_V6 or SLUICE_DST_VLAN, so entries of different stages and
 * families never answer for each other. */
static __always_inline __u32 cached_lookup(__u32 gen, __u32 class_id,
					   __u32 class_fam, __u32 hash,
					   const __u32 w[4], bool v6)
{
	struct sluice_dst_cached *c;
	__u32 idx, ref;

	idx = (hash * 0x9e3779b1u) >> (32 - SLUICE_DST_CACHE_BITS);
	c = bpf_map_lookup_elem(&dst_cache, &idx);
	if (!c)
		return lpm_lookup(v6, class_id, w);
	/* an IPv4 entry holds zeros past addr[0] */
	if (c->gen_tag == (__u64)gen + 1 && c->class_fam == class_fam &&
	    c->addr[0] == w[0] &&
	    (!v6 || (c->addr[1] == w[1] && c->addr[2] == w[2] &&
		     c->addr[3] == w[3])))
		return c->ref;
	ref = lpm_lookup(v6, class_id, w);
	c->gen_tag = (__u64)gen + 1;
	c->class_fam = class_fam;
	c->ref = ref;
	__builtin_memcpy(c->addr, w, sizeof(c->addr));
	return ref;
}

/* Stage 2: the destination trie, cached: a host's traffic goes to its
 * own few addresses. */
static __always_inline __u32 dst_lookup(const struct sluice_pkt *p, __u32 gen,
					__u32 class_id)
{
	__u32 w[4], class_fam = class_id, hash;
	bool v6 = p->family == 6;

	addr_words(p, p->daddr, w);
	hash = class_id ^ w[0];
	if (v6) {
		class_fam |= SLUICE_DST_V6;
		hash ^= class_fam ^ w[1] ^ w[2] ^ w[3];
	}
	return cached_lookup(gen, class_id, class_fam, hash, w, v6);
}

/* Stage 1a: the VID as a 16-bit prefix in the IPv4 trie (/0 holds the
 * rules of any VLAN), cached like stage 2: a host sees few VLANs. */
static __always_inline __u32 vlan_lookup(const struct sluice_pkt *p,
					 __u32 gen, __u32 class_id)
{
	__u32 w[4] = { bpf_htonl(p->vlan << 16), 0, 0, 0 };
	__u32 class_fam = class_id | SLUICE_DST_VLAN;

	return cached_lookup(gen, class_id, class_fam, class_fam ^ w[0], w,
			     false);
}

/*
 * Returns the rule slot + 1 that judges p, or 0 for none. *watched is
 * set when a breaker times the connections to p's port
 * (SLUICE_REF_WATCH, only ever on a class): the caller hands the
 * segment to it; NULL where no breaker is to hear of it.
 */
static __always_inline __u32 classify(const struct sluice_pkt *p,
				      bool *watched)
{
	__u32 gen = set_gen, ref;
	/* 64-bit, and so compared: older verifiers (6.1) do not carry a
	 * 32-bit bound over to the 64-bit register that indexes */
	__u64 idx = p->port_key;
	__u32 w[4];

	if (gen & 1)
		idx += SLUICE_SET_SPACE;
	if (idx >= SLUICE_NUM_SETS * SLUICE_SET_SPACE)
		return SLUICE_REF_NONE;
	ref = port_table[idx];
	if (!(ref & SLUICE_REF_LPM))
		return ref;
	if (ref & SLUICE_REF_WATCH) {
		if (watched)
			*watched = true;
		ref &= ~SLUICE_REF_WATCH;
	}
	if (ref & SLUICE_REF_VLAN) {
		ref = vlan_lookup(p, gen,
				  ref & ~(SLUICE_REF_LPM | SLUICE_REF_VLAN));
		if (!(ref & SLUICE_REF_LPM))
			return ref;
	}
	ref = dst_lookup(p, gen, ref & ~SLUICE_REF_LPM);
	if (!(ref & SLUICE_REF_LPM))
		return ref;
	addr_words(p, p->saddr, w);
	ref = lpm_lookup(p->family == 6, ref & ~SLUICE_REF_LPM, w);
	/* a source-stage answer is always final */
	return ref & SLUICE_REF_LPM ? SLUICE_REF_NONE : ref;
}

#endif
