/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fragmented datagrams: the verdict of a datagram's first fragment, the
 * only one with an L4 header, judges its later fragments (after Cilium's
 * bpf/lib/ipv4.h). One frag_table entry per datagram, written by its
 * first fragment; a later fragment whose datagram has no entry (its
 * first came after it, was never seen or was evicted) is unclassified.
 * And what the rules in force need of a packet (needs_l4): a packet that
 * lacks only what no rule needs is classified without it.
 */
#ifndef SLUICE_FRAG_H
#define SLUICE_FRAG_H

#include "maps.h"
#include "parse.h"
#include "classify.h"
#include "admit.h"

/* This CPU's frag_key_buf: off the stack, which 6.1's limit leaves no
 * room on (docs/architecture.md). */
static __always_inline struct sluice_frag_buf *frag_buf(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&frag_key_buf, &zero);
}

/* The key of a fragment's datagram, built right after the parse, while
 * its address pointers are known to the verifier. */
static __always_inline void frag_key(const struct sluice_pkt *p)
{
	struct sluice_frag_buf *b = frag_buf();

	if (!b)
		return;
	addr_words(p, p->saddr, b->key.saddr);
	addr_words(p, p->daddr, b->key.daddr);
	b->key.id = p->frag_id;
	b->key.family = p->family;
	b->key.proto = p->family == 4 ? p->frag_proto : 0;
	b->key.vlan = p->vlan;
}

/* Remember the rule of a first fragment for the rest of its datagram. */
static __always_inline void frag_note(__u32 ref)
{
	struct sluice_frag_buf *b = frag_buf();

	if (!b)
		return;
	b->val.first_ns = sluice_now_coarse();
	b->val.ref = ref;
	bpf_map_update_elem(&frag_table, &b->key, &b->val, BPF_ANY);
}

/* A later fragment's datagram, NULL when none is known (or only an
 * older one of the same id, past the kernel's reassembly timeout). */
static __always_inline const struct sluice_frag *frag_find(void)
{
	struct sluice_frag_buf *b = frag_buf();
	struct sluice_frag *f;

	if (!b)
		return NULL;
	f = bpf_map_lookup_elem(&frag_table, &b->key);
	if (!f || sluice_now_coarse() - f->first_ns > SLUICE_FRAG_TTL_NS)
		return NULL;
	return f;
}

static __always_inline bool rule_bps(__u32 ref)
{
	__u32 slot = ref - 1;
	struct sluice_rule_cfg *cfg;

	if (ref == SLUICE_REF_NONE)
		return false;
	cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	return cfg && cfg->grade == SLUICE_GRADE_BPS;
}

/* A later fragment of an admitted datagram costs a bps rule its bytes
 * (of a chain: each bps layer); for pps and cps the datagram was one
 * packet, counted at its first. */
static __always_inline bool frag_charged(__u32 ref)
{
	struct sluice_chain *chain;

	if (!(ref & SLUICE_REF_CHAIN))
		return rule_bps(ref);
	chain = chain_of(ref);
	if (!chain)
		return false;
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++)
		if (rule_bps(chain->ref[i]))
			return true;
	return false;
}

/*
 * Whether the rules in force need what p lacks for why (an
 * unclassified code): a port (or the SYN flag) of its protocol, or the
 * protocol itself. If not, p's port-0 key (the parser's, for its
 * protocol or "other") classifies it as any port or protocol would.
 */
static __always_inline bool rules_need(const struct sluice_pkt *p, __u32 why)
{
	__u32 key = p->port_key, need = SLUICE_NEED_PROTO;

	if (why != SLUICE_ST_IP6_CHAIN) {
		if (p->family == 6)
			key -= SLUICE_FAM_SPACE;
		if (key == SLUICE_SLOT_TCP * 65536)
			need = SLUICE_NEED_TCP_PORT;
		else if (key == SLUICE_SLOT_UDP * 65536)
			need = SLUICE_NEED_UDP_PORT;
		else
			return false;
	}
	if (p->family == 6)
		need <<= SLUICE_NEED_V6_SHIFT;
	return needs_l4[set_gen & 1] & need;
}

#endif
