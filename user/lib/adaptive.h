/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Adaptive protection (a rule's "system", docs/rules.md): the controller
 * that turns the host's signals into the threshold of one rule, between
 * system.floor and count. A pure function of the samples it is given, so
 * tests feed it exact signals; the agent samples the host (host_signals.h)
 * every SL_ADAPT_TICK_MS and writes the threshold it returns.
 *
 * Idle, the threshold is count. A signal past its threshold starts
 * shedding:
 *  - accept queue (past half its target, or listen drops): the threshold
 *    is the rate the listeners take plus what closes the gap between the
 *    queue and its set point, target / SL_ADAPT_QUEUE_SET_DIV, within
 *    SL_ADAPT_TAU_MS: limit = service + (set - queue) / tau. With the
 *    service rate known, the queue follows q' = (set - q) / tau: it
 *    converges without overshoot for tick < tau (docs/rules.md); the set
 *    point leaves room below the target for arrivals within a tick.
 *    The service rate is what the listeners took in a tick their queue
 *    was never empty (SYNs admitted, less the queue's growth and listen
 *    overflows), smoothed over SL_ADAPT_EST_MS; while the queue is empty
 *    and the rule drops, the estimate grows by SL_ADAPT_PROBE_PER_S.
 *  - CPU pressure, softirq share, load: AIMD. Past its threshold the
 *    threshold falls to SL_ADAPT_MD of what was admitted, at most once per
 *    SL_ADAPT_MD_HOLD_MS; below SL_ADAPT_CALM of it, it grows by
 *    SL_ADAPT_AI_PER_S of that point per second.
 * Both apply: the lower wins. Shedding ends when every signal has been
 * calm for SL_ADAPT_CALM_MS while the rule dropped nothing below count.
 */
#ifndef SLUICE_ADAPTIVE_H
#define SLUICE_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "rules.h"

#ifndef SL_ADAPT_TICK_MS
#define SL_ADAPT_TICK_MS 100 /* the agent's sampling period */
#endif
#ifndef SL_ADAPT_QUEUE_SET_DIV
#define SL_ADAPT_QUEUE_SET_DIV 3 /* the queue is held at target / 3 */
#endif
#ifndef SL_ADAPT_TAU_MS
#define SL_ADAPT_TAU_MS 500 /* the queue's gap is closed over this */
#endif
#ifndef SL_ADAPT_EST_MS
#define SL_ADAPT_EST_MS 300 /* the service rate's smoothing */
#endif
#ifndef SL_ADAPT_PROBE_PER_S
#define SL_ADAPT_PROBE_PER_S 0.5 /* service estimate growth, queue empty */
#endif
#ifndef SL_ADAPT_MD
#define SL_ADAPT_MD 0.7 /* decrease under CPU pressure */
#endif
#ifndef SL_ADAPT_MD_HOLD_MS
#define SL_ADAPT_MD_HOLD_MS 500 /* between two decreases */
#endif
#ifndef SL_ADAPT_AI_PER_S
#define SL_ADAPT_AI_PER_S 0.1 /* increase per second, of the last cut's point */
#endif
#ifndef SL_ADAPT_CALM
#define SL_ADAPT_CALM 0.9 /* a CPU signal below this share of its threshold */
#endif
#ifndef SL_ADAPT_CALM_MS
#define SL_ADAPT_CALM_MS 1000 /* calm this long: shedding ends */
#endif

/* What the host and the rule showed at one instant. */
struct sl_sys_sample {
	uint64_t now_ns;
	/* shares of time (0..1) and the load per CPU; < 0: not available */
	double cpu_pressure;
	double softirq;
	double load;
	/* the accept queues of the rule's listeners, summed; -1: none */
	int64_t queue;
	uint64_t overflows; /* the host's listen overflows so far */
	uint64_t passed;    /* the rule's admitted units so far */
	uint64_t blocked;   /* the rule's dropped units so far */
};

/* The signals, for what started shedding (status, logs). */
enum sl_adapt_signal {
	SL_ADAPT_NONE = 0,
	SL_ADAPT_QUEUE,
	SL_ADAPT_CPU_PRESSURE,
	SL_ADAPT_SOFTIRQ,
	SL_ADAPT_LOAD,
	SL_ADAPT_SIGNALS,
};

extern const char *const sl_adapt_signal_names[SL_ADAPT_SIGNALS];

struct sl_adaptive {
	bool shedding;
	enum sl_adapt_signal why; /* the signal that started it */
	uint64_t since_ns;	  /* of the last start or end */
	uint64_t limit;		  /* the threshold to put in force */
	double service;		  /* the listeners' rate /s; 0: unknown */
	double cpu_limit;	  /* AIMD's threshold; 0: none */
	double cpu_point;	  /* what was admitted at the last cut */
	uint64_t cut_ns;	  /* the last cut */
	uint64_t calm_ns;	  /* every signal calm since; 0: not calm */
	struct sl_sys_sample last;
	bool has_last;
};

/* A rule's controller, idle: its threshold is count. */
void sl_adaptive_init(struct sl_adaptive *c, const struct sl_rule *r);

/* One tick: the threshold to put in force after sample s. */
uint64_t sl_adaptive_step(struct sl_adaptive *c, const struct sl_rule *r,
			  const struct sl_sys_sample *s);

#endif
