// SPDX-License-Identifier: GPL-2.0
/* The adaptive protection controller (adaptive.h, docs/rules.md). */
#include <math.h>
#include <string.h>

#include "adaptive.h"

const char *const sl_adapt_signal_names[SL_ADAPT_SIGNALS] = {
	[SL_ADAPT_NONE] = "none",
	[SL_ADAPT_QUEUE] = "accept_queue",
	[SL_ADAPT_CPU_PRESSURE] = "cpu_pressure",
	[SL_ADAPT_SOFTIRQ] = "softirq",
	[SL_ADAPT_LOAD] = "load",
};

void sl_adaptive_init(struct sl_adaptive *c, const struct sl_rule *r)
{
	memset(c, 0, sizeof(*c));
	c->limit = r->count;
}

/* 1: past the threshold (kept in 1/scale), 0: between calm and past,
 * -1: calm (below SL_ADAPT_CALM of it, not watched or not available). */
static int level(double value, uint32_t threshold, double scale)
{
	double t = threshold / scale;

	if (!threshold || value < 0)
		return -1;
	if (value >= t)
		return 1;
	return value < SL_ADAPT_CALM * t ? -1 : 0;
}

/* The CPU signals: the first past its threshold, or SL_ADAPT_NONE;
 * *calm when every one is calm. */
static enum sl_adapt_signal cpu_signal(const struct sl_system *y,
				       const struct sl_sys_sample *s,
				       bool *calm)
{
	const struct {
		enum sl_adapt_signal sig;
		double value;
		uint32_t threshold;
		double scale;
	} sig[] = {
		{ SL_ADAPT_CPU_PRESSURE, s->cpu_pressure, y->cpu_pressure,
		  SL_PPM },
		{ SL_ADAPT_SOFTIRQ, s->softirq, y->softirq, SL_PPM },
		{ SL_ADAPT_LOAD, s->load, y->load, SL_SYS_MILLI },
	};
	enum sl_adapt_signal hot = SL_ADAPT_NONE;

	*calm = true;
	for (size_t i = 0; i < sizeof(sig) / sizeof(sig[0]); i++) {
		int lv = level(sig[i].value, sig[i].threshold, sig[i].scale);

		if (lv > 0 && hot == SL_ADAPT_NONE)
			hot = sig[i].sig;
		if (lv >= 0)
			*calm = false;
	}
	return hot;
}

/* The queue's part: the service rate plus the gap to the set point
 * closed over tau; HUGE_VAL while the service rate is unknown. */
static double queue_limit(struct sl_adaptive *c, const struct sl_system *y,
			  const struct sl_sys_sample *s, double dt,
			  double passed, uint64_t blocked, uint64_t overflow)
{
	const struct sl_sys_sample *p = &c->last;
	double target = (double)y->accept_queue / SL_ADAPT_QUEUE_SET_DIV, taken;

	if (p->queue >= 0) {
		/* what the listeners took: admitted, less what queued */
		taken = (passed - (double)(s->queue - p->queue) -
			 (double)overflow) / dt;
		taken = fmax(taken, 0);
		/* a tick that ends with a queue, after one (or the first):
		 * the listeners were busy, taking all they can */
		if (s->queue > 0 && (p->queue > 0 || !c->service))
			c->service = c->service
				? c->service + fmin(1, dt * 1000 /
						     SL_ADAPT_EST_MS) *
						(taken - c->service)
				: taken;
		else if (s->queue == 0 && blocked && c->service)
			c->service *= 1 + SL_ADAPT_PROBE_PER_S * dt;
	}
	if (!c->service)
		return HUGE_VAL;
	return c->service + (target - (double)s->queue) * 1000 /
				    SL_ADAPT_TAU_MS;
}

/* AIMD under CPU pressure; HUGE_VAL while no CPU signal is watched. */
static double cpu_limit(struct sl_adaptive *c, const struct sl_rule *r,
			const struct sl_sys_sample *s, double dt, double rate,
			bool hot, bool calm)
{
	const struct sl_system *y = &r->system;
	const uint64_t hold_ns = SL_ADAPT_MD_HOLD_MS * 1000000ULL;

	if (!y->cpu_pressure && !y->softirq && !y->load)
		return HUGE_VAL;
	if (!c->cpu_limit)
		c->cpu_limit = r->count;
	if (hot && (!c->cut_ns || s->now_ns - c->cut_ns >= hold_ns)) {
		c->cpu_point = fmin(c->cpu_limit, rate);
		c->cpu_limit = c->cpu_point * SL_ADAPT_MD;
		c->cut_ns = s->now_ns;
	} else if (calm) {
		c->cpu_limit += SL_ADAPT_AI_PER_S *
				(c->cpu_point ? c->cpu_point : r->count) * dt;
	}
	c->cpu_limit = fmin(fmax(c->cpu_limit, y->floor), r->count);
	return c->cpu_limit;
}

static void stop_shedding(struct sl_adaptive *c, const struct sl_rule *r,
			  uint64_t now_ns)
{
	struct sl_sys_sample last = c->last;

	sl_adaptive_init(c, r);
	c->last = last;
	c->has_last = true;
	c->since_ns = now_ns;
}

uint64_t sl_adaptive_step(struct sl_adaptive *c, const struct sl_rule *r,
			  const struct sl_sys_sample *s)
{
	const struct sl_system *y = &r->system;
	const struct sl_sys_sample *p = &c->last;
	enum sl_adapt_signal hot;
	uint64_t blocked, overflow;
	double dt, passed, lim;
	bool calm, queue_on, queue_hot;

	if (!c->has_last || s->now_ns <= p->now_ns ||
	    s->passed < p->passed || s->blocked < p->blocked) {
		/* the first sample, or counters that started over */
		c->last = *s;
		c->has_last = true;
		return c->limit;
	}
	dt = (s->now_ns - p->now_ns) / 1e9;
	passed = (double)(s->passed - p->passed);
	blocked = s->blocked - p->blocked;
	overflow = s->overflows >= p->overflows ? s->overflows - p->overflows
						: 0;

	hot = cpu_signal(y, s, &calm);
	queue_on = y->accept_queue && s->queue >= 0;
	queue_hot = queue_on &&
		    (s->queue > y->accept_queue / 2 || overflow);
	if (queue_on && (s->queue > y->accept_queue / 4 || overflow))
		calm = false;

	if (!c->shedding) {
		if (hot == SL_ADAPT_NONE && !queue_hot) {
			c->limit = r->count;
			goto out;
		}
		c->shedding = true;
		c->why = hot != SL_ADAPT_NONE ? hot : SL_ADAPT_QUEUE;
		c->since_ns = s->now_ns;
	}

	lim = r->count;
	if (queue_on)
		lim = fmin(lim, queue_limit(c, y, s, dt, passed, blocked,
					    overflow));
	lim = fmin(lim, cpu_limit(c, r, s, dt, passed / dt,
				  hot != SL_ADAPT_NONE, calm));
	lim = fmin(fmax(lim, (double)y->floor), (double)r->count);
	c->limit = (uint64_t)(lim + 0.5);

	/* calm, and nothing dropped that count would have let through */
	if (hot == SL_ADAPT_NONE && !queue_hot && calm &&
	    (!blocked || c->limit >= r->count)) {
		if (!c->calm_ns)
			c->calm_ns = s->now_ns;
		if (s->now_ns - c->calm_ns >= SL_ADAPT_CALM_MS * 1000000ULL)
			stop_shedding(c, r, s->now_ns);
	} else {
		c->calm_ns = 0;
	}
out:
	c->last = *s;
	return c->limit;
}
