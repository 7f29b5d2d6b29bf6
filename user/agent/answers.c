// SPDX-License-Identifier: GPL-2.0
/* `sluice agent`: the answers of the requests that only read (status,
 * stats, list, drops, explain). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#include "agent_state.h"
#include "droptop.h"
#include "explain.h"
#include "json_text.h"
#include "rules_json.h"
#include "stats.h"
#include "util.h"

static void add_reason(cJSON *reasons, const char *why)
{
	if (reasons)
		cJSON_AddItemToArray(reasons, cJSON_CreateString(why));
}

/*
 * Ready, as `sluice status --ready` and the sluice_ready metric mean it:
 * every interface attached (attached[i] for dp.ifaces[i]), the snapshot's
 * rules in force, and some rules unless --allow-empty. Why not goes into
 * reasons unless it is NULL. dp_lock held, or on the control loop.
 */
bool agent_check_ready(const struct agent *a, const bool *attached,
		       cJSON *reasons)
{
	bool ready = true;

	for (int i = 0; i < a->dp.n_ifaces; i++) {
		char why[64];

		if (attached[i])
			continue;
		ready = false;
		snprintf(why, sizeof(why), "%s is not attached",
			 a->dp.ifaces[i].name);
		add_reason(reasons, why);
	}
	if (a->in_force_version != a->snap.version) {
		ready = false;
		add_reason(reasons, "the rules in force are not the snapshot's");
	}
	if (!a->dp.rules.n && !agent_empty_allowed(a)) {
		ready = false;
		add_reason(reasons, "no rules in force");
	}
	return ready;
}

/* The control socket's own state: who holds it, what it turned away. */
static void add_control_status(struct agent *a, cJSON *r)
{
	struct sl_ctl_server_stats st;
	cJSON *o = cJSON_AddObjectToObject(r, "control");

	sl_ctl_server_get_stats(a->ctl, &st);
	cJSON_AddNumberToObject(o, "clients", st.clients);
	cJSON_AddNumberToObject(o, "max_clients", SL_CTL_MAX_CLIENTS);
	cJSON_AddNumberToObject(o, "accepted", st.accepted);
	cJSON_AddNumberToObject(o, "answered", st.answered);
	cJSON_AddNumberToObject(o, "timed_out", st.timed_out);
	cJSON_AddNumberToObject(o, "displaced", st.displaced);
	cJSON_AddNumberToObject(o, "refused", st.refused);
}

/* The state of each rule's breaker: {"rule": "state", ...}. */
static void add_breaker_status(struct agent *a, cJSON *r)
{
	cJSON *o = cJSON_AddObjectToObject(r, "breakers");
	struct sl_rule_stats st;

	pthread_mutex_lock(&a->dp_lock);
	for (size_t i = 0; i < a->dp.rules.n; i++)
		if (a->dp.rules.rules[i].breaker.enabled &&
		    !sl_dp_rule_stats(&a->dp, i, &st))
			cJSON_AddStringToObject(
			    o, a->dp.rules.rules[i].name,
			    sl_breaker_state_str(st.breaker.state));
	pthread_mutex_unlock(&a->dp_lock);
}

cJSON *agent_do_status(struct agent *a)
{
	cJSON *r = sl_ctl_ok(), *reasons, *snap, *ifs;
	char when[32], layout[24], path[PATH_MAX];
	bool attached[SL_MAX_IFACES];

	reasons = cJSON_AddArrayToObject(r, "not_ready");
	ifs = cJSON_CreateArray();
	for (int i = 0; i < a->dp.n_ifaces; i++) {
		struct sl_iface *ifc = &a->dp.ifaces[i];
		bool up = attached[i] = sl_dp_iface_attached(ifc);
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", ifc->name);
		cJSON_AddNumberToObject(o, "ifindex", ifc->ifindex);
		cJSON_AddStringToObject(o, "mode", sl_xdp_mode_str(ifc->mode));
		cJSON_AddBoolToObject(o, "multi_buffer", ifc->frags);
		cJSON_AddBoolToObject(o, "attached", up);
		cJSON_AddBoolToObject(o, "adopted", ifc->adopted);
		cJSON_AddBoolToObject(o, "egress", ifc->egress);
		cJSON_AddNumberToObject(o, "rules_in_force",
					up ? a->dp.rules.n : 0);
		cJSON_AddItemToArray(ifs, o);
	}
	cJSON_AddBoolToObject(r, "ready", agent_check_ready(a, attached, reasons));
	cJSON_AddNumberToObject(r, "pid", getpid());
	cJSON_AddStringToObject(r, "sluice_version", sl_version);
	cJSON_AddNumberToObject(r, "uptime_s", (sl_now_ns() / 1e9) - a->started);
	cJSON_AddBoolToObject(r, "allow_empty", a->allow_empty);
	cJSON_AddBoolToObject(r, "adopted", a->dp.adopted);
	cJSON_AddBoolToObject(r, "upgraded", a->dp.upgraded);
	snprintf(layout, sizeof(layout), "%016llx",
		 (unsigned long long)a->dp.layout);
	cJSON_AddStringToObject(r, "pinned_layout", layout);
	snap = cJSON_AddObjectToObject(r, "snapshot");
	snprintf(path, sizeof(path), "%s/%s", a->state_dir, SL_SNAPSHOT_FILE);
	cJSON_AddStringToObject(snap, "path", path);
	cJSON_AddNumberToObject(snap, "version", a->snap.version);
	sl_format_utc(a->snap.updated_at * 1000, false, when);
	cJSON_AddStringToObject(snap, "updated_at", when);
	cJSON_AddNumberToObject(snap, "age_s",
				(double)(time(NULL) - a->snap.updated_at));
	cJSON_AddNumberToObject(snap, "rules", a->snap.rules.n);
	cJSON_AddBoolToObject(snap, "from_prev", a->snap_from_prev);
	cJSON_AddNumberToObject(r, "rules_in_force", a->dp.rules.n);
	cJSON_AddNumberToObject(r, "in_force_version", a->in_force_version);
	cJSON_AddItemToObject(r, "interfaces", ifs);
	add_breaker_status(a, r);
	cJSON_AddItemToObject(r, "system", sl_guard_status(a->guard));
	add_control_status(a, r);
	if (a->cluster)
		cJSON_AddItemToObject(r, "cluster",
				      sl_cluster_status(a->cluster));
	if (a->etcd)
		cJSON_AddItemToObject(r, "config_source",
				      sl_etcd_source_status(a->etcd));
	return r;
}

/* Where a rule's threshold comes from and what it is now. */
struct rule_threshold {
	uint64_t limit;
	enum sl_threshold_source source;
	bool cluster_flow;
	enum sl_lease_state state; /* of a cluster flow */
};

/* Rule names are [a-z0-9_.-] (docs/rules.md): nothing to escape. */
static void add_rule_stats(struct sl_text *t, const struct sl_rule *ru,
			   const struct sl_rule_stats *st,
			   const struct rule_threshold *th)
{
	sl_text_printf(t,
		       "{\"name\":\"%s\",\"mode\":\"%s\",\"action\":\"%s\","
		       "\"layer\":%u,",
		       ru->name, sl_mode_str(ru->mode),
		       sl_action_str(ru->action), (unsigned int)ru->layer);
	/* an allow or deny rule has no limit */
	if (ru->action == SL_ACTION_LIMIT)
		sl_text_printf(t, "\"grade\":\"%s\",\"count\":%llu,",
			       sl_grade_str(ru->grade),
			       (unsigned long long)ru->count);
	sl_text_printf(t,
		       "\"interval_ms\":%u,"
		       "\"passed_pps\":%llu,\"blocked_pps\":%llu,"
		       "\"passed_Bps\":%llu,\"blocked_Bps\":%llu,"
		       "\"passed_pkts\":%llu,\"passed_bytes\":%llu,"
		       "\"blocked_pkts\":%llu,\"blocked_bytes\":%llu,"
		       "\"per_source\":%s,\"sources\":%llu,"
		       "\"max_sources\":%llu,\"source_overflow\":%llu",
		       (unsigned int)ru->interval_ms,
		       (unsigned long long)llround(st->passed_pps),
		       (unsigned long long)llround(st->blocked_pps),
		       (unsigned long long)llround(st->passed_Bps),
		       (unsigned long long)llround(st->blocked_Bps),
		       (unsigned long long)st->passed_pkts,
		       (unsigned long long)st->passed_bytes,
		       (unsigned long long)st->blocked_pkts,
		       (unsigned long long)st->blocked_bytes,
		       ru->per_source ? "true" : "false",
		       (unsigned long long)st->sources,
		       (unsigned long long)ru->max_sources,
		       (unsigned long long)st->source_overflow);
	if (ru->action == SL_ACTION_LIMIT && ru->grade == SL_GRADE_CONNS)
		sl_text_printf(t, ",\"conns_open\":%llu",
			       (unsigned long long)st->conns_open);
	if (ru->action == SL_ACTION_LIMIT)
		sl_text_printf(t,
			       ",\"threshold\":%llu,\"threshold_source\":\"%s\"",
			       (unsigned long long)th->limit,
			       sl_threshold_source_names[th->source]);
	if (th->cluster_flow)
		sl_text_printf(t, ",\"cluster_state\":\"%s\"",
			       sl_lease_state_str(th->state));
	if (st->has_breaker) {
		const struct sl_breaker_stats *b = &st->breaker;
		uint64_t answers = 0;

		for (unsigned int k = 0; k < SLUICE_BRK_ANSWERS; k++)
			answers += b->answered[k];
		sl_text_printf(
		    t,
		    ",\"breaker\":{\"state\":\"%s\",\"since_ns\":%llu,"
		    "\"opened\":%llu,\"half_opened\":%llu,\"closed\":%llu,"
		    "\"probes_passed\":%llu,\"probe_success\":%llu,"
		    "\"probe_failure\":%llu,\"failed_fast\":%llu,"
		    "\"answers\":%llu,\"errors\":%llu,\"answered\":{",
		    sl_breaker_state_str(b->state),
		    (unsigned long long)b->since_ns,
		    (unsigned long long)b->to_state[SLUICE_BRK_OPEN],
		    (unsigned long long)b->to_state[SLUICE_BRK_HALF_OPEN],
		    (unsigned long long)b->to_state[SLUICE_BRK_CLOSED],
		    (unsigned long long)b->probes_passed,
		    (unsigned long long)b->probe_success,
		    (unsigned long long)b->probe_failure,
		    (unsigned long long)b->failed_fast,
		    (unsigned long long)answers,
		    (unsigned long long)(answers -
					 b->answered[SLUICE_ANS_OK]));
		for (unsigned int k = 0; k < SLUICE_BRK_ANSWERS; k++)
			sl_text_printf(t, "%s\"%s\":%llu", k ? "," : "",
				       sl_breaker_answer_str(k),
				       (unsigned long long)b->answered[k]);
		sl_text_printf(t, "}}");
	}
	sl_text_printf(t, "}");
}

/* The stats answer as text (docs/cli.md), or NULL when out of memory. */
char *agent_do_stats(struct agent *a)
{
	struct sl_rule_stats *st = calloc(a->dp.rules.n + 1, sizeof(*st));
	struct sl_text t = { 0 };
	uint64_t hs[SLUICE_ST_MAX];
	int err;

	if (!st)
		return NULL;
	pthread_mutex_lock(&a->dp_lock);
	err = sl_dp_rules_stats(&a->dp, st);
	if (err) {
		pthread_mutex_unlock(&a->dp_lock);
		free(st);
		return sl_ctl_answer_text(sl_ctl_error(
			"internal", "reading the counters: %s", strerror(-err)));
	}
	sl_text_printf(&t, "{\"ok\":true,\"time_ns\":%llu,\"rules\":[",
		       (unsigned long long)sl_dp_now(&a->dp));
	for (size_t i = 0; i < a->dp.rules.n && !err; i++) {
		const struct sl_rule *ru = &a->dp.rules.rules[i];
		struct rule_threshold th = { 0 };
		bool warming;

		err = sl_dp_rule_threshold(&a->dp, i, &th.limit, &warming);
		th.cluster_flow = ru->cluster.enabled && a->cluster &&
				  sl_cluster_rule_state(a->cluster, ru->name,
							&th.state);
		th.source = sl_threshold_source_of(
			th.cluster_flow, th.state, warming,
			sl_guard_shedding(a->guard, a->dp.slots[i]));
		if (i)
			sl_text_printf(&t, ",");
		add_rule_stats(&t, ru, &st[i], &th);
	}
	pthread_mutex_unlock(&a->dp_lock);
	if (err) {
		free(st);
		free(t.buf);
		return sl_ctl_answer_text(sl_ctl_error(
			"internal", "reading the thresholds: %s", strerror(-err)));
	}
	sl_text_printf(&t, "],\"host\":{");
	if (!sl_dp_host_stats(&a->dp, hs))
		for (int k = 0; k < SLUICE_ST_MAX; k++)
			sl_text_printf(&t, "%s\"%s\":%llu", k ? "," : "",
				       sl_host_stat_name(k),
				       (unsigned long long)hs[k]);
	sl_text_printf(&t, "}}");
	free(st);
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

/* The rule.list answer as text: the rules in their canonical form. */
char *agent_do_list(struct agent *a)
{
	char when[SL_UTC_MS_LEN + 1], *rules = sl_rules_text(&a->snap.rules);
	struct sl_text t = { 0 };

	if (!rules)
		return NULL;
	sl_format_utc(a->snap.updated_at * 1000, false, when);
	sl_text_u64(&t, "{\"ok\":true,\"version\":", a->snap.version);
	sl_text_printf(&t, ",\"updated_at\":\"%s\",%s\"rules\":%s}", when,
		       a->snap.rules.allow_empty ? "\"allow_empty\":true," : "",
		       rules);
	free(rules);
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

static const char *const explain_outcomes[] = {
	[SLUICE_EXPLAIN_NOT_IP] = "not_ip",
	[SLUICE_EXPLAIN_UNCLASSIFIED] = "unclassified",
	[SLUICE_EXPLAIN_NO_RULE] = "no_rule",
	[SLUICE_EXPLAIN_RULE] = "rule",
};
static const char *const explain_verdicts[] = {
	[SL_EXPLAIN_PASS] = "pass",
	[SL_EXPLAIN_DROP] = "drop",
	[SL_EXPLAIN_SHADOW] = "shadow_drop",
};

/* `sluice drops`: the sources each rule drops most. */
cJSON *agent_do_drops(struct agent *a, const struct sl_ctl_req *req)
{
	const char *rule = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(req->json, "rule"));
	const cJSON *top = cJSON_GetObjectItemCaseSensitive(req->json, "top");
	uint64_t n = 10;
	cJSON *r;
	int err;

	if (top && !sl_json_uint(top, 1, SL_DROPTOP_KEEP, &n))
		return sl_ctl_error("invalid", "request: 'top' must be an "
					       "integer from 1 to %d",
				    SL_DROPTOP_KEEP);
	if (!a->drops)
		return sl_ctl_error("unavailable", "sampled drops are "
						   "unavailable (see the "
						   "agent's log)");
	r = sl_ctl_ok();
	pthread_mutex_lock(&a->dp_lock);
	err = sl_agent_drops_answer(a->drops, &a->dp, rule, n, r, a->err,
				    sizeof(a->err));
	pthread_mutex_unlock(&a->dp_lock);
	if (err) {
		cJSON_Delete(r);
		return err == -ENOENT ? sl_ctl_error("not_found", "%s", a->err)
				      : sl_ctl_error("internal", "drops: %s",
						     strerror(-err));
	}
	return r;
}

/* A rule's part of an explain answer: its name, action and budget. */
static void explain_rule(cJSON *r, const struct sl_rule *rule,
			 const struct sl_explain_judge *j)
{
	cJSON_AddStringToObject(r, "rule", rule->name);
	cJSON_AddStringToObject(r, "mode", sl_mode_str(rule->mode));
	cJSON_AddStringToObject(r, "action", sl_action_str(rule->action));
	cJSON_AddNumberToObject(r, "layer", rule->layer);
	if (rule->action != SL_ACTION_LIMIT)
		return;
	cJSON_AddStringToObject(r, "grade", sl_grade_str(rule->grade));
	cJSON_AddNumberToObject(r, "count", j->bpf.count);
	cJSON_AddNumberToObject(r, "cost", j->bpf.cost);
	cJSON_AddNumberToObject(r, "window", j->bpf.window);
	cJSON_AddNumberToObject(r, "used", j->bpf.used);
	cJSON_AddNumberToObject(r, "credit", j->bpf.credit);
	if (rule->per_source)
		cJSON_AddStringToObject(r, "source",
					j->bpf.source ==
						SLUICE_EXPLAIN_SRC_TRACKED
					    ? "tracked"
					    : "untracked");
	else
		cJSON_AddNumberToObject(r, "cached", j->cached);
}

/* `sluice explain`: the data plane's answer for the request's packet:
 * the deciding rule, and with layers each layer's rule in "layers". */
cJSON *agent_do_explain(struct agent *a, const struct sl_ctl_req *req)
{
	struct sl_explain_query q;
	struct sl_explain e;
	const struct sl_rule *rules = a->dp.rules.rules;
	cJSON *r, *layers;
	int err;

	if (sl_ctl_req_explain(req, &q, a->err, sizeof(a->err)))
		return agent_request_error(a, -EINVAL);
	pthread_mutex_lock(&a->dp_lock);
	err = sl_dp_explain(&a->dp, &q, &e);
	r = err ? sl_ctl_error("internal", "explain: %s", strerror(-err))
		: sl_ctl_ok();
	if (err)
		goto out;
	cJSON_AddNumberToObject(r, "frame_bytes", e.frame_len);
	cJSON_AddStringToObject(r, "outcome", explain_outcomes[e.bpf.outcome]);
	if (e.bpf.outcome == SLUICE_EXPLAIN_UNCLASSIFIED)
		cJSON_AddStringToObject(r, "reason",
					sl_host_stat_name(e.bpf.reason));
	if (e.rule >= 0)
		explain_rule(r, &rules[e.rule], &e.judge[e.decider]);
	cJSON_AddStringToObject(r, "verdict", explain_verdicts[e.verdict]);
	cJSON_AddStringToObject(r, "why", e.why);
	if (e.n_judges < 2)
		goto out;
	layers = cJSON_AddArrayToObject(r, "layers");
	for (size_t i = 0; layers && i < e.n_judges; i++) {
		cJSON *l = cJSON_CreateObject();

		if (!l || !cJSON_AddItemToArray(layers, l))
			break;
		explain_rule(l, &rules[e.judge[i].rule], &e.judge[i]);
		cJSON_AddStringToObject(l, "verdict",
					i > e.decider
					    ? "not_reached"
					    : explain_verdicts[e.judge[i]
								   .verdict]);
		cJSON_AddStringToObject(l, "why", e.judge[i].why);
	}
out:
	pthread_mutex_unlock(&a->dp_lock);
	return r;
}
