/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Rule files: parse with cJSON, validate every field, collect every error.
 * Each field is read as the rule field table (rule_fields.h) declares it;
 * the hooks below hold only the rules between fields. The format is
 * documented in docs/rules.md and rules/schema.json.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* the strerror_r that returns a string */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h> /* isfinite(), a macro: no libm */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "json_text.h"
#include "rule_fields.h"
#include "rules_parse.h"
#include "util.h"

#define SL_RULES_FILE_MAX   (64u << 20) /* larger is surely a mistake */
#define SL_ERR_MAX_MSGS	    50
#define SL_MIN_BUCKET_MS    5
#define SL_KEY_SHOW_MAX	    64 /* longest key or value echoed in errors */

/* Error collector: one message per line, capped, always NUL-terminated. */
struct errbuf {
	char *buf;
	size_t len;
	size_t used;
	unsigned int n;
	unsigned int dropped;
};

/* Per-rule context for error prefixes: "rule 'web'" or "rule #3", made
 * only when there is an error to print. */
struct rule_ctx {
	struct errbuf *eb;
	const char *label; /* "document"; NULL: a rule */
	const char *name;  /* the rule's valid name, or NULL */
	size_t num;	   /* the rule's position, from 1 */
	int errors;
};

static void eb_append(struct errbuf *eb, const char *s)
{
	size_t room, n;

	if (!eb->buf || !eb->len || eb->used >= eb->len - 1)
		return;
	room = eb->len - 1 - eb->used;
	n = strlen(s);
	if (n > room)
		n = room;
	memcpy(eb->buf + eb->used, s, n);
	eb->used += n;
	eb->buf[eb->used] = '\0';
}

static void eb_vadd(struct errbuf *eb, const char *fmt, va_list ap)
{
	char line[512];

	if (eb->n >= SL_ERR_MAX_MSGS) {
		eb->dropped++;
		return;
	}
	vsnprintf(line, sizeof(line), fmt, ap);
	if (eb->n)
		eb_append(eb, "\n");
	eb_append(eb, line);
	eb->n++;
}

static void __attribute__((format(printf, 2, 3)))
eb_add(struct errbuf *eb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	eb_vadd(eb, fmt, ap);
	va_end(ap);
}

static void eb_finish(struct errbuf *eb)
{
	char line[64];

	if (!eb->dropped)
		return;
	snprintf(line, sizeof(line), "\n... %u more errors", eb->dropped);
	eb_append(eb, line);
}

static unsigned int eb_total(const struct errbuf *eb)
{
	return eb->n + eb->dropped;
}

/* "rule 'NAME': field 'FIELD': message" */
static void __attribute__((format(printf, 3, 4)))
rule_err(struct rule_ctx *rc, const char *field, const char *fmt, ...)
{
	char msg[400], label[SL_NAME_MAX + 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rc->errors++;
	if (rc->label)
		snprintf(label, sizeof(label), "%s", rc->label);
	else if (rc->name)
		snprintf(label, sizeof(label), "rule '%s'", rc->name);
	else
		snprintf(label, sizeof(label), "rule #%zu", rc->num);
	if (field)
		eb_add(rc->eb, "%s: field '%s': %s", label, field, msg);
	else
		eb_add(rc->eb, "%s: %s", label, msg);
}

/*
 * Copy untrusted text for an error message: keys and values may hold
 * newlines or control bytes that would break one-error-per-line output.
 */
static void show(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	for (i = 0; s[i] && o + 5 < len; i++) {
		unsigned char c = s[i];

		if (i >= SL_KEY_SHOW_MAX) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
			out[o++] = c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
}

static const char *json_type(const cJSON *it)
{
	if (cJSON_IsBool(it))
		return "boolean";
	if (cJSON_IsNull(it))
		return "null";
	if (cJSON_IsNumber(it))
		return "number";
	if (cJSON_IsString(it))
		return "string";
	if (cJSON_IsArray(it))
		return "array";
	if (cJSON_IsObject(it))
		return "object";
	return "invalid value";
}

/*
 * Report keys of obj that are not in known (NULL-terminated) and keys that
 * appear twice: cJSON keeps duplicates and a lookup would silently take
 * the first one. where is the object's own path ("match") or NULL.
 */
static void report_keys(struct rule_ctx *rc, const cJSON *obj,
			const char *where, const char *const *known)
{
	const cJSON *it, *prev;

	for (it = obj->child; it; it = it->next) {
		const char *best = NULL;
		unsigned int bestd = 3, k;
		char key[SL_KEY_SHOW_MAX * 4 + 8];
		bool found = false;

		for (prev = obj->child; prev != it; prev = prev->next) {
			if (!strcmp(prev->string, it->string))
				break;
		}
		for (k = 0; prev == it && known[k] && !found; k++)
			found = !strcmp(it->string, known[k]);
		if (found)
			continue;
		show(it->string, key, sizeof(key));
		if (prev != it) {
			rule_err(rc, where, "field '%s' given more than once",
				 key);
			continue;
		}
		/* a suggestion only for an unknown key: the rare case */
		for (k = 0; known[k]; k++) {
			unsigned int d = sl_edit_distance(it->string, known[k]);

			if (d < bestd) {
				bestd = d;
				best = known[k];
			}
		}
		if (best)
			rule_err(rc, where,
				 "unknown field '%s' (did you mean '%s'?)", key,
				 best);
		else
			rule_err(rc, where, "unknown field '%s'", key);
	}
}

/* Ours have <= 10 keys; bounds report_keys()' quadratic duplicate check. */
#define SL_MAX_FIELDS 32

/*
 * got[k] = the member of obj named known[k] (the first, as
 * cJSON_GetObjectItemCaseSensitive() finds it) or NULL, all in one walk
 * of obj; an unknown or repeated key is reported by report_keys().
 */
static void get_fields(struct rule_ctx *rc, const cJSON *obj,
		       const char *where, const char *const *known,
		       const cJSON **got)
{
	int n = 0, n_known = 0;
	bool odd = false;

	while (known[n_known])
		got[n_known++] = NULL;
	for (const cJSON *it = obj->child; it; it = it->next, n++) {
		int k = 0;

		while (known[k] && (known[k][0] != it->string[0] ||
				    strcmp(known[k], it->string)))
			k++;
		if (known[k] && !got[k])
			got[k] = it;
		else
			odd = true;
	}
	if (n > SL_MAX_FIELDS)
		rule_err(rc, where, "has %d fields; at most %d are defined", n,
			 n_known);
	else if (odd)
		report_keys(rc, obj, where, known);
}

/*
 * An integer-valued JSON number in [lo, hi]. cJSON keeps numbers as
 * double, which is exact for every integer we accept (<= 1e11 < 2^53).
 */
static int get_uint(struct rule_ctx *rc, const cJSON *it, const char *field,
		    uint64_t lo, uint64_t hi, uint64_t *out)
{
	double d;

	if (!cJSON_IsNumber(it)) {
		rule_err(rc, field, "must be an integer number, got %s",
			 json_type(it));
		return -EINVAL;
	}
	d = it->valuedouble;
	if (isfinite(d) && d > -9e18 && d < 9e18 && (double) (int64_t) d != d) {
		rule_err(rc, field, "must be an integer, got %.15g", d);
		return -EINVAL;
	}
	if (!(d >= (double) lo && d <= (double) hi)) {
		rule_err(rc, field, "must be between %llu and %llu, got %.15g",
			 (unsigned long long) lo, (unsigned long long) hi, d);
		return -EINVAL;
	}
	*out = (uint64_t) d;
	return 0;
}

static const char *get_string(struct rule_ctx *rc, const cJSON *it,
			      const char *field)
{
	if (!cJSON_IsString(it) || !it->valuestring) {
		rule_err(rc, field, "must be a string, got %s", json_type(it));
		return NULL;
	}
	return it->valuestring;
}

static bool get_object(struct rule_ctx *rc, const cJSON *it, const char *field)
{
	if (!cJSON_IsObject(it)) {
		rule_err(rc, field, "must be an object, got %s", json_type(it));
		return false;
	}
	return true;
}

static bool name_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		char c = s[i];

		if (i >= SL_NAME_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return i > 0;
}

/* A name (a rule's, a cluster namespace) into out, SL_NAME_MAX + 1 bytes. */
static void get_name(struct rule_ctx *rc, const cJSON *it, const char *field,
		     char *out)
{
	char shown[SL_KEY_SHOW_MAX * 4 + 8];

	if (!get_string(rc, it, field))
		return;
	if (name_valid(it->valuestring)) {
		strcpy(out, it->valuestring);
		return;
	}
	show(it->valuestring, shown, sizeof(shown));
	rule_err(rc, field,
		 "'%s' must be 1-%d characters of a-z, 0-9, '_', '.', '-'",
		 shown, SL_NAME_MAX);
}

/* The rule's name if it is a valid one, else NULL. */
static const char *rule_name(const cJSON *rule)
{
	const cJSON *n;

	if (!cJSON_IsObject(rule))
		return NULL;
	n = cJSON_GetObjectItemCaseSensitive(rule, "name");
	if (!cJSON_IsString(n) || !n->valuestring ||
	    !name_valid(n->valuestring))
		return NULL;
	return n->valuestring;
}

/* Decimal digits only, no sign or spaces, at most 5 digits. */
static int parse_port(const char *s, size_t n, unsigned int *out)
{
	unsigned int v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int parse_dport(struct rule_ctx *rc, const cJSON *it, struct sl_rule *r)
{
	static const char *const f = "match.dport";
	unsigned int lo, hi;
	char shown[SL_KEY_SHOW_MAX * 4 + 8];
	uint64_t v;

	if (cJSON_IsNumber(it)) {
		if (get_uint(rc, it, f, 1, 65535, &v))
			return -EINVAL;
		r->dport_lo = r->dport_hi = v;
		return 0;
	}
	if (!cJSON_IsString(it) || !it->valuestring) {
		rule_err(rc, f,
			 "must be a port number 1-65535 or a string \"lo-hi\", "
			 "got %s",
			 json_type(it));
		return -EINVAL;
	}
	show(it->valuestring, shown, sizeof(shown));
	{
		const char *s = it->valuestring, *dash = strchr(s, '-');
		int e;

		if (dash) {
			e = parse_port(s, dash - s, &lo);
			if (!e)
				e = parse_port(dash + 1, strlen(dash + 1), &hi);
		} else {
			e = parse_port(s, strlen(s), &lo);
			hi = lo;
		}
		if (e) {
			rule_err(rc, f,
				 "'%s' is not a port or a range \"lo-hi\" "
				 "(e.g. \"8000-8080\")",
				 shown);
			return -EINVAL;
		}
	}
	if (lo < 1 || hi < 1 || lo > 65535 || hi > 65535) {
		rule_err(rc, f, "'%s': ports must be between 1 and 65535",
			 shown);
		return -EINVAL;
	}
	if (lo > hi) {
		rule_err(rc, f, "'%s': range is reversed (%u > %u)", shown, lo,
			 hi);
		return -EINVAL;
	}
	r->dport_lo = lo;
	r->dport_hi = hi;
	return 0;
}

/* match.vlan: a VID 1-4094, or "untagged" (VID 0 on the wire is a
 * priority tag, which is untagged too, so 0 is not accepted as a number) */
static int parse_vlan(struct rule_ctx *rc, const cJSON *it, struct sl_rule *r)
{
	static const char *const f = "match.vlan";
	char shown[SL_KEY_SHOW_MAX * 4 + 8];
	uint64_t v;

	if (cJSON_IsString(it) && it->valuestring) {
		if (strcmp(it->valuestring, "untagged")) {
			show(it->valuestring, shown, sizeof(shown));
			rule_err(rc, f,
				 "'%s' is not a VLAN; use an id 1-%u or "
				 "\"untagged\"",
				 shown, SL_MAX_VLAN);
			return -EINVAL;
		}
		r->has_vlan = true;
		r->vlan = 0;
		return 0;
	}
	if (!cJSON_IsNumber(it)) {
		rule_err(rc, f,
			 "must be a VLAN id 1-%u or \"untagged\", got %s",
			 SL_MAX_VLAN, json_type(it));
		return -EINVAL;
	}
	if (get_uint(rc, it, f, 1, SL_MAX_VLAN, &v))
		return -EINVAL;
	r->has_vlan = true;
	r->vlan = v;
	return 0;
}

static void mask_prefix(struct sl_prefix *p)
{
	unsigned int bytes = p->family == AF_INET ? 4 : 16, i;

	for (i = 0; i < bytes; i++) {
		unsigned int bit = i * 8;

		if (bit >= p->len)
			p->addr[i] = 0;
		else if (bit + 8 > p->len)
			p->addr[i] &= (uint8_t) (0xff << (8 - (p->len - bit)));
	}
	for (; i < sizeof(p->addr); i++)
		p->addr[i] = 0;
}

static int parse_prefix(struct rule_ctx *rc, const cJSON *it, const char *field,
			struct sl_prefix *p)
{
	char addr[INET6_ADDRSTRLEN + 8], shown[SL_KEY_SHOW_MAX * 4 + 8];
	const char *s, *slash;
	unsigned int len, max;
	struct sl_prefix m;
	size_t alen;

	s = get_string(rc, it, field);
	if (!s)
		return -EINVAL;
	show(s, shown, sizeof(shown));
	slash = strchr(s, '/');
	alen = slash ? (size_t) (slash - s) : strlen(s);
	if (alen >= sizeof(addr)) {
		rule_err(rc, field, "'%s' is not an IPv4 or IPv6 prefix",
			 shown);
		return -EINVAL;
	}
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	memset(p, 0, sizeof(*p));
	if (inet_pton(AF_INET, addr, p->addr) == 1) {
		p->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, p->addr) == 1) {
		p->family = AF_INET6;
		max = 128;
	} else {
		rule_err(rc, field,
			 "'%s' is not an IPv4 or IPv6 prefix (e.g. "
			 "\"198.18.0.0/15\", \"2001:db8::/32\")",
			 shown);
		return -EINVAL;
	}
	len = max;
	if (slash) {
		const char *d = slash + 1;
		size_t n = strlen(d), i;

		len = 0;
		for (i = 0; i < n && i < 4; i++) {
			if (d[i] < '0' || d[i] > '9')
				break;
			len = len * 10 + (d[i] - '0');
		}
		if (n == 0 || i != n || len > max) {
			rule_err(rc, field, "'%s': prefix length must be 0-%u",
				 shown, max);
			return -EINVAL;
		}
	}
	p->len = len;
	m = *p;
	mask_prefix(&m);
	if (memcmp(m.addr, p->addr, sizeof(m.addr))) {
		char fix[INET6_ADDRSTRLEN + 8];

		sl_prefix_str(&m, fix, sizeof(fix));
		rule_err(rc, field, "'%s': host bits set; did you mean %s?",
			 shown, fix);
		return -EINVAL;
	}
	/* XDP sees IPv4 packets as IPv4: a ::ffff:a.b.c.d rule never hits. */
	if (p->family == AF_INET6 && p->len >= 96 &&
	    !memcmp(p->addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
		rule_err(rc, field,
			 "'%s' is an IPv4-mapped IPv6 prefix and never "
			 "matches; write it as an IPv4 prefix",
			 shown);
		return -EINVAL;
	}
	return 0;
}


/* Index of s in names, or -1 after reporting the allowed values. */
static int get_enum(struct rule_ctx *rc, const cJSON *it, const char *field,
		    const char *const *names, size_t n)
{
	char allowed[128] = "", shown[SL_KEY_SHOW_MAX * 4 + 8];
	const char *s;
	size_t i;

	s = get_string(rc, it, field);
	if (!s)
		return -1;
	for (i = 0; i < n; i++) {
		if (!strcmp(s, names[i]))
			return i;
	}
	for (i = 0; i < n; i++) {
		strncat(allowed, i ? ", " : "",
			sizeof(allowed) - strlen(allowed) - 1);
		strncat(allowed, names[i],
			sizeof(allowed) - strlen(allowed) - 1);
	}
	show(s, shown, sizeof(shown));
	rule_err(rc, field, "must be one of %s; got '%s'", allowed, shown);
	return -1;
}

/* A number in (0, max], as a multiple of 1/scale (at least 1); what
 * names the quantity in the error. */
static int get_fraction(struct rule_ctx *rc, const cJSON *it,
			const char *field, const char *what, double max,
			uint32_t scale, uint32_t *out)
{
	double d;

	if (!cJSON_IsNumber(it)) {
		rule_err(rc, field, "must be a number, got %s", json_type(it));
		return -EINVAL;
	}
	d = it->valuedouble;
	if (!(d > 0 && d <= max)) {
		rule_err(rc, field, "%s must be above 0 and at most %g, got %.15g",
			 what, max, d);
		return -EINVAL;
	}
	*out = (uint32_t) (d * scale + 0.5);
	if (!*out)
		*out = 1;
	return 0;
}

/* A share of time or of errors: a number in (0, 1], in ppm. */
static int get_ratio(struct rule_ctx *rc, const cJSON *it, const char *field,
		     const char *what, uint32_t *out)
{
	return get_fraction(rc, it, field, what, 1, SL_PPM, out);
}

/* Node ids are host names: 1-63 of [A-Za-z0-9_.:-] (the protocol's set). */
static bool node_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		char c = s[i];

		if (i >= SL_NODE_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == ':' || c == '-'))
			return false;
	}
	return i > 0;
}

static int quota_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sl_quota *)a)->node,
		      ((const struct sl_quota *)b)->node);
}

/* {"node-a": 500, ...}: unique valid node ids, sorted for the canon,
 * each count at most f->hi. */
static int parse_quotas(struct rule_ctx *rc, const struct sl_field *f,
			const cJSON *q, struct sl_cluster *c)
{
	char shown[SL_KEY_SHOW_MAX * 4 + 8], field[sizeof(shown) + 16];
	const cJSON *it, *prev;
	uint64_t v;
	int n, errors = rc->errors;

	if (!get_object(rc, q, f->path))
		return -EINVAL;
	n = cJSON_GetArraySize(q);
	if (n < 1 || n > SL_MAX_QUOTAS) {
		rule_err(rc, f->path, "must name 1 to %d nodes, got %d",
			 SL_MAX_QUOTAS, n);
		return -EINVAL;
	}
	c->quotas = calloc(n, sizeof(*c->quotas));
	if (!c->quotas) {
		rule_err(rc, f->path, "out of memory");
		return -ENOMEM;
	}
	for (it = q->child; it; it = it->next) {
		show(it->string, shown, sizeof(shown));
		for (prev = q->child; prev != it; prev = prev->next) {
			if (!strcmp(prev->string, it->string))
				break;
		}
		if (prev != it) {
			rule_err(rc, "cluster.quotas",
				 "node '%s' given more than once", shown);
			continue;
		}
		if (!node_valid(it->string)) {
			rule_err(rc, "cluster.quotas",
				 "node id '%s' must be 1-%d characters of "
				 "A-Z, a-z, 0-9, '_', '.', ':', '-'",
				 shown, SL_NODE_MAX);
			continue;
		}
		snprintf(field, sizeof(field), "cluster.quotas.%s", shown);
		if (get_uint(rc, it, field, 0, f->hi, &v))
			continue;
		strcpy(c->quotas[c->n_quotas].node, it->string);
		c->quotas[c->n_quotas++].count = v;
	}
	qsort(c->quotas, c->n_quotas, sizeof(c->quotas[0]), quota_cmp);
	return rc->errors == errors ? 0 : -EINVAL;
}

/* "share" ... "pass", or {"fixed": N} with N in [fl->lo, fl->hi]. */
static int parse_fallback(struct rule_ctx *rc, const struct sl_field *fl,
			  const cJSON *f, struct sl_cluster *c)
{
	static const char *const known[] = {"fixed", NULL};
	const cJSON *it;
	uint64_t v;
	int e;

	if (cJSON_IsObject(f)) {
		get_fields(rc, f, "cluster.fallback", known, &it);
		if (!it) {
			rule_err(rc, "cluster.fallback.fixed",
				 "required in a fallback object (the "
				 "threshold per node while degraded)");
		} else if (get_uint(rc, it, "cluster.fallback.fixed", fl->lo,
				    fl->hi, &v) == 0) {
			c->fallback = SL_FB_FIXED;
			c->fallback_fixed = v;
			return 0;
		}
		return -EINVAL;
	}
	if (!cJSON_IsString(f)) {
		rule_err(rc, "cluster.fallback",
			 "must be a string or {\"fixed\": N}, got %s",
			 json_type(f));
		return -EINVAL;
	}
	/* "fixed" alone lacks its N: not one of the string forms. */
	e = get_enum(rc, f, "cluster.fallback", fl->names, fl->n_names - 1);
	if (e < 0)
		return -EINVAL;
	c->fallback = e;
	return 0;
}

/*
 * The rule fields (rule_fields.h) as one document reads them: each
 * section's keys for get_fields(), each field's hook, the fields the
 * hooks look at. Made once per document from the table.
 */
enum {
	AT_PROTO, AT_DPORT, AT_DST, AT_SRC, AT_PERIOD, AT_COLD, AT_THRESH,
	AT_STRATEGY, AT_QUEUE, AT_PSI, AT_SOFTIRQ, AT_LOAD, AT_N
};
static const char *const at_paths[AT_N] = {
	[AT_PROTO] = "match.proto",	[AT_DPORT] = "match.dport",
	[AT_DST] = "match.dst",		[AT_SRC] = "match.src",
	[AT_PERIOD] = "behavior.warm_up.period_s",
	[AT_COLD] = "behavior.warm_up.cold_factor",
	[AT_THRESH] = "cluster.threshold_type",
	[AT_STRATEGY] = "breaker.strategy",
	[AT_QUEUE] = "system.accept_queue", [AT_PSI] = "system.cpu_pressure",
	[AT_SOFTIRQ] = "system.softirq",	[AT_LOAD] = "system.load",
};

struct field_hook;

struct plan {
	/* each section's keys, NULL-terminated, from keys + start[s] (the
	 * rule's own: s = sl_n_rule_fields); idx[k]: the field of keys[k] */
	const char *keys[2 * SL_RULE_FIELDS_MAX + 1];
	uint8_t idx[2 * SL_RULE_FIELDS_MAX + 1];
	uint16_t start[SL_RULE_FIELDS_MAX + 1];
	const struct field_hook *hook[SL_RULE_FIELDS_MAX];
	uint8_t at[AT_N];
};

/* One rule being read: which fields were given, which are valid (given
 * and good, or absent and at their default). */
struct pctx {
	struct rule_ctx *rc;
	const struct plan *pl;
	bool given[SL_RULE_FIELDS_MAX];
	bool ok[SL_RULE_FIELDS_MAX];
};

/*
 * What a field needs beyond its type: parse replaces the reading of the
 * value (it is called absent or given, it NULL when absent); begin and
 * check run before and after a section's fields (check after a plain
 * field), for the rules between fields, in the order the errors are
 * reported.
 */
struct field_hook {
	const char *path;
	void (*parse)(struct pctx *p, size_t i, const cJSON *it,
		      struct sl_rule *r);
	/* a section's, given as an object, before its fields are read */
	void (*begin)(struct pctx *p, const cJSON *obj);
	void (*check)(struct pctx *p, struct sl_rule *r);
};

static bool at_ok(const struct pctx *p, int at)
{
	return p->ok[p->pl->at[at]];
}

static bool at_given(const struct pctx *p, int at)
{
	return p->given[p->pl->at[at]];
}

/* The enum of field at when it is valid, else -1. */
static int at_enum(const struct pctx *p, const struct sl_rule *r, int at)
{
	size_t i = p->pl->at[at];

	return p->ok[i] ? (int)sl_field_uint(&sl_rule_fields[i], r) : -1;
}

static void parse_field(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r);

/* The fields of section s (the rule's own: s = sl_n_rule_fields) in
 * obj, an object. */
static void parse_section(struct pctx *p, size_t s, const cJSON *obj,
			  struct sl_rule *r)
{
	const char *const *known = p->pl->keys + p->pl->start[s];
	const uint8_t *idx = p->pl->idx + p->pl->start[s];
	const cJSON *got[SL_MAX_FIELDS];

	get_fields(p->rc, obj, s < sl_n_rule_fields ? sl_rule_fields[s].path
						    : NULL,
		   known, got);
	if (s < sl_n_rule_fields && p->pl->hook[s] && p->pl->hook[s]->begin)
		p->pl->hook[s]->begin(p, obj);
	for (size_t k = 0; known[k]; k++)
		parse_field(p, idx[k], got[k], r);
}

/* Field i absent: its default, or "required". */
static void field_absent(struct pctx *p, size_t i, struct sl_rule *r)
{
	const struct sl_field *f = &sl_rule_fields[i];

	if (f->flags & SL_FF_REQUIRED) {
		rule_err(p->rc, f->path, "required%s", f->hint);
		return;
	}
	p->ok[i] = true;
	/* an absent optional section leaves its members zero */
	if (f->type == SL_FT_SECTION && !(f->flags & SL_FF_OPTIONAL)) {
		for (size_t k = p->pl->start[i]; p->pl->keys[k]; k++)
			parse_field(p, p->pl->idx[k], NULL, r);
	} else if (f->type == SL_FT_UINT || f->type == SL_FT_ENUM ||
		   f->type == SL_FT_FRACTION) {
		sl_field_set_uint(f, r, f->def);
	}
}

/* breaker.threshold: a ratio or a number of errors, by strategy. */
static bool parse_threshold(struct pctx *p, const struct sl_field *f,
			    const cJSON *it, struct sl_rule *r)
{
	int e = at_enum(p, r, AT_STRATEGY);
	uint64_t v;

	if (e == SL_BRK_ERROR_RATIO)
		return !get_ratio(p->rc, it, f->path, "an error ratio",
				  &r->breaker.threshold);
	if (e == SL_BRK_SLOW_RATIO)
		return !get_ratio(p->rc, it, f->path, "a slow ratio",
				  &r->breaker.threshold);
	if (e != SL_BRK_ERROR_COUNT || get_uint(p->rc, it, f->path, f->lo,
						f->hi, &v))
		return false;
	r->breaker.threshold = v;
	return true;
}

/* Field i given as it: read by its type. */
static bool field_given(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r)
{
	const struct sl_field *f = &sl_rule_fields[i];
	struct rule_ctx *rc = p->rc;
	char *at = (char *)r + f->off;
	uint32_t frac;
	uint64_t v;
	int e;

	switch (f->type) {
	case SL_FT_SECTION:
		if (!get_object(rc, it, f->path))
			return false;
		if (f->present)
			*(bool *)((char *)r + f->present) = true;
		parse_section(p, i, it, r);
		return true;
	case SL_FT_NAME:
		get_name(rc, it, f->path, at);
		return *at;
	case SL_FT_ENUM:
		e = get_enum(rc, it, f->path, f->names, f->n_names);
		if (e >= 0)
			sl_field_set_uint(f, r, e);
		return e >= 0;
	case SL_FT_UINT:
		if (get_uint(rc, it, f->path, f->lo, f->hi, &v))
			return false;
		sl_field_set_uint(f, r, v);
		if (f->present)
			*(bool *)((char *)r + f->present) = true;
		return true;
	case SL_FT_FRACTION:
		if (get_fraction(rc, it, f->path, f->hint, f->hi, f->scale,
				 &frac))
			return false;
		sl_field_set_uint(f, r, frac);
		return true;
	case SL_FT_PORTS:
		return !parse_dport(rc, it, r);
	case SL_FT_PREFIX:
		return !parse_prefix(rc, it, f->path, (struct sl_prefix *)at);
	case SL_FT_VLAN:
		return !parse_vlan(rc, it, r);
	case SL_FT_THRESHOLD:
		return parse_threshold(p, f, it, r);
	case SL_FT_QUOTAS:
		return !parse_quotas(rc, f, it, &r->cluster);
	case SL_FT_FALLBACK:
		return !parse_fallback(rc, f, it, &r->cluster);
	}
	return false;
}

static void parse_field(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r)
{
	const struct field_hook *h = p->pl->hook[i];

	p->given[i] = it;
	if (h && h->parse)
		h->parse(p, i, it, r);
	else if (!it)
		field_absent(p, i, r);
	else
		p->ok[i] = field_given(p, i, it, r);
	if (h && h->check)
		h->check(p, r);
}

static const char *family_str(uint8_t family)
{
	return family == AF_INET ? "IPv4" : "IPv6";
}

static void check_dport(struct pctx *p, struct sl_rule *r)
{
	if (at_given(p, AT_DPORT) && at_ok(p, AT_DPORT) && at_ok(p, AT_PROTO) &&
	    r->proto != SL_PROTO_TCP && r->proto != SL_PROTO_UDP)
		rule_err(p->rc, "match.dport",
			 "only allowed with proto tcp or udp (proto is '%s')",
			 sl_proto_str(r->proto));
}

/* One prefix against the family that match.proto implies. */
static void check_icmp_family(struct pctx *p, int at, const char *field,
			      const struct sl_prefix *pfx,
			      const struct sl_rule *r)
{
	if (!at_given(p, at) || !at_ok(p, at))
		return;
	if (r->proto == SL_PROTO_ICMP && pfx->family == AF_INET6)
		rule_err(p->rc, field,
			 "proto icmp is IPv4 only; use icmpv6 for an IPv6 "
			 "prefix");
	else if (r->proto == SL_PROTO_ICMPV6 && pfx->family == AF_INET)
		rule_err(p->rc, field,
			 "proto icmpv6 is IPv6 only; use icmp for an IPv4 "
			 "prefix");
}

static void check_match(struct pctx *p, struct sl_rule *r)
{
	if (at_given(p, AT_DST) && at_ok(p, AT_DST) && at_given(p, AT_SRC) &&
	    at_ok(p, AT_SRC) && r->dst.family != r->src.family)
		rule_err(p->rc, "match.src",
			 "is %s but match.dst is %s; no packet can match both",
			 family_str(r->src.family), family_str(r->dst.family));
	if (!at_ok(p, AT_PROTO))
		return;
	check_icmp_family(p, AT_DST, "match.dst", &r->dst, r);
	check_icmp_family(p, AT_SRC, "match.src", &r->src, r);
}

static void check_grade(struct pctx *p, struct sl_rule *r)
{
	if (r->grade == SL_GRADE_CPS && at_ok(p, AT_PROTO) &&
	    r->proto != SL_PROTO_TCP)
		rule_err(p->rc, "grade",
			 "cps counts TCP SYNs and needs match.proto \"tcp\" "
			 "(proto is '%s')",
			 sl_proto_str(r->proto));
}

static void check_window(struct pctx *p, struct sl_rule *r)
{
	if (!r->interval_ms || !r->sample_count)
		return; /* one of them is wrong, and said so */
	if (r->interval_ms % r->sample_count) {
		rule_err(p->rc, "window",
			 "interval_ms %u does not divide evenly into "
			 "sample_count %u buckets",
			 r->interval_ms, r->sample_count);
		return;
	}
	if (r->interval_ms / r->sample_count < SL_MIN_BUCKET_MS)
		rule_err(p->rc, "window",
			 "buckets of interval_ms/sample_count = %u ms are "
			 "shorter than the minimum %u ms",
			 r->interval_ms / r->sample_count, SL_MIN_BUCKET_MS);
}

/*
 * "reject", or {"warm_up": {"period_s": P, "cold_factor": F}}. The ramp
 * itself (count / F up to count over P seconds) is the data plane's.
 */
static void parse_behavior(struct pctx *p, size_t i, const cJSON *b,
			   struct sl_rule *r)
{
	struct rule_ctx *rc = p->rc;
	char shown[SL_KEY_SHOW_MAX * 4 + 8];

	if (!b || (cJSON_IsString(b) && b->valuestring &&
		   !strcmp(b->valuestring, "reject"))) {
		p->ok[i] = true;
	} else if (cJSON_IsString(b) && b->valuestring) {
		show(b->valuestring, shown, sizeof(shown));
		if (!strcmp(b->valuestring, "warm_up"))
			rule_err(rc, "behavior",
				 "warm_up needs its parameters: "
				 "{\"warm_up\": {\"period_s\": 10}}");
		else
			rule_err(rc, "behavior",
				 "must be \"reject\" or {\"warm_up\": "
				 "{...}}; got '%s'",
				 shown);
	} else if (!cJSON_IsObject(b)) {
		rule_err(rc, "behavior",
			 "must be \"reject\" or an object {\"warm_up\": "
			 "{...}}, got %s",
			 json_type(b));
	} else {
		parse_section(p, i, b, r);
	}
	/* a ramp is all of it or none */
	if (r->warm_up && (!at_ok(p, AT_PERIOD) || !at_ok(p, AT_COLD))) {
		r->warm_up = false;
		r->warm_period_s = 0;
		r->cold_factor = 0;
	}
	/* A ramp starting at count / cold_factor = 0 would drop everything. */
	if (r->warm_up && r->count && r->count < r->cold_factor)
		rule_err(rc, "behavior.warm_up.cold_factor",
			 "%u is larger than count %llu: the ramp would start "
			 "at a threshold of 0; lower cold_factor or raise "
			 "count",
			 r->cold_factor, (unsigned long long) r->count);
}

/* cluster.quotas: required with threshold_type manual, else refused. */
static void parse_quotas_field(struct pctx *p, size_t i, const cJSON *it,
			       struct sl_rule *r)
{
	int e = at_enum(p, r, AT_THRESH);

	if (e == SL_THRESH_MANUAL && !it)
		rule_err(p->rc, "cluster.quotas",
			 "required with threshold_type manual");
	else if (e >= 0 && e != SL_THRESH_MANUAL && it)
		rule_err(p->rc, "cluster.quotas",
			 "only with threshold_type manual (this rule is %s)",
			 sl_threshold_names[e]);
	else
		p->ok[i] = !it || field_given(p, i, it, r);
}

static void check_strategy(struct pctx *p, struct sl_rule *r)
{
	if (at_enum(p, r, AT_STRATEGY) == SL_BRK_SLOW_RATIO &&
	    r->proto == SL_PROTO_UDP)
		rule_err(p->rc, "breaker.strategy",
			 "slow_request_ratio times TCP responses and needs "
			 "match.proto \"tcp\" (proto is 'udp')");
}

/* breaker.max_rt_ms: required with slow_request_ratio, else refused. */
static void parse_max_rt(struct pctx *p, size_t i, const cJSON *it,
			 struct sl_rule *r)
{
	int e = at_enum(p, r, AT_STRATEGY);

	if (!it && e == SL_BRK_SLOW_RATIO)
		rule_err(p->rc, "breaker.max_rt_ms",
			 "required with slow_request_ratio (the response "
			 "time in ms above which a response is slow)");
	else if (it && e >= 0 && e != SL_BRK_SLOW_RATIO)
		rule_err(p->rc, "breaker.max_rt_ms",
			 "only with strategy slow_request_ratio (strategy "
			 "is '%s')", sl_strategy_names[e]);
	else
		p->ok[i] = !it || field_given(p, i, it, r);
}

/* breaker.open_action: a datagram has no RST, so udp's is drop. */
static void parse_open_action(struct pctx *p, size_t i, const cJSON *it,
			      struct sl_rule *r)
{
	struct sl_breaker *b = &r->breaker;
	int e;

	b->open_action = r->proto == SL_PROTO_UDP ? SL_OPEN_DROP : SL_OPEN_RST;
	p->ok[i] = true;
	if (!it)
		return;
	e = get_enum(p->rc, it, "breaker.open_action", sl_open_action_names,
		     ARRAY_SIZE(sl_open_action_names));
	if (e == SL_OPEN_RST && r->proto == SL_PROTO_UDP)
		rule_err(p->rc, "breaker.open_action",
			 "'rst' answers TCP SYNs; a udp rule's breaker drops "
			 "datagrams while open (\"drop\", the default for "
			 "udp)");
	else if (e >= 0)
		b->open_action = e;
	p->ok[i] = e >= 0;
}

/* its signals are the answers to SYNs or datagrams */
static void check_breaker(struct pctx *p, struct sl_rule *r)
{
	if (r->breaker.enabled && at_ok(p, AT_PROTO) &&
	    r->proto != SL_PROTO_TCP && r->proto != SL_PROTO_UDP)
		rule_err(p->rc, "breaker",
			 "watches the answers to TCP SYNs or UDP datagrams "
			 "and needs match.proto \"tcp\" or \"udp\" (proto "
			 "is '%s')",
			 sl_proto_str(r->proto));
}

/* system.floor: count / 100 (at least 1) when absent. */
static void parse_floor(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r)
{
	if (it)
		p->ok[i] = field_given(p, i, it, r);
	else
		r->system.floor = r->count / SL_SYS_FLOOR_DIV ?: 1;
}

/* A system object names at least one signal. */
static void system_signals(struct pctx *p, const cJSON *obj)
{
	static const int sig[] = { AT_QUEUE, AT_PSI, AT_SOFTIRQ, AT_LOAD };

	for (size_t k = 0; k < ARRAY_SIZE(sig); k++) {
		const struct sl_field *f = &sl_rule_fields[p->pl->at[sig[k]]];

		if (cJSON_GetObjectItemCaseSensitive(obj, sl_field_key(f)))
			return;
	}
	rule_err(p->rc, "system",
		 "needs a signal: accept_queue, cpu_pressure, softirq or "
		 "load");
}

/* What a system rule cannot be combined with, once its fields are
 * read. */
static void check_system(struct pctx *p, struct sl_rule *r)
{
	const struct sl_system *y = &r->system;
	struct rule_ctx *rc = p->rc;

	if (!y->enabled)
		return;
	if (y->accept_queue && at_ok(p, AT_PROTO) &&
	    (r->proto != SL_PROTO_TCP || r->grade != SL_GRADE_CPS))
		rule_err(rc, "system.accept_queue",
			 "watches the listeners the rule's SYNs go to and "
			 "needs match.proto \"tcp\" and grade \"cps\"");
	if (y->accept_queue && !r->dport_lo)
		rule_err(rc, "system.accept_queue",
			 "needs match.dport (the listeners' ports)");
	if (y->floor && r->count && y->floor > r->count)
		rule_err(rc, "system.floor",
			 "%llu is above count %llu (the threshold moves "
			 "between floor and count)",
			 (unsigned long long) y->floor,
			 (unsigned long long) r->count);
	/* each of these writes the threshold too */
	if (r->cluster.enabled)
		rule_err(rc, "system",
			 "cannot be combined with cluster (the threshold "
			 "is the cluster's grant)");
	if (r->warm_up)
		rule_err(rc, "system",
			 "cannot be combined with behavior.warm_up");
	if (r->per_source)
		rule_err(rc, "system",
			 "cannot be combined with per_source (the "
			 "controller sheds the rule's whole traffic)");
}

static const struct field_hook hooks[] = {
	{ "match.dport", .check = check_dport },
	{ "match", .check = check_match },
	{ "grade", .check = check_grade },
	{ "window", .check = check_window },
	{ "behavior", .parse = parse_behavior },
	{ "cluster.quotas", .parse = parse_quotas_field },
	{ "breaker.strategy", .check = check_strategy },
	{ "breaker.max_rt_ms", .parse = parse_max_rt },
	{ "breaker.open_action", .parse = parse_open_action },
	{ "breaker", .check = check_breaker },
	{ "system.floor", .parse = parse_floor },
	{ "system", .begin = system_signals, .check = check_system },
};

/* The plan of sl_rule_fields (struct plan). */
static void make_plan(struct plan *pl)
{
	const struct sl_field *tab = sl_rule_fields;
	size_t n = sl_n_rule_fields, k = 0;

	memset(pl, 0, sizeof(*pl));
	for (size_t s = 0; s <= n; s++) {
		size_t i = s == n ? 0 : s + 1;
		size_t end = s == n ? n : sl_field_next(tab, n, s);

		if (s < n && tab[s].type != SL_FT_SECTION)
			continue;
		pl->start[s] = k;
		for (; i < end; i = sl_field_next(tab, n, i)) {
			pl->idx[k] = i;
			pl->keys[k++] = sl_field_key(&tab[i]);
		}
		pl->keys[k++] = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t h = 0; h < ARRAY_SIZE(hooks); h++)
			if (!strcmp(hooks[h].path, tab[i].path))
				pl->hook[i] = &hooks[h];
		for (int a = 0; a < AT_N; a++)
			if (!strcmp(at_paths[a], tab[i].path))
				pl->at[a] = i;
	}
}

static void parse_rule(struct rule_ctx *rc, const struct plan *pl,
		       const cJSON *obj, struct sl_rule *r)
{
	struct pctx p = { .rc = rc, .pl = pl };

	if (!cJSON_IsObject(obj)) {
		rule_err(rc, NULL, "must be an object, got %s", json_type(obj));
		return;
	}
	parse_section(&p, sl_n_rule_fields, obj, r);
	if (r->cluster.enabled && r->per_source)
		rule_err(rc, "cluster",
			 "cannot be combined with per_source (a cluster "
			 "grant is one budget, not one per source)");
	if (r->cluster.threshold == SL_THRESH_MANUAL && r->count) {
		uint64_t sum = 0;

		for (uint32_t i = 0; i < r->cluster.n_quotas; i++)
			sum += r->cluster.quotas[i].count;
		if (sum > r->count)
			rule_err(rc, "cluster.quotas",
				 "sum to %llu, more than count %llu (the "
				 "cluster bound)",
				 (unsigned long long) sum,
				 (unsigned long long) r->count);
	}
}

/*
 * names[i] = the valid name of the n rules' rule i or NULL; first_of[i] =
 * index of the first rule named like rule i, or i itself. A hash table
 * keeps this O(n) for SL_MAX_RULES rules.
 */
static int find_duplicates(const cJSON *rules, size_t n, const char **names,
			   size_t *first_of)
{
	struct sl_index ix;
	const cJSON *it;
	size_t i = 0;

	if (sl_index_init(&ix, n))
		return -ENOMEM;
	cJSON_ArrayForEach(it, rules)
	{
		const char *name = rule_name(it);
		size_t cursor = 0;
		uint64_t h;
		int64_t j;

		names[i] = name;
		first_of[i] = i;
		if (name) {
			h = sl_fnv1a_str(name);
			while ((j = sl_index_next(&ix, h, &cursor)) >= 0 &&
			       strcmp(names[j], name))
				;
			if (j >= 0)
				first_of[i] = j;
			else if (sl_index_add(&ix, h, i)) {
				sl_index_free(&ix);
				return -ENOMEM;
			}
		}
		i++;
	}
	sl_index_free(&ix);
	return 0;
}

static void syntax_error(struct errbuf *eb, const char *json, size_t len,
			 const char *at)
{
	char shown[SL_KEY_SHOW_MAX * 4 + 8];
	struct sl_json_error e;

	sl_json_locate(json, len, at, &e);
	show(e.near, shown, sizeof(shown));
	if (e.off >= len)
		eb_add(eb, "document: JSON syntax error at line %u, column %u: "
			   "unexpected end of input; the text is cut off "
			   "after %zu bytes",
		       e.line, e.col, len);
	else if (e.fault == SL_JSON_CUT)
		eb_add(eb, "document: JSON syntax error at line %u, column %u "
			   "near '%s': the text ends inside the document, "
			   "cut off after %zu bytes",
		       e.line, e.col, shown, len);
	else if (e.fault == SL_JSON_DEEP)
		eb_add(eb, "document: JSON syntax error at line %u, column %u: "
			   "arrays and objects nested deeper than %d, the "
			   "parser's limit",
		       e.line, e.col, CJSON_NESTING_LIMIT);
	else if (e.fault == SL_JSON_TRAILING)
		eb_add(eb, "document: JSON syntax error at line %u, column %u "
			   "near '%s': data after the end of the document",
		       e.line, e.col, shown);
	else
		eb_add(eb, "document: JSON syntax error at line %u, column %u "
			   "near '%s'",
		       e.line, e.col, shown);
}

static int parse_doc(const cJSON *doc, struct sl_rule **rules_out,
		     size_t *n_out, bool *allow_empty, struct errbuf *eb)
{
	/* "$schema": editors find rules/schema.json by it; not kept */
	const char *const known[] = {
		[SL_DOC_RULES] = sl_doc_keys[SL_DOC_RULES].key,
		[SL_DOC_ALLOW_EMPTY] = sl_doc_keys[SL_DOC_ALLOW_EMPTY].key,
		[SL_DOC_SCHEMA] = sl_doc_keys[SL_DOC_SCHEMA].key,
		[SL_DOC_N] = NULL };
	struct rule_ctx rc = {.eb = eb, .label = "document"};
	struct sl_rule *rules = NULL;
	struct plan plan;
	const char **names = NULL;
	size_t *first_of = NULL;
	const cJSON *got[SL_DOC_N], *arr, *it;
	size_t n, i;

	if (!cJSON_IsObject(doc)) {
		eb_add(eb,
		       "document: must be an object {\"rules\": [...]}, got %s",
		       json_type(doc));
		return -EINVAL;
	}
	get_fields(&rc, doc, NULL, known, got);
	arr = got[SL_DOC_RULES];
	if (got[SL_DOC_ALLOW_EMPTY] && !cJSON_IsBool(got[SL_DOC_ALLOW_EMPTY]))
		rule_err(&rc, "allow_empty", "must be true or false, got %s",
			 json_type(got[SL_DOC_ALLOW_EMPTY]));
	*allow_empty = cJSON_IsTrue(got[SL_DOC_ALLOW_EMPTY]);
	if (got[SL_DOC_SCHEMA] && !cJSON_IsString(got[SL_DOC_SCHEMA]))
		rule_err(&rc, "$schema", "must be a string (the schema's URI), "
			 "got %s", json_type(got[SL_DOC_SCHEMA]));
	if (!arr) {
		rule_err(&rc, "rules", "required");
		return -EINVAL;
	}
	if (!cJSON_IsArray(arr)) {
		rule_err(&rc, "rules", "must be an array, got %s",
			 json_type(arr));
		return -EINVAL;
	}
	n = cJSON_GetArraySize(arr);
	if (n > SL_MAX_RULES) {
		rule_err(&rc, "rules", "%zu rules, at most %d are allowed", n,
			 SL_MAX_RULES);
		return -EINVAL;
	}
	if (n) {
		rules = calloc(n, sizeof(*rules));
		names = calloc(n, sizeof(*names));
		first_of = calloc(n, sizeof(*first_of));
		if (!rules || !names || !first_of ||
		    find_duplicates(arr, n, names, first_of)) {
			free(rules);
			free(names);
			free(first_of);
			return -ENOMEM;
		}
	}
	make_plan(&plan);
	i = 0;
	cJSON_ArrayForEach(it, arr)
	{
		struct rule_ctx r = {.eb = eb, .name = names[i], .num = i + 1};

		rules[i].file_index = i;
		parse_rule(&r, &plan, it, &rules[i]);
		if (first_of[i] != i)
			rule_err(&r, "name",
				 "duplicate name: rules #%zu and #%zu are both "
				 "named '%s'",
				 first_of[i] + 1, i + 1, names[i]);
		i++;
	}
	free(names);
	free(first_of);
	if (eb_total(eb)) {
		for (i = 0; i < n; i++)
			sl_rule_release(&rules[i]);
		free(rules);
		return -EINVAL;
	}
	*rules_out = rules;
	*n_out = n;
	return 0;
}

int sl_rules_parse(const char *json, size_t len, struct sl_ruleset *out,
		   char *err, size_t errlen)
{
	struct errbuf eb = {.buf = err, .len = errlen};
	const char *end = NULL;
	cJSON *doc;
	char *copy;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!json || !out)
		return -EINVAL;
	if (memchr(json, '\0', len)) {
		eb_add(&eb, "document: contains a NUL byte; not a JSON text");
		return -EINVAL;
	}
	/* cJSON rejects trailing garbage only when it sees the terminator. */
	copy = malloc(len + 1);
	if (!copy) {
		eb_add(&eb, "document: out of memory");
		return -ENOMEM;
	}
	memcpy(copy, json, len);
	copy[len] = '\0';
	doc = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
	if (!doc) {
		syntax_error(&eb, copy, len, end);
		free(copy);
		return -EINVAL;
	}
	free(copy);
	ret = sl_rules_from_cjson(doc, out, err, errlen);
	cJSON_Delete(doc);
	return ret;
}

int sl_rules_from_cjson(const cJSON *doc, struct sl_ruleset *out, char *err,
			size_t errlen)
{
	struct errbuf eb = {.buf = err, .len = errlen};
	struct sl_rule *rules = NULL;
	bool allow_empty = false;
	size_t n = 0;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!out)
		return -EINVAL;
	if (!doc) {
		eb_add(&eb, "document: missing");
		return -EINVAL;
	}
	ret = parse_doc(doc, &rules, &n, &allow_empty, &eb);
	if (ret == -ENOMEM)
		eb_add(&eb, "document: out of memory");
	eb_finish(&eb);
	if (ret)
		return ret;
	out->rules = rules;
	out->n = n;
	out->allow_empty = allow_empty;
	return 0;
}

int sl_rules_from_array(const cJSON *arr, struct sl_ruleset *out, char *err,
			size_t errlen)
{
	cJSON *wrap = cJSON_CreateObject();
	int ret;

	/* A reference: the wrapper borrows arr's items, never frees them. */
	if (!wrap ||
	    !cJSON_AddItemReferenceToObject(wrap, "rules", (cJSON *)arr)) {
		cJSON_Delete(wrap);
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = sl_rules_from_cjson(wrap, out, err, errlen);
	cJSON_Delete(wrap);
	return ret;
}

static void path_err(char *err, size_t errlen, const char *path,
		     const char *what, int e)
{
	char buf[128];

	if (!err || !errlen)
		return;
	if (e)
		snprintf(err, errlen, "%s: %s: %s", path, what,
			 strerror_r(e, buf, sizeof(buf)));
	else
		snprintf(err, errlen, "%s: %s", path, what);
}

int sl_rules_read_file(const char *path, char **text, size_t *len,
		       char *err, size_t errlen)
{
	int fd, ret;

	if (err && errlen)
		err[0] = '\0';
	if (!strcmp(path, "-"))
		path = "<stdin>";
	fd = strcmp(path, "<stdin>") ? open(path, O_RDONLY | O_CLOEXEC)
				     : dup(STDIN_FILENO);
	if (fd < 0) {
		ret = -errno;
		path_err(err, errlen, path, "cannot open", -ret);
		return ret;
	}
	ret = sl_read_fd(fd, SL_RULES_FILE_MAX, text, len);
	close(fd);
	if (ret == -EFBIG)
		path_err(err, errlen, path,
			 "larger than 64 MiB; refusing to parse", 0);
	else if (ret)
		path_err(err, errlen, path, "cannot read", -ret);
	return ret;
}

int sl_rules_load_file(const char *path, struct sl_ruleset *out, char *err,
		       size_t errlen)
{
	char *buf = NULL;
	size_t used = 0;
	int ret;

	ret = sl_rules_read_file(path, &buf, &used, err, errlen);
	if (ret)
		return ret;
	ret = sl_rules_parse(buf, used, out, err, errlen);
	free(buf);
	return ret;
}
