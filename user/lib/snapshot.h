/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The persisted rule set: DIR/rules.json, read before anything else at boot
 * so that rules are in force before the first packet (brief, failure 2).
 * Format and file life cycle: docs/operations.md, "Snapshot".
 */
#ifndef SLUICE_SNAPSHOT_H
#define SLUICE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rules.h"

/* The "sluice_snapshot" format version this code reads and writes. */
#define SL_SNAPSHOT_FORMAT 1
#define SL_SNAPSHOT_FILE   "rules.json"
#define SL_SNAPSHOT_PREV   "rules.json.prev"
#define SL_SNAPSHOT_TMP	   "rules.json.tmp"
/* Versions are JSON numbers: keep them exact as doubles. */
#define SL_SNAPSHOT_VERSION_MAX ((1ULL << 53) - 1)

/* "sha256:" and the hex of 32 bytes */
#define SL_SNAPSHOT_CHECKSUM_LEN (7 + 64)

/*
 * Where the rules came from (optional in the file: snapshots without it
 * still load): an etcd key at a revision, or a rule file as it was when
 * the agent loaded it, and whether the CLI changed the rules since. At
 * most one of etcd_key and rule_file is set.
 */
struct sl_snapshot_source {
	char *etcd_key;	  /* NULL: not from etcd */
	uint64_t revision; /* the key's mod_revision the rules are */
	char *rule_file;  /* --rules, as given; NULL: not from a file */
	/* sl_snapshot_checksum() of the file's rules when loaded */
	char file_checksum[SL_SNAPSHOT_CHECKSUM_LEN + 1];
	bool changed_by_cli; /* rule add|del|replace since the file */
};

/* "sha256:HEX" over the canonical text of rs's rules: the snapshot's
 * checksum, and what tells whether a rule file changed. */
void sl_snapshot_checksum(const struct sl_ruleset *rs,
			  char out[SL_SNAPSHOT_CHECKSUM_LEN + 1]);

/* A deep copy of src into *dst (freed first with the snapshot's
 * sl_snapshot_source_free); -ENOMEM. */
int sl_snapshot_source_copy(struct sl_snapshot_source *dst,
			    const struct sl_snapshot_source *src);
void sl_snapshot_source_free(struct sl_snapshot_source *src);

struct sl_snapshot {
	uint64_t version;   /* 1.., chosen by the writer; higher is newer */
	int64_t updated_at; /* Unix seconds, UTC */
	struct sl_ruleset rules; /* rules.allow_empty kept too */
	struct sl_snapshot_source source;
};

/*
 * Read and verify one snapshot file: JSON, fields, every rule through the
 * rule parser, and the checksum over the canonical rules. Returns 0,
 * -ENOENT (missing), -EINVAL (corrupt: empty, truncated, bad JSON,
 * missing or ill-typed field, invalid rule, checksum mismatch),
 * -EPROTONOSUPPORT (unknown format version) or another -errno from I/O.
 * err names the file and the problem. *out is set only on success; free
 * it with sl_snapshot_free().
 */
int sl_snapshot_read(const char *path, struct sl_snapshot *out, char *err,
		     size_t errlen);

/*
 * What a writer knows of DIR/rules.json: the bytes it wrote there last (a
 * good snapshot), NULL when it knows nothing. Comparing them with the file
 * is much cheaper than parsing and verifying it (about 1 MB for 4096
 * rules). Free with sl_snapshot_mark_free().
 */
struct sl_snapshot_mark {
	char *text;
	size_t len;
};

void sl_snapshot_mark_free(struct sl_snapshot_mark *mark);

/*
 * Durably replace DIR/rules.json with rs as version (1..2^53-1), stamped
 * with the current time: write and fsync DIR/rules.json.tmp (0600), keep
 * the current rules.json as rules.json.prev if it is a good snapshot
 * (a corrupt one is dropped and the older .prev kept), rename the tmp file
 * over rules.json and fsync DIR. rules.json exists at every instant.
 * Creates DIR (0700) if missing. Writers are serialised by flock on DIR.
 * Refuses (-EINVAL) a rule set the parser would not read back, unless
 * parsed: every rule of rs is as the rule parser returned it (its output
 * always reads back; test_rules checks the round trip), so the check
 * would only repeat the parse.
 * mark (may be NULL) is set to what was written, or emptied on failure;
 * a current file that still has the bytes of the mark is kept as .prev
 * without being parsed and verified again.
 */
int sl_snapshot_write(const char *dir, const struct sl_ruleset *rs,
		      uint64_t version, bool parsed,
		      struct sl_snapshot_mark *mark, char *err, size_t errlen);

/* As sl_snapshot_write(), recording source (NULL: none) in the file. */
int sl_snapshot_write_source(const char *dir, const struct sl_ruleset *rs,
			     uint64_t version, bool parsed,
			     const struct sl_snapshot_source *source,
			     struct sl_snapshot_mark *mark, char *err,
			     size_t errlen);

/*
 * Make DIR/rules.json.prev current again (when applying a just-written
 * snapshot fails), after checking that it reads back good: rename it over
 * rules.json and fsync DIR. -ENOENT if there is no .prev; -EINVAL (and
 * nothing changed) if .prev is corrupt.
 */
int sl_snapshot_rollback(const char *dir, char *err, size_t errlen);

/*
 * The boot read: DIR/rules.json, or, if that is missing or bad and
 * DIR/rules.json.prev is good, the .prev with *used_prev = true and the
 * reason rules.json was rejected in err (warn loudly with it). Neither
 * file exists: -ENOENT. Both unusable: the error of rules.json (-EINVAL
 * when it is corrupt; -ENOENT turns into the .prev's error), with err
 * naming both files and their problems.
 */
int sl_snapshot_load_boot(const char *dir, struct sl_snapshot *out,
			  bool *used_prev, char *err, size_t errlen);

void sl_snapshot_free(struct sl_snapshot *s);

#endif
