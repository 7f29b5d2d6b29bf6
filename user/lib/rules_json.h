/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The canonical form of rules: every field explicit (an optional one left
 * out at its default), in the order of the rule field table
 * (rule_fields.h), laid out exactly as cJSON prints it, written without
 * building a tree. Snapshot checksums are taken over it, so it must not
 * change with the cJSON version. A rule's identity is not (it is a hash
 * of its fields).
 */
#ifndef SLUICE_RULES_JSON_H
#define SLUICE_RULES_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "json_text.h"
#include "rule_fields.h"
#include "rules.h"

/*
 * [each rule in the file format] on one line: name, match {proto, dport,
 * dst, src, vlan}, grade, count, window, per_source (if set), mode,
 * priority (if set), behavior, cluster (if set; quotas sorted by node),
 * breaker, system (if set). dport is an
 * integer for one port, "lo-hi" for a range; dport, dst and src are left
 * out when they match anything. Parsing the result gives the rules back
 * (but for file_index). malloc'd, NULL when out of memory.
 */
char *sl_rules_text(const struct sl_ruleset *rs);

/*
 * {"rules": [...]}, pretty-printed (as cJSON_Print() would) or on one
 * line. malloc'd, free with free(); NULL with errno ENOMEM.
 */
char *sl_ruleset_to_json(const struct sl_ruleset *rs, bool pretty);

/*
 * The rule's identity (rule_fields.h, sl_rule_identity() over
 * sl_rule_fields): equal means the same definition, a changed one is a
 * new rule; it is what rule slots are matched by. Priority is not part
 * of it (it only steers classification). Never 0.
 */
uint64_t sl_rule_def_hash(const struct sl_rule *r);

/* sl_rule_def_hash() of each rule of rs into out[i]. */
void sl_rule_def_hashes(const struct sl_ruleset *rs, uint64_t *out);

/*
 * FNV-1a 64 of the rule's canonical one-line text without priority (0
 * when out of memory): the identity that agents before the field table
 * pinned (docs/operations.md, "Upgrading").
 */
uint64_t sl_rule_text_hash(const struct sl_rule *r);

/* Whether a slot pinned with hash pinned holds r, whose identity is id:
 * by identity, or by the text hash of an earlier agent (printed only
 * when the identity differs). */
bool sl_rule_pinned_as(const struct sl_rule *r, uint64_t id,
		       uint64_t pinned);

#endif
