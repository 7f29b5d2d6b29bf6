// SPDX-License-Identifier: GPL-2.0
/* `sluice tokend`: the token server as a process (docs/cluster.md). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "election.h"
#include "etcd_source.h"
#include "http_metrics.h"
#include "log.h"
#include "params.h"
#include "process_metrics.h"
#include "rules_parse.h"
#include "tokend.h"
#include "tokensrv.h"
#include "util.h"

#define ERRBUF 8192

static struct sl_tokend *running;

static void on_signal(int sig)
{
	if (running)
		sl_tokend_command(running, sig == SIGUSR1 ? SL_TOKEND_DRAIN
							 : SL_TOKEND_STOP);
}

/* One server per state directory: an flock held for the process's life. */
static int lock_state_dir(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		pr_err("--state-dir %s: %s", dir, strerror(errno));
		return -1;
	}
	if (sl_check_owner_path(dir, path, sizeof(path))) {
		pr_err("--state-dir %s", path);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/tokend.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_err("%s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		pr_err("%s: another tokend uses this state directory", path);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Every session and handshake is an fd: the soft limit up to the hard
 * one (systemd's default soft limit is 1024), and a word when even that
 * is short of the budgets (the oldest handshakes then make room).
 */
static void raise_nofile(const struct sl_tokend_cfg *cfg)
{
	uint64_t need = (uint64_t)cfg->max_conns + cfg->max_handshakes + 64;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
		pr_warn("tokend: RLIMIT_NOFILE %llu is below --max-conns + "
			"--max-handshakes + 64 = %llu",
			(unsigned long long)rl.rlim_cur,
			(unsigned long long)need);
}

struct tokend_opts {
	struct sl_log_opts log;
	struct sl_tokend_cfg cfg;
	const char *rules, *state_dir, *secrets, *metrics;
	bool learn_given;
	struct sl_election_cfg election;
	const char *etcd_key;
};

/*
 * The rules served: --rules at the start, then every valid value of
 * --etcd-key, or without it the file again on SIGHUP. A set stays alive
 * while the server points into it, until the next is in force.
 */
struct keeper {
	struct sl_tokend *td;
	const char *file, *etcd_key;
	pthread_mutex_t lock; /* rs; the SIGHUP and etcd threads both serve */
	struct sl_ruleset rs;
	struct sl_etcd_source *etcd;
	char err[ERRBUF];
};

/* next (consumed) is served, or refused with the reason in k->err. */
static int serve(struct keeper *k, struct sl_ruleset *next)
{
	bool any = false;
	int ret;

	for (size_t i = 0; i < next->n; i++)
		any |= next->rules[i].cluster.enabled;
	if (!any && !next->allow_empty) {
		snprintf(k->err, sizeof(k->err),
			 "no rule has a cluster object: refusing to serve "
			 "nothing (a document meant to hold none says "
			 "\"allow_empty\": true)");
		sl_ruleset_free(next);
		return -EINVAL;
	}
	pthread_mutex_lock(&k->lock);
	ret = sl_tokend_set_rules(k->td, next, k->err, sizeof(k->err));
	if (!ret) {
		sl_ruleset_free(&k->rs);
		k->rs = *next;
	} else {
		sl_ruleset_free(next);
	}
	pthread_mutex_unlock(&k->lock);
	return ret;
}

/* From the etcd thread: a value of --etcd-key waits. */
static void on_etcd_value(void *arg)
{
	struct keeper *k = arg;
	struct sl_ruleset next = {0};
	struct sl_etcd_value v;
	int ret = -EINVAL;

	if (!sl_etcd_source_take(k->etcd, &v))
		return;
	if (v.deleted)
		snprintf(k->err, sizeof(k->err), "the key was deleted");
	else if (!sl_rules_parse(v.text, v.len, &next, k->err,
				 sizeof(k->err)))
		ret = serve(k, &next);
	if (ret) {
		pr_err("tokend: etcd: %s at revision %llu refused, the rules "
		       "served stay: %s", k->etcd_key,
		       (unsigned long long)v.revision, k->err);
		sl_etcd_source_refused(k->etcd, v.revision, k->err);
	} else {
		pr_info("tokend: etcd: %s at revision %llu served (%zu "
			"rules)", k->etcd_key, (unsigned long long)v.revision,
			k->rs.n);
		sl_etcd_source_applied(k->etcd, v.revision);
	}
	free(v.text);
}

/* SIGHUP without --etcd-key: the rule file again. */
static void reload_rules(struct keeper *k)
{
	struct sl_ruleset next = {0};

	if (sl_rules_load_file(k->file, &next, k->err, sizeof(k->err)) ||
	    serve(k, &next))
		pr_err("tokend: SIGHUP: %s not served, the rules served "
		       "stay: %s", k->file, k->err);
	else
		pr_info("tokend: SIGHUP: rules reloaded from %s: %zu rules",
			k->file, k->rs.n);
}

static int fill_metrics(void *arg, struct sl_text *out)
{
	struct keeper *k = arg;
	struct sl_metrics m;
	int err;

	sl_metrics_init(&m, out);
	sl_metrics_build_info(&m);
	sl_metrics_process_self(&m);
	err = sl_tokend_metrics(k->td, &m);
	if (!err && k->etcd) {
		struct sl_etcd_source_stats cs;

		sl_etcd_source_stats(k->etcd, &cs);
		sl_etcd_source_metrics(&m, &cs);
	}
	return err;
}

/* --metrics: bound before the server runs, so a taken address stops it */
static int start_metrics(const char *addr, struct keeper *k,
			 struct sl_http_metrics **out)
{
	int fd = sl_http_metrics_listen(addr), err;

	if (fd < 0) {
		pr_err("--metrics %s: %s", addr, strerror(-fd));
		return fd;
	}
	err = sl_http_metrics_start(fd, fill_metrics, k, out);
	if (err) {
		pr_err("--metrics %s: cannot serve HTTP: %s", addr,
		       strerror(-err));
		return err;
	}
	pr_info("tokend: metrics on http://%s/metrics", addr);
	return 0;
}

/*
 * SIGHUP reloads the secrets (a rotation, docs/cluster.md) and, without
 * --etcd-key, the rules: a thread that waits for it, since the files
 * cannot be read in a handler. New clients are checked against the new
 * secrets; a file that does not load changes nothing. SIGHUP is blocked
 * in every other thread.
 */
struct reloader {
	pthread_t thread;
	struct keeper *k;
	const char *path;
	struct sl_secrets *cur;
	volatile sig_atomic_t stop;
};

static void *reload_on_hup(void *arg)
{
	struct reloader *r = arg;
	sigset_t hup;
	char err[512];
	int sig;

	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	while (!sigwait(&hup, &sig) && !r->stop) {
		struct sl_secrets *next;

		if (!r->k->etcd_key)
			reload_rules(r->k);
		if (!r->path)
			continue;
		next = sl_secrets_load_new(r->path, err, sizeof(err));
		if (!next) {
			pr_err("tokend: SIGHUP: secrets not reloaded, those in "
			       "use stay: %s", err);
			continue;
		}
		sl_tokend_set_secrets(r->k->td, next);
		sl_secrets_destroy(r->cur);
		r->cur = next;
		pr_info("tokend: SIGHUP: secrets reloaded from %s: %zu "
			"namespaces", r->path, next->n);
	}
	return NULL;
}

static void defaults(void *opts)
{
	struct tokend_opts *o = opts;

	sl_tokend_cfg_default(&o->cfg);
	o->election.ttl_ms = SL_ELECTION_TTL_MS;
	o->log.level = SL_LOG_INFO;
}

static int run(const struct sl_cmd *cmd, void *opts, int argc, char **argv)
{
	struct tokend_opts *o = opts;
	const char *rules = o->rules, *state_dir = o->state_dir;
	const char *secrets_file = o->secrets;
	struct sl_tokend_cfg cfg = o->cfg;
	struct keeper k = { .file = rules, .etcd_key = o->etcd_key };
	struct reloader rl = { .path = secrets_file, .k = &k };
	bool reloading = false;
	sigset_t hup;
	struct sl_http_metrics *http = NULL;
	struct sl_election_cfg ec = o->election;
	struct sl_election *el = NULL;
	struct sl_tokend *td = NULL;
	char *err = NULL;
	int ret = 1, lock_fd = -1;

	/* before any thread starts: only the reloader takes SIGHUP */
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	if (o->metrics && !sl_http_metrics_addr_valid(o->metrics))
		return sl_params_error(cmd, "--metrics: '%s' is not "
					    SL_HTTP_METRICS_ADDR_FORM,
				       o->metrics);
	if (!o->learn_given)
		cfg.learn_ms = cfg.ttl_ms;
	if (ec.name && !ec.endpoints)
		return sl_params_error(cmd, "--election needs --etcd");
	if (o->etcd_key && !ec.endpoints)
		return sl_params_error(cmd, "--etcd-key needs --etcd");
	if (sl_etcd_auth_given(&ec.auth) && !ec.endpoints)
		return sl_params_error(cmd, "--etcd-cacert, --etcd-cert, "
					    "--etcd-user... need --etcd");
	if (ec.endpoints && !ec.name && !o->etcd_key)
		return sl_params_error(cmd, "--etcd needs --election or "
					    "--etcd-key");
	if (ec.name && !ec.advertise)
		return sl_params_error(cmd, "--election needs --advertise "
					    "HOST:PORT, where agents reach "
					    "this replica");
	cfg.elected = ec.name != NULL;
	sl_log_daemon(&o->log, NULL);
	raise_nofile(&cfg);
	err = calloc(1, ERRBUF);
	if (!err)
		return 1;
	lock_fd = lock_state_dir(state_dir);
	if (lock_fd < 0)
		goto out;
	pthread_mutex_init(&k.lock, NULL);
	if (sl_rules_load_file(rules, &k.rs, err, ERRBUF)) {
		pr_err("%s: invalid:\n%s", rules, err);
		goto out;
	}
	if (secrets_file &&
	    !(rl.cur = sl_secrets_load_new(secrets_file, err, ERRBUF))) {
		pr_err("--secrets %s", err);
		goto out;
	}
	if (sl_tokend_new(&cfg, &k.rs, rl.cur, &td, err, ERRBUF)) {
		pr_err("tokend: %s", err);
		goto out;
	}
	k.td = td;
	if (o->etcd_key &&
	    sl_etcd_source_new(ec.endpoints, &ec.auth, o->etcd_key, 0,
			       on_etcd_value, &k, &k.etcd, err, ERRBUF)) {
		pr_err("tokend: %s", err);
		goto out;
	}
	if (o->metrics && start_metrics(o->metrics, &k, &http))
		goto out;
	if (k.etcd && sl_etcd_source_start(k.etcd)) {
		pr_err("tokend: --etcd-key: cannot start its thread");
		goto out;
	}
	if (ec.name && sl_election_start(td, &ec, &el, err, ERRBUF)) {
		pr_err("tokend: %s", err);
		goto out;
	}
	if (!secrets_file)
		pr_warn("tokend: no --secrets: clients are not authenticated "
			"(loopback only)");
	pr_info("tokend: listening on port %u; lease TTL %u ms, learning "
		"for %u ms %s", sl_tokend_port(td), cfg.ttl_ms, cfg.learn_ms,
		ec.name ? "once elected" : "from now");
	reloading = !pthread_create(&rl.thread, NULL, reload_on_hup, &rl);
	if (!reloading)
		pr_warn("tokend: no SIGHUP reload: cannot start its thread");
	running = td;
	signal(SIGUSR1, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	ret = sl_tokend_run(td) ? 1 : 0;
	running = NULL;
	/* granting has stopped: a successor may start at once */
	sl_election_stop(el);
	el = NULL;
	if (reloading) {
		rl.stop = 1;
		pthread_kill(rl.thread, SIGHUP);
		pthread_join(rl.thread, NULL);
	}
	pr_info("tokend: stopped");
out:
	sl_election_stop(el);
	sl_http_metrics_stop(http);
	/* before the server: its thread serves into it */
	sl_etcd_source_free(k.etcd);
	sl_tokend_free(td);
	sl_secrets_destroy(rl.cur);
	sl_ruleset_free(&k.rs);
	if (lock_fd >= 0)
		close(lock_fd);
	free(err);
	return ret;
}

#define CFG(member) SL_FIELD(struct tokend_opts, cfg.member)

static const struct sl_opt tokend_opts[] = {
	{ .name = "listen", .type = SL_OPT_STRING, .field = CFG(listen),
	  .metavar = "ADDR:PORT", .required = true,
	  .help = "where agents connect ([ADDR6]:PORT for IPv6)" },
	{ .name = "rules", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, rules), .metavar = "FILE",
	  .required = true, .help = "the cluster rules to serve" },
	{ .name = "state-dir", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, state_dir), .metavar = "DIR",
	  .required = true, .help = "one server per directory (a lock)" },
	{ .name = "secrets", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, secrets), .metavar = "FILE",
	  .help = "namespace secrets; without, loopback only" },
	{ .name = "lease-ttl-ms", .type = SL_OPT_U32, .field = CFG(ttl_ms),
	  .metavar = "MS", .min = 1, .max = UINT32_MAX,
	  .help = "lease TTL (1000)" },
	{ .name = "sync-ms", .type = SL_OPT_U32, .field = CFG(sync_ms),
	  .metavar = "MS", .min = 1, .max = UINT32_MAX,
	  .help = "sync period advised to agents (100)" },
	{ .name = "learn-ms", .type = SL_OPT_U32, .field = CFG(learn_ms),
	  .given = SL_FIELD(struct tokend_opts, learn_given), .metavar = "MS",
	  .max = UINT32_MAX,
	  .help = "after start, grant no more than agents hold (the TTL)" },
	{ .name = "forget-ms", .type = SL_OPT_U32, .field = CFG(forget_ms),
	  .metavar = "MS", .max = UINT32_MAX,
	  .help = "keep a vanished agent's fallback reserved (600000; 0: no)" },
	{ .name = "max-conns", .type = SL_OPT_U32, .field = CFG(max_conns),
	  .metavar = "N", .max = UINT32_MAX,
	  .help = "authenticated sessions at most (12500)" },
	{ .name = "max-handshakes", .type = SL_OPT_U32,
	  .field = CFG(max_handshakes), .metavar = "N", .min = 1,
	  .max = UINT32_MAX,
	  .help = "connections before AUTH_OK; past it the oldest goes (1024)" },
	{ .name = "ns-rate", .type = SL_OPT_U32, .field = CFG(ns_rate),
	  .metavar = "SYNCS_PER_S", .max = UINT32_MAX,
	  .help = "SYNC frames/s per namespace (200000; 0: no limit)" },
	{ .name = "threads", .type = SL_OPT_U32, .field = CFG(threads),
	  .metavar = "N", .max = SL_TOKEND_MAX_THREADS,
	  .help = "workers serving sessions (0: one per online CPU)" },
	{ .name = "metrics", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, metrics),
	  .metavar = "ADDR:PORT",
	  .help = "serve Prometheus metrics on http://ADDR:PORT/metrics" },
	{ .name = "etcd", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, election.endpoints),
	  .metavar = "URL[,URL...]",
	  .help = "etcd for --election and --etcd-key" },
	{ .name = "election", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, election.name),
	  .metavar = "KEY",
	  .help = "run as a replica: only the leader elected under KEY grants" },
	{ .name = "etcd-key", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, etcd_key), .metavar = "KEY",
	  .help = "serve the rule file at this etcd key, following it" },
	SL_ETCD_AUTH_OPTS(struct tokend_opts, election.auth),
	{ .name = "advertise", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct tokend_opts, election.advertise),
	  .metavar = "HOST:PORT",
	  .help = "where agents reach this replica, told by followers" },
	{ .name = "election-ttl-ms", .type = SL_OPT_U32,
	  .field = SL_FIELD(struct tokend_opts, election.ttl_ms),
	  .metavar = "MS", .min = 1000, .max = 3600000,
	  .help = "the leader's etcd lease, whole seconds (2000)" },
	SL_LOG_OPTS(struct tokend_opts, log),
	{ 0 },
};

const struct sl_cmd sl_cmd_tokend = {
	.name = "tokend",
	.opts = tokend_opts,
	.opts_size = sizeof(struct tokend_opts),
	.defaults = defaults,
	.run = run,
	.summary = "the token server for cluster rules (docs/cluster.md);\n"
		   "SIGUSR1 drains (every lease to TTL 0), SIGTERM stops",
};
