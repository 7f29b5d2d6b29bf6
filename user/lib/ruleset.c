// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ruleset.h"

static bool has_rule(const struct sl_ruleset *rs, const char *name)
{
	for (size_t i = 0; i < rs->n; i++)
		if (!strcmp(rs->rules[i].name, name))
			return true;
	return false;
}

static void renumber(struct sl_ruleset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		rs->rules[i].file_index = i;
}

int sl_ruleset_add(const struct sl_ruleset *cur, struct sl_ruleset *add,
		   struct sl_ruleset *out, char *err, size_t errlen)
{
	struct sl_ruleset next = { 0 };

	for (size_t i = 0; i < add->n; i++) {
		if (has_rule(cur, add->rules[i].name)) {
			snprintf(err, errlen,
				 "rule '%s' exists already; delete it first "
				 "or use `rule replace`",
				 add->rules[i].name);
			return -EEXIST;
		}
	}
	if (cur->n + add->n > SL_MAX_RULES) {
		snprintf(err, errlen, "%zu rules would exceed the limit of %d",
			 cur->n + add->n, SL_MAX_RULES);
		return -E2BIG;
	}
	next.rules = calloc(cur->n + add->n + 1, sizeof(*next.rules));
	if (!next.rules)
		goto nomem;
	for (; next.n < cur->n; next.n++)
		if (sl_rule_copy(&next.rules[next.n], &cur->rules[next.n])) {
			sl_ruleset_free(&next);
			goto nomem;
		}
	/* the new rules move over, with what they own */
	memcpy(next.rules + next.n, add->rules, add->n * sizeof(*add->rules));
	next.n += add->n;
	free(add->rules);
	*add = (struct sl_ruleset){ 0 };
	renumber(&next);
	*out = next;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

static bool named(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

int sl_ruleset_del(const struct sl_ruleset *cur, const char *const *names,
		   size_t n_names, struct sl_ruleset *out, char *err,
		   size_t errlen)
{
	struct sl_ruleset next = { 0 };

	for (size_t i = 0; i < n_names; i++) {
		if (!has_rule(cur, names[i])) {
			snprintf(err, errlen, "no rule named '%s'", names[i]);
			return -ENOENT;
		}
	}
	next.rules = calloc(cur->n + 1, sizeof(*next.rules));
	if (!next.rules)
		goto nomem;
	for (size_t j = 0; j < cur->n; j++) {
		if (named(cur->rules[j].name, names, n_names))
			continue;
		if (sl_rule_copy(&next.rules[next.n], &cur->rules[j])) {
			sl_ruleset_free(&next);
			goto nomem;
		}
		next.n++;
	}
	renumber(&next);
	*out = next;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

void sl_ruleset_replace(struct sl_ruleset *next, struct sl_ruleset *out)
{
	*out = *next;
	*next = (struct sl_ruleset){ 0 };
	renumber(out);
}
