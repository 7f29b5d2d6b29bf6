// SPDX-License-Identifier: GPL-2.0
/*
 * `sluice push FILE --etcd URL --etcd-key KEY [--if-revision N]`: check
 * FILE as `sluice check` does and publish it as the value of KEY, which
 * agents started with --etcd-key KEY put in force (docs/fleet.md). With
 * --body-url (and --body-dir) it publishes a manifest instead, naming the
 * file by its SHA-256 on a body server (manifest.h). It talks to etcd,
 * the config source, and the body server, never to an agent.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <zlib.h>

#include "cli.h"
#include "compile.h"
#include "etcd.h"
#include "log.h"
#include "manifest.h"
#include "rules.h"
#include "rules_parse.h"
#include "ruleset.h"

#define ERRBUF 4096

struct push {
	const char *endpoints;
	struct sl_etcd_auth auth;
	const char *key;
	bool has_if_revision;
	uint64_t if_revision;
	bool dry_run;
	const char *body_url, *body_dir;
	uint32_t keep_bodies;
};

#define KEEP_BODIES 16	/* --keep-bodies' default */

/* path holds buf, durably: written aside, synced, renamed, dir synced. */
static int write_file(const char *dir, const char *path, const void *buf,
		      size_t len)
{
	char tmp[4096 + 8];
	int fd, dfd, ret = 0;
	size_t off = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		pr_err("--body-dir: %s: %s", tmp, strerror(-ret));
		return ret;
	}
	while (!ret && off < len) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n < 0)
			ret = -errno;
		else
			off += n;
	}
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	/* a server never serves a half-written body under its name */
	if (!ret && rename(tmp, path))
		ret = -errno;
	dfd = ret ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd))
			ret = -errno;
		close(dfd);
	}
	if (ret) {
		unlink(tmp);
		pr_err("--body-dir: %s: %s", path, strerror(-ret));
	}
	return ret;
}

/*
 * DIR/<sha256>.json holds text before any manifest names it, and
 * DIR/<sha256>.json.gz its gzip, for servers that send it to clients
 * that take gzip (nginx's gzip_static; agents do): a tenth of the bytes.
 */
static int write_body(const char *dir, const struct sl_manifest *m,
		      const char *text, size_t len)
{
	uLong cap = compressBound(len) + 32;
	unsigned char *gz = malloc(cap);
	z_stream z = { 0 };
	char path[4096];
	int ret;

	snprintf(path, sizeof(path), "%s/%s.json.gz", dir, m->sha256);
	/* windowBits 16 + 15: a gzip header and trailer */
	if (!gz || deflateInit2(&z, 9, Z_DEFLATED, 31, 8,
				Z_DEFAULT_STRATEGY) != Z_OK) {
		free(gz);
		return -ENOMEM;
	}
	z.next_in = (unsigned char *)text;
	z.avail_in = len;
	z.next_out = gz;
	z.avail_out = cap;
	ret = deflate(&z, Z_FINISH) == Z_STREAM_END
		      ? write_file(dir, path, gz, z.total_out)
		      : -EIO;
	deflateEnd(&z);
	free(gz);
	snprintf(path, sizeof(path), "%s/%s.json", dir, m->sha256);
	return ret ? ret : write_file(dir, path, text, len);
}

/* Every URL of m serves the body: checked before the manifest names it. */
static int check_body_urls(const struct sl_etcd *etcd,
			   const struct sl_manifest *m, const char *file)
{
	struct sl_manifest one = *m;
	char err[ERRBUF], *body;
	size_t len;
	int used;

	one.n_urls = 1;
	for (int i = 0; i < m->n_urls; i++) {
		strcpy(one.url[0], m->url[i]);
		if (sl_manifest_fetch(etcd, &one, 0, &used, &body, &len, err,
				      sizeof(err))) {
			pr_err("%s: not published: the body server does not "
			       "serve it: %s", file, err);
			return -EIO;
		}
		free(body);
	}
	return 0;
}

/* A body's file in --body-dir: its SHA-256 in hex, then ".json". */
static bool is_body(const char *name)
{
	size_t i;

	for (i = 0; i < SL_SHA256_HEX_LEN; i++)
		if (!strchr("0123456789abcdef", name[i]) || !name[i])
			return false;
	return !strcmp(name + i, ".json");
}

struct body_age {
	char name[SL_SHA256_HEX_LEN + 6];
	struct timespec mtime;
};

static int newest_first(const void *a, const void *b)
{
	const struct timespec *x = &((const struct body_age *)a)->mtime;
	const struct timespec *y = &((const struct body_age *)b)->mtime;

	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? 1 : -1;
	return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

/*
 * After a publication: the bodies of dir but the keep newest (and the one
 * just published, whatever its age) go, with their .gz, so that the
 * directory does not grow by a rule file a push. An agent still fetching
 * an older body gets a 404 and reads the key again, which names a kept
 * one. Failures are reported, not fatal: the push is done.
 */
static void prune_bodies(const char *dir, uint32_t keep, const char *sha)
{
	struct body_age *b = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	char path[4096];
	DIR *d = opendir(dir);

	if (!d) {
		pr_warn("--body-dir: %s: %s; old bodies kept", dir,
			strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (!is_body(e->d_name) || !strncmp(e->d_name, sha,
						    SL_SHA256_HEX_LEN))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st))
			continue;
		if (n == cap) {
			struct body_age *nb;

			cap = cap ? 2 * cap : 64;
			nb = realloc(b, cap * sizeof(*b));
			if (!nb)
				break;
			b = nb;
		}
		memcpy(b[n].name, e->d_name, SL_SHA256_HEX_LEN + 5);
		b[n].name[SL_SHA256_HEX_LEN + 5] = 0;
		b[n++].mtime = st.st_mtim;
	}
	closedir(d);
	qsort(b, n, sizeof(*b), newest_first);
	/* the one just published is one of the keep */
	for (size_t i = keep ? keep - 1 : n; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, b[i].name);
		if (unlink(path) && errno != ENOENT)
			pr_warn("--body-dir: %s: %s", path, strerror(errno));
		snprintf(path, sizeof(path), "%s/%s.gz", dir, b[i].name);
		if (unlink(path) && errno != ENOENT)
			pr_warn("--body-dir: %s: %s", path, strerror(errno));
	}
	free(b);
}

/* --dry-run: what FILE would change of the key's rules; nothing sent. */
static int dry_run(struct push *p, struct sl_etcd *etcd, const char *file,
		   const struct sl_ruleset *rs)
{
	struct sl_ruleset cur = { 0 };
	struct sl_etcd_kv kv = { 0 };
	char err[ERRBUF], *body = NULL;
	struct sl_manifest m;
	size_t blen = 0;
	cJSON *diff;
	int ret;

	ret = sl_etcd_get(etcd, &kv, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "%s: cannot read %s: %s\n", file, p->key, err);
		return SL_CLI_FAILED;
	}
	/* a manifest: compare with its body */
	if (kv.exists && !sl_manifest_parse(kv.value, kv.len, &m, err,
					    sizeof(err))) {
		int used;

		if (sl_manifest_fetch(etcd, &m, 0, &used, &body, &blen, err,
				      sizeof(err)))
			fprintf(stderr, "%s: %s at revision %lld is a manifest "
					"whose body cannot be read (%.200s)\n",
				file, p->key, (long long)kv.mod_revision, err);
		free(kv.value);
		kv.value = body ? body : strdup("");
		kv.len = body ? blen : 0;
	}
	/* no key yet, or a value agents refuse: everything is new */
	if (kv.exists &&
	    sl_rules_parse(kv.value, kv.len, &cur, err, sizeof(err)))
		fprintf(stderr, "%s: %s at revision %lld does not parse (%.200s)"
				": compared with no rules\n", file, p->key,
			(long long)kv.mod_revision, err);
	diff = sl_ruleset_diff_json(&cur, rs);
	if (diff) {
		printf("dry run, nothing published (%s at revision %lld): ",
		       p->key, (long long)kv.mod_revision);
		cli_print_diff(diff);
	} else {
		fprintf(stderr, "%s: out of memory\n", file);
	}
	cJSON_Delete(diff);
	sl_ruleset_free(&cur);
	sl_etcd_kv_free(&kv);
	return diff ? SL_CLI_OK : SL_CLI_FAILED;
}

static int run_push(const struct sl_cmd *cmd, void *opts, int argc,
		    char **argv)
{
	struct push *p = opts;
	const char *file = argv[0];
	struct sl_ruleset rs = { 0 };
	struct sl_compiled comp;
	struct sl_manifest m;
	struct sl_etcd etcd;
	char err[ERRBUF], *text, *manifest = NULL;
	int64_t revision;
	size_t len;
	int ret;

	if (p->body_dir && !p->body_url)
		return sl_params_error(cmd, "--body-dir needs --body-url (where "
				       "agents fetch what it holds)");
	if (sl_etcd_init(&etcd, p->endpoints, &p->auth, p->key, err,
			 sizeof(err)))
		return sl_params_error(cmd, "%s", err);
	if (cli_check_rules(file, &text, &len, &rs, &comp)) {
		sl_etcd_free(&etcd);
		return SL_CLI_FAILED;
	}
	sl_compiled_free(&comp);
	/* every agent would refuse it: nothing is sent */
	if (!rs.n && !rs.allow_empty) {
		pr_err("%s: no rules; agents refuse an empty set unless the "
		       "document says \"allow_empty\": true; nothing sent",
		       file);
		ret = SL_CLI_FAILED;
		goto out;
	}
	if (p->dry_run) {
		ret = dry_run(p, &etcd, file, &rs);
		goto out;
	}
	if (p->body_url) {
		/* the body first, where agents will look; the manifest
		 * that names it last, in one put: no agent sees half */
		manifest = sl_manifest_build(text, len, rs.n, p->body_url, &m,
					     err, sizeof(err));
		if (!manifest) {
			ret = sl_params_error(cmd, "%s", err);
			goto out;
		}
		if ((p->body_dir && write_body(p->body_dir, &m, text, len)) ||
		    check_body_urls(&etcd, &m, file)) {
			ret = SL_CLI_FAILED;
			goto out;
		}
	}
	ret = sl_etcd_put(&etcd, manifest ? manifest : text,
			  manifest ? strlen(manifest) : len,
			  p->has_if_revision, p->if_revision, &revision, err,
			  sizeof(err));
	if (ret == -ECANCELED) {
		if (revision)
			pr_err("%s: not published: %s is at revision %lld, "
			       "not %llu", file, p->key, (long long)revision,
			       (unsigned long long)p->if_revision);
		else
			pr_err("%s: not published: %s does not exist, not at "
			       "revision %llu", file, p->key,
			       (unsigned long long)p->if_revision);
		ret = SL_CLI_FAILED;
	} else if (ret) {
		pr_err("%s: not published: %s", file, err);
		ret = SL_CLI_FAILED;
	} else {
		printf("%s: %zu rules published as %s at revision %lld\n",
		       file, rs.n, p->key, (long long)revision);
		if (manifest)
			printf("%s: a manifest of %zu bytes; the body, %zu "
			       "bytes of sha256 %s, at %s\n", file,
			       strlen(manifest), len, m.sha256, m.url[0]);
		if (p->body_dir && p->keep_bodies)
			prune_bodies(p->body_dir, p->keep_bodies, m.sha256);
	}
out:
	free(manifest);
	free(text);
	sl_ruleset_free(&rs);
	sl_etcd_free(&etcd);
	return ret;
}

static const struct sl_opt push_opts[] = {
	{ .name = "etcd", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct push, endpoints), .metavar = "URL[,URL...]",
	  .required = true, .help = "etcd's client URLs" },
	{ .name = "etcd-key", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct push, key), .metavar = "KEY",
	  .required = true, .help = "the key the agents watch" },
	SL_ETCD_AUTH_OPTS(struct push, auth),
	{ .name = "if-revision", .type = SL_OPT_U64,
	  .field = SL_FIELD(struct push, if_revision),
	  .given = SL_FIELD(struct push, has_if_revision), .metavar = "N",
	  .max = INT64_MAX,
	  .help = "only if KEY is at revision N (0: only if it does not "
		  "exist)" },
	{ .name = "body-url", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct push, body_url), .metavar = "URL[,URL...]",
	  .help = "publish a manifest: agents fetch FILE from "
		  "URL/<sha256>.json" },
	{ .name = "body-dir", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct push, body_dir), .metavar = "DIR",
	  .help = "write FILE there first as <sha256>.json and .json.gz "
		  "(what --body-url serves)" },
	{ .name = "keep-bodies", .type = SL_OPT_U32,
	  .field = SL_FIELD(struct push, keep_bodies), .metavar = "N",
	  .max = UINT32_MAX,
	  .help = "after publishing, --body-dir keeps its N newest bodies "
		  "(default 16; 0: all)" },
	{ .name = "dry-run", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct push, dry_run),
	  .help = "show what would change of KEY's rules, publish nothing" },
	{ 0 },
};

static void push_defaults(void *opts)
{
	((struct push *)opts)->keep_bodies = KEEP_BODIES;
}

const struct sl_cmd sl_cmd_push = {
	.name = "push",
	.args = "FILE",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (a rule file)",
	.opts = push_opts,
	.opts_size = sizeof(struct push),
	.defaults = push_defaults,
	.run = run_push,
	.summary = "check a rule file as `check` does and publish it to the "
		   "etcd key\nthat agents with --etcd-key take their rules "
		   "from",
};
