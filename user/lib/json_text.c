// SPDX-License-Identifier: GPL-2.0
#include <math.h> /* isfinite(), a macro: no libm */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_text.h"

bool sl_json_uint(const cJSON *it, uint64_t lo, uint64_t hi, uint64_t *v)
{
	double d;

	if (!cJSON_IsNumber(it))
		return false;
	d = it->valuedouble;
	if (!isfinite(d) || d < (double)lo || d > (double)hi ||
	    (double)(uint64_t)d != d)
		return false;
	*v = (uint64_t)d;
	return true;
}

bool sl_text_grow(struct sl_text *t, size_t more)
{
	size_t cap;
	char *buf;

	if (t->nomem)
		return false;
	if (t->len + more <= t->cap)
		return true;
	cap = 2 * (t->len + more);
	buf = realloc(t->buf, cap);
	if (!buf) {
		t->nomem = true;
		return false;
	}
	t->buf = buf;
	t->cap = cap;
	return true;
}

void sl_text_printf(struct sl_text *t, const char *fmt, ...)
{
	size_t room = t->cap - t->len;
	va_list ap;
	int n;

	if (t->nomem)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf ? t->buf + t->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		t->nomem = true;
		return;
	}
	if ((size_t)n >= room) {
		/* did not fit: grow, print again */
		if (!sl_text_grow(t, n + 1))
			return;
		va_start(ap, fmt);
		vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
	}
	t->len += n;
}

void sl_text_u64(struct sl_text *t, const char *before, uint64_t v)
{
	char digits[20], *p = digits + sizeof(digits);

	do {
		*--p = '0' + v % 10;
		v /= 10;
	} while (v);
	sl_text_put(t, before, strlen(before));
	sl_text_put(t, p, digits + sizeof(digits) - p);
}

static void tabs(struct sl_text *t, int n)
{
	static const char tab[] = "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t";
	size_t left = n > 0 ? n : 0;

	while (left) {
		size_t k = left < sizeof(tab) - 1 ? left : sizeof(tab) - 1;

		sl_text_put(t, tab, k);
		left -= k;
	}
}

void sl_json_ws(struct sl_json *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' ||
				 *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

/* The string at r->p (which is '"'). */
static bool json_string(struct sl_json *r, bool emit)
{
	const char *s = r->p, *p = r->p + 1;

	/* the first quote with no escape between it and p closes */
	for (;;) {
		const char *q = memchr(p, '"', r->end - p), *esc;

		if (!q)
			return false;
		esc = memchr(p, '\\', q - p);
		if (!esc) {
			r->p = q + 1;
			break;
		}
		p = esc + 2;
		if (p > r->end)
			return false;
	}
	if (emit)
		sl_text_put(r->out, s, r->p - s);
	return true;
}

/* An object whose members are at depth + 1; a top-level member named
 * "ok" is left out and whether it is true goes to *ok. */
bool sl_json_object(struct sl_json *r, int depth, bool emit, bool *ok)
{
	int n = 0;

	r->p++;
	if (emit)
		sl_text_put(r->out, "{\n", 2);
	sl_json_ws(r);
	if (r->p < r->end && *r->p == '}')
		goto close;
	for (;;) {
		const char *key = r->p;
		bool is_ok, on;
		size_t key_len;

		if (r->p >= r->end || *r->p != '"' || !json_string(r, false))
			return false;
		key_len = r->p - key;
		is_ok = ok && key_len == 4 && !memcmp(key, "\"ok\"", 4);
		on = emit && !is_ok;
		sl_json_ws(r);
		if (r->p >= r->end || *r->p != ':')
			return false;
		r->p++;
		sl_json_ws(r);
		if (on) {
			if (n++)
				sl_text_put(r->out, ",\n", 2);
			tabs(r->out, depth + 1);
			sl_text_put(r->out, key, key_len);
			sl_text_put(r->out, ":\t", 2);
		} else if (is_ok) {
			*ok = r->end - r->p >= 4 && !memcmp(r->p, "true", 4);
		}
		if (!sl_json_value(r, depth + 1, on))
			return false;
		sl_json_ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			sl_json_ws(r);
			continue;
		}
		if (r->p < r->end && *r->p == '}')
			break;
		return false;
	}
close:
	r->p++;
	if (emit) {
		if (n)
			sl_text_put(r->out, "\n", 1);
		tabs(r->out, depth);
		sl_text_put(r->out, "}", 1);
	}
	return true;
}

static bool json_array(struct sl_json *r, int depth, bool emit)
{
	r->p++;
	if (emit)
		sl_text_put(r->out, "[", 1);
	sl_json_ws(r);
	if (r->p < r->end && *r->p == ']')
		goto close;
	for (;;) {
		if (!sl_json_value(r, depth + 1, emit))
			return false;
		sl_json_ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			sl_json_ws(r);
			if (emit)
				sl_text_put(r->out, ", ", 2);
			continue;
		}
		if (r->p < r->end && *r->p == ']')
			break;
		return false;
	}
close:
	r->p++;
	if (emit)
		sl_text_put(r->out, "]", 1);
	return true;
}

static bool in_number(char c)
{
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' ||
	       c == 'e' || c == 'E';
}

bool sl_json_value(struct sl_json *r, int depth, bool emit)
{
	static const char *const words[] = { "true", "false", "null" };
	const char *s = r->p;

	if (r->p >= r->end || depth > SL_JSON_MAX_DEPTH)
		return false;
	switch (*r->p) {
	case '{':
		return sl_json_object(r, depth, emit, NULL);
	case '[':
		return json_array(r, depth, emit);
	case '"':
		return json_string(r, emit);
	case 't':
	case 'f':
	case 'n':
		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
			size_t n = strlen(words[i]), left = r->end - r->p;

			if (left >= n && !memcmp(r->p, words[i], n)) {
				r->p += n;
				goto done;
			}
		}
		return false;
	}
	while (r->p < r->end && in_number(*r->p))
		r->p++;
	if (r->p == s)
		return false;
done:
	if (emit)
		sl_text_put(r->out, s, r->p - s);
	return true;
}

/* Arrays and objects open at off, outside strings. */
static unsigned int depth_at(const char *text, size_t off)
{
	unsigned int depth = 0;
	bool in_str = false;

	for (size_t i = 0; i < off; i++) {
		char c = text[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			depth++;
		} else if ((c == ']' || c == '}') && depth) {
			depth--;
		}
	}
	return depth;
}

void sl_json_locate(const char *text, size_t len, const char *at,
		    struct sl_json_error *e)
{
	const char *end = NULL;
	cJSON *doc;
	size_t i;

	*e = (struct sl_json_error){ .line = 1, .col = 1 };
	e->off = at && at >= text && (size_t)(at - text) < len
			 ? (size_t)(at - text)
			 : len;
	for (i = 0; i < e->off; i++) {
		if (text[i] == '\n') {
			e->line++;
			e->col = 1;
		} else {
			e->col++;
		}
	}
	for (i = 0; i + 1 < sizeof(e->near) && e->off + i < len &&
		    text[e->off + i] != '\n';
	     i++)
		e->near[i] = text[e->off + i];
	e->near[i] = '\0';
	doc = cJSON_ParseWithLengthOpts(text, len + 1, &end, 0);
	if (doc) {
		cJSON_Delete(doc);
		e->fault = SL_JSON_TRAILING;
		return;
	}
	if (depth_at(text, e->off) >= CJSON_NESTING_LIMIT) {
		e->fault = SL_JSON_DEEP;
		return;
	}
	for (i = len; i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t' ||
				text[i - 1] == '\r' || text[i - 1] == '\n');
	     i--)
		;
	e->fault = e->off >= len || !i || text[i - 1] != '}' ? SL_JSON_CUT
							    : SL_JSON_BAD;
}
