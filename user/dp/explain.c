// SPDX-License-Identifier: GPL-2.0
/* `sluice explain` (explain.h): the frame, the program's run, the verdict. */
#include <errno.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "explain.h"
#include "pkt.h"
#include "sluice.skel.h"

static int build_frame(const struct sl_explain_query *q, struct pkt *p)
{
	if ((q->family != 4 && q->family != 6) || q->size > SL_EXPLAIN_MAX_SIZE ||
	    q->vlan > 4094)
		return -EINVAL;
	pkt_init(p);
	pkt_eth(p, NULL, NULL);
	if (q->vlan >= 0)
		pkt_vlan(p, ETH_P_8021Q, q->vlan);
	if (q->family == 4) {
		struct pkt_ipv4_hdr h = {};

		memcpy(&h.src, &q->src, 4);
		memcpy(&h.dst, &q->dst, 4);
		pkt_ipv4_hdr(p, &h);
	} else {
		pkt_ipv6_hdr(p, &q->src, &q->dst);
	}
	switch (q->proto) {
	case IPPROTO_TCP:
		pkt_tcp(p, q->sport, q->dport, q->syn ? PKT_SYN : PKT_ACK);
		break;
	case IPPROTO_UDP:
		pkt_udp(p, q->sport, q->dport);
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if ((q->proto == IPPROTO_ICMP) != (q->family == 4))
			return -EINVAL;
		/* an echo request */
		pkt_icmp(p, q->family == 4 ? 8 : 128, 0);
		break;
	default:
		return -EINVAL;
	}
	return pkt_finish(p, q->size);
}

static int rule_of_slot(const struct sl_dataplane *dp, uint32_t slot)
{
	for (size_t i = 0; i < dp->rules.n; i++)
		if (dp->slots[i] == slot)
			return i;
	return -1;
}

/* The verdict a packet of the rule would get now: its action, or for a
 * limit a CPU's cached tokens or the shared budget's free window and
 * pacing credit admit it; for conns, a place of count for a SYN. */
static void judge(const struct sl_rule *r, bool syn,
		  struct sl_explain_judge *out)
{
	const struct sluice_explain *e = &out->bpf;
	bool admits;

	if (r->action != SL_ACTION_LIMIT) {
		out->why = r->action == SL_ACTION_ALLOW
				   ? "an allow rule passes every packet"
				   : "a deny rule drops every packet";
		admits = r->action == SL_ACTION_ALLOW;
	} else if (r->grade == SL_GRADE_CONNS) {
		/* the frame's connection is not one the rule counts */
		admits = !syn || e->used < e->window;
		out->why = !syn ? "a segment of a connection: a conns rule "
				  "refuses only new connections (SYNs)"
			   : admits ? "count has room for a new connection"
				    : "count connections are open";
	} else if (e->source == SLUICE_EXPLAIN_SRC_UNTRACKED) {
		out->why = "a light source: no entry until the sketch counts "
			   "half its count in a second";
		admits = true;
	} else if (!e->source && out->cached >= e->cost) {
		out->why = "tokens cached on a CPU";
		admits = true;
	} else if (e->window < e->used + e->cost) {
		out->why = "the window is full";
		admits = false;
	} else if (e->credit < e->cost) {
		out->why = "no pacing credit";
		admits = false;
	} else {
		out->why = "the window and the pacing clock have room";
		admits = true;
	}
	out->verdict = admits			  ? SL_EXPLAIN_PASS
		       : r->mode == SL_MODE_SHADOW ? SL_EXPLAIN_SHADOW
						  : SL_EXPLAIN_DROP;
}

/* The judges' answers: entry 0 for one rule, entries 1 + layer for a
 * chain's (bpf/explain_xdp.h). */
static int read_judges(struct sl_dataplane *dp, struct sl_explain *out)
{
	int fd = bpf_map__fd(dp->skel->maps.explain_out);
	struct sluice_explain e;

	if (!(out->bpf.ref & SLUICE_REF_CHAIN)) {
		out->judge[out->n_judges++].bpf = out->bpf;
		return 0;
	}
	for (uint32_t key = 1; key <= SLUICE_LAYERS; key++) {
		if (bpf_map_lookup_elem(fd, &key, &e))
			return -errno;
		if (e.ref != SLUICE_REF_NONE)
			out->judge[out->n_judges++].bpf = e;
	}
	return out->n_judges ? 0 : -ESTALE;
}

int sl_dp_explain(struct sl_dataplane *dp, const struct sl_explain_query *q,
		  struct sl_explain *out)
{
	struct pkt p;
	int len = build_frame(q, &p);
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = p.buf, .repeat = 1);
	uint32_t zero = 0;
	int err;

	memset(out, 0, sizeof(*out));
	out->rule = -1;
	if (len < 0)
		return len;
	out->frame_len = len;
	o.data_size_in = len;
	if (bpf_prog_test_run_opts(
		    bpf_program__fd(dp->skel->progs.sluice_explain), &o) ||
	    bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.explain_out), &zero,
				&out->bpf))
		return -errno;
	switch (out->bpf.outcome) {
	case SLUICE_EXPLAIN_NOT_IP:
	case SLUICE_EXPLAIN_NO_RULE:
		out->verdict = SL_EXPLAIN_PASS;
		out->why = "no rule matches";
		return 0;
	case SLUICE_EXPLAIN_UNCLASSIFIED:
		out->verdict = out->bpf.verdict == XDP_PASS ? SL_EXPLAIN_PASS
							    : SL_EXPLAIN_DROP;
		out->why = "sluice cannot classify it";
		return 0;
	case SLUICE_EXPLAIN_RULE:
		break;
	default:
		return -EPROTO;
	}
	err = read_judges(dp, out);
	if (err)
		return err;
	out->decider = out->n_judges - 1;
	for (size_t i = 0, decided = 0; i < out->n_judges; i++) {
		struct sl_explain_judge *j = &out->judge[i];
		uint32_t slot = j->bpf.ref - 1;
		const struct sl_rule *r;

		j->rule = rule_of_slot(dp, slot);
		if (j->rule < 0)
			return -ESTALE;
		for (int cpu = 0; cpu < dp->n_cpus; cpu++)
			j->cached += sl_dp_rule_cpu(dp, cpu, slot)->tokens;
		r = &dp->rules.rules[j->rule];
		judge(r, q->proto == IPPROTO_TCP && q->syn, j);
		/* the walk stops at a drop, and at an allow */
		if (!decided && (j->verdict == SL_EXPLAIN_DROP ||
				 r->action == SL_ACTION_ALLOW)) {
			out->decider = i;
			decided = 1;
		}
	}
	out->rule = out->judge[out->decider].rule;
	out->cached = out->judge[out->decider].cached;
	out->verdict = out->judge[out->decider].verdict;
	out->why = out->judge[out->decider].why;
	return 0;
}
