/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to `sluice agent`: its state, and what its files call of each
 * other. agent.c: the command and the main loop; boot.c: the start, in
 * order; control.c: the control socket's requests, dispatched; answers.c:
 * the answers of the requests that only read (status, stats, list, drops,
 * explain); commit.c: the rules, from the boot's snapshot to every
 * change; tokens.c: the cluster side (secrets, the cluster sync, the
 * embedded token server).
 */
#ifndef SLUICE_AGENT_STATE_H
#define SLUICE_AGENT_STATE_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "agent_metrics.h"
#include "cluster.h"
#include "ctl.h"
#include "drops.h"
#include "election.h"
#include "etcd.h"
#include "etcd_source.h"
#include "guard.h"
#include "http_metrics.h"
#include "loader.h"
#include "log.h"
#include "params.h"
#include "snapshot.h"
#include "tokensrv.h"

#define ERRBUF 8192
#define SL_LOG_CHANGES_LEN 512 /* of the rule names a change logs */

/* --tunnels: which header of an IP-in-IP or GRE packet rules match */
enum { TUNNELS_OUTER, TUNNELS_INNER };

struct agent {
	struct sl_log_opts log;
	const char *state_dir;
	const char *pin_dir;
	const char *rules_file;
	struct sl_ifaces ifaces;
	enum sl_xdp_mode mode;
	bool allow_empty;
	bool replace_snapshot; /* --rules wins over the CLI's changes */
	bool drop_malformed;	/* the default; contradicts the next */
	bool pass_unclassified;
	int tunnels; /* --tunnels: TUNNELS_OUTER or TUNNELS_INNER */
	uint32_t stats_interval;
	char sock_path[PATH_MAX];
	struct sl_ctl_server *ctl;
	struct sl_dataplane dp;
	struct sl_snapshot snap; /* what the rules should be */
	struct sl_snapshot_mark mark; /* of the snapshot file we wrote last */
	bool snap_from_prev;
	uint64_t in_force_version;
	double started;
	char err[ERRBUF];
	/* cluster flows (docs/cluster.md) */
	const char *token_servers;
	const char *node_id;
	const char *secrets_file;
	const char *serve_tokens;
	uint32_t max_ttl_ms;
	struct sl_secrets *secrets; /* NULL without --secrets */
	pthread_mutex_t dp_lock; /* dp, shared with the cluster thread */
	struct sl_cluster_sync *cluster;
	struct sl_ruleset served; /* the embedded token server's rules */
	struct sl_tokend *tokend;
	pthread_t tokend_thread;
	/* --election: the embedded server is one replica of a token
	 * service elected through etcd (--etcd) */
	struct sl_election_cfg election;
	struct sl_election *el;
	/* --metrics (docs/metrics.md) */
	const char *metrics_addr;
	int metrics_fd; /* bound at the start, served once attached */
	struct sl_agent_metrics_src metrics_src;
	struct sl_http_metrics *metrics;
	/* --etcd (docs/fleet.md): the rules come from an etcd key */
	const char *etcd_endpoints;
	struct sl_etcd_auth etcd_auth;
	const char *etcd_key;
	struct sl_etcd_source *etcd;
	/* rules with "system" (docs/rules.md) */
	struct sl_guard *guard;
	/* the sources each rule drops most (`sluice drops`); NULL: none */
	struct sl_agent_drops *drops;
	/* breakers' state words as last logged, by slot (log_breakers) */
	uint64_t *breaker_seen;
	uint64_t breaker_gen; /* dp.rules_gen they were read under */
};

enum change_op { CHANGE_ADD, CHANGE_DEL, CHANGE_REPLACE };

/* --allow-empty, or the rules in force came from a document that says
 * "allow_empty": true (docs/rules.md) */
static inline bool agent_empty_allowed(const struct agent *a)
{
	return a->allow_empty || a->snap.rules.allow_empty;
}

/* A request that ctl.h's reading refused (err), as an answer. */
static inline cJSON *agent_request_error(struct agent *a, int err)
{
	return sl_ctl_error(err == -ENOMEM ? "internal" : "invalid", "%s",
			    a->err);
}

/* answers.c */
bool agent_check_ready(const struct agent *a, const bool *attached,
		       cJSON *reasons);
cJSON *agent_do_status(struct agent *a);
char *agent_do_stats(struct agent *a);
char *agent_do_list(struct agent *a);
cJSON *agent_do_drops(struct agent *a, const struct sl_ctl_req *req);
cJSON *agent_do_explain(struct agent *a, const struct sl_ctl_req *req);

/* commit.c */
int agent_boot_rules(struct agent *a);
cJSON *agent_do_change(struct agent *a, enum change_op op,
		       const struct sl_ctl_req *req);
void agent_apply_etcd_value(struct agent *a, struct sl_etcd_value *v);
void agent_notify_status(struct agent *a, bool ready);

/* tokens.c */
int agent_new_cluster(struct agent *a);
int agent_start_tokend(struct agent *a);
int agent_reload_secrets(struct agent *a);

/* control.c */
char *agent_handle_request(void *arg, const char *text, size_t len);

/* boot.c */
int agent_start(struct agent *a);

#endif
