/* SPDX-License-Identifier: GPL-2.0 */
/* The canonical form of rules, as text (rules_json.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_json.h"
#include "util.h"

/* A JSON string as cJSON prints it. */
static void text_str(struct sl_text *t, const char *s)
{
	sl_text_put(t, "\"", 1);
	for (;;) {
		const char *q = s;
		char esc[8];

		while (*q && *q != '"' && *q != '\\' &&
		       (unsigned char)*q >= 0x20)
			q++;
		sl_text_put(t, s, q - s);
		if (!*q)
			break;
		switch (*q) {
		case '\b':
			strcpy(esc, "\\b");
			break;
		case '\f':
			strcpy(esc, "\\f");
			break;
		case '\n':
			strcpy(esc, "\\n");
			break;
		case '\r':
			strcpy(esc, "\\r");
			break;
		case '\t':
			strcpy(esc, "\\t");
			break;
		case '"':
		case '\\':
			snprintf(esc, sizeof(esc), "\\%c", *q);
			break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)*q);
		}
		sl_text_put(t, esc, strlen(esc));
		s = q + 1;
	}
	sl_text_put(t, "\"", 1);
}

/* A share or a load kept as a multiple of 1/scale, as a JSON number. */
static void text_fraction(struct sl_text *t, uint32_t v, uint32_t scale)
{
	char num[48];
	int n = snprintf(num, sizeof(num), "%.6g", (double) v / scale);

	sl_text_put(t, num, n);
}

/* Whether the canonical text leaves f out of r (absent, or SL_FF_OMIT at
 * its default). */
static bool text_omits(const struct sl_field *f, const struct sl_rule *r)
{
	const struct sl_prefix *p = (const void *)((const char *)r + f->off);

	if (f->present && !sl_field_present(f, r))
		return true;
	if ((f->flags & SL_FF_LIMIT) && r->action != SL_ACTION_LIMIT)
		return true;
	if (!(f->flags & SL_FF_OMIT))
		return false;
	switch (f->type) {
	case SL_FT_PORTS:
		return !r->dport_lo;
	case SL_FT_PREFIX:
		return !p->family;
	case SL_FT_VLAN:
		return !r->has_vlan;
	case SL_FT_QUOTAS:
		return !r->cluster.n_quotas;
	default:
		return sl_field_uint(f, r) == f->def;
	}
}

static size_t fields_text(struct sl_text *t, const struct sl_field *tab,
			  size_t n, size_t i, const struct sl_rule *r,
			  bool id_only);

/* The value of field i of tab; returns the index after it. */
static size_t value_text(struct sl_text *t, const struct sl_field *tab,
			 size_t n, size_t i, const struct sl_rule *r,
			 bool id_only)
{
	const struct sl_field *f = &tab[i];
	const char *p = (const char *)r + f->off;
	const struct sl_cluster *c = &r->cluster;
	char buf[INET6_ADDRSTRLEN + 8];

	switch (f->type) {
	case SL_FT_SECTION:
		return fields_text(t, tab, n, i, r, id_only);
	case SL_FT_NAME:
		text_str(t, p);
		break;
	case SL_FT_ENUM:
		text_str(t, f->names[sl_field_uint(f, r)]);
		break;
	case SL_FT_UINT:
		sl_text_u64(t, "", sl_field_uint(f, r));
		break;
	case SL_FT_FRACTION:
		text_fraction(t, sl_field_uint(f, r), f->scale);
		break;
	case SL_FT_THRESHOLD:
		if (r->breaker.strategy == SL_BRK_ERROR_COUNT)
			sl_text_u64(t, "", r->breaker.threshold);
		else
			text_fraction(t, r->breaker.threshold, f->scale);
		break;
	case SL_FT_PORTS:
		if (r->dport_lo == r->dport_hi) {
			sl_text_u64(t, "", r->dport_lo);
		} else {
			sl_text_u64(t, "\"", r->dport_lo);
			sl_text_u64(t, "-", r->dport_hi);
			sl_text_put(t, "\"", 1);
		}
		break;
	case SL_FT_PREFIX:
		sl_prefix_str((const struct sl_prefix *)p, buf, sizeof(buf));
		text_str(t, buf);
		break;
	case SL_FT_VLAN:
		if (r->vlan)
			sl_text_u64(t, "", r->vlan);
		else
			text_str(t, "untagged");
		break;
	case SL_FT_QUOTAS:
		sl_text_put(t, "{", 1);
		for (uint32_t q = 0; q < c->n_quotas; q++) {
			if (q)
				sl_text_put(t, ",", 1);
			text_str(t, c->quotas[q].node);
			sl_text_u64(t, ":", c->quotas[q].count);
		}
		sl_text_put(t, "}", 1);
		break;
	case SL_FT_FALLBACK:
		if (c->fallback == SL_FB_FIXED) {
			sl_text_u64(t, "{\"fixed\":", c->fallback_fixed);
			sl_text_put(t, "}", 1);
		} else {
			text_str(t, f->names[c->fallback]);
		}
		break;
	}
	return i + 1;
}

/*
 * The object of section s of tab (s == n: the rule itself), each field
 * that is not left out as "key":value in table order; a section with a
 * string form (behavior's "reject") prints it when no field is left.
 * Returns the index after the section. id_only leaves out SL_FF_NO_ID.
 */
static size_t fields_text(struct sl_text *t, const struct sl_field *tab,
			  size_t n, size_t s, const struct sl_rule *r,
			  bool id_only)
{
	size_t i = s == n ? 0 : s + 1, end = s == n ? n :
					     sl_field_next(tab, n, s);
	size_t start = t->len;
	bool first = true;

	sl_text_put(t, "{", 1);
	while (i < end) {
		const struct sl_field *f = &tab[i];

		if ((id_only && (f->flags & SL_FF_NO_ID)) || text_omits(f, r)) {
			i = sl_field_next(tab, n, i);
			continue;
		}
		sl_text_put(t, first ? "\"" : ",\"", first ? 1 : 2);
		sl_text_put(t, sl_field_key(f), strlen(sl_field_key(f)));
		sl_text_put(t, "\":", 2);
		i = value_text(t, tab, n, i, r, id_only);
		first = false;
	}
	if (first && s < n && tab[s].n_names) {
		t->len = start;
		text_str(t, tab[s].names[0]);
	} else {
		sl_text_put(t, "}", 1);
	}
	return end;
}

/* The canonical text of r (rules_json.h); test_rules checks it against a
 * cJSON tree printed by cJSON. */
static void rule_text(struct sl_text *t, const struct sl_rule *r,
		      bool with_priority)
{
	fields_text(t, sl_rule_fields, sl_n_rule_fields, sl_n_rule_fields, r,
		    !with_priority);
}

char *sl_rules_text(const struct sl_ruleset *rs)
{
	struct sl_text t = { 0 };

	sl_text_put(&t, "[", 1);
	for (size_t i = 0; i < rs->n; i++) {
		if (i)
			sl_text_put(&t, ",", 1);
		rule_text(&t, &rs->rules[i], true);
	}
	sl_text_put(&t, "]", 1);
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

char *sl_ruleset_to_json(const struct sl_ruleset *rs, bool pretty)
{
	struct sl_text t = { 0 }, out = { 0 };
	char *arr = sl_rules_text(rs);
	struct sl_json j;

	if (arr) {
		sl_text_put(&t, "{\"rules\":", strlen("{\"rules\":"));
		sl_text_put(&t, arr, strlen(arr));
		sl_text_put(&t, "}", 1);
	}
	free(arr);
	if (!arr || t.nomem || !pretty)
		goto out;
	j = (struct sl_json){ .p = t.buf, .end = t.buf + t.len, .out = &out };
	sl_json_object(&j, 0, true, NULL);
	free(t.buf);
	t = out;
out:
	if (!arr || t.nomem) {
		free(t.buf);
		errno = ENOMEM;
		return NULL;
	}
	return t.buf;
}

/* FNV-1a 64 of rule_text() without priority, printed into t (reused). */
static uint64_t text_hash(struct sl_text *t, const struct sl_rule *r)
{
	uint64_t h;

	t->len = 0;
	rule_text(t, r, false);
	if (t->nomem)
		return 0;
	h = sl_fnv1a(SL_FNV1A_INIT, t->buf, t->len);
	return h ? h : 1; /* 0 means "out of memory" */
}

uint64_t sl_rule_text_hash(const struct sl_rule *r)
{
	struct sl_text t = { 0 };
	uint64_t h = text_hash(&t, r);

	free(t.buf);
	return h;
}

bool sl_rule_pinned_as(const struct sl_rule *r, uint64_t id, uint64_t pinned)
{
	return pinned == id || (pinned && pinned == sl_rule_text_hash(r));
}

uint64_t sl_rule_def_hash(const struct sl_rule *r)
{
	return sl_rule_identity(sl_rule_fields, sl_n_rule_fields, r);
}

void sl_rule_def_hashes(const struct sl_ruleset *rs, uint64_t *out)
{
	for (size_t i = 0; i < rs->n; i++)
		out[i] = sl_rule_def_hash(&rs->rules[i]);
}
