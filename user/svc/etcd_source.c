// SPDX-License-Identifier: GPL-2.0
/* The etcd config source of the agent (etcd_source.h, docs/fleet.md). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "etcd_source.h"
#include "log.h"
#include "manifest.h"
#include "util.h"

#define ERR_LEN 1024

enum source_state { ST_CONNECTING, ST_WATCHING, ST_UNREACHABLE };

static const char *const state_names[] = { "connecting", "watching",
					   "unreachable" };

struct sl_etcd_source {
	const char *endpoints, *key;
	void (*wake)(void *arg);
	void *wake_arg;
	struct sl_etcd etcd; /* the thread's once started */
	pthread_t thread;
	bool started;
	bool stop; /* __atomic */
	int64_t watch_from; /* the thread's: 0 means read the key first */
	uint32_t failures, rnd; /* the thread's */
	char fetch_err[ERR_LEN]; /* the thread's: why a body was not fetched */

	pthread_mutex_t lock; /* everything below; cond wakes the thread */
	pthread_cond_t cond;
	enum source_state state;
	char endpoint[SL_ETCD_URL_MAX]; /* the last that answered */
	int64_t unreachable_ms;		/* since; 0 while reachable */
	char last_error[ERR_LEN];
	uint64_t offered; /* the newest revision handed over */
	struct sl_etcd_value pending;
	bool has_pending;
	uint64_t applied_rev, n_applied, n_refused;
	int64_t last_change_ms;
	uint64_t refused_rev;
	char refused_err[ERR_LEN];
	char body_sha256[SL_SHA256_HEX_LEN + 1]; /* of the last manifest's */
	char body_url[SL_MANIFEST_URL_MAX];	  /* body handed over */
};

int sl_etcd_source_new(const char *endpoints,
		       const struct sl_etcd_auth *auth, const char *key,
		       uint64_t applied, void (*wake)(void *arg),
		       void *wake_arg, struct sl_etcd_source **out,
		       char *err, size_t errlen)
{
	struct sl_etcd_source *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	ret = sl_etcd_init(&s->etcd, endpoints, auth, key, err, errlen);
	if (ret) {
		free(s);
		return ret;
	}
	s->endpoints = endpoints;
	s->key = key;
	s->wake = wake;
	s->wake_arg = wake_arg;
	s->offered = s->applied_rev = applied;
	s->rnd = (uint32_t)sl_now_ns() ^ (uint32_t)getpid() << 8;
	if (!s->rnd)
		s->rnd = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	*out = s;
	return 0;
}

static bool stopping(void *arg)
{
	struct sl_etcd_source *s = arg;

	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
}

/* A value of the key at revision, malloc'd text that is the control
 * loop's from now on: it waits for the loop, unless the loop has had it or
 * a newer one already. */
static int offer_owned(struct sl_etcd_source *s, char *copy, size_t len,
		       uint64_t revision, bool deleted)
{
	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	if (revision <= s->offered) {
		pthread_mutex_unlock(&s->lock);
		free(copy);
		return 0;
	}
	free(s->pending.text);
	s->pending = (struct sl_etcd_value){ .text = copy, .len = len,
					     .revision = revision,
					     .deleted = deleted };
	s->has_pending = true;
	s->offered = revision;
	pthread_mutex_unlock(&s->lock);
	s->wake(s->wake_arg);
	pr_debug("etcd: %s at revision %llu: handed to the control loop",
		 s->key, (unsigned long long)revision);
	return 0;
}

/* The same for text that stays the caller's. */
static int offer(struct sl_etcd_source *s, const char *text, size_t len,
		 uint64_t revision, bool deleted)
{
	return offer_owned(s, text ? strndup(text, len) : strdup(""), len,
			   revision, deleted);
}

/* Refused before the control loop sees it (a manifest that is not valid,
 * a body that is not the manifest's): never handed over nor retried. */
static void refuse(struct sl_etcd_source *s, uint64_t revision,
		   const char *why)
{
	pthread_mutex_lock(&s->lock);
	if (revision > s->offered)
		s->offered = revision;
	pthread_mutex_unlock(&s->lock);
	pr_err("etcd: %s at revision %llu refused, the rules in force stay: "
	       "%s", s->key, (unsigned long long)revision, why);
	sl_etcd_source_refused(s, revision, why);
}

/*
 * A value of the key at revision: a rule file (or a delete) is offered as
 * it is; a manifest's body is fetched and checked first (manifest.h).
 * -EAGAIN when no body server answered (s->fetch_err says why): read the
 * key again after the backoff.
 */
static int take_value(struct sl_etcd_source *s, const char *text, size_t len,
		      uint64_t revision, bool deleted)
{
	struct sl_manifest m;
	char why[ERR_LEN / 2], *body; /* room for fetch_err's words */
	bool stale;
	size_t n;
	int ret, used;

	if (deleted || !text)
		return offer(s, text, len, revision, deleted);
	pthread_mutex_lock(&s->lock);
	stale = revision <= s->offered;
	pthread_mutex_unlock(&s->lock);
	if (stale)
		return 0;
	ret = sl_manifest_parse(text, len, &m, why, sizeof(why));
	if (ret == -ENOMSG) {
		pthread_mutex_lock(&s->lock);
		s->body_sha256[0] = '\0';
		pthread_mutex_unlock(&s->lock);
		return offer(s, text, len, revision, false);
	}
	if (ret) {
		refuse(s, revision, why);
		return 0;
	}
	ret = sl_manifest_fetch(&s->etcd, &m, s->rnd % m.n_urls, &used, &body,
				&n, why, sizeof(why));
	if (ret == -EBADMSG) {
		refuse(s, revision, why);
		return 0;
	}
	if (ret) {
		snprintf(s->fetch_err, sizeof(s->fetch_err),
			 "the body of %s at revision %llu (sha256 %.12s...): "
			 "%s",
			 s->key, (unsigned long long)revision, m.sha256, why);
		return ret == -ENOMEM ? ret : -EAGAIN;
	}
	pthread_mutex_lock(&s->lock);
	strcpy(s->body_sha256, m.sha256);
	strcpy(s->body_url, m.url[used]);
	pthread_mutex_unlock(&s->lock);
	pr_debug("etcd: %s at revision %llu: a manifest, its body fetched "
		 "(%zu bytes, sha256 %.12s...)", s->key,
		 (unsigned long long)revision, n, m.sha256);
	return offer_owned(s, body, n, revision, false);
}

static int on_event(void *arg, const struct sl_etcd_event *ev)
{
	struct sl_etcd_source *s = arg;

	s->watch_from = ev->mod_revision + 1;
	/* a newer one follows at once: no body fetched for this one */
	if (ev->superseded)
		return 0;
	return take_value(s, ev->value, ev->len, ev->mod_revision,
			  ev->type == SL_ETCD_DELETE);
}

static void on_created(void *arg)
{
	struct sl_etcd_source *s = arg;
	int64_t down_ms;

	pthread_mutex_lock(&s->lock);
	down_ms = s->unreachable_ms ? sl_wall_ms() - s->unreachable_ms : 0;
	s->state = ST_WATCHING;
	s->unreachable_ms = 0;
	snprintf(s->endpoint, sizeof(s->endpoint), "%s",
		 sl_etcd_endpoint(&s->etcd));
	pthread_mutex_unlock(&s->lock);
	s->failures = 0;
	if (down_ms)
		pr_info("etcd: reachable again after %.1f s: watching %s on "
			"%s from revision %lld",
			down_ms / 1000.0, s->key, sl_etcd_endpoint(&s->etcd),
			(long long)s->watch_from);
	else
		pr_info("etcd: watching %s on %s from revision %lld", s->key,
			sl_etcd_endpoint(&s->etcd), (long long)s->watch_from);
}

/* A failed read or a broken watch: note it, wait the backoff. */
static void failed(struct sl_etcd_source *s, const char *why)
{
	uint32_t delay = sl_backoff_ms(SL_ETCD_BACKOFF_MIN_MS,
				       SL_ETCD_BACKOFF_MAX_MS, ++s->failures,
				       sl_xorshift32(&s->rnd));
	struct timespec until;

	pthread_mutex_lock(&s->lock);
	if (s->state != ST_UNREACHABLE) {
		s->unreachable_ms = sl_wall_ms();
		pr_warn("etcd: unreachable: %s; the rules in force stay, "
			"retrying", why);
	}
	s->state = ST_UNREACHABLE;
	snprintf(s->last_error, sizeof(s->last_error), "%s", why);
	sl_deadline_ts(CLOCK_REALTIME, delay, &until);
	while (!stopping(s) &&
	       pthread_cond_timedwait(&s->cond, &s->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->lock);
}

/* The first read, and after a compaction: the key as it is now. */
static int read_key(struct sl_etcd_source *s, char *err, size_t errlen)
{
	struct sl_etcd_kv kv;
	int ret;

	ret = sl_etcd_get(&s->etcd, &kv, err, errlen);
	if (ret)
		return ret;
	if (kv.exists)
		ret = take_value(s, kv.value, kv.len, kv.mod_revision, false);
	else
		pr_warn("etcd: %s does not exist on %s; the rules in force "
			"stay until it is published (sluice push)",
			s->key, sl_etcd_endpoint(&s->etcd));
	/* from the store's revision: nothing between the read and the
	 * watch is missed */
	s->watch_from = kv.revision + 1;
	sl_etcd_kv_free(&kv);
	if (ret == -EAGAIN) {
		s->watch_from = 0;
		snprintf(err, errlen, "%s", s->fetch_err);
	}
	return ret;
}

static void *run(void *arg)
{
	struct sl_etcd_source *s = arg;
	const struct sl_etcd_watch_cb cb = {
		.event = on_event,
		.created = on_created,
		.stop = stopping,
		.arg = s,
	};
	char err[ERR_LEN];

	while (!stopping(s)) {
		int64_t compacted = 0;
		int ret;

		if (!s->watch_from) {
			ret = read_key(s, err, sizeof(err));
			if (ret) {
				failed(s, err);
				continue;
			}
		}
		ret = sl_etcd_watch(&s->etcd, s->watch_from, &cb, &compacted,
				    err, sizeof(err));
		if (!ret)
			break;
		if (ret == -EAGAIN) {
			/* a body not fetched: the key again, after the
			 * backoff (a newer manifest may have replaced it) */
			s->watch_from = 0;
			failed(s, s->fetch_err);
			continue;
		}
		if (ret == -ESTALE) {
			pr_warn("etcd: revision %lld of %s was compacted "
				"(the oldest kept is %lld): reading the key "
				"again",
				(long long)s->watch_from, s->key,
				(long long)compacted);
			s->watch_from = 0;
			continue;
		}
		failed(s, err);
	}
	return NULL;
}

int sl_etcd_source_start(struct sl_etcd_source *s)
{
	int err = pthread_create(&s->thread, NULL, run, s);

	if (err)
		return -err;
	s->started = true;
	return 0;
}

void sl_etcd_source_free(struct sl_etcd_source *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	sl_etcd_free(&s->etcd);
	free(s->pending.text);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

bool sl_etcd_source_take(struct sl_etcd_source *s, struct sl_etcd_value *v)
{
	bool got;

	pthread_mutex_lock(&s->lock);
	got = s->has_pending;
	if (got) {
		*v = s->pending;
		s->pending = (struct sl_etcd_value){ 0 };
		s->has_pending = false;
	}
	pthread_mutex_unlock(&s->lock);
	return got;
}

void sl_etcd_source_applied(struct sl_etcd_source *s, uint64_t revision)
{
	pthread_mutex_lock(&s->lock);
	s->applied_rev = revision;
	s->n_applied++;
	s->last_change_ms = sl_wall_ms();
	pthread_mutex_unlock(&s->lock);
}

void sl_etcd_source_refused(struct sl_etcd_source *s, uint64_t revision,
			    const char *why)
{
	pthread_mutex_lock(&s->lock);
	s->n_refused++;
	s->refused_rev = revision;
	snprintf(s->refused_err, sizeof(s->refused_err), "%s", why);
	pthread_mutex_unlock(&s->lock);
}

static void add_utc(cJSON *o, const char *name, int64_t ms)
{
	char when[SL_UTC_MS_LEN + 1];

	if (!ms) {
		cJSON_AddNullToObject(o, name);
		return;
	}
	sl_format_utc(ms, false, when);
	cJSON_AddStringToObject(o, name, when);
}

cJSON *sl_etcd_source_status(struct sl_etcd_source *s)
{
	cJSON *o = cJSON_CreateObject(), *eps, *ref;
	const char *cur = s->endpoints, *item;
	size_t len;

	cJSON_AddStringToObject(o, "kind", "etcd");
	eps = cJSON_AddArrayToObject(o, "endpoints");
	while (sl_list_next(&cur, &item, &len)) {
		char *one = strndup(item, len);

		cJSON_AddItemToArray(eps, cJSON_CreateString(one ? one : ""));
		free(one);
	}
	cJSON_AddStringToObject(o, "key", s->key);
	pthread_mutex_lock(&s->lock);
	cJSON_AddStringToObject(o, "endpoint", s->endpoint);
	cJSON_AddNumberToObject(o, "revision", s->applied_rev);
	cJSON_AddStringToObject(o, "state", state_names[s->state]);
	add_utc(o, "unreachable_since", s->unreachable_ms);
	if (s->unreachable_ms)
		cJSON_AddNumberToObject(o, "unreachable_for_s",
					(sl_wall_ms() - s->unreachable_ms) /
						1000.0);
	else
		cJSON_AddNullToObject(o, "unreachable_for_s");
	cJSON_AddStringToObject(o, "last_error", s->last_error);
	add_utc(o, "last_change", s->last_change_ms);
	cJSON_AddNumberToObject(o, "applied", s->n_applied);
	cJSON_AddNumberToObject(o, "refused", s->n_refused);
	if (s->body_sha256[0]) {
		ref = cJSON_AddObjectToObject(o, "body");
		cJSON_AddStringToObject(ref, "sha256", s->body_sha256);
		cJSON_AddStringToObject(ref, "url", s->body_url);
	} else {
		cJSON_AddNullToObject(o, "body");
	}
	if (s->n_refused) {
		ref = cJSON_AddObjectToObject(o, "last_refused");
		cJSON_AddNumberToObject(ref, "revision", s->refused_rev);
		cJSON_AddStringToObject(ref, "error", s->refused_err);
	} else {
		cJSON_AddNullToObject(o, "last_refused");
	}
	pthread_mutex_unlock(&s->lock);
	return o;
}

void sl_etcd_source_stats(struct sl_etcd_source *s,
			  struct sl_etcd_source_stats *st)
{
	pthread_mutex_lock(&s->lock);
	st->up = s->state == ST_WATCHING;
	st->revision = s->applied_rev;
	st->refused = s->n_refused;
	st->applied = s->n_applied;
	st->last_change_ms = s->last_change_ms;
	st->unreachable_ms = s->unreachable_ms;
	pthread_mutex_unlock(&s->lock);
}

static const struct sl_metric
	source_up = { "sluice_config_source_up",
		      "1 while the config source (etcd) is watched; 0 while "
		      "it cannot be reached and what is in force stays." },
	source_revision = { "sluice_config_source_revision",
			    "The config source's revision (etcd mod_revision "
			    "of the key) the rules in force came from." },
	source_applied = { "sluice_config_source_applied_total",
			   "Values of the config source put in force since "
			   "the start." },
	source_refused = { "sluice_config_source_refused_total",
			   "Values of the config source refused (invalid, "
			   "empty, deleted) since the start; the rules in "
			   "force stayed." },
	source_change = { "sluice_config_source_last_change_timestamp_seconds",
			  "Unix time the last value of the config source was "
			  "put in force; 0: none since the start." },
	source_down = { "sluice_config_source_unreachable_seconds",
			"Seconds since the config source became unreachable; "
			"0 while it is reachable." };

void sl_etcd_source_metrics(struct sl_metrics *m,
			    const struct sl_etcd_source_stats *cs)
{
	int64_t down_ms = cs->unreachable_ms ? sl_wall_ms() - cs->unreachable_ms
					     : 0;

	sl_metrics_gauge(m, &source_up, NULL, 0, cs->up);
	sl_metrics_gauge(m, &source_revision, NULL, 0, cs->revision);
	sl_metrics_counter(m, &source_applied, NULL, 0, cs->applied);
	sl_metrics_counter(m, &source_refused, NULL, 0, cs->refused);
	sl_metrics_gauge(m, &source_change, NULL, 0,
			 cs->last_change_ms / 1000.0);
	sl_metrics_gauge(m, &source_down, NULL, 0, down_ms / 1000.0);
}
