// SPDX-License-Identifier: GPL-2.0
/*
 * The sluice CLI: `rule`, `status` and `stats` ask the agent over its
 * control socket (user/ctl.h); `down` removes a pinned data plane without
 * one. This file is the edge: it prints every error and maps it to an exit
 * code. docs/cli.md is the reference for the output and the protocol.
 */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "ctl.h"
#include "json_text.h"
#include "loader.h"
#include "log.h"
#include "rules.h"
#include "rules_parse.h"
#include "rules_json.h"
#include "util.h"

#define ERRBUF		  65536 /* parser errors: one line per problem */
#define MAX_IF_VERSION	  ((1ULL << 53) - 1) /* exact as a JSON number */
#define MIN_WATCH_S	  0.1
#define MAX_WATCH_S	  86400.0
#define SOCK_PATH_MAX	  sizeof(((struct sockaddr_un *)0)->sun_path)
#define CLEAR_SCREEN	  "\033[H\033[2J"

/* Options, as bits of what a verb accepts. */
enum {
	OPT_STATE_DIR = 1 << 0,
	OPT_IF_VERSION = 1 << 1,
	OPT_JSON = 1 << 2,
	OPT_READY = 1 << 3,
	OPT_WATCH = 1 << 4,
	OPT_IFACE = 1 << 5,
	OPT_PIN_DIR = 1 << 6,
};

enum verb_id { V_ADD, V_DEL, V_REPLACE, V_LIST, V_STATUS, V_STATS, V_DOWN };

struct verb {
	const char *name; /* as typed: "rule add" */
	enum verb_id id;
	unsigned int opts;
	int min_args;
	int max_args; /* -1: any number */
	const char *synopsis;
	const char *what;
};

static const struct verb verbs[] = {
	{ "rule add", V_ADD, OPT_STATE_DIR | OPT_IF_VERSION | OPT_JSON, 1, 1,
	  "rule add FILE|- [--if-version N] [-j] [--state-dir DIR]",
	  "add the rules in FILE (- reads stdin) to the rules in force" },
	{ "rule del", V_DEL, OPT_STATE_DIR | OPT_IF_VERSION | OPT_JSON, 1, -1,
	  "rule del NAME [NAME...] [--if-version N] [-j] [--state-dir DIR]",
	  "delete the named rules" },
	{ "rule replace", V_REPLACE, OPT_STATE_DIR | OPT_IF_VERSION | OPT_JSON,
	  1, 1,
	  "rule replace FILE|- [--if-version N] [-j] [--state-dir DIR]",
	  "make the rules in FILE (- reads stdin) the whole rule set" },
	{ "rule list", V_LIST, OPT_STATE_DIR | OPT_JSON, 0, 0,
	  "rule list [-j] [--state-dir DIR]",
	  "show the agent's rules" },
	{ "status", V_STATUS, OPT_STATE_DIR | OPT_JSON | OPT_READY, 0, 0,
	  "status [-j] [--ready] [--state-dir DIR]",
	  "show the agent's state; with --ready print nothing and exit 0\n"
	  "  only if the agent is ready (1 if not, with the reasons)" },
	{ "stats", V_STATS, OPT_STATE_DIR | OPT_JSON | OPT_WATCH, 0, 0,
	  "stats [-j] [--watch [SECONDS]] [--state-dir DIR]",
	  "show per-rule rates and counters; --watch repeats every SECONDS\n"
	  "  (default 1) until Ctrl-C" },
	{ "down", V_DOWN, OPT_STATE_DIR | OPT_IFACE | OPT_PIN_DIR, 0, 0,
	  "down --iface IF[,IF...] [--pin-dir DIR]",
	  "detach and unpin the data plane an agent left on each IF; the\n"
	  "  pinned maps go with the last link (needs no agent)" },
};

#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

struct cli {
	const struct verb *verb;
	const char *state_dir;
	const char *pin_dir;
	const char *ifaces;
	char sock[SOCK_PATH_MAX];
	bool help;
	bool json;
	bool ready;
	bool watch;
	double watch_s;
	bool has_if_version;
	unsigned long long if_version;
	char **args; /* positional arguments */
	int n_args;
};

static void print_usage(FILE *f, const struct verb *v)
{
	fprintf(f, "usage: sluice %s\n  %s\n", v->synopsis, v->what);
}

static void print_rule_usage(FILE *f)
{
	fprintf(f, "usage:\n");
	for (size_t i = 0; i < N_VERBS; i++)
		if (!strncmp(verbs[i].name, "rule ", 5))
			fprintf(f, "  sluice %s\n", verbs[i].synopsis);
}

/* A command-line error: the problem, then the verb's usage. */
__attribute__((format(printf, 2, 3))) static int
usage_err(const struct verb *v, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pr_err("%s: %s", v->name, msg);
	print_usage(stderr, v);
	return -EINVAL;
}

/* ---- command line ---- */

static const struct option long_opts[] = {
	{ "state-dir", required_argument, NULL, 's' },
	{ "if-version", required_argument, NULL, 'v' },
	{ "json", no_argument, NULL, 'j' },
	{ "ready", no_argument, NULL, 'r' },
	{ "watch", optional_argument, NULL, 'w' },
	{ "iface", required_argument, NULL, 'i' },
	{ "pin-dir", required_argument, NULL, 'p' },
	{ "help", no_argument, NULL, 'h' },
	{},
};

static unsigned int opt_bit(int c)
{
	switch (c) {
	case 's':
		return OPT_STATE_DIR;
	case 'v':
		return OPT_IF_VERSION;
	case 'j':
		return OPT_JSON;
	case 'r':
		return OPT_READY;
	case 'w':
		return OPT_WATCH;
	case 'i':
		return OPT_IFACE;
	case 'p':
		return OPT_PIN_DIR;
	}
	return 0;
}

/* A decimal integer 0..MAX_IF_VERSION, digits only. */
static int parse_version(const char *s, unsigned long long *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > MAX_IF_VERSION)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= MIN_WATCH_S) ||
	    !(v <= MAX_WATCH_S))
		return -EINVAL;
	*out = v;
	return 0;
}

/* The word after a bare --watch is its value unless it is an option. */
static bool watch_value_follows(const char *s)
{
	return s && (s[0] != '-' || (s[1] >= '0' && s[1] <= '9') ||
		     s[1] == '.');
}

static const char *long_name(int val)
{
	for (const struct option *o = long_opts; o->name; o++)
		if (o->val == val)
			return o->name;
	return "?";
}

/* "--name=value" for an option that takes no value (getopt sets optopt
 * to its val; arg is then the word getopt just stepped over). */
static bool value_given(const char *arg, int val)
{
	size_t len = strcspn(arg, "=");

	return val && !strncmp(arg, "--", 2) && arg[len] &&
	       !strncmp(long_name(val), arg + 2, len - 2);
}

static int bad_option(const struct cli *c, const char *arg)
{
	if (value_given(arg, optopt))
		return usage_err(c->verb, "option '--%s' takes no value",
				 long_name(optopt));
	/* getopt steps over an unknown long option; a short one is in
	 * optopt */
	if (!optopt)
		return usage_err(c->verb, "unknown or ambiguous option '%s'",
				 arg);
	return usage_err(c->verb, "unknown option '-%c'", optopt);
}

static int parse_args(struct cli *c, int argc, char **argv)
{
	const struct verb *v = c->verb;
	int opt;

	optind = 0; /* glibc: a full reset, sl_cli_main may run again */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":jh", long_opts, NULL)) != -1) {
		const char *arg = argv[optind - 1];

		if (opt == '?')
			return bad_option(c, arg);
		if (opt == ':')
			return usage_err(v, "option '%s' needs a value", arg);
		if (opt == 'h') {
			c->help = true;
			return 0;
		}
		if (!(v->opts & opt_bit(opt)))
			return usage_err(v, "option '--%s' does not apply here",
					 long_name(opt));
		switch (opt) {
		case 's':
			c->state_dir = optarg;
			break;
		case 'v':
			if (parse_version(optarg, &c->if_version))
				return usage_err(v,
						 "--if-version: '%s' is not a "
						 "version number (an integer "
						 "0 to %llu)",
						 optarg, MAX_IF_VERSION);
			c->has_if_version = true;
			break;
		case 'j':
			c->json = true;
			break;
		case 'r':
			c->ready = true;
			break;
		case 'w':
			c->watch = true;
			if (!optarg && optind < argc &&
			    watch_value_follows(argv[optind]))
				optarg = argv[optind++];
			if (optarg && parse_seconds(optarg, &c->watch_s))
				return usage_err(v,
						 "--watch: '%s' is not a "
						 "number of seconds from %g "
						 "to %g",
						 optarg, MIN_WATCH_S,
						 MAX_WATCH_S);
			break;
		case 'i':
			c->ifaces = optarg;
			break;
		case 'p':
			c->pin_dir = optarg;
			break;
		}
	}
	c->args = argv + optind;
	c->n_args = argc - optind;
	if (c->n_args < v->min_args)
		return usage_err(v, "missing %s",
				 v->id == V_DEL ? "NAME (the rule to delete)"
						: "FILE (a rule file, or - "
						  "for stdin)");
	if (v->max_args >= 0 && c->n_args > v->max_args)
		return usage_err(v, "unexpected argument '%s'",
				 c->args[v->max_args]);
	if (!*c->state_dir)
		return usage_err(v, "--state-dir: empty directory name");
	if (!*c->pin_dir)
		return usage_err(v, "--pin-dir: empty directory name");
	if (strlen(c->state_dir) + sizeof("/sluice.sock") > SOCK_PATH_MAX)
		return usage_err(v,
				 "--state-dir: '%s' is too long for a socket "
				 "path (at most %zu bytes)",
				 c->state_dir,
				 SOCK_PATH_MAX - sizeof("/sluice.sock"));
	sl_ctl_path(c->state_dir, c->sock, sizeof(c->sock));
	return 0;
}

/* ---- talking to the agent ---- */

static const cJSON *get(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

static const char *get_str(const cJSON *o, const char *key, const char *def)
{
	const cJSON *v = get(o, key);

	return cJSON_IsString(v) ? v->valuestring : def;
}

static double get_num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = get(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static bool get_bool(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(get(o, key));
}

/* Print why the agent could not be asked; returns err. */
static int call_failed(const struct cli *c, const char *cmd, int err)
{
	switch (err) {
	case -EBADMSG:
		pr_err("%s: the agent at %s sent an answer that is not a "
		       "JSON object", cmd, c->sock);
		break;
	case -EMSGSIZE:
		pr_err("%s: the answer of the agent at %s is larger than "
		       "%u MiB", cmd, c->sock, SL_CTL_MAX_MSG >> 20);
		break;
	case -ENOMEM:
		pr_err("%s: out of memory", cmd);
		break;
	case -EACCES:
	case -EPERM:
		pr_err("cannot reach the agent at %s: %s (the control socket "
		       "is for root only)", c->sock, strerror(-err));
		break;
	case -ETIMEDOUT:
		pr_err("the agent at %s did not answer within %d s — is it "
		       "stuck? (--state-dir DIR to reach another)",
		       c->sock, SL_CTL_TIMEOUT_MS / 1000);
		break;
	default:
		pr_err("cannot reach the agent at %s: %s — is `sluice agent` "
		       "running? (--state-dir DIR to reach another)",
		       c->sock, strerror(-err));
	}
	return err;
}

/* 0 when the answer says "ok": true; else prints the agent's reason. */
static int check_answer(const struct cli *c, const char *cmd,
			const cJSON *resp)
{
	const cJSON *ok = get(resp, "ok");
	const char *code;
	bool failed;

	if (!cJSON_IsBool(ok)) {
		pr_err("%s: the agent at %s sent an answer without \"ok\"",
		       cmd, c->sock);
		return -EBADMSG;
	}
	if (cJSON_IsTrue(ok))
		return 0;
	code = get_str(resp, "code", "?");
	failed = !strcmp(code, "apply") || !strcmp(code, "internal");
	pr_err("%s %s [%s]: %s", cmd, failed ? "failed" : "refused", code,
	       get_str(resp, "error", "(the agent gave no reason)"));
	return -EREMOTEIO;
}

/*
 * Send req and wait for the answer; *resp is set whenever one came back.
 * Returns 0 (ok: true), -EREMOTEIO (the agent said no), -EBADMSG (not a
 * sluice answer), or the transport's -errno. Prints the error.
 */
static int agent_call(const struct cli *c, const cJSON *req, cJSON **resp)
{
	const char *cmd = get_str(req, "cmd", "?");
	int err;

	*resp = NULL;
	err = sl_ctl_call(c->sock, req, resp, SL_CTL_TIMEOUT_MS);
	return err ? call_failed(c, cmd, err) : check_answer(c, cmd, *resp);
}

static int exit_code(int err)
{
	switch (err) {
	case 0:
		return SL_CLI_OK;
	case -EREMOTEIO:
	case -EBADMSG:
	case -EMSGSIZE:
	case -ENOMEM:
		return SL_CLI_FAILED;
	}
	return SL_CLI_UNREACHABLE;
}

/* -j: the answer without "ok", pretty-printed. */
static int print_json(cJSON *resp)
{
	char *text;

	cJSON_DeleteItemFromObjectCaseSensitive(resp, "ok");
	text = cJSON_Print(resp);
	if (!text)
		return -ENOMEM;
	puts(text);
	cJSON_free(text);
	fflush(stdout);
	return 0;
}

/*
 * Send req and read the answer as text. *ok is true when it is one JSON
 * object that says "ok": true; then, with out set, out holds it indented
 * without its "ok". Returns 0 or as call_failed() does.
 */
static int call_text(const struct cli *c, const cJSON *req, const char *cmd,
		     struct sl_text *out, char **text, size_t *len, bool *ok)
{
	struct sl_json r = { .out = out };
	int err;

	*ok = false;
	err = sl_ctl_call_text(c->sock, req, text, len, SL_CTL_TIMEOUT_MS);
	if (err)
		return call_failed(c, cmd, err);
	r.p = *text;
	r.end = *text + *len;
	sl_json_ws(&r);
	if (r.p < r.end && *r.p == '{' &&
	    sl_json_object(&r, 0, out != NULL, ok)) {
		sl_json_ws(&r);
		*ok = *ok && r.p == r.end && !(out && out->nomem);
	} else {
		*ok = false;
	}
	return 0;
}

/* A text that was not a good answer: parse it and say what is wrong. */
static int check_text(const struct cli *c, const char *cmd, char *text,
		      size_t len, cJSON **resp)
{
	int err = sl_ctl_parse(text, len, resp);

	return err ? call_failed(c, cmd, err) : check_answer(c, cmd, *resp);
}

/*
 * -j: send req, print the answer without its "ok". An answer that says
 * "ok": true is relayed; anything else takes the general path, which says
 * what is wrong. Returns as agent_call() does.
 */
static int json_call(const struct cli *c, const cJSON *req)
{
	const char *cmd = get_str(req, "cmd", "?");
	struct sl_text out = { 0 };
	cJSON *resp = NULL;
	size_t len;
	char *text;
	bool ok;
	int err;

	err = call_text(c, req, cmd, &out, &text, &len, &ok);
	if (err)
		return err;
	if (ok) {
		sl_text_put(&out, "\n", 1);
		fwrite(out.buf, 1, out.len, stdout);
		fflush(stdout);
	}
	free(out.buf);
	if (ok) {
		free(text);
		return 0;
	}
	err = check_text(c, cmd, text, len, &resp);
	if (resp && (!err || err == -EREMOTEIO))
		print_json(resp);
	cJSON_Delete(resp);
	return err;
}

static cJSON *new_request(const char *cmd)
{
	cJSON *req = cJSON_CreateObject();

	if (req && !cJSON_AddStringToObject(req, "cmd", cmd)) {
		cJSON_Delete(req);
		return NULL;
	}
	return req;
}

/* Send req (consumed); -j prints any answer, otherwise human() prints
 * a good one. Returns the exit code. */
static int run_request(const struct cli *c, cJSON *req,
		       void (*human)(const cJSON *resp))
{
	cJSON *resp;
	int err;

	if (!req) {
		pr_err("%s: out of memory", c->verb->name);
		return SL_CLI_FAILED;
	}
	if (c->json) {
		err = json_call(c, req);
		cJSON_Delete(req);
		return exit_code(err);
	}
	err = agent_call(c, req, &resp);
	cJSON_Delete(req);
	if (!err)
		human(resp);
	cJSON_Delete(resp);
	return exit_code(err);
}

/* ---- formatting ---- */

static bool integral(double v)
{
	return v > -9e15 && v < 9e15 && v == (double)(long long)v;
}

/* A JSON value as a table cell: "-" when absent. */
static const char *cell(const cJSON *v, char *buf, size_t len)
{
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v) ? "yes" : "no";
	if (!cJSON_IsNumber(v))
		return "-";
	if (integral(v->valuedouble))
		snprintf(buf, len, "%lld", (long long)v->valuedouble);
	else
		snprintf(buf, len, "%.2f", v->valuedouble);
	return buf;
}

static const char *num_cell(double v, char *buf, size_t len)
{
	if (v != v || v < 0) /* absent or nonsense */
		return "-";
	if (integral(v))
		snprintf(buf, len, "%lld", (long long)v);
	else
		snprintf(buf, len, "%.2f", v);
	return buf;
}

/* A rate with k/M/G above 10000: the table stays narrow, -j is exact. */
static const char *rate_cell(double v, char *buf, size_t len)
{
	if (v != v || v < 0)
		return "-";
	if (v < 1e4 && integral(v)) /* the common case: no float printf */
		snprintf(buf, len, "%lld", (long long)v);
	else if (v < 1e4)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1e6)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else if (v < 1e9)
		snprintf(buf, len, "%.1fM", v / 1e6);
	else
		snprintf(buf, len, "%.1fG", v / 1e9);
	return buf;
}

static const char *dur_cell(double s, char *buf, size_t len)
{
	long long t;

	if (s != s || s < 0)
		return "-";
	t = (long long)s;
	if (t < 60)
		snprintf(buf, len, "%llds", t);
	else if (t < 3600)
		snprintf(buf, len, "%lldm%02llds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, len, "%lldh%02lldm", t / 3600, t % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
	return buf;
}

/*
 * A text table: cells are added row by row, column widths follow the
 * widest cell, numbers are right-aligned.
 */
struct table {
	size_t ncols;
	const char *const *heads;
	unsigned int right; /* bit i: column i is right-aligned */
	char *text;	    /* the cells, one after the other, NUL-ended */
	size_t len, size;
	size_t *cell;	    /* where each cell starts in text */
	size_t n, cap;
	int err;
};

static void table_add(struct table *t, const char *s)
{
	size_t l;

	if (t->err)
		return;
	s = s ? s : "-";
	l = strlen(s) + 1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		size_t *nc = realloc(t->cell, cap * sizeof(*nc));

		if (!nc) {
			t->err = -ENOMEM;
			return;
		}
		t->cell = nc;
		t->cap = cap;
	}
	if (t->len + l > t->size) {
		size_t size = 2 * (t->len + l) + 1024;
		char *nt = realloc(t->text, size);

		if (!nt) {
			t->err = -ENOMEM;
			return;
		}
		t->text = nt;
		t->size = size;
	}
	memcpy(t->text + t->len, s, l);
	t->cell[t->n++] = t->len;
	t->len += l;
}

__attribute__((format(printf, 2, 3))) static void
table_addf(struct table *t, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	table_add(t, buf);
}

static void pad(size_t n)
{
	static const char spaces[] = "                                ";

	while (n) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;

		fwrite(spaces, 1, k, stdout);
		n -= k;
	}
}

static void print_cell(const struct table *t, size_t col, const char *s,
		       const size_t *width)
{
	bool last = col + 1 == t->ncols;
	size_t l = strlen(s);

	if (t->right & (1u << col))
		pad(width[col] - l);
	fputs(s, stdout);
	if (!(t->right & (1u << col)) && !last)
		pad(width[col] - l);
	fputs(last ? "\n" : "  ", stdout);
}

static int table_print(struct table *t)
{
	size_t width[16] = { 0 }, i;

	if (t->err)
		return t->err;
	for (i = 0; i < t->ncols; i++)
		width[i] = strlen(t->heads[i]);
	for (i = 0; i < t->n; i++) {
		size_t l = strlen(t->text + t->cell[i]);

		if (l > width[i % t->ncols])
			width[i % t->ncols] = l;
	}
	for (i = 0; i < t->ncols; i++)
		print_cell(t, i, t->heads[i], width);
	for (i = 0; i < t->n; i++)
		print_cell(t, i % t->ncols, t->text + t->cell[i], width);
	return 0;
}

static void table_free(struct table *t)
{
	free(t->text);
	free(t->cell);
}

static void table_done(struct table *t)
{
	if (table_print(t))
		pr_err("out of memory while printing a table");
	table_free(t);
}

/* ---- rule add / del / replace / list ---- */

static void print_change(const cJSON *resp)
{
	char v[32], n[32];

	printf("rules at version %s: %s in force\n",
	       cell(get(resp, "version"), v, sizeof(v)),
	       cell(get(resp, "rules_in_force"), n, sizeof(n)));
}

static int read_stdin(char **out, size_t *outlen)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;

	for (;;) {
		ssize_t n;

		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 64 << 10;
			char *nb;

			if (cap >= SL_CTL_MAX_MSG) {
				free(buf);
				return -EFBIG;
			}
			nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		n = read(STDIN_FILENO, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;

			free(buf);
			return err;
		}
		if (!n)
			break;
		len += n;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

/* The canonical rules of file ("-": stdin), validated like the agent
 * will; the errors are in err. */
static int load_rules(const char *file, char **rules, char *err,
		      size_t errlen)
{
	struct sl_ruleset rs = { 0 };
	char *arr;
	int ret;

	if (!strcmp(file, "-")) {
		size_t len = 0;
		char *buf = NULL;

		ret = read_stdin(&buf, &len);
		if (ret) {
			snprintf(err, errlen, "cannot read stdin: %s",
				 strerror(-ret));
			return ret;
		}
		ret = sl_rules_parse(buf, len, &rs, err, errlen);
		free(buf);
	} else {
		ret = sl_rules_load_file(file, &rs, err, errlen);
	}
	if (ret)
		return ret;
	arr = sl_rules_text(&rs);
	sl_ruleset_free(&rs);
	if (!arr) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*rules = arr;
	return 0;
}

static int cmd_change(const struct cli *c)
{
	static const char *const cmds[] = {
		[V_ADD] = "rule.add",
		[V_DEL] = "rule.del",
		[V_REPLACE] = "rule.replace",
	};
	cJSON *req = new_request(cmds[c->verb->id]), *list = NULL;
	char *rules = NULL;
	int ret;

	if (!req)
		goto nomem;
	if (c->verb->id == V_DEL) {
		list = cJSON_AddArrayToObject(req, "names");
		for (int i = 0; list && i < c->n_args; i++)
			if (!cJSON_AddItemToArray(
				    list, cJSON_CreateString(c->args[i])))
				list = NULL;
		if (!list)
			goto nomem;
	} else {
		const char *file = c->args[0];
		char *err = calloc(1, ERRBUF);

		if (!err)
			goto nomem;
		ret = load_rules(file, &rules, err, ERRBUF);
		if (ret == -EINVAL)
			pr_err("%s: invalid rule file, nothing sent to the "
			       "agent:\n%s",
			       strcmp(file, "-") ? file : "<stdin>", err);
		else if (ret)
			pr_err("%s", err);
		free(err);
		if (ret) {
			cJSON_Delete(req);
			return SL_CLI_FAILED;
		}
		/* the canonical text as it is: no tree to build and print */
		list = cJSON_AddRawToObject(req, "rules", rules);
		free(rules);
		if (!list)
			goto nomem;
	}
	if (c->has_if_version &&
	    !cJSON_AddNumberToObject(req, "if_version", (double)c->if_version))
		goto nomem;
	return run_request(c, req, print_change);
nomem:
	cJSON_Delete(req);
	pr_err("%s: out of memory", c->verb->name);
	return SL_CLI_FAILED;
}

static void list_row(struct table *t, const cJSON *r)
{
	const cJSON *m = get(r, "match"), *w = get(r, "window");
	const cJSON *ps = get(r, "per_source"), *b = get(r, "behavior");
	char buf[64], n1[32], n2[32], n3[32];

	table_add(t, get_str(r, "name", "?"));
	table_add(t, get_str(m, "proto", "any"));
	table_add(t, get(m, "dport") ? cell(get(m, "dport"), n1, sizeof(n1))
				     : "any");
	table_add(t, get_str(m, "dst", "any"));
	table_add(t, get_str(m, "src", "any"));
	table_add(t, get_str(r, "grade", "?"));
	table_add(t, cell(get(r, "count"), n1, sizeof(n1)));
	table_addf(t, "%sms/%s", cell(get(w, "interval_ms"), n1, sizeof(n1)),
		   cell(get(w, "sample_count"), n2, sizeof(n2)));
	table_add(t, get_str(r, "mode", "enforce"));
	table_add(t, cell(get(r, "priority"), n1, sizeof(n1)));
	if (cJSON_IsObject(ps))
		table_addf(t, "/%s,/%s max %s",
			   cell(get(ps, "prefix_v4"), n1, sizeof(n1)),
			   cell(get(ps, "prefix_v6"), n2, sizeof(n2)),
			   cell(get(ps, "max_sources"), n3, sizeof(n3)));
	else
		table_add(t, "-");
	if (cJSON_IsObject(b)) {
		const cJSON *wu = get(b, "warm_up");

		snprintf(buf, sizeof(buf), "warm_up %ss/%s",
			 cell(get(wu, "period_s"), n1, sizeof(n1)),
			 cell(get(wu, "cold_factor"), n2, sizeof(n2)));
		table_add(t, buf);
	} else {
		table_add(t, get_str(r, "behavior", "reject"));
	}
}

static void print_list(const cJSON *resp)
{
	static const char *const heads[] = {
		"name", "proto", "dport", "dst", "src", "grade", "count",
		"window", "mode", "priority", "per_source", "behavior",
	};
	struct table t = {
		.ncols = 12, .heads = heads, .right = 1u << 6 | 1u << 9
	};
	const cJSON *rules = get(resp, "rules"), *r;
	char v[32];

	printf("version %s, updated %s, %d rules\n",
	       cell(get(resp, "version"), v, sizeof(v)),
	       get_str(resp, "updated_at", "-"), cJSON_GetArraySize(rules));
	if (!cJSON_GetArraySize(rules))
		return;
	cJSON_ArrayForEach(r, rules)
		if (cJSON_IsObject(r))
			list_row(&t, r);
	table_done(&t);
}

/* ---- status ---- */

static void print_ifaces(const cJSON *ifs, const char *snap_rules)
{
	static const char *const heads[] = {
		"interface", "ifindex", "mode", "attached", "adopted", "rules",
	};
	struct table t = { .ncols = 6, .heads = heads, .right = 1u << 1 };
	const cJSON *i;
	char n[32];

	cJSON_ArrayForEach(i, ifs) {
		table_add(&t, get_str(i, "name", "?"));
		table_add(&t, cell(get(i, "ifindex"), n, sizeof(n)));
		table_add(&t, get_str(i, "mode", "-"));
		table_add(&t, cell(get(i, "attached"), n, sizeof(n)));
		table_add(&t, cell(get(i, "adopted"), n, sizeof(n)));
		table_addf(&t, "%s/%s",
			   cell(get(i, "rules_in_force"), n, sizeof(n)),
			   snap_rules);
	}
	table_done(&t);
}

/* One row per cluster flow, then sessions that are not syncing. */
static void print_cluster(const cJSON *cl)
{
	static const char *const heads[] = {
		"flow", "ns/id", "state", "since", "limit", "grant",
		"lease ms", "token server", "rtt us", "holders",
	};
	struct table t = { .ncols = 10, .heads = heads, .right = 0x3f0 };
	const cJSON *f, *s;
	char n[32];

	printf("\ncluster:   node %s\n", get_str(cl, "node_id", "?"));
	cJSON_ArrayForEach(f, get(cl, "flows")) {
		table_add(&t, get_str(f, "name", "?"));
		table_addf(&t, "%s/%s", get_str(f, "namespace", "?"),
			   cell(get(f, "flow_id"), n, sizeof(n)));
		table_add(&t, get_str(f, "state", "?"));
		table_add(&t, get_str(f, "since", "-"));
		table_add(&t, cell(get(f, "limit"), n, sizeof(n)));
		table_add(&t, cell(get(f, "grant"), n, sizeof(n)));
		table_add(&t, cell(get(f, "lease_expires_in_ms"), n,
				   sizeof(n)));
		table_add(&t, get_str(f, "token_server", "-"));
		table_add(&t, cell(get(f, "last_sync_rtt_us"), n, sizeof(n)));
		table_add(&t, cell(get(f, "holders"), n, sizeof(n)));
	}
	table_done(&t);
	cJSON_ArrayForEach(s, get(cl, "sessions"))
		if (*get_str(s, "last_error", ""))
			printf("namespace %s: %s (%s)\n",
			       get_str(s, "namespace", "?"),
			       get_str(s, "state", "?"),
			       get_str(s, "last_error", ""));
}

static void print_status(const cJSON *resp)
{
	const cJSON *snap = get(resp, "snapshot"), *ifs, *why;
	char a[32], b[32], snap_rules[32] = "-";

	if (get_bool(resp, "ready")) {
		printf("ready\n");
	} else {
		printf("NOT READY\n");
		cJSON_ArrayForEach(why, get(resp, "not_ready"))
			if (cJSON_IsString(why))
				printf("  - %s\n", why->valuestring);
	}
	printf("agent:     pid %s, up %s%s%s\n",
	       cell(get(resp, "pid"), a, sizeof(a)),
	       dur_cell(get_num(resp, "uptime_s", -1), b, sizeof(b)),
	       get_bool(resp, "adopted") ? ", took over a running data plane"
					 : "",
	       get_bool(resp, "allow_empty") ? ", --allow-empty" : "");
	if (cJSON_IsObject(snap) && !get_num(snap, "version", 0)) {
		/* versions start at 1: nothing has been written yet */
		printf("snapshot:  none yet (%s)\n",
		       get_str(snap, "path", "-"));
	} else if (cJSON_IsObject(snap)) {
		cell(get(snap, "rules"), snap_rules, sizeof(snap_rules));
		printf("snapshot:  version %s, %s rules, updated %s (%s ago)\n",
		       cell(get(snap, "version"), a, sizeof(a)), snap_rules,
		       get_str(snap, "updated_at", "-"),
		       dur_cell(get_num(snap, "age_s", -1), b, sizeof(b)));
		printf("           %s%s\n", get_str(snap, "path", "-"),
		       get_bool(snap, "from_prev")
			       ? " (read from the .prev copy: the current "
				 "file was unusable)"
			       : "");
	} else {
		printf("snapshot:  none\n");
	}
	printf("in force:  %s rules, version %s (the snapshot holds %s)\n",
	       cell(get(resp, "rules_in_force"), a, sizeof(a)),
	       cell(get(resp, "in_force_version"), b, sizeof(b)), snap_rules);
	ifs = get(resp, "interfaces");
	if (cJSON_GetArraySize(ifs)) {
		putchar('\n');
		print_ifaces(ifs, snap_rules);
	} else {
		printf("interfaces: none\n");
	}
	if (cJSON_IsObject(get(resp, "cluster")))
		print_cluster(get(resp, "cluster"));
}

static int cmd_status(const struct cli *c)
{
	cJSON *req = new_request("status"), *resp;
	const cJSON *why;
	int err;

	if (!c->ready)
		return run_request(c, req, print_status);
	if (!req) {
		pr_err("status: out of memory");
		return SL_CLI_FAILED;
	}
	/* a probe: silent when ready, the reasons on stderr when not */
	err = agent_call(c, req, &resp);
	cJSON_Delete(req);
	if (!err && !get_bool(resp, "ready")) {
		err = -EREMOTEIO;
		pr_err("the agent is not ready");
		cJSON_ArrayForEach(why, get(resp, "not_ready"))
			if (cJSON_IsString(why))
				fprintf(stderr, "  - %s\n", why->valuestring);
	}
	cJSON_Delete(resp);
	return exit_code(err);
}

/* ---- stats ---- */

static const char *grade_unit(const char *grade)
{
	if (!strcmp(grade, "bps"))
		return "B/s";
	if (!strcmp(grade, "cps"))
		return "SYN/s";
	return "pkt/s";
}

/*
 * The stats answer is read from its text, without a tree: some 70000
 * values for 4096 rules. A row is a flat object's members as they came.
 */
#define ROW_MAX 32

struct row {
	struct member {
		const char *key, *val; /* the key without quotes */
		size_t key_len, val_len;
	} m[ROW_MAX];
	int n;
};

/* The object at r->p (valid JSON: the answer was checked) into row;
 * members past ROW_MAX are skipped. */
static void read_row(struct sl_json *r, struct row *row)
{
	row->n = 0;
	r->p++;
	sl_json_ws(r);
	while (r->p < r->end && *r->p == '"') {
		struct member m = { .key = r->p + 1 };

		sl_json_string(r, false);
		m.key_len = r->p - m.key - 1;
		sl_json_ws(r);
		r->p++; /* ':' */
		sl_json_ws(r);
		m.val = r->p;
		sl_json_value(r, 1, false);
		m.val_len = r->p - m.val;
		if (row->n < ROW_MAX)
			row->m[row->n++] = m;
		sl_json_ws(r);
		if (*r->p == ',')
			r->p++;
		sl_json_ws(r);
	}
	r->p++; /* '}' */
}

static const struct member *row_get(const struct row *row, const char *key)
{
	size_t n = strlen(key);

	for (int i = 0; i < row->n; i++)
		if (row->m[i].key_len == n && !memcmp(row->m[i].key, key, n))
			return &row->m[i];
	return NULL;
}

/* A string member's text (its JSON escapes as they are), or def. */
static const char *row_str(const struct row *row, const char *key,
			   const char *def, char *buf, size_t len)
{
	const struct member *m = row_get(row, key);

	if (!m || m->val[0] != '"')
		return def;
	snprintf(buf, len, "%.*s", (int)(m->val_len - 2), m->val + 1);
	return buf;
}

static double row_num(const struct row *row, const char *key, double def)
{
	const struct member *m = row_get(row, key);
	unsigned long long v = 0;
	size_t i;

	if (!m || !(m->val[0] == '-' || (m->val[0] >= '0' && m->val[0] <= '9')))
		return def;
	/* counters are integers: strtod only for the rest */
	for (i = 0; i < m->val_len && i < 15 && m->val[i] >= '0' &&
		    m->val[i] <= '9'; i++)
		v = v * 10 + (m->val[i] - '0');
	return i == m->val_len ? (double)v : strtod(m->val, NULL);
}

static bool row_true(const struct row *row, const char *key)
{
	const struct member *m = row_get(row, key);

	return m && m->val_len == 4 && !memcmp(m->val, "true", 4);
}

/* Returns true for a shadow rule. */
static bool stats_row(struct table *t, const struct row *r)
{
	char name[SL_NAME_MAX + 8], mode[16], grade[16], state[24], n1[32];
	char n2[32];
	bool shadow, bytes;
	double over;

	row_str(r, "grade", "pps", grade, sizeof(grade));
	row_str(r, "mode", "?", mode, sizeof(mode));
	shadow = !strcmp(mode, "shadow");
	bytes = !strcmp(grade, "bps");
	table_add(t, row_str(r, "name", "?", name, sizeof(name)));
	if (row_str(r, "cluster_state", NULL, state, sizeof(state)))
		table_addf(t, "%s, %s", mode, state);
	else
		table_add(t, mode);
	table_addf(t, "%s %s", num_cell(row_num(r, "count", -1), n1,
					sizeof(n1)),
		   grade_unit(grade));
	/* rates in the unit of the limit */
	table_add(t, rate_cell(row_num(r, bytes ? "passed_Bps" : "passed_pps",
				       -1),
			       n1, sizeof(n1)));
	over = row_num(r, bytes ? "blocked_Bps" : "blocked_pps", -1);
	table_add(t, shadow ? "-" : rate_cell(over, n1, sizeof(n1)));
	table_add(t, shadow ? rate_cell(over, n1, sizeof(n1)) : "-");
	table_add(t, num_cell(row_num(r, "passed_pkts", -1), n1, sizeof(n1)));
	if (shadow)
		table_addf(t, "(%s)", num_cell(row_num(r, "blocked_pkts", -1),
					       n1, sizeof(n1)));
	else
		table_add(t, num_cell(row_num(r, "blocked_pkts", -1), n1,
				      sizeof(n1)));
	if (row_true(r, "per_source")) {
		table_addf(t, "%s/%s",
			   num_cell(row_num(r, "sources", -1), n1, sizeof(n1)),
			   num_cell(row_num(r, "max_sources", -1), n2,
				    sizeof(n2)));
		table_add(t, num_cell(row_num(r, "source_overflow", -1), n1,
				      sizeof(n1)));
	} else {
		table_add(t, "-");
		table_add(t, "-");
	}
	return shadow;
}

static void print_host(const struct row *host)
{
	const char *sep = "";
	char n[32];

	printf("host:");
	for (int i = 0; i < host->n; i++) {
		const struct member *m = &host->m[i];
		const char *v = m->val;
		int len = m->val_len;

		if (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
			v = num_cell(strtod(v, NULL), n, sizeof(n));
			len = strlen(v);
		}
		printf("%s %.*s %.*s", sep, (int)m->key_len, m->key, len, v);
		sep = ",";
	}
	putchar('\n');
}

/* The stats table of an answer that says "ok": true (valid JSON). */
static void print_stats(const char *text, size_t len)
{
	static const char *const heads[] = {
		"rule", "mode", "limit", "passed/s", "dropped/s",
		"would-drop/s", "passed", "dropped", "sources", "overflow",
	};
	struct table t = { .ncols = 10, .heads = heads, .right = 0x3fc };
	struct sl_json r = { .p = text, .end = text + len };
	struct row row, host = { .n = 0 };
	bool shadow = false, any = false;

	sl_json_ws(&r);
	r.p++; /* '{' */
	sl_json_ws(&r);
	while (r.p < r.end && *r.p == '"') {
		const char *key = r.p;
		size_t key_len;

		sl_json_string(&r, false);
		key_len = r.p - key;
		sl_json_ws(&r);
		r.p++; /* ':' */
		sl_json_ws(&r);
		if (key_len == 7 && !memcmp(key, "\"rules\"", 7) &&
		    *r.p == '[') {
			r.p++;
			sl_json_ws(&r);
			while (*r.p != ']') {
				if (*r.p == '{') {
					read_row(&r, &row);
					shadow |= stats_row(&t, &row);
					any = true;
				} else {
					sl_json_value(&r, 1, false);
				}
				sl_json_ws(&r);
				if (*r.p == ',')
					r.p++;
				sl_json_ws(&r);
			}
			r.p++;
		} else if (key_len == 6 && !memcmp(key, "\"host\"", 6) &&
			   *r.p == '{') {
			read_row(&r, &host);
		} else {
			sl_json_value(&r, 1, false);
		}
		sl_json_ws(&r);
		if (*r.p == ',')
			r.p++;
		sl_json_ws(&r);
	}
	if (any) {
		table_done(&t);
		if (shadow)
			printf("shadow rules drop nothing: would-drop/s and "
			       "(n) are what they would have dropped\n");
	} else {
		printf("no rules in force\n");
	}
	print_host(&host);
	fflush(stdout);
}

/*
 * stats without -j: the table when the answer says "ok": true; anything
 * else takes the general path, which says what is wrong. header (may be
 * NULL) is printed before a table. Returns as agent_call() does.
 */
static int stats_call(const struct cli *c, const cJSON *req,
		      const char *header)
{
	cJSON *resp = NULL;
	size_t len;
	char *text;
	bool ok;
	int err;

	err = call_text(c, req, "stats", NULL, &text, &len, &ok);
	if (err)
		return err;
	if (ok) {
		if (header)
			fputs(header, stdout);
		print_stats(text, len);
		free(text);
		return 0;
	}
	err = check_text(c, "stats", text, len, &resp);
	cJSON_Delete(resp);
	/* "ok": true, yet not read above: not an answer of ours */
	return err ? err : call_failed(c, "stats", -EBADMSG);
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
	struct sigaction sa = { .sa_handler = on_sigint }, old;
	bool tty = !c->json && isatty(STDOUT_FILENO);
	double every = c->watch_s > 0 ? c->watch_s : 1;
	bool answered = false;
	int err = 0;

	watch_stop = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old);
	while (!watch_stop) {
		cJSON *req = new_request("stats");
		char when[16], header[64];
		time_t now = time(NULL);

		strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
		snprintf(header, sizeof(header),
			 "%s%s  every %gs, Ctrl-C to stop\n",
			 tty ? CLEAR_SCREEN : "", when, every);
		if (!req)
			err = -ENOMEM;
		else if (c->json)
			err = json_call(c, req);
		else
			err = stats_call(c, req, header);
		cJSON_Delete(req);
		/* once it has answered, an agent restart is worth riding out */
		if (err && !answered)
			break;
		answered |= !err;
		if (!err && !c->json && !tty)
			putchar('\n');
		fflush(stdout);
		watch_sleep(every);
	}
	sigaction(SIGINT, &old, NULL);
	if (err == -ENOMEM)
		pr_err("stats: out of memory");
	return exit_code(err);
}

static int cmd_stats(const struct cli *c)
{
	cJSON *req;
	int err;

	if (c->watch)
		return watch_stats(c);
	if (c->json)
		return run_request(c, new_request("stats"), NULL);
	req = new_request("stats");
	if (!req) {
		pr_err("stats: out of memory");
		return SL_CLI_FAILED;
	}
	err = stats_call(c, req, NULL);
	cJSON_Delete(req);
	return exit_code(err);
}

/* ---- down ---- */

static int cmd_down(const struct cli *c)
{
	char names[SL_MAX_IFACES][IF_NAMESIZE], why[256];
	int ret = SL_CLI_OK, n, err;
	bool any = false;

	if (!c->ifaces) {
		usage_err(c->verb, "missing --iface IF[,IF...] (the "
				   "interfaces to take down)");
		return SL_CLI_USAGE;
	}
	if (sl_parse_ifaces(c->ifaces, names, SL_MAX_IFACES, &n, why,
			    sizeof(why))) {
		usage_err(c->verb, "--iface: %s", why);
		return SL_CLI_USAGE;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i];

		err = sl_pins_down(c->pin_dir, name);
		if (!err) {
			printf("%s: detached, link unpinned from %s\n", name,
			       c->pin_dir);
			any = true;
		} else if (err == -ENOENT) {
			pr_err("%s: nothing pinned under %s", name,
			       c->pin_dir);
			ret = SL_CLI_FAILED;
		} else {
			pr_err("%s: cannot take down the data plane pinned "
			       "under %s: %s", name, c->pin_dir,
			       strerror(-err));
			ret = SL_CLI_FAILED;
		}
	}
	if (any && access(c->pin_dir, F_OK) && errno == ENOENT)
		printf("%s: no link left, pinned maps removed\n", c->pin_dir);
	else if (any)
		printf("%s: links of other interfaces left, pinned maps "
		       "kept\n", c->pin_dir);
	fflush(stdout);
	return ret;
}

/* ---- entry ---- */

static const struct verb *find_verb(const char *name)
{
	for (size_t i = 0; i < N_VERBS; i++)
		if (!strcmp(verbs[i].name, name))
			return &verbs[i];
	return NULL;
}

bool sl_cli_is_verb(const char *verb)
{
	return verb && (!strcmp(verb, "rule") || !strcmp(verb, "status") ||
			!strcmp(verb, "stats") || !strcmp(verb, "down"));
}

int sl_cli_main(int argc, char **argv)
{
	struct cli c = {
		.state_dir = SL_CLI_DEF_STATE_DIR,
		.pin_dir = SL_CLI_DEF_PIN_DIR,
	};
	char name[32];

	if (argc < 1 || !sl_cli_is_verb(argv[0])) {
		pr_err("unknown command '%s'", argc < 1 ? "" : argv[0]);
		return SL_CLI_USAGE;
	}
	if (!strcmp(argv[0], "rule")) {
		if (argc < 2 || argv[1][0] == '-') {
			if (argc >= 2 && (!strcmp(argv[1], "-h") ||
					  !strcmp(argv[1], "--help"))) {
				print_rule_usage(stdout);
				return SL_CLI_OK;
			}
			pr_err("rule: %s", argc < 2
				? "missing subcommand (add, del, replace or "
				  "list)"
				: "the subcommand (add, del, replace or list) "
				  "comes before the options");
			print_rule_usage(stderr);
			return SL_CLI_USAGE;
		}
		snprintf(name, sizeof(name), "rule %s", argv[1]);
		c.verb = find_verb(name);
		if (!c.verb) {
			pr_err("rule: unknown subcommand '%s' (add, del, "
			       "replace or list)", argv[1]);
			print_rule_usage(stderr);
			return SL_CLI_USAGE;
		}
		argc--;
		argv++;
	} else {
		c.verb = find_verb(argv[0]);
	}
	if (parse_args(&c, argc, argv))
		return SL_CLI_USAGE;
	if (c.help) {
		print_usage(stdout, c.verb);
		return SL_CLI_OK;
	}
	switch (c.verb->id) {
	case V_ADD:
	case V_DEL:
	case V_REPLACE:
		return cmd_change(&c);
	case V_LIST:
		return run_request(&c, new_request("rule.list"), print_list);
	case V_STATUS:
		return cmd_status(&c);
	case V_STATS:
		return cmd_stats(&c);
	case V_DOWN:
		return cmd_down(&c);
	}
	return SL_CLI_USAGE;
}
