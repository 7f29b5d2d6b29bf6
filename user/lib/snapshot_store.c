/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The snapshot's files in the state directory: written durable (a
 * temporary file, fsync, rename, the directory fsync'd), the previous
 * one kept, rollback to it, and which one the boot reads.
 */
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

#include "json_text.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "snapshot_int.h"

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
			sl_set_err(err, errlen,
				   "%s: cannot set up directory: %s", dir,
				   snapshot_errstr(-e, eb, sizeof(eb)));
			return e;
		}
	} else if (create && errno != EEXIST) {
		e = -errno;
		sl_set_err(err, errlen, "%s: cannot create directory: %s", dir,
			   snapshot_errstr(-e, eb, sizeof(eb)));
		return e;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		e = -errno;
		sl_set_err(err, errlen, "%s: cannot open directory: %s", dir,
			   snapshot_errstr(-e, eb, sizeof(eb)));
		return e;
	}
	/* One writer at a time; released by close(). */
	if (flock(fd, LOCK_EX)) {
		e = -errno;
		sl_set_err(err, errlen, "%s: cannot lock: %s", dir,
			   snapshot_errstr(-e, eb, sizeof(eb)));
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
		   snapshot_errstr(-ret, eb, sizeof(eb)));
	return ret;
}

/* path holds exactly the bytes of mark */
static bool marked(const char *path, const struct sl_snapshot_mark *mark)
{
	size_t len;
	char *buf;
	bool same;

	if (!mark->text || snapshot_read_all(path, &buf, &len, NULL, 0))
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
			   snapshot_errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	/* A second name for the current file: rules.json never goes away. */
	if (linkat(dfd, SL_SNAPSHOT_FILE, dfd, SL_SNAPSHOT_PREV, 0)) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot link to %s: %s", cur_path,
			   prev_path, snapshot_errstr(-ret, eb, sizeof(eb)));
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
		sl_set_err(err, errlen, "%s: cannot rename to %s: %s",
			   from_path, cur_path,
			   snapshot_errstr(-ret, eb, sizeof(eb)));
		return ret;
	}
	if (fsync(dfd)) {
		ret = -errno;
		sl_set_err(err, errlen, "%s: cannot sync directory: %s", dir,
			   snapshot_errstr(-ret, eb, sizeof(eb)));
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
	snapshot_canon_checksum(canon, sum);
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
