/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent's side of cluster flow control (docs/cluster.md): a thread
 * that holds one session per namespace with a token server, reports each
 * cluster flow's demand every sync period and writes the threshold in
 * force (the lease, or the fallback) with sl_dp_set_limit(). A library:
 * no signals, no exit.
 */
#ifndef SLUICE_CLUSTER_H
#define SLUICE_CLUSTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "lease.h"
#include "loader.h"
#include "metrics.h"
#include "secrets.h"

/* Defaults; each is a field of struct sl_cluster_cfg. */
#ifndef SL_CLUSTER_SYNC_MS
#define SL_CLUSTER_SYNC_MS 100 /* until AUTH_OK advises a period */
#endif
#ifndef SL_CLUSTER_RESOLVE_MS
#define SL_CLUSTER_RESOLVE_MS 2000 /* a token server's host name */
#endif
/* how often a lookup in progress is looked at */
#define SL_CLUSTER_RESOLVE_POLL_NS (5 * NSEC_PER_MSEC)
#ifndef SL_CLUSTER_CONNECT_MS
#define SL_CLUSTER_CONNECT_MS 500 /* TCP connect */
#endif
#ifndef SL_CLUSTER_HANDSHAKE_MS
#define SL_CLUSTER_HANDSHAKE_MS 1000 /* HELLO to AUTH_OK */
#endif
#ifndef SL_CLUSTER_BACKOFF_MIN_MS
#define SL_CLUSTER_BACKOFF_MIN_MS 100 /* first retry after a failure */
#endif
#ifndef SL_CLUSTER_BACKOFF_MAX_MS
#define SL_CLUSTER_BACKOFF_MAX_MS 500 /* below the server's learn period */
#endif
#ifndef SL_CLUSTER_MAX_TTL_MS
#define SL_CLUSTER_MAX_TTL_MS 10000 /* the longest lease believed */
#endif
#define SL_CLUSTER_MAX_SERVERS 16

struct sl_cluster_server {
	char host[256];
	char port[8];
};

struct sl_cluster_cfg {
	const char *servers;		  /* "HOST:PORT[,HOST:PORT...]" */
	const char *node_id;		  /* NULL: the host name */
	const struct sl_secrets *secrets; /* NULL: no authentication */
	uint32_t sync_ms;
	uint32_t miss_limit;  /* N: missed syncs before a lease is dropped */
	uint32_t good_needed; /* K: good syncs before leaving fallback */
	uint32_t resolve_ms;
	uint32_t connect_ms;
	uint32_t handshake_ms;
	uint32_t backoff_min_ms;
	uint32_t backoff_max_ms;
	uint32_t max_ttl_ms; /* a longer lease is refused, as over count */
};

void sl_cluster_cfg_default(struct sl_cluster_cfg *cfg);

/*
 * "HOST:PORT[,HOST:PORT...]", a host being a name, an IPv4 address or
 * [IPv6]. -EINVAL with the reason in err.
 */
int sl_cluster_parse_servers(const char *list, struct sl_cluster_server *out,
			     size_t max, size_t *n, char *err, size_t errlen);

struct sl_cluster_sync;

/*
 * Check the configuration and hook into dp (a fresh slot of a cluster
 * rule starts at its fallback, never at count). dp_lock serialises every
 * use of dp between the agent and the cluster thread; both must outlive
 * the module. Errors are explained in err.
 */
int sl_cluster_new(const struct sl_cluster_cfg *cfg, struct sl_dataplane *dp,
		   pthread_mutex_t *dp_lock, struct sl_cluster_sync **out,
		   char *err, size_t errlen);

/*
 * The rules in force changed (after sl_dp_apply, dp_lock held): take the
 * cluster rules as flows, keeping the state of those that stay, and write
 * each one's threshold.
 */
void sl_cluster_rules_changed(struct sl_cluster_sync *c);

/* New sessions authenticate with secrets from now on (a reload); the
 * sessions up stay. secrets must outlive c or the next call. */
void sl_cluster_set_secrets(struct sl_cluster_sync *c,
			    const struct sl_secrets *secrets);

/* Start the sync thread; -errno if it cannot. */
int sl_cluster_start(struct sl_cluster_sync *c);

/* The "cluster" object of `sluice status -j` (docs/cli.md). */
cJSON *sl_cluster_status(struct sl_cluster_sync *c);

/* The lease state of rule's flow into *state; false if the rule is not a
 * synced cluster flow. */
bool sl_cluster_rule_state(struct sl_cluster_sync *c, const char *rule,
			   enum sl_lease_state *state);

/* One cluster flow, as the metrics see it. */
struct sl_cluster_flow_info {
	size_t rule; /* its index in dp->rules */
	enum sl_lease_state state;
	uint64_t lease_left_ns; /* under a lease, until it ends; else 0 */
	uint32_t holders;	/* as the server last told; 0: unknown */
};

/* Why an answer of a token server was refused (and its session closed):
 * a grant above what the rule allows this node, a TTL above max_ttl_ms;
 * an AUTH_OK not sealed with the namespace secret (the server does not
 * hold it); after the handshake, a frame with a wrong MAC, a sequence
 * number out of order (replayed), or without a seal; an answer from a
 * term older than one the namespace has seen (a deposed leader); GRANTS
 * whose entries do not answer the SYNC's flows one for one. */
enum sl_cluster_refusal {
	SL_REFUSED_OVER_COUNT,
	SL_REFUSED_TTL,
	SL_REFUSED_SERVER_AUTH,
	SL_REFUSED_MAC,
	SL_REFUSED_SEQUENCE,
	SL_REFUSED_UNSEALED,
	SL_REFUSED_TERM,
	SL_REFUSED_MALFORMED,
	SL_REFUSALS,
};

extern const char *const sl_cluster_refusal_names[SL_REFUSALS];

/* One namespace's session with the token servers. */
struct sl_cluster_session_info {
	char ns[SL_NAME_MAX + 1];
	bool syncing;	   /* authenticated, with servers[server] */
	size_t server;	   /* the one in use or tried last */
	uint32_t failures; /* in a row */
	uint64_t term;	   /* the newest leader's term seen */
	uint64_t refused[SL_REFUSALS]; /* answers refused, since the start */
	struct sl_histogram sync_rtt; /* seconds from a SYNC to its answer */
};

/*
 * Copy at most max flows and max sessions, with dp_lock held (so that the
 * flows' rule indexes are those of dp->rules); their numbers into *n_flows
 * and *n_sess. Only the module's own lock is taken.
 */
void sl_cluster_info(struct sl_cluster_sync *c,
		     struct sl_cluster_flow_info *flows,
		     struct sl_cluster_session_info *sess, size_t max,
		     size_t *n_flows, size_t *n_sess);

/* The token servers in order (fixed for the module's life), and server i
 * as HOST:PORT, [HOST]:PORT for an IPv6 address. */
size_t sl_cluster_n_servers(const struct sl_cluster_sync *c);
void sl_cluster_server_name(const struct sl_cluster_sync *c, size_t i,
			    char *buf, size_t len);

/* Stop the thread, close the sessions; the thresholds stay in force. */
void sl_cluster_free(struct sl_cluster_sync *c);

#endif
