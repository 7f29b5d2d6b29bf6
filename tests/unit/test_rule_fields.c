/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the rule field table and a rule's identity
 * (user/lib/rule_fields.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rule_doc.h"
#include "rule_fields.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "util.h"

/* Every field and section of the table, given a value in some rule. */
static const char all_fields[] =
	"{\"rules\": ["
	"{\"name\": \"a\", \"match\": {\"proto\": \"tcp\", \"dport\": "
	"\"8000-8080\", \"dst\": \"198.18.0.0/15\", \"src\": "
	"\"198.19.0.0/16\", \"vlan\": 12}, \"grade\": \"cps\", \"count\": "
	"100, \"window\": {\"interval_ms\": 2000, \"sample_count\": 4}, "
	"\"per_source\": {\"prefix_v4\": 24, \"prefix_v6\": 48, "
	"\"max_sources\": 100}, \"mode\": \"shadow\", \"priority\": 7, "
	"\"behavior\": {\"warm_up\": {\"period_s\": 10, \"cold_factor\": "
	"4}}},"
	"{\"name\": \"b\", \"match\": {\"proto\": \"udp\", \"dport\": 53, "
	"\"vlan\": \"untagged\"}, \"grade\": \"pps\", \"count\": 1000, "
	"\"cluster\": {\"namespace\": \"ns1\", \"flow_id\": 5, "
	"\"threshold_type\": \"manual\", \"quotas\": {\"n2\": 10, \"n1\": "
	"20}, \"fallback\": {\"fixed\": 30}}, \"breaker\": {\"strategy\": "
	"\"error_ratio\", \"threshold\": 0.25, \"open_ms\": 500}},"
	"{\"name\": \"c\", \"match\": {\"proto\": \"tcp\", \"dport\": 443}, "
	"\"grade\": \"cps\", \"count\": 5000, \"breaker\": {\"strategy\": "
	"\"slow_request_ratio\", \"threshold\": 0.5, \"max_rt_ms\": 200, "
	"\"open_ms\": 1000, \"min_request_amount\": 7, \"stat_interval_ms\": "
	"500, \"probes\": 3, \"open_action\": \"drop\"}, \"system\": "
	"{\"accept_queue\": 128, \"cpu_pressure\": 0.3, \"softirq\": 0.1, "
	"\"load\": 2.5, \"floor\": 60}},"
	"{\"name\": \"d\", \"match\": {\"proto\": \"icmpv6\", \"src\": "
	"\"2001:db8::/32\"}, \"grade\": \"bps\", \"count\": 99999, "
	"\"per_source\": {\"max_sources\": 5}},"
	"{\"name\": \"e\", \"match\": {\"proto\": \"udp\"}, \"grade\": "
	"\"pps\", \"count\": 1, \"breaker\": {\"strategy\": \"error_count\", "
	"\"threshold\": 12, \"open_ms\": 50}},"
	"{\"name\": \"g\", \"match\": {\"proto\": \"icmp\", \"dst\": "
	"\"198.18.0.1\"}, \"grade\": \"pps\", \"count\": 1, \"cluster\": "
	"{\"namespace\": \"x\", \"flow_id\": 1, \"threshold_type\": "
	"\"avg_local\", \"fallback\": \"last_lease\"}},"
	"{\"name\": \"h\", \"match\": {}, \"grade\": \"pps\", \"count\": 3},"
	"{\"name\": \"i\", \"match\": {\"proto\": \"tcp\", \"dport\": 22}, "
	"\"grade\": \"conns\", \"count\": 4, \"per_source\": "
	"{\"max_sources\": 50}, \"conns\": {\"idle_timeout_s\": 60, "
	"\"refuse\": \"drop\"}, \"layer\": 2}"
	"]}";

static void parse_all(struct sl_ruleset *set)
{
	char err[4096];

	assert_int_equal(sl_rules_parse(all_fields, strlen(all_fields), set,
					err, sizeof(err)), 0);
	assert_int_equal(set->n, 8);
}

/* Every field prints to canonical text that reads back to the same
 * text and the same identities. */
static void test_round_trip(void **state)
{
	struct sl_ruleset set, back;
	char err[4096], *text, *again;

	(void) state;
	parse_all(&set);
	text = sl_ruleset_to_json(&set, false);
	assert_non_null(text);
	assert_int_equal(sl_rules_parse(text, strlen(text), &back, err,
					sizeof(err)), 0);
	again = sl_ruleset_to_json(&back, false);
	assert_string_equal(again, text);
	for (size_t i = 0; i < set.n; i++)
		assert_int_equal(sl_rule_def_hash(&back.rules[i]),
				 sl_rule_def_hash(&set.rules[i]));
	free(text);
	free(again);
	sl_ruleset_free(&back);
	sl_ruleset_free(&set);
}

/* sl_rule_fields with extra entries inserted after the field at path. */
static struct sl_field *table_with(const char *after,
				   const struct sl_field *extra, size_t n_extra,
				   size_t *n)
{
	struct sl_field *t = calloc(sl_n_rule_fields + n_extra, sizeof(*t));
	size_t j = 0;

	assert_non_null(t);
	for (size_t i = 0; i < sl_n_rule_fields; i++) {
		t[j++] = sl_rule_fields[i];
		if (!strcmp(sl_rule_fields[i].path, after)) {
			memcpy(t + j, extra, n_extra * sizeof(*extra));
			j += n_extra;
		}
	}
	assert_int_equal(j, sl_n_rule_fields + n_extra);
	*n = j;
	return t;
}

/*
 * A new optional field at its default (here a top-level one, one in the
 * breaker and a new optional section, all kept in members every rule has
 * at the default) keeps every rule's identity; given a value, it is a
 * new one. file_index and has_priority stand in for the new members:
 * neither is part of the identity.
 */
static void test_identity_survives_new_field(void **state)
{
	const struct sl_field extra[] = {
		{ .path = "layer", .type = SL_FT_UINT, .size = 4,
		  .off = offsetof(struct sl_rule, file_index), .hi = 3 },
		{ .path = "conns", .type = SL_FT_SECTION,
		  .flags = SL_FF_OPTIONAL,
		  .present = offsetof(struct sl_rule, has_priority) },
		{ .path = "conns.idle_ms", .depth = 1, .type = SL_FT_UINT,
		  .size = 4, .off = offsetof(struct sl_rule, file_index),
		  .def = 0, .hi = 1000 },
	};
	const struct sl_field knob = {
		.path = "breaker.knob", .depth = 1, .type = SL_FT_UINT,
		.size = 4, .off = offsetof(struct sl_rule, file_index),
		.def = 0, .hi = 9 };
	struct sl_field *t1, *t2;
	struct sl_ruleset set;
	size_t n1, n2;

	(void) state;
	parse_all(&set);
	t1 = table_with("count", extra, sizeof(extra) / sizeof(extra[0]), &n1);
	t2 = table_with("breaker.open_action", &knob, 1, &n2);
	for (size_t i = 0; i < set.n; i++) {
		struct sl_rule r = set.rules[i];
		uint64_t id = sl_rule_def_hash(&r);

		r.file_index = 0;
		r.has_priority = false;
		assert_int_equal(sl_rule_def_hash(&r), id);
		assert_int_equal(sl_rule_identity(t1, n1, &r), id);
		assert_int_equal(sl_rule_identity(t2, n2, &r), id);
		r.file_index = 2;
		assert_int_not_equal(sl_rule_identity(t1, n1, &r), id);
		assert_int_equal(sl_rule_identity(t2, n2, &r) != id,
				 r.breaker.enabled);
		r.has_priority = true;
		assert_int_not_equal(sl_rule_identity(t1, n1, &r), id);
		assert_int_equal(sl_rule_def_hash(&r), id);
	}
	free(t1);
	free(t2);
	sl_ruleset_free(&set);
}

/* How the canonical text prints a field is not the rule's meaning. */
static void test_identity_ignores_printer(void **state)
{
	struct sl_field *t = calloc(sl_n_rule_fields, sizeof(*t));
	struct sl_ruleset set;

	(void) state;
	assert_non_null(t);
	memcpy(t, sl_rule_fields, sl_n_rule_fields * sizeof(*t));
	for (size_t i = 0; i < sl_n_rule_fields; i++)
		t[i].flags ^= SL_FF_OMIT;
	parse_all(&set);
	for (size_t i = 0; i < set.n; i++)
		assert_int_equal(sl_rule_identity(t, sl_n_rule_fields,
						  &set.rules[i]),
				 sl_rule_def_hash(&set.rules[i]));
	free(t);
	sl_ruleset_free(&set);
}

/* Every integer field of a rule that has it is part of the identity (but
 * priority), and distinct rules have distinct identities. */
static void test_identity_covers_fields(void **state)
{
	struct sl_ruleset set;
	size_t checked = 0;

	(void) state;
	parse_all(&set);
	for (size_t i = 0; i < set.n; i++) {
		for (size_t j = i + 1; j < set.n; j++)
			assert_int_not_equal(sl_rule_def_hash(&set.rules[i]),
					     sl_rule_def_hash(&set.rules[j]));
		for (size_t k = 0; k < sl_n_rule_fields; k++) {
			const struct sl_field *f = &sl_rule_fields[k];
			struct sl_rule r = set.rules[i];
			uint64_t v;

			if (f->type != SL_FT_UINT && f->type != SL_FT_ENUM &&
			    f->type != SL_FT_FRACTION)
				continue;
			if ((!strncmp(f->path, "breaker.", 8) &&
			     !r.breaker.enabled) ||
			    (!strncmp(f->path, "system.", 7) &&
			     !r.system.enabled) ||
			    (!strncmp(f->path, "cluster.", 8) &&
			     !r.cluster.enabled) ||
			    (!strncmp(f->path, "per_source.", 11) &&
			     !r.per_source) ||
			    (!strncmp(f->path, "conns.", 6) && !r.conns) ||
			    (!strncmp(f->path, "behavior.", 9) && !r.warm_up))
				continue;
			v = sl_field_uint(f, &r);
			sl_field_set_uint(f, &r, v == 0 ? 1 : v - 1);
			assert_int_equal(sl_rule_def_hash(&r) ==
						 sl_rule_def_hash(&set.rules[i]),
					 !!(f->flags & SL_FF_NO_ID));
			checked++;
		}
	}
	assert_true(checked > 60);
	sl_ruleset_free(&set);
}

/* The table's shape: sections before their fields, paths unique, keys
 * under their section's path, bounds in order. */
static void test_table_shape(void **state)
{
	(void) state;
	assert_true(sl_n_rule_fields <= SL_RULE_FIELDS_MAX);
	for (size_t i = 0; i < sl_n_rule_fields; i++) {
		const struct sl_field *f = &sl_rule_fields[i];
		size_t dots = 0;

		for (const char *p = f->path; *p; p++)
			dots += *p == '.';
		assert_int_equal(dots, f->depth);
		if (f->depth) {
			const struct sl_field *s = f;

			while (s->depth >= f->depth)
				s--;
			assert_int_equal(s->type, SL_FT_SECTION);
			assert_int_equal(strncmp(f->path, s->path,
						 strlen(s->path)), 0);
		}
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(f->path,
						sl_rule_fields[j].path);
		if (f->type == SL_FT_UINT)
			assert_true(f->lo <= f->hi &&
				    (f->size == 1 || f->size == 2 ||
				     f->size == 4 || f->size == 8));
		assert_non_null(f->doc);
	}
}


/* A file of the source tree (SLUICE_SRCDIR, or this file's tree, or the
 * current directory), NUL-terminated and malloc'd. */
static char *read_tree(const char *rel)
{
	static const char self[] = "tests/unit/test_rule_fields.c";
	const char *top = getenv("SLUICE_SRCDIR");
	size_t n = strlen(__FILE__), len;
	char path[1024], here[512], *text;
	int fd;

	if (!top && n > strlen(self) && n - strlen(self) < sizeof(here) &&
	    !strcmp(__FILE__ + n - strlen(self), self)) {
		snprintf(here, sizeof(here), "%.*s", (int)(n - strlen(self)),
			 __FILE__);
		top = here;
	}
	snprintf(path, sizeof(path), "%s/%s", top ? top : ".", rel);
	if (access(path, R_OK))
		snprintf(path, sizeof(path), "./%s", rel);
	fd = open(path, O_RDONLY);
	if (fd < 0 || sl_read_fd(fd, 4 << 20, &text, &len))
		fail_msg("%s: cannot read (set SLUICE_SRCDIR to the source "
			 "tree)", path);
	close(fd);
	return text;
}

/* rules/schema.json and the man page's field table are what the table
 * makes of them (`make rules-gen` writes them). */
static void test_generated_files(void **state)
{
	char *schema = sl_rules_schema(), *fields = sl_rules_man_fields();
	char *file = read_tree("rules/schema.json"), *b, *e;

	(void) state;
	assert_non_null(schema);
	assert_non_null(fields);
	if (strcmp(file, schema))
		fail_msg("rules/schema.json differs from the rule field "
			 "table's: run `make rules-gen`");
	free(file);
	file = read_tree("docs/man/sluice-rules.5.scd");
	b = strstr(file, SL_MAN_BEGIN);
	e = b ? strstr(b, SL_MAN_END) : NULL;
	assert_non_null(e);
	e[strlen(SL_MAN_END)] = '\0';
	if (strcmp(b, fields))
		fail_msg("docs/man/sluice-rules.5.scd's field table differs "
			 "from the rule field table's: run `make rules-gen`");
	free(file);
	free(schema);
	free(fields);
}

/* docs/rules.md names every field and document key as code: `key` or
 * `path.to.key`. */
static void test_rules_md_names_fields(void **state)
{
	char *doc = read_tree("docs/rules.md"), key[80], path[80];

	(void) state;
	for (size_t i = 0; i < sl_n_rule_fields + SL_DOC_N; i++) {
		const struct sl_field *f = &sl_rule_fields[i];
		const char *k = i < sl_n_rule_fields
					? sl_field_key(f)
					: sl_doc_keys[i - sl_n_rule_fields].key;

		snprintf(key, sizeof(key), "`%s`", k);
		snprintf(path, sizeof(path), "`%s`",
			 i < sl_n_rule_fields ? f->path : k);
		if (!strstr(doc, key) && !strstr(doc, path))
			fail_msg("docs/rules.md does not name the field %s "
				 "(as %s or %s)", path, key, path);
	}
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_identity_survives_new_field),
		cmocka_unit_test(test_identity_ignores_printer),
		cmocka_unit_test(test_identity_covers_fields),
		cmocka_unit_test(test_table_shape),
		cmocka_unit_test(test_generated_files),
		cmocka_unit_test(test_rules_md_names_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
