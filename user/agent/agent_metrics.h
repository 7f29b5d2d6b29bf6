/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent's metrics (docs/metrics.md), served by `sluice agent
 * --metrics`. A scrape copies the numbers with dp_lock held (the rules'
 * counters through rule_cpu's mmap, the cluster flows under the cluster
 * module's lock) and formats them after releasing it, so neither the
 * control loop nor the cluster thread waits for more than a copy. It
 * never goes through the control socket.
 */
#ifndef SLUICE_AGENT_METRICS_H
#define SLUICE_AGENT_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "etcd_source.h"
#include "guard.h"
#include "json_text.h"
#include "loader.h"
#include "tokensrv.h"

/* The agent's own numbers, as `sluice status` tells them. */
struct sl_agent_status {
	uint64_t snapshot_version;
	int64_t snapshot_updated_at; /* unix seconds */
	size_t snapshot_rules;
	bool snapshot_from_prev;
	bool ready; /* as `sluice status --ready` */
	bool has_config_source; /* --etcd */
	struct sl_etcd_source_stats config_source;
};

struct sl_agent_metrics_src {
	struct sl_dataplane *dp;
	pthread_mutex_t *dp_lock;
	struct sl_cluster_sync *cluster; /* NULL: no cluster sync */
	struct sl_tokend *tokend;	  /* NULL: no embedded token server */
	struct sl_guard *guard;		  /* the "system" rules */
	/* fills st, with dp_lock held; attached[i] is dp->ifaces[i]'s */
	void (*status)(void *arg, const bool *attached,
		       struct sl_agent_status *st);
	void *arg;
};

/* http_metrics.h's fill callback; src is a struct sl_agent_metrics_src. */
int sl_agent_metrics(void *src, struct sl_text *out);

#endif
