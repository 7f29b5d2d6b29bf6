// SPDX-License-Identifier: GPL-2.0
/* `sluice check FILE`: validate and compile a rule file, offline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compile.h"
#include "log.h"
#include "rules_json.h"
#include "rules_parse.h"

#define ERRBUF 65536

static void print_rule_line(const struct sl_rule *r, int rank)
{
	char dst[64], src[64], port[16] = "any", win[32], ps[48] = "-";
	char vlan[12] = "any", count[24] = "-";
	const char *grade = sl_action_str(r->action);

	sl_prefix_str(&r->dst, dst, sizeof(dst));
	sl_prefix_str(&r->src, src, sizeof(src));
	if (r->dport_lo == r->dport_hi && r->dport_lo)
		snprintf(port, sizeof(port), "%u", r->dport_lo);
	else if (r->dport_lo)
		snprintf(port, sizeof(port), "%u-%u", r->dport_lo, r->dport_hi);
	if (r->has_vlan && r->vlan)
		snprintf(vlan, sizeof(vlan), "%u", r->vlan);
	else if (r->has_vlan)
		snprintf(vlan, sizeof(vlan), "untagged");
	snprintf(win, sizeof(win), "%ums/%u", r->interval_ms, r->sample_count);
	if (r->action == SL_ACTION_LIMIT) {
		grade = sl_grade_str(r->grade);
		snprintf(count, sizeof(count), "%llu",
			 (unsigned long long)r->count);
	}
	if (r->per_source)
		snprintf(ps, sizeof(ps), "/%u,/%u max %u", r->src_prefix_v4,
			 r->src_prefix_v6, r->max_sources);
	printf("%-4d %-5u %-24s %-6s %-11s %-8s %-20s %-20s %-5s %11s %-10s %-7s %-4u %s\n",
	       rank, r->layer, r->name, sl_proto_str(r->proto), port, vlan,
	       dst, src, grade, count, win, sl_mode_str(r->mode),
	       sl_rule_priority(r), ps);
}

static int rank_cmp(const void *a, const void *b, void *rs)
{
	const struct sl_rule *rules = ((const struct sl_ruleset *)rs)->rules;

	const struct sl_rule *x = &rules[*(const size_t *)a];
	const struct sl_rule *y = &rules[*(const size_t *)b];

	/* each layer's rules together, in the order the layers judge */
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return sl_rule_cmp(x, y);
}

int cli_check_rules(const char *file, char **text, size_t *len,
		    struct sl_ruleset *rs, struct sl_compiled *comp)
{
	char *err = calloc(1, ERRBUF), *buf = NULL;
	uint32_t *slots = NULL;
	size_t used = 0;
	int ret;

	if (!err)
		return -ENOMEM;
	ret = sl_rules_read_file(file, &buf, &used, err, ERRBUF);
	if (!ret)
		ret = sl_rules_parse(buf, used, rs, err, ERRBUF);
	if (ret) {
		pr_err("%s: invalid:\n%s", strcmp(file, "-") ? file : "<stdin>",
		       err);
		goto out;
	}
	slots = calloc(rs->n + 1, sizeof(*slots));
	for (size_t i = 0; slots && i < rs->n; i++)
		slots[i] = i;
	ret = slots ? sl_compile(rs, slots, 1, 0, SLUICE_MAX_LPM / 2, comp,
				 err, ERRBUF)
		    : -ENOMEM;
	if (ret) {
		pr_err("%s: cannot compile: %s",
		       strcmp(file, "-") ? file : "<stdin>",
		       ret == -ENOMEM ? "out of memory" : err);
		sl_ruleset_free(rs);
		goto out;
	}
	if (text) {
		*text = buf;
		*len = used;
		buf = NULL;
	}
out:
	free(slots);
	free(buf);
	free(err);
	return ret;
}

static bool same_prefix(const struct sl_prefix *a, const struct sl_prefix *b)
{
	return a->family == b->family && a->len == b->len &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/* Whether every packet b would judge is judged by a, ranked before it:
 * the same match, and a cps rule (SYNs only) shadows only cps rules. */
static bool shadows(const struct sl_rule *a, const struct sl_rule *b)
{
	return a->proto == b->proto && a->dport_lo == b->dport_lo &&
	       a->dport_hi == b->dport_hi && same_prefix(&a->dst, &b->dst) &&
	       same_prefix(&a->src, &b->src) && a->has_vlan == b->has_vlan &&
	       a->vlan == b->vlan &&
	       (a->grade != SL_GRADE_CPS || b->grade == SL_GRADE_CPS);
}

static bool matches_all(const struct sl_rule *r)
{
	return r->proto == SL_PROTO_ANY && !r->dport_lo && !r->dst.family &&
	       !r->src.family && !r->has_vlan;
}

/* A packet can be in both prefixes (an absent one: any). */
static bool prefixes_meet(const struct sl_prefix *a, const struct sl_prefix *b)
{
	return sl_prefix_contains(a, b) || sl_prefix_contains(b, a);
}

static int rule_family(const struct sl_rule *r)
{
	return r->dst.family ? r->dst.family : r->src.family;
}

/* Some packet matches both rules. */
static bool overlaps(const struct sl_rule *a, const struct sl_rule *b)
{
	int fa = rule_family(a), fb = rule_family(b);

	return (a->proto == b->proto || a->proto == SL_PROTO_ANY ||
		b->proto == SL_PROTO_ANY) &&
	       (!a->dport_lo || !b->dport_lo ||
		(a->dport_lo <= b->dport_hi && b->dport_lo <= a->dport_hi)) &&
	       (!a->has_vlan || !b->has_vlan || a->vlan == b->vlan) &&
	       (!fa || !fb || fa == fb) && prefixes_meet(&a->dst, &b->dst) &&
	       prefixes_meet(&a->src, &b->src);
}

/*
 * An allow or deny rule that a limit of the same priority outranks on
 * the packets both match (by specificity: "drop this /16" loses to a tcp
 * rule): likely meant to judge them all.
 */
static void warn_outranked(const struct sl_ruleset *rs, const size_t *order,
			   size_t i)
{
	const struct sl_rule *r = &rs->rules[order[i]];
	size_t first = 0, n = 0;
	char more[48] = "";

	for (size_t j = 0; r->action != SL_ACTION_LIMIT && j < i; j++) {
		const struct sl_rule *a = &rs->rules[order[j]];

		if (a->action != SL_ACTION_LIMIT || a->layer != r->layer ||
		    sl_rule_priority(a) != sl_rule_priority(r) ||
		    !overlaps(a, r))
			continue;
		if (!n++)
			first = j;
	}
	if (!n)
		return;
	if (n > 1)
		snprintf(more, sizeof(more), " and %zu more limit%s", n - 1,
			 n > 2 ? "s" : "");
	pr_warn("rule '%s' (%s) does not judge the packets that '%s' (rank "
		"%zu)%s also match%s: more specific, they rank first; give "
		"'%s' a priority to judge them all",
		r->name, sl_action_str(r->action),
		rs->rules[order[first]].name, first + 1, more,
		n > 1 ? "" : "es", r->name);
}

/*
 * An aggregate limit in a layer before a per_source rule it overlaps: it
 * is charged by the packets the per_source rule then drops, so one
 * source's flood spends it for every source (docs/rules.md "layer").
 */
static void warn_layer_order(const struct sl_ruleset *rs, const size_t *order,
			     size_t i)
{
	const struct sl_rule *r = &rs->rules[order[i]];

	for (size_t j = 0; r->per_source && j < i; j++) {
		const struct sl_rule *a = &rs->rules[order[j]];

		if (a->layer >= r->layer || a->action != SL_ACTION_LIMIT ||
		    a->per_source || !overlaps(a, r))
			continue;
		pr_warn("rule '%s' (layer %u) is charged for the packets that "
			"per_source rule '%s' (layer %u) then drops, so one "
			"source's flood spends it for all; put '%s' in a "
			"layer after '%s'",
			a->name, a->layer, r->name, r->layer, a->name,
			r->name);
		return;
	}
}

/* Rules that are valid but likely mistakes, on stderr. */
static void warn_rules(const struct sl_ruleset *rs, const size_t *order)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct sl_rule *r = &rs->rules[order[i]];

		if (matches_all(r))
			pr_warn("rule '%s' matches every packet (\"match\": "
				"{}), SSH and the agent's own traffic too",
				r->name);
		for (size_t j = 0; j < i; j++) {
			const struct sl_rule *a = &rs->rules[order[j]];

			if (a->layer != r->layer || !shadows(a, r))
				continue;
			pr_warn("rule '%s' can never match: '%s' (rank %zu) "
				"has the same match and judges its packets "
				"first", r->name, a->name, j + 1);
			break;
		}
		warn_outranked(rs, order, i);
		warn_layer_order(rs, order, i);
	}
}

/* The rules in canonical form, in precedence order, each with its rank. */
static cJSON *ranked_json(const struct sl_ruleset *rs, const size_t *order)
{
	char *text = sl_ruleset_to_json(rs, false);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON **item = calloc(rs->n + 1, sizeof(*item));
	cJSON *out = NULL, *r;
	size_t k = 0;

	free(text);
	/* the canonical rules are in file order */
	cJSON_ArrayForEach(r, cli_get(doc, "rules"))
		if (item && k < rs->n)
			item[k++] = r;
	if (item && k == rs->n)
		out = cJSON_CreateArray();
	for (size_t i = 0; out && i < rs->n; i++) {
		r = cJSON_Duplicate(item[order[i]], true);
		if (!r || !cJSON_AddNumberToObject(r, "rank", i + 1) ||
		    !cJSON_AddItemToArray(out, r)) {
			cJSON_Delete(r);
			cJSON_Delete(out);
			out = NULL;
		}
	}
	free(item);
	cJSON_Delete(doc);
	return out;
}

static int run_check(const struct sl_cmd *cmd, void *opts, int argc,
		     char **argv)
{
	struct cli *c = opts;
	struct sl_ruleset rs = { 0 };
	struct sl_compiled comp;
	const char *file = argv[0];
	const char *label = strcmp(file, "-") ? file : "<stdin>";
	cJSON *rules = NULL;
	size_t *order;
	int ret = 1;

	if (cli_check_rules(file, NULL, NULL, &rs, &comp))
		return SL_CLI_FAILED;
	order = calloc(rs.n + 1, sizeof(*order));
	for (size_t i = 0; order && i < rs.n; i++)
		order[i] = i;
	if (order) {
		qsort_r(order, rs.n, sizeof(*order), rank_cmp, &rs);
		rules = ranked_json(&rs, order);
	}
	if (!rules) {
		pr_err("%s: out of memory", label);
		goto out;
	}
	warn_rules(&rs, order);
	ret = 0;
	if (c->json) {
		cJSON *o = cJSON_CreateObject();
		char *text;

		cJSON_AddStringToObject(o, "file", label);
		cJSON_AddNumberToObject(o, "classes", comp.n_classes);
		cJSON_AddNumberToObject(o, "lpm4_entries", comp.n_lpm4);
		cJSON_AddNumberToObject(o, "lpm6_entries", comp.n_lpm6);
		cJSON_AddNumberToObject(o, "chains", comp.n_chains);
		cJSON_AddItemToObject(o, "rules", rules);
		rules = NULL;
		text = cJSON_Print(o);
		cJSON_Delete(o);
		if (text)
			puts(text);
		else
			pr_err("%s: out of memory", label);
		ret = text ? 0 : 1;
		cJSON_free(text);
		goto out;
	}
	printf("%s: %zu rules, %u classes, %u IPv4 + %u IPv6 trie entries",
	       label, rs.n, comp.n_classes, comp.n_lpm4, comp.n_lpm6);
	if (comp.n_chains)
		printf(", %u chains of layers", comp.n_chains);
	printf("\n");
	printf("%-4s %-5s %-24s %-6s %-11s %-8s %-20s %-20s %-5s %11s %-10s %-7s %-4s %s\n",
	       "rank", "layer", "name", "proto", "dport", "vlan", "dst", "src",
	       "grade", "count", "window", "mode", "prio", "per_source");
	for (size_t i = 0; i < rs.n; i++)
		print_rule_line(&rs.rules[order[i]], (int)i + 1);
	cli_print_settings(rules);
out:
	cJSON_Delete(rules);
	sl_compiled_free(&comp);
	sl_ruleset_free(&rs);
	free(order);
	return ret;
}

static const struct sl_opt check_opts[] = {
	{ .name = "json", .short_name = 'j', .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct cli, json),
	  .help = "print the compiled rules as JSON, in precedence order" },
	{ 0 },
};

const struct sl_cmd sl_cmd_check = {
	.name = "check",
	.args = "FILE|-",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (a rule file, or - for stdin)",
	.opts = check_opts,
	CLI_VERB,
	.run = run_check,
	.summary = "validate a rule file (- reads stdin) and print the "
		   "compiled rules in\nprecedence order; warnings for rules "
		   "that match everything or never",
};
