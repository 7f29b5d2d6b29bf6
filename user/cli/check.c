// SPDX-License-Identifier: GPL-2.0
/* `sluice check FILE`: validate and compile a rule file, offline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compile.h"
#include "rules_parse.h"

#define ERRBUF 65536

static void print_rule_line(const struct sl_rule *r, int rank)
{
	char dst[64], src[64], port[16] = "any", win[32], ps[48] = "-";
	char vlan[12] = "any";

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
	if (r->per_source)
		snprintf(ps, sizeof(ps), "/%u,/%u max %u", r->src_prefix_v4,
			 r->src_prefix_v6, r->max_sources);
	printf("%-4d %-24s %-6s %-11s %-8s %-20s %-20s %-4s %12llu %-10s %-7s %-4u %s\n",
	       rank, r->name, sl_proto_str(r->proto), port, vlan, dst, src,
	       sl_grade_str(r->grade), (unsigned long long)r->count, win,
	       sl_mode_str(r->mode), r->has_priority ? r->priority : 0, ps);
}

static int rank_cmp(const void *a, const void *b, void *rs)
{
	const struct sl_rule *rules = ((const struct sl_ruleset *)rs)->rules;

	return sl_rule_cmp(&rules[*(const size_t *)a],
			   &rules[*(const size_t *)b]);
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
		fprintf(stderr, "%s: invalid:\n%s\n", file, err);
		goto out;
	}
	slots = calloc(rs->n + 1, sizeof(*slots));
	for (size_t i = 0; slots && i < rs->n; i++)
		slots[i] = i;
	ret = slots ? sl_compile(rs, slots, 1, SLUICE_MAX_LPM / 2, comp, err,
				 ERRBUF)
		    : -ENOMEM;
	if (ret) {
		fprintf(stderr, "%s: cannot compile: %s\n", file,
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

static int run_check(const struct sl_cmd *cmd, void *opts, int argc,
		     char **argv)
{
	struct sl_ruleset rs = { 0 };
	struct sl_compiled comp;
	const char *file = argv[0];
	size_t *order;
	int ret;

	if (cli_check_rules(file, NULL, NULL, &rs, &comp))
		return 1;
	printf("%s: %zu rules, %u classes, %u IPv4 + %u IPv6 trie entries\n",
	       file, rs.n, comp.n_classes, comp.n_lpm4, comp.n_lpm6);
	printf("%-4s %-24s %-6s %-11s %-8s %-20s %-20s %-4s %12s %-10s %-7s %-4s %s\n",
	       "rank", "name", "proto", "dport", "vlan", "dst", "src", "grad",
	       "count", "window", "mode", "prio", "per_source");
	order = calloc(rs.n + 1, sizeof(*order));
	for (size_t i = 0; order && i < rs.n; i++)
		order[i] = i;
	if (order)
		qsort_r(order, rs.n, sizeof(*order), rank_cmp, &rs);
	for (size_t i = 0; order && i < rs.n; i++)
		print_rule_line(&rs.rules[order[i]], (int)i + 1);
	ret = order ? 0 : 1;
	if (ret)
		fprintf(stderr, "%s: out of memory\n", file);
	sl_compiled_free(&comp);
	sl_ruleset_free(&rs);
	free(order);
	return ret;
}

const struct sl_cmd sl_cmd_check = {
	.name = "check",
	.args = "FILE",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (a rule file)",
	.run = run_check,
	.summary = "validate a rule file and print the compiled rules in "
		   "precedence order",
};
