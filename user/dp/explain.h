/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `sluice explain`: which rule judges a packet and what it would do now,
 * answered by the data plane's own parse and classification (the
 * sluice_explain program, bpf/explain.h) on a frame built here.
 */
#ifndef SLUICE_EXPLAIN_H
#define SLUICE_EXPLAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "ctl.h"
#include "dataplane.h"

enum sl_explain_verdict {
	SL_EXPLAIN_PASS,	/* no rule, or the rule admits it now */
	SL_EXPLAIN_DROP,	/* the rule or the unclassified verdict drops */
	SL_EXPLAIN_SHADOW,	/* a shadow rule would drop it: passes */
};

/* One rule's view: the rule of a frame, or of one layer of its chain. */
struct sl_explain_judge {
	struct sluice_explain bpf; /* the program's answer for the rule */
	int rule;		/* index in dp->rules */
	uint64_t cached;	/* tokens the CPUs hold for the rule */
	enum sl_explain_verdict verdict;
	/* why, in a phrase: "window full", "no pacing credit", ... */
	const char *why;
};

struct sl_explain {
	struct sluice_explain bpf; /* the program's answer for the frame */
	size_t frame_len;
	int rule;		/* the deciding rule's index; -1: none */
	uint64_t cached;
	enum sl_explain_verdict verdict;
	const char *why;
	/* the rules that judge it, lowest layer first: one, or a chain's
	 * (judge[decider] decides: the first that drops, or an allow) */
	size_t n_judges, decider;
	struct sl_explain_judge judge[SLUICE_LAYERS];
};

/* Build q's frame and explain it; 0 or -errno (-EINVAL: a bad query). */
int sl_dp_explain(struct sl_dataplane *dp, const struct sl_explain_query *q,
		  struct sl_explain *out);

#endif
