/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The persisted rule set (docs/operations.md, "Snapshot"). A snapshot is
 * trusted only after the rule parser accepts its rules and their canonical
 * serialization hashes to the stored checksum; anything else is corrupt
 * and the boot path falls back to the previous snapshot.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* the strerror_r that returns a string */
#endif
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "json_text.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "snapshot.h"
#include "util.h"

#define SL_SNAPSHOT_FILE_MAX (64u << 20) /* as for rule files */
#define SL_SHA256_LEN	     32
#define SL_CHECKSUM_PREFIX   "sha256:"
#define SL_CHECKSUM_LEN	     SL_SNAPSHOT_CHECKSUM_LEN
#define SL_TIME_LEN	     SL_UTC_LEN /* "2026-11-29T18:00:00Z" */
#define SL_SUB_ERR_LEN	     16384 /* a rule parser error list */

_Static_assert(sizeof(SL_CHECKSUM_PREFIX) - 1 + 2 * SL_SHA256_LEN ==
		       SL_CHECKSUM_LEN,
	       "checksum length");

static const char *errstr(int e, char *buf, size_t len)
{
	return strerror_r(e, buf, len);
}

/* Whole file into a NUL-terminated buffer; read to EOF, not st_size. */
static int read_all(const char *path, char **bufp, size_t *lenp, char *err,
		    size_t errlen)
{
	char *buf = NULL, eb[128];
	size_t used = 0;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot open: %s", path,
			errstr(-ret, eb, sizeof(eb)));
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
			errstr(-ret, eb, sizeof(eb)));
	}
	if (ret)
		return ret;
	*bufp = buf;
	*lenp = used;
	return 0;
}

/* "sha256:HEX" of canon, the one-line canonical rules array. */
static void canon_checksum(const char *canon, char out[SL_CHECKSUM_LEN + 1])
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
	canon_checksum(canon, out);
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
	canon_checksum(canon, want);
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
	ret = read_all(path, &buf, &len, err, errlen);
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

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= w;
	}
	return 0;
}

/* fsync a directory so that entries created in it survive a crash. */
static int fsync_dir_path(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

/* Open DIR, creating it 0700 (and syncing its parent) if missing. */
static int open_dir(const char *dir, bool create, char *err, size_t errlen)
{
	char eb[128];
	int fd, e;

	if (create && mkdir(dir, 0700) == 0) {
		char *copy = strdup(dir);

		/* Exactly 0700 whatever the umask (0500 would lock us out). */
		e = chmod(dir, 0700) ? -errno : 0;
		if (!e)
			e = copy ? fsync_dir_path(dirname(copy)) : -ENOMEM;
		free(copy);
		if (e) {
			sl_set_err(err, errlen, "%s: cannot set up directory: %s",
				dir, errstr(-e, eb, sizeof(eb)));
			return e;
		}
	} else if (create && errno != EEXIST) {
		e = -errno;
		sl_set_err(err, errlen, "%s: cannot create directory: %s", dir,
			errstr(-e, eb, sizeof(eb)));
		return e;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		e = -errno;
		sl_set_err(err, errlen, "%s: cannot open directory: %s", dir,
			errstr(-e, eb, sizeof(eb)));
		return e;
	}
	/* One writer at a time; released by close(). */
	if (flock(fd, LOCK_EX)) {
		e = -errno;
		sl_set_err(err, errlen, "%s: cannot lock: %s", dir,
			errstr(-e, eb, sizeof(eb)));
		close(fd);
		return e;
	}
	return fd;
}

/* The snapshot document as text, or NULL when out of memory: laid out as
 * cJSON_Print() lays it out, the rules re-indented from canon. */
static char *snapshot_text(const char *canon, const char *sum,
			   uint64_t version, int64_t now, bool allow_empty,
			   const struct sl_snapshot_source *src)
{
	char when[SL_UTC_MS_LEN + 1];
	struct sl_text t = {0};
	struct sl_json j = {
		.p = canon, .end = canon + strlen(canon), .out = &t,
	};

	sl_format_utc(now * 1000, false, when);
	sl_text_printf(&t,
		       "{\n\t\"sluice_snapshot\":\t%d,\n\t\"version\":\t%llu,\n"
		       "\t\"updated_at\":\t\"%s\",\n\t\"checksum\":\t\"%s\",\n"
		       "\t\"rules\":\t",
		       SL_SNAPSHOT_FORMAT, (unsigned long long) version, when,
		       sum);
	if (!sl_json_value(&j, 1, true))
		t.nomem = true; /* never: canon is ours */
	if (allow_empty)
		sl_text_printf(&t, ",\n\t\"allow_empty\":\ttrue");
	if (src && (src->etcd_key || src->rule_file)) {
		cJSON *item = cJSON_CreateStringReference(
			src->etcd_key ? src->etcd_key : src->rule_file);
		char *name = item ? cJSON_PrintUnformatted(item) : NULL;

		cJSON_Delete(item);
		if (!name)
			t.nomem = true;
		else if (src->etcd_key)
			sl_text_printf(&t,
				       ",\n\t\"source\":\t{\n\t\t\"etcd_key\":\t"
				       "%s,\n\t\t\"revision\":\t%llu\n\t}",
				       name, (unsigned long long)src->revision);
		else
			sl_text_printf(&t,
				       ",\n\t\"source\":\t{\n\t\t\"rule_file\":\t"
				       "%s,\n\t\t\"file_checksum\":\t\"%s\",\n"
				       "\t\t\"changed_by_cli\":\t%s\n\t}",
				       name, src->file_checksum,
				       src->changed_by_cli ? "true" : "false");
		free(name);
	}
	sl_text_put(&t, "\n}\n", 3);
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

static int write_tmp(int dfd, const char *text, const char *tmp_path, char *err,
		     size_t errlen)
{
	const char *what = "cannot create";
	char eb[128];
	int fd, ret = 0;

	/* A leftover from a crash may be anything; start from nothing. */
	if (unlinkat(dfd, SL_SNAPSHOT_TMP, 0) && errno != ENOENT) {
		ret = -errno;
		what = "cannot remove leftover";
		goto fail;
	}
	fd = openat(dfd, SL_SNAPSHOT_TMP,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		goto fail;
	}
	/* Exactly 0600 whatever the umask. */
	what = "cannot write";
	if (fchmod(fd, 0600))
		ret = -errno;
	if (!ret)
		ret = write_all(fd, text, strlen(text));
	if (!ret && fsync(fd)) {
		ret = -errno;
		what = "cannot sync";
	}
	if (close(fd) && !ret) {
		ret = -errno;
		what = "cannot close";
	}
	if (!ret)
		return 0;
	unlinkat(dfd, SL_SNAPSHOT_TMP, 0);
fail:
	sl_set_err(err, errlen, "%s: %s: %s", tmp_path, what,
		errstr(-ret, eb, sizeof(eb)));
	return ret;
}

/* path holds exactly the bytes of mark */
static bool marked(const char *path, const struct sl_snapshot_mark *mark)
{
	size_t len;
	char *buf;
	bool same;

	if (!mark->text || read_all(path, &buf, &len, NULL, 0))
		return false;
	same = len == mark->len && !memcmp(buf, mark->text, len);
	free(buf);
	return same;
}

void sl_snapshot_mark_free(struct sl_snapshot_mark *mark)
{
	free(mark->text);
	mark->text = NULL;
	mark->len = 0;
}

/*
 * Keep the current snapshot as .prev, but only a good one: after a boot
 * from .prev (current corrupt), .prev is what is in force and must stay.
 */
static int keep_prev(int dfd, const char *cur_path, const char *prev_path,
		     const struct sl_snapshot_mark *mark, char *err,
		     size_t errlen)
{
	struct sl_snapshot cur = {0};
	char *rerr = malloc(SL_SUB_ERR_LEN), eb[128];
	int ret;

	if (!rerr) {
		sl_set_err(err, errlen, "%s: out of memory", cur_path);
		return -ENOMEM;
	}
	/* the bytes a writer verified need no second verification */
	if (!mark || !marked(cur_path, mark))
		ret = sl_snapshot_read(cur_path, &cur, rerr, SL_SUB_ERR_LEN);
	else
		ret = 0;
	sl_snapshot_free(&cur);
	if (ret == -ENOENT || ret == -EINVAL || ret == -EPROTONOSUPPORT) {
		free(rerr);
		return 0; /* nothing good to keep; leave .prev alone */
	}
	if (ret) {
		sl_set_err(err, errlen, "%s", rerr);
		free(rerr);
		return ret;
	}
	free(rerr);
	if (unlinkat(dfd, SL_SNAPSHOT_PREV, 0) && errno != ENOENT) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot remove: %s", prev_path,
			errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	/* A second name for the current file: rules.json never goes away. */
	if (linkat(dfd, SL_SNAPSHOT_FILE, dfd, SL_SNAPSHOT_PREV, 0)) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot link to %s: %s", cur_path,
			prev_path, errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	return 0;
}

static char *join(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

/* Rename `name` (in dfd) over the current snapshot, then sync the
 * directory so the rename is durable. Paths are for the messages. */
static int make_current(int dfd, const char *name, const char *dir,
			const char *from_path, const char *cur_path, char *err,
			size_t errlen)
{
	char eb[128];
	int ret;

	if (renameat(dfd, name, dfd, SL_SNAPSHOT_FILE)) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot rename to %s: %s", from_path,
			cur_path, errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	if (fsync(dfd)) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot sync directory: %s", dir,
			errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	return 0;
}

/* Never write what a boot would reject: read canon back as a boot does. */
static int check_canon(const char *canon, const char *cur, char *err,
		       size_t errlen)
{
	struct sl_ruleset check = {0};
	char *doc = NULL, *rerr = malloc(SL_SUB_ERR_LEN);
	int len = rerr ? asprintf(&doc, "{\"rules\":%s}", canon) : -1;
	int ret;

	if (len < 0) {
		free(rerr);
		sl_set_err(err, errlen, "%s: out of memory", cur);
		return -ENOMEM;
	}
	ret = sl_rules_parse(doc, len, &check, rerr, SL_SUB_ERR_LEN);
	sl_ruleset_free(&check);
	if (ret)
		sl_set_err(err, errlen, "%s: refusing to write invalid rules: %s",
			cur, rerr);
	free(doc);
	free(rerr);
	return ret;
}

int sl_snapshot_write(const char *dir, const struct sl_ruleset *rs,
		      uint64_t version, bool parsed,
		      struct sl_snapshot_mark *mark, char *err, size_t errlen)
{
	return sl_snapshot_write_source(dir, rs, version, parsed, NULL, mark,
					err, errlen);
}

int sl_snapshot_write_source(const char *dir, const struct sl_ruleset *rs,
			     uint64_t version, bool parsed,
			     const struct sl_snapshot_source *source,
			     struct sl_snapshot_mark *mark, char *err,
			     size_t errlen)
{
	char *cur = NULL, *prev = NULL, *tmp = NULL, *text = NULL;
	char sum[SL_CHECKSUM_LEN + 1], *canon = NULL;
	int dfd = -1, ret;

	if (err && errlen)
		err[0] = '\0';
	if (!dir || !rs || (rs->n && !rs->rules))
		return -EINVAL;
	if (version < 1 || version > SL_SNAPSHOT_VERSION_MAX) {
		sl_set_err(err, errlen,
			"%s: snapshot version %llu is out of range 1 to 2^53-1",
			dir, (unsigned long long) version);
		return -EINVAL;
	}
	cur = join(dir, SL_SNAPSHOT_FILE);
	prev = join(dir, SL_SNAPSHOT_PREV);
	tmp = join(dir, SL_SNAPSHOT_TMP);
	canon = sl_rules_text(rs);
	if (!cur || !prev || !tmp || !canon) {
		ret = -ENOMEM;
		sl_set_err(err, errlen, "%s: out of memory", dir);
		goto out;
	}
	ret = parsed ? 0 : check_canon(canon, cur, err, errlen);
	if (ret)
		goto out;
	canon_checksum(canon, sum);
	text = snapshot_text(canon, sum, version, (int64_t) time(NULL),
			     rs->allow_empty && !rs->n, source);
	if (!text) {
		ret = -ENOMEM;
		sl_set_err(err, errlen, "%s: out of memory", dir);
		goto out;
	}

	dfd = open_dir(dir, true, err, errlen);
	if (dfd < 0) {
		ret = dfd;
		goto out;
	}
	ret = write_tmp(dfd, text, tmp, err, errlen);
	if (ret)
		goto out;
	ret = keep_prev(dfd, cur, prev, mark, err, errlen);
	if (ret) {
		unlinkat(dfd, SL_SNAPSHOT_TMP, 0);
		goto out;
	}
	ret = make_current(dfd, SL_SNAPSHOT_TMP, dir, tmp, cur, err, errlen);
	/* the temporary file is still there only if the rename failed */
	if (ret && !faccessat(dfd, SL_SNAPSHOT_TMP, F_OK, AT_SYMLINK_NOFOLLOW))
		unlinkat(dfd, SL_SNAPSHOT_TMP, 0);
out:
	if (mark) {
		sl_snapshot_mark_free(mark);
		if (!ret) {
			mark->text = text;
			mark->len = strlen(text);
			text = NULL;
		}
	}
	if (dfd >= 0)
		close(dfd);
	free(canon);
	free(text);
	free(cur);
	free(prev);
	free(tmp);
	return ret;
}

int sl_snapshot_rollback(const char *dir, char *err, size_t errlen)
{
	char *cur = NULL, *prev = NULL;
	struct sl_snapshot snap = {0};
	int dfd = -1, ret;

	if (err && errlen)
		err[0] = '\0';
	if (!dir)
		return -EINVAL;
	cur = join(dir, SL_SNAPSHOT_FILE);
	prev = join(dir, SL_SNAPSHOT_PREV);
	if (!cur || !prev) {
		ret = -ENOMEM;
		sl_set_err(err, errlen, "%s: out of memory", dir);
		goto out;
	}
	dfd = open_dir(dir, false, err, errlen);
	if (dfd < 0) {
		ret = dfd;
		goto out;
	}
	/* Checked under the lock: rolling back to a bad file is worse. */
	ret = sl_snapshot_read(prev, &snap, err, errlen);
	sl_snapshot_free(&snap);
	if (ret == -ENOENT) {
		sl_set_err(err, errlen, "%s: no previous snapshot to roll back to",
			prev);
		goto out;
	}
	if (ret) {
		size_t n = err ? strlen(err) : 0;

		if (err && n + 1 < errlen)
			snprintf(err + n, errlen - n,
				 "; refusing to roll back to it");
		goto out;
	}
	ret = make_current(dfd, SL_SNAPSHOT_PREV, dir, prev, cur, err,
			   errlen);
out:
	if (dfd >= 0)
		close(dfd);
	free(cur);
	free(prev);
	return ret;
}

int sl_snapshot_load_boot(const char *dir, struct sl_snapshot *out,
			  bool *used_prev, char *err, size_t errlen)
{
	char *cur = NULL, *prev = NULL, *e1 = NULL, *e2 = NULL;
	char when[SL_UTC_MS_LEN + 1];
	struct sl_snapshot snap = {0};
	int r1, r2, ret;

	if (err && errlen)
		err[0] = '\0';
	if (used_prev)
		*used_prev = false;
	if (!dir || !out)
		return -EINVAL;
	cur = join(dir, SL_SNAPSHOT_FILE);
	prev = join(dir, SL_SNAPSHOT_PREV);
	e1 = malloc(SL_SUB_ERR_LEN);
	e2 = malloc(SL_SUB_ERR_LEN);
	if (!cur || !prev || !e1 || !e2) {
		ret = -ENOMEM;
		sl_set_err(err, errlen, "%s: out of memory", dir);
		goto out;
	}
	r1 = sl_snapshot_read(cur, out, e1, SL_SUB_ERR_LEN);
	if (r1 == 0) {
		ret = 0;
		goto out;
	}
	if (r1 == -ENOMEM) {
		sl_set_err(err, errlen, "%s", e1);
		ret = r1;
		goto out;
	}
	r2 = sl_snapshot_read(prev, &snap, e2, SL_SUB_ERR_LEN);
	if (r2 == 0) {
		*out = snap;
		if (used_prev)
			*used_prev = true;
		sl_format_utc(snap.updated_at * 1000, false, when);
		sl_set_err(err, errlen,
			"%s; booting from %s instead (version %llu, written "
			"%s)",
			e1, prev, (unsigned long long) snap.version, when);
		ret = 0;
	} else if (r1 == -ENOENT && r2 == -ENOENT) {
		sl_set_err(err, errlen,
			"%s: no snapshot: neither %s nor %s exists", dir,
			SL_SNAPSHOT_FILE, SL_SNAPSHOT_PREV);
		ret = -ENOENT;
	} else if (r2 == -ENOENT) {
		sl_set_err(err, errlen, "%s; and there is no %s to fall back to",
			e1, prev);
		ret = r1;
	} else {
		sl_set_err(err, errlen,
			"no usable snapshot in %s:\n%s\nand the fallback: %s",
			dir, e1, e2);
		ret = r1 == -ENOENT ? r2 : r1;
	}
out:
	free(cur);
	free(prev);
	free(e1);
	free(e2);
	return ret;
}
