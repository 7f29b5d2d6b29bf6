/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the rule field table (rule_fields.h) documents: rules/schema.json
 * and the field table of sluice-rules(5), generated so that they cannot
 * drift from the parser (`make rules-gen` writes them with
 * user/rulegen.c; test_rule_fields fails when the committed ones differ).
 */
#ifndef SLUICE_RULE_DOC_H
#define SLUICE_RULE_DOC_H

/* The JSON Schema of rule files, as cJSON prints it, with a final
 * newline. malloc'd; NULL when out of memory. */
char *sl_rules_schema(void);

/* The man page's document keys and field table, in scdoc: what stands
 * between SL_MAN_BEGIN and SL_MAN_END in docs/man/sluice-rules.5.scd.
 * malloc'd; NULL when out of memory. */
char *sl_rules_man_fields(void);

#define SL_MAN_BEGIN "; BEGIN rule fields: `make rules-gen` writes this " \
		     "part from user/lib/rule_fields.c\n"
#define SL_MAN_END   "; END rule fields\n"

#endif
