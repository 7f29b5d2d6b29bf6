// SPDX-License-Identifier: GPL-2.0
/* `sluice stats`: per-rule rates and counters, once or --watch. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "log.h"

#define MIN_WATCH_S  0.1
#define MAX_WATCH_S  86400.0
#define CLEAR_SCREEN "\033[H\033[2J"

static const char *grade_unit(const char *grade)
{
	if (!strcmp(grade, "bps"))
		return "B/s";
	if (!strcmp(grade, "cps"))
		return "SYN/s";
	if (!strcmp(grade, "conns"))
		return "conns";
	return "pkt/s";
}

static const char *num(const cJSON *r, const char *key, char *buf, size_t len)
{
	return cli_num_cell(cli_get_num(r, key, -1), buf, len);
}

/* Returns true for a shadow rule. */
static bool stats_row(struct table *t, const cJSON *r,
		      const struct cli_rate *rt)
{
	const char *mode = cli_get_str(r, "mode", "?");
	const char *grade = cli_get_str(r, "grade", "pps");
	const char *state = cli_get_str(r, "cluster_state", NULL);
	bool shadow = !strcmp(mode, "shadow");
	char n1[32], n2[32];

	table_add(t, cli_get_str(r, "name", "?"));
	if (state)
		table_addf(t, "%s, %s", mode, state);
	else
		table_add(t, mode);
	table_addf(t, "%.0f", cli_get_num(r, "layer", 0));
	if (cli_is_limit(r))
		table_addf(t, "%s %s", num(r, "count", n1, sizeof(n1)),
			   grade_unit(grade));
	else
		table_add(t, cli_get_str(r, "action", "?"));
	/* rates in the unit of the limit */
	table_add(t, cli_rate_cell(rt->passed_s, n1, sizeof(n1)));
	table_add(t, shadow ? "-"
			    : cli_rate_cell(rt->blocked_s, n1, sizeof(n1)));
	table_add(t, shadow ? cli_rate_cell(rt->blocked_s, n1, sizeof(n1))
			    : "-");
	table_add(t, num(r, "passed_pkts", n1, sizeof(n1)));
	if (shadow)
		table_addf(t, "(%s)", num(r, "blocked_pkts", n1, sizeof(n1)));
	else
		table_add(t, num(r, "blocked_pkts", n1, sizeof(n1)));
	if (cli_get_bool(r, "per_source")) {
		table_addf(t, "%s/%s", num(r, "sources", n1, sizeof(n1)),
			   num(r, "max_sources", n2, sizeof(n2)));
		table_add(t, num(r, "source_overflow", n1, sizeof(n1)));
	} else {
		table_add(t, "-");
		table_add(t, "-");
	}
	return shadow;
}

/* One line per conns rule: its connections open now, of its count. */
static void print_conns(const cJSON *resp)
{
	const cJSON *r;
	char a[32], b[32];

	cJSON_ArrayForEach(r, cli_get(resp, "rules"))
		if (cli_get(r, "conns_open"))
			printf("conns %s: %s of %s open\n",
			       cli_get_str(r, "name", "?"),
			       num(r, "conns_open", a, sizeof(a)),
			       num(r, "threshold", b, sizeof(b)));
}

/* One line per rule with a breaker: its state and since when, and the
 * answers seen by kind. */
static void print_breakers(const cJSON *resp)
{
	double now = cli_get_num(resp, "time_ns", 0);
	const cJSON *r, *b, *ans, *k;
	char n[6][32], a[32];

	cJSON_ArrayForEach(r, cli_get(resp, "rules")) {
		b = cli_get(r, "breaker");
		if (!cJSON_IsObject(b))
			continue;
		printf("breaker %s: %s for %.1f s; opened %s, half-opened %s, "
		       "closed %s; probes %s ok, %s failed; failed fast %s; "
		       "answers:",
		       cli_get_str(r, "name", "?"),
		       cli_get_str(b, "state", "?"),
		       (now - cli_get_num(b, "since_ns", now)) / 1e9,
		       num(b, "opened", n[0], sizeof(n[0])),
		       num(b, "half_opened", n[1], sizeof(n[1])),
		       num(b, "closed", n[2], sizeof(n[2])),
		       num(b, "probe_success", n[3], sizeof(n[3])),
		       num(b, "probe_failure", n[4], sizeof(n[4])),
		       num(b, "failed_fast", n[5], sizeof(n[5])));
		ans = cli_get(b, "answered");
		cJSON_ArrayForEach(k, ans)
			printf(" %s %s", num(ans, k->string, a, sizeof(a)),
			       k->string);
		printf("\n");
	}
}

static void print_host(const cJSON *host)
{
	const char *sep = "";
	const cJSON *m;
	char n[32];

	printf("host:");
	cJSON_ArrayForEach(m, host) {
		printf("%s %s %s", sep, m->string,
		       cJSON_IsNumber(m) ? cli_num_cell(m->valuedouble, n,
							sizeof(n))
					 : "-");
		sep = ",";
	}
	putchar('\n');
}

static void print_stats(const cJSON *resp, const struct cli_rates *rates)
{
	static const char *const heads[] = {
		"rule", "mode", "layer", "limit", "passed/s", "dropped/s",
		"would-drop/s", "passed", "dropped", "sources", "overflow",
	};
	struct table t = { .ncols = 11, .heads = heads, .right = 0x7fc };
	bool shadow = false;
	const cJSON *r;
	size_t k = 0;

	/* rates->r[k] is the k-th rule object */
	cJSON_ArrayForEach(r, cli_get(resp, "rules"))
		if (cJSON_IsObject(r) && k < rates->n)
			shadow |= stats_row(&t, r, &rates->r[k++]);
	if (k) {
		table_done(&t);
		if (shadow)
			printf("shadow rules drop nothing: would-drop/s and "
			       "(n) are what they would have dropped\n");
	} else {
		printf("no rules in force\n");
	}
	print_breakers(resp);
	print_conns(resp);
	print_host(cli_get(resp, "host"));
	fflush(stdout);
}

/*
 * One request: the table (after header, which may be NULL) or -j. The
 * rates are over the time since the answer rates holds, as in top.
 */
static int stats_once(const struct cli *c, const char *header,
		      struct cli_rates *rates)
{
	cJSON *req = cli_request("stats"), *resp = NULL;
	int err;

	if (!req)
		return -ENOMEM;
	if (c->json) {
		err = cli_call_json(c, req);
	} else {
		err = cli_call(c, req, &resp);
		if (!err)
			err = cli_rates_take(rates, resp);
		if (!err) {
			if (header)
				fputs(header, stdout);
			print_stats(resp, rates);
		}
	}
	cJSON_Delete(req);
	cJSON_Delete(resp);
	return err;
}

static volatile sig_atomic_t watch_stop;

static void on_sigint(int sig)
{
	(void)sig;
	watch_stop = 1;
}

/* Sleep s seconds, or less when SIGINT comes. */
static void watch_sleep(double s)
{
	struct timespec ts = {
		.tv_sec = (time_t)s,
		.tv_nsec = (long)((s - (time_t)s) * 1e9),
	};

	while (!watch_stop && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int watch_stats(const struct cli *c)
{
	struct sigaction sa = { .sa_handler = on_sigint };
	bool tty = !c->json && isatty(STDOUT_FILENO);
	double every = c->watch_s > 0 ? c->watch_s : 1;
	struct cli_rates rates = { 0 };
	bool answered = false;
	int err = 0;

	watch_stop = 0;
	sigemptyset(&sa.sa_mask);
	/* kept to the end: a second Ctrl-C (timeout(1) signals the child
	 * and then its group) must not kill the exit on its way out */
	sigaction(SIGINT, &sa, NULL);
	while (!watch_stop) {
		char when[16], header[64];
		time_t now = time(NULL);

		strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
		snprintf(header, sizeof(header),
			 "%s%s  every %gs, Ctrl-C to stop\n",
			 tty ? CLEAR_SCREEN : "", when, every);
		err = stats_once(c, header, &rates);
		/* once it has answered, an agent restart is worth riding out */
		if (err && !answered)
			break;
		answered |= !err;
		if (!err && !c->json && !tty)
			putchar('\n');
		fflush(stdout);
		watch_sleep(every);
	}
	cli_rates_free(&rates);
	if (err == -ENOMEM)
		pr_err("stats: out of memory");
	return cli_exit_code(err);
}

static int run_stats(const struct sl_cmd *cmd, void *opts, int argc,
		     char **argv)
{
	struct cli *c = opts;
	struct cli_rates rates = { 0 };
	int err = cli_start(c, cmd, argc, argv);

	if (err)
		return err;
	if (c->watch)
		return watch_stats(c);
	err = stats_once(c, NULL, &rates);
	cli_rates_free(&rates);
	if (err == -ENOMEM)
		pr_err("stats: out of memory");
	return cli_exit_code(err);
}

static const struct sl_opt stats_opts[] = {
	CLI_OPT_JSON,
	{ .name = "watch", .type = SL_OPT_SECONDS,
	  .field = SL_FIELD(struct cli, watch_s),
	  .given = SL_FIELD(struct cli, watch), .metavar = "SECONDS",
	  .optional_value = true, .fmin = MIN_WATCH_S, .fmax = MAX_WATCH_S,
	  .help = "repeat every SECONDS (1) until Ctrl-C" },
	CLI_OPT_STATE_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_stats = {
	.name = "stats",
	.opts = stats_opts,
	CLI_VERB,
	.run = run_stats,
	.summary = "show per-rule rates and counters; --watch repeats every "
		   "SECONDS\n(default 1) until Ctrl-C",
};
