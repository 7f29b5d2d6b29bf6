/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading the values of a rule file, for rules_parse.c (library-private):
 * the error collector, and a reader per kind of value, each reporting
 * what is wrong with the field it reads.
 */
#ifndef SLUICE_RULES_READ_H
#define SLUICE_RULES_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "rule_fields.h"
#include "rules.h"

#define SL_KEY_SHOW_MAX 64 /* longest key or value echoed in errors */
/* Ours have <= 10 keys; bounds report_keys()' quadratic duplicate check. */
#define SL_MAX_FIELDS 32

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

void __attribute__((format(printf, 2, 3)))
eb_add(struct errbuf *eb, const char *fmt, ...);

void eb_finish(struct errbuf *eb);

unsigned int eb_total(const struct errbuf *eb);

/* "rule 'NAME': field 'FIELD': message" */
void __attribute__((format(printf, 3, 4)))
rule_err(struct rule_ctx *rc, const char *field, const char *fmt, ...);

/*
 * Copy untrusted text for an error message: keys and values may hold
 * newlines or control bytes that would break one-error-per-line output.
 */
void show(const char *s, char *out, size_t len);

const char *json_type(const cJSON *it);

/*
 * got[k] = the member of obj named known[k] (the first, as
 * cJSON_GetObjectItemCaseSensitive() finds it) or NULL, all in one walk
 * of obj; an unknown or repeated key is reported by report_keys().
 */
void get_fields(struct rule_ctx *rc, const cJSON *obj,
		const char *where, const char *const *known,
		const cJSON **got);

/*
 * An integer-valued JSON number in [lo, hi]. cJSON keeps numbers as
 * double, which is exact for every integer we accept (<= 1e11 < 2^53).
 */
int get_uint(struct rule_ctx *rc, const cJSON *it, const char *field,
	     uint64_t lo, uint64_t hi, uint64_t *out);

bool get_object(struct rule_ctx *rc, const cJSON *it, const char *field);

/* A name (a rule's, a cluster namespace) into out, SL_NAME_MAX + 1 bytes. */
void get_name(struct rule_ctx *rc, const cJSON *it, const char *field,
	      char *out);

/* The rule's name if it is a valid one, else NULL. */
const char *rule_name(const cJSON *rule);

int parse_dport(struct rule_ctx *rc, const cJSON *it, struct sl_rule *r);

/* match.vlan: a VID 1-4094, or "untagged" (VID 0 on the wire is a
 * priority tag, which is untagged too, so 0 is not accepted as a number) */
int parse_vlan(struct rule_ctx *rc, const cJSON *it, struct sl_rule *r);

int parse_prefix(struct rule_ctx *rc, const cJSON *it, const char *field,
		 struct sl_prefix *p);

/* Index of s in names, or -1 after reporting the allowed values. */
int get_enum(struct rule_ctx *rc, const cJSON *it, const char *field,
	     const char *const *names, size_t n);

/* A number in (0, max], as a multiple of 1/scale (at least 1); what
 * names the quantity in the error. */
int get_fraction(struct rule_ctx *rc, const cJSON *it,
		 const char *field, const char *what, double max,
		 uint32_t scale, uint32_t *out);

/* A share of time or of errors: a number in (0, 1], in ppm. */
int get_ratio(struct rule_ctx *rc, const cJSON *it, const char *field,
	      const char *what, uint32_t *out);

/* {"node-a": 500, ...}: unique valid node ids, sorted for the canon,
 * each count at most f->hi. */
int parse_quotas(struct rule_ctx *rc, const struct sl_field *f,
		 const cJSON *q, struct sl_cluster *c);

/* "share" ... "pass", or {"fixed": N} with N in [fl->lo, fl->hi]. */
int parse_fallback(struct rule_ctx *rc, const struct sl_field *fl,
		   const cJSON *f, struct sl_cluster *c);

#endif
