// SPDX-License-Identifier: GPL-2.0
/*
 * The agent: reads the snapshot before anything else, fills every map,
 * then attaches (the first packet is already judged), serves the control
 * socket, and leaves the data plane attached when it exits.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "agent.h"
#include "agent_metrics.h"
#include "cluster.h"
#include "drops.h"
#include "droptop.h"
#include "ctl.h"
#include "etcd.h"
#include "etcd_source.h"
#include "explain.h"
#include "guard.h"
#include "http_metrics.h"
#include "json_text.h"
#include "loader.h"
#include "log.h"
#include "params.h"
#include "rules.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "ruleset.h"
#include "snapshot.h"
#include "stats.h"
#include "election.h"
#include "tokensrv.h"
#include "util.h"

#define ERRBUF 8192
#define SL_LOG_CHANGES_LEN 512 /* of the rule names a change logs */

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

static volatile sig_atomic_t stop, reload;

static void on_signal(int sig)
{
	stop = sig;
}

static void on_sighup(int sig)
{
	reload = sig;
}

/* What the table cannot say: options that need others. */
static int check_args(const struct sl_cmd *cmd, struct agent *a)
{
	/* the embedded server is this agent's token server unless told */
	if (a->serve_tokens && !a->token_servers)
		a->token_servers = a->serve_tokens;
	if ((a->node_id || a->secrets_file) && !a->token_servers)
		return sl_params_error(cmd, "--node-id and --secrets need "
					    "--token-server or --serve-tokens");
	if (a->election.name && (!a->serve_tokens || !a->etcd_endpoints))
		return sl_params_error(cmd, "--election needs --serve-tokens "
					    "and --etcd");
	if (a->election.name && !a->election.advertise)
		return sl_params_error(cmd, "--election needs --advertise "
					    "HOST:PORT, where agents reach "
					    "this replica");
	if (a->etcd_endpoints && !a->etcd_key && !a->election.name)
		return sl_params_error(cmd, "--etcd needs --etcd-key (the "
					    "rules) or --election");
	if (a->etcd_key && !a->etcd_endpoints)
		return sl_params_error(cmd, "--etcd-key needs --etcd");
	if (a->drop_malformed && a->pass_unclassified)
		return sl_params_error(cmd, "--drop-malformed and "
					    "--pass-unclassified: one verdict");
	if (sl_etcd_auth_given(&a->etcd_auth) && !a->etcd_endpoints)
		return sl_params_error(cmd, "--etcd-cacert, --etcd-cert, "
					    "--etcd-user... need --etcd");
	a->election.endpoints = a->etcd_endpoints;
	a->election.auth = a->etcd_auth;
	if (a->replace_snapshot && !a->rules_file)
		return sl_params_error(cmd, "--replace-snapshot needs --rules");
	if (a->etcd_key && a->rules_file)
		return sl_params_error(cmd, "--rules and --etcd: one source "
					    "of rules (the snapshot boots "
					    "first either way)");
	if (a->etcd_endpoints) {
		struct sl_etcd probe;

		if (sl_etcd_init(&probe, a->etcd_endpoints, &a->etcd_auth,
				 a->etcd_key ? a->etcd_key : a->election.name,
				 a->err, sizeof(a->err)))
			return sl_params_error(cmd, "%s", a->err);
		sl_etcd_free(&probe);
	}
	if (a->metrics_addr && !sl_http_metrics_addr_valid(a->metrics_addr))
		return sl_params_error(cmd, "--metrics: '%s' is not "
					    SL_HTTP_METRICS_ADDR_FORM,
				       a->metrics_addr);
	return 0;
}

static bool same_rules(const struct sl_ruleset *x, const struct sl_ruleset *y)
{
	char *jx = sl_ruleset_to_json(x, false);
	char *jy = sl_ruleset_to_json(y, false);
	bool same = jx && jy && !strcmp(jx, jy);

	free(jx);
	free(jy);
	return same;
}

/*
 * The version after v. A current file that was damaged held v + 1 (each
 * write keeps its predecessor as .prev): skip it, so that a version number
 * never names two rule sets and --if-version cannot match the lost one.
 */
static uint64_t version_after(uint64_t v, bool from_prev)
{
	return v + (from_prev ? 2 : 1);
}

/* What turns old into new, for a log line (the names are cut). */
static void diff_text(const struct sl_ruleset *old, const struct sl_ruleset *new,
		      char *buf, size_t len)
{
	struct sl_ruleset_diff d;

	if (sl_ruleset_diff(old, new, &d))
		snprintf(buf, len, "(out of memory)");
	else
		sl_ruleset_diff_text(&d, buf, len);
	sl_ruleset_diff_free(&d);
}

/*
 * --rules FILE and the snapshot (docs/operations.md, "Where the rules come
 * from"): the file's rules become the snapshot, unless the CLI changed
 * the snapshot since the file was loaded. Then the snapshot stays if the
 * file did not change either, and a start that would drop the changes of
 * one of them is refused, unless --replace-snapshot lets the file win.
 * The snapshot records the file and its checksum to tell.
 */
static int rules_from_file(struct agent *a)
{
	struct sl_snapshot_source src = { .rule_file = (char *)a->rules_file };
	struct sl_snapshot cur = { 0 };
	struct sl_ruleset rs = { 0 };
	uint64_t version = 1;
	bool from_prev, same_file, same;
	char what[SL_LOG_CHANGES_LEN];

	if (sl_rules_load_file(a->rules_file, &rs, a->err, sizeof(a->err))) {
		pr_err("%s: refusing to start, the rule file is invalid:\n%s",
		       a->rules_file, a->err);
		return -EINVAL;
	}
	/* refuse before writing: a refused start leaves the snapshot alone */
	if (!rs.n && !a->allow_empty && !rs.allow_empty) {
		pr_err("%s holds no rules: refusing to start with nothing in "
		       "force (--allow-empty if that is intended); the "
		       "snapshot is left as it was",
		       a->rules_file);
		sl_ruleset_free(&rs);
		return -ENODATA;
	}
	sl_snapshot_checksum(&rs, src.file_checksum);
	/* versions only go up, even past a damaged current file */
	if (!sl_snapshot_load_boot(a->state_dir, &cur, &from_prev, a->err,
				   sizeof(a->err))) {
		const struct sl_snapshot_source *was = &cur.source;

		version = version_after(cur.version, from_prev);
		same_file = was->rule_file &&
			    !strcmp(was->rule_file, a->rules_file);
		same = !from_prev && same_rules(&cur.rules, &rs) &&
		       cur.rules.allow_empty == rs.allow_empty;
		/* the same rules from elsewhere: recorded as the file's */
		if (same && same_file &&
		    !strcmp(was->file_checksum, src.file_checksum)) {
			sl_ruleset_free(&rs);
			a->snap = cur;
			return 0;
		}
		diff_text(&cur.rules, &rs, what, sizeof(what));
		if (same_file && was->changed_by_cli &&
		    !strcmp(was->file_checksum, src.file_checksum) &&
		    !a->replace_snapshot) {
			pr_warn("keeping the snapshot (version %llu): the CLI "
				"changed the rules since %s was loaded, and "
				"the file did not change; the file would have "
				"%s (`sluice rule replace %s` puts the file "
				"in force, `sluice rule save FILE` saves the "
				"rules in force)",
				(unsigned long long)cur.version, a->rules_file,
				what, a->rules_file);
			sl_ruleset_free(&rs);
			a->snap = cur;
			return 0;
		}
		if (same_file && was->changed_by_cli && !a->replace_snapshot) {
			pr_err("%s changed since it was loaded, and the CLI "
			       "changed the snapshot (version %llu) since "
			       "too: refusing to drop the changes of either "
			       "(the file would have %s). The rules in force "
			       "stay in force. Fold the CLI's changes into "
			       "the file and start with --replace-snapshot, "
			       "or start without --rules to keep the snapshot",
			       a->rules_file, (unsigned long long)cur.version,
			       what);
			sl_ruleset_free(&rs);
			sl_snapshot_free(&cur);
			return -EEXIST;
		}
		if (!same && same_file && !was->changed_by_cli)
			pr_info("%s changed since version %llu: %s",
				a->rules_file, (unsigned long long)cur.version,
				what);
		else if (!same)
			pr_warn("%s replaces the snapshot (version %llu, %s): "
				"%s", a->rules_file,
				(unsigned long long)cur.version,
				was->changed_by_cli ? "changed by the CLI"
				: was->etcd_key	    ? "from etcd"
						    : "not from this file",
				what);
		sl_snapshot_free(&cur);
	}
	if (sl_snapshot_write_source(a->state_dir, &rs, version, true, &src,
				     &a->mark, a->err, sizeof(a->err))) {
		pr_err("cannot write the snapshot: %s", a->err);
		sl_ruleset_free(&rs);
		return -EIO;
	}
	if (sl_snapshot_source_copy(&a->snap.source, &src)) {
		pr_err("out of memory");
		sl_ruleset_free(&rs);
		return -ENOMEM;
	}
	a->snap.version = version;
	a->snap.updated_at = time(NULL);
	a->snap.rules = rs;
	pr_info("%s is now the snapshot (version %llu, %zu rules)",
		a->rules_file, (unsigned long long)version, rs.n);
	return 0;
}

/* --allow-empty, or the rules in force came from a document that says
 * "allow_empty": true (docs/rules.md) */
static bool empty_allowed(const struct agent *a)
{
	return a->allow_empty || a->snap.rules.allow_empty;
}

static int boot_rules(struct agent *a)
{
	int err;

	if (a->rules_file) {
		err = rules_from_file(a);
		if (err)
			return err;
	} else {
		err = sl_snapshot_load_boot(a->state_dir, &a->snap,
					    &a->snap_from_prev, a->err,
					    sizeof(a->err));
		if (err == -ENOENT && a->allow_empty) {
			pr_warn("no snapshot in %s and no --rules: starting "
				"with no rules (--allow-empty)", a->state_dir);
			return 0;
		}
		if (err == -ENOENT) {
			pr_err("no snapshot (%s/%s) and no --rules: refusing to "
			       "start with no rules in force; give --rules "
			       "FILE, or --allow-empty if that is intended",
			       a->state_dir, SL_SNAPSHOT_FILE);
			return err;
		}
		if (err) {
			pr_err("refusing to start: %s", a->err);
			return err;
		}
		if (a->snap_from_prev)
			pr_warn("USING THE PREVIOUS SNAPSHOT %s/%s (version "
				"%llu): %s", a->state_dir, SL_SNAPSHOT_PREV,
				(unsigned long long)a->snap.version, a->err);
	}
	if (!a->snap.rules.n && !empty_allowed(a)) {
		pr_err("the snapshot (version %llu) holds no rules: refusing to "
		       "start with nothing in force (--allow-empty if that is "
		       "intended)",
		       (unsigned long long)a->snap.version);
		return -ENODATA;
	}
	return 0;
}

static void notify_status(struct agent *a, bool ready)
{
	sd_notifyf(0, "%sSTATUS=snapshot version %llu, %zu rules in force on "
		      "%d interfaces",
		   ready ? "READY=1\n" : "",
		   (unsigned long long)a->in_force_version, a->dp.rules.n,
		   a->dp.n_ifaces);
}

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
static bool check_ready(const struct agent *a, const bool *attached,
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
	if (!a->dp.rules.n && !empty_allowed(a)) {
		ready = false;
		add_reason(reasons, "no rules in force");
	}
	return ready;
}

static cJSON *error_answer(const char *code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static cJSON *error_answer(const char *code, const char *fmt, ...)
{
	cJSON *r = cJSON_CreateObject();
	char msg[ERRBUF];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddBoolToObject(r, "ok", false);
	cJSON_AddStringToObject(r, "error", msg);
	cJSON_AddStringToObject(r, "code", code);
	return r;
}

/* r printed on one line, then freed; NULL when out of memory. */
static char *print_answer(cJSON *r)
{
	char *text = r ? cJSON_PrintUnformatted(r) : NULL;

	cJSON_Delete(r);
	return text;
}

static cJSON *ok_answer(void)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddBoolToObject(r, "ok", true);
	return r;
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

static cJSON *do_status(struct agent *a)
{
	cJSON *r = ok_answer(), *reasons, *snap, *ifs;
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
		cJSON_AddBoolToObject(o, "attached", up);
		cJSON_AddBoolToObject(o, "adopted", ifc->adopted);
		cJSON_AddBoolToObject(o, "egress", ifc->egress);
		cJSON_AddNumberToObject(o, "rules_in_force",
					up ? a->dp.rules.n : 0);
		cJSON_AddItemToArray(ifs, o);
	}
	cJSON_AddBoolToObject(r, "ready", check_ready(a, attached, reasons));
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
		       "{\"name\":\"%s\",\"mode\":\"%s\",\"grade\":\"%s\","
		       "\"count\":%llu,\"interval_ms\":%u,"
		       "\"passed_pps\":%llu,\"blocked_pps\":%llu,"
		       "\"passed_Bps\":%llu,\"blocked_Bps\":%llu,"
		       "\"passed_pkts\":%llu,\"passed_bytes\":%llu,"
		       "\"blocked_pkts\":%llu,\"blocked_bytes\":%llu,"
		       "\"per_source\":%s,\"sources\":%llu,"
		       "\"max_sources\":%llu,\"source_overflow\":%llu",
		       ru->name, sl_mode_str(ru->mode), sl_grade_str(ru->grade),
		       (unsigned long long)ru->count,
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
	sl_text_printf(t, ",\"threshold\":%llu,\"threshold_source\":\"%s\"",
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
static char *do_stats(struct agent *a)
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
		return print_answer(error_answer("internal",
						 "reading the counters: %s",
						 strerror(-err)));
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
		return print_answer(error_answer("internal",
						 "reading the thresholds: %s",
						 strerror(-err)));
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
static char *do_list(struct agent *a)
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

enum change_op { CHANGE_ADD, CHANGE_DEL, CHANGE_REPLACE };

/* The rules of a request ("rules": [...]), validated into *in. */
/* A request that ctl.h's reading refused (err), as an answer. */
static cJSON *request_error(struct agent *a, int err)
{
	return error_answer(err == -ENOMEM ? "internal" : "invalid", "%s",
			    a->err);
}

/* The rule set a change asks for (ruleset.h); NULL answer on success. */
static cJSON *build_change(struct agent *a, enum change_op op,
			   const struct sl_ctl_req *req,
			   struct sl_ruleset *out)
{
	struct sl_ruleset in = { 0 };
	const char **names = NULL;
	size_t n_names;
	int err;

	err = op == CHANGE_DEL ? sl_ctl_req_names(req, &names, &n_names,
						  a->err, sizeof(a->err))
			       : sl_ctl_req_rules(req, &in, a->err,
						  sizeof(a->err));
	if (err)
		return request_error(a, err);
	if (op == CHANGE_REPLACE) {
		sl_ruleset_replace(&in, out);
		return NULL;
	}
	err = op == CHANGE_ADD ? sl_ruleset_add(&a->snap.rules, &in, out,
						a->err, sizeof(a->err))
			       : sl_ruleset_del(&a->snap.rules, names, n_names,
						out, a->err, sizeof(a->err));
	sl_ruleset_free(&in);
	free(names);
	if (!err)
		return NULL;
	return error_answer(err == -EEXIST   ? "conflict"
			    : err == -ENOENT ? "not_found"
			    : err == -ENOMEM ? "internal"
					     : "invalid",
			    "%s", a->err);
}

/* A copy of the rules in force for the embedded token server, which
 * keeps pointers into it while the agent's own set changes. */
static int copy_served(struct agent *a, struct sl_ruleset *out)
{
	char *json = sl_ruleset_to_json(&a->snap.rules, false);
	int err;

	if (!json)
		return -ENOMEM;
	err = sl_rules_parse(json, strlen(json), out, a->err, sizeof(a->err));
	free(json);
	return err;
}

/* A change in force reaches the embedded token server's flows too. */
static void serve_new_rules(struct agent *a)
{
	struct sl_ruleset next = { 0 };

	if (!a->tokend)
		return;
	if (copy_served(a, &next) ||
	    sl_tokend_set_rules(a->tokend, &next, a->err, sizeof(a->err))) {
		pr_err("--serve-tokens: still serving the previous rules: %s",
		       a->err);
		sl_ruleset_free(&next);
		return;
	}
	sl_ruleset_free(&a->served);
	a->served = next;
}

/*
 * next (rules as the parser returned them, consumed) becomes the snapshot,
 * from source (NULL: none), then the rules in force: what every change
 * goes through.
 */
static cJSON *commit_rules(struct agent *a, struct sl_ruleset *next_in,
			   const struct sl_snapshot_source *source)
{
	uint64_t version = version_after(a->snap.version, a->snap_from_prev);
	struct sl_ruleset next = *next_in, old = { 0 };
	struct sl_snapshot_source src = { 0 };
	char what[SL_LOG_CHANGES_LEN];
	cJSON *r;
	int err;

	*next_in = (struct sl_ruleset){ 0 };
	if (source && sl_snapshot_source_copy(&src, source)) {
		sl_ruleset_free(&next);
		return error_answer("internal", "out of memory");
	}
	/* durable first: acknowledged means it survives a crash */
	if (sl_snapshot_write_source(a->state_dir, &next, version, true,
				     source, &a->mark, a->err,
				     sizeof(a->err))) {
		sl_snapshot_source_free(&src);
		sl_ruleset_free(&next);
		return error_answer("internal", "cannot write the snapshot: %s",
				    a->err);
	}
	pthread_mutex_lock(&a->dp_lock);
	err = sl_dp_apply(&a->dp, &next, a->err, sizeof(a->err));
	if (!err && a->cluster)
		sl_cluster_rules_changed(a->cluster);
	/* under the lock: the metrics read the snapshot's numbers */
	if (!err) {
		old = a->snap.rules;
		a->snap.rules = next;
		a->snap.version = version;
		a->snap.updated_at = time(NULL);
		a->snap_from_prev = false;
		a->in_force_version = version;
		sl_snapshot_source_free(&a->snap.source);
		a->snap.source = src;
		src = (struct sl_snapshot_source){ 0 };
	}
	pthread_mutex_unlock(&a->dp_lock);
	sl_snapshot_source_free(&src);
	if (err) {
		char rb[ERRBUF];

		r = error_answer("apply",
				 "cannot apply the rules, nothing changed: %s",
				 a->err);
		err = sl_snapshot_rollback(a->state_dir, rb, sizeof(rb));
		if (err == -ENOENT) {
			/* the first snapshot: nothing to go back to */
			snprintf(rb, sizeof(rb), "%s/%s", a->state_dir,
				 SL_SNAPSHOT_FILE);
			unlink(rb);
		} else if (err) {
			pr_err("rolling back the snapshot: %s", rb);
		}
		sl_ruleset_free(&next);
		return r;
	}
	diff_text(&old, &next, what, sizeof(what));
	sl_ruleset_free(&old);
	pr_info("rules at version %llu: %zu in force; %s",
		(unsigned long long)version, next.n, what);
	serve_new_rules(a);
	notify_status(a, false);
	r = ok_answer();
	cJSON_AddNumberToObject(r, "version", version);
	cJSON_AddNumberToObject(r, "rules_in_force", a->dp.rules.n);
	return r;
}

static cJSON *do_change(struct agent *a, enum change_op op,
			const struct sl_ctl_req *req)
{
	struct sl_snapshot_source src = { 0 };
	struct sl_ruleset next = { 0 };
	bool given, dry_run, unchanged;
	uint64_t ifv;
	cJSON *r;
	int err;

	err = sl_ctl_req_if_version(req, &given, &ifv, a->err, sizeof(a->err));
	if (err)
		return request_error(a, err);
	if (given && ifv != a->snap.version)
		return error_answer("version",
				    "the snapshot is at version %llu, not %llu:"
				    " someone else changed the rules; "
				    "re-read them and retry",
				    (unsigned long long)a->snap.version,
				    (unsigned long long)ifv);
	err = sl_ctl_req_bool(req, "dry_run", &dry_run, a->err,
			      sizeof(a->err));
	if (err)
		return request_error(a, err);
	r = build_change(a, op, req, &next);
	if (r)
		return r;
	if (!next.n && !a->allow_empty) {
		sl_ruleset_free(&next);
		return error_answer("invalid",
				    "refusing to leave no rules in force (the "
				    "agent runs without --allow-empty)");
	}
	unchanged = same_rules(&a->snap.rules, &next) &&
		    a->snap.rules.allow_empty == next.allow_empty;
	if (dry_run || unchanged) {
		r = ok_answer();
		cJSON_AddNumberToObject(r, "version", a->snap.version);
		cJSON_AddNumberToObject(r, "rules_in_force", a->dp.rules.n);
		cJSON_AddBoolToObject(r, "unchanged", unchanged);
		cJSON_AddBoolToObject(r, "dry_run", dry_run);
		cJSON_AddItemToObject(r, "diff",
				      sl_ruleset_diff_json(&a->snap.rules,
							   &next));
		sl_ruleset_free(&next);
		return r;
	}
	/* a change of the CLI over rules from --rules: the next start keeps
	 * it (rules_from_file) */
	if (a->snap.source.rule_file &&
	    sl_snapshot_source_copy(&src, &a->snap.source)) {
		sl_ruleset_free(&next);
		return error_answer("internal", "out of memory");
	}
	src.changed_by_cli = src.rule_file != NULL;
	r = commit_rules(a, &next, src.rule_file ? &src : NULL);
	sl_snapshot_source_free(&src);
	return r;
}

/*
 * A value of the etcd key: a rule document, checked as `sluice check`
 * does, applied as `rule replace` does; refused, the rules in force stay.
 */
static void apply_etcd_value(struct agent *a, struct sl_etcd_value *v)
{
	struct sl_snapshot_source src = { .etcd_key = (char *)a->etcd_key,
					  .revision = v->revision };
	struct sl_ruleset next = { 0 };
	const cJSON *why;
	cJSON *r = NULL;

	if (v->deleted)
		r = error_answer("invalid", "the key was deleted");
	else if (sl_rules_parse(v->text, v->len, &next, a->err,
				sizeof(a->err)))
		r = error_answer("invalid", "invalid rules:\n%s", a->err);
	else if (!next.n && !next.allow_empty && !a->allow_empty)
		r = error_answer("invalid",
				 "no rules: refusing to leave nothing in force "
				 "(a document meant to hold none says "
				 "\"allow_empty\": true)");
	if (r)
		sl_ruleset_free(&next);
	else
		r = commit_rules(a, &next, &src);
	why = cJSON_GetObjectItemCaseSensitive(r, "error");
	if (cJSON_IsString(why)) {
		pr_err("etcd: %s at revision %llu refused, the rules in force "
		       "stay (snapshot version %llu): %s",
		       a->etcd_key, (unsigned long long)v->revision,
		       (unsigned long long)a->snap.version, why->valuestring);
		sl_etcd_source_refused(a->etcd, v->revision, why->valuestring);
	} else {
		pr_info("etcd: %s at revision %llu in force (snapshot "
			"version %llu)",
			a->etcd_key, (unsigned long long)v->revision,
			(unsigned long long)a->snap.version);
		sl_etcd_source_applied(a->etcd, v->revision);
	}
	cJSON_Delete(r);
}

/*
 * SIGHUP or `sluice secrets reload`: read the secrets file again (a
 * rotation, docs/cluster.md). New sessions, and the embedded server's
 * new clients, use it; the sessions up stay. A file that does not load
 * changes nothing: -errno, the reason in a->err.
 */
static int reload_secrets(struct agent *a)
{
	struct sl_secrets *next;

	if (!a->secrets) {
		snprintf(a->err, sizeof(a->err),
			 "the agent runs without --secrets");
		return -ENOENT;
	}
	next = sl_secrets_load_new(a->secrets_file, a->err, sizeof(a->err));
	if (!next)
		return -EINVAL;
	if (a->cluster)
		sl_cluster_set_secrets(a->cluster, next);
	if (a->tokend)
		sl_tokend_set_secrets(a->tokend, next);
	sl_secrets_destroy(a->secrets);
	a->secrets = next;
	pr_info("secrets reloaded from %s: %zu namespaces", a->secrets_file,
		next->n);
	return 0;
}

static cJSON *do_reload_secrets(struct agent *a)
{
	cJSON *r;

	if (reload_secrets(a))
		return error_answer("invalid", "secrets not reloaded, those "
					       "in use stay: %s", a->err);
	r = ok_answer();
	cJSON_AddNumberToObject(r, "namespaces", a->secrets->n);
	return r;
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
static cJSON *do_drops(struct agent *a, const struct sl_ctl_req *req)
{
	const char *rule = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(req->json, "rule"));
	const cJSON *top = cJSON_GetObjectItemCaseSensitive(req->json, "top");
	uint64_t n = 10;
	cJSON *r;
	int err;

	if (top && !sl_json_uint(top, 1, SL_DROPTOP_KEEP, &n))
		return error_answer("invalid", "request: 'top' must be an "
					       "integer from 1 to %d",
				    SL_DROPTOP_KEEP);
	if (!a->drops)
		return error_answer("unavailable", "sampled drops are "
						   "unavailable (see the "
						   "agent's log)");
	r = ok_answer();
	pthread_mutex_lock(&a->dp_lock);
	err = sl_agent_drops_answer(a->drops, &a->dp, rule, n, r, a->err,
				    sizeof(a->err));
	pthread_mutex_unlock(&a->dp_lock);
	if (err) {
		cJSON_Delete(r);
		return err == -ENOENT ? error_answer("not_found", "%s", a->err)
				      : error_answer("internal", "drops: %s",
						     strerror(-err));
	}
	return r;
}

/* `sluice explain`: the data plane's answer for the request's packet. */
static cJSON *do_explain(struct agent *a, const struct sl_ctl_req *req)
{
	struct sl_explain_query q;
	struct sl_explain e;
	const struct sl_rule *rule;
	cJSON *r;
	int err;

	if (sl_ctl_req_explain(req, &q, a->err, sizeof(a->err)))
		return request_error(a, -EINVAL);
	pthread_mutex_lock(&a->dp_lock);
	err = sl_dp_explain(&a->dp, &q, &e);
	rule = e.rule >= 0 ? &a->dp.rules.rules[e.rule] : NULL;
	r = err ? error_answer("internal", "explain: %s", strerror(-err))
		: ok_answer();
	if (err)
		goto out;
	cJSON_AddNumberToObject(r, "frame_bytes", e.frame_len);
	cJSON_AddStringToObject(r, "outcome", explain_outcomes[e.bpf.outcome]);
	if (e.bpf.outcome == SLUICE_EXPLAIN_UNCLASSIFIED)
		cJSON_AddStringToObject(r, "reason",
					sl_host_stat_name(e.bpf.reason));
	if (rule) {
		cJSON_AddStringToObject(r, "rule", rule->name);
		cJSON_AddStringToObject(r, "mode", sl_mode_str(rule->mode));
		cJSON_AddStringToObject(r, "grade", sl_grade_str(rule->grade));
		cJSON_AddNumberToObject(r, "count", e.bpf.count);
		cJSON_AddNumberToObject(r, "cost", e.bpf.cost);
		cJSON_AddNumberToObject(r, "window", e.bpf.window);
		cJSON_AddNumberToObject(r, "used", e.bpf.used);
		cJSON_AddNumberToObject(r, "credit", e.bpf.credit);
		if (rule->per_source)
			cJSON_AddStringToObject(
				r, "source",
				e.bpf.source == SLUICE_EXPLAIN_SRC_TRACKED
					? "tracked"
					: "untracked");
		else
			cJSON_AddNumberToObject(r, "cached", e.cached);
	}
	cJSON_AddStringToObject(r, "verdict", explain_verdicts[e.verdict]);
	cJSON_AddStringToObject(r, "why", e.why);
out:
	pthread_mutex_unlock(&a->dp_lock);
	return r;
}

static cJSON *dispatch(struct agent *a, const struct sl_ctl_req *req)
{
	const char *cmd = req->cmd;

	if (!strcmp(cmd, "status"))
		return do_status(a);
	if (!strcmp(cmd, "explain"))
		return do_explain(a, req);
	if (!strcmp(cmd, "drops"))
		return do_drops(a, req);
	if (a->etcd_key && !strncmp(cmd, "rule.", 5))
		return error_answer("managed",
				    "the rules of this agent come from etcd "
				    "key '%s' (--etcd-key): change them there, "
				    "with `sluice push FILE --etcd URL "
				    "--etcd-key %s`",
				    a->etcd_key, a->etcd_key);
	if (!strcmp(cmd, "rule.add"))
		return do_change(a, CHANGE_ADD, req);
	if (!strcmp(cmd, "rule.del"))
		return do_change(a, CHANGE_DEL, req);
	if (!strcmp(cmd, "rule.replace"))
		return do_change(a, CHANGE_REPLACE, req);
	if (!strcmp(cmd, "secrets.reload"))
		return do_reload_secrets(a);
	return error_answer("invalid", "request: unknown cmd '%s'", cmd);
}

/* One request (ctl.h: the server hands them over one at a time, which
 * serialises changes); the answer as text. */
static char *handle_request(void *arg, const char *text, size_t len)
{
	struct agent *a = arg;
	struct sl_ctl_req req;
	char *answer;
	int err;

	err = sl_ctl_req_parse(text, len, &req, a->err, sizeof(a->err));
	if (err)
		return print_answer(request_error(a, err));
	if (!strcmp(req.cmd, "stats"))
		answer = do_stats(a);
	else if (!strcmp(req.cmd, "rule.list"))
		answer = do_list(a);
	else
		answer = print_answer(dispatch(a, &req));
	sl_ctl_req_free(&req);
	return answer;
}

static void print_stats(struct agent *a)
{
	pthread_mutex_lock(&a->dp_lock);
	printf("%-24s %-8s %12s %12s %14s %14s\n", "rule", "mode",
	       "passed/s", "blocked/s", "passed", "blocked");
	for (size_t i = 0; i < a->dp.rules.n; i++) {
		struct sl_rule_stats st;

		if (sl_dp_rule_stats(&a->dp, i, &st))
			continue;
		printf("%-24s %-8s %12.0f %12.0f %14llu %14llu\n",
		       a->dp.rules.rules[i].name,
		       sl_mode_str(a->dp.rules.rules[i].mode), st.passed_pps,
		       st.blocked_pps, (unsigned long long)st.passed_pkts,
		       (unsigned long long)st.blocked_pkts);
	}
	pthread_mutex_unlock(&a->dp_lock);
	fflush(stdout);
}

static void *serve_tokens(void *arg)
{
	if (sl_tokend_run(arg))
		pr_err("the embedded token server stopped: epoll failed");
	return NULL;
}

/* --serve-tokens: the rules in force, served from a thread. */
static int start_tokend(struct agent *a)
{
	struct sl_tokend_cfg cfg;
	int err;

	err = copy_served(a, &a->served);
	if (err)
		return err;
	sl_tokend_cfg_default(&cfg);
	cfg.listen = a->serve_tokens;
	cfg.elected = a->election.name != NULL;
	err = sl_tokend_new(&cfg, &a->served, a->secrets, &a->tokend,
			    a->err, sizeof(a->err));
	if (err) {
		pr_err("--serve-tokens %s: %s", a->serve_tokens, a->err);
		return err;
	}
	err = pthread_create(&a->tokend_thread, NULL, serve_tokens,
			     a->tokend);
	if (err) {
		sl_tokend_free(a->tokend);
		a->tokend = NULL;
		return -err;
	}
	pr_info("serving tokens on %s (port %u)%s", a->serve_tokens,
		sl_tokend_port(a->tokend),
		a->election.name ? " once elected" : "");
	if (a->election.name &&
	    sl_election_start(a->tokend, &a->election, &a->el, a->err,
			      sizeof(a->err))) {
		pr_err("--election: %s", a->err);
		return -EINVAL;
	}
	return 0;
}

static int new_cluster(struct agent *a)
{
	struct sl_cluster_cfg cfg;
	int err;

	if (a->secrets_file) {
		a->secrets = sl_secrets_load_new(a->secrets_file, a->err,
						 sizeof(a->err));
		if (!a->secrets) {
			pr_err("--secrets %s", a->err);
			return -EINVAL;
		}
	}
	sl_cluster_cfg_default(&cfg);
	cfg.servers = a->token_servers;
	cfg.node_id = a->node_id;
	cfg.secrets = a->secrets;
	cfg.max_ttl_ms = a->max_ttl_ms;
	err = sl_cluster_new(&cfg, &a->dp, &a->dp_lock, &a->cluster, a->err,
			     sizeof(a->err));
	if (err)
		pr_err("cluster: %s", a->err);
	return err;
}

/* The agent's numbers for the metrics (agent_metrics.h), dp_lock held. */
static void metrics_status(void *arg, const bool *attached,
			   struct sl_agent_status *st)
{
	const struct agent *a = arg;

	st->snapshot_version = a->snap.version;
	st->snapshot_updated_at = a->snap.updated_at;
	st->snapshot_rules = a->snap.rules.n;
	st->snapshot_from_prev = a->snap_from_prev;
	st->ready = check_ready(a, attached, NULL);
	st->has_config_source = a->etcd;
	if (a->etcd)
		sl_etcd_source_stats(a->etcd, &st->config_source);
}

/* Once everything it reads exists: the address was bound at the start. */
static int serve_metrics(struct agent *a)
{
	int err;

	a->metrics_src = (struct sl_agent_metrics_src){
		.dp = &a->dp,
		.dp_lock = &a->dp_lock,
		.cluster = a->cluster,
		.tokend = a->tokend,
		.guard = a->guard,
		.status = metrics_status,
		.arg = a,
	};
	err = sl_http_metrics_start(a->metrics_fd, sl_agent_metrics,
				    &a->metrics_src, &a->metrics);
	a->metrics_fd = -1;
	if (err) {
		pr_err("--metrics %s: cannot serve HTTP: %s", a->metrics_addr,
		       strerror(-err));
		return err;
	}
	pr_info("metrics on http://%s/metrics", a->metrics_addr);
	return 0;
}

/* A value of the etcd key waits: the control loop takes it at once. */
static void wake_control_loop(void *arg)
{
	struct agent *a = arg;

	sl_ctl_server_wake(a->ctl);
}

/* Before the boot: the options are checked, nothing asked of etcd yet. */
static int new_etcd_source(struct agent *a)
{
	const struct sl_snapshot_source *src = &a->snap.source;
	uint64_t applied = src->etcd_key && !strcmp(src->etcd_key, a->etcd_key)
				   ? src->revision
				   : 0;
	int err;

	err = sl_etcd_source_new(a->etcd_endpoints, &a->etcd_auth, a->etcd_key,
				 applied,
				 wake_control_loop, a, &a->etcd, a->err,
				 sizeof(a->err));
	if (err)
		pr_err("%s", a->err);
	return err;
}

static int start(struct agent *a)
{
	struct sl_dp_opts o = { .pass_unclassified = a->pass_unclassified,
				.pin_dir = a->pin_dir };
	int err, fd;

	if (mkdir(a->state_dir, 0700) && errno != EEXIST) {
		pr_err("%s: %s", a->state_dir, strerror(errno));
		return -errno;
	}
	err = sl_check_owner_path(a->state_dir, a->err, sizeof(a->err));
	if (err) {
		pr_err("--state-dir %s", a->err);
		return err;
	}
	sl_ctl_path(a->state_dir, a->sock_path, sizeof(a->sock_path));
	fd = sl_ctl_listen(a->sock_path);
	if (fd == -EADDRINUSE) {
		pr_err("another agent answers on %s", a->sock_path);
		return fd;
	}
	if (fd < 0) {
		pr_err("%s: %s", a->sock_path, strerror(-fd));
		return fd;
	}
	err = sl_ctl_server_new(fd, SL_CTL_MAX_CLIENTS, SL_CTL_TIMEOUT_MS,
				handle_request, a, &a->ctl);
	if (err) {
		close(fd);
		unlink(a->sock_path);
		pr_err("%s: %s", a->sock_path, strerror(-err));
		return err;
	}
	if (a->metrics_addr) {
		a->metrics_fd = sl_http_metrics_listen(a->metrics_addr);
		if (a->metrics_fd < 0) {
			pr_err("--metrics %s: %s", a->metrics_addr,
			       strerror(-a->metrics_fd));
			return a->metrics_fd;
		}
	}
	err = boot_rules(a);
	if (err)
		return err;
	if (a->etcd_key) {
		err = new_etcd_source(a);
		if (err)
			return err;
	}

	err = sl_dp_load(&a->dp, &o);
	if (err) {
		pr_err("loading the XDP program (pins in %s): %s", a->pin_dir,
		       strerror(-err));
		return err;
	}
	if (a->dp.upgraded)
		pr_info("upgraded the running data plane in %s to layout "
			"%016llx (%zu rule slots in force)", a->pin_dir,
			(unsigned long long)a->dp.layout,
			sl_dp_slots_in_force(&a->dp));
	else if (a->dp.adopted)
		pr_info("adopting the running data plane in %s (%zu rule "
			"slots in force)", a->pin_dir,
			sl_dp_slots_in_force(&a->dp));
	/* before the apply: a cluster rule's fresh slot starts at its
	 * fallback, never at the cluster's count */
	if (a->token_servers) {
		err = new_cluster(a);
		if (err)
			return err;
	}
	/* every map is filled before any attach: the first packet is
	 * already judged by the rules */
	if (sl_dp_apply(&a->dp, &a->snap.rules, a->err, sizeof(a->err))) {
		pr_err("refusing to start, cannot apply snapshot version %llu: "
		       "%s", (unsigned long long)a->snap.version, a->err);
		return -EINVAL;
	}
	a->in_force_version = a->snap.version;
	a->drops = sl_agent_drops_new(&a->dp);
	if (!a->drops)
		pr_warn("sampled drops unavailable (`sluice drops`): %s",
			strerror(errno));
	if (a->cluster)
		sl_cluster_rules_changed(a->cluster);
	if (a->serve_tokens) {
		err = start_tokend(a);
		if (err)
			return err;
	}
	if (a->cluster) {
		err = sl_cluster_start(a->cluster);
		if (err)
			return err;
	}
	err = sl_guard_start(&a->dp, &a->dp_lock, "/proc", &a->guard);
	if (err) {
		pr_err("system rules: cannot start the thread: %s",
		       strerror(-err));
		return err;
	}

	for (int i = 0; i < a->ifaces.n; i++) {
		const char *name = a->ifaces.name[i];

		err = sl_dp_attach(&a->dp, name, a->mode);
		if (err) {
			pr_err("%s: cannot attach XDP (%s mode): %s", name,
			       sl_xdp_mode_str(a->mode), strerror(-err));
			return err;
		}
		pr_info("%s: %s in %s mode, %zu rules in force (snapshot "
			"version %llu)", name,
			a->dp.ifaces[a->dp.n_ifaces - 1].adopted ? "adopted"
								 : "attached",
			sl_xdp_mode_str(a->dp.ifaces[a->dp.n_ifaces - 1].mode),
			a->dp.rules.n, (unsigned long long)a->snap.version);
	}
	if (a->metrics_addr) {
		err = serve_metrics(a);
		if (err)
			return err;
	}
	/* only now: the snapshot is in force whatever etcd does */
	if (a->etcd) {
		err = sl_etcd_source_start(a->etcd);
		if (err) {
			pr_err("--etcd: cannot start the thread: %s",
			       strerror(-err));
			return err;
		}
	}
	notify_status(a, true);
	return 0;
}

static void defaults(void *opts)
{
	struct agent *a = opts;

	a->log.level = SL_LOG_INFO;
	a->state_dir = "/var/lib/sluice";
	a->pin_dir = "/sys/fs/bpf/sluice";
	a->metrics_fd = -1;
	a->max_ttl_ms = SL_CLUSTER_MAX_TTL_MS;
	a->election.ttl_ms = SL_ELECTION_TTL_MS;
	pthread_mutex_init(&a->dp_lock, NULL);
}

/*
 * Idle per-source entries: the walk holds no lock (the cluster thread and
 * the metrics need dp_lock meanwhile), each chunk of deletes holds it.
 * victims keeps its memory from one second to the next.
 */
static void collect_sources(struct agent *a, struct sl_src_victims *victims)
{
	int err = sl_dp_gc_scan(&a->dp, victims);

	while (!err && victims->next < victims->n) {
		pthread_mutex_lock(&a->dp_lock);
		err = sl_dp_gc_collect(&a->dp, victims);
		pthread_mutex_unlock(&a->dp_lock);
		err = err < 0 ? err : 0;
	}
	if (err)
		pr_warn("collecting idle per-source entries: %s",
			strerror(-err));
}

/* A line for each breaker that changed state since the last call. */
static void log_breakers(struct agent *a)
{
	struct sl_dataplane *dp = &a->dp;
	bool fresh = a->breaker_gen != dp->rules_gen;

	if (!a->breaker_seen) {
		a->breaker_seen = calloc(SLUICE_MAX_RULE_SLOTS,
					 sizeof(*a->breaker_seen));
		if (!a->breaker_seen)
			return;
	}
	pthread_mutex_lock(&a->dp_lock);
	for (size_t i = 0; i < dp->rules.n; i++) {
		const struct sl_rule *r = &dp->rules.rules[i];
		uint64_t *seen = &a->breaker_seen[dp->slots[i]];
		struct sl_rule_stats st;
		uint64_t word, moves;

		if (!r->breaker.enabled || sl_dp_rule_stats(dp, i, &st))
			continue;
		word = st.breaker.to_state[SLUICE_BRK_OPEN] +
		       st.breaker.to_state[SLUICE_BRK_HALF_OPEN] +
		       st.breaker.to_state[SLUICE_BRK_CLOSED];
		moves = word - *seen;
		/* a rule set changed: slots may have changed hands */
		if (!fresh && moves)
			sl_log(st.breaker.state == SLUICE_BRK_OPEN
				       ? SL_LOG_WARN
				       : SL_LOG_INFO,
			    "breaker %s: %s (%llu transition%s in the last "
			    "second; opened %llu times, probes %llu ok, %llu "
			    "failed, %llu SYNs failed fast)",
			    r->name, sl_breaker_state_str(st.breaker.state),
			    (unsigned long long)moves, moves > 1 ? "s" : "",
			    (unsigned long long)
				    st.breaker.to_state[SLUICE_BRK_OPEN],
			    (unsigned long long)st.breaker.probe_success,
			    (unsigned long long)st.breaker.probe_failure,
			    (unsigned long long)st.breaker.failed_fast);
		*seen = word;
	}
	a->breaker_gen = dp->rules_gen;
	sl_dp_sync_egress(dp);
	pthread_mutex_unlock(&a->dp_lock);
}

static int run(const struct sl_cmd *cmd, void *opts, int argc, char **argv)
{
	struct agent *a = opts;
	struct sl_src_victims victims = { 0 };
	double last_stats, last_gc;
	int ret;

	ret = check_args(cmd, a);
	if (ret)
		return ret;
	sl_log_daemon(&a->log, NULL);
	a->started = sl_now_ns() / 1e9;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_sighup);
	signal(SIGPIPE, SIG_IGN);

	ret = start(a) ? 1 : 0;
	/* a fresh data plane that never got going leaves nothing behind */
	if (ret)
		sl_dp_abandon(&a->dp);
	last_stats = last_gc = sl_now_ns() / 1e9;
	while (!ret && !stop) {
		struct sl_etcd_value value;
		double now;
		int err;

		/* no client can hold this loop: each has its own deadline */
		err = sl_ctl_server_poll(a->ctl, 100);
		if (err)
			pr_warn("control socket: epoll failed: %s",
				strerror(-err));
		if (reload) {
			reload = 0;
			if (reload_secrets(a))
				pr_err("SIGHUP: secrets not reloaded, those in "
				       "use stay: %s", a->err);
		}
		if (a->drops)
			sl_agent_drops_poll(a->drops, &a->dp, &a->dp_lock);
		/* a change answered: clear the old set before the next one */
		pthread_mutex_lock(&a->dp_lock);
		sl_dp_retire(&a->dp);
		pthread_mutex_unlock(&a->dp_lock);
		now = sl_now_ns() / 1e9;
		if (a->stats_interval && now - last_stats >= a->stats_interval) {
			print_stats(a);
			last_stats = now;
		}
		if (a->etcd && sl_etcd_source_take(a->etcd, &value)) {
			apply_etcd_value(a, &value);
			free(value.text);
		}
		if (now - last_gc >= 1.0) {
			collect_sources(a, &victims);
			log_breakers(a);
			last_gc = now;
		}
	}
	if (!ret)
		pr_info("signal %d: exiting; the data plane stays attached "
			"(`sluice down` detaches it)", (int)stop);
	sd_notify(0, "STOPPING=1");
	sl_src_victims_free(&victims);
	free(a->breaker_seen);
	sl_agent_drops_free(a->drops);
	/* first: they read (and the source wakes) everything below */
	sl_http_metrics_stop(a->metrics);
	sl_etcd_source_free(a->etcd);
	if (a->metrics_fd >= 0)
		close(a->metrics_fd);
	if (a->ctl) {
		sl_ctl_server_free(a->ctl);
		unlink(a->sock_path);
	}
	/* the thresholds in force stay: the data plane outlives us */
	sl_cluster_free(a->cluster);
	sl_guard_free(a->guard);
	if (a->tokend) {
		sl_tokend_command(a->tokend, SL_TOKEND_STOP);
		pthread_join(a->tokend_thread, NULL);
		/* granting has stopped: a successor may start at once */
		sl_election_stop(a->el);
		sl_tokend_free(a->tokend);
	}
	sl_ruleset_free(&a->served);
	sl_secrets_destroy(a->secrets);
	sl_dp_destroy(&a->dp);
	sl_snapshot_free(&a->snap);
	sl_snapshot_mark_free(&a->mark);
	return ret;
}

static const struct sl_opt agent_opts[] = {
	{ .name = "iface", .type = SL_OPT_IFACES,
	  .field = SL_FIELD(struct agent, ifaces), .metavar = "IF[,IF...]",
	  .required = true, .help = "the interfaces to attach to" },
	{ .name = "state-dir", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, state_dir), .metavar = "DIR",
	  .help = "snapshot and control socket (/var/lib/sluice)" },
	{ .name = "pin-dir", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, pin_dir), .metavar = "DIR",
	  .help = "bpffs directory of the pins (/sys/fs/bpf/sluice)" },
	{ .name = "rules", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, rules_file), .metavar = "FILE",
	  .help = "make FILE the snapshot before the boot" },
	{ .name = "xdp-mode", .type = SL_OPT_CHOICE,
	  .field = SL_FIELD(struct agent, mode), .metavar = "MODE",
	  .choices = sl_xdp_mode_names,
	  .help = "native, generic or auto (native where the driver has it)" },
	{ .name = "allow-empty", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct agent, allow_empty),
	  .help = "an empty rule set counts as ready" },
	{ .name = "replace-snapshot", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct agent, replace_snapshot),
	  .help = "--rules replaces the snapshot, changes of the CLI "
		  "since included" },
	{ .name = "stats-interval", .type = SL_OPT_U32,
	  .field = SL_FIELD(struct agent, stats_interval),
	  .metavar = "SECONDS", .max = 86400,
	  .help = "print the counters every SECONDS (0: never)" },
	{ .name = "pass-unclassified", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct agent, pass_unclassified),
	  .help = "pass packets sluice cannot classify (malformed, or "
		  "lacking a port or protocol a rule needs) rather than "
		  "drop them" },
	{ .name = "drop-malformed", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct agent, drop_malformed),
	  .help = "the default: accepted for older command lines" },
	{ .name = "token-server", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, token_servers),
	  .metavar = "HOST:PORT[,HOST:PORT...]",
	  .help = "token servers of the cluster rules, in order" },
	{ .name = "node-id", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, node_id), .metavar = "ID",
	  .help = "this host to the token server (its host name)" },
	{ .name = "secrets", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, secrets_file), .metavar = "FILE",
	  .help = "namespace secrets for the token protocol" },
	{ .name = "max-lease-ttl-ms", .type = SL_OPT_U32,
	  .field = SL_FIELD(struct agent, max_ttl_ms), .metavar = "MS",
	  .min = 1, .max = 3600000,
	  .help = "refuse a token server's lease longer than MS (10000)" },
	{ .name = "serve-tokens", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, serve_tokens),
	  .metavar = "ADDR:PORT",
	  .help = "serve the cluster rules' tokens (embedded token server)" },
	{ .name = "election", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, election.name), .metavar = "KEY",
	  .help = "the embedded server is a replica: it grants only while "
		  "elected under KEY (in --etcd)" },
	{ .name = "advertise", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, election.advertise),
	  .metavar = "HOST:PORT",
	  .help = "where agents reach the embedded server, told by "
		  "followers" },
	{ .name = "election-ttl-ms", .type = SL_OPT_U32,
	  .field = SL_FIELD(struct agent, election.ttl_ms), .metavar = "MS",
	  .min = 1000, .max = 3600000,
	  .help = "the leader's etcd lease, whole seconds (2000)" },
	{ .name = "etcd", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, etcd_endpoints),
	  .metavar = "URL[,URL...]",
	  .help = "etcd's client URLs: the rules (--etcd-key) and the "
		  "election (--election), after the boot" },
	{ .name = "etcd-key", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, etcd_key), .metavar = "KEY",
	  .help = "the etcd key whose value is the rule file" },
	SL_ETCD_AUTH_OPTS(struct agent, etcd_auth),
	{ .name = "metrics", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct agent, metrics_addr),
	  .metavar = "ADDR:PORT",
	  .help = "serve Prometheus metrics on http://ADDR:PORT/metrics" },
	SL_LOG_OPTS(struct agent, log),
	{ 0 },
};

const struct sl_cmd sl_cmd_agent = {
	.name = "agent",
	.opts = agent_opts,
	.opts_size = sizeof(struct agent),
	.defaults = defaults,
	.run = run,
	.summary = "the daemon: puts the snapshot's rules in force, attaches, "
		   "serves the CLI;\nthe data plane stays attached when it "
		   "exits",
};
