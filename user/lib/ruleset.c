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

/* The rule of rs named name, through ix (rs's names); NULL: none. */
static const struct sl_rule *by_name(const struct sl_ruleset *rs,
				     const struct sl_index *ix,
				     const char *name)
{
	size_t cursor = 0;
	int64_t i;

	while ((i = sl_index_next(ix, sl_fnv1a_str(name), &cursor)) >= 0)
		if (!strcmp(rs->rules[i].name, name))
			return &rs->rules[i];
	return NULL;
}

static int index_names(const struct sl_ruleset *rs, struct sl_index *ix)
{
	int err = sl_index_init(ix, rs->n);

	for (size_t i = 0; !err && i < rs->n; i++)
		err = sl_index_add(ix, sl_fnv1a_str(rs->rules[i].name), i);
	return err;
}

struct diff_out {
	char *buf;
	size_t len, used, more;
	const char *group; /* the group's word, until its first name */
};

/* Append name under d->group; counted when it does not fit, with room
 * kept for the count. */
static void diff_name(struct diff_out *d, const char *name)
{
	size_t need = strlen(name) + (d->group ? strlen(d->group) + 3 : 2);

	if (d->more || d->used + need + sizeof(" ... and 4294967295 more") >
			       d->len) {
		d->more++;
		return;
	}
	d->used += snprintf(d->buf + d->used, d->len - d->used, "%s%s%s%s",
			    d->group && d->used ? "; " : "",
			    d->group ? d->group : ", ", d->group ? " " : "",
			    name);
	d->group = NULL;
}

void sl_ruleset_diff(const struct sl_ruleset *old,
		     const struct sl_ruleset *next, char *out, size_t len)
{
	struct sl_index io = { 0 }, in = { 0 };
	struct diff_out d = { .buf = out, .len = len };
	const struct sl_rule *r;

	if (!len)
		return;
	out[0] = '\0';
	if (index_names(old, &io) || index_names(next, &in)) {
		snprintf(out, len, "(out of memory)");
		goto out;
	}
	d.group = "added";
	for (size_t i = 0; i < next->n; i++)
		if (!by_name(old, &io, next->rules[i].name))
			diff_name(&d, next->rules[i].name);
	d.group = "removed";
	for (size_t i = 0; i < old->n; i++)
		if (!by_name(next, &in, old->rules[i].name))
			diff_name(&d, old->rules[i].name);
	d.group = "changed";
	for (size_t i = 0; i < next->n; i++)
		if ((r = by_name(old, &io, next->rules[i].name)) &&
		    sl_rule_def_hash(r) != sl_rule_def_hash(&next->rules[i]))
			diff_name(&d, next->rules[i].name);
	if (d.more)
		snprintf(out + d.used, len - d.used, " ... and %zu more",
			 d.more);
	else if (!d.used)
		snprintf(out, len, "nothing changed");
out:
	sl_index_free(&io);
	sl_index_free(&in);
}
