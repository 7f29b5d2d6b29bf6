// SPDX-License-Identifier: GPL-2.0
/* The agent's metrics (metrics.h, docs/metrics.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_metrics.h"
#include "process_metrics.h"
#include "stats.h"
#include "util.h"

static const enum sl_lease_state flow_states[] = {
	SL_LEASE_CLUSTER, SL_LEASE_EXPIRED, SL_LEASE_FALLBACK,
};

struct rule_row {
	char name[SL_NAME_MAX + 1];
	enum sl_mode mode;
	enum sl_action action;
	enum sl_grade grade;
	uint32_t layer;
	bool per_source;
	bool warming;
	bool shedding; /* a "system" rule below count */
	uint64_t threshold;
	int flow; /* index into the scrape's flows; -1: not a synced flow */
};

/* What one scrape copied. */
struct scrape {
	size_t cap; /* of the arrays below, in rules */
	size_t n;
	struct rule_row *rules;
	struct sl_rule_stats *st;
	struct sl_cluster_flow_info *flows;
	struct sl_cluster_session_info *sess;
	size_t n_flows, n_sess;
	bool attached[SL_MAX_IFACES];
	struct sl_agent_status status;
	uint64_t host[SLUICE_ST_MAX];
	bool have_host;
	struct sl_guard_info *sys; /* cap of them */
	size_t n_sys;
};

static int grow(struct scrape *s, size_t n)
{
	void *p;

#define GROW(field)                                                     \
	do {                                                            \
		p = realloc(s->field, n * sizeof(*s->field));           \
		if (!p)                                                 \
			return -ENOMEM;                                 \
		s->field = p;                                           \
	} while (0)
	GROW(rules);
	GROW(st);
	GROW(flows);
	GROW(sess);
	GROW(sys);
#undef GROW
	s->cap = n;
	return 0;
}

static void scrape_free(struct scrape *s)
{
	free(s->rules);
	free(s->st);
	free(s->flows);
	free(s->sess);
	free(s->sys);
}

/* Everything that needs dp_lock, copied while it is held. */
static int copy_locked(const struct sl_agent_metrics_src *src,
		       struct scrape *s)
{
	const struct sl_dataplane *dp = src->dp;
	int err;

	s->n = dp->rules.n;
	src->status(src->arg, s->attached, &s->status);
	err = sl_dp_rules_stats(dp, s->st);
	for (size_t i = 0; i < s->n && !err; i++) {
		const struct sl_rule *r = &dp->rules.rules[i];
		struct rule_row *row = &s->rules[i];

		memcpy(row->name, r->name, sizeof(row->name));
		row->mode = r->mode;
		row->action = r->action;
		row->layer = r->layer;
		row->grade = r->grade;
		row->per_source = r->per_source;
		row->flow = -1;
		err = sl_dp_rule_threshold(dp, i, &row->threshold,
					   &row->warming);
		row->shedding = sl_guard_shedding(src->guard, dp->slots[i]);
	}
	if (!err && src->cluster)
		sl_cluster_info(src->cluster, s->flows, s->sess, s->cap,
				&s->n_flows, &s->n_sess);
	return err;
}

static int copy(const struct sl_agent_metrics_src *src, struct scrape *s)
{
	const struct sl_dataplane *dp = src->dp;
	size_t kept = 0;
	int err;

	/* the interfaces are fixed once the agent serves metrics */
	for (int i = 0; i < dp->n_ifaces; i++)
		s->attached[i] = sl_dp_iface_attached(&dp->ifaces[i]);
	for (;;) {
		size_t n;

		pthread_mutex_lock(src->dp_lock);
		n = dp->rules.n;
		if (n <= s->cap)
			break;
		pthread_mutex_unlock(src->dp_lock);
		err = grow(s, n);
		if (err)
			return err;
	}
	err = copy_locked(src, s);
	pthread_mutex_unlock(src->dp_lock);
	if (err)
		return err;
	/* a flow of a rule that left (the cluster module keeps its old list
	 * when it runs out of memory) is not shown */
	for (size_t j = 0; j < s->n_flows; j++) {
		if (s->flows[j].rule >= s->n)
			continue;
		s->flows[kept] = s->flows[j];
		s->rules[s->flows[kept].rule].flow = kept;
		kept++;
	}
	s->n_flows = kept;
	s->have_host = !sl_dp_host_stats(dp, s->host);
	/* the guard's rules are the data plane's (s->cap is enough) */
	s->n_sys = sl_guard_info(src->guard, s->sys, s->cap);
	if (s->n_sys > s->cap)
		s->n_sys = s->cap;
	return 0;
}

static const struct sl_metric
	ready = { "sluice_ready",
		  "1 when the agent is ready, as `sluice status --ready` "
		  "means it: every interface attached, the snapshot's rules "
		  "in force, and some rules unless --allow-empty." },
	in_force = { "sluice_rules_in_force",
		     "Rules the data plane judges packets by." },
	snap_rules = { "sluice_snapshot_rules",
		       "Rules in the snapshot, which should all be in force." },
	snap_version = { "sluice_snapshot_version",
			 "Version of the snapshot (the rule set)." },
	snap_age = { "sluice_snapshot_age_seconds",
		     "Seconds since the snapshot was written." },
	snap_prev = { "sluice_snapshot_from_previous",
		      "1 when the agent booted from rules.json.prev because "
		      "rules.json was damaged." },
	iface = { "sluice_interface_attached",
		  "1 while the XDP link is attached to the interface, by XDP "
		  "mode." },
	rule_info = { "sluice_rule_info",
		      "Always 1: a rule in force, its mode, action, grade (empty "
		      "for allow and deny), whether it is per source, and its "
		      "layer." },
	threshold = { "sluice_rule_threshold",
		      "Threshold in force per second, in the rule's unit "
		      "(packets, bytes or SYNs); per source for a per_source "
		      "rule." },
	threshold_source = { "sluice_rule_threshold_source",
			     "1 for where the threshold in force comes from: "
			     "the rule's count (static), its warm-up ramp, a "
			     "cluster lease, the cluster fallback, or a system "
			     "rule shedding (adaptive)." },
	sources = { "sluice_rule_sources",
		    "Live per-source entries of a per_source rule." },
	conns_open = { "sluice_rule_connections_open",
		       "TCP connections a conns rule counts open now." },
	overflow = { "sluice_rule_source_overflow_packets_total",
		     "Packets of a per_source rule at max_sources, judged on "
		     "its shared overflow budget." },
	brk_state = { "sluice_breaker_state",
		      "1 for the state of a rule's breaker: closed, open "
		      "(new requests failed fast) or half_open (probes "
		      "pass)." },
	brk_transitions = { "sluice_breaker_transitions_total",
			    "Transitions of a rule's breaker, by the state "
			    "entered." },
	brk_probes = { "sluice_breaker_probes_total",
		       "Half-open probes of a rule's breaker answered, by "
		       "result: success or failure." },
	brk_failed_fast = { "sluice_breaker_failed_fast_total",
			    "Requests (SYNs, datagrams) of a rule that its "
			    "open breaker answered by a RST or dropped." },
	brk_answers = { "sluice_breaker_answers_total",
			"Answers of the service to the requests of a rule "
			"with a breaker, by kind: ok, rst, icmp_unreach, "
			"timeout, slow." },
	sys_shedding = { "sluice_system_shedding",
			 "1 while a system rule sheds, for the signal that "
			 "started it: accept_queue, cpu_pressure, softirq or "
			 "load." },
	sys_sheds = { "sluice_system_sheds_total",
		      "Times a system rule started shedding." },
	sys_service = { "sluice_system_service_rate",
			"What the listeners of a shedding system rule take, "
			"per second, as measured; 0 when idle." },
	sys_queue = { "sluice_system_accept_queue",
		      "The accept queues of a system rule's listeners, "
		      "summed, as last sampled." },
	host_psi = { "sluice_host_cpu_pressure_ratio",
		     "Share of time some task waited for a CPU (PSI) over "
		     "the last 100 ms, sampled for system rules." },
	host_softirq = { "sluice_host_softirq_ratio",
			 "Share of the CPUs' time in softirq over the last "
			 "100 ms, sampled for system rules." },
	host_load = { "sluice_host_load_per_cpu",
		      "The 1-minute load average per CPU, sampled for system "
		      "rules." },
	malformed = { "sluice_packets_malformed_total",
		      "Packets with a truncated or invalid header, by the "
		      "layer at fault (dropped unless --pass-unclassified)." },
	unclassified = { "sluice_packets_unclassified_total",
			 "Packets lacking what a rule in force needs to "
			 "judge them, by reason (dropped unless "
			 "--pass-unclassified)." },
	flow_state = { "sluice_cluster_flow_state",
		       "1 for the state of a cluster flow: cluster (a lease "
		       "in force), lease_expired, fallback." },
	lease_left = { "sluice_cluster_lease_remaining_seconds",
		       "Seconds left of the flow's lease; 0 outside one." },
	holders = { "sluice_cluster_flow_holders",
		    "Nodes holding a lease of the flow, as the token server "
		    "last told; 0 before it told." },
	session_up = { "sluice_cluster_session_up",
		       "1 while the namespace's session with a token server "
		       "is authenticated and syncing." },
	session_term = { "sluice_cluster_session_term",
			 "The newest token server leader's term the namespace "
			 "has seen; answers of an older term are refused." },
	session_failures = { "sluice_cluster_session_failures",
			     "Failures of the namespace's session in a row "
			     "(0 once a sync is answered)." },
	session_server = { "sluice_cluster_session_server",
			   "1 for the token server the namespace syncs with; "
			   "0 for the others." },
	sync_rtt = { "sluice_cluster_sync_seconds",
		     "Round trip of a SYNC to its answer." },
	grants_refused = { "sluice_cluster_grants_refused_total",
			   "Answers of a token server refused, and the "
			   "session closed, by reason: a grant above the "
			   "rule's count (over_count) or a lease above "
			   "--max-lease-ttl-ms (ttl)." };

enum rule_counter {
	PASSED_PKTS,
	PASSED_BYTES,
	DROPPED_PKTS,
	DROPPED_BYTES,
	WOULD_DROP_PKTS,
	WOULD_DROP_BYTES,
	RULE_COUNTERS,
};

static const struct sl_metric rule_counters[RULE_COUNTERS] = {
	[PASSED_PKTS] = { "sluice_rule_passed_packets_total",
			  "Packets the rule let through." },
	[PASSED_BYTES] = { "sluice_rule_passed_bytes_total",
			   "Bytes the rule let through." },
	[DROPPED_PKTS] = { "sluice_rule_dropped_packets_total",
			   "Packets over the limit, dropped (enforcing "
			   "rules; 0 for shadow rules)." },
	[DROPPED_BYTES] = { "sluice_rule_dropped_bytes_total",
			    "Bytes over the limit, dropped (enforcing "
			    "rules)." },
	[WOULD_DROP_PKTS] = { "sluice_rule_would_drop_packets_total",
			      "Packets over the limit a shadow rule let "
			      "through (0 for enforcing rules)." },
	[WOULD_DROP_BYTES] = { "sluice_rule_would_drop_bytes_total",
			       "Bytes over the limit a shadow rule let "
			       "through." },
};

/* Help of the host counters, by the data plane's index (sl_host_stat_name
 * names them); the malformed ones are one family. */
static const char *const host_help[SLUICE_ST_MAX] = {
	[SLUICE_ST_UNMATCHED] = "Packets no rule matched (passed).",
	[SLUICE_ST_FRAGMENTS] = "Non-first fragments (no L4 header), "
				"judged as their datagram's first.",
	[SLUICE_ST_NO_RULE_CFG] = "Packets classified to a slot without "
				  "configuration; should stay 0.",
	[SLUICE_ST_SRC_TABLE_FULL] = "Packets blocked because the source "
				     "table was full; should stay 0.",
	[SLUICE_ST_CONN_UNTRACKED] = "SYNs of conns rules refused because "
				     "sluice cannot track their connection "
				     "(IPv6 extension headers, tunnels).",
	[SLUICE_ST_CONN_TABLE_FULL] = "SYNs of conns rules refused because "
				      "the connection table was full; should "
				      "stay 0.",
};

static uint64_t rule_counter(const struct scrape *s, size_t i,
			     enum rule_counter k)
{
	const struct sl_rule_stats *st = &s->st[i];
	bool shadow = s->rules[i].mode == SL_MODE_SHADOW;

	switch (k) {
	case PASSED_PKTS:
		return st->passed_pkts;
	case PASSED_BYTES:
		return st->passed_bytes;
	case DROPPED_PKTS:
		return shadow ? 0 : st->blocked_pkts;
	case DROPPED_BYTES:
		return shadow ? 0 : st->blocked_bytes;
	case WOULD_DROP_PKTS:
		return shadow ? st->blocked_pkts : 0;
	case WOULD_DROP_BYTES:
		return shadow ? st->blocked_bytes : 0;
	default:
		return 0;
	}
}

static enum sl_threshold_source source_of(const struct scrape *s,
					 const struct rule_row *r)
{
	return sl_threshold_source_of(r->flow >= 0,
				      r->flow >= 0 ? s->flows[r->flow].state
						   : SL_LEASE_FALLBACK,
				      r->warming, r->shedding);
}

static void put_agent(struct sl_metrics *m, const struct scrape *s,
		      const struct sl_dataplane *dp)
{
	const struct sl_agent_status *st = &s->status;
	int64_t age = time(NULL) - st->snapshot_updated_at;

	sl_metrics_gauge(m, &ready, NULL, 0, st->ready);
	sl_metrics_gauge(m, &in_force, NULL, 0, s->n);
	sl_metrics_gauge(m, &snap_rules, NULL, 0, st->snapshot_rules);
	sl_metrics_gauge(m, &snap_version, NULL, 0, st->snapshot_version);
	sl_metrics_gauge(m, &snap_age, NULL, 0, age > 0 ? age : 0);
	sl_metrics_gauge(m, &snap_prev, NULL, 0, st->snapshot_from_prev);
	if (st->has_config_source)
		sl_etcd_source_metrics(m, &st->config_source);
	for (int i = 0; i < dp->n_ifaces; i++) {
		const struct sl_iface *ifc = &dp->ifaces[i];
		const char *mode = sl_xdp_mode_str(ifc->mode);

		sl_metrics_gauge(m, &iface,
				 SL_LABELS({ "interface", ifc->name },
					   { "mode", mode }),
				 s->attached[i]);
	}
}

/* A sample labelled with rule i's name. */
static void rule_gauge(struct sl_metrics *m, const struct sl_metric *f,
		       const struct scrape *s, size_t i, double v)
{
	sl_metrics_gauge(m, f, SL_LABELS({ "rule", s->rules[i].name }), v);
}

static void rule_count(struct sl_metrics *m, const struct sl_metric *f,
		       const struct scrape *s, size_t i, uint64_t v)
{
	sl_metrics_counter(m, f, SL_LABELS({ "rule", s->rules[i].name }), v);
}

static void put_rules(struct sl_metrics *m, const struct scrape *s)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct rule_row *r = &s->rules[i];
		const char *per_source = r->per_source ? "true" : "false";
		bool limit = r->action == SL_ACTION_LIMIT;
		char layer[4];

		snprintf(layer, sizeof(layer), "%u", r->layer);
		sl_metrics_gauge(m, &rule_info,
				 SL_LABELS({ "rule", r->name },
					   { "mode", sl_mode_str(r->mode) },
					   { "action", sl_action_str(r->action) },
					   { "grade",
					     limit ? sl_grade_str(r->grade) : "" },
					   { "per_source", per_source },
					   { "layer", layer }),
				 1);
	}
	for (int k = 0; k < RULE_COUNTERS; k++)
		for (size_t i = 0; i < s->n; i++)
			rule_count(m, &rule_counters[k], s, i,
				   rule_counter(s, i, k));
	/* an allow or deny rule has no threshold */
	for (size_t i = 0; i < s->n; i++)
		if (s->rules[i].action == SL_ACTION_LIMIT)
			rule_gauge(m, &threshold, s, i,
				   s->rules[i].threshold);
	for (size_t i = 0; i < s->n; i++) {
		enum sl_threshold_source src = source_of(s, &s->rules[i]);

		if (s->rules[i].action != SL_ACTION_LIMIT)
			continue;

		for (int k = 0; k < SL_THRESHOLD_SOURCES; k++)
			sl_metrics_gauge(m, &threshold_source,
					 SL_LABELS({ "rule", s->rules[i].name },
						   { "source",
						     sl_threshold_source_names[k] }),
					 k == (int)src);
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->rules[i].per_source)
			rule_gauge(m, &sources, s, i, s->st[i].sources);
	for (size_t i = 0; i < s->n; i++)
		if (s->rules[i].grade == SL_GRADE_CONNS &&
		    s->rules[i].action == SL_ACTION_LIMIT)
			rule_gauge(m, &conns_open, s, i, s->st[i].conns_open);
	for (size_t i = 0; i < s->n; i++)
		if (s->rules[i].per_source)
			rule_count(m, &overflow, s, i,
				   s->st[i].source_overflow);
}

/* Each family's samples together, over the rules with a breaker. */
static void put_breakers(struct sl_metrics *m, const struct scrape *s)
{
	static const unsigned int states[] = {
		SLUICE_BRK_CLOSED, SLUICE_BRK_OPEN, SLUICE_BRK_HALF_OPEN,
	};
	static const char *const results[] = { "success", "failure" };
	const struct sl_breaker_stats *b;
	const char *rule;

#define EACH_BREAKER                                                    \
	for (size_t i = 0; i < s->n; i++)                               \
		if (s->st[i].has_breaker && (b = &s->st[i].breaker) &&  \
		    (rule = s->rules[i].name))
	EACH_BREAKER
	for (size_t k = 0; k < ARRAY_SIZE(states); k++)
		sl_metrics_gauge(m, &brk_state,
				 SL_LABELS({ "rule", rule },
					   { "state",
					     sl_breaker_state_str(states[k]) }),
				 b->state == states[k]);
	EACH_BREAKER
	for (size_t k = 0; k < ARRAY_SIZE(states); k++)
		sl_metrics_counter(m, &brk_transitions,
				   SL_LABELS({ "rule", rule },
					     { "to",
					       sl_breaker_state_str(states[k]) }),
				   b->to_state[states[k]]);
	EACH_BREAKER
	for (size_t k = 0; k < ARRAY_SIZE(results); k++)
		sl_metrics_counter(m, &brk_probes,
				   SL_LABELS({ "rule", rule },
					     { "result", results[k] }),
				   k ? b->probe_failure : b->probe_success);
	EACH_BREAKER
	sl_metrics_counter(m, &brk_failed_fast, SL_LABELS({ "rule", rule }),
			   b->failed_fast);
	EACH_BREAKER
	for (unsigned int k = 0; k < SLUICE_BRK_ANSWERS; k++)
		sl_metrics_counter(m, &brk_answers,
				   SL_LABELS({ "rule", rule },
					     { "answer",
					       sl_breaker_answer_str(k) }),
				   b->answered[k]);
#undef EACH_BREAKER
}

/* Each family's samples together, over the rules with a "system"; the
 * host's signals as the guard last sampled them (when it has rules). */
static void put_system(struct sl_metrics *m, const struct scrape *s)
{
	const struct sl_guard_info *g = s->sys;

	for (size_t i = 0; i < s->n_sys; i++)
		for (int k = SL_ADAPT_QUEUE; k < SL_ADAPT_SIGNALS; k++)
			sl_metrics_gauge(m, &sys_shedding,
					 SL_LABELS({ "rule", g[i].name },
						   { "signal",
						     sl_adapt_signal_names[k] }),
					 g[i].shedding && (int)g[i].why == k);
	for (size_t i = 0; i < s->n_sys; i++)
		sl_metrics_counter(m, &sys_sheds,
				   SL_LABELS({ "rule", g[i].name }),
				   g[i].sheds);
	for (size_t i = 0; i < s->n_sys; i++)
		sl_metrics_gauge(m, &sys_service,
				 SL_LABELS({ "rule", g[i].name }),
				 (uint64_t)g[i].service);
	for (size_t i = 0; i < s->n_sys; i++)
		if (g[i].queue >= 0)
			sl_metrics_gauge(m, &sys_queue,
					 SL_LABELS({ "rule", g[i].name }),
					 (uint64_t)g[i].queue);
	if (!s->n_sys)
		return;
	if (g[0].host.cpu_pressure >= 0)
		sl_metrics_gauge(m, &host_psi, NULL, 0,
				   g[0].host.cpu_pressure);
	if (g[0].host.softirq >= 0)
		sl_metrics_gauge(m, &host_softirq, NULL, 0,
				   g[0].host.softirq);
	if (g[0].host.load >= 0)
		sl_metrics_gauge(m, &host_load, NULL, 0, g[0].host.load);
}

/* The host counters named "<family>_<reason>": one metric each family,
 * labelled by reason. */
static const struct {
	const char *prefix;
	const struct sl_metric *metric;
} host_families[] = {
	{ "malformed_", &malformed },
	{ "unclassified_", &unclassified },
};

static int host_family(const char *stat)
{
	for (size_t i = 0; i < ARRAY_SIZE(host_families); i++)
		if (!strncmp(stat, host_families[i].prefix,
			     strlen(host_families[i].prefix)))
			return (int)i;
	return -1;
}

static void put_host(struct sl_metrics *m, const struct scrape *s)
{
	char name[SL_METRIC_NAME_MAX + 1];

	if (!s->have_host)
		return;
	for (int k = 0; k < SLUICE_ST_MAX; k++) {
		const char *stat = sl_host_stat_name(k);
		struct sl_metric f = { name, host_help[k] };

		if (host_family(stat) >= 0)
			continue;
		snprintf(name, sizeof(name), "sluice_packets_%s_total", stat);
		sl_metrics_counter(m, &f, NULL, 0, s->host[k]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(host_families); i++) {
		size_t plen = strlen(host_families[i].prefix);

		for (int k = 0; k < SLUICE_ST_MAX; k++) {
			const char *stat = sl_host_stat_name(k);

			if (host_family(stat) != (int)i)
				continue;
			sl_metrics_counter(m, host_families[i].metric,
					   SL_LABELS({ "reason", stat + plen }),
					   s->host[k]);
		}
	}
}

/* A sample labelled with session j's namespace. */
static void ns_gauge(struct sl_metrics *m, const struct sl_metric *f,
		     const struct scrape *s, size_t j, double v)
{
	sl_metrics_gauge(m, f, SL_LABELS({ "namespace", s->sess[j].ns }), v);
}

static void put_cluster(struct sl_metrics *m, const struct scrape *s,
			const struct sl_cluster_sync *c)
{
	size_t n_servers = sl_cluster_n_servers(c);
	char server[SL_HOST_MAX + 10];

	for (size_t j = 0; j < s->n_flows; j++) {
		const struct sl_cluster_flow_info *f = &s->flows[j];

		for (size_t k = 0; k < ARRAY_SIZE(flow_states); k++) {
			const char *state = sl_lease_state_str(flow_states[k]);

			sl_metrics_gauge(m, &flow_state,
					 SL_LABELS({ "rule",
						     s->rules[f->rule].name },
						   { "state", state }),
					 f->state == flow_states[k]);
		}
	}
	for (size_t j = 0; j < s->n_flows; j++)
		rule_gauge(m, &lease_left, s, s->flows[j].rule,
			   s->flows[j].lease_left_ns / 1e9);
	for (size_t j = 0; j < s->n_flows; j++)
		rule_gauge(m, &holders, s, s->flows[j].rule,
			   s->flows[j].holders);
	for (size_t j = 0; j < s->n_sess; j++)
		ns_gauge(m, &session_up, s, j, s->sess[j].syncing);
	for (size_t j = 0; j < s->n_sess; j++)
		ns_gauge(m, &session_failures, s, j, s->sess[j].failures);
	for (size_t j = 0; j < s->n_sess; j++)
		ns_gauge(m, &session_term, s, j, s->sess[j].term);
	for (size_t j = 0; j < s->n_sess; j++) {
		const struct sl_cluster_session_info *ss = &s->sess[j];

		for (size_t k = 0; k < n_servers; k++) {
			sl_cluster_server_name(c, k, server, sizeof(server));
			sl_metrics_gauge(m, &session_server,
					 SL_LABELS({ "namespace", ss->ns },
						   { "server", server }),
					 ss->syncing && ss->server == k);
		}
	}
	for (size_t j = 0; j < s->n_sess; j++)
		for (int k = 0; k < SL_REFUSALS; k++)
			sl_metrics_counter(
				m, &grants_refused,
				SL_LABELS({ "namespace", s->sess[j].ns },
					  { "reason",
					    sl_cluster_refusal_names[k] }),
				s->sess[j].refused[k]);
	for (size_t j = 0; j < s->n_sess; j++)
		sl_metrics_histogram(m, &sync_rtt,
				     SL_LABELS({ "namespace", s->sess[j].ns }),
				     &s->sess[j].sync_rtt);
}

int sl_agent_metrics(void *arg, struct sl_text *out)
{
	const struct sl_agent_metrics_src *src = arg;
	struct scrape s = { 0 };
	struct sl_metrics m;
	int err = copy(src, &s);

	if (err) {
		scrape_free(&s);
		return err;
	}
	sl_metrics_init(&m, out);
	sl_metrics_build_info(&m);
	sl_metrics_process_self(&m);
	put_agent(&m, &s, src->dp);
	put_rules(&m, &s);
	put_breakers(&m, &s);
	put_system(&m, &s);
	put_host(&m, &s);
	if (src->cluster)
		put_cluster(&m, &s, src->cluster);
	if (src->tokend)
		err = sl_tokend_metrics(src->tokend, &m);
	scrape_free(&s);
	return err;
}
