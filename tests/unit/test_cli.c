/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit tests for the CLI (user/cli/): command-line errors, an unreachable
 * agent, local validation of rule files, and the requests and answers on
 * the control socket, against a fake agent served from a thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "ctl.h"
#include "sluice.h"

#define OUT_MAX (1 << 16)
#define __maybe_unused __attribute__((unused))

static char dir[64];	  /* the fake agent's state dir */
static char empty[96];	  /* a state dir nobody listens in */
static char good[96];	  /* a valid rule file */
static char bad[96];	  /* an invalid one */
static char out[OUT_MAX]; /* stdout of the last run */
static char err[OUT_MAX]; /* stderr of the last run */

/* ---- running the CLI with stdout and stderr captured ---- */

static void slurp(int fd, char *buf)
{
	ssize_t n = pread(fd, buf, OUT_MAX - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

static int run_cli(char **argv, const char *stdin_text)
{
	int saved[3], tmp[3], ret, argc = 0;

	while (argv[argc])
		argc++;
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < 3; i++) {
		char name[] = "/tmp/sluice-cli-io-XXXXXX";

		tmp[i] = mkstemp(name);
		assert_true(tmp[i] >= 0);
		unlink(name);
		saved[i] = dup(i);
	}
	if (stdin_text) {
		assert_int_equal(write(tmp[0], stdin_text, strlen(stdin_text)),
				 (ssize_t)strlen(stdin_text));
		lseek(tmp[0], 0, SEEK_SET);
		dup2(tmp[0], 0);
	}
	dup2(tmp[1], 1);
	dup2(tmp[2], 2);
	ret = sl_main(argc, argv);
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < 3; i++) {
		dup2(saved[i], i);
		close(saved[i]);
	}
	slurp(tmp[1], out);
	slurp(tmp[2], err);
	for (int i = 0; i < 3; i++)
		close(tmp[i]);
	return ret;
}

#define RUN(...)       run_cli((char *[]){ __VA_ARGS__, NULL }, NULL)
#define RUN_STDIN(text, ...) \
	run_cli((char *[]){ __VA_ARGS__, NULL }, text)

#define assert_in(hay, needle)                                            \
	do {                                                              \
		if (!strstr(hay, needle))                                 \
			fail_msg("expected '%s' in:\n%s", needle, hay);  \
	} while (0)

/* Exit 2, the problem named on stderr, the verb's usage after it. */
static void expect_usage(int ret, const char *needle, const char *verb)
{
	char usage[64];

	if (ret != 2)
		fail_msg("exit %d, expected 2; stderr:\n%s", ret, err);
	assert_in(err, needle);
	if (verb) {
		snprintf(usage, sizeof(usage), "usage: sluice %s", verb);
		assert_in(err, usage);
	}
	assert_string_equal(out, "");
}

/* Runs of spaces as one, to compare table rows whatever the widths. */
static void squash(const char *in, char *o, size_t len)
{
	size_t n = 0;

	for (; *in && n + 1 < len; in++)
		if (*in != ' ' || (n && o[n - 1] != ' '))
			o[n++] = *in;
	o[n] = '\0';
}

static void assert_row(const char *row)
{
	static char sq[OUT_MAX];

	squash(out, sq, sizeof(sq));
	if (!strstr(sq, row))
		fail_msg("expected row '%s' in:\n%s", row, out);
}

/* ---- a fake agent: answers connections with canned text ---- */

struct fake {
	char path[128];
	const char *answers[4];
	int n_answers;
	cJSON *reqs[4];
	int served;
	bool sigint_after; /* SIGINT to the CLI after the last answer */
	struct sl_ctl_server *srv;
	pthread_t cli_thread;
	pthread_t thread;
};

/* The canned answer, as the agent's server would send it. */
static char *fake_answer(void *arg, const char *req, size_t len)
{
	struct fake *f = arg;
	char *copy;

	if (f->served == f->n_answers)
		return strdup("{\"ok\":false,\"code\":\"internal\","
			      "\"error\":\"the fake agent has no more answers\"}");
	copy = malloc(len + 1);
	memcpy(copy, req, len);
	if (sl_ctl_parse(copy, len, &f->reqs[f->served]))
		f->reqs[f->served] = NULL;
	return strdup(f->answers[f->served++]);
}

static void *fake_serve(void *arg)
{
	struct fake *f = arg;
	struct sl_ctl_server_stats st;

	/* until the last answer is out, 5 s at most */
	for (int i = 0; i < 50; i++) {
		sl_ctl_server_poll(f->srv, 100);
		sl_ctl_server_get_stats(f->srv, &st);
		if (f->served == f->n_answers && !st.clients)
			break;
	}
	if (f->sigint_after)
		pthread_kill(f->cli_thread, SIGINT);
	return NULL;
}

static void fake_start(struct fake *f)
{
	int lfd;

	sl_ctl_path(dir, f->path, sizeof(f->path));
	lfd = sl_ctl_listen(f->path);
	assert_true(lfd >= 0);
	assert_int_equal(sl_ctl_server_new(lfd, 4, 5000, fake_answer, f,
					   &f->srv),
			 0);
	f->cli_thread = pthread_self();
	assert_int_equal(pthread_create(&f->thread, NULL, fake_serve, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->thread, NULL);
	sl_ctl_server_free(f->srv);
	unlink(f->path);
}

static void fake_free(struct fake *f)
{
	for (int i = 0; i < 4; i++)
		cJSON_Delete(f->reqs[i]);
}

/* Serve one answer to one CLI run; returns its exit code. */
static int with_agent(struct fake *f, const char *answer, char **argv)
{
	int ret;

	f->answers[0] = answer;
	f->n_answers = 1;
	fake_start(f);
	ret = run_cli(argv, NULL);
	fake_stop(f);
	return ret;
}

#define WITH_AGENT(f, answer, ...) \
	with_agent(f, answer, (char *[]){ __VA_ARGS__, NULL })

static const char *req_str(const cJSON *req, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, key);

	return cJSON_IsString(v) ? v->valuestring : "(missing)";
}

/* ---- fixtures ---- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static const char good_rules[] =
	"{\"rules\": ["
	"{\"name\": \"web-syn\", \"match\": {\"proto\": \"tcp\", "
	"\"dport\": 443, \"dst\": \"198.18.0.0/15\"}, \"grade\": \"cps\", "
	"\"count\": 4000},"
	"{\"name\": \"dns\", \"match\": {\"proto\": \"udp\", \"dport\": 53},"
	" \"grade\": \"pps\", \"count\": 100, \"mode\": \"shadow\", "
	"\"per_source\": {\"max_sources\": 1000}}]}";

static int setup(void **state __maybe_unused)
{
	strcpy(dir, "/tmp/sluice-cli-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	snprintf(good, sizeof(good), "%s/good.json", dir);
	snprintf(bad, sizeof(bad), "%s/bad.json", dir);
	if (mkdir(empty, 0700))
		return -1;
	write_file(good, good_rules);
	write_file(bad, "{\"rules\": [{\"name\": \"web\", \"match\": {}, "
			"\"grade\": \"pps\", \"count\": 0}]}");
	return 0;
}

static int teardown(void **state __maybe_unused)
{
	unlink(good);
	unlink(bad);
	rmdir(empty);
	rmdir(dir);
	return 0;
}

/* ---- command-line errors: exit 2, the problem named ---- */

static void test_unknown_verb(void **state __maybe_unused)
{
	expect_usage(RUN("frob"), "unknown command 'frob'", NULL);
	/* one line with a suggestion, not the 50 lines of `help` */
	expect_usage(RUN("stauts"), "unknown command 'stauts' (did you mean "
				    "'status'?); `sluice help` lists the "
				    "commands\n", NULL);
	assert_true(strchr(err, '\n') == err + strlen(err) - 1);
	expect_usage(RUN("rule"), "missing subcommand", NULL);
	assert_in(err, "sluice rule add FILE|-");
	expect_usage(RUN("rule", "frob"), "unknown subcommand 'frob'", NULL);
	expect_usage(RUN("rule", "--state-dir", dir, "list"),
		     "subcommand (add, del, replace, list or save) comes before",
		     NULL);
}

static void test_unknown_option(void **state __maybe_unused)
{
	expect_usage(RUN("rule", "add", "--frob", good),
		     "unknown or ambiguous option '--frob'", "rule add");
	expect_usage(RUN("rule", "del", "-x", "web"), "unknown option '-x'",
		     "rule del");
	expect_usage(RUN("rule", "replace", good, "--ready"),
		     "option '--ready' does not apply", "rule replace");
	expect_usage(RUN("rule", "list", "--if-version", "3"),
		     "option '--if-version' does not apply", "rule list");
	expect_usage(RUN("status", "--watch"),
		     "option '--watch' does not apply", "status");
	/* a prefix of another verb's option is a typo, not that option */
	expect_usage(RUN("status", "--wat"),
		     "unknown or ambiguous option '--wat'", "status");
	assert_null(strstr(err, "--watch"));
	expect_usage(RUN("status", "--jsn"),
		     "unknown or ambiguous option '--jsn' (did you mean "
		     "'--json'?)", "status");
	/* an interface twice */
	expect_usage(RUN("down", "--iface", "v0,v0"),
		     "--iface: 'v0' is given twice in 'v0,v0'", "down");
	expect_usage(RUN("status", "--json=yes"),
		     "option '--json' takes no value", "status");
	expect_usage(RUN("stats", "--ready"),
		     "option '--ready' does not apply", "stats");
	expect_usage(RUN("stats", "-jq"), "unknown option '-q'", "stats");
	expect_usage(RUN("down", "--iface", "lo", "-j"),
		     "option '--json' does not apply", "down");
	expect_usage(RUN("status", "--state-dir"),
		     "option '--state-dir' needs a value", "status");
}

static void test_missing_and_extra_args(void **state __maybe_unused)
{
	expect_usage(RUN("rule", "add"), "missing FILE", "rule add");
	expect_usage(RUN("rule", "replace", "--if-version", "1"),
		     "missing FILE", "rule replace");
	expect_usage(RUN("rule", "del"), "missing NAME", "rule del");
	expect_usage(RUN("rule", "add", good, "extra.json"),
		     "unexpected argument 'extra.json'", "rule add");
	expect_usage(RUN("rule", "replace", good, "-"),
		     "unexpected argument '-'", "rule replace");
	expect_usage(RUN("rule", "list", "web"), "unexpected argument 'web'",
		     "rule list");
	expect_usage(RUN("status", "now"), "unexpected argument 'now'",
		     "status");
	expect_usage(RUN("stats", "-j", "web"), "unexpected argument 'web'",
		     "stats");
	expect_usage(RUN("down", "--iface", "lo", "eth0"),
		     "unexpected argument 'eth0'", "down");
}

static void test_bad_if_version(void **state __maybe_unused)
{
	static const char *const bad_versions[] = {
		"-1", "abc", "1.5", "", "+3", " 3", "3x",
		"9007199254740992", "99999999999999999999999",
	};

	for (size_t i = 0; i < sizeof(bad_versions) / sizeof(*bad_versions);
	     i++) {
		char want[64];

		snprintf(want, sizeof(want), "--if-version: '%s'",
			 bad_versions[i]);
		expect_usage(RUN("rule", "add", good, "--if-version",
				 (char *)bad_versions[i]),
			     want, "rule add");
	}
	expect_usage(RUN("rule", "del", "web", "--if-version=x"),
		     "--if-version: 'x'", "rule del");
	expect_usage(RUN("rule", "del", "web", "--if-version"),
		     "option '--if-version' needs a value", "rule del");
}

static void test_bad_watch(void **state __maybe_unused)
{
	expect_usage(RUN("stats", "--watch", "abc"), "--watch: 'abc'",
		     "stats");
	expect_usage(RUN("stats", "--watch", "0"), "--watch: '0'", "stats");
	expect_usage(RUN("stats", "--watch", "-1"), "--watch: '-1'", "stats");
	expect_usage(RUN("stats", "--watch=2s"), "--watch: '2s'", "stats");
	expect_usage(RUN("stats", "--watch", "nan"), "--watch: 'nan'",
		     "stats");
}

/* Every program's numbers are checked whole: no empty value, space, sign
 * or trailing junk (the agent once took --stats-interval "" as 0). */
static void test_strict_numbers(void **state __maybe_unused)
{
	static const char *const bad[] = { "", " 5", "+5", "5s", "-1",
					   "99999999999" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char want[64];

		snprintf(want, sizeof(want), "--stats-interval: '%s' is not",
			 bad[i]);
		expect_usage(RUN("agent", "--iface", "lo", "--stats-interval",
				 (char *)bad[i]),
			     want, "agent");
		snprintf(want, sizeof(want), "--max-conns: '%s' is not",
			 bad[i]);
		expect_usage(RUN("tokend", "--listen", "127.0.0.1:0",
				 "--rules", good, "--state-dir", dir,
				 "--max-conns", (char *)bad[i]),
			     want, "tokend");
	}
	expect_usage(RUN("agent", "--iface", "lo", "--xdp-mode", "fast"),
		     "--xdp-mode: 'fast' is not one of auto, native, generic",
		     "agent");
	expect_usage(RUN("agent", "--iface", "eth0,,eth1"),
		     "--iface: empty interface name in 'eth0,,eth1'", "agent");
}

static void test_down_usage(void **state __maybe_unused)
{
	expect_usage(RUN("down"), "missing --iface", "down");
	expect_usage(RUN("down", "--pin-dir", dir), "missing --iface", "down");
	expect_usage(RUN("down", "--iface", "eth0,,eth1"),
		     "--iface: empty interface name in 'eth0,,eth1'", "down");
	expect_usage(RUN("down", "--iface", "eth0,"),
		     "--iface: empty interface name", "down");
	expect_usage(RUN("down", "--iface", "a-very-long-interface-name"),
		     "'a-very-long-interface-name' is longer than an "
		     "interface name", "down");
	expect_usage(RUN("down", "--iface", "lo", "--pin-dir", ""),
		     "--pin-dir: empty", "down");
}

static void test_state_dir_too_long(void **state __maybe_unused)
{
	char longdir[200];

	memset(longdir, 'd', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 1] = '\0';
	expect_usage(RUN("status", "--state-dir", longdir),
		     "too long for a socket path", "status");
}

static void test_help(void **state __maybe_unused)
{
	assert_int_equal(RUN("stats", "--help"), 0);
	assert_in(out, "usage: sluice stats [-j] [--watch [SECONDS]]");
	assert_string_equal(err, "");
	assert_int_equal(RUN("rule", "-h"), 0);
	assert_in(out, "sluice rule del NAME");
	assert_int_equal(RUN("rule", "add", "-h"), 0);
	assert_in(out, "usage: sluice rule add FILE|-");
	/* version is a command like the others */
	assert_int_equal(RUN("help", "version"), 0);
	assert_in(out, "usage: sluice version");
	assert_int_equal(RUN("version"), 0);
	assert_in(out, "sluice ");
	assert_int_equal(RUN("--version"), 0);
	assert_in(out, "sluice ");
	assert_string_equal(err, "");
}

/* ---- no agent: exit 3, the socket path named ---- */

static void test_unreachable(void **state __maybe_unused)
{
	char want[320];

	snprintf(want, sizeof(want),
		 "cannot reach the agent at %s/sluice.sock: No such file or "
		 "directory — is `sluice agent` running? (--state-dir DIR to "
		 "reach another)",
		 empty);
	/* nothing pinned either (the pin dir is empty too): 3 */
	assert_int_equal(RUN("status", "--state-dir", empty, "--pin-dir",
			     empty), 3);
	assert_in(err, want);
	assert_string_equal(out, "");
	assert_int_equal(RUN("status", "--ready", "--state-dir", empty), 3);
	assert_in(err, want);
	assert_int_equal(RUN("stats", "-j", "--state-dir", empty), 3);
	assert_in(err, want);
	assert_int_equal(RUN("stats", "--watch", "--state-dir", empty), 3);
	assert_in(err, want);
	assert_int_equal(RUN("rule", "list", "--state-dir", empty), 3);
	assert_in(err, want);
	assert_int_equal(RUN("rule", "add", good, "--state-dir", empty), 3);
	assert_in(err, want);
	assert_int_equal(RUN("rule", "del", "web", "--state-dir", empty), 3);
	assert_in(err, want);
}

/* ---- rule files are validated before anything is sent ---- */

static void test_invalid_rule_file(void **state __maybe_unused)
{
	/* exit 1 and not 3: the file is judged before the agent is asked */
	assert_int_equal(RUN("rule", "add", bad, "--state-dir", empty), 1);
	assert_in(err, bad);
	assert_in(err, "invalid rule file");
	assert_in(err, "rule 'web': field 'count'");
	assert_int_equal(RUN("rule", "replace", bad, "--state-dir", empty), 1);
	assert_in(err, "field 'count'");
	assert_int_equal(RUN_STDIN("{\"rules\": [{\"nme\": 1}]}", "rule",
				   "add", "-", "--state-dir", empty),
			 1);
	assert_in(err, "<stdin>: invalid rule file");
	assert_in(err, "did you mean 'name'");
	assert_int_equal(RUN("rule", "add", "/nonexistent/rules.json",
			     "--state-dir", empty),
			 1);
	assert_in(err, "/nonexistent/rules.json");
	assert_in(err, "No such file");
}

/* ---- requests and answers, against a fake agent ---- */

static const char change_ok[] =
	"{\"ok\": true, \"version\": 8, \"rules_in_force\": 3}";

static void check_canonical_rules(const cJSON *req)
{
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(req, "rules");
	const cJSON *r0 = cJSON_GetArrayItem(rules, 0);
	const cJSON *r1 = cJSON_GetArrayItem(rules, 1);
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(r0, "window");
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(r1, "per_source");

	assert_int_equal(cJSON_GetArraySize(rules), 2);
	assert_string_equal(req_str(r0, "name"), "web-syn");
	assert_string_equal(req_str(r0, "grade"), "cps");
	/* canonical: every field explicit */
	assert_int_equal(
		cJSON_GetObjectItemCaseSensitive(w, "interval_ms")->valueint,
		1000);
	assert_string_equal(req_str(r0, "mode"), "enforce");
	assert_string_equal(req_str(r0, "behavior"), "reject");
	assert_string_equal(req_str(r1, "mode"), "shadow");
	assert_int_equal(
		cJSON_GetObjectItemCaseSensitive(ps, "prefix_v4")->valueint,
		32);
}

static void test_rule_add_request(void **state __maybe_unused)
{
	struct fake f = { 0 };
	const cJSON *ifv;

	assert_int_equal(WITH_AGENT(&f, change_ok, "rule", "add", good,
				    "--if-version", "7", "--state-dir", dir),
			 0);
	assert_int_equal(f.served, 1);
	assert_non_null(f.reqs[0]);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "rule.add");
	check_canonical_rules(f.reqs[0]);
	ifv = cJSON_GetObjectItemCaseSensitive(f.reqs[0], "if_version");
	assert_true(cJSON_IsNumber(ifv));
	assert_int_equal(ifv->valueint, 7);
	assert_string_equal(out, "rules at version 8: 3 in force\n");
	assert_string_equal(err, "");
	fake_free(&f);

	/* no --if-version: no if_version in the request */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, change_ok, "rule", "add",
				    "--state-dir", dir, good),
			 0);
	assert_null(cJSON_GetObjectItemCaseSensitive(f.reqs[0],
						     "if_version"));
	fake_free(&f);

	/* --if-version 0 is a version, not "absent" */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, change_ok, "rule", "add", good,
				    "--if-version=0", "--state-dir", dir),
			 0);
	ifv = cJSON_GetObjectItemCaseSensitive(f.reqs[0], "if_version");
	assert_true(cJSON_IsNumber(ifv) && ifv->valuedouble == 0);
	fake_free(&f);
}

static void test_rule_add_stdin(void **state __maybe_unused)
{
	struct fake f = { .answers = { change_ok }, .n_answers = 1 };

	fake_start(&f);
	assert_int_equal(RUN_STDIN(good_rules, "rule", "add", "-",
				   "--state-dir", dir),
			 0);
	fake_stop(&f);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "rule.add");
	check_canonical_rules(f.reqs[0]);
	fake_free(&f);
}

static void test_rule_del_replace_request(void **state __maybe_unused)
{
	struct fake f = { 0 };
	const cJSON *names, *ifv;

	assert_int_equal(WITH_AGENT(&f, change_ok, "rule", "del", "web-syn",
				    "dns", "--if-version", "12",
				    "--state-dir", dir),
			 0);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "rule.del");
	names = cJSON_GetObjectItemCaseSensitive(f.reqs[0], "names");
	assert_int_equal(cJSON_GetArraySize(names), 2);
	assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring,
			    "web-syn");
	assert_string_equal(cJSON_GetArrayItem(names, 1)->valuestring, "dns");
	ifv = cJSON_GetObjectItemCaseSensitive(f.reqs[0], "if_version");
	assert_int_equal(ifv->valueint, 12);
	assert_null(cJSON_GetObjectItemCaseSensitive(f.reqs[0], "rules"));
	assert_string_equal(out, "rules at version 8: 3 in force\n");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, change_ok, "rule", "replace", good,
				    "--state-dir", dir),
			 0);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "rule.replace");
	check_canonical_rules(f.reqs[0]);
	fake_free(&f);
}

static void test_refused(void **state __maybe_unused)
{
	static const char conflict[] =
		"{\"ok\": false, \"code\": \"conflict\", \"error\": "
		"\"rule 'dns' exists already\"}";
	static const char apply[] =
		"{\"ok\": false, \"code\": \"apply\", \"error\": "
		"\"cannot apply the rules, nothing changed: map full\"}";
	struct fake f = { 0 };
	cJSON *j;

	assert_int_equal(WITH_AGENT(&f, conflict, "rule", "add", good,
				    "--state-dir", dir),
			 1);
	assert_in(err, "rule.add refused [conflict]: rule 'dns' exists "
		       "already");
	assert_string_equal(out, "");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, apply, "rule", "replace", good,
				    "--state-dir", dir),
			 1);
	assert_in(err, "rule.replace failed [apply]: cannot apply");
	fake_free(&f);

	/* -j: the answer on stdout too, without "ok" */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, conflict, "rule", "del", "dns", "-j",
				    "--state-dir", dir),
			 1);
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_string_equal(req_str(j, "code"), "conflict");
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "ok"));
	cJSON_Delete(j);
	fake_free(&f);
}

static void test_bad_answers(void **state __maybe_unused)
{
	struct fake f = { 0 };

	assert_int_equal(WITH_AGENT(&f, "{\"version\": 3}", "rule", "list",
				    "--state-dir", dir),
			 1);
	assert_in(err, "without \"ok\"");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, "hello", "status", "--state-dir", dir),
			 1);
	assert_in(err, "not a JSON object");
	fake_free(&f);

	/* the agent hung up without answering */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, "", "stats", "--state-dir", dir), 1);
	assert_in(err, "not a JSON object");
	fake_free(&f);
}

static const char list_answer[] =
	"{\"ok\": true, \"version\": 5, \"updated_at\": "
	"\"2026-11-29T18:00:00Z\", \"rules\": ["
	"{\"name\": \"web-syn\", \"match\": {\"proto\": \"tcp\", \"dport\": "
	"443, \"dst\": \"198.18.0.0/15\"}, \"grade\": \"cps\", \"count\": "
	"4000, \"window\": {\"interval_ms\": 1000, \"sample_count\": 2}, "
	"\"mode\": \"enforce\", \"priority\": 10, \"behavior\": \"reject\"},"
	"{\"name\": \"dns\", \"match\": {\"proto\": \"udp\", \"dport\": "
	"\"53-54\", \"vlan\": 100}, \"grade\": \"pps\", \"count\": 100, \"window\": "
	"{\"interval_ms\": 2000, \"sample_count\": 4}, \"per_source\": "
	"{\"prefix_v4\": 24, \"prefix_v6\": 64, \"max_sources\": 1000}, "
	"\"mode\": \"shadow\", \"layer\": 1, \"behavior\": {\"warm_up\": "
	"{\"period_s\": 60, "
	"\"cold_factor\": 3}}}]}";

static void test_rule_list(void **state __maybe_unused)
{
	struct fake f = { 0 };
	cJSON *j;

	assert_int_equal(WITH_AGENT(&f, list_answer, "rule", "list",
				    "--state-dir", dir),
			 0);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "rule.list");
	assert_in(out, "version 5, updated 2026-11-29T18:00:00Z, 2 rules\n");
	assert_row("name proto dport vlan dst src grade count window mode "
		   "layer priority per_source behavior");
	assert_row("web-syn tcp 443 any 198.18.0.0/15 any cps 4000 1000ms/2 "
		   "enforce 0 10 - reject");
	assert_row("dns udp 53-54 100 any any pps 100 2000ms/4 shadow 1 - "
		   "/24,/64 max 1000 warm_up 60s/3");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, list_answer, "rule", "list", "-j",
				    "--state-dir", dir),
			 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "ok"));
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "version")
				 ->valueint,
			 5);
	assert_int_equal(cJSON_GetArraySize(
				 cJSON_GetObjectItemCaseSensitive(j, "rules")),
			 2);
	cJSON_Delete(j);
	fake_free(&f);
}

static const char status_ready[] =
	"{\"ok\": true, \"ready\": true, \"not_ready\": [], \"pid\": 4242, "
	"\"uptime_s\": 3725.5, \"allow_empty\": false, \"adopted\": true, "
	"\"snapshot\": {\"path\": \"/var/lib/sluice/rules.json\", "
	"\"version\": 7, \"updated_at\": \"2026-11-29T18:00:00Z\", "
	"\"age_s\": 42, \"rules\": 12, \"from_prev\": false}, "
	"\"rules_in_force\": 12, \"in_force_version\": 7, \"interfaces\": "
	"[{\"name\": \"eth0\", \"ifindex\": 2, \"mode\": \"native\", "
	"\"attached\": true, \"adopted\": true, \"rules_in_force\": 12}]}";

static const char status_not_ready[] =
	"{\"ok\": true, \"ready\": false, \"not_ready\": [\"eth1 is not "
	"attached\", \"no rules in force\"], \"pid\": 4242, \"uptime_s\": 3, "
	"\"allow_empty\": false, \"adopted\": false, \"snapshot\": {\"path\": "
	"\"/var/lib/sluice/rules.json\", \"version\": 3, \"updated_at\": "
	"\"2026-11-28T09:00:00Z\", \"age_s\": 119000, \"rules\": 4, "
	"\"from_prev\": true}, \"rules_in_force\": 0, \"in_force_version\": 0, "
	"\"interfaces\": [{\"name\": \"eth1\", \"ifindex\": 3, \"mode\": "
	"\"generic\", \"attached\": false, \"adopted\": false, "
	"\"rules_in_force\": 0}]}";

static void test_status(void **state __maybe_unused)
{
	struct fake f = { 0 };

	assert_int_equal(WITH_AGENT(&f, status_ready, "status", "--state-dir",
				    dir),
			 0);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "status");
	assert_true(!strncmp(out, "ready\n", 6));
	assert_row("pid 4242, up 1h02m, took over a running data plane");
	assert_row("snapshot: version 7, 12 rules, updated "
		   "2026-11-29T18:00:00Z (42s ago)");
	assert_row("in force: 12 rules, version 7 (the snapshot holds 12)");
	assert_row("interface ifindex mode attached adopted rules");
	assert_row("eth0 2 native yes yes 12/12");
	fake_free(&f);

	/* not ready is still a good answer without --ready */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, status_not_ready, "status",
				    "--state-dir", dir),
			 0);
	assert_true(strstr(out, "NOT READY\n  - eth1 is not attached\n"
				"  - no rules in force\n") == out);
	assert_row("snapshot: version 3, 4 rules, updated "
		   "2026-11-28T09:00:00Z (1d09h ago)");
	assert_in(out, ".prev copy");
	assert_row("in force: 0 rules, version 0 (the snapshot holds 4)");
	assert_row("eth1 3 generic no no 0/4");
	fake_free(&f);

	/* versions start at 1: 0 is "no snapshot written yet" */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f,
				    "{\"ok\": true, \"ready\": false, "
				    "\"snapshot\": {\"path\": "
				    "\"/s/rules.json\", \"version\": 0}, "
				    "\"interfaces\": []}",
				    "status", "--state-dir", dir),
			 0);
	assert_in(out, "snapshot:  none yet (/s/rules.json)\n");
	assert_in(out, "interfaces: none\n");
	fake_free(&f);
}

static void test_status_ready(void **state __maybe_unused)
{
	struct fake f = { 0 };
	cJSON *j;

	assert_int_equal(WITH_AGENT(&f, status_ready, "status", "--ready",
				    "--state-dir", dir),
			 0);
	assert_string_equal(out, "");
	assert_string_equal(err, "");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, status_not_ready, "status", "--ready",
				    "--state-dir", dir),
			 1);
	assert_string_equal(out, "");
	assert_in(err, "not ready");
	assert_in(err, "eth1 is not attached");
	assert_in(err, "no rules in force");
	fake_free(&f);

	/* a refusal is not ready either */
	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f,
				    "{\"ok\": false, \"code\": \"busy\", "
				    "\"error\": \"starting\"}",
				    "status", "--ready", "--state-dir", dir),
			 1);
	assert_in(err, "status refused [busy]: starting");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, status_ready, "status", "-j",
				    "--state-dir", dir),
			 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "ok"));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ready")));
	cJSON_Delete(j);
	fake_free(&f);
}

static const char stats_answer[] =
	"{\"ok\": true, \"time_ns\": 123456789, \"rules\": ["
	"{\"name\": \"web-syn\", \"mode\": \"enforce\", \"grade\": \"cps\", "
	"\"count\": 4000, \"interval_ms\": 1000, \"passed_pps\": 3999.6, "
	"\"blocked_pps\": 1200, \"passed_Bps\": 255974, \"blocked_Bps\": "
	"76800, \"passed_pkts\": 1000000, \"passed_bytes\": 64000000, "
	"\"blocked_pkts\": 250000, \"blocked_bytes\": 16000000, "
	"\"per_source\": false, \"sources\": 0, \"max_sources\": 0, "
	"\"source_overflow\": 0},"
	"{\"name\": \"trial\", \"mode\": \"shadow\", \"layer\": 2, "
	"\"grade\": \"pps\", "
	"\"count\": 1000, \"interval_ms\": 1000, \"passed_pps\": 900, "
	"\"blocked_pps\": 120, \"passed_Bps\": 90000, \"blocked_Bps\": 12000, "
	"\"passed_pkts\": 5000, \"passed_bytes\": 500000, \"blocked_pkts\": "
	"300, \"blocked_bytes\": 30000, \"per_source\": true, \"sources\": "
	"123, \"max_sources\": 1000, \"source_overflow\": 7},"
	"{\"name\": \"bulk\", \"mode\": \"enforce\", \"grade\": \"bps\", "
	"\"count\": 125000000, \"interval_ms\": 1000, \"passed_pps\": 80000, "
	"\"blocked_pps\": 0, \"passed_Bps\": 120000000, \"blocked_Bps\": "
	"25000, \"passed_pkts\": 42, \"passed_bytes\": 63000, "
	"\"blocked_pkts\": 0, \"blocked_bytes\": 0, \"per_source\": false, "
	"\"sources\": 0, \"max_sources\": 0, \"source_overflow\": 0}],"
	"\"host\": {\"packets\": 1555342, \"unmatched\": 300000, "
	"\"malformed_eth\": 0, \"fragments\": 2}}";

static void test_stats(void **state __maybe_unused)
{
	struct fake f = { 0 };
	cJSON *j;

	assert_int_equal(WITH_AGENT(&f, stats_answer, "stats", "--state-dir",
				    dir),
			 0);
	assert_string_equal(req_str(f.reqs[0], "cmd"), "stats");
	assert_row("rule mode layer limit passed/s dropped/s would-drop/s "
		   "passed dropped sources overflow");
	assert_row("web-syn enforce 0 4000 SYN/s 4000 1200 - 1000000 250000 - "
		   "-");
	/* shadow: nothing dropped, the would-drops in their own column */
	assert_row("trial shadow 2 1000 pkt/s 900 - 120 5000 (300) 123/1000 "
		   "7");
	/* bps: the rates in bytes/s, like the limit */
	assert_row("bulk enforce 0 125000000 B/s 120.0M 25.0k - 42 0 - -");
	assert_in(out, "shadow rules drop nothing");
	assert_in(out, "host: packets 1555342, unmatched 300000, "
		       "malformed_eth 0, fragments 2\n");
	assert_string_equal(err, "");
	fake_free(&f);

	memset(&f, 0, sizeof(f));
	assert_int_equal(WITH_AGENT(&f, stats_answer, "stats", "-j",
				    "--state-dir", dir),
			 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "ok"));
	assert_int_equal(cJSON_GetArraySize(
				 cJSON_GetObjectItemCaseSensitive(j, "rules")),
			 3);
	cJSON_Delete(j);
	fake_free(&f);
}

/* -j prints what cJSON_Print() prints for the answer without "ok". */
static void expect_json_layout(const char *answer, const char *verb)
{
	struct fake f = { 0 };
	cJSON *j = cJSON_Parse(answer);
	char *text, *want;

	assert_non_null(j);
	cJSON_DeleteItemFromObjectCaseSensitive(j, "ok");
	text = cJSON_Print(j);
	assert_non_null(text);
	assert_true(asprintf(&want, "%s\n", text) > 0);
	assert_int_equal(WITH_AGENT(&f, answer, (char *)verb, "-j",
				    "--state-dir", dir),
			 0);
	assert_string_equal(out, want);
	free(want);
	cJSON_free(text);
	cJSON_Delete(j);
	fake_free(&f);
}

static void test_json_layout(void **state __maybe_unused)
{
	struct fake f = { 0 };

	expect_json_layout(stats_answer, "stats");
	expect_json_layout(status_ready, "status");
	/* "ok" anywhere at the top, empty and nested containers, escapes;
	 * an "ok" deeper down is data */
	expect_json_layout("{\"a\": {}, \"b\": [], \"ok\": true, \"c\": "
			   "[1, [2, {\"ok\": false, \"d\": \"x\\\"y\\\\z\"}], "
			   "null, -1.5], \"e\": {\"f\": {\"g\": false}}}",
			   "stats");
	expect_json_layout("{\"ok\": true}", "status");

	/* not a JSON object, or cut off: the general path says so */
	assert_int_equal(WITH_AGENT(&f, "{\"ok\": true, \"a\": [1,", "stats",
				    "-j", "--state-dir", dir),
			 1);
	assert_in(err, "not a JSON object");
	assert_string_equal(out, "");
	fake_free(&f);
}

static void test_stats_watch(void **state __maybe_unused)
{
	struct fake f = {
		.answers = { stats_answer, stats_answer },
		.n_answers = 2,
		.sigint_after = true,
	};
	int tables = 0;

	fake_start(&f);
	assert_int_equal(RUN("stats", "--watch", "0.1", "--state-dir", dir),
			 0);
	fake_stop(&f);
	assert_int_equal(f.served, 2);
	for (const char *p = out; (p = strstr(p, "every 0.1s")); p++)
		tables++;
	assert_int_equal(tables, 2);
	/* not a tty: no escape codes */
	assert_null(strchr(out, '\033'));
	fake_free(&f);
}

static void test_down_nothing_pinned(void **state __maybe_unused)
{
	assert_int_equal(RUN("down", "--iface", "lo,eth9", "--pin-dir", empty),
			 1);
	assert_in(err, "lo: nothing pinned under");
	assert_in(err, "eth9: nothing pinned under");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_verb),
		cmocka_unit_test(test_unknown_option),
		cmocka_unit_test(test_missing_and_extra_args),
		cmocka_unit_test(test_bad_if_version),
		cmocka_unit_test(test_bad_watch),
		cmocka_unit_test(test_strict_numbers),
		cmocka_unit_test(test_down_usage),
		cmocka_unit_test(test_state_dir_too_long),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_invalid_rule_file),
		cmocka_unit_test(test_rule_add_request),
		cmocka_unit_test(test_rule_add_stdin),
		cmocka_unit_test(test_rule_del_replace_request),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_bad_answers),
		cmocka_unit_test(test_rule_list),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_status_ready),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_json_layout),
		cmocka_unit_test(test_stats_watch),
		cmocka_unit_test(test_down_nothing_pinned),
	};

	return cmocka_run_group_tests_name("cli", tests, setup, teardown);
}
