/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the persisted rule set (user/snapshot.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "rules_json.h"
#include "rules_parse.h"
#include "snapshot.h"

#define ERR_LEN 65536

static char err[ERR_LEN];
static char base[] = "/tmp/sl-snapshot-XXXXXX";
static unsigned int n_dirs;

/* Rule sets A, B and C: three versions an operator might apply. */
static const char rules_a[] =
    "{\"rules\": ["
    "{\"name\": \"demo-udp-9000\", \"match\": {\"proto\": \"udp\", "
    "\"dport\": 9000}, \"grade\": \"pps\", \"count\": 20000},"
    "{\"name\": \"demo-syn-80\", \"match\": {\"proto\": \"tcp\", "
    "\"dport\": 80}, \"grade\": \"cps\", \"count\": 1000, "
    "\"behavior\": {\"warm_up\": {\"period_s\": 30, \"cold_factor\": 4}}}"
    "]}";
static const char rules_b[] =
    "{\"rules\": ["
    "{\"name\": \"api\", \"match\": {\"proto\": \"tcp\", \"dport\": "
    "\"8000-8099\", \"dst\": \"198.18.0.0/15\", \"src\": \"10.0.0.0/8\"}, "
    "\"grade\": \"bps\", \"count\": 125000000, \"window\": "
    "{\"interval_ms\": 2000, \"sample_count\": 4}, \"per_source\": "
    "{\"prefix_v6\": 48, \"max_sources\": 1000}, \"mode\": \"shadow\", "
    "\"priority\": 7},"
    "{\"name\": \"icmp6\", \"match\": {\"proto\": \"icmpv6\", "
    "\"dst\": \"2001:db8::/32\"}, \"grade\": \"pps\", \"count\": 100000000000}"
    "]}";
static const char rules_c[] =
    "{\"rules\": [{\"name\": \"all\", \"match\": {}, \"grade\": \"pps\", "
    "\"count\": 1}]}";

static void ruleset(const char *json, struct sl_ruleset *rs)
{
	memset(rs, 0, sizeof(*rs));
	if (sl_rules_parse(json, strlen(json), rs, err, sizeof(err)))
		fail_msg("test rules do not parse: %s", err);
}

static void assert_rules_equal(const struct sl_ruleset *a,
			       const struct sl_ruleset *b)
{
	size_t i;

	assert_int_equal(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		if (memcmp(&a->rules[i], &b->rules[i], sizeof(a->rules[i])))
			fail_msg("rule %zu ('%s' vs '%s') differs", i,
				 a->rules[i].name, b->rules[i].name);
	}
}

/* A fresh directory path (not created) under the test's temp dir. */
static void fresh_dir(char *out, size_t len)
{
	snprintf(out, len, "%s/d%u", base, n_dirs++);
}

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

static char *slurp(const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc(n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), (size_t) n);
	buf[n] = '\0';
	fclose(f);
	if (lenp)
		*lenp = n;
	return buf;
}

static void spit(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t) len);
	assert_int_equal(close(fd), 0);
}

/* Replace the first occurrence of from with to in the file at path. */
static void edit(const char *path, const char *from, const char *to)
{
	size_t len, fl = strlen(from), tl = strlen(to);
	char *buf = slurp(path, &len), *at = strstr(buf, from), *out;

	if (!at)
		fail_msg("'%s' not in %s:\n%s", from, path, buf);
	out = malloc(len - fl + tl + 1);
	assert_non_null(out);
	memcpy(out, buf, at - buf);
	memcpy(out + (at - buf), to, tl);
	memcpy(out + (at - buf) + tl, at + fl, len - (at - buf) - fl);
	spit(path, out, len - fl + tl);
	free(out);
	free(buf);
}

/* Rewrite the snapshot at path through cJSON: fn edits the document. */
static void edit_doc(const char *path, void (*fn)(cJSON *doc))
{
	char *buf = slurp(path, NULL), *text;
	cJSON *doc = cJSON_Parse(buf);

	assert_non_null(doc);
	fn(doc);
	text = cJSON_Print(doc);
	assert_non_null(text);
	spit(path, text, strlen(text));
	cJSON_free(text);
	cJSON_Delete(doc);
	free(buf);
}

static int write_at_end(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t) strlen(s) ? 0 : -1;
}

static int expect_read(const char *path, int want, const char *needle)
{
	struct sl_snapshot snap = {0};
	int ret = sl_snapshot_read(path, &snap, err, sizeof(err));

	if (ret != want || (needle && !strstr(err, needle)))
		fail_msg("%s: ret %d, want %d with error containing\n  %s\n"
			 "got:\n  %s",
			 path, ret, want, needle ? needle : "(anything)", err);
	if (ret == 0)
		sl_snapshot_free(&snap);
	else
		assert_null(snap.rules.rules);
	return ret;
}

/* Write rs as version into dir, which must succeed. */
static void write_ok(const char *dir, const char *json, uint64_t version)
{
	struct sl_ruleset rs;

	ruleset(json, &rs);
	if (sl_snapshot_write(dir, &rs, version, false, NULL, err,
			      sizeof(err)))
		fail_msg("write %s v%llu: %s", dir,
			 (unsigned long long) version, err);
	assert_string_equal(err, "");
	sl_ruleset_free(&rs);
}

/* The file at path reads back as version with the rules of json. */
static void assert_snapshot(const char *path, uint64_t version,
			    const char *json)
{
	struct sl_snapshot snap = {0};
	struct sl_ruleset want;
	int ret = sl_snapshot_read(path, &snap, err, sizeof(err));

	if (ret)
		fail_msg("%s: %d: %s", path, ret, err);
	assert_int_equal(snap.version, version);
	ruleset(json, &want);
	assert_rules_equal(&snap.rules, &want);
	sl_ruleset_free(&want);
	sl_snapshot_free(&snap);
}

static void sha256_hex(const char *s, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;

	assert_int_equal(EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL),
			 1);
	assert_int_equal(n, 32);
	for (i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
}

static void test_write_read_round_trip(void **state)
{
	char dir[256], path[300], want_sum[80], hex[65], *text, *canon;
	char *pretty;
	struct sl_snapshot snap = {0};
	struct sl_ruleset rs;
	time_t now = time(NULL);
	cJSON *doc, *arr;
	struct tm tm;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	ruleset(rules_b, &rs);
	assert_int_equal(
	    sl_snapshot_write(dir, &rs, 1, false, NULL, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	path_in(path, sizeof(path), dir, "rules.json");
	assert_int_equal(sl_snapshot_read(path, &snap, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(snap.version, 1);
	assert_true(snap.updated_at >= now - 5 && snap.updated_at <= now + 5);
	assert_rules_equal(&snap.rules, &rs);
	assert_int_equal(snap.rules.n, 2);
	assert_string_equal(snap.rules.rules[0].name, "api");
	assert_int_equal(snap.rules.rules[0].count, 125000000);
	assert_int_equal(snap.rules.rules[0].src_prefix_v6, 48);
	assert_int_equal(snap.rules.rules[1].count, 100000000000ULL);
	sl_snapshot_free(&snap);
	assert_null(snap.rules.rules);
	assert_int_equal(snap.version, 0);

	/* The documented format: fields, time stamp and checksum. */
	text = slurp(path, NULL);
	assert_int_equal(text[strlen(text) - 1], '\n');
	doc = cJSON_Parse(text);
	assert_non_null(doc);
	assert_int_equal(
	    cJSON_GetObjectItem(doc, "sluice_snapshot")->valuedouble, 1);
	assert_int_equal(cJSON_GetObjectItem(doc, "version")->valuedouble, 1);
	memset(&tm, 0, sizeof(tm));
	assert_non_null(
	    strptime(cJSON_GetObjectItem(doc, "updated_at")->valuestring,
		     "%Y-%m-%dT%H:%M:%SZ", &tm));
	assert_true(timegm(&tm) >= now - 5 && timegm(&tm) <= now + 5);
	assert_int_equal(
	    strlen(cJSON_GetObjectItem(doc, "updated_at")->valuestring), 20);
	/* SHA-256 of exactly sl_ruleset_to_json's "rules" array, one line */
	canon = sl_ruleset_to_json(&rs, false);
	assert_non_null(canon);
	assert_int_equal(strncmp(canon, "{\"rules\":", 9), 0);
	canon[strlen(canon) - 1] = '\0';
	sha256_hex(canon + 9, hex);
	snprintf(want_sum, sizeof(want_sum), "sha256:%s", hex);
	assert_string_equal(cJSON_GetObjectItem(doc, "checksum")->valuestring,
			    want_sum);
	arr = cJSON_GetObjectItem(doc, "rules");
	assert_int_equal(cJSON_GetArraySize(arr), 2);
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "name")
		->valuestring,
	    "icmp6");
	/* laid out as cJSON_Print() lays it out, one newline after */
	pretty = cJSON_Print(doc);
	assert_non_null(pretty);
	assert_int_equal(strncmp(text, pretty, strlen(pretty)), 0);
	assert_string_equal(text + strlen(pretty), "\n");
	cJSON_free(pretty);
	/* no .prev for the first snapshot, no tmp left behind */
	path_in(path, sizeof(path), dir, "rules.json.prev");
	assert_int_equal(access(path, F_OK), -1);
	path_in(path, sizeof(path), dir, "rules.json.tmp");
	assert_int_equal(access(path, F_OK), -1);
	cJSON_Delete(doc);
	free(canon);
	free(text);
	sl_ruleset_free(&rs);
}

static void test_empty_rule_set(void **state)
{
	char dir[256], path[300];
	struct sl_snapshot snap = {0};
	struct sl_ruleset rs = {0};

	(void) state;
	/* Valid to store; the agent refuses to go ready on it (brief 4). */
	fresh_dir(dir, sizeof(dir));
	assert_int_equal(
	    sl_snapshot_write(dir, &rs, 3, false, NULL, err, sizeof(err)), 0);
	path_in(path, sizeof(path), dir, "rules.json");
	assert_int_equal(sl_snapshot_read(path, &snap, err, sizeof(err)), 0);
	assert_int_equal(snap.version, 3);
	assert_int_equal(snap.rules.n, 0);
	sl_snapshot_free(&snap);
}

static void test_versions_and_prev(void **state)
{
	char dir[256], cur[300], prev[300];
	struct stat a, b;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(prev, sizeof(prev), dir, "rules.json.prev");
	write_ok(dir, rules_a, 1);
	assert_snapshot(cur, 1, rules_a);
	expect_read(prev, -ENOENT,
		    "rules.json.prev: cannot open: No such "
		    "file or directory");

	write_ok(dir, rules_b, 2);
	assert_snapshot(cur, 2, rules_b);
	assert_snapshot(prev, 1, rules_a);

	write_ok(dir, rules_c, 3);
	assert_snapshot(cur, 3, rules_c);
	assert_snapshot(prev, 2, rules_b);
	/* two files, not two names of one */
	assert_int_equal(stat(cur, &a), 0);
	assert_int_equal(stat(prev, &b), 0);
	assert_true(a.st_ino != b.st_ino);
	assert_int_equal(a.st_nlink, 1);
	assert_int_equal(b.st_nlink, 1);
}

static void test_rollback(void **state)
{
	char dir[256], cur[300], prev[300];

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(prev, sizeof(prev), dir, "rules.json.prev");
	write_ok(dir, rules_a, 4);
	write_ok(dir, rules_b, 5);
	assert_int_equal(sl_snapshot_rollback(dir, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_snapshot(cur, 4, rules_a);
	assert_int_equal(access(prev, F_OK), -1);

	/* Only one step back. */
	assert_int_equal(sl_snapshot_rollback(dir, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "rules.json.prev: no previous snapshot to "
				    "roll back to"));
	assert_snapshot(cur, 4, rules_a);

	/* A corrupt .prev is refused and nothing changes. */
	write_ok(dir, rules_c, 5);
	edit(prev, "20000", "20001");
	assert_int_equal(sl_snapshot_rollback(dir, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "rules.json.prev: checksum mismatch"));
	assert_non_null(strstr(err, "; refusing to roll back to it"));
	assert_snapshot(cur, 5, rules_c);

	/* No directory at all. */
	fresh_dir(dir, sizeof(dir));
	assert_int_equal(sl_snapshot_rollback(dir, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, ": cannot open directory: No such file"));
	assert_int_equal(access(dir, F_OK), -1);
}

static void test_corrupt_empty(void **state)
{
	char dir[256], path[300];

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_a, 1);
	path_in(path, sizeof(path), dir, "rules.json");
	assert_int_equal(truncate(path, 0), 0);
	expect_read(path, -EINVAL, "");
	assert_true(strncmp(err, path, strlen(path)) == 0);
	assert_string_equal(err + strlen(path),
			    ": empty file (0 bytes); a write was cut short or "
			    "the file was truncated");
}

static void test_corrupt_truncated(void **state)
{
	char dir[256], path[300], *full;
	size_t len, off, cut;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_b, 1);
	path_in(path, sizeof(path), dir, "rules.json");
	full = slurp(path, &len);
	assert_true(len > 100);
	assert_memory_equal(full + len - 2, "}\n", 2);
	/* Every cut before the closing brace is corrupt, and named so. */
	for (off = 1; off <= len - 2; off++) {
		char want[128];

		spit(path, full, off);
		snprintf(want, sizeof(want),
			 ": not valid JSON: the document is cut off after %zu "
			 "bytes (parsing stopped at line ",
			 off);
		expect_read(path, -EINVAL, want);
		assert_true(strncmp(err, path, strlen(path)) == 0);
		assert_non_null(strstr(err, "); the file is truncated"));
	}
	/* A cut just after an inner '}' too. */
	cut = strstr(full, "\"window\"") - full;
	while (full[cut] != '}')
		cut--;
	spit(path, full, cut + 1);
	expect_read(path, -EINVAL, ": not valid JSON: the document is cut off");
	/* Cutting only the final newline leaves a good snapshot. */
	spit(path, full, len - 1);
	assert_snapshot(path, 1, rules_b);
	free(full);
}

static void test_corrupt_bad_json(void **state)
{
	char dir[256], path[300], *full;
	size_t len;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_a, 1);
	path_in(path, sizeof(path), dir, "rules.json");
	full = slurp(path, &len);

	edit(path, "\"version\":", "\"version\" ");
	/* "\t\"version\" \t1,": the 1 in column 13 is where a ':' belongs */
	expect_read(path, -EINVAL,
		    ": not valid JSON at line 3, column 13 (byte 37 of ");
	assert_non_null(strstr(err, "; the file is damaged"));

	spit(path, full, len);
	/* "\t\"rules\" :: ": the second ':' (column 11) is where it fails */
	edit(path, "\"rules\":", "\"rules\" :: ");
	expect_read(path, -EINVAL, ": not valid JSON at line 6, column 11 ");
	assert_non_null(strstr(err, "; the file is damaged"));

	/* The last line is "}": junk after it. */
	spit(path, full, len);
	assert_int_equal(write_at_end(path, "{}\n"), 0);
	expect_read(path, -EINVAL,
		    ": not valid JSON: unexpected data after the end of the "
		    "document at line ");
	assert_non_null(strstr(err, ", column 1 (byte "));

	spit(path, full, len);
	full[10] = '\0';
	spit(path, full, len);
	expect_read(path, -EINVAL, ": NUL byte at byte 10 of ");
	free(full);

	spit(path, "[1, 2]\n", 7);
	expect_read(path, -EINVAL,
		    ": not a sluice snapshot: the document is an array, not "
		    "an object");
	spit(path, "{\"rules\": []}\n", 14);
	expect_read(path, -EINVAL,
		    ": not a sluice snapshot: field \"sluice_snapshot\" is "
		    "missing");
}

/* First rule's name moved to the end, "53" style dport as a string. */
static void reorder_rule(cJSON *d)
{
	cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "rules"), 0);
	cJSON *name = cJSON_DetachItemFromObject(r, "name");
	cJSON *m = cJSON_GetObjectItem(r, "match");

	cJSON_AddItemToObject(r, "name", name);
	cJSON_ReplaceItemInObject(m, "dport", cJSON_CreateString("9000"));
}

static char *last_slurp;

/* The file's text, valid until the next call (freed at teardown). */
static const char *slurp_once(const char *path)
{
	free(last_slurp);
	last_slurp = slurp(path, NULL);
	return last_slurp;
}

static void test_corrupt_checksum(void **state)
{
	char dir[256], path[300], *text, sum[80];
	cJSON *doc;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_a, 1);
	path_in(path, sizeof(path), dir, "rules.json");
	text = slurp(path, NULL);
	doc = cJSON_Parse(text);
	snprintf(sum, sizeof(sum), "%s",
		 cJSON_GetObjectItem(doc, "checksum")->valuestring);
	cJSON_Delete(doc);

	/* A hand edit that keeps the rules valid is caught by the hash. */
	edit(path, "\"count\":\t20000", "\"count\":\t20001");
	expect_read(path, -EINVAL, ": checksum mismatch: file says ");
	assert_non_null(strstr(err, sum));
	assert_non_null(strstr(err, ", rules hash to sha256:"));
	assert_non_null(strstr(err, "; the file was edited or damaged"));
	assert_null(strstr(strstr(err, "rules hash to"), sum));

	/* Re-laying out the text is not a change: the hash is over meaning. */
	spit(path, text, strlen(text));
	edit_doc(path, reorder_rule);
	assert_non_null(strstr(slurp_once(path), "\"dport\":\t\"9000\""));
	assert_snapshot(path, 1, rules_a);
	free(text);
}

static void drop_checksum(cJSON *d)
{
	cJSON_DeleteItemFromObject(d, "checksum");
}
static void drop_version(cJSON *d)
{
	cJSON_DeleteItemFromObject(d, "version");
}
static void drop_updated_at(cJSON *d)
{
	cJSON_DeleteItemFromObject(d, "updated_at");
}
static void drop_rules(cJSON *d)
{
	cJSON_DeleteItemFromObject(d, "rules");
}
static void version_string(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "version", cJSON_CreateString("1"));
}
static void version_zero(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "version", cJSON_CreateNumber(0));
}
static void version_fraction(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "version", cJSON_CreateNumber(1.5));
}
static void time_bad(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "updated_at",
				  cJSON_CreateString("2026-02-30T10:00:00Z"));
}
static void time_local(cJSON *d)
{
	cJSON_ReplaceItemInObject(
	    d, "updated_at", cJSON_CreateString("2026-11-29T18:00:00+01:00"));
}
static void checksum_upper(cJSON *d)
{
	cJSON *c = cJSON_GetObjectItem(d, "checksum");
	char *s;

	for (s = c->valuestring; *s; s++) {
		if (*s >= 'a' && *s <= 'f')
			*s -= 32;
	}
}
static void checksum_md5(cJSON *d)
{
	cJSON_ReplaceItemInObject(
	    d, "checksum",
	    cJSON_CreateString("md5:d41d8cd98f00b204e9800998ecf8427e"));
}
static void rules_object(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "rules", cJSON_CreateObject());
}
static void extra_field(cJSON *d)
{
	cJSON_AddStringToObject(d, "comment", "hand-edited");
}
static void format_string(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "sluice_snapshot",
				  cJSON_CreateString("1"));
}

static void test_corrupt_fields(void **state)
{
	static const struct {
		void (*fn)(cJSON *);
		const char *msg;
	} cases[] = {
	    {drop_checksum, ": field \"checksum\" is missing"},
	    {drop_version, ": field \"version\" is missing"},
	    {drop_updated_at, ": field \"updated_at\" is missing"},
	    {drop_rules, ": field \"rules\" is missing"},
	    {version_string, ": field \"version\" must be an integer from 1 "
			     "to 2^53-1, got a string"},
	    {version_zero, ": field \"version\" must be an integer from 1 to "
			   "2^53-1, got a number"},
	    {version_fraction, ": field \"version\" must be an integer"},
	    {time_bad, ": field \"updated_at\" must be a UTC time "
		       "\"YYYY-MM-DDTHH:MM:SSZ\", got a string "
		       "\"2026-02-30T10:00:00Z\""},
	    {time_local, ": field \"updated_at\" must be a UTC time"},
	    {checksum_upper, ": field \"checksum\" must be \"sha256:\" and 64 "
			     "lower-case hex digits, got a string"},
	    {checksum_md5, ": field \"checksum\" must be \"sha256:\""},
	    {rules_object, ": field \"rules\" must be an array, got an "
			   "object"},
	    {extra_field, ": unknown field \"comment\"; a snapshot has "
			  "sluice_snapshot, version, updated_at, checksum, "
			  "rules, allow_empty and source"},
	    {format_string, ": field \"sluice_snapshot\" must be a "
			    "non-negative integer, got a string"},
	};
	char dir[256], path[300], *good;
	size_t i, len;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_a, 1);
	path_in(path, sizeof(path), dir, "rules.json");
	good = slurp(path, &len);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		spit(path, good, len);
		edit_doc(path, cases[i].fn);
		expect_read(path, -EINVAL, cases[i].msg);
		assert_true(strncmp(err, path, strlen(path)) == 0);
	}
	/* Duplicate keys: cJSON keeps both, so we must refuse. */
	spit(path, good, len);
	edit(path, "\"version\":", "\"version\":\t9,\n\t\"version\":");
	expect_read(path, -EINVAL, ": field \"version\" given more than once");
	/* And the untouched file still reads. */
	spit(path, good, len);
	assert_snapshot(path, 1, rules_a);
	free(good);
}

static void format_2(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "sluice_snapshot", cJSON_CreateNumber(2));
	/* a newer format may change anything else too */
	cJSON_DeleteItemFromObject(d, "checksum");
}
static void format_0(cJSON *d)
{
	cJSON_ReplaceItemInObject(d, "sluice_snapshot", cJSON_CreateNumber(0));
}

static void test_unknown_format(void **state)
{
	char dir[256], path[300];

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_a, 1);
	path_in(path, sizeof(path), dir, "rules.json");
	edit_doc(path, format_2);
	expect_read(path, -EPROTONOSUPPORT,
		    ": snapshot format 2 is not supported; this sluice reads "
		    "format 1 (written by a newer sluice?)");
	write_ok(dir, rules_a, 2);
	edit_doc(path, format_0);
	expect_read(path, -EPROTONOSUPPORT,
		    ": snapshot format 0 is not supported; this sluice reads "
		    "format 1");
	assert_null(strstr(err, "newer"));
}

static void count_zero(cJSON *d)
{
	cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "rules"), 0);

	cJSON_ReplaceItemInObject(r, "count", cJSON_CreateNumber(0));
}
static void dup_name(cJSON *d)
{
	cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "rules"), 1);

	cJSON_ReplaceItemInObject(r, "name",
				  cJSON_CreateString("demo-udp-9000"));
}
static void typo_field(cJSON *d)
{
	cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "rules"), 1);
	cJSON *b = cJSON_DetachItemFromObject(r, "behavior");

	cJSON_AddItemToObject(r, "behaviour", b);
}

static void test_invalid_rule_inside(void **state)
{
	char dir[256], path[300];

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(path, sizeof(path), dir, "rules.json");
	write_ok(dir, rules_a, 1);
	edit_doc(path, count_zero);
	expect_read(path, -EINVAL,
		    ": invalid rules: rule 'demo-udp-9000': field 'count': "
		    "must be between 1 and 100000000000, got 0");
	write_ok(dir, rules_a, 2);
	edit_doc(path, dup_name);
	expect_read(path, -EINVAL,
		    ": invalid rules: rule 'demo-udp-9000': field 'name': "
		    "duplicate name: rules #1 and #2 are both named "
		    "'demo-udp-9000'");
	write_ok(dir, rules_a, 3);
	edit_doc(path, typo_field);
	expect_read(path, -EINVAL,
		    ": invalid rules: rule 'demo-syn-80': unknown field "
		    "'behaviour' (did you mean 'behavior'?)");
}

static void test_write_refuses(void **state)
{
	char dir[256], path[300];
	struct sl_ruleset rs;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(path, sizeof(path), dir, "rules.json");
	write_ok(dir, rules_a, 1);
	ruleset(rules_c, &rs);

	assert_int_equal(
	    sl_snapshot_write(dir, &rs, 0, false, NULL, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, ": snapshot version 0 is out of range 1 "
				    "to 2^53-1"));
	assert_int_equal(
	    sl_snapshot_write(dir, &rs, 1ULL << 53, false, NULL, err,
			      sizeof(err)),
	    -EINVAL);
	assert_non_null(
	    strstr(err, "version 9007199254740992 is out of range"));

	/* A rule set the parser would reject never reaches the disk. */
	rs.rules[0].count = 0;
	assert_int_equal(
	    sl_snapshot_write(dir, &rs, 2, false, NULL, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "rules.json: refusing to write invalid "
				    "rules: rule 'all': field 'count': must "
				    "be between 1 and 100000000000, got 0"));
	assert_snapshot(path, 1, rules_a);
	path_in(path, sizeof(path), dir, "rules.json.tmp");
	assert_int_equal(access(path, F_OK), -1);
	sl_ruleset_free(&rs);

	/* The directory's parent must exist. */
	snprintf(dir, sizeof(dir), "%s/no/such", base);
	ruleset(rules_c, &rs);
	assert_int_equal(
	    sl_snapshot_write(dir, &rs, 1, false, NULL, err, sizeof(err)),
	    -ENOENT);
	assert_non_null(strstr(err, "/no/such: cannot create directory: No "
				    "such file or directory"));
	sl_ruleset_free(&rs);
}

static void test_read_errors(void **state)
{
	char dir[256], path[300];

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(path, sizeof(path), dir, "rules.json");
	expect_read(path, -ENOENT,
		    "rules.json: cannot open: No such file or "
		    "directory");
	write_ok(dir, rules_a, 1);
	expect_read(dir, -EISDIR, ": cannot read: Is a directory");
}

static void test_load_boot_good(void **state)
{
	char dir[256];
	struct sl_snapshot snap = {0};
	struct sl_ruleset want;
	bool used_prev = true;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	write_ok(dir, rules_a, 1);
	write_ok(dir, rules_b, 2);
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)), 0);
	assert_false(used_prev);
	assert_string_equal(err, "");
	assert_int_equal(snap.version, 2);
	ruleset(rules_b, &want);
	assert_rules_equal(&snap.rules, &want);
	sl_ruleset_free(&want);
	sl_snapshot_free(&snap);
}

static void test_load_boot_falls_back(void **state)
{
	char dir[256], cur[300], prev[300], moved[300];
	struct sl_snapshot snap = {0};
	struct sl_ruleset want;
	bool used_prev = false;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(prev, sizeof(prev), dir, "rules.json.prev");
	write_ok(dir, rules_a, 1);
	write_ok(dir, rules_b, 2);
	edit(cur, "125000000", "125000001");
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)), 0);
	assert_true(used_prev);
	assert_int_equal(snap.version, 1);
	/* err says why rules.json was passed over, and what was used */
	assert_true(strncmp(err, cur, strlen(cur)) == 0);
	assert_non_null(strstr(err, "rules.json: checksum mismatch: file says "
				    "sha256:"));
	assert_non_null(strstr(err, "; booting from "));
	assert_non_null(strstr(err, "rules.json.prev instead (version 1, "
				    "written 20"));
	ruleset(rules_a, &want);
	assert_rules_equal(&snap.rules, &want);
	sl_snapshot_free(&snap);

	/* Missing current, good .prev: also a fallback. */
	snprintf(moved, sizeof(moved), "%s/elsewhere", dir);
	assert_int_equal(rename(cur, moved), 0);
	used_prev = false;
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)), 0);
	assert_true(used_prev);
	assert_int_equal(snap.version, 1);
	assert_rules_equal(&snap.rules, &want);
	assert_non_null(strstr(err, "rules.json: cannot open: No such file or "
				    "directory; booting from "));
	sl_snapshot_free(&snap);
	sl_ruleset_free(&want);

	/* used_prev may be NULL. */
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, NULL, err, sizeof(err)), 0);
	assert_int_equal(snap.version, 1);
	sl_snapshot_free(&snap);
}

static void test_load_boot_both_bad(void **state)
{
	char dir[256], cur[300], prev[300];
	struct sl_snapshot snap = {0};
	bool used_prev = true;
	const char *p;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(prev, sizeof(prev), dir, "rules.json.prev");
	write_ok(dir, rules_a, 1);
	write_ok(dir, rules_b, 2);
	assert_int_equal(truncate(cur, 50), 0);
	edit(prev, "\"checksum\"", "\"checksun\"");
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)),
	    -EINVAL);
	assert_false(used_prev);
	assert_null(snap.rules.rules);
	p = strstr(err, "no usable snapshot in ");
	assert_ptr_equal(p, err);
	p = strstr(err, cur);
	assert_non_null(p);
	assert_non_null(strstr(p, ": not valid JSON: the document is cut off "
				  "after 50 bytes"));
	p = strstr(err, "\nand the fallback: ");
	assert_non_null(p);
	assert_non_null(strstr(p, prev));
	assert_non_null(strstr(p, ": unknown field \"checksun\""));

	/* Current missing, .prev corrupt: the .prev's error. */
	assert_int_equal(unlink(cur), 0);
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "rules.json: cannot open: No such file"));
	assert_non_null(strstr(err, "rules.json.prev: unknown field"));

	/* Current corrupt, no .prev at all. */
	write_ok(dir, rules_c, 3);
	assert_int_equal(unlink(prev), 0);
	assert_int_equal(truncate(cur, 0), 0);
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "rules.json: empty file (0 bytes)"));
	assert_non_null(strstr(err, "; and there is no "));
	assert_non_null(strstr(err, "rules.json.prev to fall back to"));
}

static void test_load_boot_neither(void **state)
{
	char dir[256], want[400];
	struct sl_snapshot snap = {0};
	bool used_prev = true;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	/* No directory, then an empty one. */
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)),
	    -ENOENT);
	assert_false(used_prev);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)),
	    -ENOENT);
	snprintf(want, sizeof(want),
		 "%s: no snapshot: neither rules.json nor rules.json.prev "
		 "exists",
		 dir);
	assert_string_equal(err, want);
	assert_null(snap.rules.rules);
}

static void test_modes(void **state)
{
	static const mode_t masks[] = {022, 0, 077, 0277};
	char dir[256], path[300];
	struct stat st;
	mode_t old;
	size_t i;

	(void) state;
	for (i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		old = umask(masks[i]);
		fresh_dir(dir, sizeof(dir));
		write_ok(dir, rules_a, 1);
		write_ok(dir, rules_b, 2);
		umask(old);
		assert_int_equal(stat(dir, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0700);
		path_in(path, sizeof(path), dir, "rules.json");
		assert_int_equal(stat(path, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0600);
		path_in(path, sizeof(path), dir, "rules.json.prev");
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
	}
	/* An existing directory keeps the mode the operator gave it. */
	fresh_dir(dir, sizeof(dir));
	assert_int_equal(mkdir(dir, 0750), 0);
	assert_int_equal(chmod(dir, 0750), 0);
	write_ok(dir, rules_a, 1);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
}

static void test_leftover_tmp(void **state)
{
	char dir[256], cur[300], tmp[300], target[300];
	struct sl_snapshot snap = {0};
	bool used_prev = true;
	struct stat st;
	char *t;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(tmp, sizeof(tmp), dir, "rules.json.tmp");
	write_ok(dir, rules_a, 1);
	/* A crash mid-write left half a file, world-readable. */
	spit(tmp, "{\"sluice_snapshot\": 1, \"vers", 28);
	assert_int_equal(chmod(tmp, 0644), 0);
	assert_int_equal(
	    sl_snapshot_load_boot(dir, &snap, &used_prev, err, sizeof(err)), 0);
	assert_false(used_prev);
	assert_string_equal(err, "");
	assert_int_equal(snap.version, 1);
	sl_snapshot_free(&snap);

	write_ok(dir, rules_b, 2);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_snapshot(cur, 2, rules_b);
	assert_int_equal(stat(cur, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	/* A leftover symlink is replaced, never followed. */
	snprintf(target, sizeof(target), "%s/victim", dir);
	spit(target, "keep", 4);
	assert_int_equal(symlink(target, tmp), 0);
	write_ok(dir, rules_c, 3);
	assert_snapshot(cur, 3, rules_c);
	t = slurp(target, NULL);
	assert_string_equal(t, "keep");
	free(t);
	assert_int_equal(lstat(tmp, &st), -1);
}

static void test_write_keeps_good_prev(void **state)
{
	char dir[256], cur[300], prev[300];

	(void) state;
	/* Booted from .prev because rules.json was corrupt: the next write
	 * must not demote the corrupt file to .prev over the good one. */
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(prev, sizeof(prev), dir, "rules.json.prev");
	write_ok(dir, rules_a, 1);
	write_ok(dir, rules_b, 2);
	assert_int_equal(truncate(cur, 40), 0);
	write_ok(dir, rules_c, 3);
	assert_snapshot(cur, 3, rules_c);
	assert_snapshot(prev, 1, rules_a);
	assert_int_equal(sl_snapshot_rollback(dir, err, sizeof(err)), 0);
	assert_snapshot(cur, 1, rules_a);
}

static void write_marked(const char *dir, const char *json, uint64_t version,
			 struct sl_snapshot_mark *mark)
{
	struct sl_ruleset rs;

	ruleset(json, &rs);
	if (sl_snapshot_write(dir, &rs, version, false, mark, err, sizeof(err)))
		fail_msg("write %s v%llu: %s", dir,
			 (unsigned long long) version, err);
	assert_non_null(mark->text);
	sl_ruleset_free(&rs);
}

static void test_write_mark(void **state)
{
	struct sl_snapshot_mark mark = {0};
	char dir[256], cur[300], prev[300];
	struct sl_ruleset rs;

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	path_in(prev, sizeof(prev), dir, "rules.json.prev");
	write_marked(dir, rules_a, 1, &mark);
	write_marked(dir, rules_b, 2, &mark);
	assert_snapshot(cur, 2, rules_b);
	assert_snapshot(prev, 1, rules_a);

	/* Damaged after the marked write: verified again, not kept. */
	assert_int_equal(truncate(cur, 40), 0);
	write_marked(dir, rules_c, 3, &mark);
	assert_snapshot(cur, 3, rules_c);
	assert_snapshot(prev, 1, rules_a);

	/* Replaced by another writer with a good snapshot: kept. */
	write_ok(dir, rules_a, 4);
	write_marked(dir, rules_b, 5, &mark);
	assert_snapshot(cur, 5, rules_b);
	assert_snapshot(prev, 4, rules_a);

	/* A refused write leaves no mark. */
	ruleset(rules_c, &rs);
	rs.rules[0].count = 0;
	assert_int_equal(sl_snapshot_write(dir, &rs, 6, false, &mark, err,
					   sizeof(err)),
			 -EINVAL);
	assert_null(mark.text);
	sl_ruleset_free(&rs);
	assert_snapshot(cur, 5, rules_b);
	sl_snapshot_mark_free(&mark);
}

/* The etcd source and an explicit empty set survive the round trip; a
 * snapshot without them reads as having none; a bad source is refused. */
static void test_source_and_allow_empty(void **state)
{
	struct sl_snapshot_source src = { .etcd_key = "/sluice/rules",
					  .revision = 42 };
	struct sl_ruleset rs = {0};
	struct sl_snapshot got;
	char dir[256], cur[300];

	(void) state;
	fresh_dir(dir, sizeof(dir));
	path_in(cur, sizeof(cur), dir, "rules.json");
	ruleset(rules_a, &rs);
	assert_int_equal(sl_snapshot_write_source(dir, &rs, 1, true, &src,
						  NULL, err, sizeof(err)),
			 0);
	sl_ruleset_free(&rs);
	assert_int_equal(sl_snapshot_read(cur, &got, err, sizeof(err)), 0);
	assert_string_equal(got.source.etcd_key, "/sluice/rules");
	assert_int_equal(got.source.revision, 42);
	assert_false(got.rules.allow_empty);
	sl_snapshot_free(&got);

	ruleset("{\"rules\": [], \"allow_empty\": true}", &rs);
	assert_true(rs.allow_empty);
	assert_int_equal(sl_snapshot_write(dir, &rs, 2, true, NULL, err,
					   sizeof(err)),
			 0);
	assert_int_equal(sl_snapshot_read(cur, &got, err, sizeof(err)), 0);
	assert_true(got.rules.allow_empty);
	assert_int_equal(got.rules.n, 0);
	assert_null(got.source.etcd_key);
	sl_snapshot_free(&got);

	edit(cur, "\"allow_empty\":\ttrue",
	     "\"source\": {\"etcd_key\": \"k\"}");
	expect_read(cur, -EINVAL, ": field \"source\" must be");
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void) st;
	(void) flag;
	(void) ftw;
	return remove(path);
}

static int setup(void **state)
{
	(void) state;
	return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **state)
{
	(void) state;
	free(last_slurp);
	return nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_write_read_round_trip),
	    cmocka_unit_test(test_empty_rule_set),
	    cmocka_unit_test(test_versions_and_prev),
	    cmocka_unit_test(test_rollback),
	    cmocka_unit_test(test_corrupt_empty),
	    cmocka_unit_test(test_corrupt_truncated),
	    cmocka_unit_test(test_corrupt_bad_json),
	    cmocka_unit_test(test_corrupt_checksum),
	    cmocka_unit_test(test_corrupt_fields),
	    cmocka_unit_test(test_unknown_format),
	    cmocka_unit_test(test_invalid_rule_inside),
	    cmocka_unit_test(test_write_refuses),
	    cmocka_unit_test(test_read_errors),
	    cmocka_unit_test(test_load_boot_good),
	    cmocka_unit_test(test_load_boot_falls_back),
	    cmocka_unit_test(test_load_boot_both_bad),
	    cmocka_unit_test(test_load_boot_neither),
	    cmocka_unit_test(test_modes),
	    cmocka_unit_test(test_leftover_tmp),
	    cmocka_unit_test(test_write_keeps_good_prev),
	    cmocka_unit_test(test_write_mark),
	    cmocka_unit_test(test_source_and_allow_empty),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
