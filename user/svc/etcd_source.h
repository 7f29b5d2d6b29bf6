/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `sluice agent|tokend --etcd URL --etcd-key KEY` (docs/fleet.md): a
 * thread reads KEY and watches it, and hands the newest value to its
 * owner (the agent's control loop applies it as `rule replace` does,
 * tokend serves its flows), which reports back. A value that is a
 * manifest (manifest.h) is replaced by its body, fetched and checked
 * against its SHA-256 in the thread; a body that does not match is
 * refused there, one that cannot be fetched is retried with the backoff. Only the newest value waits: values that arrive faster than the
 * loop takes them are skipped, never applied out of order or twice. etcd
 * down changes nothing in force; the thread retries with backoff.
 */
#ifndef SLUICE_ETCD_SOURCE_H
#define SLUICE_ETCD_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "metrics.h"

/* The retry delay after failures in a row: doubled from MIN up to MAX. */
#ifndef SL_ETCD_BACKOFF_MIN_MS
#define SL_ETCD_BACKOFF_MIN_MS 200
#endif
#ifndef SL_ETCD_BACKOFF_MAX_MS
#define SL_ETCD_BACKOFF_MAX_MS 5000
#endif

struct sl_etcd_source;

/*
 * endpoints and key as given (they must outlive the source), auth (NULL:
 * none) as sl_etcd_init() takes it; applied is
 * the revision of KEY the rules in force are (the boot snapshot's source,
 * 0 if it has none or another key): a value of that revision or older is
 * never handed over. wake(wake_arg) is called from the thread when a
 * value waits. -EINVAL with the reason in err.
 */
struct sl_etcd_auth;

int sl_etcd_source_new(const char *endpoints,
		       const struct sl_etcd_auth *auth, const char *key,
		       uint64_t applied, void (*wake)(void *arg),
		       void *wake_arg, struct sl_etcd_source **out,
		       char *err, size_t errlen);
int sl_etcd_source_start(struct sl_etcd_source *s);
/* Stops the thread (within about a second) and frees. NULL is fine. */
void sl_etcd_source_free(struct sl_etcd_source *s);

/* A value for the control loop: deleted means the key was deleted. */
struct sl_etcd_value {
	char *text; /* malloc'd, NUL-terminated */
	size_t len;
	uint64_t revision;
	bool deleted;
};

/* The value waiting, if any, moved into *v (free v->text). */
bool sl_etcd_source_take(struct sl_etcd_source *s, struct sl_etcd_value *v);
/* What became of it: in force, or refused (why: the reason). */
void sl_etcd_source_applied(struct sl_etcd_source *s, uint64_t revision);
void sl_etcd_source_refused(struct sl_etcd_source *s, uint64_t revision,
			    const char *why);

/* The "config_source" object of `sluice status -j` (docs/cli.md). */
cJSON *sl_etcd_source_status(struct sl_etcd_source *s);

/* What the metrics export (docs/metrics.md). */
struct sl_etcd_source_stats {
	bool up;		 /* the watch is in place */
	uint64_t revision;	 /* applied */
	uint64_t refused;	 /* values refused since the start */
	uint64_t applied;	 /* values applied since the start */
	int64_t last_change_ms;	 /* unix ms of the last apply; 0: none */
	int64_t unreachable_ms;	 /* unix ms since unreachable; 0: it is not */
};

void sl_etcd_source_stats(struct sl_etcd_source *s,
			  struct sl_etcd_source_stats *st);

/* Their metric families, sluice_config_source_* (the agent's and tokend's). */
void sl_etcd_source_metrics(struct sl_metrics *m,
			    const struct sl_etcd_source_stats *cs);

#endif
