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
#include "breaker.h"
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

/*
 * The verdict of the rule ref names for p (none: pass), for a packet
 * classified or a later fragment charged to its datagram's rule.
 */
static __always_inline int judge(struct xdp_md *ctx,
				 const struct sluice_pkt *p, __u32 ref)
{
	struct sluice_rule_cpu *rc;
	struct sluice_rule_cfg *cfg;
	__u32 slot, cpu_slot;
	__u64 cost;
	bool passed;
	int verdict;

	if (ref == SLUICE_REF_NONE) {
		host_stat(SLUICE_ST_UNMATCHED);
		return XDP_PASS;
	}
	slot = ref - 1;
	cpu_slot = rule_cpu_index(bpf_get_smp_processor_id(), slot);
	rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	if (rc) {
		/* one byte of the line judge_fast() reads anyway */
		if (rc->has_breaker &&
		    breaker_asked(rc->has_breaker, p->port_key)) {
			verdict = breaker_request(ctx, slot);
			if (verdict == XDP_TX)
				return breaker_rst(ctx);
			if (verdict >= 0)
				return verdict;
		}
		verdict = judge_fast(rc, p->len);
		if (verdict >= 0)
			return verdict;
	}
	cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	if (!cfg || !rc || !cfg->interval_ms) {
		host_stat(SLUICE_ST_NO_RULE_CFG);
		return XDP_PASS;
	}

	cost = cfg->grade == SLUICE_GRADE_BPS ? p->len : 1;
	/* a flood's drops are held: counted in bulk (flush_held()) */
	if (cfg->flags & (SLUICE_RULE_ALLOW | SLUICE_RULE_DENY)) {
		passed = admit_action(rc, cfg);
	} else if (cfg->flags & SLUICE_RULE_PER_SOURCE) {
		enum admit_result res = admit_source(slot, p, rc, cfg, cost);

		if (res == ADMIT_HELD)
			goto refused;
		passed = res == ADMIT_PASSED;
	} else if (rc->tokens < cost &&
		   hold_refused(rc, cfg, &rc->refusal, p->len)) {
		goto refused;
	} else {
		passed = admit_rule(slot, rc, cfg, cost);
	}
	account(rc, cfg, p->len, passed);
	if (passed)
		return XDP_PASS;
refused:
	count_drop(ctx, slot);
	return cfg->flags & SLUICE_RULE_SHADOW ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	const struct sluice_frag *f;
	bool watched = false;
	struct sluice_pkt p;
	enum parse_rc rc_parse;
	__u32 ref, why;

	rc_parse = parse_packet(&p, data, data_end, tunnels_inner);
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
	return judge(ctx, &p, ref);
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
	if (kind >= SEG_DATA)
		breaker_response(&k, kind == SEG_DATA);
	else if (ref != SLUICE_REF_NONE)
		breaker_answer(ref - 1, kind, &k);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
