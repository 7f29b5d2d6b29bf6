// SPDX-License-Identifier: GPL-2.0
/* Adaptive protection in the agent (guard.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adaptive.h"
#include "guard.h"
#include "host_signals.h"
#include "log.h"
#include "sluice_abi.h"
#include "stats.h"
#include "util.h"

struct entry {
	uint32_t slot;
	size_t index;	     /* in dp->rules under gen */
	struct sl_rule rule; /* as written in the rule file */
	struct sl_adaptive ctl;
	uint64_t written;	   /* the threshold last written; 0: none */
	struct sl_sys_sample last; /* for status */
	uint64_t backlog;
	uint64_t passed, blocked;  /* read under dp_lock for the step */
	uint64_t sheds;
};

struct sl_guard {
	struct sl_dataplane *dp;
	pthread_mutex_t *dp_lock;
	pthread_mutex_t lock; /* the entries, between the thread and status */
	pthread_t thread;
	bool stop;
	struct sl_host_reader host;
	int host_err; /* the last reading's error, logged once */
	uint64_t gen; /* dp->rules_gen of the entries */
	bool built;
	struct entry *e;
	size_t n;
	uint8_t shedding[SLUICE_MAX_RULE_SLOTS];
};

/* The entries for the rules in force; controllers of slots that stay
 * keep their state. Under dp_lock. */
static void rebuild(struct sl_guard *g)
{
	const struct sl_dataplane *dp = g->dp;
	struct entry *next;
	size_t n = 0;

	for (size_t i = 0; i < dp->rules.n; i++)
		n += dp->rules.rules[i].system.enabled;
	next = calloc(n ? n : 1, sizeof(*next));
	if (!next)
		return; /* the old ones go on; rebuilt next tick */
	n = 0;
	for (size_t i = 0; i < dp->rules.n; i++) {
		const struct sl_rule *r = &dp->rules.rules[i];
		struct entry *e = &next[n];
		size_t k;

		if (!r->system.enabled)
			continue;
		for (k = 0; k < g->n && g->e[k].slot != dp->slots[i]; k++)
			;
		if (k < g->n) {
			*e = g->e[k];
		} else {
			/* a fresh slot holds count, as the file says */
			e->slot = dp->slots[i];
			memcpy(e->rule.name, r->name, sizeof(r->name));
			e->rule.count = r->count;
			e->rule.grade = r->grade;
			e->rule.dport_lo = r->dport_lo;
			e->rule.dport_hi = r->dport_hi;
			e->rule.system = r->system;
			sl_adaptive_init(&e->ctl, &e->rule);
			e->written = r->count;
		}
		e->index = i;
		n++;
	}
	pthread_mutex_lock(&g->lock);
	for (size_t k = 0; k < g->n; k++)
		__atomic_store_n(&g->shedding[g->e[k].slot], 0,
				 __ATOMIC_RELAXED);
	free(g->e);
	g->e = next;
	g->n = n;
	pthread_mutex_unlock(&g->lock);
	g->gen = dp->rules_gen;
	g->built = true;
}

/* Each rule's counters, in its grade's unit. Under dp_lock. */
static void read_counters(struct sl_guard *g)
{
	for (size_t k = 0; k < g->n; k++) {
		struct entry *e = &g->e[k];
		struct sl_rule_stats st;

		if (sl_dp_rule_stats(g->dp, e->index, &st))
			continue;
		e->passed = e->rule.grade == SL_GRADE_BPS ? st.passed_bytes
							  : st.passed_pkts;
		e->blocked = e->rule.grade == SL_GRADE_BPS ? st.blocked_bytes
							   : st.blocked_pkts;
	}
}

static void log_change(const struct entry *e, bool was)
{
	const struct sl_adaptive *c = &e->ctl;

	if (c->shedding && !was)
		pr_warn("system %s: shedding, %s past its threshold: "
			"threshold %llu of count %llu",
			e->rule.name, sl_adapt_signal_names[c->why],
			(unsigned long long)c->limit,
			(unsigned long long)e->rule.count);
	else if (!c->shedding && was)
		pr_info("system %s: calm again, threshold back at count %llu",
			e->rule.name, (unsigned long long)e->rule.count);
}

/* Step every controller on one sample of the host. */
static void step_all(struct sl_guard *g, uint64_t now)
{
	struct sl_sys_sample host;
	int err = sl_host_read(&g->host, now, &host);

	if (err && err != g->host_err)
		pr_warn("system rules: reading the host's signals: %s; those "
			"it lacks are not watched", strerror(-err));
	g->host_err = err;
	pthread_mutex_lock(&g->lock);
	for (size_t k = 0; k < g->n; k++) {
		struct entry *e = &g->e[k];
		struct sl_sys_sample s = host;
		bool was = e->ctl.shedding;

		s.queue = -1;
		if (e->rule.system.accept_queue)
			s.queue = sl_listen_queue(&g->host, e->rule.dport_lo,
						  e->rule.dport_hi,
						  &e->backlog);
		s.passed = e->passed;
		s.blocked = e->blocked;
		sl_adaptive_step(&e->ctl, &e->rule, &s);
		e->last = s;
		__atomic_store_n(&g->shedding[e->slot], e->ctl.shedding,
				 __ATOMIC_RELAXED);
		e->sheds += e->ctl.shedding && !was;
		log_change(e, was);
	}
	pthread_mutex_unlock(&g->lock);
}

/* Thresholds into the maps: a shedding one with its lease, renewed
 * every tick; count once when calm. Under dp_lock. */
static void write_limits(struct sl_guard *g)
{
	for (size_t k = 0; k < g->n; k++) {
		struct entry *e = &g->e[k];
		struct sluice_lease lease = {
			.fallback = e->rule.count,
			.expires_ns = sl_dp_now(g->dp) +
				      SL_GUARD_LEASE_MS * NSEC_PER_MSEC,
		};
		uint64_t limit = e->ctl.limit;
		int err;

		if (!e->ctl.shedding && e->written == limit)
			continue;
		err = sl_dp_set_limit(g->dp, e->rule.name, limit,
				      e->ctl.shedding ? &lease : NULL);
		if (err)
			pr_warn("system %s: writing threshold %llu: %s",
				e->rule.name, (unsigned long long)limit,
				strerror(-err));
		else
			e->written = limit;
	}
}

static void *run(void *arg)
{
	struct sl_guard *g = arg;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!__atomic_load_n(&g->stop, __ATOMIC_RELAXED)) {
		uint64_t gen;

		pthread_mutex_lock(g->dp_lock);
		if (!g->built || g->dp->rules_gen != g->gen)
			rebuild(g);
		read_counters(g);
		gen = g->gen;
		pthread_mutex_unlock(g->dp_lock);
		if (g->n) {
			step_all(g, sl_now_ns());
			pthread_mutex_lock(g->dp_lock);
			/* a new rule set meanwhile: its slots differ */
			if (g->dp->rules_gen == gen)
				write_limits(g);
			pthread_mutex_unlock(g->dp_lock);
		}
		next.tv_nsec += SL_ADAPT_TICK_MS * NSEC_PER_MSEC;
		while (next.tv_nsec >= (long)NSEC_PER_SEC) {
			next.tv_nsec -= NSEC_PER_SEC;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
				       NULL) == EINTR)
			;
	}
	return NULL;
}

int sl_guard_start(struct sl_dataplane *dp, pthread_mutex_t *dp_lock,
		   const char *proc, struct sl_guard **out)
{
	struct sl_guard *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return -ENOMEM;
	g->dp = dp;
	g->dp_lock = dp_lock;
	pthread_mutex_init(&g->lock, NULL);
	err = sl_host_reader_open(&g->host, proc);
	if (err)
		pr_warn("system rules: no inet_diag socket (%s): accept "
			"queues are not watched", strerror(-err));
	err = pthread_create(&g->thread, NULL, run, g);
	if (err) {
		sl_host_reader_close(&g->host);
		free(g);
		return -err;
	}
	*out = g;
	return 0;
}

void sl_guard_free(struct sl_guard *g)
{
	if (!g)
		return;
	__atomic_store_n(&g->stop, true, __ATOMIC_RELAXED);
	pthread_join(g->thread, NULL);
	sl_host_reader_close(&g->host);
	pthread_mutex_destroy(&g->lock);
	free(g->e);
	free(g);
}

bool sl_guard_shedding(const struct sl_guard *g, uint32_t slot)
{
	return g && slot < SLUICE_MAX_RULE_SLOTS &&
	       __atomic_load_n(&g->shedding[slot], __ATOMIC_RELAXED);
}

size_t sl_guard_info(struct sl_guard *g, struct sl_guard_info *out,
		     size_t max)
{
	size_t n;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->lock);
	n = g->n;
	for (size_t k = 0; k < n && k < max; k++) {
		const struct entry *e = &g->e[k];

		memcpy(out[k].name, e->rule.name, sizeof(out[k].name));
		out[k].shedding = e->ctl.shedding;
		out[k].why = e->ctl.why;
		out[k].sheds = e->sheds;
		out[k].service = e->ctl.shedding ? e->ctl.service : 0;
		out[k].queue = e->rule.system.accept_queue ? e->last.queue : -1;
		out[k].host = e->last;
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

/* A signal as sampled, or null where the host does not have it. */
static void add_signal(cJSON *o, const char *name, double v, bool watched)
{
	if (!watched)
		return;
	if (v < 0)
		cJSON_AddNullToObject(o, name);
	else
		cJSON_AddNumberToObject(o, name, (double)(int64_t)(v * 1e4) /
							 1e4);
}

cJSON *sl_guard_status(struct sl_guard *g)
{
	cJSON *arr = cJSON_CreateArray();
	uint64_t now = sl_now_ns();

	if (!arr || !g)
		return arr;
	pthread_mutex_lock(&g->lock);
	for (size_t k = 0; k < g->n; k++) {
		const struct entry *e = &g->e[k];
		const struct sl_system *y = &e->rule.system;
		const struct sl_adaptive *c = &e->ctl;
		char since[SL_UTC_MS_LEN + 1];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddItemToArray(arr, o);
		cJSON_AddStringToObject(o, "name", e->rule.name);
		cJSON_AddStringToObject(o, "state",
					c->shedding ? "shedding" : "idle");
		if (c->shedding)
			cJSON_AddStringToObject(o, "signal",
						sl_adapt_signal_names[c->why]);
		if (c->since_ns) {
			sl_format_mono(c->since_ns, now, since);
			cJSON_AddStringToObject(o, "since", since);
		}
		cJSON_AddNumberToObject(o, "threshold", (double)c->limit);
		cJSON_AddNumberToObject(o, "count", (double)e->rule.count);
		cJSON_AddNumberToObject(o, "floor", (double)y->floor);
		if (c->shedding && c->service)
			cJSON_AddNumberToObject(o, "service_rate",
						(double)(int64_t)c->service);
		if (y->accept_queue) {
			if (e->last.queue < 0) {
				cJSON_AddNullToObject(o, "accept_queue");
			} else {
				cJSON_AddNumberToObject(o, "accept_queue",
							(double)e->last.queue);
				cJSON_AddNumberToObject(o, "backlog",
							(double)e->backlog);
			}
		}
		add_signal(o, "cpu_pressure", e->last.cpu_pressure,
			   y->cpu_pressure);
		add_signal(o, "softirq", e->last.softirq, y->softirq);
		add_signal(o, "load", e->last.load, y->load);
	}
	pthread_mutex_unlock(&g->lock);
	return arr;
}
