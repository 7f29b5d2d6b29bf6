// SPDX-License-Identifier: GPL-2.0
/*
 * The agent: reads the snapshot before anything else, fills every map,
 * then attaches (the first packet is already judged), serves the control
 * socket, and leaves the data plane attached when it exits.
 */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "agent.h"
#include "agent_state.h"
#include "stats.h"
#include "util.h"

/* --tunnels, by the index agent_state.h names */
static const char *const tunnel_names[] = {
	[TUNNELS_OUTER] = "outer",
	[TUNNELS_INNER] = "inner",
	NULL,
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

/* Forget the silent connections of conns rules; the lock keeps a rule
 * set from changing under the sweep's read of the rules in force. */
static void sweep_conns(struct agent *a)
{
	int err;

	pthread_mutex_lock(&a->dp_lock);
	err = sl_dp_sweep_conns(&a->dp);
	pthread_mutex_unlock(&a->dp_lock);
	if (err)
		pr_warn("sweeping the connections of conns rules: %s",
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

	ret = agent_start(a) ? 1 : 0;
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
			if (agent_reload_secrets(a))
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
			agent_apply_etcd_value(a, &value);
			free(value.text);
		}
		if (now - last_gc >= 1.0) {
			collect_sources(a, &victims);
			sweep_conns(a);
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
	{ .name = "tunnels", .type = SL_OPT_CHOICE,
	  .field = SL_FIELD(struct agent, tunnels), .metavar = "HEADER",
	  .choices = tunnel_names,
	  .help = "judge IP-in-IP and GRE packets by their outer header "
		  "(the default) or their inner one (docs/rules.md)" },
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
