/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A rule manifest (docs/fleet.md, "Pushes to a large fleet"): the small
 * value of an agent's etcd key that names a rule file by its SHA-256 and
 * size and says where to fetch it (static HTTP URLs), so that a put sends
 * each agent a few hundred bytes through etcd and the rule file comes
 * from a body server. Any other value of the key is a rule file itself,
 * as `sluice push` wrote it before manifests.
 *
 *   {"sluice_manifest": 1, "sha256": "<64 hex>", "size": BYTES,
 *    "rules": N, "urls": ["http://host/dir/<sha256>.json", ...]}
 */
#ifndef SLUICE_MANIFEST_H
#define SLUICE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define SL_MANIFEST_VERSION  1
#define SL_MANIFEST_MAX_URLS 8
#define SL_MANIFEST_URL_MAX  1024
/* a body is a rule file: 64 MiB at most (rules_parse.c) */
#define SL_MANIFEST_BODY_MAX (64u << 20)

struct sl_manifest {
	char sha256[SL_SHA256_HEX_LEN + 1];
	uint64_t size;
	uint64_t rules; /* as push counted them: for messages only */
	char url[SL_MANIFEST_MAX_URLS][SL_MANIFEST_URL_MAX];
	int n_urls;
};

/*
 * text a manifest? 0 (parsed into *m), -ENOMSG when it is not one (no
 * "sluice_manifest" member: a rule file), -EINVAL when it says it is one
 * but is not valid (the reason in err).
 */
int sl_manifest_parse(const char *text, size_t len, struct sl_manifest *m,
		      char *err, size_t errlen);

/* The manifest of body (n_rules rules) at urls "BASE[,BASE...]", each
 * BASE/<sha256>.json: malloc'd JSON, NULL on a bad URL (err) or ENOMEM. */
char *sl_manifest_build(const char *body, size_t len, uint64_t n_rules,
			const char *bases, struct sl_manifest *m, char *err,
			size_t errlen);

struct sl_etcd;

/*
 * The body of m, from its URLs in turn starting at first (spreads a
 * fleet over mirrors), checked against its size and SHA-256. 0 with *out
 * malloc'd and *used the index of the URL that served it; -EBADMSG when
 * a URL answered with other bytes and none with the body (refuse it: a
 * retry fetches the same bytes); -EIO or -ENOENT (404) when none
 * answered (retry later); the reason in err.
 */
int sl_manifest_fetch(const struct sl_etcd *e, const struct sl_manifest *m,
		      unsigned int first, int *used, char **out, size_t *len,
		      char *err, size_t errlen);

#endif
