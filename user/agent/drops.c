// SPDX-License-Identifier: GPL-2.0
/* The agent's answer to "who is being dropped?" (drops.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drops.h"
#include "droptop.h"
#include "drop_ring.h"
#include "util.h"

struct sl_agent_drops {
	struct sl_drop_reader *reader;
	struct sl_droptop top;
	uint64_t rules_gen; /* of the dp the slots were checked against */
	uint64_t now_ns;    /* of the samples being read */
};

static void on_sample(void *ctx, const struct sluice_drop_sample *s)
{
	struct sl_agent_drops *d = ctx;

	/* a bad slot or family is dropped: the ring is the kernel's */
	sl_droptop_add(&d->top, s, d->now_ns);
}

struct sl_agent_drops *sl_agent_drops_new(const struct sl_dataplane *dp)
{
	struct sl_agent_drops *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->reader = sl_drop_reader_new(dp, on_sample, d);
	if (!d->reader) {
		free(d);
		return NULL;
	}
	d->rules_gen = dp->rules_gen;
	return d;
}

void sl_agent_drops_poll(struct sl_agent_drops *d,
			 const struct sl_dataplane *dp, pthread_mutex_t *lock)
{
	d->now_ns = sl_now_ns();
	sl_drop_reader_consume(d->reader);
	if (d->rules_gen == __atomic_load_n(&dp->rules_gen, __ATOMIC_ACQUIRE))
		return;
	/* slots that left the set may come back for another rule */
	pthread_mutex_lock(lock);
	for (uint32_t slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++) {
		bool in_force = false;

		if (!d->top.slot[slot])
			continue;
		for (size_t i = 0; i < dp->rules.n && !in_force; i++)
			in_force = dp->slots[i] == slot;
		if (!in_force)
			sl_droptop_clear(&d->top, slot);
	}
	d->rules_gen = dp->rules_gen;
	pthread_mutex_unlock(lock);
}

/* One rule's object: its name, rate and top sources. */
static cJSON *rule_object(struct sl_agent_drops *d, const char *name,
			  uint32_t slot, size_t top, uint64_t now)
{
	struct sl_droptop_source src[SL_DROPTOP_KEEP];
	double total = sl_droptop_total(&d->top, slot, now);
	size_t n = sl_droptop_top(&d->top, slot, now, src, top);
	cJSON *r = cJSON_CreateObject(), *list;
	char addr[INET6_ADDRSTRLEN];

	if (!r)
		return NULL;
	cJSON_AddStringToObject(r, "name", name);
	cJSON_AddNumberToObject(r, "dropped_per_s",
				sl_droptop_rate(&d->top, slot, total, now));
	list = cJSON_AddArrayToObject(r, "sources");
	for (size_t k = 0; list && k < n; k++) {
		cJSON *o = cJSON_CreateObject();

		inet_ntop(src[k].family == 4 ? AF_INET : AF_INET6, src[k].addr,
			  addr, sizeof(addr));
		cJSON_AddStringToObject(o, "addr", addr);
		cJSON_AddNumberToObject(o, "dropped_per_s",
					sl_droptop_rate(&d->top, slot,
							src[k].weight, now));
		cJSON_AddNumberToObject(o, "share",
					total > 0 ? src[k].weight / total : 0);
		cJSON_AddItemToArray(list, o);
	}
	return r;
}

static int more_dropped_first(const void *a, const void *b)
{
	double x = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
		*(cJSON *const *)a, "dropped_per_s"));
	double y = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
		*(cJSON *const *)b, "dropped_per_s"));

	return (x < y) - (x > y);
}

int sl_agent_drops_answer(struct sl_agent_drops *d,
			  const struct sl_dataplane *dp, const char *rule,
			  size_t top, cJSON *answer, char *err, size_t errlen)
{
	uint64_t now = sl_now_ns();
	cJSON **objs, *list;
	size_t n = 0;
	bool found = false;

	objs = calloc(dp->rules.n + 1, sizeof(*objs));
	if (!objs)
		return -ENOMEM;
	for (size_t i = 0; i < dp->rules.n; i++) {
		const char *name = dp->rules.rules[i].name;

		if (rule && strcmp(rule, name))
			continue;
		found = true;
		/* every rule asked for by name; otherwise those with drops */
		if (!rule && !sl_droptop_total(&d->top, dp->slots[i], now))
			continue;
		objs[n] = rule_object(d, name, dp->slots[i], top, now);
		if (objs[n])
			n++;
	}
	if (rule && !found) {
		free(objs);
		snprintf(err, errlen, "no rule '%s' in force", rule);
		return -ENOENT;
	}
	qsort(objs, n, sizeof(*objs), more_dropped_first);
	cJSON_AddNumberToObject(answer, "half_life_s", SL_DROPTOP_HALF_LIFE_S);
	list = cJSON_AddArrayToObject(answer, "rules");
	for (size_t k = 0; k < n; k++)
		if (!list || !cJSON_AddItemToArray(list, objs[k]))
			cJSON_Delete(objs[k]);
	free(objs);
	return 0;
}

void sl_agent_drops_free(struct sl_agent_drops *d)
{
	if (d) {
		sl_drop_reader_free(d->reader);
		sl_droptop_free(&d->top);
		free(d);
	}
}
