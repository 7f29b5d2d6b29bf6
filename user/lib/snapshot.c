/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The persisted rule set (docs/operations.md, "Snapshot"). A snapshot is
 * trusted only after the rule parser accepts its rules and their canonical
 * serialization hashes to the stored checksum; anything else is corrupt
 * and the boot path falls back to the previous snapshot. This file: a
 * snapshot document read and checked; snapshot_store.c: its files.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* the strerror_r that returns a string */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "json_text.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "snapshot_int.h"

const char *snapshot_errstr(int e, char *buf, size_t len)
{
	return strerror_r(e, buf, len);
}

/* Whole file into a NUL-terminated buffer; read to EOF, not st_size. */
int snapshot_read_all(const char *path, char **bufp, size_t *lenp, char *err,
		      size_t errlen)
{
	char *buf = NULL, eb[128];
	size_t used = 0;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot open: %s", path,
			   snapshot_errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	ret = sl_read_fd(fd, SL_SNAPSHOT_FILE_MAX, &buf, &used);
	close(fd);
	if (ret == -EFBIG) {
		sl_set_err(err, errlen, "%s: larger than 64 MiB; not a snapshot",
			path);
		ret = -EINVAL;
	} else if (ret) {
		sl_set_err(err, errlen, "%s: cannot read: %s", path,
			   snapshot_errstr(-ret, eb, sizeof(eb)));
	}
	if (ret)
		return ret;
	*bufp = buf;
	*lenp = used;
	return 0;
}

/* "sha256:HEX" of canon, the one-line canonical rules array. */
void snapshot_canon_checksum(const char *canon, char out[SL_CHECKSUM_LEN + 1])
{
	char hex[2 * SL_SHA256_LEN + 1];

	sl_sha256_hex(canon, strlen(canon), hex);
	snprintf(out, SL_CHECKSUM_LEN + 1, "%s%s", SL_CHECKSUM_PREFIX, hex);
}

void sl_snapshot_checksum(const struct sl_ruleset *rs,
			  char out[SL_SNAPSHOT_CHECKSUM_LEN + 1])
{
	char *canon = sl_rules_text(rs);

	if (!canon) {
		/* never equal to a stored checksum */
		snprintf(out, SL_CHECKSUM_LEN + 1, "%s", "out of memory");
		return;
	}
	snapshot_canon_checksum(canon, out);
	free(canon);
}

int sl_snapshot_source_copy(struct sl_snapshot_source *dst,
			    const struct sl_snapshot_source *src)
{
	struct sl_snapshot_source c = *src;

	c.etcd_key = src->etcd_key ? strdup(src->etcd_key) : NULL;
	c.rule_file = src->rule_file ? strdup(src->rule_file) : NULL;
	if ((src->etcd_key && !c.etcd_key) ||
	    (src->rule_file && !c.rule_file)) {
		sl_snapshot_source_free(&c);
		return -ENOMEM;
	}
	sl_snapshot_source_free(dst);
	*dst = c;
	return 0;
}

void sl_snapshot_source_free(struct sl_snapshot_source *src)
{
	free(src->etcd_key);
	free(src->rule_file);
	memset(src, 0, sizeof(*src));
}

/* Exactly "YYYY-MM-DDTHH:MM:SSZ", a real UTC time (no Feb 30, no :60). */
static int parse_time(const char *s, int64_t *out)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
	int v[6] = {0}, k = 0, i;
	struct tm tm = {0}, back;
	time_t t;

	if (strlen(s) != SL_TIME_LEN)
		return -EINVAL;
	for (i = 0; i < SL_TIME_LEN; i++) {
		if (shape[i] == 'd') {
			if (s[i] < '0' || s[i] > '9')
				return -EINVAL;
		} else if (s[i] != shape[i]) {
			return -EINVAL;
		}
	}
	for (i = 0; i < SL_TIME_LEN; i++) {
		if (shape[i] != 'd')
			k++;
		else
			v[k] = v[k] * 10 + (s[i] - '0');
	}
	tm.tm_year = v[0] - 1900;
	tm.tm_mon = v[1] - 1;
	tm.tm_mday = v[2];
	tm.tm_hour = v[3];
	tm.tm_min = v[4];
	tm.tm_sec = v[5];
	if (v[0] < 1970 || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[3] > 23 ||
	    v[4] > 59 || v[5] > 59)
		return -EINVAL;
	t = timegm(&tm);
	if (t == (time_t) -1 || !gmtime_r(&t, &back) || back.tm_mday != v[2] ||
	    back.tm_mon != v[1] - 1)
		return -EINVAL;
	*out = t;
	return 0;
}

static const char *json_type(const cJSON *it)
{
	if (!it)
		return "nothing";
	if (cJSON_IsBool(it))
		return "a boolean";
	if (cJSON_IsNull(it))
		return "null";
	if (cJSON_IsNumber(it))
		return "a number";
	if (cJSON_IsString(it))
		return "a string";
	if (cJSON_IsArray(it))
		return "an array";
	if (cJSON_IsObject(it))
		return "an object";
	return "an invalid value";
}

/* Short and plain enough to quote in a one-line error. */
static bool printable(const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		if (i >= max || s[i] < 0x20 || s[i] > 0x7e || s[i] == '"')
			return false;
	}
	return true;
}

/*
 * Why buf is not JSON, and where: cut off (the common damage: a write that
 * never finished), data after a complete document, or damage inside.
 */
static void syntax_error(const char *path, const char *buf, size_t len,
			 const char *at, char *err, size_t errlen)
{
	struct sl_json_error e;

	sl_json_locate(buf, len, at, &e);
	if (e.fault == SL_JSON_TRAILING)
		sl_set_err(err, errlen,
			"%s: not valid JSON: unexpected data after the end of "
			"the document at line %u, column %u (byte %zu of %zu); "
			"the file is damaged",
			path, e.line, e.col, e.off, len);
	else if (e.fault == SL_JSON_CUT)
		sl_set_err(err, errlen,
			"%s: not valid JSON: the document is cut off after "
			"%zu bytes (parsing stopped at line %u, column %u); "
			"the file is truncated",
			path, len, e.line, e.col);
	else
		sl_set_err(err, errlen,
			"%s: not valid JSON at line %u, column %u (byte %zu "
			"of %zu); the file is damaged%s",
			path, e.line, e.col, e.off, len,
			e.fault == SL_JSON_DEEP ? " (nested past the parser's "
						  "limit)"
						: "");
}

static const char *const snapshot_keys[] = {
    "sluice_snapshot", "version", "updated_at", "checksum", "rules",
    "allow_empty", "source", NULL,
};

/* Unknown or repeated top-level keys: a snapshot is written by us only. */
static int check_keys(const char *path, const cJSON *doc, char *err,
		      size_t errlen)
{
	const cJSON *it, *prev;
	unsigned int k;

	for (it = doc->child; it; it = it->next) {
		for (prev = doc->child; prev != it; prev = prev->next) {
			if (!strcmp(prev->string, it->string)) {
				sl_set_err(err, errlen,
					"%s: field \"%s\" given more than "
					"once",
					path,
					printable(it->string, 64)
					    ? it->string
					    : "(unprintable)");
				return -EINVAL;
			}
		}
		for (k = 0; snapshot_keys[k]; k++) {
			if (!strcmp(it->string, snapshot_keys[k]))
				break;
		}
		if (!snapshot_keys[k]) {
			sl_set_err(err, errlen,
				"%s: unknown field \"%s\"; a snapshot has "
				"sluice_snapshot, version, updated_at, "
				"checksum, rules, allow_empty and source",
				path,
				printable(it->string, 64) ? it->string
							  : "(unprintable)");
			return -EINVAL;
		}
	}
	return 0;
}

static bool checksum_shape(const char *s)
{
	size_t p = sizeof(SL_CHECKSUM_PREFIX) - 1, i;

	if (strlen(s) != SL_CHECKSUM_LEN || strncmp(s, SL_CHECKSUM_PREFIX, p))
		return false;
	for (i = p; s[i]; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

/* "source": {"rule_file": path, "file_checksum": "sha256:...",
 * "changed_by_cli": bool} */
static int parse_file_source(const char *path, const cJSON *so,
			     struct sl_snapshot_source *src, char *err,
			     size_t errlen)
{
	const cJSON *file = cJSON_GetObjectItemCaseSensitive(so, "rule_file");
	const cJSON *sum = cJSON_GetObjectItemCaseSensitive(so, "file_checksum");
	const cJSON *cli = cJSON_GetObjectItemCaseSensitive(so,
							    "changed_by_cli");

	if (!cJSON_IsObject(so) || cJSON_GetArraySize(so) != 3 ||
	    !cJSON_IsString(file) || !*file->valuestring ||
	    !cJSON_IsString(sum) || !checksum_shape(sum->valuestring) ||
	    !cJSON_IsBool(cli)) {
		sl_set_err(err, errlen,
			"%s: field \"source\" must be {\"rule_file\": a "
			"non-empty string, \"file_checksum\": \"sha256:\" and "
			"64 hex digits, \"changed_by_cli\": true or false}",
			path);
		return -EINVAL;
	}
	src->rule_file = strdup(file->valuestring);
	if (!src->rule_file) {
		sl_set_err(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	snprintf(src->file_checksum, sizeof(src->file_checksum), "%s",
		 sum->valuestring);
	src->changed_by_cli = cJSON_IsTrue(cli);
	return 0;
}

/* The optional fields: "allow_empty" (of the rules) and "source". */
static int parse_extras(const char *path, const cJSON *doc,
			struct sl_ruleset *rs, struct sl_snapshot_source *src,
			char *err, size_t errlen)
{
	const cJSON *ae = cJSON_GetObjectItemCaseSensitive(doc, "allow_empty");
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(doc, "source");
	const cJSON *key, *rev;

	if (ae && !cJSON_IsBool(ae)) {
		sl_set_err(err, errlen,
			"%s: field \"allow_empty\" must be true or false, got "
			"%s",
			path, json_type(ae));
		return -EINVAL;
	}
	rs->allow_empty = cJSON_IsTrue(ae);
	if (!so)
		return 0;
	if (cJSON_GetObjectItemCaseSensitive(so, "rule_file"))
		return parse_file_source(path, so, src, err, errlen);
	key = cJSON_GetObjectItemCaseSensitive(so, "etcd_key");
	rev = cJSON_GetObjectItemCaseSensitive(so, "revision");
	if (!cJSON_IsObject(so) || cJSON_GetArraySize(so) != 2 ||
	    !cJSON_IsString(key) || !*key->valuestring ||
	    !sl_json_uint(rev, 1, SL_SNAPSHOT_VERSION_MAX, &src->revision)) {
		sl_set_err(err, errlen,
			"%s: field \"source\" must be {\"etcd_key\": a "
			"non-empty string, \"revision\": an integer from 1 "
			"to 2^53-1}",
			path);
		return -EINVAL;
	}
	src->etcd_key = strdup(key->valuestring);
	if (!src->etcd_key) {
		sl_set_err(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	return 0;
}

static int parse_snapshot(const char *path, const cJSON *doc,
			  struct sl_snapshot *out, char *err, size_t errlen)
{
	const cJSON *fmt, *ver, *at, *sum, *arr;
	struct sl_snapshot_source src = {0};
	char want[SL_CHECKSUM_LEN + 1], *rerr, *canon;
	struct sl_ruleset rs = {0};
	int64_t updated_at;
	uint64_t v;
	int ret;

	if (!cJSON_IsObject(doc)) {
		sl_set_err(err, errlen,
			"%s: not a sluice snapshot: the document is %s, not an "
			"object",
			path, json_type(doc));
		return -EINVAL;
	}
	/* The format version first: a newer format may change the rest. */
	fmt = cJSON_GetObjectItemCaseSensitive(doc, "sluice_snapshot");
	if (!fmt) {
		sl_set_err(err, errlen,
			"%s: not a sluice snapshot: field \"sluice_snapshot\" "
			"is missing",
			path);
		return -EINVAL;
	}
	if (!sl_json_uint(fmt, 0, SL_SNAPSHOT_VERSION_MAX, &v)) {
		sl_set_err(err, errlen,
			"%s: field \"sluice_snapshot\" must be a non-negative "
			"integer, got %s",
			path, json_type(fmt));
		return -EINVAL;
	}
	if (v != SL_SNAPSHOT_FORMAT) {
		sl_set_err(
		    err, errlen,
		    "%s: snapshot format %llu is not supported; this sluice "
		    "reads format %d%s",
		    path, (unsigned long long) v, SL_SNAPSHOT_FORMAT,
		    v > SL_SNAPSHOT_FORMAT ? " (written by a newer sluice?)"
					   : "");
		return -EPROTONOSUPPORT;
	}
	ret = check_keys(path, doc, err, errlen);
	if (ret)
		return ret;

	ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
	if (!ver) {
		sl_set_err(err, errlen, "%s: field \"version\" is missing", path);
		return -EINVAL;
	}
	if (!sl_json_uint(ver, 1, SL_SNAPSHOT_VERSION_MAX, &v)) {
		sl_set_err(err, errlen,
			"%s: field \"version\" must be an integer from 1 to "
			"2^53-1, got %s",
			path, json_type(ver));
		return -EINVAL;
	}
	at = cJSON_GetObjectItemCaseSensitive(doc, "updated_at");
	if (!at) {
		sl_set_err(err, errlen, "%s: field \"updated_at\" is missing",
			path);
		return -EINVAL;
	}
	if (!cJSON_IsString(at) || !at->valuestring ||
	    parse_time(at->valuestring, &updated_at)) {
		bool show = cJSON_IsString(at) && at->valuestring &&
			    printable(at->valuestring, 40);

		sl_set_err(err, errlen,
			"%s: field \"updated_at\" must be a UTC time "
			"\"YYYY-MM-DDTHH:MM:SSZ\", got %s%s%s%s",
			path, json_type(at), show ? " \"" : "",
			show ? at->valuestring : "", show ? "\"" : "");
		return -EINVAL;
	}
	sum = cJSON_GetObjectItemCaseSensitive(doc, "checksum");
	if (!sum) {
		sl_set_err(err, errlen, "%s: field \"checksum\" is missing", path);
		return -EINVAL;
	}
	if (!cJSON_IsString(sum) || !sum->valuestring ||
	    !checksum_shape(sum->valuestring)) {
		sl_set_err(err, errlen,
			"%s: field \"checksum\" must be \"sha256:\" and 64 "
			"lower-case hex digits, got %s",
			path, json_type(sum));
		return -EINVAL;
	}
	arr = cJSON_GetObjectItemCaseSensitive(doc, "rules");
	if (!arr) {
		sl_set_err(err, errlen, "%s: field \"rules\" is missing", path);
		return -EINVAL;
	}
	if (!cJSON_IsArray(arr)) {
		sl_set_err(err, errlen,
			"%s: field \"rules\" must be an array, got %s", path,
			json_type(arr));
		return -EINVAL;
	}

	rerr = malloc(SL_SUB_ERR_LEN);
	if (!rerr) {
		sl_set_err(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	ret = sl_rules_from_array(arr, &rs, rerr, SL_SUB_ERR_LEN);
	if (ret) {
		if (ret == -EINVAL)
			sl_set_err(err, errlen, "%s: invalid rules: %s", path,
				rerr);
		else
			sl_set_err(err, errlen, "%s: %s", path, rerr);
		free(rerr);
		return ret;
	}
	free(rerr);

	/* Hash what the rules mean, re-serialized, not the file's bytes. */
	canon = sl_rules_text(&rs);
	if (!canon) {
		sl_ruleset_free(&rs);
		sl_set_err(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	snapshot_canon_checksum(canon, want);
	free(canon);
	if (strcmp(want, sum->valuestring)) {
		sl_set_err(err, errlen,
			"%s: checksum mismatch: file says %s, rules hash to "
			"%s; the file was edited or damaged",
			path, sum->valuestring, want);
		sl_ruleset_free(&rs);
		return -EINVAL;
	}
	ret = parse_extras(path, doc, &rs, &src, err, errlen);
	if (ret) {
		sl_snapshot_source_free(&src);
		sl_ruleset_free(&rs);
		return ret;
	}
	out->source = src;
	out->version = v;
	out->updated_at = updated_at;
	out->rules = rs;
	return 0;
}

int sl_snapshot_read(const char *path, struct sl_snapshot *out, char *err,
		     size_t errlen)
{
	const char *end = NULL, *nul;
	char *buf = NULL;
	size_t len = 0;
	cJSON *doc;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !out)
		return -EINVAL;
	ret = snapshot_read_all(path, &buf, &len, err, errlen);
	if (ret)
		return ret;
	if (len == 0) {
		sl_set_err(
		    err, errlen,
		    "%s: empty file (0 bytes); a write was cut short or the "
		    "file was truncated",
		    path);
		free(buf);
		return -EINVAL;
	}
	nul = memchr(buf, '\0', len);
	if (nul) {
		sl_set_err(err, errlen,
			"%s: NUL byte at byte %zu of %zu; the file is damaged",
			path, (size_t) (nul - buf), len);
		free(buf);
		return -EINVAL;
	}
	doc = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
	if (!doc) {
		syntax_error(path, buf, len, end, err, errlen);
		free(buf);
		return -EINVAL;
	}
	free(buf);
	ret = parse_snapshot(path, doc, out, err, errlen);
	cJSON_Delete(doc);
	return ret;
}

void sl_snapshot_free(struct sl_snapshot *s)
{
	if (!s)
		return;
	sl_ruleset_free(&s->rules);
	sl_snapshot_source_free(&s->source);
	s->version = 0;
	s->updated_at = 0;
}
