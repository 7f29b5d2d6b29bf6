/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to the snapshot (snapshot.h): what its files call of each
 * other. snapshot.c: a snapshot document read and checked; snapshot_store.c:
 * the files of the state directory (written durable, the previous one
 * kept, rollback, the boot's choice).
 */
#ifndef SLUICE_SNAPSHOT_INT_H
#define SLUICE_SNAPSHOT_INT_H

#include <stddef.h>

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

/* snapshot.c */
const char *snapshot_errstr(int e, char *buf, size_t len);
int snapshot_read_all(const char *path, char **bufp, size_t *lenp, char *err,
		      size_t errlen);
void snapshot_canon_checksum(const char *canon, char out[SL_CHECKSUM_LEN + 1]);

#endif
