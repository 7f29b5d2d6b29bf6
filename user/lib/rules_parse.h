/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading rule files: cJSON parses, then every field is validated and
 * every error collected (docs/rules.md, rules/schema.json).
 */
#ifndef SLUICE_RULES_PARSE_H
#define SLUICE_RULES_PARSE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "rules.h"

/*
 * Parse and validate a rule document. On failure returns -EINVAL and
 * writes every error found, one per line, each naming the rule and the
 * field, into err (truncated to errlen). *out is untouched on failure.
 */
int sl_rules_parse(const char *json, size_t len, struct sl_ruleset *out,
		   char *err, size_t errlen);

/*
 * As sl_rules_parse, for a document the caller already holds parsed
 * ({"rules": [...]}); doc is not modified.
 */
int sl_rules_from_cjson(const cJSON *doc, struct sl_ruleset *out, char *err,
			size_t errlen);

/* As sl_rules_from_cjson, for a bare rules array (as {"rules": arr}). */
int sl_rules_from_array(const cJSON *arr, struct sl_ruleset *out, char *err,
			size_t errlen);

/* The bytes of a rule file (64 MiB at most; "-" reads stdin), not parsed:
 * *text malloc'd, NUL-terminated; errors name the file. */
int sl_rules_read_file(const char *path, char **text, size_t *len,
		       char *err, size_t errlen);

/* As sl_rules_parse, reading path; I/O errors name the file. */
int sl_rules_load_file(const char *path, struct sl_ruleset *out, char *err,
		       size_t errlen);

#endif
