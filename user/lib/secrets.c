// SPDX-License-Identifier: GPL-2.0
/* The secrets file: one "namespace secret" per line, mode 0600. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "secrets.h"
#include "util.h"

#define SL_SECRETS_FILE_MAX (1u << 20)

static bool ns_valid(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > 63)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

/* One line (NUL-terminated, no newline) into e; -EINVAL with a reason. */
static int parse_line(char *line, struct sl_secret *e, const char **why)
{
	char *ns, *key, *extra, *save = NULL;

	ns = strtok_r(line, " \t\r", &save);
	key = strtok_r(NULL, " \t\r", &save);
	extra = strtok_r(NULL, " \t\r", &save);
	if (!key || extra) {
		*why = "expected 'namespace secret'";
		return -EINVAL;
	}
	if (!ns_valid(ns, strlen(ns))) {
		*why = "namespace must be 1-63 characters of a-z, 0-9, '_', "
		       "'.', '-'";
		return -EINVAL;
	}
	e->len[0] = strlen(key);
	if (e->len[0] < SL_SECRET_MIN || e->len[0] > SL_SECRET_MAX) {
		*why = "secret must be 16 to 256 characters";
		return -EINVAL;
	}
	strcpy(e->ns, ns);
	memcpy(e->key[0], key, e->len[0]);
	e->n_keys = 1;
	return 0;
}

/* The lines are C strings: what follows a NUL would go unread. */
static int check_nul(const char *text, size_t len, char *err, size_t errlen)
{
	const char *nul = memchr(text, '\0', len);
	unsigned int lineno = 1;

	if (!nul)
		return 0;
	for (const char *p = text; p < nul; p++)
		lineno += *p == '\n';
	snprintf(err, errlen, "line %u: a NUL byte; the file is damaged",
		 lineno);
	return -EINVAL;
}

static int parse(char *text, size_t len, struct sl_secrets *s, char *err,
		 size_t errlen)
{
	char *line = text, *nl;
	unsigned int lineno = 0;
	const char *why;
	int ret;

	ret = check_nul(text, len, err, errlen);
	if (ret)
		return ret;
	/* an entry per line at most: a short file is quick to wipe (the
	 * fuzz target loads thousands a second) */
	s->cap = 1;
	for (size_t i = 0; i < len && s->cap < SL_SECRETS_MAX; i++)
		s->cap += text[i] == '\n';
	s->v = calloc(s->cap, sizeof(*s->v));
	if (!s->v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}

	for (; line && *line; line = nl) {
		struct sl_secret *e, *known;
		char *p;

		lineno++;
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		for (p = line; *p == ' ' || *p == '\t' || *p == '\r'; p++)
			;
		if (!*p || *p == '#')
			continue;
		if (s->n >= SL_SECRETS_MAX) {
			snprintf(err, errlen, "line %u: more than %d "
				 "namespaces", lineno, SL_SECRETS_MAX);
			return -EINVAL;
		}
		e = &s->v[s->n];
		if (parse_line(p, e, &why)) {
			snprintf(err, errlen, "line %u: %s", lineno, why);
			return -EINVAL;
		}
		known = (struct sl_secret *)sl_secrets_find(s, e->ns);
		if (!known) {
			s->n++;
			continue;
		}
		if (known->n_keys == SL_SECRET_KEYS) {
			snprintf(err, errlen, "line %u: namespace '%s' has a "
				 "third secret: a rotation holds two, the old "
				 "and the new", lineno, e->ns);
			return -EINVAL;
		}
		/* the rotation's newer secret */
		memcpy(known->key[1], e->key[0], e->len[0]);
		known->len[1] = e->len[0];
		known->n_keys = 2;
		OPENSSL_cleanse(e, sizeof(*e));
	}
	return 0;
}

int sl_secrets_load(const char *path, struct sl_secrets *out, char *err,
		    size_t errlen)
{
	struct sl_secrets s = {0};
	char *text = NULL;
	struct stat st;
	ssize_t got;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		ret = -EINVAL;
		goto out;
	}
	ret = sl_check_owner(path, &st, err, errlen);
	if (ret)
		goto out;
	if (st.st_mode & 077) {
		snprintf(err, errlen,
			 "%s: mode %04o gives group or other access to the "
			 "secrets; chmod 0600 it",
			 path, (unsigned int)(st.st_mode & 07777));
		ret = -EPERM;
		goto out;
	}
	if (st.st_size > SL_SECRETS_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %u bytes", path,
			 SL_SECRETS_FILE_MAX);
		ret = -EFBIG;
		goto out;
	}
	text = calloc(1, st.st_size + 1);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	got = read(fd, text, st.st_size);
	if (got != st.st_size) {
		ret = got < 0 ? -errno : -EIO;
		snprintf(err, errlen, "%s: short read", path);
		goto out;
	}
	ret = parse(text, st.st_size, &s, err, errlen);
	if (ret) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", err);
		snprintf(err, errlen, "%s: %s", path, msg);
		goto out;
	}
	*out = s;
	s.v = NULL;
out:
	if (text) {
		OPENSSL_cleanse(text, st.st_size);
		free(text);
	}
	sl_secrets_free(&s);
	close(fd);
	return ret;
}

const struct sl_secret *sl_secrets_find(const struct sl_secrets *s,
					const char *ns)
{
	for (size_t i = 0; i < s->n; i++) {
		if (!strcmp(s->v[i].ns, ns))
			return &s->v[i];
	}
	return NULL;
}

void sl_secrets_free(struct sl_secrets *s)
{
	if (s->v) {
		OPENSSL_cleanse(s->v, s->cap * sizeof(*s->v));
		free(s->v);
	}
	s->v = NULL;
	s->n = 0;
	s->cap = 0;
}

struct sl_secrets *sl_secrets_load_new(const char *path, char *err,
				       size_t errlen)
{
	struct sl_secrets *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (sl_secrets_load(path, s, err, errlen)) {
		free(s);
		return NULL;
	}
	return s;
}

void sl_secrets_destroy(struct sl_secrets *s)
{
	if (s)
		sl_secrets_free(s);
	free(s);
}
