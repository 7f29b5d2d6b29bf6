// SPDX-License-Identifier: GPL-2.0
/*
 * What the CLI and the metrics see of the cluster sync: the "cluster"
 * object of `sluice status -j`, a rule's lease state, the flows and
 * sessions copied for the metrics.
 */
#include <stdio.h>
#include <string.h>

#include "cluster_int.h"
#include "util.h"

/* ---- what the CLI sees ---- */

static void add_u64(cJSON *o, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	cJSON_AddRawToObject(o, name, buf);
}

static void add_time(cJSON *o, const char *name, uint64_t mono, uint64_t now)
{
	char buf[SL_UTC_MS_LEN + 1];

	sl_format_mono(mono, now, buf);
	cJSON_AddStringToObject(o, name, buf);
}

static const char *sess_state_str(enum sess_state s)
{
	static const char *const names[] = {
		[SESS_IDLE] = "retrying",     [SESS_RESOLVING] = "resolving",
		[SESS_CONNECTING] = "connecting",
		[SESS_HELLO] = "handshake",   [SESS_AUTH] = "handshake",
		[SESS_READY] = "ready",
	};

	return names[s];
}

/* HOST:PORT, [HOST]:PORT for an IPv6 address. */
static void server_str(const struct sl_cluster_server *sv, char *buf,
		       size_t len)
{
	snprintf(buf, len, strchr(sv->host, ':') ? "[%s]:%s" : "%s:%s",
		 sv->host, sv->port);
}

/* The server a session syncs with, null while it has none. */
static void add_token_server(cJSON *e, const struct sl_cluster_sync *c,
			     const struct session *s)
{
	char buf[300];

	if (s->st != SESS_READY) {
		cJSON_AddNullToObject(e, "token_server");
		return;
	}
	server_str(cluster_sess_server(c, s), buf, sizeof(buf));
	cJSON_AddStringToObject(e, "token_server", buf);
}

cJSON *sl_cluster_status(struct sl_cluster_sync *c)
{
	cJSON *o = cJSON_CreateObject(), *a, *fl, *ss;
	uint64_t now = sl_now_ns();
	char buf[300];

	if (!o)
		return NULL;
	pthread_mutex_lock(&c->lock);
	cJSON_AddStringToObject(o, "node_id", c->node);
	a = cJSON_AddArrayToObject(o, "token_servers");
	for (size_t i = 0; i < c->n_servers; i++) {
		server_str(&c->servers[i], buf, sizeof(buf));
		cJSON_AddItemToArray(a, cJSON_CreateString(buf));
	}
	ss = cJSON_AddArrayToObject(o, "sessions");
	fl = cJSON_AddArrayToObject(o, "flows");
	for (size_t i = 0; i < c->n_sess; i++) {
		struct session *s = &c->sess[i];
		cJSON *e = cJSON_CreateObject();

		cJSON_AddStringToObject(e, "namespace", s->ns);
		cJSON_AddStringToObject(e, "state", sess_state_str(s->st));
		add_token_server(e, c, s);
		add_u64(e, "sync_ms", s->sync_ms);
		add_u64(e, "failures", s->failures);
		add_u64(e, "term", s->term);
		cJSON_AddStringToObject(e, "last_error", s->last_error);
		cJSON_AddItemToArray(ss, e);
	}
	for (size_t i = 0; i < c->n_flows; i++) {
		struct flow *f = &c->flows[i];
		struct session *s = &c->sess[f->sess];
		bool leased = f->l.state == SL_LEASE_CLUSTER;
		cJSON *e = cJSON_CreateObject();

		cJSON_AddStringToObject(e, "name", f->rule);
		cJSON_AddStringToObject(e, "namespace", f->r.cluster.ns);
		add_u64(e, "flow_id", f->r.cluster.flow_id);
		cJSON_AddStringToObject(e, "threshold_type",
					sl_threshold_str(f->r.cluster.threshold));
		cJSON_AddStringToObject(e, "fallback",
					sl_fallback_str(f->r.cluster.fallback));
		cJSON_AddStringToObject(e, "state",
					sl_lease_state_str(f->l.state));
		add_time(e, "since", f->l.since_ns, now);
		add_u64(e, "since_ms_ago", (now - f->l.since_ns) / NSEC_PER_MSEC);
		add_u64(e, "limit", f->l.limit);
		add_u64(e, "grant", f->l.grant);
		add_u64(e, "lease_expires_in_ms",
			leased && f->l.lease_end_ns > now
				? (f->l.lease_end_ns - now) / NSEC_PER_MSEC
				: 0);
		add_token_server(e, c, s);
		add_u64(e, "last_sync_rtt_us", s->rtt_us);
		add_u64(e, "holders", f->l.holders);
		add_u64(e, "demand", f->demand);
		add_u64(e, "used", f->used);
		add_u64(e, "good_syncs", f->l.good);
		cJSON_AddItemToArray(fl, e);
	}
	pthread_mutex_unlock(&c->lock);
	return o;
}

void sl_cluster_set_secrets(struct sl_cluster_sync *c,
			    const struct sl_secrets *secrets)
{
	pthread_mutex_lock(&c->lock);
	c->cfg.secrets = secrets;
	pthread_mutex_unlock(&c->lock);
}

bool sl_cluster_rule_state(struct sl_cluster_sync *c, const char *rule,
			   enum sl_lease_state *state)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_flows && !found; i++)
		if (!strcmp(c->flows[i].rule, rule)) {
			*state = c->flows[i].l.state;
			found = true;
		}
	pthread_mutex_unlock(&c->lock);
	return found;
}

void sl_cluster_info(struct sl_cluster_sync *c,
		     struct sl_cluster_flow_info *flows,
		     struct sl_cluster_session_info *sess, size_t max,
		     size_t *n_flows, size_t *n_sess)
{
	uint64_t now = sl_now_ns();

	pthread_mutex_lock(&c->lock);
	*n_flows = c->n_flows < max ? c->n_flows : max;
	*n_sess = c->n_sess < max ? c->n_sess : max;
	for (size_t i = 0; i < *n_flows; i++) {
		const struct flow *f = &c->flows[i];
		bool leased = f->l.state == SL_LEASE_CLUSTER &&
			      f->l.lease_end_ns > now;

		flows[i] = (struct sl_cluster_flow_info){
			.rule = f->idx,
			.state = f->l.state,
			.lease_left_ns = leased ? f->l.lease_end_ns - now : 0,
			.holders = f->l.holders,
		};
	}
	for (size_t i = 0; i < *n_sess; i++) {
		const struct session *s = &c->sess[i];
		struct sl_cluster_session_info *o = &sess[i];

		memcpy(o->ns, s->ns, sizeof(o->ns));
		o->syncing = s->st == SESS_READY;
		o->server = s->server;
		o->failures = s->failures;
		o->term = s->term;
		memcpy(o->refused, s->refused, sizeof(o->refused));
		o->sync_rtt = s->sync_rtt;
	}
	pthread_mutex_unlock(&c->lock);
}

size_t sl_cluster_n_servers(const struct sl_cluster_sync *c)
{
	return c->n_servers;
}

void sl_cluster_server_name(const struct sl_cluster_sync *c, size_t i,
			    char *buf, size_t len)
{
	server_str(&c->servers[i], buf, len);
}
