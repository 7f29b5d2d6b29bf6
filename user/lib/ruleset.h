/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Changes to a rule set as pure functions: what `rule add`, `rule del`
 * and `rule replace` make of the rules in force. The result is a new set
 * (file order renumbered); the set in force is never touched, so a
 * refused change leaves it as it was.
 */
#ifndef SLUICE_RULESET_H
#define SLUICE_RULESET_H

#include <stddef.h>

#include "rules.h"

/*
 * cur and then the rules of add, which move into *out (add is emptied).
 * -EEXIST when a name of add is in cur, -E2BIG past SL_MAX_RULES,
 * -ENOMEM; err says which.
 */
int sl_ruleset_add(const struct sl_ruleset *cur, struct sl_ruleset *add,
		   struct sl_ruleset *out, char *err, size_t errlen);

/*
 * cur without the rules named: all or none, -ENOENT when a name is not in
 * cur, -ENOMEM; err says which.
 */
int sl_ruleset_del(const struct sl_ruleset *cur, const char *const *names,
		   size_t n_names, struct sl_ruleset *out, char *err,
		   size_t errlen);

/* next, moved into *out (next is emptied), as the whole new set. */
void sl_ruleset_replace(struct sl_ruleset *next, struct sl_ruleset *out);

/*
 * What changed from old to next, by name, for a log line: "added a, b;
 * removed c; changed d" ("changed": the definition differs), "nothing
 * changed". Names that do not fit in len are counted ("... and 12 more").
 */
void sl_ruleset_diff(const struct sl_ruleset *old,
		     const struct sl_ruleset *next, char *out, size_t len);

#endif
