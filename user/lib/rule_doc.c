/* SPDX-License-Identifier: GPL-2.0 */
/* The schema and the man page's field table, from the field table
 * (rule_doc.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_text.h"
#include "rule_doc.h"
#include "rule_fields.h"
#include "util.h"

#define NAME_PATTERN "^[a-z0-9_.-]{1,63}$"
#define NODE_PATTERN "^[A-Za-z0-9_.:-]{1,63}$"
#define PORTS_PATTERN "^[0-9]{1,5}(-[0-9]{1,5})?$"

static const char schema_comment[] =
	"Generated from user/lib/rule_fields.c by `make rules-gen`: do not "
	"edit. The parser (user/lib/rules_parse.c) is the authority. It also "
	"checks what this schema cannot say: rule names are unique; a dport "
	"range has lo <= hi; a prefix has no host bits set beyond its length "
	"and is not IPv4-mapped IPv6; match.dst and match.src are of one "
	"address family; window.interval_ms divides evenly by "
	"window.sample_count into buckets of at least 5 ms; "
	"behavior.warm_up.cold_factor is not larger than count; "
	"cluster.quotas do not sum above count; system.floor is not above "
	"count; system.accept_queue needs a tcp cps rule with a dport; "
	"system is not combined with cluster, per_source or warm_up.";

/* Parsed JSON text from this file's own constants: NULL only when out of
 * memory (test_rule_fields parses each). */
static cJSON *json(const char *text)
{
	return cJSON_Parse(text);
}

/* The members of the JSON object text, moved into o. */
static void merge(cJSON *o, const char *text)
{
	cJSON *x = text ? json(text) : NULL;

	while (x && x->child) {
		cJSON *it = cJSON_DetachItemViaPointer(x, x->child);

		cJSON_AddItemToObject(o, it->string, it);
	}
	cJSON_Delete(x);
}

static void add_names(cJSON *o, const char *key, const char *const *names,
		      size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
}

static cJSON *ref(const char *def)
{
	char buf[96];
	cJSON *o = cJSON_CreateObject();

	snprintf(buf, sizeof(buf), "#/$defs/%s", def);
	cJSON_AddStringToObject(o, "$ref", buf);
	return o;
}

static cJSON *integer(uint64_t lo, uint64_t hi)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "type", "integer");
	cJSON_AddNumberToObject(o, "minimum", lo);
	cJSON_AddNumberToObject(o, "maximum", hi);
	return o;
}

/* Whether the table's default is one a file may write (and not one that
 * follows other fields). */
static bool has_default(const struct sl_field *f)
{
	return !(f->flags & (SL_FF_REQUIRED | SL_FF_DEF_VARIES)) &&
	       f->def >= f->lo && f->def <= f->hi;
}

/* The schema of field f (a section: a reference to its definition). */
static cJSON *field_schema(const struct sl_field *f)
{
	cJSON *o = cJSON_CreateObject(), *one, *alt;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "description", f->doc);
	switch (f->type) {
	case SL_FT_SECTION:
		if (!f->n_names) {
			cJSON_Delete(o);
			return ref(sl_field_key(f));
		}
		cJSON_AddStringToObject(o, "default", f->names[0]);
		one = cJSON_AddArrayToObject(o, "oneOf");
		alt = cJSON_CreateObject();
		cJSON_AddStringToObject(alt, "const", f->names[0]);
		cJSON_AddItemToArray(one, alt);
		cJSON_AddItemToArray(one, ref(sl_field_key(f)));
		break;
	case SL_FT_NAME:
		cJSON_AddStringToObject(o, "type", "string");
		cJSON_AddStringToObject(o, "pattern", NAME_PATTERN);
		break;
	case SL_FT_ENUM:
		add_names(o, "enum", f->names, f->n_names);
		if (!(f->flags & (SL_FF_REQUIRED | SL_FF_DEF_VARIES)))
			cJSON_AddStringToObject(o, "default", f->names[f->def]);
		break;
	case SL_FT_UINT:
		cJSON_AddStringToObject(o, "type", "integer");
		cJSON_AddNumberToObject(o, "minimum", f->lo);
		cJSON_AddNumberToObject(o, "maximum", f->hi);
		if (has_default(f))
			cJSON_AddNumberToObject(o, "default", f->def);
		break;
	case SL_FT_FRACTION:
	case SL_FT_THRESHOLD:
		cJSON_AddStringToObject(o, "type", "number");
		cJSON_AddNumberToObject(o, "exclusiveMinimum", 0);
		cJSON_AddNumberToObject(o, "maximum", f->hi);
		break;
	case SL_FT_PORTS:
		one = cJSON_AddArrayToObject(o, "oneOf");
		cJSON_AddItemToArray(one, integer(f->lo, f->hi));
		alt = cJSON_CreateObject();
		cJSON_AddStringToObject(alt, "type", "string");
		cJSON_AddStringToObject(alt, "pattern", PORTS_PATTERN);
		cJSON_AddItemToArray(one, alt);
		break;
	case SL_FT_PREFIX:
		cJSON_AddStringToObject(o, "$ref", "#/$defs/prefix");
		break;
	case SL_FT_VLAN:
		one = cJSON_AddArrayToObject(o, "oneOf");
		cJSON_AddItemToArray(one, integer(f->lo, f->hi));
		alt = cJSON_CreateObject();
		cJSON_AddStringToObject(alt, "const", "untagged");
		cJSON_AddItemToArray(one, alt);
		break;
	case SL_FT_QUOTAS:
		cJSON_AddStringToObject(o, "type", "object");
		cJSON_AddNumberToObject(o, "minProperties", 1);
		cJSON_AddNumberToObject(o, "maxProperties", SL_MAX_QUOTAS);
		alt = cJSON_AddObjectToObject(o, "propertyNames");
		cJSON_AddStringToObject(alt, "pattern", NODE_PATTERN);
		cJSON_AddItemToObject(o, "additionalProperties",
				      integer(0, f->hi));
		break;
	case SL_FT_FALLBACK:
		/* the last name, "fixed", is the object form */
		cJSON_AddStringToObject(o, "default", f->names[f->def]);
		one = cJSON_AddArrayToObject(o, "oneOf");
		alt = cJSON_CreateObject();
		add_names(alt, "enum", f->names, f->n_names - 1);
		cJSON_AddItemToArray(one, alt);
		alt = json("{\"type\": \"object\", \"additionalProperties\": "
			   "false, \"required\": [\"fixed\"], \"properties\": "
			   "{}}");
		cJSON_AddItemToObject(cJSON_GetObjectItem(alt, "properties"),
				      "fixed", integer(f->lo, f->hi));
		cJSON_AddItemToArray(one, alt);
		break;
	}
	return o;
}

/* {"required": [key]}, taking key */
static cJSON *json_required(cJSON *key)
{
	cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "required");

	cJSON_AddItemToArray(a, key);
	return o;
}

/*
 * The fields of a limit (SL_FF_LIMIT): required ones only with action
 * limit, and none of them with allow or deny. Duplicates the arrays into
 * an "allOf" of o.
 */
static void add_limit_only(cJSON *o, const cJSON *required,
			   const cJSON *fields)
{
	cJSON *all = cJSON_GetObjectItem(o, "allOf");
	cJSON *c = json("{\"if\": {\"required\": [\"action\"], "
			"\"properties\": {\"action\": {\"enum\": "
			"[\"allow\", \"deny\"]}}}, \"then\": {\"not\": {}}, "
			"\"else\": {}}");

	if (!all)
		all = cJSON_AddArrayToObject(o, "allOf");
	cJSON_AddItemToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "then"),
						  "not"),
			      "anyOf", cJSON_Duplicate(fields, true));
	cJSON_AddItemToObject(cJSON_GetObjectItem(c, "else"), "required",
			      cJSON_Duplicate(required, true));
	cJSON_AddItemToArray(all, c);
}

/* The definition of section s (s == n: the rule itself). */
static cJSON *section_def(size_t s)
{
	const struct sl_field *tab = sl_rule_fields;
	size_t n = sl_n_rule_fields;
	size_t i = s == n ? 0 : s + 1, end = s == n ? n
						  : sl_field_next(tab, n, s);
	cJSON *o = cJSON_CreateObject(), *req, *props, *limit_req, *limit_only;

	if (s < n && !tab[s].n_names)
		cJSON_AddStringToObject(o, "description", tab[s].doc);
	cJSON_AddStringToObject(o, "type", "object");
	cJSON_AddBoolToObject(o, "additionalProperties", false);
	req = cJSON_AddArrayToObject(o, "required");
	props = cJSON_AddObjectToObject(o, "properties");
	limit_req = cJSON_CreateArray();
	limit_only = cJSON_CreateArray();
	for (; i < end; i = sl_field_next(tab, n, i)) {
		const char *key = sl_field_key(&tab[i]);
		bool limit = tab[i].flags & SL_FF_LIMIT;

		if (tab[i].flags & SL_FF_REQUIRED)
			cJSON_AddItemToArray(limit ? limit_req : req,
					     cJSON_CreateString(key));
		if (limit)
			cJSON_AddItemToArray(
			    limit_only,
			    json_required(cJSON_CreateString(key)));
		cJSON_AddItemToObject(props, key, field_schema(&tab[i]));
	}
	if (req && !req->child)
		cJSON_DeleteItemFromObject(o, "required");
	merge(o, s == n ? sl_rule_schema_extra : tab[s].schema);
	if (limit_only->child)
		add_limit_only(o, limit_req, limit_only);
	cJSON_Delete(limit_req);
	cJSON_Delete(limit_only);
	return o;
}

char *sl_rules_schema(void)
{
	cJSON *root = cJSON_CreateObject(), *props, *defs, *rules;
	struct sl_text t = { 0 };
	char *text;

	cJSON_AddStringToObject(root, "$schema",
				"https://json-schema.org/draft/2020-12/schema");
	cJSON_AddStringToObject(root, "$id", "urn:sluice:rules-schema");
	cJSON_AddStringToObject(root, "title", "sluice rule file");
	cJSON_AddStringToObject(root, "description",
				"Rate-limit rules for sluice. Field-by-field "
				"reference: docs/rules.md.");
	cJSON_AddStringToObject(root, "$comment", schema_comment);
	cJSON_AddStringToObject(root, "type", "object");
	cJSON_AddBoolToObject(root, "additionalProperties", false);
	add_names(root, "required", &sl_doc_keys[SL_DOC_RULES].key, 1);
	props = cJSON_AddObjectToObject(root, "properties");
	for (int k = 0; k < SL_DOC_N; k++) {
		cJSON *p = json(sl_doc_keys[k].schema);

		cJSON_AddStringToObject(p, "description", sl_doc_keys[k].doc);
		cJSON_AddItemToObject(props, sl_doc_keys[k].key, p);
	}
	rules = cJSON_GetObjectItem(props, sl_doc_keys[SL_DOC_RULES].key);
	cJSON_AddNumberToObject(rules, "maxItems", SL_MAX_RULES);
	defs = cJSON_AddObjectToObject(root, "$defs");
	cJSON_AddItemToObject(defs, "rule", section_def(sl_n_rule_fields));
	for (size_t s = 0; s < sl_n_rule_fields; s++)
		if (sl_rule_fields[s].type == SL_FT_SECTION)
			cJSON_AddItemToObject(defs,
					      sl_field_key(&sl_rule_fields[s]),
					      section_def(s));
	merge(defs,
	      "{\"prefix\": {\"description\": \"IPv4 or IPv6 prefix in CIDR "
	      "notation; a bare address means /32 or /128.\", \"anyOf\": "
	      "[{\"$ref\": \"#/$defs/prefix_v4\"}, {\"$ref\": "
	      "\"#/$defs/prefix_v6\"}]}, \"prefix_v4\": {\"type\": "
	      "\"string\", \"pattern\": \"^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|"
	      "[1-9]?[0-9])\\\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?"
	      "[0-9])(/(3[0-2]|[12]?[0-9]))?$\"}, \"prefix_v6\": "
	      "{\"$comment\": \"Loose: the parser checks the address with "
	      "inet_pton.\", \"type\": \"string\", \"pattern\": "
	      "\"^[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(/(12[0-8]|1[01][0-9]|[1-9]?"
	      "[0-9]))?$\"}}");
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return NULL;
	sl_text_put(&t, text, strlen(text));
	sl_text_put(&t, "\n", 1);
	cJSON_free(text);
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

/* s for scdoc: '_' and '*' would start emphasis. */
static void man_put(struct sl_text *t, const char *s)
{
	for (; *s; s++) {
		if (*s == '_' || *s == '*' || *s == '\\')
			sl_text_put(t, "\\", 1);
		sl_text_put(t, s, 1);
	}
}

/* An indented paragraph of words, wrapped before 72 columns. */
static void man_para(struct sl_text *t, const char *text)
{
	size_t col = 8;

	sl_text_put(t, "\t", 1);
	while (*text) {
		size_t n = strcspn(text, " ");
		char word[256];

		snprintf(word, sizeof(word), "%.*s", (int)n, text);
		if (col > 8 && col + 1 + n > 72) {
			sl_text_put(t, "\n\t", 2);
			col = 8;
		} else if (col > 8) {
			sl_text_put(t, " ", 1);
			col++;
		}
		man_put(t, word);
		col += n;
		text += n;
		text += strspn(text, " ");
	}
	sl_text_put(t, "\n\n", 2);
}

/* "tcp, udp" of a mask of names. */
static void mask_names(char *buf, size_t len, uint32_t mask,
		       const char *const *names, size_t n)
{
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (mask & (1u << i))
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
				 buf[0] ? ", " : "", names[i]);
}

/* What values f takes, and its default, in words. */
static void man_values(const struct sl_field *f, char *buf, size_t len)
{
	/* the words around "lo to hi" of a range */
	static const char *const range[][2] = {
		[SL_FT_UINT] = { "An integer, ", "." },
		[SL_FT_PORTS] = { "A port, ", ", or \"lo-hi\"." },
		[SL_FT_VLAN] = { "", ", or \"untagged\"." },
	};
	char names[160];
	size_t n = f->type == SL_FT_FALLBACK ? f->n_names - 1 : f->n_names;

	switch (f->type) {
	case SL_FT_SECTION:
		snprintf(buf, len, f->n_names ? "\"%s\" or an object." :
			 "An object.", f->n_names ? f->names[0] : "");
		break;
	case SL_FT_NAME:
		snprintf(buf, len, "1 to %d of a-z, 0-9, '_', '.', '-'.",
			 SL_NAME_MAX);
		break;
	case SL_FT_ENUM:
	case SL_FT_FALLBACK:
		mask_names(names, sizeof(names), (1u << n) - 1, f->names, n);
		snprintf(buf, len, "%s%s", names,
			 f->type == SL_FT_FALLBACK ? ", or {\"fixed\": N}."
						   : ".");
		break;
	case SL_FT_UINT:
	case SL_FT_PORTS:
	case SL_FT_VLAN:
		snprintf(buf, len, "%s%llu to %llu%s", range[f->type][0],
			 (unsigned long long)f->lo, (unsigned long long)f->hi,
			 range[f->type][1]);
		break;
	case SL_FT_FRACTION:
		snprintf(buf, len, "A number above 0, at most %llu.",
			 (unsigned long long)f->hi);
		break;
	case SL_FT_THRESHOLD:
		snprintf(buf, len, "A number.");
		break;
	case SL_FT_PREFIX:
		snprintf(buf, len, "A prefix, \"198.18.0.0/15\" or "
			 "\"2001:db8::/32\".");
		break;
	case SL_FT_QUOTAS:
		snprintf(buf, len, "{\"node\": N, ...}, 1 to %d nodes.",
			 SL_MAX_QUOTAS);
		break;
	}
	if (f->type == SL_FT_ENUM && !(f->flags & (SL_FF_REQUIRED |
						   SL_FF_DEF_VARIES)))
		snprintf(buf + strlen(buf), len - strlen(buf),
			 " Default %s.", f->names[f->def]);
	else if (f->type == SL_FT_UINT && has_default(f))
		snprintf(buf + strlen(buf), len - strlen(buf),
			 " Default %llu.", (unsigned long long)f->def);
}

char *sl_rules_man_fields(void)
{
	struct sl_text t = { 0 };
	char line[512], values[256], only[96];

	sl_text_put(&t, SL_MAN_BEGIN, strlen(SL_MAN_BEGIN));
	sl_text_put(&t, "\n# DOCUMENT KEYS\n\n", 18);
	for (int k = 0; k < SL_DOC_N; k++) {
		sl_text_put(&t, "*", 1);
		man_put(&t, sl_doc_keys[k].key);
		sl_text_put(&t, "*\n", 2);
		man_para(&t, sl_doc_keys[k].doc);
	}
	sl_text_put(&t, "# RULE FIELDS\n\n", 15);
	for (size_t i = 0; i < sl_n_rule_fields; i++) {
		const struct sl_field *f = &sl_rule_fields[i];
		char protos[64], grades[32];

		mask_names(protos, sizeof(protos), f->protos, sl_proto_names,
			   SL_PROTO_COUNT);
		mask_names(grades, sizeof(grades), f->grades, sl_grade_names,
			   SL_GRADE_COUNT);
		snprintf(only, sizeof(only), "%s%s%s", protos,
			 protos[0] && grades[0] ? " " : "", grades);
		sl_text_put(&t, "*", 1);
		man_put(&t, f->path);
		sl_text_put(&t, "*", 1);
		if ((f->flags & SL_FF_REQUIRED) && (f->flags & SL_FF_LIMIT)) {
			sl_text_put(&t, " (required with action limit)", 29);
		} else if (f->flags & SL_FF_LIMIT) {
			sl_text_put(&t, " (action limit only)", 20);
		} else if ((f->flags & SL_FF_REQUIRED) && f->depth) {
			/* required in its object: name the object */
			snprintf(line, sizeof(line), "%.*s",
				 (int)(sl_field_key(f) - f->path - 1), f->path);
			sl_text_put(&t, " (required in *", 15);
			man_put(&t, line);
			sl_text_put(&t, "*)", 2);
		} else if (f->flags & SL_FF_REQUIRED) {
			sl_text_put(&t, " (required)", 11);
		}
		if (only[0]) {
			sl_text_put(&t, " (", 2);
			man_put(&t, only);
			sl_text_put(&t, " only)", 6);
		}
		sl_text_put(&t, "\n", 1);
		man_values(f, values, sizeof(values));
		snprintf(line, sizeof(line), "%s %s", values, f->doc);
		man_para(&t, line);
	}
	sl_text_put(&t, SL_MAN_END, strlen(SL_MAN_END));
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}
