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

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct sluice_rule_cpu *rc;
	struct sluice_rule_cfg *cfg;
	struct sluice_pkt p;
	__u32 ref, slot, cpu_slot;
	__u64 cost;
	bool passed;
	int rc_parse, verdict;

	rc_parse = parse_packet(&p, data, data_end);
	if (rc_parse == PARSE_NOT_IP) {
		host_stat(SLUICE_ST_UNMATCHED);
		return XDP_PASS;
	}
	if (rc_parse == SLUICE_ST_FRAGMENTS) {
		host_stat(SLUICE_ST_FRAGMENTS);
	} else if (rc_parse != PARSE_OK) {
		host_stat(rc_parse);
		return malformed_verdict;
	}

	ref = classify(&p, ctx);
	if (ref == SLUICE_REF_NONE) {
		host_stat(SLUICE_ST_UNMATCHED);
		return XDP_PASS;
	}
	slot = ref - 1;
	cpu_slot = sluice_cpu_slot(bpf_get_smp_processor_id(), slot);
	rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	if (rc) {
		/* one byte of the line judge_fast() reads anyway */
		if (rc->has_breaker &&
		    breaker_asked(rc->has_breaker, p.port_key)) {
			verdict = breaker_request(ctx, slot);
			if (verdict == XDP_TX)
				return breaker_rst(ctx);
			if (verdict >= 0)
				return verdict;
		}
		verdict = judge_fast(rc, p.len);
		if (verdict >= 0)
			return verdict;
	}
	cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	if (!cfg || !rc || !cfg->interval_ms) {
		host_stat(SLUICE_ST_NO_RULE_CFG);
		return XDP_PASS;
	}

	cost = cfg->grade == SLUICE_GRADE_BPS ? p.len : 1;
	/* a flood's drops are held: counted in bulk (flush_held()) */
	if (cfg->flags & SLUICE_RULE_PER_SOURCE) {
		enum admit_result res = admit_source(slot, &p, rc, cfg, cost);

		if (res == ADMIT_HELD)
			goto refused;
		passed = res == ADMIT_PASSED;
	} else if (rc->tokens < cost &&
		   hold_refused(rc, cfg, &rc->refusal, cfg->slot_ns, p.len)) {
		goto refused;
	} else {
		passed = admit_rule(slot, rc, cfg, cost);
	}
	account(rc, cfg, p.len, passed);
	if (passed)
		return XDP_PASS;
refused:
	return cfg->flags & SLUICE_RULE_SHADOW ? XDP_PASS : XDP_DROP;
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
