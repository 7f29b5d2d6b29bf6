/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `sluice explain`: which rule judges a frame and what its budget holds
 * now, found by sluice_xdp's own parse and classification. The agent
 * builds the frame and runs sluice_explain on it with BPF_PROG_TEST_RUN;
 * nothing is taken, counted or remembered (a watched port's segment is
 * not handed to its breaker; the destination cache keeps the answer, as it
 * would for the real packet).
 */
#ifndef SLUICE_EXPLAIN_XDP_H
#define SLUICE_EXPLAIN_XDP_H

#include "source.h"
#include "classify.h"
#include "frag.h"

/* A conns rule: count and the connections open (per_source: the
 * source's; used 0 for a source without one), one place a SYN. */
static __always_inline void explain_conns(__u32 slot,
					  const struct sluice_rule_cfg *cfg,
					  __u64 limit, __u32 family,
					  const __u32 *saddr,
					  struct sluice_explain *out)
{
	struct sluice_conn_count *n = bpf_map_lookup_elem(&conn_rule, &slot);
	struct sluice_src_key key;

	out->count = limit;
	out->window = limit;
	out->cost = 1;
	out->credit = limit;
	if (cfg->flags & SLUICE_RULE_PER_SOURCE) {
		source_key_of(&key, slot, family, saddr, cfg);
		n = bpf_map_lookup_elem(&conn_sources, &key);
		out->source = SLUICE_EXPLAIN_SRC_TRACKED;
		if (n && n->epoch != cfg->conn_epoch)
			n = NULL;
	}
	out->used = n ? READ_ONCE(n->open) : 0;
}

/* The budget that would judge a packet of len bytes from saddr (words;
 * IPv4 in saddr[0]) under the rule in slot, read only. */
static __always_inline void explain_budget(__u32 slot, __u32 len,
					   __u32 family, const __u32 *saddr,
					   struct sluice_explain *out)
{
	struct sluice_rule_cfg *cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	__u64 *limit = bpf_map_lookup_elem(&rule_limit, &slot);
	struct sluice_budget *bud = bpf_map_lookup_elem(&rule_budget, &slot);
	struct sluice_pacer *pacer;
	struct sluice_src_key key;
	struct sluice_src_state *st;
	__u64 now, start, interval_ns, base;

	if (!cfg || !limit || !bud || !cfg->interval_ms)
		return;
	if (cfg->grade == SLUICE_GRADE_CONNS) {
		explain_conns(slot, cfg, *limit, family, saddr, out);
		return;
	}
	now = sluice_now();
	out->count = sluice_effective_limit(
		cfg,
		sluice_leased_limit(*limit,
				    bpf_map_lookup_elem(&rule_lease, &slot),
				    now),
		now);
	out->cost = cfg->grade == SLUICE_GRADE_BPS ? len : 1;
	out->window = out->count * cfg->interval_ms / 1000;
	interval_ns = interval_ns_of(cfg->interval_ms);
	start = now > interval_ns ? now - interval_ns : 0;
	pacer = &bud->pacer;
	if (cfg->flags & SLUICE_RULE_PER_SOURCE) {
		source_key_of(&key, slot, family, saddr, cfg);
		st = bpf_map_lookup_elem(&src_table, &key);
		if (!st) {
			out->source = SLUICE_EXPLAIN_SRC_UNTRACKED;
			return;
		}
		out->source = SLUICE_EXPLAIN_SRC_TRACKED;
		out->used = source_used(st, cfg->interval_ms, now);
		pacer = &st->pacer;
	} else {
		out->used = ledger_used(bud, start);
	}
	out->credit = pace_credit(READ_ONCE(pacer->tat_us), out->count,
				  cfg->interval_ms, now / NSEC_PER_USEC, &base);
}

/* A chain's layer: entry key of explain_out gets the rule ref and its
 * budget for the packet in layer_in. A global function: inlined once a
 * layer, the budget's paths took the verifier past 900,000 instructions
 * of the 1,000,000 allowed. */
__noinline int explain_layer(__u32 ref, __u32 key)
{
	struct sluice_explain *e = bpf_map_lookup_elem(&explain_out, &key);
	__u32 zero = 0;
	struct sluice_layer_in *in = bpf_map_lookup_elem(&layer_in, &zero);

	if (!e || !in)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->ref = ref;
	if (ref != SLUICE_REF_NONE) {
		e->outcome = SLUICE_EXPLAIN_RULE;
		explain_budget(ref - 1, in->len, in->family, in->saddr, e);
	}
	return 0;
}

/* A chain's layers: entry 1 + i of explain_out is layer i's winner
 * (ref 0: none) and its budget. */
static __always_inline void explain_chain(__u32 ref,
					  const struct sluice_pkt *p)
{
	__u32 zero = 0;
	struct sluice_chain *chain = chain_of(ref);
	struct sluice_layer_in *in = bpf_map_lookup_elem(&layer_in, &zero);

	if (!chain || !in)
		return;
	in->len = p->len;
	in->family = p->family;
	addr_words(p, p->saddr, in->saddr);
#pragma unroll
	for (__u32 i = 0; i < SLUICE_LAYERS; i++)
		explain_layer(chain->ref[i], 1 + i);
}

static __always_inline int explain(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct sluice_explain *out;
	struct sluice_pkt p;
	__u32 ref, zero = 0, w[4];
	enum parse_rc rc;

	out = bpf_map_lookup_elem(&explain_out, &zero);
	if (!out)
		return XDP_PASS;
	__builtin_memset(out, 0, sizeof(*out));
	rc = parse_packet(&p, data, data_end, tunnels_inner);
	if (rc == PARSE_NOT_IP) {
		out->outcome = SLUICE_EXPLAIN_NOT_IP;
		return XDP_PASS;
	}
	/* as sluice_xdp: a frame explained is never a later fragment */
	if (rc != PARSE_OK && (reason_malformed(rc) || rules_need(&p, rc))) {
		out->outcome = SLUICE_EXPLAIN_UNCLASSIFIED;
		out->reason = rc;
		out->verdict = unclassified_verdict;
		return XDP_PASS;
	}
	ref = classify(&p, NULL);
	if (ref == SLUICE_REF_NONE) {
		out->outcome = SLUICE_EXPLAIN_NO_RULE;
		return XDP_PASS;
	}
	out->outcome = SLUICE_EXPLAIN_RULE;
	out->ref = ref;
	if (!(ref & SLUICE_REF_CHAIN)) {
		addr_words(&p, p.saddr, w);
		explain_budget(ref - 1, p.len, p.family, w, out);
		return XDP_PASS;
	}
	explain_chain(ref, &p);
	return XDP_PASS;
}

#endif
