// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_json.h"
#include "ruleset.h"
#include "util.h"

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
	if (sl_ruleset_copy(cur, add->n, &next))
		goto nomem;
	next.allow_empty = false;
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
	if (sl_ruleset_copy(cur, 0, &next))
		goto nomem;
	next.allow_empty = false;
	next.n = 0;
	for (size_t j = 0; j < cur->n; j++) {
		if (named(cur->rules[j].name, names, n_names))
			sl_rule_release(&next.rules[j]);
		else
			next.rules[next.n++] = next.rules[j];
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

/* The item of rs named name in ix (indexed by sl_fnv1a_str), or -1. */
static int64_t find_name(const struct sl_index *ix, const struct sl_ruleset *rs,
			 const char *name)
{
	size_t cur = 0;
	int64_t i;

	while ((i = sl_index_next(ix, sl_fnv1a_str(name), &cur)) >= 0)
		if (!strcmp(rs->rules[i].name, name))
			return i;
	return -1;
}

static int index_names(struct sl_index *ix, const struct sl_ruleset *rs)
{
	if (sl_index_init(ix, rs->n))
		return -ENOMEM;
	for (size_t i = 0; i < rs->n; i++)
		if (sl_index_add(ix, sl_fnv1a_str(rs->rules[i].name), i))
			return -ENOMEM;
	return 0;
}

int sl_ruleset_diff(const struct sl_ruleset *old, const struct sl_ruleset *new,
		    struct sl_ruleset_diff *d)
{
	struct sl_index in_old = { 0 }, in_new = { 0 };
	int ret = -ENOMEM;

	memset(d, 0, sizeof(*d));
	d->added = calloc(new->n + 1, sizeof(*d->added));
	d->changed = calloc(new->n + 1, sizeof(*d->changed));
	d->removed = calloc(old->n + 1, sizeof(*d->removed));
	if (!d->added || !d->changed || !d->removed ||
	    index_names(&in_old, old) || index_names(&in_new, new))
		goto out;
	for (size_t i = 0; i < new->n; i++) {
		const struct sl_rule *r = &new->rules[i];
		int64_t o = find_name(&in_old, old, r->name);

		if (o < 0)
			d->added[d->n_added++] = r->name;
		else if (sl_rule_def_hash(r) != sl_rule_def_hash(&old->rules[o]) ||
			 r->priority != old->rules[o].priority ||
			 r->layer != old->rules[o].layer)
			d->changed[d->n_changed++] = r->name;
	}
	for (size_t i = 0; i < old->n; i++)
		if (find_name(&in_new, new, old->rules[i].name) < 0)
			d->removed[d->n_removed++] = old->rules[i].name;
	ret = 0;
out:
	sl_index_free(&in_old);
	sl_index_free(&in_new);
	return ret;
}

void sl_ruleset_diff_free(struct sl_ruleset_diff *d)
{
	free(d->added);
	free(d->removed);
	free(d->changed);
	memset(d, 0, sizeof(*d));
}

cJSON *sl_ruleset_diff_json(const struct sl_ruleset *old,
			    const struct sl_ruleset *new)
{
	struct sl_ruleset_diff d;
	cJSON *o = NULL;

	if (!sl_ruleset_diff(old, new, &d) && (o = cJSON_CreateObject()) &&
	    (!cJSON_AddItemToObject(o, "added", cJSON_CreateStringArray(
						       d.added, d.n_added)) ||
	     !cJSON_AddItemToObject(o, "removed", cJSON_CreateStringArray(
							 d.removed, d.n_removed)) ||
	     !cJSON_AddItemToObject(o, "changed", cJSON_CreateStringArray(
							 d.changed, d.n_changed)))) {
		cJSON_Delete(o);
		o = NULL;
	}
	sl_ruleset_diff_free(&d);
	return o;
}

void sl_ruleset_diff_text(const struct sl_ruleset_diff *d, char *buf,
			  size_t len)
{
	const struct {
		const char *what;
		const char **names;
		size_t n;
	} parts[] = {
		{ "added", d->added, d->n_added },
		{ "removed", d->removed, d->n_removed },
		{ "changed", d->changed, d->n_changed },
	};
	/* room kept for the count of what does not fit */
	const size_t tail = sizeof(" ... and 99999 more"); /* SL_MAX_RULES */
	size_t used = 0, more = 0;

	if (!len)
		return;
	buf[0] = 0;
	for (size_t p = 0; p < ARRAY_SIZE(parts); p++) {
		for (size_t i = 0; i < parts[p].n; i++) {
			const char *name = parts[p].names[i];
			size_t need = strlen(name) +
				      (i ? 2 : strlen(parts[p].what) + 3);

			if (more || used + need + tail > len) {
				more++;
				continue;
			}
			used += snprintf(buf + used, len - used, "%s%s%s%s",
					 !i && used ? "; " : "",
					 i ? ", " : parts[p].what,
					 i ? "" : " ", name);
		}
	}
	if (more)
		snprintf(buf + used, len - used, " ... and %zu more", more);
	else if (!used)
		snprintf(buf, len, "no rule changed");
}
