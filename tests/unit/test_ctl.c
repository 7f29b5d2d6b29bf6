/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit tests for the agent's reading of control requests and its answers
 * (user/lib/ctl.c, sl_ctl_req_*, sl_ctl_ok/error); the socket itself is
 * exercised through the CLI (test_cli.c) and tests/fuzz/fuzz_ctl.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl.h"

static char err[4096];

static void req_of(const char *text, struct sl_ctl_req *req)
{
	assert_int_equal(sl_ctl_req_parse(text, strlen(text), req, err,
					  sizeof(err)),
			 0);
}

static void test_parse(void **state)
{
	static const char *const bad[] = { "", "[1,2", "[]", "\"cmd\"",
					   "{}", "{\"cmd\":7}",
					   "{\"cmd\":null}" };
	struct sl_ctl_req req;

	(void)state;
	req_of("{\"cmd\":\"status\"}", &req);
	assert_string_equal(req.cmd, "status");
	sl_ctl_req_free(&req);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(sl_ctl_req_parse(bad[i], strlen(bad[i]), &req,
						  err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "request: "));
		assert_null(req.json);
	}
}

/* An if_version past what a double holds exactly, or no integer, is
 * refused; the agent converted any non-negative number to uint64_t, which
 * is undefined past 2^64 (1e300) and truncated 1.5 to version 1. */
static void test_if_version(void **state)
{
	static const char *const bad[] = { "-1", "1.5", "1e300", "1e400",
					   "9007199254740992", "\"3\"", "true",
					   "null" };
	struct sl_ctl_req req;
	char text[128];
	uint64_t v = 0;
	bool given = true;

	(void)state;
	req_of("{\"cmd\":\"rule.del\"}", &req);
	assert_int_equal(sl_ctl_req_if_version(&req, &given, &v, err,
					       sizeof(err)),
			 0);
	assert_false(given);
	sl_ctl_req_free(&req);
	req_of("{\"cmd\":\"rule.del\",\"if_version\":9007199254740991}", &req);
	assert_int_equal(sl_ctl_req_if_version(&req, &given, &v, err,
					       sizeof(err)),
			 0);
	assert_true(given);
	assert_true(v == (1ULL << 53) - 1);
	sl_ctl_req_free(&req);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 "{\"cmd\":\"rule.del\",\"if_version\":%s}", bad[i]);
		req_of(text, &req);
		if (sl_ctl_req_if_version(&req, &given, &v, err,
					  sizeof(err)) != -EINVAL)
			fail_msg("if_version %s was taken", bad[i]);
		assert_non_null(strstr(err, "'if_version'"));
		sl_ctl_req_free(&req);
	}
}

static void test_names(void **state)
{
	static const char *const bad[] = {
		"{\"cmd\":\"rule.del\"}",
		"{\"names\":[],\"cmd\":\"x\"}",
		"{\"names\":[\"a\",7],\"cmd\":\"x\"}",
		"{\"names\":\"a\",\"cmd\":\"x\"}",
	};
	struct sl_ctl_req req;
	const char **names;
	size_t n;

	(void)state;
	req_of("{\"cmd\":\"rule.del\",\"names\":[\"a\",\"b\"]}", &req);
	assert_int_equal(sl_ctl_req_names(&req, &names, &n, err, sizeof(err)),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[1], "b");
	free(names);
	sl_ctl_req_free(&req);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req_of(bad[i], &req);
		assert_int_equal(sl_ctl_req_names(&req, &names, &n, err,
						  sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "'names'"));
		sl_ctl_req_free(&req);
	}
}

static void test_rules(void **state)
{
	struct sl_ruleset rs = { 0 };
	struct sl_ctl_req req;

	(void)state;
	req_of("{\"cmd\":\"rule.add\",\"rules\":[{\"name\":\"web\",\"match\":"
	       "{\"proto\":\"tcp\",\"dport\":443},\"grade\":\"cps\","
	       "\"count\":1000}]}",
	       &req);
	assert_int_equal(sl_ctl_req_rules(&req, &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.n, 1);
	assert_string_equal(rs.rules[0].name, "web");
	sl_ruleset_free(&rs);
	sl_ctl_req_free(&req);

	req_of("{\"cmd\":\"rule.add\",\"rules\":{\"name\":\"x\"}}", &req);
	assert_int_equal(sl_ctl_req_rules(&req, &rs, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "'rules' must be an array"));
	sl_ctl_req_free(&req);

	/* the rule parser's errors name the rule and the field */
	req_of("{\"cmd\":\"rule.add\",\"rules\":[{\"name\":\"web\",\"match\":"
	       "{\"proto\":\"tcp\",\"dport\":80},\"grade\":\"pps\","
	       "\"count\":100,\"windw\":{}}]}",
	       &req);
	assert_int_equal(sl_ctl_req_rules(&req, &rs, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "rule 'web': unknown field 'windw'"));
	sl_ctl_req_free(&req);
}

/* Answers as docs/cli.md gives them: one line, "ok", and on refusal the
 * message and its code; a message past SL_CTL_ERR_MAX is cut, not lost. */
static void test_answers(void **state)
{
	char *text, *long_msg = malloc(SL_CTL_ERR_MAX * 2);
	cJSON *r = sl_ctl_ok();

	(void)state;
	cJSON_AddNumberToObject(r, "version", 7);
	text = sl_ctl_answer_text(r);
	assert_string_equal(text, "{\"ok\":true,\"version\":7}");
	free(text);

	text = sl_ctl_answer_text(sl_ctl_error("not_found",
					       "no rule named '%s'", "nope"));
	assert_string_equal(text, "{\"ok\":false,\"error\":\"no rule named "
				  "'nope'\",\"code\":\"not_found\"}");
	free(text);

	assert_non_null(long_msg);
	memset(long_msg, 'x', SL_CTL_ERR_MAX * 2 - 1);
	long_msg[SL_CTL_ERR_MAX * 2 - 1] = 0;
	r = sl_ctl_error("invalid", "%s", long_msg);
	assert_int_equal(strlen(cJSON_GetObjectItem(r, "error")->valuestring),
			 SL_CTL_ERR_MAX - 1);
	cJSON_Delete(r);
	free(long_msg);
	assert_null(sl_ctl_answer_text(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_if_version),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
