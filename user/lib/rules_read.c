/* SPDX-License-Identifier: GPL-2.0 */
/* Reading the values of a rule file (rules_read.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h> /* isfinite(), a macro: no libm */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "rules_read.h"
#include "util.h"

#define SL_ERR_MAX_MSGS 50

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

void __attribute__((format(printf, 2, 3)))
eb_add(struct errbuf *eb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	eb_vadd(eb, fmt, ap);
	va_end(ap);
}

void eb_finish(struct errbuf *eb)
{
	char line[64];

	if (!eb->dropped)
		return;
	snprintf(line, sizeof(line), "\n... %u more errors", eb->dropped);
	eb_append(eb, line);
}

unsigned int eb_total(const struct errbuf *eb)
{
	return eb->n + eb->dropped;
}

/* "rule 'NAME': field 'FIELD': message" */
void __attribute__((format(printf, 3, 4)))
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
void show(const char *s, char *out, size_t len)
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

const char *json_type(const cJSON *it)
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


/*
 * got[k] = the member of obj named known[k] (the first, as
 * cJSON_GetObjectItemCaseSensitive() finds it) or NULL, all in one walk
 * of obj; an unknown or repeated key is reported by report_keys().
 */
void get_fields(struct rule_ctx *rc, const cJSON *obj,
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
int get_uint(struct rule_ctx *rc, const cJSON *it, const char *field,
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

bool get_object(struct rule_ctx *rc, const cJSON *it, const char *field)
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
void get_name(struct rule_ctx *rc, const cJSON *it, const char *field,
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
const char *rule_name(const cJSON *rule)
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

int parse_dport(struct rule_ctx *rc, const cJSON *it, struct sl_rule *r)
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
int parse_vlan(struct rule_ctx *rc, const cJSON *it, struct sl_rule *r)
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

int parse_prefix(struct rule_ctx *rc, const cJSON *it, const char *field,
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
int get_enum(struct rule_ctx *rc, const cJSON *it, const char *field,
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
int get_fraction(struct rule_ctx *rc, const cJSON *it,
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
		rule_err(rc, field,
			 "%s must be above 0 and at most %g, got %.15g", what,
			 max, d);
		return -EINVAL;
	}
	*out = (uint32_t) (d * scale + 0.5);
	if (!*out)
		*out = 1;
	return 0;
}

/* A share of time or of errors: a number in (0, 1], in ppm. */
int get_ratio(struct rule_ctx *rc, const cJSON *it, const char *field,
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
int parse_quotas(struct rule_ctx *rc, const struct sl_field *f,
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
int parse_fallback(struct rule_ctx *rc, const struct sl_field *fl,
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
