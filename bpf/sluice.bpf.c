// SPDX-License-Identifier: GPL-2.0
/*
 * sluice: per-rule admission of packets at XDP. One program instance and
 * one set of maps serve every interface it is attached to, so a rule's
 * limit holds for the host.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef READ_ONCE
#define READ_ONCE(x)	 (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))
#endif

#include "sluice_abi.h"
#include "maps.h"
#include "parse.h"
#include "classify.h"
#include "admit.h"
#include "source.h"
#include "breaker.h"
#include "conns.h"
#include "frag.h"
#include "explain_xdp.h"

/*
 * rule_cpu's element of a CPU's slot, sluice_cpu_slot() with the class as
 * an immediate: the verifier knows rule_cpu_shift (frozen .rodata) and
 * keeps only its case, so the address does not wait on a load of it
 * (bench_xdp: about 1 ns of the drop path's 9). The asm keeps clang from
 * folding the cases back into a shift by rule_cpu_shift.
 */
#define RULE_CPU_CASE(s)                                                       \
	case s:                                                                \
		asm volatile("%0 <<= " #s : "+r"(idx));                        \
		return idx + slot

static __always_inline __u32 rule_cpu_index(__u32 cpu, __u32 slot)
{
	__u64 idx = cpu;

	switch (rule_cpu_shift) {
	RULE_CPU_CASE(6);
	RULE_CPU_CASE(7);
	RULE_CPU_CASE(8);
	RULE_CPU_CASE(9);
	RULE_CPU_CASE(10);
	RULE_CPU_CASE(11);
	RULE_CPU_CASE(12);
	RULE_CPU_CASE(13);
	}
	return sluice_cpu_slot(cpu, slot, rule_cpu_shift);
}

/*
 * A packet the rule in slot refused: every SLUICE_DROP_SAMPLE_EVERY-th of
 * the rule's on this CPU (counted here and in judge_fast()), at most one a
 * tick, goes into drop_samples for `sluice drops`, standing for every
 * packet this CPU refused under the rule since its last sample. Counting
 * packets, not time, keeps the sample from following the tick (the first
 * refused packet after one is a paced sender's as often as not). A full
 * ring loses the sample, not its weight: the next one carries it.
 * A global function, verified once on its own, and the frame parsed
 * again here for its source: inlined, it multiplied the states of the
 * admission paths before it past the verifier's limit.
 */
__attribute__((noinline)) int count_drop(struct xdp_md *ctx, __u32 slot)
{
	__u32 idx = rule_cpu_index(bpf_get_smp_processor_id(), slot);
	struct sluice_rule_cpu *rc = bpf_map_lookup_elem(&rule_cpu, &idx);
	struct sluice_drop_sampler *ds;
	struct sluice_drop_sample *s;
	struct sluice_pkt p;
	__u64 refused, weight;
	enum parse_rc rc_parse;
	__u32 tick;

	if (!rc)
		return 0;
	if (rc->drop_countdown > 1) {
		rc->drop_countdown--;
		return 0;
	}
	rc->drop_countdown = SLUICE_DROP_SAMPLE_EVERY;
	ds = bpf_map_lookup_elem(&drop_sample_state, &slot);
	tick = sluice_tick();
	if (!ds || ds->tick == tick)
		return 0;
	/* a refused packet parsed whole, or is a later fragment charged to
	 * its datagram's rule: its addresses were read */
	rc_parse = parse_packet(&p, (void *)(long)ctx->data,
				(void *)(long)ctx->data_end, tunnels_inner);
	if (rc_parse != PARSE_OK && rc_parse != PARSE_LATER_FRAGMENT)
		return 0;
	ds->tick = tick;
	s = bpf_ringbuf_reserve(&drop_samples, sizeof(*s), 0);
	if (!s)
		return 0;
	refused = rc->blocked_pkts + rc->held_pkts;
	/* a slot reused by a new rule starts its counters again */
	weight = refused >= ds->sampled ? refused - ds->sampled : refused;
	ds->sampled = refused;
	s->slot = slot;
	s->weight = weight > 0xffffffffULL ? 0xffffffffU : weight;
	s->family = p.family;
	__builtin_memset(s->pad, 0, sizeof(s->pad));
	__builtin_memset(s->saddr, 0, sizeof(s->saddr));
	if (p.family == 4)
		__builtin_memcpy(s->saddr, p.saddr, 4);
	else
		__builtin_memcpy(s->saddr, p.saddr, 16);
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	return 0;
}

/* breaker_rst() for a layer: a global function, so that the rewrite's
 * frame is not on judge_layer()'s, which 6.1's limit of 512 bytes along
 * a call chain has no room for. */
__noinline int breaker_rst_global(struct xdp_md *ctx)
{
	return breaker_rst(ctx);
}

/* In a layer, judge_slot()'s flags beside the verdict: the packet was
 * refused (count_drop() it), or an allow rule passed it (no later
 * layer). */
#define JUDGE_VERDICT	0xff
#define JUDGE_REFUSED	0x100
#define JUDGE_ALLOWED	0x200
#define JUDGE_SOURCE	0x400	/* a layer's per_source admission is due */
#define JUDGE_CONNS	0x800	/* a layer's conns admission is due */
#define JUDGE_RST	0x1000	/* refused by a RST (conns, a breaker) */

/* Whether a conns rule's refused SYN is dropped (or, shadow, passed)
 * rather than answered by a RST. */
static __always_inline bool conns_refusal_dropped(const struct sluice_rule_cfg *cfg)
{
	return cfg->flags & (SLUICE_RULE_SHADOW | SLUICE_RULE_CONNS_DROP);
}

/* The verdict of a rule that has judged: passed, or refused (sampled for
 * `sluice drops` here, or in a layer by judge_chain() on JUDGE_REFUSED). */
static __always_inline int judged(struct xdp_md *ctx, __u32 slot,
				  struct sluice_rule_cpu *rc,
				  const struct sluice_rule_cfg *cfg, __u32 len,
				  enum admit_result res, bool layer)
{
	if (res != ADMIT_HELD)
		account(rc, cfg, len, res == ADMIT_PASSED);
	if (res == ADMIT_PASSED)
		return XDP_PASS;
	if (layer)
		return (cfg->flags & SLUICE_RULE_SHADOW ? XDP_PASS : XDP_DROP) |
		       JUDGE_REFUSED;
	/* the countdown inline, as judge_fast() keeps it: a call only for
	 * the sample */
	if (rc->drop_countdown > 1)
		rc->drop_countdown--;
	else
		count_drop(ctx, slot);
	return cfg->flags & SLUICE_RULE_SHADOW ? XDP_PASS : XDP_DROP;
}

/* judge_conns() and the close it asks for; its answer (CONNS_*). */
static __always_inline int conns_judged(struct xdp_md *ctx, __u32 slot,
					__u32 port_key)
{
	int r = judge_conns(ctx, slot, port_key);

	if (r & CONNS_CLOSE)
		conn_close_frame(ctx);
	return r;
}

/* A conns rule's verdict, for one rule: a SYN over count is answered
 * by a RST unless the rule drops it (or is in shadow mode). */
static __always_inline int judge_conns_slot(struct xdp_md *ctx, __u32 slot,
					    __u32 port_key,
					    struct sluice_rule_cpu *rc,
					    const struct sluice_rule_cfg *cfg,
					    __u32 len)
{
	enum admit_result res = conns_judged(ctx, slot, port_key) & CONNS_PASS
					? ADMIT_PASSED
					: ADMIT_BLOCKED;
	int verdict = judged(ctx, slot, rc, cfg, len, res, false);

	if (res == ADMIT_PASSED || conns_refusal_dropped(cfg))
		return verdict;
	return breaker_rst(ctx);
}

/* In a layer, a pass from judge_fast(): an allow rule's ends the walk. */
static __always_inline int layer_allowed(__u32 slot)
{
	struct sluice_rule_cfg *cfg = bpf_map_lookup_elem(&rule_cfg, &slot);

	return cfg && (cfg->flags & SLUICE_RULE_ALLOW) ? JUDGE_ALLOWED : 0;
}

/*
 * The verdict of the rule in slot for a packet of len bytes: from p as
 * parsed, or in a layer from in (one of them NULL, a constant once
 * inlined).
 */
static __always_inline int judge_slot(struct xdp_md *ctx, __u32 slot,
				      const struct sluice_pkt *p,
				      struct sluice_layer_in *in)
{
	__u32 len = p ? p->len : in->len;
	__u32 port_key = p ? p->port_key : in->port_key;
	struct sluice_rule_cpu *rc;
	struct sluice_rule_cfg *cfg;
	enum admit_result res;
	__u32 cpu_slot;
	__u64 cost;
	int verdict;

	cpu_slot = rule_cpu_index(bpf_get_smp_processor_id(), slot);
	rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	if (rc) {
		/* one byte of the line judge_fast() reads anyway */
		if (rc->has_breaker &&
		    breaker_asked(rc->has_breaker, port_key)) {
			verdict = breaker_request(ctx, slot);
			/* in a layer the chain answers, after it gave back
			 * the places earlier layers took for the SYN */
			if (verdict == XDP_TX)
				return p ? breaker_rst(ctx)
					 : XDP_DROP | JUDGE_RST;
			if (verdict >= 0)
				return verdict;
		}
		verdict = judge_fast(rc, len);
		if (verdict == XDP_PASS && !p)
			return verdict | layer_allowed(slot);
		if (verdict >= 0)
			return verdict;
	}
	cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	if (!cfg || !rc || !cfg->interval_ms) {
		host_stat(SLUICE_ST_NO_RULE_CFG);
		return XDP_PASS;
	}

	/* in a layer, sluice_xdp calls judge_conns(): 6.1's 512 bytes
	 * along a call chain have no room for it under judge_layer() */
	if (cfg->grade == SLUICE_GRADE_CONNS)
		return p ? judge_conns_slot(ctx, slot, port_key, rc, cfg, len)
			 : JUDGE_CONNS;
	cost = cfg->grade == SLUICE_GRADE_BPS ? len : 1;
	/* a flood's drops are held: counted in bulk (flush_held()) */
	if (cfg->flags & (SLUICE_RULE_ALLOW | SLUICE_RULE_DENY)) {
		if (admit_action(rc, cfg))
			return judged(ctx, slot, rc, cfg, len, ADMIT_PASSED,
				      !p) |
			       (p ? 0 : JUDGE_ALLOWED);
		res = ADMIT_BLOCKED;
	} else if (cfg->flags & SLUICE_RULE_PER_SOURCE) {
		if (!p) {
			source_key_of(&in->key, slot, in->family, in->saddr,
				      cfg);
			in->cost = cost;
			return JUDGE_SOURCE;
		}
		res = admit_source(slot, p, rc, cfg, cost);
	} else if (rc->tokens < cost &&
		   hold_refused(rc, cfg, &rc->refusal, len)) {
		res = ADMIT_HELD;
	} else {
		res = admit_rule(slot, rc, cfg, cost) ? ADMIT_PASSED
						      : ADMIT_BLOCKED;
	}
	return judged(ctx, slot, rc, cfg, len, res, !p);
}

/*
 * One layer of a chain: a global function, verified once on its own
 * (inlined once per layer, the judge's paths took sluice_xdp past what
 * the verifier finishes in minutes). Its packet is this CPU's layer_in.
 */
__noinline int judge_layer(struct xdp_md *ctx, __u32 ref)
{
	__u32 zero = 0, slot = ref - 1;
	struct sluice_layer_in *in = bpf_map_lookup_elem(&layer_in, &zero);

	if (!in || ref == SLUICE_REF_NONE)
		return XDP_PASS;
	if (in->later && !frag_charged(ref))
		return XDP_PASS;
	return judge_slot(ctx, slot, NULL, in);
}

/* A layer's per_source or conns rule after sluice_xdp admitted the
 * packet (res). */
__noinline int judge_layer_after(__u32 ref, int res)
{
	__u32 zero = 0, slot = ref - 1, cpu_slot;
	struct sluice_layer_in *in = bpf_map_lookup_elem(&layer_in, &zero);
	struct sluice_rule_cfg *cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	struct sluice_rule_cpu *rc;
	int verdict;

	cpu_slot = rule_cpu_index(bpf_get_smp_processor_id(), slot);
	rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	if (!in || !cfg || !rc)
		return XDP_PASS;
	verdict = judged(NULL, slot, rc, cfg, in->len, res, true);
	if (res == ADMIT_BLOCKED && cfg->grade == SLUICE_GRADE_CONNS &&
	    !conns_refusal_dropped(cfg))
		verdict |= JUDGE_RST;
	return verdict;
}

/*
 * The winners of a chain's layers, in order: a refusal stops the walk
 * (an earlier layer keeps what it took: docs/rules.md "layer"), as
 * does an allow rule; a shadow layer's would-be drop does not.
 */
static __always_inline int judge_chain(struct xdp_md *ctx,
				       const struct sluice_pkt *p, __u32 ref,
				       bool later)
{
	__u32 zero = 0;
	struct sluice_layer_in *in = bpf_map_lookup_elem(&layer_in, &zero);
	struct sluice_chain *chain = chain_of(ref);
	bool took = false;
	int verdict, c;

	if (!in || !chain) {
		host_stat(SLUICE_ST_NO_RULE_CFG);
		return XDP_PASS;
	}
	in->len = p->len;
	in->port_key = p->port_key;
	in->family = p->family;
	in->later = later;
	addr_words(p, p->saddr, in->saddr);
#pragma unroll
	for (int i = 0; i < SLUICE_LAYERS; i++) {
		__u32 r = chain->ref[i];

		if (r == SLUICE_REF_NONE)
			continue;
		verdict = judge_layer(ctx, r);
		if (verdict & JUDGE_SOURCE) {
			__u64 w[3];

			__builtin_memcpy(w, &in->key, sizeof(w));
			verdict = judge_layer_after(
			    r, admit_source_global(w[0], w[1], w[2], in->len,
						   in->cost));
		} else if (verdict & JUDGE_CONNS) {
			c = conns_judged(ctx, r - 1, in->port_key);
			took |= c & CONNS_TOOK;
			verdict = judge_layer_after(
			    r, c & CONNS_PASS ? ADMIT_PASSED : ADMIT_BLOCKED);
		}
		if (verdict & JUDGE_REFUSED)
			count_drop(ctx, r - 1);
		/* a SYN that will not open gives an earlier conns layer
		 * its place back now, not at the handshake's timeout */
		if (took && (verdict & JUDGE_VERDICT) != XDP_PASS)
			conn_close_frame(ctx);
		if (verdict & JUDGE_RST)
			return breaker_rst_global(ctx);
		if ((verdict & JUDGE_VERDICT) != XDP_PASS ||
		    (verdict & JUDGE_ALLOWED))
			return verdict & JUDGE_VERDICT;
	}
	return XDP_PASS;
}

/*
 * The verdict of the rule or chain ref names for p (none: pass), for a
 * packet classified or a later fragment charged to its datagram's.
 */
static __always_inline int judge(struct xdp_md *ctx,
				 const struct sluice_pkt *p, __u32 ref,
				 bool later)
{
	if (ref == SLUICE_REF_NONE) {
		host_stat(SLUICE_ST_UNMATCHED);
		return XDP_PASS;
	}
	/* unlikely: laid out off the path of one rule, which it slowed by
	 * 2 ns (bench_xdp) */
	if (__builtin_expect(ref & SLUICE_REF_CHAIN, 0))
		return judge_chain(ctx, p, ref, later);
	return judge_slot(ctx, ref - 1, p, NULL);
}

/*
 * A frame's verdict. frags: the frame may come in several buffers (a
 * multi-buffer program), whose headers are in the first, which is all
 * data_end reaches: its length is then the helper's.
 */
static __always_inline int judge_frame(struct xdp_md *ctx, bool frags)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	const struct sluice_frag *f;
	bool watched = false;
	struct sluice_pkt p;
	enum parse_rc rc_parse;
	__u32 ref, why;

	rc_parse = parse_packet(&p, data, data_end, tunnels_inner);
	if (frags)
		p.len = bpf_xdp_get_buff_len(ctx);
	if (rc_parse == PARSE_NOT_IP) {
		host_stat(SLUICE_ST_UNMATCHED);
		return XDP_PASS;
	}
	if (p.frag)
		frag_key(&p);
	why = rc_parse;
	if (rc_parse == PARSE_LATER_FRAGMENT) {
		host_stat(SLUICE_ST_FRAGMENTS);
		f = frag_find();
		if (f && !frag_charged(f->ref))
			return XDP_PASS;
		if (f) {
			ref = f->ref;
			goto charge;
		}
		why = SLUICE_ST_FRAG_ORPHAN;
	}
	if (rc_parse != PARSE_OK &&
	    (reason_malformed(why) || rules_need(&p, why))) {
		host_stat(why);
		return unclassified_verdict;
	}
	ref = classify(&p, &watched);
	if (watched)
		breaker_segment(ctx);
	/* before the verdict: a branch after judge() would double the
	 * verifier's walk of it */
	if (p.frag == SLUICE_FRAG_FIRST)
		frag_note(ref);
charge:
	return judge(ctx, &p, ref, rc_parse == PARSE_LATER_FRAGMENT);
}

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx)
{
	return judge_frame(ctx, false);
}

/* The same for an interface whose driver refuses sluice_xdp because its
 * frames may not fit one buffer (jumbo frames: an MTU above about a
 * page, or header split). A program of its own, loaded (5.18 and later)
 * only for such an interface: a second copy to verify makes each load
 * longer. */
SEC("xdp.frags")
int sluice_xdp_frags(struct xdp_md *ctx)
{
	return judge_frame(ctx, true);
}

/* What sluice_xdp would make of a frame, for `sluice explain`: run by
 * the agent with BPF_PROG_TEST_RUN, never attached. */
SEC("xdp")
int sluice_explain(struct xdp_md *ctx)
{
	return explain(ctx);
}

/* The answers to the requests of rules with a breaker, on egress (tc);
 * attached only while such a rule is in force. */
SEC("tc")
int sluice_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct sluice_conn_key k = {};
	int kind = -1;
	__u32 ref;

	if ((void *)(eth + 1) > data_end)
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		ref = answer_ref(eth + 1, data_end, 4, &kind, &k);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		ref = answer_ref(eth + 1, data_end, 6, &kind, &k);
	else
		return TC_ACT_OK;
	conns_egress(skb);
	ref = breaker_ref(ref);
	if (kind >= SEG_DATA)
		breaker_response(&k, kind == SEG_DATA);
	else if (ref != SLUICE_REF_NONE)
		breaker_answer(ref - 1, kind, &k);
	return TC_ACT_OK;
}

/* Forget the connections of conns rules that went silent, and sources
 * left without one: run by the agent every second (BPF_PROG_TEST_RUN),
 * never attached. */
SEC("xdp")
int sluice_conns_sweep(struct xdp_md *ctx)
{
	conns_sweep();
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
