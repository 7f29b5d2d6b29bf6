/* SPDX-License-Identifier: GPL-2.0 */
/*
 * JSON as text, without cJSON trees: a growing text buffer, and a reader
 * that checks a JSON text and can re-indent it as cJSON_Print() lays out
 * its parse. For large documents (thousands of rules or counters), where
 * building, printing and freeing a tree cost more than the work itself.
 */
#ifndef SLUICE_JSON_TEXT_H
#define SLUICE_JSON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

/* A text that grows; nomem stays set after a failed allocation. */
struct sl_text {
	char *buf; /* NUL-terminated unless empty */
	size_t len, cap;
	bool nomem;
};

/* Room for more bytes after len; false once out of memory. */
bool sl_text_grow(struct sl_text *t, size_t more);

/* Inline: large texts are made of many short pieces. */
static inline void sl_text_put(struct sl_text *t, const char *s, size_t n)
{
	if ((t->nomem || t->len + n + 1 > t->cap) && !sl_text_grow(t, n + 1))
		return;
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

void sl_text_printf(struct sl_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* before, then v in decimal: "%s%llu" without printf's cost. */
void sl_text_u64(struct sl_text *t, const char *before, uint64_t v);

/* An integer-valued number in [lo, hi] into *v; exact below 2^53. */
bool sl_json_uint(const cJSON *it, uint64_t lo, uint64_t hi, uint64_t *v);

/*
 * A JSON text read from p to end. Values read with emit go to out in
 * cJSON_Print()'s layout: a member on its own line, indented with tabs,
 * "key":<tab>value; array items on one line, ", " between. Strings and
 * numbers are copied as they came (escapes, digits beyond 2^53 kept).
 */
struct sl_json {
	const char *p, *end;
	struct sl_text *out;
};

#define SL_JSON_MAX_DEPTH 1000 /* cJSON's nesting limit */

void sl_json_ws(struct sl_json *r);

/* The value at r->p, inside containers nested depth deep. False when it
 * is not JSON. */
bool sl_json_value(struct sl_json *r, int depth, bool emit);

/* The object at r->p (which is '{'). With ok, its member "ok" is left out
 * and *ok says whether it is true. */
bool sl_json_object(struct sl_json *r, int depth, bool emit, bool *ok);

/* Why a text is not JSON, and where, from where cJSON stopped. */
enum sl_json_fault {
	SL_JSON_BAD,	  /* damage inside */
	SL_JSON_CUT,	  /* the text ends before the document does */
	SL_JSON_TRAILING, /* data after a complete document */
	SL_JSON_DEEP,	  /* nested past cJSON's limit */
};

struct sl_json_error {
	enum sl_json_fault fault;
	unsigned int line, col; /* of where parsing stopped, from 1 */
	size_t off;		/* its byte offset; len when at the end */
	char near[24];		/* the text there, to its line's end */
};

/*
 * Explain why cJSON_ParseWithLengthOpts() refused text (len bytes,
 * NUL-terminated) and stopped at at: CUT when the text does not end in
 * '}' (every document here is an object), TRAILING when a document
 * parses up to there, DEEP past CJSON_NESTING_LIMIT levels.
 */
void sl_json_locate(const char *text, size_t len, const char *at,
		    struct sl_json_error *e);

#endif
