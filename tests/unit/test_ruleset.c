/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the rule-set algebra (user/lib/ruleset.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules_json.h"
#include "rules_parse.h"
#include "ruleset.h"

static char err[4096];

/* A set of pps rules named by the words of names; "q:" rules are cluster
 * rules with manual quotas, which own memory. */
static void make(const char *names, struct sl_ruleset *rs)
{
	char json[65536] = "{\"rules\":[", *copy = strdup(names), *save;
	size_t n = strlen(json);

	for (char *w = strtok_r(copy, " ", &save); w;
	     w = strtok_r(NULL, " ", &save)) {
		bool q = !strncmp(w, "q:", 2);

		n += snprintf(json + n, sizeof(json) - n,
			      "%s{\"name\":\"%s\",\"match\":{},\"grade\":\"pps\","
			      "\"count\":100%s}",
			      json[n - 1] == '[' ? "" : ",", q ? w + 2 : w,
			      q ? ",\"cluster\":{\"namespace\":\"ns\","
				  "\"flow_id\":1,\"threshold_type\":"
				  "\"manual\",\"quotas\":{\"h1\":60,"
				  "\"h2\":40}}"
				: "");
	}
	snprintf(json + n, sizeof(json) - n, "]}");
	free(copy);
	if (sl_rules_parse(json, strlen(json), rs, err, sizeof(err)))
		fail_msg("%s\n%s", err, json);
}

/* The names of rs in order, as one string; every file_index in order. */
static const char *names_of(const struct sl_ruleset *rs)
{
	static char out[4096];
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < rs->n; i++) {
		assert_int_equal(rs->rules[i].file_index, i);
		n += snprintf(out + n, sizeof(out) - n, "%s%s", i ? " " : "",
			      rs->rules[i].name);
	}
	return out;
}

static char *text_of(const struct sl_ruleset *rs)
{
	char *t = sl_rules_text(rs);

	assert_non_null(t);
	return t;
}

static void test_add(void **state)
{
	struct sl_ruleset cur, add, out = { 0 };
	char *before;

	(void)state;
	make("a q:b", &cur);
	make("c q:d", &add);
	before = text_of(&cur);
	assert_int_equal(sl_ruleset_add(&cur, &add, &out, err, sizeof(err)),
			 0);
	assert_string_equal(names_of(&out), "a b c d");
	assert_int_equal(add.n, 0);
	/* the copies own their quotas: freeing the result leaves cur */
	assert_ptr_not_equal(out.rules[1].cluster.quotas,
			     cur.rules[1].cluster.quotas);
	assert_int_equal(out.rules[3].cluster.n_quotas, 2);
	sl_ruleset_free(&out);
	assert_string_equal(text_of(&cur), before);
	free(before);
	sl_ruleset_free(&cur);
}

static void test_add_conflict(void **state)
{
	struct sl_ruleset cur, add, out = { 0 };

	(void)state;
	make("a b", &cur);
	make("c b", &add);
	assert_int_equal(sl_ruleset_add(&cur, &add, &out, err, sizeof(err)),
			 -EEXIST);
	assert_non_null(strstr(err, "rule 'b' exists already"));
	assert_null(out.rules);
	assert_string_equal(names_of(&cur), "a b");
	assert_int_equal(add.n, 2); /* still the caller's */
	sl_ruleset_free(&add);
	sl_ruleset_free(&cur);
}

static void test_add_limit(void **state)
{
	struct sl_ruleset cur = { 0 }, add, out = { 0 };

	(void)state;
	/* SL_MAX_RULES rules in force, one more asked for */
	cur.rules = calloc(SL_MAX_RULES, sizeof(*cur.rules));
	assert_non_null(cur.rules);
	for (cur.n = 0; cur.n < SL_MAX_RULES; cur.n++)
		snprintf(cur.rules[cur.n].name, sizeof(cur.rules[0].name),
			 "r%zu", cur.n);
	make("extra", &add);
	assert_int_equal(sl_ruleset_add(&cur, &add, &out, err, sizeof(err)),
			 -E2BIG);
	assert_non_null(strstr(err, "4097 rules would exceed the limit of "
				    "4096"));
	assert_int_equal(cur.n, SL_MAX_RULES);
	sl_ruleset_free(&add);
	sl_ruleset_free(&cur);
}

static void test_del(void **state)
{
	const char *gone[] = { "b", "d" }, *unknown[] = { "a", "zz" };
	struct sl_ruleset cur, out = { 0 };

	(void)state;
	make("a b c q:d", &cur);
	assert_int_equal(sl_ruleset_del(&cur, gone, 2, &out, err, sizeof(err)),
			 0);
	assert_string_equal(names_of(&out), "a c");
	sl_ruleset_free(&out);
	/* all or none: one unknown name refuses the whole change */
	assert_int_equal(sl_ruleset_del(&cur, unknown, 2, &out, err,
					sizeof(err)),
			 -ENOENT);
	assert_string_equal(err, "no rule named 'zz'");
	assert_null(out.rules);
	assert_string_equal(names_of(&cur), "a b c d");
	/* every rule may go; the caller decides whether empty is allowed */
	{
		const char *all[] = { "a", "b", "c", "d" };

		assert_int_equal(sl_ruleset_del(&cur, all, 4, &out, err,
						sizeof(err)),
				 0);
		assert_int_equal(out.n, 0);
		sl_ruleset_free(&out);
	}
	sl_ruleset_free(&cur);
}

static void test_replace(void **state)
{
	struct sl_ruleset next, out;

	(void)state;
	make("x y", &next);
	next.rules[0].file_index = 7; /* as if from elsewhere */
	sl_ruleset_replace(&next, &out);
	assert_int_equal(next.n, 0);
	assert_null(next.rules);
	assert_string_equal(names_of(&out), "x y");
	sl_ruleset_free(&out);
}

/* The text of a diff of a and b into out. */
static void diff_text(const struct sl_ruleset *a, const struct sl_ruleset *b,
		      char *out, size_t len)
{
	struct sl_ruleset_diff d;

	assert_int_equal(sl_ruleset_diff(a, b, &d), 0);
	sl_ruleset_diff_text(&d, out, len);
	sl_ruleset_diff_free(&d);
}

static void test_diff(void **state)
{
	struct sl_ruleset a, b;
	char out[64], names[4096] = "";
	cJSON *j;

	(void)state;
	make("x y z", &a);
	make("y z w q:v", &b);
	b.rules[1].count = 5; /* z changed */
	diff_text(&a, &b, out, sizeof(out));
	assert_string_equal(out, "added w, v; removed x; changed z");
	j = sl_ruleset_diff_json(&a, &b);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "added")), 2);
	assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "removed"),
					       0)->valuestring, "x");
	cJSON_Delete(j);
	b.rules[1].count = a.rules[2].count;
	b.rules[1].priority = 7; /* a priority is a change too */
	diff_text(&a, &b, out, sizeof(out));
	assert_string_equal(out, "added w, v; removed x; changed z");
	diff_text(&a, &a, out, sizeof(out));
	assert_string_equal(out, "no rule changed");
	sl_ruleset_free(&b);
	/* bounded: what does not fit is counted */
	for (int i = 0; i < 100; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names),
			 "%srule-%03d", i ? " " : "", i);
	make(names, &b);
	diff_text(&a, &b, out, sizeof(out));
	assert_true(strlen(out) < sizeof(out));
	assert_true(!strncmp(out, "added rule-000, rule-001", 24));
	assert_non_null(strstr(out, " more"));
	sl_ruleset_free(&a);
	sl_ruleset_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_add_conflict),
		cmocka_unit_test(test_add_limit),
		cmocka_unit_test(test_del),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_diff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
