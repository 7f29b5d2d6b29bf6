/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the rule-file parser and validator (user/rules.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rules.h"
#include "rules_json.h"
#include "rules_parse.h"

#define ERR_LEN 65536

static char err[ERR_LEN];

/* Doc of one rule from the members of its object, e.g. ONE("\"name\":..."). */
static char doc_buf[8192];
static const char *one(const char *members)
{
	snprintf(doc_buf, sizeof(doc_buf), "{\"rules\": [{%s}]}", members);
	return doc_buf;
}

static int parse(const char *json, struct sl_ruleset *set)
{
	memset(set, 0, sizeof(*set));
	return sl_rules_parse(json, strlen(json), set, err, sizeof(err));
}

static unsigned int err_lines(void)
{
	unsigned int n = err[0] ? 1 : 0;
	const char *p;

	for (p = err; *p; p++)
		n += *p == '\n';
	return n;
}

static void expect_err_in(const char *json, const char *needle)
{
	struct sl_ruleset set;
	int ret = parse(json, &set);

	if (ret != -EINVAL || !strstr(err, needle))
		fail_msg("ret %d; expected -EINVAL and error containing\n"
			 "  %s\ngot:\n%s\nfor: %s",
			 ret, needle, err, json);
	assert_null(set.rules);
}

/* A base rule with one member replaced, for single-field error tests. */
#define NAME  "\"name\": \"web\""
#define MATCH "\"match\": {\"proto\": \"tcp\", \"dport\": 80}"
#define GRADE "\"grade\": \"pps\""
#define COUNT "\"count\": 100"

static void expect_ok(const char *json, struct sl_ruleset *set)
{
	int ret = parse(json, set);

	if (ret != 0)
		fail_msg("ret %d for %s\nerrors:\n%s", ret, json, err);
	assert_string_equal(err, "");
}

static struct sl_prefix pfx(const char *s, unsigned int len)
{
	struct sl_prefix p = {0};

	if (inet_pton(AF_INET, s, p.addr) == 1)
		p.family = AF_INET;
	else if (inet_pton(AF_INET6, s, p.addr) == 1)
		p.family = AF_INET6;
	else
		fail_msg("bad test prefix %s", s);
	p.len = len;
	return p;
}

static void test_full_document(void **state)
{
	static const char json[] =
	    "{\"rules\": [\n"
	    " {\"name\": \"web-v4\",\n"
	    "  \"match\": {\"proto\": \"tcp\", \"dport\": \"8000-8080\",\n"
	    "            \"dst\": \"198.18.0.0/15\", \"src\": "
	    "\"10.1.0.0/16\"},\n"
	    "  \"grade\": \"pps\", \"count\": 5000,\n"
	    "  \"window\": {\"interval_ms\": 2000, \"sample_count\": 4},\n"
	    "  \"per_source\": {\"max_sources\": 1000},\n"
	    "  \"mode\": \"shadow\", \"priority\": 10},\n"
	    " {\"name\": \"dns_v6\",\n"
	    "  \"match\": {\"proto\": \"udp\", \"dport\": 53,\n"
	    "            \"dst\": \"2001:db8::/32\", \"src\": "
	    "\"2001:db8:1::1\"},\n"
	    "  \"grade\": \"bps\", \"count\": 100000000000,\n"
	    "  \"per_source\": {\"prefix_v4\": 24, \"prefix_v6\": 48,\n"
	    "                 \"max_sources\": 262143}},\n"
	    " {\"name\": \"syn.443\", \"match\": {\"proto\": \"tcp\", "
	    "\"dport\": \"443\"},\n"
	    "  \"grade\": \"cps\", \"count\": 1000, \"priority\": 65535},\n"
	    " {\"name\": \"all\", \"match\": {}, \"grade\": \"pps\", "
	    "\"count\": 1,\n"
	    "  \"mode\": \"enforce\", \"window\": {}}\n"
	    "]}\n";
	struct sl_prefix dst4 = pfx("198.18.0.0", 15),
			 src4 = pfx("10.1.0.0", 16);
	struct sl_prefix dst6 = pfx("2001:db8::", 32);
	struct sl_prefix src6 = pfx("2001:db8:1::1", 128);
	struct sl_ruleset set;
	const struct sl_rule *r;

	(void) state;
	expect_ok(json, &set);
	assert_int_equal(set.n, 4);

	r = &set.rules[0];
	assert_string_equal(r->name, "web-v4");
	assert_int_equal(r->proto, SL_PROTO_TCP);
	assert_int_equal(r->dport_lo, 8000);
	assert_int_equal(r->dport_hi, 8080);
	assert_memory_equal(&r->dst, &dst4, sizeof(dst4));
	assert_memory_equal(&r->src, &src4, sizeof(src4));
	assert_int_equal(r->grade, SL_GRADE_PPS);
	assert_int_equal(r->count, 5000);
	assert_int_equal(r->interval_ms, 2000);
	assert_int_equal(r->sample_count, 4);
	assert_true(r->per_source);
	assert_int_equal(r->src_prefix_v4, 32);
	assert_int_equal(r->src_prefix_v6, 64);
	assert_int_equal(r->max_sources, 1000);
	assert_int_equal(r->mode, SL_MODE_SHADOW);
	assert_true(r->has_priority);
	assert_int_equal(r->priority, 10);
	assert_int_equal(r->file_index, 0);

	r = &set.rules[1];
	assert_string_equal(r->name, "dns_v6");
	assert_int_equal(r->proto, SL_PROTO_UDP);
	assert_int_equal(r->dport_lo, 53);
	assert_int_equal(r->dport_hi, 53);
	assert_memory_equal(&r->dst, &dst6, sizeof(dst6));
	assert_memory_equal(&r->src, &src6, sizeof(src6));
	assert_int_equal(r->grade, SL_GRADE_BPS);
	assert_true(r->count == SL_MAX_COUNT);
	assert_int_equal(r->interval_ms, 1000);
	assert_int_equal(r->sample_count, 2);
	assert_true(r->per_source);
	assert_int_equal(r->src_prefix_v4, 24);
	assert_int_equal(r->src_prefix_v6, 48);
	assert_int_equal(r->max_sources, 262143);
	assert_int_equal(r->mode, SL_MODE_ENFORCE);
	assert_false(r->has_priority);
	assert_int_equal(r->priority, 0);
	assert_int_equal(r->file_index, 1);

	r = &set.rules[2];
	assert_string_equal(r->name, "syn.443");
	assert_int_equal(r->grade, SL_GRADE_CPS);
	assert_int_equal(r->dport_lo, 443);
	assert_int_equal(r->dport_hi, 443);
	assert_int_equal(r->dst.family, 0);
	assert_int_equal(r->src.family, 0);
	assert_false(r->per_source);
	assert_int_equal(r->max_sources, 0);
	assert_true(r->has_priority);
	assert_int_equal(r->priority, 65535);
	assert_int_equal(r->file_index, 2);

	r = &set.rules[3];
	assert_string_equal(r->name, "all");
	assert_int_equal(r->proto, SL_PROTO_ANY);
	assert_int_equal(r->dport_lo, 0);
	assert_int_equal(r->dport_hi, 0);
	assert_int_equal(r->dst.family, 0);
	assert_int_equal(r->dst.len, 0);
	assert_int_equal(r->count, 1);
	assert_int_equal(r->interval_ms, 1000);
	assert_int_equal(r->sample_count, 2);
	assert_int_equal(r->mode, SL_MODE_ENFORCE);
	assert_int_equal(r->file_index, 3);

	sl_ruleset_free(&set);
	assert_null(set.rules);
	assert_int_equal(set.n, 0);
}

static void test_protos_and_count_forms(void **state)
{
	struct sl_ruleset set;

	(void) state;
	expect_ok("{\"rules\": ["
		  "{\"name\": \"a\", \"match\": {\"proto\": \"icmp\", \"dst\": "
		  "\"192.0.2.1\"}, \"grade\": \"pps\", \"count\": 1e3},"
		  "{\"name\": \"b\", \"match\": {\"proto\": \"icmpv6\", "
		  "\"src\": \"::/0\"}, \"grade\": \"bps\", \"count\": 2.0},"
		  "{\"name\": \"c\", \"match\": {\"proto\": \"any\"}, "
		  "\"grade\": \"pps\", \"count\": 3,"
		  " \"window\": {\"interval_ms\": 60000, \"sample_count\": 8}},"
		  "{\"name\": \"d\", \"match\": {\"proto\": \"udp\", "
		  "\"dport\": \"1-65535\"}, \"grade\": \"pps\", \"count\": 4,"
		  " \"window\": {\"interval_ms\": 10, \"sample_count\": 2}}]}",
		  &set);
	assert_int_equal(set.n, 4);
	assert_int_equal(set.rules[0].proto, SL_PROTO_ICMP);
	assert_int_equal(set.rules[0].dst.family, AF_INET);
	assert_int_equal(set.rules[0].dst.len, 32);
	assert_int_equal(set.rules[0].count, 1000);
	assert_int_equal(set.rules[1].proto, SL_PROTO_ICMPV6);
	assert_int_equal(set.rules[1].src.family, AF_INET6);
	assert_int_equal(set.rules[1].src.len, 0);
	assert_int_equal(set.rules[1].count, 2);
	assert_int_equal(set.rules[2].proto, SL_PROTO_ANY);
	assert_int_equal(set.rules[2].interval_ms, 60000);
	assert_int_equal(set.rules[2].sample_count, 8);
	assert_int_equal(set.rules[3].dport_lo, 1);
	assert_int_equal(set.rules[3].dport_hi, 65535);
	assert_int_equal(set.rules[3].interval_ms, 10);
	sl_ruleset_free(&set);
}

static void test_empty_rules_valid(void **state)
{
	struct sl_ruleset set;

	(void) state;
	expect_ok("{\"rules\": []}", &set);
	assert_int_equal(set.n, 0);
	sl_ruleset_free(&set);
	expect_ok("  \n{ \"rules\" : [ ] }\n\n", &set);
	assert_int_equal(set.n, 0);
	assert_false(set.allow_empty);
	sl_ruleset_free(&set);
	/* the explicit form (docs/rules.md, "An empty set") */
	expect_ok("{\"rules\": [], \"allow_empty\": true}", &set);
	assert_int_equal(set.n, 0);
	assert_true(set.allow_empty);
	sl_ruleset_free(&set);
	assert_false(set.allow_empty);
	expect_err_in("{\"rules\": [], \"allow_empty\": 1}",
		      "field 'allow_empty': must be true or false, got number");
}

static void test_json_syntax_error(void **state)
{
	(void) state;
	/* The missing comma is on line 3; cJSON stops at the next string. */
	expect_err_in("{\"rules\": [\n"
		      "  {\"name\": \"a\",\n"
		      "   \"grade\": \"pps\" \"count\": 1}\n"
		      "]}",
		      "document: JSON syntax error at line 3, column 19");
	expect_err_in("{\"rules\": [\n{},\n]}",
		      "JSON syntax error at line 3, column 1 near ']}'");
	expect_err_in("{\"rules\": [",
		      "JSON syntax error at line 1, column 12: "
		      "unexpected end of input");
	expect_err_in("{\"rules\": []} trailing",
		      "JSON syntax error at line 1, column 15 near 'trailing'");
	expect_err_in("", "unexpected end of input");
	assert_int_equal(err_lines(), 1);
	/* a file cut short inside a value says so */
	expect_err_in("{\"rules\":[{\"name\":\"web\",\"match\":"
		      "{\"proto\":\"tcp\",\"dp",
		      "JSON syntax error at line 1, column 49 near 'dp': the "
		      "text ends inside the document, cut off after 50 bytes");
	expect_err_in("{\"rules\": []} trailing",
		      "near 'trailing': data after the end of the document");
}

/* Nesting past cJSON's limit is named as such, not as bad syntax. */
static void test_json_too_deep(void **state)
{
	size_t depth = 100000, n = 0;
	char *doc = malloc(2 * depth + 16);

	(void)state;
	assert_non_null(doc);
	n += sprintf(doc, "{\"rules\":");
	memset(doc + n, '[', depth);
	memset(doc + n + depth, ']', depth);
	strcpy(doc + n + 2 * depth, "}");
	expect_err_in(doc, "arrays and objects nested deeper than 1000, the "
			   "parser's limit");
	free(doc);
}

static void test_nul_byte_rejected(void **state)
{
	static const char json[] = "{\"rules\": []}\0junk";
	struct sl_ruleset set = {0};

	(void) state;
	assert_int_equal(
	    sl_rules_parse(json, sizeof(json) - 1, &set, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "document: contains a NUL byte"));
}

static void test_document_shape(void **state)
{
	(void) state;
	expect_err_in("[]", "document: must be an object {\"rules\": [...]}, "
			    "got array");
	expect_err_in("{}", "document: field 'rules': required");
	expect_err_in("{\"rules\": {}}",
		      "document: field 'rules': must be an array, got object");
	expect_err_in("{\"rules\": [], \"rule\": []}",
		      "document: unknown field 'rule' (did you mean 'rules'?)");
	expect_err_in("{\"rules\": [], \"version\": 2}",
		      "document: unknown field 'version'");
	assert_null(strstr(err, "did you mean"));
	expect_err_in("{\"rules\": [], \"rules\": []}",
		      "document: field 'rules' given more than once");
	expect_err_in("{\"rules\": [42]}",
		      "rule #1: must be an object, got number");
}

static char *many_rules(unsigned int n)
{
	size_t cap = 64 + (size_t) n * 80, used;
	char *s = malloc(cap);
	unsigned int i;

	assert_non_null(s);
	used = snprintf(s, cap, "{\"rules\": [");
	for (i = 0; i < n; i++)
		used += snprintf(s + used, cap - used,
				 "%s{\"name\": \"r%u\", \"match\": {}, "
				 "\"grade\": \"pps\", \"count\": %u}",
				 i ? "," : "", i, i + 1);
	snprintf(s + used, cap - used, "]}");
	return s;
}

static void test_rule_count_limit(void **state)
{
	struct sl_ruleset set;
	char *s;

	(void) state;
	s = many_rules(SL_MAX_RULES);
	expect_ok(s, &set);
	assert_int_equal(set.n, SL_MAX_RULES);
	assert_string_equal(set.rules[4095].name, "r4095");
	assert_int_equal(set.rules[4095].count, 4096);
	assert_int_equal(set.rules[4095].file_index, 4095);
	sl_ruleset_free(&set);
	free(s);

	s = many_rules(SL_MAX_RULES + 1);
	expect_err_in(s, "document: field 'rules': 4097 rules, at most 4096 "
			 "are allowed");
	free(s);
}

static void test_duplicate_names(void **state)
{
	(void) state;
	expect_err_in(
	    "{\"rules\": ["
	    "{\"name\": \"web\", \"match\": {}, \"grade\": \"pps\", \"count\": "
	    "1},"
	    "{\"name\": \"other\", \"match\": {}, \"grade\": \"pps\", "
	    "\"count\": 1},"
	    "{\"name\": \"web\", \"match\": {}, \"grade\": \"pps\", \"count\": "
	    "1},"
	    "{\"name\": \"web\", \"match\": {}, \"grade\": \"pps\", \"count\": "
	    "1}]}",
	    "rule 'web': field 'name': duplicate name: rules #1 and #3 "
	    "are both named 'web'");
	assert_non_null(strstr(err, "rules #1 and #4 are both named 'web'"));
	assert_int_equal(err_lines(), 2);
}

/* The largest set: 4096 names, two of them given twice far apart; no
 * other pair is taken for one (names share a hash table's buckets). */
static void test_duplicate_names_many(void **state)
{
	size_t cap = (size_t) SL_MAX_RULES * 96, off = 0;
	char *json = malloc(cap);

	(void) state;
	assert_non_null(json);
	off += snprintf(json + off, cap - off, "{\"rules\": [");
	for (int i = 0; i < SL_MAX_RULES; i++) {
		/* #4000 is named like #3, #4090 like #17 */
		int id = i == 3999 ? 2 : i == 4089 ? 16 : i;

		off += snprintf(json + off, cap - off,
				"%s{\"name\": \"r-%d\", \"match\": {}, "
				"\"grade\": \"pps\", \"count\": 1}",
				i ? "," : "", id);
	}
	snprintf(json + off, cap - off, "]}");
	expect_err_in(json, "rule 'r-2': field 'name': duplicate name: rules "
			    "#3 and #4000 are both named 'r-2'");
	assert_non_null(strstr(err, "rules #17 and #4090 are both named "
				    "'r-16'"));
	assert_int_equal(err_lines(), 2);
	free(json);
}

static void test_name_errors(void **state)
{
	(void) state;
	expect_err_in(one(MATCH "," GRADE "," COUNT),
		      "rule #1: field 'name': required");
	expect_err_in(one("\"name\": \"Web\"," MATCH "," GRADE "," COUNT),
		      "rule #1: field 'name': 'Web' must be 1-63 characters");
	expect_err_in(one("\"name\": \"\"," MATCH "," GRADE "," COUNT),
		      "rule #1: field 'name': '' must be");
	expect_err_in(one("\"name\": 7," MATCH "," GRADE "," COUNT),
		      "rule #1: field 'name': must be a string, got number");
	/* 63 characters is the longest name; 64 is one too many. */
	expect_err_in(one("\"name\": "
			  "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			  "aaaaaaaaaaaaaa\"," MATCH "," GRADE "," COUNT),
		      "rule #1: field 'name':");
	{
		struct sl_ruleset set;

		expect_ok(one("\"name\": "
			      "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			      "aaaaaaaaaaaaaaaaa\"," MATCH "," GRADE "," COUNT),
			  &set);
		assert_int_equal(strlen(set.rules[0].name), 63);
		sl_ruleset_free(&set);
	}
	/* An invalid name is reported by position, 1-based. */
	expect_err_in("{\"rules\": [{\"name\": \"ok\", \"match\": {}, "
		      "\"grade\": \"pps\", \"count\": 1},"
		      "{\"name\": \"bad name\", \"match\": {}, \"grade\": "
		      "\"pps\", \"count\": 0}]}",
		      "rule #2: field 'count': must be between 1 and "
		      "100000000000, got 0");
}

static void test_match_errors(void **state)
{
	(void) state;
	expect_err_in(one(NAME "," GRADE "," COUNT),
		      "rule 'web': field 'match': required");
	expect_err_in(
	    one(NAME ", \"match\": []," GRADE "," COUNT),
	    "rule 'web': field 'match': must be an object, got array");
	expect_err_in(
	    one(NAME ", \"match\": {\"proto\": \"TCP\"}," GRADE "," COUNT),
	    "rule 'web': field 'match.proto': must be one of any, tcp, "
	    "udp, icmp, icmpv6; got 'TCP'");
	expect_err_in(
	    one(NAME ", \"match\": {\"proto\": 6}," GRADE "," COUNT),
	    "rule 'web': field 'match.proto': must be a string, got number");
}

static void test_dport_errors(void **state)
{
	static const struct {
		const char *match;
		const char *msg;
	} cases[] = {
	    {"{\"proto\": \"tcp\", \"dport\": 0}",
	     "field 'match.dport': must be between 1 and 65535, got 0"},
	    {"{\"proto\": \"tcp\", \"dport\": 65536}",
	     "field 'match.dport': must be between 1 and 65535, got 65536"},
	    {"{\"proto\": \"tcp\", \"dport\": 80.5}",
	     "field 'match.dport': must be an integer, got 80.5"},
	    {"{\"proto\": \"tcp\", \"dport\": \"90-80\"}",
	     "field 'match.dport': '90-80': range is reversed (90 > 80)"},
	    {"{\"proto\": \"tcp\", \"dport\": \"0-80\"}",
	     "field 'match.dport': '0-80': ports must be between 1 and 65535"},
	    {"{\"proto\": \"udp\", \"dport\": \"80-70000\"}",
	     "field 'match.dport': '80-70000': ports must be between"},
	    {"{\"proto\": \"udp\", \"dport\": \"http\"}",
	     "field 'match.dport': 'http' is not a port or a range"},
	    {"{\"proto\": \"udp\", \"dport\": \" 80\"}",
	     "field 'match.dport': ' 80' is not a port"},
	    {"{\"proto\": \"udp\", \"dport\": \"80-\"}",
	     "field 'match.dport': '80-' is not a port"},
	    {"{\"proto\": \"udp\", \"dport\": \"\"}",
	     "field 'match.dport': '' is not a port"},
	    {"{\"proto\": \"udp\", \"dport\": true}",
	     "field 'match.dport': must be a port number 1-65535 or a "
	     "string \"lo-hi\", got boolean"},
	    {"{\"proto\": \"icmp\", \"dport\": 80}",
	     "field 'match.dport': only allowed with proto tcp or udp "
	     "(proto is 'icmp')"},
	    {"{\"dport\": 80}",
	     "field 'match.dport': only allowed with proto tcp or udp "
	     "(proto is 'any')"},
	};
	char members[512];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME ", \"match\": %s," GRADE "," COUNT,
			 cases[i].match);
		snprintf(want, sizeof(want), "rule 'web': %s", cases[i].msg);
		expect_err_in(one(members), want);
		assert_int_equal(err_lines(), 1);
	}
}

static void assert_round_trip(const struct sl_ruleset *a);
static char *rule_text(const struct sl_rule *r);

static void test_vlan(void **state)
{
	static const struct {
		const char *vlan;
		const char *msg;
	} bad[] = {
	    {"0", "field 'match.vlan': must be between 1 and 4094, got 0"},
	    {"4095", "field 'match.vlan': must be between 1 and 4094, got 4095"},
	    {"-1", "field 'match.vlan': must be between 1 and 4094, got -1"},
	    {"10.5", "field 'match.vlan': must be an integer, got 10.5"},
	    {"\"100\"", "field 'match.vlan': '100' is not a VLAN; use an id "
			"1-4094 or \"untagged\""},
	    {"\"Untagged\"", "field 'match.vlan': 'Untagged' is not a VLAN"},
	    {"\"any\"", "field 'match.vlan': 'any' is not a VLAN"},
	    {"true", "field 'match.vlan': must be a VLAN id 1-4094 or "
		     "\"untagged\", got boolean"},
	    {"null", "field 'match.vlan': must be a VLAN id 1-4094 or "
		     "\"untagged\", got null"},
	};
	struct sl_ruleset set;
	char members[512], want[256];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(members, sizeof(members),
			 NAME ", \"match\": {\"vlan\": %s}," GRADE "," COUNT,
			 bad[i].vlan);
		snprintf(want, sizeof(want), "rule 'web': %s", bad[i].msg);
		expect_err_in(one(members), want);
		assert_int_equal(err_lines(), 1);
	}
	expect_ok("{\"rules\": ["
		  "{\"name\": \"a\", \"match\": {\"vlan\": 1}, "
		  "\"grade\": \"pps\", \"count\": 1},"
		  "{\"name\": \"b\", \"match\": {\"vlan\": 4094, \"proto\": "
		  "\"udp\"}, \"grade\": \"pps\", \"count\": 1},"
		  "{\"name\": \"c\", \"match\": {\"vlan\": \"untagged\"}, "
		  "\"grade\": \"pps\", \"count\": 1},"
		  "{\"name\": \"d\", \"match\": {}, \"grade\": \"pps\", "
		  "\"count\": 1}]}",
		  &set);
	assert_true(set.rules[0].has_vlan);
	assert_int_equal(set.rules[0].vlan, 1);
	assert_int_equal(set.rules[1].vlan, 4094);
	assert_true(set.rules[2].has_vlan);
	assert_int_equal(set.rules[2].vlan, 0);
	assert_false(set.rules[3].has_vlan);
	assert_round_trip(&set);
	sl_ruleset_free(&set);
}

static void test_prefix_errors(void **state)
{
	static const struct {
		const char *match;
		const char *msg;
	} cases[] = {
	    {"{\"dst\": \"198.19.0.0/15\"}",
	     "field 'match.dst': '198.19.0.0/15': host bits set; did you "
	     "mean 198.18.0.0/15?"},
	    {"{\"src\": \"10.0.0.1/8\"}",
	     "field 'match.src': '10.0.0.1/8': host bits set; did you "
	     "mean 10.0.0.0/8?"},
	    {"{\"dst\": \"2001:db8::1/32\"}",
	     "field 'match.dst': '2001:db8::1/32': host bits set; did you "
	     "mean 2001:db8::/32?"},
	    {"{\"dst\": \"198.18.0.0/33\"}",
	     "field 'match.dst': '198.18.0.0/33': prefix length must be 0-32"},
	    {"{\"dst\": \"2001:db8::/129\"}",
	     "field 'match.dst': '2001:db8::/129': prefix length must be "
	     "0-128"},
	    {"{\"dst\": \"10.0.0.0/\"}",
	     "field 'match.dst': '10.0.0.0/': prefix length must be 0-32"},
	    {"{\"dst\": \"10.0.0.0/8x\"}",
	     "field 'match.dst': '10.0.0.0/8x': prefix length"},
	    {"{\"dst\": \"10.0.0.256/32\"}",
	     "field 'match.dst': '10.0.0.256/32' is not an IPv4 or IPv6 "
	     "prefix"},
	    {"{\"dst\": \"example.com\"}",
	     "field 'match.dst': 'example.com' is not an IPv4 or IPv6 prefix"},
	    {"{\"dst\": 167772160}",
	     "field 'match.dst': must be a string, got number"},
	    {"{\"dst\": \"::ffff:10.0.0.0/104\"}",
	     "field 'match.dst': '::ffff:10.0.0.0/104' is an IPv4-mapped"},
	    {"{\"dst\": \"10.0.0.0/8\", \"src\": \"2001:db8::/32\"}",
	     "field 'match.src': is IPv6 but match.dst is IPv4; no packet "
	     "can match both"},
	    {"{\"proto\": \"icmp\", \"dst\": \"2001:db8::/32\"}",
	     "field 'match.dst': proto icmp is IPv4 only; use icmpv6"},
	    {"{\"proto\": \"icmp\", \"src\": \"2001:db8::/32\"}",
	     "field 'match.src': proto icmp is IPv4 only; use icmpv6"},
	    {"{\"proto\": \"icmpv6\", \"src\": \"192.0.2.0/24\"}",
	     "field 'match.src': proto icmpv6 is IPv6 only; use icmp"},
	    {"{\"proto\": \"icmpv6\", \"dst\": \"192.0.2.0/24\"}",
	     "field 'match.dst': proto icmpv6 is IPv6 only; use icmp"},
	};
	char members[512];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME ", \"match\": %s," GRADE "," COUNT,
			 cases[i].match);
		snprintf(want, sizeof(want), "rule 'web': %s", cases[i].msg);
		expect_err_in(one(members), want);
		assert_int_equal(err_lines(), 1);
	}
}

static void test_grade_errors(void **state)
{
	(void) state;
	expect_err_in(one(NAME "," MATCH "," COUNT),
		      "rule 'web': field 'grade': required");
	expect_err_in(
	    one(NAME "," MATCH ", \"grade\": \"qps\"," COUNT),
	    "rule 'web': field 'grade': must be one of pps, bps, cps, conns; "
	    "got 'qps'");
	expect_err_in(
	    one(NAME ", \"match\": {\"proto\": \"udp\"}, "
		     "\"grade\": \"cps\"," COUNT),
	    "rule 'web': field 'grade': cps counts TCP SYNs and needs "
	    "match.proto \"tcp\" (proto is 'udp')");
	expect_err_in(
	    one(NAME ", \"match\": {}, \"grade\": \"cps\"," COUNT),
	    "rule 'web': field 'grade': cps counts TCP SYNs and needs "
	    "match.proto \"tcp\" (proto is 'any')");
	/* A bad proto is reported once, not again as a cps mismatch. */
	expect_err_in(one(NAME ", \"match\": {\"proto\": \"tpc\"}, "
			       "\"grade\": \"cps\"," COUNT),
		      "field 'match.proto'");
	assert_null(strstr(err, "cps counts"));
	assert_int_equal(err_lines(), 1);
}

static void test_count_errors(void **state)
{
	static const struct {
		const char *count;
		const char *msg;
	} cases[] = {
	    {"0", "must be between 1 and 100000000000, got 0"},
	    {"-5", "must be between 1 and 100000000000, got -5"},
	    {"100000000001",
	     "must be between 1 and 100000000000, got 100000000001"},
	    {"1e400", "must be between 1 and 100000000000, got inf"},
	    {"1.5", "must be an integer, got 1.5"},
	    {"\"10\"", "must be an integer number, got string"},
	    {"true", "must be an integer number, got boolean"},
	    {"null", "must be an integer number, got null"},
	    {"[10]", "must be an integer number, got array"},
	};
	char members[512];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME "," MATCH "," GRADE ", \"count\": %s",
			 cases[i].count);
		snprintf(want, sizeof(want), "rule 'web': field 'count': %s",
			 cases[i].msg);
		expect_err_in(one(members), want);
	}
	expect_err_in(one(NAME "," MATCH "," GRADE),
		      "rule 'web': field 'count': required");
}

static void test_window_errors(void **state)
{
	static const struct {
		const char *window;
		const char *msg;
	} cases[] = {
	    {"{\"sample_count\": 0}",
	     "field 'window.sample_count': must be between 1 and 8, got 0"},
	    {"{\"sample_count\": 9}",
	     "field 'window.sample_count': must be between 1 and 8, got 9"},
	    {"{\"interval_ms\": 9}",
	     "field 'window.interval_ms': must be between 10 and 60000, got 9"},
	    {"{\"interval_ms\": 60001}",
	     "field 'window.interval_ms': must be between 10 and 60000, "
	     "got 60001"},
	    {"{\"interval_ms\": \"1s\"}",
	     "field 'window.interval_ms': must be an integer number, got "
	     "string"},
	    {"{\"interval_ms\": 1000, \"sample_count\": 3}",
	     "field 'window': interval_ms 1000 does not divide evenly into "
	     "sample_count 3 buckets"},
	    {"{\"sample_count\": 3}",
	     "field 'window': interval_ms 1000 does not divide evenly into "
	     "sample_count 3 buckets"},
	    {"{\"interval_ms\": 32, \"sample_count\": 8}",
	     "field 'window': buckets of interval_ms/sample_count = 4 ms are "
	     "shorter than the minimum 5 ms"},
	    {"[1000, 2]", "field 'window': must be an object, got array"},
	    {"{\"intreval_ms\": 1000}",
	     "field 'window': unknown field 'intreval_ms' (did you mean "
	     "'interval_ms'?)"},
	};
	char members[512];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME "," MATCH "," GRADE "," COUNT ", \"window\": %s",
			 cases[i].window);
		snprintf(want, sizeof(want), "rule 'web': %s", cases[i].msg);
		expect_err_in(one(members), want);
		assert_int_equal(err_lines(), 1);
	}
}

static void test_per_source_errors(void **state)
{
	static const struct {
		const char *ps;
		const char *msg;
	} cases[] = {
	    {"{}", "field 'per_source.max_sources': required"},
	    {"{\"max_sources\": 0}",
	     "field 'per_source.max_sources': must be between 1 and "
	     "262143, got 0"},
	    {"{\"max_sources\": 262144}",
	     "field 'per_source.max_sources': must be between 1 and "
	     "262143, got 262144"},
	    {"{\"max_sources\": 10, \"prefix_v4\": 0}",
	     "field 'per_source.prefix_v4': must be between 1 and 32, got 0"},
	    {"{\"max_sources\": 10, \"prefix_v4\": 33}",
	     "field 'per_source.prefix_v4': must be between 1 and 32, got 33"},
	    {"{\"max_sources\": 10, \"prefix_v6\": 129}",
	     "field 'per_source.prefix_v6': must be between 1 and 128, got "
	     "129"},
	    {"{\"max_source\": 10}",
	     "field 'per_source': unknown field 'max_source' (did you mean "
	     "'max_sources'?)"},
	    {"true", "field 'per_source': must be an object, got boolean"},
	};
	char members[512];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME "," MATCH "," GRADE "," COUNT
			      ", \"per_source\": %s",
			 cases[i].ps);
		snprintf(want, sizeof(want), "rule 'web': %s", cases[i].msg);
		expect_err_in(one(members), want);
	}
}

static void test_mode_priority_errors(void **state)
{
	(void) state;
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"mode\": \"dry-run\""),
	    "rule 'web': field 'mode': must be one of enforce, shadow; "
	    "got 'dry-run'");
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"priority\": 0"),
	    "rule 'web': field 'priority': must be between 1 and 65535, "
	    "got 0");
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"priority\": 65536"),
	    "rule 'web': field 'priority': must be between 1 and 65535, "
	    "got 65536");
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"priority\": \"high\""),
	    "rule 'web': field 'priority': must be an integer number, "
	    "got string");
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"layer\": 4"),
	    "rule 'web': field 'layer': must be between 0 and 3, got 4");
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"layer\": -1"),
	    "rule 'web': field 'layer': must be between 0 and 3, got -1");
}

static void test_unknown_keys(void **state)
{
	(void) state;
	expect_err_in(
	    one(NAME "," MATCH "," COUNT ", \"grad\": \"pps\""),
	    "rule 'web': unknown field 'grad' (did you mean 'grade'?)");
	expect_err_in(
	    one(NAME ", \"match\": {\"proto\": \"tcp\", \"dprot\": 80}," GRADE
		     "," COUNT),
	    "rule 'web': field 'match': unknown field 'dprot' (did you "
	    "mean 'dport'?)");
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT
			       ", \"window\": {\"sample_cnt\": 2}"),
		      "rule 'web': field 'window': unknown field 'sample_cnt' "
		      "(did you mean 'sample_count'?)");
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT
		     ", \"per_source\": {\"max_sources\": 5, \"prefix4\": 24}"),
	    "rule 'web': field 'per_source': unknown field 'prefix4' "
	    "(did you mean 'prefix_v4'?)");
	/* Keys are case-sensitive; the suggestion still helps. */
	expect_err_in(
	    one(NAME "," MATCH "," GRADE "," COUNT ", \"Mode\": \"shadow\""),
	    "rule 'web': unknown field 'Mode' (did you mean 'mode'?)");
	/* No suggestion when nothing is close. */
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT
			       ", \"description\": \"web\""),
		      "rule 'web': unknown field 'description'");
	assert_null(strstr(err, "did you mean"));
	/* Control characters in a key cannot break one-error-per-line. */
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT ", \"a\\nb\": 1"),
		      "rule 'web': unknown field 'a\\x0ab'");
	assert_int_equal(err_lines(), 1);
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT ", \"count\": 5"),
		      "rule 'web': field 'count' given more than once");
	/* A huge object gets one error, not one per key. */
	{
		char members[2048], *p = members;
		unsigned int i;

		p += sprintf(p, NAME "," GRADE "," COUNT ", \"match\": {");
		for (i = 0; i < 40; i++)
			p += sprintf(p, "%s\"k%u\": 1", i ? "," : "", i);
		sprintf(p, "}");
		expect_err_in(one(members), "rule 'web': field 'match': has 40 "
					    "fields; at most 5 are defined");
		assert_int_equal(err_lines(), 1);
	}
}

static void test_multiple_errors_collected(void **state)
{
	(void) state;
	expect_err_in(
	    "{\"rules\": ["
	    "{\"name\": \"web\", \"match\": {\"proto\": \"udp\", \"dport\": 0},"
	    " \"grade\": \"cps\", \"count\": 1.5},"
	    "{\"name\": \"ok\", \"match\": {}, \"grade\": \"pps\", \"count\": "
	    "1},"
	    "{\"match\": {}, \"grade\": \"pps\", \"count\": 1,"
	    " \"window\": {\"sample_count\": 3}}]}",
	    "rule 'web': field 'match.dport': must be between 1 and 65535");
	assert_non_null(strstr(err, "rule 'web': field 'grade': cps counts"));
	assert_non_null(strstr(err, "rule 'web': field 'count': must be an "
				    "integer, got 1.5"));
	assert_non_null(strstr(err, "rule #3: field 'name': required"));
	assert_non_null(strstr(err, "rule #3: field 'window': interval_ms 1000 "
				    "does not divide evenly"));
	assert_int_equal(err_lines(), 5);
	assert_null(strstr(err, "rule 'ok'"));
}

static void test_error_cap(void **state)
{
	char *s = malloc(64 * 100), *p;
	unsigned int i;

	(void) state;
	assert_non_null(s);
	p = s + sprintf(s, "{\"rules\": [");
	for (i = 0; i < 60; i++)
		p += sprintf(p,
			     "%s{\"name\": \"r%u\", \"match\": {}, "
			     "\"grade\": \"pps\", \"count\": 0}",
			     i ? "," : "", i);
	sprintf(p, "]}");
	expect_err_in(s, "rule 'r49': field 'count'");
	assert_null(strstr(err, "rule 'r50'"));
	assert_non_null(strstr(err, "\n... 10 more errors"));
	assert_int_equal(err_lines(), 51);
	free(s);
}

static void test_err_truncated_and_out_untouched(void **state)
{
	struct sl_rule sentinel;
	struct sl_ruleset set = {.rules = &sentinel, .n = 77};
	char small[16];
	const char *json = one(NAME ", \"match\": {}, \"grade\": \"pps\", "
				    "\"count\": 0");

	(void) state;
	memset(small, 'x', sizeof(small));
	assert_int_equal(
	    sl_rules_parse(json, strlen(json), &set, small, sizeof(small)),
	    -EINVAL);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_memory_equal(small, "rule 'web': fie", sizeof(small));
	assert_ptr_equal(set.rules, &sentinel);
	assert_int_equal(set.n, 77);
	/* No error buffer at all is allowed. */
	assert_int_equal(sl_rules_parse(json, strlen(json), &set, NULL, 0),
			 -EINVAL);
}

static void test_prefix_contains(void **state)
{
	struct sl_prefix any = {0};
	struct sl_prefix n15 = pfx("198.18.0.0", 15);
	struct sl_prefix n24in = pfx("198.19.7.0", 24);
	struct sl_prefix n24out = pfx("198.20.0.0", 24);
	struct sl_prefix n24lo = pfx("198.18.0.0", 24);
	struct sl_prefix h = pfx("198.19.255.255", 32);
	struct sl_prefix v4all = pfx("0.0.0.0", 0);
	struct sl_prefix v6 = pfx("2001:db8::", 32);
	struct sl_prefix v6in = pfx("2001:db8:ffff::", 48);
	struct sl_prefix v6out = pfx("2001:db9::", 48);
	struct sl_prefix v6odd = pfx("2001:db8::", 31);

	(void) state;
	assert_true(sl_prefix_contains(&any, &any));
	assert_true(sl_prefix_contains(&any, &n15));
	assert_true(sl_prefix_contains(&any, &v6));
	assert_false(sl_prefix_contains(&n15, &any));
	assert_true(sl_prefix_contains(&n15, &n15));
	assert_true(sl_prefix_contains(&n15, &n24in));
	assert_true(sl_prefix_contains(&n15, &h));
	assert_false(sl_prefix_contains(&n15, &n24out));
	assert_false(sl_prefix_contains(&n24in, &n15));
	/* Same leading bits, but a longer prefix never contains a shorter. */
	assert_false(sl_prefix_contains(&n24lo, &n15));
	assert_true(sl_prefix_contains(&n15, &n24lo));
	assert_true(sl_prefix_contains(&v4all, &h));
	assert_false(sl_prefix_contains(&v4all, &v6));
	assert_false(sl_prefix_contains(&n15, &v6));
	assert_true(sl_prefix_contains(&v6, &v6in));
	assert_false(sl_prefix_contains(&v6, &v6out));
	/* /31 covers 2001:db8:: and 2001:db9::; /32 does not. */
	assert_true(sl_prefix_contains(&v6odd, &v6out));
	assert_false(sl_prefix_contains(&v6odd, &n15));
}

static void test_prefix_str(void **state)
{
	struct sl_prefix any = {0};
	struct sl_prefix a = pfx("198.18.0.0", 15);
	struct sl_prefix b = pfx("2001:db8::", 32);
	char buf[64], tiny[6];

	(void) state;
	sl_prefix_str(&any, buf, sizeof(buf));
	assert_string_equal(buf, "any");
	sl_prefix_str(&a, buf, sizeof(buf));
	assert_string_equal(buf, "198.18.0.0/15");
	sl_prefix_str(&b, buf, sizeof(buf));
	assert_string_equal(buf, "2001:db8::/32");
	sl_prefix_str(&a, tiny, sizeof(tiny));
	assert_string_equal(tiny, "198.1");
}

static void test_enum_strings(void **state)
{
	(void) state;
	assert_string_equal(sl_proto_str(SL_PROTO_ANY), "any");
	assert_string_equal(sl_proto_str(SL_PROTO_TCP), "tcp");
	assert_string_equal(sl_proto_str(SL_PROTO_UDP), "udp");
	assert_string_equal(sl_proto_str(SL_PROTO_ICMP), "icmp");
	assert_string_equal(sl_proto_str(SL_PROTO_ICMPV6), "icmpv6");
	assert_string_equal(sl_proto_str((enum sl_proto) 99), "?");
	assert_string_equal(sl_grade_str(SL_GRADE_PPS), "pps");
	assert_string_equal(sl_grade_str(SL_GRADE_BPS), "bps");
	assert_string_equal(sl_grade_str(SL_GRADE_CPS), "cps");
	assert_string_equal(sl_mode_str(SL_MODE_ENFORCE), "enforce");
	assert_string_equal(sl_mode_str(SL_MODE_SHADOW), "shadow");
}

static void write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t) len);
	close(fd);
}

static void test_load_file(void **state)
{
	char dir[] = "/tmp/sl-rules-XXXXXX", path[128];
	struct sl_ruleset set = {0};
	static const char good[] =
	    "{\"rules\": [{\"name\": \"f\", \"match\": {\"proto\": \"udp\","
	    " \"dport\": 9000}, \"grade\": \"pps\", \"count\": 20000}]}\n";
	int fd;

	(void) state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/rules.json", dir);

	assert_int_equal(sl_rules_load_file(path, &set, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "rules.json: cannot open: No such file "
				    "or directory"));

	write_file(path, good, sizeof(good) - 1);
	assert_int_equal(sl_rules_load_file(path, &set, err, sizeof(err)), 0);
	assert_int_equal(set.n, 1);
	assert_string_equal(set.rules[0].name, "f");
	assert_int_equal(set.rules[0].dport_lo, 9000);
	assert_int_equal(set.rules[0].count, 20000);
	sl_ruleset_free(&set);

	write_file(path, "{\"rules\": [\n\n}", 14);
	assert_int_equal(sl_rules_load_file(path, &set, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "JSON syntax error at line 3"));

	assert_int_equal(sl_rules_load_file(dir, &set, err, sizeof(err)),
			 -EISDIR);
	assert_non_null(strstr(err, ": cannot read: Is a directory"));

	/* One byte over 64 MiB (sparse: cheap to make). */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (64 << 20) + 1), 0);
	close(fd);
	assert_int_equal(sl_rules_load_file(path, &set, err, sizeof(err)),
			 -EFBIG);
	assert_non_null(strstr(err, "rules.json: larger than 64 MiB"));

	unlink(path);
	rmdir(dir);
}

/*
 * The shipped rule files must stay valid. Find the source tree from
 * $SLUICE_SRCDIR, else from this file's path as the compiler saw it, else
 * the current directory.
 */
static void load_shipped(const char *rel, struct sl_ruleset *set)
{
	static const char self[] = "tests/unit/test_rules.c";
	const char *top = getenv("SLUICE_SRCDIR");
	char path[1024], here[512];
	size_t n = strlen(__FILE__);
	int ret;

	if (!top && n >= strlen(self) &&
	    !strcmp(__FILE__ + n - strlen(self), self) &&
	    n - strlen(self) < sizeof(here) - 2) {
		memcpy(here, __FILE__, n - strlen(self));
		here[n - strlen(self)] = '\0';
		if (!here[0])
			strcpy(here, ".");
		top = here;
	}
	snprintf(path, sizeof(path), "%s/%s", top ? top : ".", rel);
	if (access(path, R_OK))
		snprintf(path, sizeof(path), "./%s", rel);
	ret = sl_rules_load_file(path, set, err, sizeof(err));
	if (ret)
		fail_msg("%s: %d (set SLUICE_SRCDIR to the source tree)\n%s",
			 path, ret, err);
}

static void test_shipped_demo(void **state)
{
	struct sl_ruleset set = {0};
	const struct sl_rule *r;

	(void) state;
	load_shipped("rules/demo.json", &set);
	assert_int_equal(set.n, 2);
	r = &set.rules[0];
	assert_string_equal(r->name, "demo-udp-9000");
	assert_int_equal(r->proto, SL_PROTO_UDP);
	assert_int_equal(r->dport_lo, 9000);
	assert_int_equal(r->dport_hi, 9000);
	assert_int_equal(r->grade, SL_GRADE_PPS);
	assert_int_equal(r->count, 20000);
	r = &set.rules[1];
	assert_string_equal(r->name, "demo-syn-80");
	assert_int_equal(r->proto, SL_PROTO_TCP);
	assert_int_equal(r->dport_lo, 80);
	assert_int_equal(r->grade, SL_GRADE_CPS);
	assert_int_equal(r->count, 1000);
	sl_ruleset_free(&set);
}

/* Every rule file under rules/examples (one list: the directory). */
static void shipped_examples(glob_t *g)
{
	assert_int_equal(glob("rules/examples/*.json", 0, NULL, g), 0);
	assert_true(g->gl_pathc >= 10);
}

static void test_shipped_examples(void **state)
{
	glob_t g;
	size_t i;

	(void) state;
	shipped_examples(&g);
	for (i = 0; i < g.gl_pathc; i++) {
		struct sl_ruleset set = {0};

		load_shipped(g.gl_pathv[i], &set);
		assert_true(set.n >= 1);
		sl_ruleset_free(&set);
	}
	globfree(&g);
}

/*
 * allow and deny: no grade, count or any other field of a limit (each
 * refused by name), shadow only for deny; in the canonical text action
 * takes grade's place, and a limit rule's text and identity are as they
 * were before the field.
 */
static void test_actions(void **state)
{
	static const char *const limit_only[] = {
		"\"grade\": \"pps\"", "\"count\": 5",
		"\"per_source\": {\"max_sources\": 9}",
		"\"behavior\": \"reject\"",
		"\"cluster\": {\"namespace\": \"a\", \"flow_id\": 1, "
		"\"threshold_type\": \"global\"}",
		"\"breaker\": {\"strategy\": \"error_count\", "
		"\"threshold\": 5, \"open_ms\": 100}",
		"\"system\": {\"load\": 2}",
	};
	struct sl_ruleset set;
	char *s;

	(void) state;
	expect_ok("{\"rules\": ["
		  "{\"name\": \"mon\", \"match\": {\"src\": "
		  "\"198.18.5.0/24\"}, \"action\": \"allow\", "
		  "\"priority\": 10},"
		  "{\"name\": \"bad\", \"match\": {\"src\": "
		  "\"198.19.0.0/16\"}, \"action\": \"deny\", "
		  "\"mode\": \"shadow\", \"window\": {\"interval_ms\": "
		  "500}},"
		  "{\"name\": \"web\", \"match\": {}, \"action\": \"limit\", "
		  "\"grade\": \"pps\", \"count\": 7}]}",
		  &set);
	assert_int_equal(set.rules[0].action, SL_ACTION_ALLOW);
	assert_int_equal(set.rules[0].count, 0);
	assert_int_equal(set.rules[1].action, SL_ACTION_DENY);
	assert_int_equal(set.rules[1].mode, SL_MODE_SHADOW);
	assert_int_equal(set.rules[1].interval_ms, 500);
	assert_int_equal(set.rules[2].action, SL_ACTION_LIMIT);
	s = rule_text(&set.rules[0]);
	assert_string_equal(
	    s, "{\"name\":\"mon\",\"match\":{\"proto\":\"any\","
	       "\"src\":\"198.18.5.0/24\"},\"action\":\"allow\","
	       "\"window\":{\"interval_ms\":1000,\"sample_count\":2},"
	       "\"mode\":\"enforce\",\"priority\":10}");
	cJSON_free(s);
	/* "limit" written out is the default: the text leaves it out */
	s = rule_text(&set.rules[2]);
	assert_null(strstr(s, "action"));
	cJSON_free(s);
	assert_round_trip(&set);
	/* the action is part of the identity */
	assert_int_not_equal(sl_rule_def_hash(&set.rules[0]),
			     sl_rule_def_hash(&set.rules[1]));
	sl_ruleset_free(&set);

	for (size_t i = 0; i < sizeof(limit_only) / sizeof(*limit_only); i++) {
		char doc[512], key[32];

		snprintf(doc, sizeof(doc),
			 "{\"rules\": [{\"name\": \"d\", \"match\": "
			 "{\"proto\": \"tcp\"}, \"action\": \"deny\", %s}]}",
			 limit_only[i]);
		snprintf(key, sizeof(key), "field '%.*s'",
			 (int)strcspn(limit_only[i] + 1, "\""),
			 limit_only[i] + 1);
		expect_err_in(doc, key);
		expect_err_in(doc, "only with action \"limit\" (this rule's "
				   "action is \"deny\": it drops every packet "
				   "it judges)");
		assert_int_equal(err_lines(), 1);
	}
	expect_err_in(one(NAME "," MATCH ", \"action\": \"allow\", "
			  "\"mode\": \"shadow\""),
		      "rule 'web': field 'mode': shadow counts what a rule "
		      "would drop, and an allow rule drops nothing");
	/* a bad action is the one error: the limit's fields wait for it */
	expect_err_in(one(NAME "," MATCH ", \"action\": \"block\""),
		      "rule 'web': field 'action': must be one of limit, "
		      "allow, deny; got 'block'");
	assert_int_equal(err_lines(), 1);
	/* a limit still needs its grade and count */
	expect_err_in(one(NAME "," MATCH ", \"action\": \"limit\""),
		      "rule 'web': field 'grade': required");
}

static void test_behavior(void **state)
{
	struct sl_ruleset set;
	const struct sl_rule *r;

	(void) state;
	expect_ok("{\"rules\": ["
		  "{\"name\": \"a\", \"match\": {}, \"grade\": \"pps\", "
		  "\"count\": 100},"
		  "{\"name\": \"b\", \"match\": {}, \"grade\": \"pps\", "
		  "\"count\": 100, \"behavior\": \"reject\"},"
		  "{\"name\": \"c\", \"match\": {}, \"grade\": \"pps\", "
		  "\"count\": 100, \"behavior\": {\"warm_up\": "
		  "{\"period_s\": 10, \"cold_factor\": 4}}},"
		  "{\"name\": \"d\", \"match\": {}, \"grade\": \"pps\", "
		  "\"count\": 3, \"behavior\": {\"warm_up\": "
		  "{\"period_s\": 3600}}},"
		  "{\"name\": \"e\", \"match\": {}, \"grade\": \"pps\", "
		  "\"count\": 100, \"behavior\": {\"warm_up\": "
		  "{\"cold_factor\": 100, \"period_s\": 1}}}]}",
		  &set);
	assert_int_equal(set.n, 5);
	r = &set.rules[0];
	assert_false(r->warm_up);
	assert_int_equal(r->warm_period_s, 0);
	assert_int_equal(r->cold_factor, 0);
	r = &set.rules[1];
	assert_false(r->warm_up);
	assert_int_equal(r->warm_period_s, 0);
	assert_int_equal(r->cold_factor, 0);
	r = &set.rules[2];
	assert_true(r->warm_up);
	assert_int_equal(r->warm_period_s, 10);
	assert_int_equal(r->cold_factor, 4);
	/* cold_factor defaults to Sentinel's 3; count 3 starts the ramp at 1 */
	r = &set.rules[3];
	assert_true(r->warm_up);
	assert_int_equal(r->warm_period_s, 3600);
	assert_int_equal(r->cold_factor, 3);
	r = &set.rules[4];
	assert_true(r->warm_up);
	assert_int_equal(r->warm_period_s, 1);
	assert_int_equal(r->cold_factor, 100);
	sl_ruleset_free(&set);
}

static void test_behavior_errors(void **state)
{
	static const struct {
		const char *count;
		const char *behavior;
		const char *msg;
		unsigned int also; /* further errors the case implies */
	} cases[] = {
	    {"100", "\"drop\"",
	     "field 'behavior': must be \"reject\" or {\"warm_up\": {...}}; "
	     "got 'drop'",
	     0},
	    {"100", "\"Reject\"",
	     "field 'behavior': must be \"reject\" or {\"warm_up\": {...}}; "
	     "got 'Reject'",
	     0},
	    {"100", "\"warm_up\"",
	     "field 'behavior': warm_up needs its parameters: "
	     "{\"warm_up\": {\"period_s\": 10}}",
	     0},
	    {"100", "1",
	     "field 'behavior': must be \"reject\" or an object "
	     "{\"warm_up\": {...}}, got number",
	     0},
	    {"100", "[\"reject\"]",
	     "field 'behavior': must be \"reject\" or an object "
	     "{\"warm_up\": {...}}, got array",
	     0},
	    {"100", "{}",
	     "field 'behavior.warm_up': required in a behavior object (or "
	     "write \"behavior\": \"reject\")",
	     0},
	    {"100", "{\"warm_up\": true}",
	     "field 'behavior.warm_up': must be an object, got boolean", 0},
	    {"100", "{\"warm_up\": {}}",
	     "field 'behavior.warm_up.period_s': required (seconds to ramp "
	     "up to count)",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": 0}}",
	     "field 'behavior.warm_up.period_s': must be between 1 and 3600, "
	     "got 0",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": 3601}}",
	     "field 'behavior.warm_up.period_s': must be between 1 and 3600, "
	     "got 3601",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": 2.5}}",
	     "field 'behavior.warm_up.period_s': must be an integer, got 2.5",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": \"10\"}}",
	     "field 'behavior.warm_up.period_s': must be an integer number, "
	     "got string",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": 10, \"cold_factor\": 1}}",
	     "field 'behavior.warm_up.cold_factor': must be between 2 and "
	     "100, got 1",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": 10, \"cold_factor\": 101}}",
	     "field 'behavior.warm_up.cold_factor': must be between 2 and "
	     "100, got 101",
	     0},
	    {"2", "{\"warm_up\": {\"period_s\": 10}}",
	     "field 'behavior.warm_up.cold_factor': 3 is larger than count 2: "
	     "the ramp would start at a threshold of 0; lower cold_factor or "
	     "raise count",
	     0},
	    /* ... and the misspelt key's real one is then missing */
	    {"100", "{\"warmup\": {\"period_s\": 10}}",
	     "field 'behavior': unknown field 'warmup' (did you mean "
	     "'warm_up'?)",
	     1},
	    {"100", "{\"warm_up\": {\"period\": 10}}",
	     "field 'behavior.warm_up': unknown field 'period' (did you mean "
	     "'period_s'?)",
	     1},
	    {"100", "{\"warm_up\": {\"period_s\": 10, \"coldFactor\": 3}}",
	     "field 'behavior.warm_up': unknown field 'coldFactor'", 0},
	    {"100", "{\"warm_up\": {\"period_s\": 10, \"cold_factr\": 3}}",
	     "field 'behavior.warm_up': unknown field 'cold_factr' (did you "
	     "mean 'cold_factor'?)",
	     0},
	    {"100", "{\"warm_up\": {\"period_s\": 10}, \"reject\": true}",
	     "field 'behavior': unknown field 'reject'", 0},
	};
	char members[512];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME "," MATCH "," GRADE
			      ", \"count\": %s, \"behavior\": %s",
			 cases[i].count, cases[i].behavior);
		snprintf(want, sizeof(want), "rule 'web': %s", cases[i].msg);
		expect_err_in(one(members), want);
		assert_int_equal(err_lines(), 1 + cases[i].also);
	}
	/* Both warm_up parameters wrong: both reported, nothing else. */
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT
			       ", \"behavior\": {\"warm_up\": {\"period_s\": "
			       "-1, \"cold_factor\": 0}}"),
		      "rule 'web': field 'behavior.warm_up.period_s': must be "
		      "between 1 and 3600, got -1");
	assert_non_null(strstr(err, "rule 'web': field "
				    "'behavior.warm_up.cold_factor': must be "
				    "between 2 and 100, got 0"));
	assert_int_equal(err_lines(), 2);
}

/*
 * The canonical form built as a cJSON tree, for cJSON to print: an
 * independent writer of what rules_json.c writes as text, so the two are
 * checked against each other. Integers are raw items, as cJSON prints
 * integers below 10^15.
 */
static void add_num(cJSON *o, const char *k, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	assert_non_null(cJSON_AddRawToObject(o, k, buf));
}

static void add_str(cJSON *o, const char *k, const char *v)
{
	assert_non_null(cJSON_AddStringToObject(o, k, v));
}

static cJSON *add_obj(cJSON *o, const char *k)
{
	cJSON *c = cJSON_AddObjectToObject(o, k);

	assert_non_null(c);
	return c;
}

static cJSON *tree_rule(const struct sl_rule *r)
{
	cJSON *o = cJSON_CreateObject(), *m, *w;
	char buf[INET6_ADDRSTRLEN + 8];

	assert_non_null(o);
	add_str(o, "name", r->name);
	m = add_obj(o, "match");
	add_str(m, "proto", sl_proto_str(r->proto));
	if (r->dport_lo && r->dport_lo == r->dport_hi) {
		add_num(m, "dport", r->dport_lo);
	} else if (r->dport_lo) {
		snprintf(buf, sizeof(buf), "%u-%u", r->dport_lo, r->dport_hi);
		add_str(m, "dport", buf);
	}
	if (r->dst.family) {
		sl_prefix_str(&r->dst, buf, sizeof(buf));
		add_str(m, "dst", buf);
	}
	if (r->src.family) {
		sl_prefix_str(&r->src, buf, sizeof(buf));
		add_str(m, "src", buf);
	}
	if (r->has_vlan && r->vlan)
		add_num(m, "vlan", r->vlan);
	else if (r->has_vlan)
		add_str(m, "vlan", "untagged");
	if (r->action != SL_ACTION_LIMIT)
		add_str(o, "action", sl_action_str(r->action));
	else
		add_str(o, "grade", sl_grade_str(r->grade));
	if (r->action == SL_ACTION_LIMIT)
		add_num(o, "count", r->count);
	w = add_obj(o, "window");
	add_num(w, "interval_ms", r->interval_ms);
	add_num(w, "sample_count", r->sample_count);
	if (r->per_source) {
		cJSON *ps = add_obj(o, "per_source");

		add_num(ps, "prefix_v4", r->src_prefix_v4);
		add_num(ps, "prefix_v6", r->src_prefix_v6);
		add_num(ps, "max_sources", r->max_sources);
	}
	add_str(o, "mode", sl_mode_str(r->mode));
	if (r->layer)
		add_num(o, "layer", r->layer);
	if (r->has_priority)
		add_num(o, "priority", r->priority);
	if (r->warm_up) {
		w = add_obj(add_obj(o, "behavior"), "warm_up");
		add_num(w, "period_s", r->warm_period_s);
		add_num(w, "cold_factor", r->cold_factor);
	} else if (r->action == SL_ACTION_LIMIT) {
		add_str(o, "behavior", "reject");
	}
	if (r->cluster.enabled) {
		const struct sl_cluster *c = &r->cluster;
		cJSON *cl = add_obj(o, "cluster");

		add_str(cl, "namespace", c->ns);
		add_num(cl, "flow_id", c->flow_id);
		add_str(cl, "threshold_type", sl_threshold_str(c->threshold));
		if (c->threshold == SL_THRESH_MANUAL) {
			cJSON *q = add_obj(cl, "quotas");

			for (uint32_t i = 0; i < c->n_quotas; i++)
				add_num(q, c->quotas[i].node,
					c->quotas[i].count);
		}
		if (c->fallback == SL_FB_FIXED)
			add_num(add_obj(cl, "fallback"), "fixed",
				c->fallback_fixed);
		else
			add_str(cl, "fallback", sl_fallback_str(c->fallback));
	}
	if (r->breaker.enabled) {
		const struct sl_breaker *b = &r->breaker;
		cJSON *br = add_obj(o, "breaker");

		add_str(br, "strategy", sl_strategy_names[b->strategy]);
		if (b->strategy != SL_BRK_ERROR_COUNT)
			assert_non_null(cJSON_AddNumberToObject(
			    br, "threshold",
			    (double)b->threshold / SL_BRK_RATIO_ONE));
		else
			add_num(br, "threshold", b->threshold);
		if (b->strategy == SL_BRK_SLOW_RATIO)
			add_num(br, "max_rt_ms", b->max_rt_ms);
		add_num(br, "open_ms", b->open_ms);
		add_num(br, "min_request_amount", b->min_requests);
		add_num(br, "stat_interval_ms", b->stat_interval_ms);
		add_num(br, "probes", b->probes);
		add_str(br, "open_action", sl_open_action_names[b->open_action]);
	}
	if (r->conns) {
		cJSON *cn = add_obj(o, "conns");

		add_num(cn, "idle_timeout_s", r->conn_idle_s);
		add_str(cn, "refuse", sl_open_action_names[r->conn_refuse]);
	}
	if (r->system.enabled) {
		const struct sl_system *y = &r->system;
		cJSON *sy = add_obj(o, "system");

		if (y->accept_queue)
			add_num(sy, "accept_queue", y->accept_queue);
		if (y->cpu_pressure)
			assert_non_null(cJSON_AddNumberToObject(
			    sy, "cpu_pressure", (double)y->cpu_pressure / 1e6));
		if (y->softirq)
			assert_non_null(cJSON_AddNumberToObject(
			    sy, "softirq", (double)y->softirq / 1e6));
		if (y->load)
			assert_non_null(cJSON_AddNumberToObject(
			    sy, "load", (double)y->load / 1e3));
		add_num(sy, "floor", y->floor);
	}
	return o;
}

/* FNV-1a 64, written here from its definition (offset basis, prime). */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

/* The canonical text of one rule, one line. */
static char *rule_text(const struct sl_rule *r)
{
	cJSON *o = tree_rule(r);
	char *s;

	assert_non_null(o);
	s = cJSON_PrintUnformatted(o);
	assert_non_null(s);
	cJSON_Delete(o);
	return s;
}

static void test_rule_to_json_canonical(void **state)
{
	struct sl_ruleset set;
	char *s;

	(void) state;
	expect_ok("{\"rules\": ["
		  " {\"count\": 1e3, \"grade\": \"pps\", \"name\": \"min\","
		  "  \"match\": {}},"
		  " {\"name\": \"full\", \"priority\": 7, \"mode\": \"shadow\","
		  "  \"match\": {\"src\": \"10.1.0.0/16\", \"dport\": "
		  "\"8000-8080\", \"dst\": \"198.18.0.0/15\", "
		  "\"proto\": \"tcp\"},"
		  "  \"grade\": \"bps\", \"count\": 100000000000,"
		  "  \"window\": {\"sample_count\": 4, \"interval_ms\": 2000},"
		  "  \"per_source\": {\"max_sources\": 9},"
		  "  \"behavior\": {\"warm_up\": {\"period_s\": 30}}},"
		  " {\"name\": \"one-port\", \"match\": {\"proto\": \"udp\", "
		  "\"dport\": \"53\", \"dst\": \"2001:db8::/32\"}, "
		  "\"grade\": \"pps\", \"count\": 5, \"behavior\": "
		  "\"reject\"}]}",
		  &set);
	s = rule_text(&set.rules[0]);
	assert_string_equal(
	    s, "{\"name\":\"min\",\"match\":{\"proto\":\"any\"},"
	       "\"grade\":\"pps\",\"count\":1000,"
	       "\"window\":{\"interval_ms\":1000,\"sample_count\":2},"
	       "\"mode\":\"enforce\",\"behavior\":\"reject\"}");
	cJSON_free(s);
	s = rule_text(&set.rules[1]);
	assert_string_equal(
	    s, "{\"name\":\"full\",\"match\":{\"proto\":\"tcp\","
	       "\"dport\":\"8000-8080\",\"dst\":\"198.18.0.0/15\","
	       "\"src\":\"10.1.0.0/16\"},\"grade\":\"bps\","
	       "\"count\":100000000000,"
	       "\"window\":{\"interval_ms\":2000,\"sample_count\":4},"
	       "\"per_source\":{\"prefix_v4\":32,\"prefix_v6\":64,"
	       "\"max_sources\":9},\"mode\":\"shadow\",\"priority\":7,"
	       "\"behavior\":{\"warm_up\":{\"period_s\":30,"
	       "\"cold_factor\":3}}}");
	cJSON_free(s);
	/* "53" as a string becomes the integer 53: one port. */
	s = rule_text(&set.rules[2]);
	assert_string_equal(
	    s, "{\"name\":\"one-port\",\"match\":{\"proto\":\"udp\","
	       "\"dport\":53,\"dst\":\"2001:db8::/32\"},\"grade\":\"pps\","
	       "\"count\":5,"
	       "\"window\":{\"interval_ms\":1000,\"sample_count\":2},"
	       "\"mode\":\"enforce\",\"behavior\":\"reject\"}");
	cJSON_free(s);

	s = sl_ruleset_to_json(&set, false);
	assert_non_null(s);
	assert_int_equal(strncmp(s, "{\"rules\":[{\"name\":\"min\",", 24), 0);
	assert_non_null(strstr(s, "},{\"name\":\"full\","));
	assert_int_equal(s[strlen(s) - 1], '}');
	assert_null(strchr(s, '\n'));
	free(s);
	s = sl_ruleset_to_json(&set, true);
	assert_non_null(s);
	assert_non_null(strstr(s, "\n"));
	assert_non_null(strstr(s, "\"name\":\t\"full\""));
	free(s);
	sl_ruleset_free(&set);

	/* An empty set is {"rules":[]}. */
	memset(&set, 0, sizeof(set));
	s = sl_ruleset_to_json(&set, false);
	assert_string_equal(s, "{\"rules\":[]}");
	free(s);
}

/*
 * The canonical text is printed without a tree: it must be what cJSON
 * prints for the tree of the same rule (snapshot checksums depend on it,
 * and the text hashes that agents before the rule identity pinned).
 */
static void assert_text_as_cjson(const struct sl_ruleset *a)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(doc, "rules");
	char *want, *got;

	for (size_t i = 0; i < a->n; i++) {
		struct sl_rule r = a->rules[i];
		uint64_t h;
		cJSON *o;

		assert_true(cJSON_AddItemToArray(arr,
						 tree_rule(&a->rules[i])));
		/* the text hash (old pins' identity) leaves priority and
		 * layer out */
		r.has_priority = false;
		r.layer = 0;
		o = tree_rule(&r);
		want = cJSON_PrintUnformatted(o);
		h = fnv1a(want);
		assert_int_equal(sl_rule_text_hash(&a->rules[i]), h ? h : 1);
		/* a slot an earlier agent pinned holds it */
		assert_true(sl_rule_pinned_as(&a->rules[i], 2, h ? h : 1));
		assert_false(sl_rule_pinned_as(&a->rules[i], 2, 3));
		cJSON_free(want);
		cJSON_Delete(o);
	}
	want = cJSON_PrintUnformatted(doc);
	got = sl_ruleset_to_json(a, false);
	assert_string_equal(got, want);
	cJSON_free(want);
	free(got);
	want = cJSON_Print(doc);
	got = sl_ruleset_to_json(a, true);
	assert_string_equal(got, want);
	cJSON_free(want);
	free(got);
	cJSON_Delete(doc);
}

/* The same rule: every field, and the quotas by content. */
static bool same_rule(const struct sl_rule *a, const struct sl_rule *b)
{
	struct sl_rule x = *a, y = *b;
	size_t nq = a->cluster.n_quotas * sizeof(*a->cluster.quotas);

	x.cluster.quotas = y.cluster.quotas = NULL;
	return !memcmp(&x, &y, sizeof(x)) &&
	       (!nq || (a->cluster.quotas && b->cluster.quotas &&
			!memcmp(a->cluster.quotas, b->cluster.quotas, nq)));
}

/* parse -> to_json -> parse must give the same structs, pretty or not. */
static void assert_round_trip(const struct sl_ruleset *a)
{
	int pretty;

	assert_text_as_cjson(a);

	for (pretty = 0; pretty < 2; pretty++) {
		char *text = sl_ruleset_to_json(a, pretty), *again;
		struct sl_ruleset b;
		size_t i;

		assert_non_null(text);
		expect_ok(text, &b);
		assert_int_equal(b.n, a->n);
		for (i = 0; i < a->n; i++) {
			if (!same_rule(&a->rules[i], &b.rules[i]))
				fail_msg("rule %zu '%s' differs after a round "
					 "trip through\n%s",
					 i, a->rules[i].name, text);
		}
		/* And the text is a fixed point. */
		again = sl_ruleset_to_json(&b, pretty);
		assert_string_equal(again, text);
		free(again);
		free(text);
		sl_ruleset_free(&b);
	}
}

/* Valid rules covering every field and form, made from the index. */
static char *varied_rules(unsigned int n)
{
	static const char *const matches[] = {
	    "{}",
	    "{\"proto\": \"tcp\"}",
	    "{\"proto\": \"tcp\", \"dport\": 443}",
	    "{\"proto\": \"udp\", \"dport\": \"1-65535\"}",
	    "{\"proto\": \"tcp\", \"dport\": \"8000-8099\", \"dst\": "
	    "\"198.18.0.0/15\", \"src\": \"10.0.0.0/8\"}",
	    "{\"proto\": \"udp\", \"dport\": 53, \"dst\": \"2001:db8::/32\", "
	    "\"vlan\": 4094}",
	    "{\"proto\": \"icmp\", \"dst\": \"192.0.2.1\", \"vlan\": 1}",
	    "{\"proto\": \"icmpv6\", \"src\": \"::/0\"}",
	    "{\"proto\": \"any\", \"dst\": \"0.0.0.0/0\"}",
	    "{\"src\": \"2001:db8:1:2:3:4:5:6\", \"vlan\": \"untagged\"}",
	    "{\"proto\": \"tcp\", \"dst\": \"fe80::/10\", \"dport\": "
	    "\"22\"}",
	};
	static const char *const windows[] = {
	    "",
	    ", \"window\": {}",
	    ", \"window\": {\"interval_ms\": 60000, \"sample_count\": 8}",
	    ", \"window\": {\"interval_ms\": 10, \"sample_count\": 2}",
	    ", \"window\": {\"sample_count\": 1}",
	};
	static const char *const per_sources[] = {
	    "",
	    ", \"per_source\": {\"max_sources\": 1}",
	    ", \"per_source\": {\"prefix_v4\": 24, \"prefix_v6\": 128, "
	    "\"max_sources\": 262143}",
	};
	static const char *const behaviors[] = {
	    "",
	    ", \"behavior\": \"reject\"",
	    ", \"behavior\": {\"warm_up\": {\"period_s\": 10}}",
	    ", \"behavior\": {\"warm_up\": {\"period_s\": 3600, "
	    "\"cold_factor\": 100}}",
	};
	size_t cap = 128 + (size_t) n * 600, used;
	char *s = malloc(cap);
	unsigned int i;

	assert_non_null(s);
	used = snprintf(s, cap, "{\"rules\": [");
	for (i = 0; i < n; i++) {
		unsigned int m = i % 11, w = (i / 11) % 5, p = (i / 55) % 3;
		unsigned int b = (i / 3) % 4;
		/* cps needs tcp: matches 1, 2, 4 and 10 are tcp */
		bool tcp = m == 1 || m == 2 || m == 4 || m == 10;
		const char *grade = tcp && i % 2 ? "cps"
				    : i % 3	 ? "pps"
						 : "bps";
		unsigned long long count =
		    i % 7 == 0 ? 100000000000ULL : 100 + (unsigned long long) i;

		used += snprintf(
		    s + used, cap - used,
		    "%s{\"name\": \"r-%u.x_%u\", \"match\": %s, \"grade\": "
		    "\"%s\", \"count\": %llu%s%s%s%s%s}",
		    i ? ",\n" : "", i, m, matches[m], grade, count, windows[w],
		    per_sources[p], behaviors[b],
		    i % 4 == 1	 ? ", \"mode\": \"shadow\""
		    : i % 4 == 2 ? ", \"mode\": \"enforce\""
				 : "",
		    i % 5 == 0	 ? ", \"priority\": 1"
		    : i % 5 == 1 ? ", \"priority\": 65535"
				 : "");
		assert_true(used < cap);
	}
	snprintf(s + used, cap - used, "]}");
	return s;
}

static void test_round_trip(void **state)
{
	struct sl_ruleset set;
	glob_t g;
	char *s;
	size_t i;

	(void) state;
	shipped_examples(&g);
	for (i = 0; i <= g.gl_pathc; i++) {
		memset(&set, 0, sizeof(set));
		load_shipped(i < g.gl_pathc ? g.gl_pathv[i] : "rules/demo.json",
			     &set);
		assert_round_trip(&set);
		sl_ruleset_free(&set);
	}
	globfree(&g);
	/* 660: the 165 match x window x per_source combinations, 4 times */
	s = varied_rules(660);
	expect_ok(s, &set);
	assert_int_equal(set.n, 660);
	/* the generator covers what it claims to */
	assert_int_equal(set.rules[1].grade, SL_GRADE_CPS);
	assert_int_equal(set.rules[2].grade, SL_GRADE_PPS);
	assert_int_equal(set.rules[3].grade, SL_GRADE_BPS);
	assert_true(set.rules[6].warm_up);
	assert_int_equal(set.rules[6].cold_factor, 3);
	assert_true(set.rules[9].warm_up);
	assert_int_equal(set.rules[9].cold_factor, 100);
	assert_true(set.rules[55].per_source);
	assert_int_equal(set.rules[110].src_prefix_v6, 128);
	assert_round_trip(&set);
	sl_ruleset_free(&set);
	free(s);
	s = many_rules(SL_MAX_RULES);
	expect_ok(s, &set);
	assert_round_trip(&set);
	/* names the parser refuses still print as cJSON prints them */
	snprintf(set.rules[0].name, sizeof(set.rules[0].name),
		 "q\"b\\s/\b\f\n\r\t\x01\x1f\xc3\xa9");
	assert_text_as_cjson(&set);
	sl_ruleset_free(&set);
	free(s);
}

#define CLUSTER_OK "\"namespace\": \"web\", \"flow_id\": 7, " \
		   "\"threshold_type\": \"global\""

static void test_cluster(void **state)
{
	struct sl_ruleset set;
	const struct sl_cluster *c;
	char *s;

	(void) state;
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"cluster\": {" CLUSTER_OK "}"),
		  &set);
	c = &set.rules[0].cluster;
	assert_true(c->enabled);
	assert_string_equal(c->ns, "web");
	assert_int_equal(c->flow_id, 7);
	assert_int_equal(c->threshold, SL_THRESH_GLOBAL);
	assert_int_equal(c->fallback, SL_FB_SHARE);
	assert_int_equal(c->n_quotas, 0);
	sl_ruleset_free(&set);

	/* manual quotas come back sorted by node; fixed fallback */
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"cluster\": {\"fallback\": {\"fixed\": 9}, "
			   "\"namespace\": \"web\", \"flow_id\": 4294967295, "
			   "\"threshold_type\": \"manual\", \"quotas\": "
			   "{\"node-b\": 60, \"Node-A.x:1\": 40}}"),
		  &set);
	c = &set.rules[0].cluster;
	assert_int_equal(c->flow_id, 4294967295u);
	assert_int_equal(c->threshold, SL_THRESH_MANUAL);
	assert_int_equal(c->fallback, SL_FB_FIXED);
	assert_int_equal(c->fallback_fixed, 9);
	assert_int_equal(c->n_quotas, 2);
	assert_string_equal(c->quotas[0].node, "Node-A.x:1");
	assert_int_equal(c->quotas[0].count, 40);
	assert_string_equal(c->quotas[1].node, "node-b");
	s = rule_text(&set.rules[0]);
	assert_non_null(strstr(
	    s, ",\"behavior\":\"reject\",\"cluster\":{\"namespace\":\"web\","
	       "\"flow_id\":4294967295,\"threshold_type\":\"manual\","
	       "\"quotas\":{\"Node-A.x:1\":40,\"node-b\":60},"
	       "\"fallback\":{\"fixed\":9}}}"));
	cJSON_free(s);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	/* every string fallback */
	static const char *const fb[] = {"share", "last_lease", "full",
					 "block", "pass"};
	for (size_t i = 0; i < sizeof(fb) / sizeof(fb[0]); i++) {
		char m[512];

		snprintf(m, sizeof(m),
			 NAME "," MATCH "," GRADE "," COUNT
			      ", \"cluster\": {" CLUSTER_OK
			      ", \"fallback\": \"%s\"}",
			 fb[i]);
		expect_ok(one(m), &set);
		assert_int_equal(set.rules[0].cluster.fallback, i);
		assert_string_equal(sl_fallback_str(i), fb[i]);
		assert_round_trip(&set);
		sl_ruleset_free(&set);
	}
}

static void test_cluster_def_hash(void **state)
{
	struct sl_ruleset set;
	struct sl_rule r;
	uint64_t h;

	(void) state;
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"cluster\": {" CLUSTER_OK "}"),
		  &set);
	h = sl_rule_def_hash(&set.rules[0]);
	r = set.rules[0];
	r.cluster.enabled = false;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.cluster.flow_id = 8;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	strcpy(r.cluster.ns, "api");
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.cluster.threshold = SL_THRESH_AVG_LOCAL;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.cluster.fallback = SL_FB_BLOCK;
	assert_true(sl_rule_def_hash(&r) != h);
	sl_ruleset_free(&set);
}

static void test_cluster_errors(void **state)
{
	static const struct {
		const char *cl;
		const char *msg;
	} cases[] = {
	    {"true", "field 'cluster': must be an object, got boolean"},
	    {"{\"flow_id\": 1, \"threshold_type\": \"global\"}",
	     "field 'cluster.namespace': required"},
	    {"{\"namespace\": 5, \"flow_id\": 1, \"threshold_type\": "
	     "\"global\"}",
	     "field 'cluster.namespace': must be a string, got number"},
	    {"{\"namespace\": \"Web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"global\"}",
	     "field 'cluster.namespace': 'Web' must be 1-63 characters"},
	    {"{\"namespace\": \"web\", \"threshold_type\": \"global\"}",
	     "field 'cluster.flow_id': required"},
	    {"{\"namespace\": \"web\", \"flow_id\": 0, \"threshold_type\": "
	     "\"global\"}",
	     "field 'cluster.flow_id': must be between 1 and 4294967295, "
	     "got 0"},
	    {"{\"namespace\": \"web\", \"flow_id\": 4294967296, "
	     "\"threshold_type\": \"global\"}",
	     "field 'cluster.flow_id': must be between 1 and 4294967295"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1.5, \"threshold_type\": "
	     "\"global\"}",
	     "field 'cluster.flow_id': must be an integer, got 1.5"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1}",
	     "field 'cluster.threshold_type': required"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"GLOBAL\"}",
	     "field 'cluster.threshold_type': must be one of global, "
	     "avg_local, manual; got 'GLOBAL'"},
	    {"{" CLUSTER_OK ", \"flowid\": 3}",
	     "field 'cluster': unknown field 'flowid' (did you mean "
	     "'flow_id'?)"},
	    {"{" CLUSTER_OK ", \"flow_id\": 3}",
	     "field 'cluster': field 'flow_id' given more than once"},
	    {"{" CLUSTER_OK ", \"quotas\": {\"a\": 1}}",
	     "field 'cluster.quotas': only with threshold_type manual (this "
	     "rule is global)"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\"}",
	     "field 'cluster.quotas': required with threshold_type manual"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\", \"quotas\": []}",
	     "field 'cluster.quotas': must be an object, got array"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\", \"quotas\": {}}",
	     "field 'cluster.quotas': must name 1 to 32 nodes, got 0"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\", \"quotas\": {\"a b\": 1}}",
	     "field 'cluster.quotas': node id 'a b' must be 1-63 characters"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\", \"quotas\": {\"a\": 1, \"a\": 2}}",
	     "field 'cluster.quotas': node 'a' given more than once"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\", \"quotas\": {\"a\": \"5\"}}",
	     "field 'cluster.quotas.a': must be an integer number, got "
	     "string"},
	    {"{\"namespace\": \"web\", \"flow_id\": 1, \"threshold_type\": "
	     "\"manual\", \"quotas\": {\"a\": 60, \"b\": 41}}",
	     "field 'cluster.quotas': sum to 101, more than count 100"},
	    {"{" CLUSTER_OK ", \"fallback\": \"local\"}",
	     "field 'cluster.fallback': must be one of share, last_lease, "
	     "full, block, pass; got 'local'"},
	    {"{" CLUSTER_OK ", \"fallback\": \"fixed\"}",
	     "field 'cluster.fallback': must be one of share"},
	    {"{" CLUSTER_OK ", \"fallback\": 5}",
	     "field 'cluster.fallback': must be a string or {\"fixed\": N}, "
	     "got number"},
	    {"{" CLUSTER_OK ", \"fallback\": {}}",
	     "field 'cluster.fallback.fixed': required in a fallback object"},
	    {"{" CLUSTER_OK ", \"fallback\": {\"fixed\": 0}}",
	     "field 'cluster.fallback.fixed': must be between 1 and "
	     "100000000000, got 0"},
	    {"{" CLUSTER_OK ", \"fallback\": {\"fixed\": 5, \"fixd\": 1}}",
	     "field 'cluster.fallback': unknown field 'fixd' (did you mean "
	     "'fixed'?)"},
	};
	char members[1024];
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];

		snprintf(members, sizeof(members),
			 NAME "," MATCH "," GRADE "," COUNT ", \"cluster\": %s",
			 cases[i].cl);
		snprintf(want, sizeof(want), "rule 'web': %s", cases[i].msg);
		expect_err_in(one(members), want);
	}
	/* a cluster grant is one budget: not with per_source */
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT
			       ", \"per_source\": {\"max_sources\": 5}, "
			       "\"cluster\": {" CLUSTER_OK "}"),
		      "rule 'web': field 'cluster': cannot be combined with "
		      "per_source");
	/* unknown top-level key near "cluster" */
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT
			       ", \"clustr\": {}"),
		      "rule 'web': unknown field 'clustr' (did you mean "
		      "'cluster'?)");
}

static void test_def_hash(void **state)
{
	struct sl_ruleset set;
	struct sl_rule r;
	uint64_t h;

	(void) state;
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"priority\": 5, \"behavior\": {\"warm_up\": "
			   "{\"period_s\": 10}}"),
		  &set);
	h = sl_rule_def_hash(&set.rules[0]);
	assert_true(h != 0);
	assert_true(h == sl_rule_def_hash(&set.rules[0]));

	/* Priority, layer and file position only steer classification. */
	r = set.rules[0];
	r.priority = 9;
	assert_true(sl_rule_def_hash(&r) == h);
	r.layer = 2;
	assert_true(sl_rule_def_hash(&r) == h);
	r.layer = 0;
	r.has_priority = false;
	r.priority = 0;
	assert_true(sl_rule_def_hash(&r) == h);
	r.file_index = 12;
	assert_true(sl_rule_def_hash(&r) == h);

	/* Everything else is the definition. */
	r = set.rules[0];
	r.count = 101;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	strcpy(r.name, "web2");
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.mode = SL_MODE_SHADOW;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.cold_factor = 4;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.warm_up = false;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.dport_hi = 81;
	assert_true(sl_rule_def_hash(&r) != h);
	r = set.rules[0];
	r.interval_ms = 2000;
	assert_true(sl_rule_def_hash(&r) != h);
	sl_ruleset_free(&set);

	/* The same rule parsed from different text hashes the same. */
	expect_ok(one("\"count\": 1e2, \"behavior\": {\"warm_up\": "
		      "{\"cold_factor\": 3, \"period_s\": 10.0}}, "
		      "\"grade\": \"pps\", \"match\": {\"dport\": \"80\", "
		      "\"proto\": \"tcp\"}, \"window\": {}, " NAME),
		  &set);
	assert_true(sl_rule_def_hash(&set.rules[0]) == h);
	sl_ruleset_free(&set);
}

static void test_from_cjson(void **state)
{
	cJSON *doc = cJSON_Parse(
	    "{\"rules\": [{\"name\": \"x\", \"match\": {}, \"grade\": \"pps\", "
	    "\"count\": 7}]}");
	struct sl_ruleset set = {0};
	char *before, *after;

	(void) state;
	assert_non_null(doc);
	before = cJSON_PrintUnformatted(doc);
	assert_int_equal(sl_rules_from_cjson(doc, &set, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(set.n, 1);
	assert_string_equal(set.rules[0].name, "x");
	assert_int_equal(set.rules[0].count, 7);
	sl_ruleset_free(&set);
	/* the caller's document is left as it was */
	after = cJSON_PrintUnformatted(doc);
	assert_string_equal(before, after);
	cJSON_free(before);
	cJSON_free(after);
	cJSON_Delete(doc);

	doc = cJSON_Parse("{\"rules\": [{\"name\": \"x\", \"match\": {}, "
			  "\"grade\": \"pps\", \"count\": 0}], \"rulez\": 1}");
	assert_non_null(doc);
	assert_int_equal(sl_rules_from_cjson(doc, &set, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "document: unknown field 'rulez' (did you "
				    "mean 'rules'?)"));
	assert_non_null(strstr(err, "rule 'x': field 'count': must be between "
				    "1 and 100000000000, got 0"));
	assert_int_equal(err_lines(), 2);
	assert_null(set.rules);
	cJSON_Delete(doc);
	assert_int_equal(sl_rules_from_cjson(NULL, &set, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "document: missing");
}

#define BRK_OK "\"strategy\": \"error_ratio\", \"threshold\": 0.5, \"open_ms\": 2000"
#define UDP53 "\"match\": {\"proto\": \"udp\", \"dport\": 53}"

static void test_breaker(void **state)
{
	struct sl_ruleset set;
	const struct sl_breaker *b;
	char *s;

	(void) state;
	/* Sentinel's defaults: min_request_amount 5, stat 1 s, 1 probe */
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"breaker\": {" BRK_OK "}"),
		  &set);
	b = &set.rules[0].breaker;
	assert_true(b->enabled);
	assert_int_equal(b->strategy, SL_BRK_ERROR_RATIO);
	assert_int_equal(b->threshold, 500000);
	assert_int_equal(b->open_ms, 2000);
	assert_int_equal(b->min_requests, 5);
	assert_int_equal(b->stat_interval_ms, 1000);
	assert_int_equal(b->probes, 1);
	assert_int_equal(b->open_action, SL_OPEN_RST);
	s = rule_text(&set.rules[0]);
	assert_non_null(strstr(
	    s, ",\"behavior\":\"reject\",\"breaker\":{\"strategy\":"
	       "\"error_ratio\",\"threshold\":0.5,\"open_ms\":2000,"
	       "\"min_request_amount\":5,\"stat_interval_ms\":1000,"
	       "\"probes\":1,\"open_action\":\"rst\"}}"));
	cJSON_free(s);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"breaker\": {\"strategy\": \"error_count\", "
			   "\"threshold\": 10, \"open_ms\": 1, "
			   "\"min_request_amount\": 1, \"stat_interval_ms\": "
			   "60000, \"probes\": 1000, \"open_action\": "
			   "\"drop\"}"),
		  &set);
	b = &set.rules[0].breaker;
	assert_int_equal(b->strategy, SL_BRK_ERROR_COUNT);
	assert_int_equal(b->threshold, 10);
	assert_int_equal(b->probes, 1000);
	assert_int_equal(b->open_action, SL_OPEN_DROP);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	/* ratios that print in several forms; 1 is allowed */
	static const char *const ratios[] = {"1", "0.000001", "0.333333",
					     "0.99"};
	for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
		char m[512];

		snprintf(m, sizeof(m),
			 NAME "," MATCH "," GRADE "," COUNT
			      ", \"breaker\": {\"strategy\": \"error_ratio\", "
			      "\"threshold\": %s, \"open_ms\": 5}",
			 ratios[i]);
		expect_ok(one(m), &set);
		assert_round_trip(&set);
		sl_ruleset_free(&set);
	}

	/* slow_request_ratio: a ratio, and max_rt_ms after it */
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"breaker\": {\"strategy\": "
			   "\"slow_request_ratio\", \"threshold\": 0.25, "
			   "\"max_rt_ms\": 200, \"open_ms\": 5000}"),
		  &set);
	b = &set.rules[0].breaker;
	assert_int_equal(b->strategy, SL_BRK_SLOW_RATIO);
	assert_int_equal(b->threshold, 250000);
	assert_int_equal(b->max_rt_ms, 200);
	s = rule_text(&set.rules[0]);
	assert_non_null(strstr(
	    s, ",\"breaker\":{\"strategy\":\"slow_request_ratio\","
	       "\"threshold\":0.25,\"max_rt_ms\":200,\"open_ms\":5000,"
	       "\"min_request_amount\":5,"));
	cJSON_free(s);
	assert_round_trip(&set);
	sl_ruleset_free(&set);
	expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
			   ", \"breaker\": {\"strategy\": "
			   "\"slow_request_ratio\", \"threshold\": 1, "
			   "\"max_rt_ms\": 60000, \"open_ms\": 1}"),
		  &set);
	assert_int_equal(set.rules[0].breaker.max_rt_ms, 60000);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	/* udp: datagrams have no RST, so open_action defaults to drop */
	expect_ok(one(NAME ", " UDP53 "," GRADE "," COUNT
			   ", \"breaker\": {" BRK_OK "}"),
		  &set);
	b = &set.rules[0].breaker;
	assert_true(b->enabled);
	assert_int_equal(b->open_action, SL_OPEN_DROP);
	s = rule_text(&set.rules[0]);
	assert_non_null(strstr(s, ",\"probes\":1,\"open_action\":\"drop\"}}"));
	cJSON_free(s);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	/* a breaker is part of the definition: a change is a new rule */
	{
		struct sl_ruleset a, c;

		expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
				   ", \"breaker\": {" BRK_OK "}"),
			  &a);
		expect_ok(one(NAME "," MATCH "," GRADE "," COUNT
				   ", \"breaker\": {" BRK_OK ", \"probes\": 2}"),
			  &c);
		assert_int_not_equal(sl_rule_def_hash(&a.rules[0]),
				     sl_rule_def_hash(&c.rules[0]));
		sl_ruleset_free(&a);
		sl_ruleset_free(&c);
	}
}

static void test_breaker_errors(void **state)
{
	static const struct {
		const char *match;
		const char *br;
		const char *msg;
	} cases[] = {
	    {MATCH, "true", "field 'breaker': must be an object, got boolean"},
	    {MATCH, "{\"threshold\": 1, \"open_ms\": 1}",
	     "field 'breaker.strategy': required (error_ratio, error_count "
	     "or slow_request_ratio)"},
	    {MATCH, "{\"strategy\": \"slow\", \"threshold\": 1, "
	     "\"open_ms\": 1}",
	     "field 'breaker.strategy': must be one of error_ratio, "
	     "error_count, slow_request_ratio; got 'slow'"},
	    {MATCH, "{\"strategy\": \"error_ratio\", \"open_ms\": 1}",
	     "field 'breaker.threshold': required"},
	    {MATCH, "{\"strategy\": \"error_ratio\", \"threshold\": 1.5, "
	     "\"open_ms\": 1}",
	     "field 'breaker.threshold': an error ratio must be above 0 and "
	     "at most 1, got 1.5"},
	    {MATCH, "{\"strategy\": \"error_ratio\", \"threshold\": 0, "
	     "\"open_ms\": 1}",
	     "field 'breaker.threshold': an error ratio must be above 0"},
	    {MATCH, "{\"strategy\": \"error_ratio\", \"threshold\": \"0.5\", "
	     "\"open_ms\": 1}",
	     "field 'breaker.threshold': must be a number, got string"},
	    {MATCH, "{\"strategy\": \"error_count\", \"threshold\": 0.5, "
	     "\"open_ms\": 1}",
	     "field 'breaker.threshold': must be an integer, got 0.5"},
	    {MATCH, "{\"strategy\": \"error_count\", \"threshold\": 0, "
	     "\"open_ms\": 1}",
	     "field 'breaker.threshold': must be between 1 and 1000000000"},
	    {MATCH, "{\"strategy\": \"error_count\", \"threshold\": 1}",
	     "field 'breaker.open_ms': required"},
	    {MATCH, "{" BRK_OK ", \"open_ms\": 0}",
	     "field 'breaker': field 'open_ms' given more than once"},
	    {MATCH, "{\"strategy\": \"error_count\", \"threshold\": 1, "
	     "\"open_ms\": 3600001}",
	     "field 'breaker.open_ms': must be between 1 and 3600000"},
	    {MATCH, "{" BRK_OK ", \"min_request_amount\": 0}",
	     "field 'breaker.min_request_amount': must be between 1 and"},
	    {MATCH, "{" BRK_OK ", \"stat_interval_ms\": 5}",
	     "field 'breaker.stat_interval_ms': must be between 10 and 60000"},
	    {MATCH, "{" BRK_OK ", \"probes\": 0}",
	     "field 'breaker.probes': must be between 1 and 1000, got 0"},
	    {MATCH, "{" BRK_OK ", \"open_action\": \"reset\"}",
	     "field 'breaker.open_action': must be one of rst, drop; got "
	     "'reset'"},
	    {MATCH, "{" BRK_OK ", \"max_rt\": 5}",
	     "field 'breaker': unknown field 'max_rt'"},
	    {MATCH, "{" BRK_OK ", \"max_rtms\": 5}",
	     "field 'breaker': unknown field 'max_rtms' (did you mean "
	     "'max_rt_ms'?)"},
	    {UDP53, "{" BRK_OK ", \"open_action\": \"rst\"}",
	     "rule 'web': field 'breaker.open_action': 'rst' answers TCP "
	     "SYNs; a udp rule's breaker drops datagrams while open "
	     "(\"drop\", the default for udp)"},
	    {"\"match\": {}", "{" BRK_OK "}",
	     "rule 'web': field 'breaker': watches the answers to TCP SYNs "
	     "or UDP datagrams and needs match.proto \"tcp\" or \"udp\" "
	     "(proto is 'any')"},
	    {"\"match\": {\"proto\": \"icmp\"}", "{" BRK_OK "}",
	     "(proto is 'icmp')"},
	    {MATCH, "{\"strategy\": \"slow_request_ratio\", \"threshold\": "
	     "0.5, \"open_ms\": 1}",
	     "rule 'web': field 'breaker.max_rt_ms': required with "
	     "slow_request_ratio (the response time in ms above which a "
	     "response is slow)"},
	    {MATCH, "{" BRK_OK ", \"max_rt_ms\": 100}",
	     "rule 'web': field 'breaker.max_rt_ms': only with strategy "
	     "slow_request_ratio (strategy is 'error_ratio')"},
	    {MATCH, "{\"strategy\": \"error_count\", \"threshold\": 3, "
	     "\"open_ms\": 1, \"max_rt_ms\": 100}",
	     "field 'breaker.max_rt_ms': only with strategy "
	     "slow_request_ratio (strategy is 'error_count')"},
	    {MATCH, "{\"strategy\": \"slow_request_ratio\", \"threshold\": "
	     "0.5, \"open_ms\": 1, \"max_rt_ms\": 0}",
	     "field 'breaker.max_rt_ms': must be between 1 and 60000, got 0"},
	    {MATCH, "{\"strategy\": \"slow_request_ratio\", \"threshold\": "
	     "0.5, \"open_ms\": 1, \"max_rt_ms\": 2.5}",
	     "field 'breaker.max_rt_ms': must be an integer, got 2.5"},
	    {MATCH, "{\"strategy\": \"slow_request_ratio\", \"threshold\": "
	     "3, \"open_ms\": 1, \"max_rt_ms\": 10}",
	     "field 'breaker.threshold': a slow ratio must be above 0 and at "
	     "most 1, got 3"},
	    {UDP53, "{\"strategy\": \"slow_request_ratio\", \"threshold\": "
	     "0.5, \"open_ms\": 1, \"max_rt_ms\": 10}",
	     "rule 'web': field 'breaker.strategy': slow_request_ratio times "
	     "TCP responses and needs match.proto \"tcp\" (proto is 'udp')"},
	};

	(void) state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char m[1024];

		snprintf(m, sizeof(m),
			 NAME ", %s," GRADE "," COUNT ", \"breaker\": %s",
			 cases[i].match, cases[i].br);
		expect_err_in(one(m), cases[i].msg);
	}
}

#define CPS "\"grade\": \"cps\", \"count\": 5000"

static void test_system(void **state)
{
	struct sl_ruleset set;
	const struct sl_system *y;
	char *s;

	(void) state;
	/* floor defaults to count / 100 */
	expect_ok(one(NAME "," MATCH "," CPS
			   ", \"system\": {\"accept_queue\": 64}"),
		  &set);
	y = &set.rules[0].system;
	assert_true(y->enabled);
	assert_int_equal(y->accept_queue, 64);
	assert_int_equal(y->cpu_pressure, 0);
	assert_int_equal(y->floor, 50);
	s = rule_text(&set.rules[0]);
	assert_non_null(strstr(s, ",\"behavior\":\"reject\",\"system\":{"
				  "\"accept_queue\":64,\"floor\":50}}"));
	cJSON_free(s);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	expect_ok(one(NAME "," MATCH "," CPS
			   ", \"system\": {\"cpu_pressure\": 0.4, "
			   "\"softirq\": 0.25, \"load\": 1.5, \"floor\": 7}"),
		  &set);
	y = &set.rules[0].system;
	assert_int_equal(y->cpu_pressure, 400000);
	assert_int_equal(y->softirq, 250000);
	assert_int_equal(y->load, 1500);
	assert_int_equal(y->floor, 7);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	/* the CPU signals on packets of any protocol; a count of 1 */
	expect_ok(one(NAME ", \"match\": {}, \"grade\": \"pps\", "
			   "\"count\": 1, \"system\": {\"load\": 1000}"),
		  &set);
	assert_int_equal(set.rules[0].system.floor, 1);
	assert_int_equal(set.rules[0].system.load, 1000000);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	/* part of the definition */
	{
		struct sl_ruleset a, c;

		expect_ok(one(NAME "," MATCH "," CPS
				   ", \"system\": {\"accept_queue\": 64}"),
			  &a);
		expect_ok(one(NAME "," MATCH "," CPS
				   ", \"system\": {\"accept_queue\": 32}"),
			  &c);
		assert_int_not_equal(sl_rule_def_hash(&a.rules[0]),
				     sl_rule_def_hash(&c.rules[0]));
		sl_ruleset_free(&a);
		sl_ruleset_free(&c);
	}
}

#define CONNS "\"grade\": \"conns\", \"count\": 50"

/* grade conns: its section's defaults, its forms, what it refuses */
static void test_conns(void **state)
{
	static const struct {
		const char *extra;
		const char *msg;
	} bad[] = {
	    {", \"conns\": {\"idle_timeout_s\": 0}",
	     "field 'conns.idle_timeout_s': must be between 1 and 604800, "
	     "got 0"},
	    {", \"conns\": {\"refuse\": \"reset\"}",
	     "field 'conns.refuse': must be one of rst, drop; got 'reset'"},
	    {", \"conns\": {\"idle\": 5}",
	     "field 'conns': unknown field 'idle'"},
	    {", \"behavior\": {\"warm_up\": {\"period_s\": 10}}",
	     "field 'behavior.warm_up': cannot be combined with grade "
	     "\"conns\" (it counts connections open at once, not a rate)"},
	    {", \"cluster\": {" CLUSTER_OK "}",
	     "field 'cluster': cannot be combined with grade \"conns\""},
	    {", \"breaker\": {\"strategy\": \"error_count\", "
	     "\"threshold\": 5, \"open_ms\": 100}",
	     "field 'breaker': cannot be combined with grade \"conns\""},
	    {", \"system\": {\"load\": 2}",
	     "field 'system': cannot be combined with grade \"conns\""},
	};
	struct sl_ruleset set;
	char m[1024];

	(void) state;
	expect_ok(one(NAME "," MATCH "," CONNS), &set);
	assert_int_equal(set.rules[0].grade, SL_GRADE_CONNS);
	assert_false(set.rules[0].conns);
	assert_int_equal(set.rules[0].conn_idle_s, 300);
	assert_int_equal(set.rules[0].conn_refuse, SL_OPEN_RST);
	assert_round_trip(&set);
	sl_ruleset_free(&set);
	expect_ok(one(NAME "," MATCH "," CONNS ", \"per_source\": "
		      "{\"max_sources\": 10}, \"conns\": {\"idle_timeout_s\": "
		      "30, \"refuse\": \"drop\"}, \"mode\": \"shadow\", "
		      "\"layer\": 1, \"window\": {\"interval_ms\": 500}"),
		  &set);
	assert_true(set.rules[0].conns);
	assert_int_equal(set.rules[0].conn_idle_s, 30);
	assert_int_equal(set.rules[0].conn_refuse, SL_OPEN_DROP);
	assert_true(set.rules[0].per_source);
	assert_round_trip(&set);
	sl_ruleset_free(&set);

	expect_err_in(one(NAME ", \"match\": {\"proto\": \"udp\"}," CONNS),
		      "rule 'web': field 'grade': conns counts TCP connections "
		      "and needs match.proto \"tcp\" (proto is 'udp')");
	expect_err_in(one(NAME "," MATCH "," GRADE "," COUNT
			  ", \"conns\": {\"idle_timeout_s\": 30}"),
		      "rule 'web': field 'conns': only with grade \"conns\" "
		      "(this rule's grade is \"pps\")");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(m, sizeof(m), NAME "," MATCH "," CONNS "%s",
			 bad[i].extra);
		expect_err_in(one(m), bad[i].msg);
	}
	/* an allow rule has no grade: nothing to refuse */
	expect_ok(one(NAME "," MATCH ", \"action\": \"allow\""), &set);
	sl_ruleset_free(&set);
}

static void test_system_errors(void **state)
{
	static const struct {
		const char *rest; /* match, grade, count, ... */
		const char *sys;
		const char *msg;
	} cases[] = {
	    {MATCH "," CPS, "[]",
	     "field 'system': must be an object, got array"},
	    {MATCH "," CPS, "{}",
	     "field 'system': needs a signal: accept_queue, cpu_pressure, "
	     "softirq or load"},
	    {MATCH "," CPS, "{\"floor\": 5}",
	     "field 'system': needs a signal"},
	    {MATCH "," CPS, "{\"accept_queue\": 1}",
	     "field 'system.accept_queue': must be between 2 and 1000000, "
	     "got 1"},
	    {MATCH "," CPS, "{\"accept_queue\": 8.5}",
	     "field 'system.accept_queue': must be an integer, got 8.5"},
	    {MATCH "," CPS, "{\"cpu_pressure\": 0}",
	     "field 'system.cpu_pressure': a share of time must be above 0 "
	     "and at most 1, got 0"},
	    {MATCH "," CPS, "{\"softirq\": 1.2}",
	     "field 'system.softirq': a share of time must be above 0 and "
	     "at most 1, got 1.2"},
	    {MATCH "," CPS, "{\"load\": -1}",
	     "field 'system.load': a load average per CPU must be above 0 "
	     "and at most 1000, got -1"},
	    {MATCH "," CPS, "{\"load\": \"high\"}",
	     "field 'system.load': must be a number, got string"},
	    {MATCH "," CPS, "{\"load\": 2, \"floor\": 0}",
	     "field 'system.floor': must be between 1 and"},
	    {MATCH "," CPS, "{\"load\": 2, \"floor\": 5001}",
	     "field 'system.floor': 5001 is above count 5000 (the threshold "
	     "moves between floor and count)"},
	    {MATCH "," CPS, "{\"load\": 2, \"queue\": 5}",
	     "field 'system': unknown field 'queue'"},
	    {MATCH "," GRADE "," COUNT, "{\"accept_queue\": 64}",
	     "field 'system.accept_queue': watches the listeners the rule's "
	     "SYNs go to and needs match.proto \"tcp\" and grade \"cps\""},
	    {"\"match\": {\"proto\": \"tcp\"}," CPS,
	     "{\"accept_queue\": 64}",
	     "field 'system.accept_queue': needs match.dport (the listeners' "
	     "ports)"},
	    {MATCH "," CPS ", \"cluster\": {\"namespace\": \"a\", "
	     "\"flow_id\": 1}", "{\"load\": 2}",
	     "field 'system': cannot be combined with cluster"},
	    {MATCH "," CPS ", \"per_source\": {}", "{\"load\": 2}",
	     "field 'system': cannot be combined with per_source"},
	    {MATCH "," CPS ", \"behavior\": {\"warm_up\": {\"period_s\": "
	     "10}}", "{\"load\": 2}",
	     "field 'system': cannot be combined with behavior.warm_up"},
	};

	(void) state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char m[1024];

		snprintf(m, sizeof(m), NAME ", %s, \"system\": %s",
			 cases[i].rest, cases[i].sys);
		expect_err_in(one(m), cases[i].msg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_document),
	    cmocka_unit_test(test_protos_and_count_forms),
	    cmocka_unit_test(test_empty_rules_valid),
	    cmocka_unit_test(test_json_syntax_error),
	    cmocka_unit_test(test_json_too_deep),
	    cmocka_unit_test(test_nul_byte_rejected),
	    cmocka_unit_test(test_document_shape),
	    cmocka_unit_test(test_rule_count_limit),
	    cmocka_unit_test(test_duplicate_names),
	    cmocka_unit_test(test_duplicate_names_many),
	    cmocka_unit_test(test_name_errors),
	    cmocka_unit_test(test_match_errors),
	    cmocka_unit_test(test_dport_errors),
	    cmocka_unit_test(test_prefix_errors),
	    cmocka_unit_test(test_grade_errors),
	    cmocka_unit_test(test_count_errors),
	    cmocka_unit_test(test_window_errors),
	    cmocka_unit_test(test_per_source_errors),
	    cmocka_unit_test(test_cluster),
	    cmocka_unit_test(test_cluster_def_hash),
	    cmocka_unit_test(test_cluster_errors),
	    cmocka_unit_test(test_mode_priority_errors),
	    cmocka_unit_test(test_unknown_keys),
	    cmocka_unit_test(test_multiple_errors_collected),
	    cmocka_unit_test(test_error_cap),
	    cmocka_unit_test(test_err_truncated_and_out_untouched),
	    cmocka_unit_test(test_prefix_contains),
	    cmocka_unit_test(test_prefix_str),
	    cmocka_unit_test(test_enum_strings),
	    cmocka_unit_test(test_load_file),
	    cmocka_unit_test(test_shipped_demo),
	    cmocka_unit_test(test_shipped_examples),
	    cmocka_unit_test(test_vlan),
	    cmocka_unit_test(test_actions),
	    cmocka_unit_test(test_behavior),
	    cmocka_unit_test(test_behavior_errors),
	    cmocka_unit_test(test_rule_to_json_canonical),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_def_hash),
	    cmocka_unit_test(test_from_cjson),
	    cmocka_unit_test(test_breaker),
	    cmocka_unit_test(test_breaker_errors),
	    cmocka_unit_test(test_system),
	    cmocka_unit_test(test_system_errors),
	    cmocka_unit_test(test_conns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
