/* SPDX-License-Identifier: GPL-2.0 */
/* The per-source entries of per_source rules (src_table, src_cache). */
#ifndef SLUICE_SOURCES_H
#define SLUICE_SOURCES_H

#include "dataplane.h"

/*
 * Source entries idle for two intervals are collected in two steps, so
 * that neither the walk of the table nor a long run of deletes holds a
 * lock for long: sl_dp_gc_scan() without the caller's data-plane lock,
 * then sl_dp_gc_collect() with it, once per SL_GC_CHUNK entries until
 * v->next reaches v->n (releasing the lock in between). A rule set
 * applied since the scan ends the collection (a slot may have changed
 * hands; the next scan decides again). The scan returns -errno, collect
 * the number deleted or -errno. sl_dp_gc_sources() does it all.
 */
#define SL_GC_CHUNK 4096

struct sluice_src_key;

struct sl_src_victims {
	struct sluice_src_key *keys;
	size_t n, cap;
	size_t next; /* the first not yet deleted */
	uint64_t rules_gen; /* dp->rules_gen at the scan */
};

int sl_dp_gc_scan(struct sl_dataplane *dp, struct sl_src_victims *v);
int sl_dp_gc_collect(struct sl_dataplane *dp, struct sl_src_victims *v);
void sl_src_victims_free(struct sl_src_victims *v);
/* Returns the number deleted or -errno. */
int sl_dp_gc_sources(struct sl_dataplane *dp);

/* Delete the source entries of the slots marked in drop (one walk). */
void sl_dp_drop_sources(struct sl_dataplane *dp, uint8_t *drop);
/* Empty every CPU's source token cache. 0 or -errno. */
int sl_dp_clear_source_caches(struct sl_dataplane *dp);

#endif
