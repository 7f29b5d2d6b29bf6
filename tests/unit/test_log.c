/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the logger (user/lib/log.c): the daemon's line formats,
 * levels, JSON records and the suppression of repeats. */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "log.h"
#include "util.h"

static uint64_t fake_ns;

static uint64_t fake_clock(void)
{
	return fake_ns;
}

/* A daemon logging into a temporary file; lines read back with lines(). */
static FILE *start(int level, int format, bool journal)
{
	struct sl_log_opts o = { .level = level, .format = format,
				 .clock_ns = fake_clock };
	FILE *f = tmpfile();
	struct stat st;
	char env[64];

	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu",
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	if (journal)
		setenv("JOURNAL_STREAM", env, 1);
	else
		setenv("JOURNAL_STREAM", "1:2", 1); /* another stream's */
	fake_ns = 1000 * NSEC_PER_SEC;
	sl_log_daemon(&o, f);
	return f;
}

/* The text logged so far (static, NUL-ended) and the number of lines. */
static const char *lines(FILE *f, int *n)
{
	static char buf[65536];
	size_t len;

	rewind(f);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[len] = '\0';
	*n = 0;
	for (size_t i = 0; i < len; i++)
		*n += buf[i] == '\n';
	return buf;
}

static bool matches(const char *text, const char *re)
{
	regex_t r;
	bool ok;

	assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NEWLINE), 0);
	ok = !regexec(&r, text, 0, NULL, 0);
	regfree(&r);
	return ok;
}

static void test_text_timestamp(void **state)
{
	FILE *f = start(SL_LOG_INFO, SL_LOG_TEXT, false);
	const char *t;
	int n;

	(void)state;
	pr_err("boom %d", 1);
	pr_info("two\nlines");
	t = lines(f, &n);
	assert_int_equal(n, 3);
	assert_true(matches(t, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
			       "[0-9]{2}\\.[0-9]{3}Z sluice: error: boom 1$"));
	/* each line of a message is a line of its own, prefixed */
	assert_true(matches(t, "Z sluice: info: lines$"));
	assert_false(matches(t, "<[0-9]>"));
	fclose(f);
}

static void test_journal_prefix(void **state)
{
	FILE *f = start(SL_LOG_DEBUG, SL_LOG_TEXT, true);
	const char *t;
	int n;

	(void)state;
	pr_err("e");
	pr_warn("w");
	pr_info("i");
	pr_debug("d");
	t = lines(f, &n);
	assert_int_equal(n, 4);
	/* the journal keeps its own time: no timestamp */
	assert_string_equal(t, "<3>sluice: error: e\n<4>sluice: warning: w\n"
			       "<6>sluice: info: i\n<7>sluice: debug: d\n");
	fclose(f);
}

static void test_levels(void **state)
{
	FILE *f = start(SL_LOG_WARN, SL_LOG_TEXT, true);
	int n;

	(void)state;
	pr_err("e");
	pr_warn("w");
	pr_info("i");
	pr_debug("d");
	assert_string_equal(lines(f, &n), "<3>sluice: error: e\n"
					  "<4>sluice: warning: w\n");
	fclose(f);
	f = start(SL_LOG_ERROR, SL_LOG_TEXT, true);
	pr_warn("w");
	lines(f, &n);
	assert_int_equal(n, 0);
	fclose(f);
}

static void test_json(void **state)
{
	FILE *f = start(SL_LOG_INFO, SL_LOG_JSON, false);
	const char *t, *line;
	cJSON *o;
	int n;

	(void)state;
	pr_err("quote \" backslash \\ newline\n tab\t end");
	pr_info("second");
	t = lines(f, &n);
	assert_int_equal(n, 2);
	o = cJSON_ParseWithOpts(t, &line, false);
	assert_non_null(o);
	assert_string_equal(cJSON_GetObjectItem(o, "level")->valuestring,
			    "error");
	assert_string_equal(cJSON_GetObjectItem(o, "msg")->valuestring,
			    "quote \" backslash \\ newline\n tab\t end");
	assert_true(matches(cJSON_GetObjectItem(o, "time")->valuestring,
			    "^[0-9]{4}-.*T.*Z$"));
	cJSON_Delete(o);
	o = cJSON_Parse(line + 1);
	assert_non_null(o);
	assert_string_equal(cJSON_GetObjectItem(o, "msg")->valuestring,
			    "second");
	cJSON_Delete(o);
	fclose(f);
}

static void test_repeats(void **state)
{
	FILE *f = start(SL_LOG_INFO, SL_LOG_TEXT, true);
	int n;

	(void)state;
	/* a refused token server, every 0.35 s for 6 s */
	for (int i = 0; i < 17; i++) {
		pr_warn("cluster: connect: Connection refused");
		fake_ns += 350 * NSEC_PER_MSEC;
	}
	pr_warn("other");
	assert_string_equal(lines(f, &n),
			    "<4>sluice: warning: cluster: connect: "
			    "Connection refused\n<4>sluice: warning: other\n");
	/* after the window, the count comes out with the next line */
	fake_ns += SL_LOG_REPEAT_S * NSEC_PER_SEC;
	pr_warn("cluster: connect: Connection refused");
	assert_true(matches(lines(f, &n),
			    "^<4>sluice: warning: last message repeated 16 "
			    "times: cluster: connect: Connection refused$"));
	assert_int_equal(n, 4);
	/* and the message is printed again, a new window */
	assert_true(matches(lines(f, &n), "refused\n<4>sluice: warning: "
					  "cluster: connect: Connection "
					  "refused\n$"));
	/* info lines are changes of state: never held back */
	pr_info("state a -> b");
	pr_info("state a -> b");
	lines(f, &n);
	assert_int_equal(n, 6);
	fclose(f);
}

static void test_repeats_bounded(void **state)
{
	FILE *f = start(SL_LOG_INFO, SL_LOG_JSON, false);
	const char *t;
	int n, summaries = 0;

	(void)state;
	/* more distinct repeating messages than slots: each is printed
	 * once, and an evicted one's count comes out when it goes */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 2 * SL_LOG_REPEAT_SLOTS; i++)
			pr_err("failure %d", i);
	t = lines(f, &n);
	for (const char *p = t; (p = strstr(p, "\"repeated\":")); p++)
		summaries++;
	/* the second round found none of the first in the table */
	assert_int_equal(n, 4 * SL_LOG_REPEAT_SLOTS);
	assert_int_equal(summaries, 0);
	fclose(f);
	f = start(SL_LOG_INFO, SL_LOG_JSON, false);
	pr_err("x");
	pr_err("x");
	for (int i = 0; i < SL_LOG_REPEAT_SLOTS; i++)
		pr_err("push %d", i);
	t = lines(f, &n);
	assert_true(strstr(t, "\"msg\":\"x\",\"repeated\":1}") != NULL);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_timestamp),
		cmocka_unit_test(test_journal_prefix),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_repeats),
		cmocka_unit_test(test_repeats_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
