/* SPDX-License-Identifier: GPL-2.0 */
/* Per-namespace shared secrets for tokend and agents (docs/cluster.md). */
#ifndef SLUICE_SECRETS_H
#define SLUICE_SECRETS_H

#include <stddef.h>
#include <stdint.h>

#define SL_SECRET_MIN 16  /* bytes; shorter ones are guessable */
#define SL_SECRET_MAX 256
#define SL_SECRETS_MAX 4096

#define SL_SECRET_KEYS 2 /* a namespace's secrets during a rotation */

/* A namespace's secrets in file order: the last is the newest. */
struct sl_secret {
	char ns[64];
	uint8_t key[SL_SECRET_KEYS][SL_SECRET_MAX];
	size_t len[SL_SECRET_KEYS];
	size_t n_keys;
};

struct sl_secrets {
	struct sl_secret *v;
	size_t n;
	size_t cap; /* entries allocated, all wiped when freed */
};

/*
 * Read "namespace secret" lines ('#' comments and blank lines allowed); a
 * namespace may have a second line during a rotation (the newer secret).
 * The file must be a regular file without group or other permissions
 * (mode 0600 or 0400): -EPERM otherwise. -EINVAL for a bad line, with
 * the line number in err. *out is untouched on failure.
 */
int sl_secrets_load(const char *path, struct sl_secrets *out, char *err,
		    size_t errlen);

/* sl_secrets_load() into a new allocation, or NULL (the reason in err);
 * for those that swap secrets while others hold a pointer (a reload). */
struct sl_secrets *sl_secrets_load_new(const char *path, char *err,
				       size_t errlen);

/* Wipes and frees one of sl_secrets_load_new(); NULL is fine. */
void sl_secrets_destroy(struct sl_secrets *s);

/* The entry of namespace ns, or NULL. */
const struct sl_secret *sl_secrets_find(const struct sl_secrets *s,
					const char *ns);

/* Wipes the keys. */
void sl_secrets_free(struct sl_secrets *s);

#endif
