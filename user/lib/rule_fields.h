/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rule fields, declared once (as params.h declares the options): each
 * field's path in the file, type, bounds, default, where struct sl_rule
 * keeps it and its doc line. The parser (rules_parse.c), the canonical
 * text (rules_json.c), a rule's identity and the generated schema and man
 * page table (tools/rulegen.c) walk this table. A new field is one entry
 * in sl_rule_fields[] (and its member in struct sl_rule).
 */
#ifndef SLUICE_RULE_FIELDS_H
#define SLUICE_RULE_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "rules.h"

enum sl_ftype {
	SL_FT_SECTION,	 /* an object: the fields after it, path.key */
	SL_FT_NAME,	 /* char[SL_NAME_MAX + 1] of [a-z0-9_.-] */
	SL_FT_ENUM,	 /* an enum (4 bytes), spelled names[] */
	SL_FT_UINT,	 /* an integer in [lo, hi], of size 1, 2, 4 or 8 */
	SL_FT_FRACTION,	 /* a number in (0, hi], in uint32_t units of 1/scale */
	SL_FT_PORTS,	 /* dport_lo, dport_hi: a port or "lo-hi" */
	SL_FT_PREFIX,	 /* struct sl_prefix */
	SL_FT_VLAN,	 /* has_vlan, vlan: a VID or "untagged" */
	SL_FT_THRESHOLD, /* breaker.threshold: a count or ratio, by strategy */
	SL_FT_QUOTAS,	 /* cluster.quotas: node -> count */
	SL_FT_FALLBACK,	 /* cluster.fallback: a name or {"fixed": N} */
};

/* sl_field.flags */
#define SL_FF_REQUIRED	 0x1 /* absent is an error: "required" + hint */
#define SL_FF_OMIT	 0x2 /* the canonical text leaves it out at default */
#define SL_FF_NO_ID	 0x4 /* not part of the rule's identity (priority) */
#define SL_FF_OPTIONAL	 0x8 /* a section whose absence means "none" */
#define SL_FF_DEF_VARIES 0x10 /* its default follows other fields (doc) */
#define SL_FF_LIMIT	 0x20 /* action limit only: an allow or deny rule
			       * refuses it and leaves it zero */

/* sl_field.protos, .grades: what the field applies to (0: all) */
#define SL_P(p) (1u << (p))
#define SL_G(g) (1u << (g))

struct sl_field {
	const char *path;   /* "window.interval_ms"; its key is after the dot */
	enum sl_ftype type;
	uint8_t depth;	    /* 0 for a rule's own keys */
	uint8_t size;	    /* bytes at off (SL_FT_UINT, SL_FT_FRACTION) */
	uint16_t flags;
	uint16_t off;	    /* offsetof(struct sl_rule, ...) */
	int16_t present;    /* SL_FF_OPTIONAL, priority: offset of its bool */
	uint64_t lo, hi;    /* SL_FT_UINT; hi also bounds SL_FT_FRACTION */
	uint64_t def;	    /* the value when absent */
	uint32_t scale;	    /* SL_FT_FRACTION */
	const char *const *names; /* SL_FT_ENUM; a section's string form */
	uint32_t n_names;
	uint32_t protos, grades;
	const char *hint;   /* after "required", or the fraction's kind */
	const char *doc;    /* one line: the man page table, the schema */
	/* a section's rules between its fields, as JSON Schema keywords
	 * ({"allOf": ...}) merged into its definition */
	const char *schema;
};

#define SL_RULE_FIELDS_MAX 96 /* the parser's bound on the table */

extern const struct sl_field sl_rule_fields[];
extern const size_t sl_n_rule_fields;

/* The rule's own rules between fields, as sl_field.schema. */
extern const char sl_rule_schema_extra[];

/* The keys of a rule document around its rules (the parser's and the
 * generated docs'): "rules", "allow_empty", "$schema". */
enum { SL_DOC_RULES, SL_DOC_ALLOW_EMPTY, SL_DOC_SCHEMA, SL_DOC_N };
struct sl_doc_key {
	const char *key;
	const char *schema; /* its JSON Schema */
	const char *doc;
};
extern const struct sl_doc_key sl_doc_keys[SL_DOC_N];

/* The field's key: its path after the last dot. */
const char *sl_field_key(const struct sl_field *f);

/* Index of the field after f's section, for walking a section's fields:
 * for (i = s + 1; i < end; i = sl_field_next(tab, n, i)) */
size_t sl_field_next(const struct sl_field *tab, size_t n, size_t i);

/* The field's integer value in r (UINT, FRACTION, ENUM). */
uint64_t sl_field_uint(const struct sl_field *f, const struct sl_rule *r);
void sl_field_set_uint(const struct sl_field *f, struct sl_rule *r,
		       uint64_t v);

/* Whether an SL_FF_OPTIONAL section or priority is given in r. */
bool sl_field_present(const struct sl_field *f, const struct sl_rule *r);

/*
 * A rule's identity: FNV-1a 64 over its fields in a fixed binary form,
 * walking tab (n fields), each field that is not at its default as its
 * path and value (an absent optional section contributes nothing), so a
 * new field that is at its default keeps every identity. Priority is not
 * part of it (it only steers classification). Never 0.
 */
uint64_t sl_rule_identity(const struct sl_field *tab, size_t n,
			  const struct sl_rule *r);

#endif
