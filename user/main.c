// SPDX-License-Identifier: GPL-2.0
/* sluice: one binary, subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
#include "compile.h"
#include "rules.h"
#include "tokend.h"
#include "rules_parse.h"

#define ERRBUF 8192

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice COMMAND [OPTIONS]\n"
		"\n"
		"commands:\n"
		"  agent --iface IF[,IF...] [--state-dir DIR] [--pin-dir DIR]\n"
		"        [--rules FILE] [--xdp-mode native|generic|auto]\n"
		"        [--allow-empty] [--stats-interval SECONDS] [--drop-malformed]\n"
		"      the daemon: puts the snapshot's rules in force, attaches,\n"
		"      serves the CLI; the data plane stays attached when it exits\n"
		"  rule add|del|replace|list ...   change or show the rules\n"
		"  status [-j] [--ready]           the agent's state, readiness\n"
		"  stats [-j] [--watch [SECONDS]]  per-rule rates and totals\n"
		"  down --iface IF[,IF...]         detach and remove the pins\n"
		"  tokend --listen ADDR:PORT --rules FILE --state-dir DIR\n"
		"         [--secrets FILE] [--lease-ttl-ms MS] ...\n"
		"      the token server for cluster rules (docs/cluster.md)\n"
		"  check FILE\n"
		"      validate a rule file and print the compiled rules\n"
		"  help\n"
		"\n"
		"docs/cli.md has the details.\n");
}

static void print_rule_line(const struct sl_rule *r, int rank)
{
	char dst[64], src[64], port[16] = "any", win[32], ps[48] = "-";

	sl_prefix_str(&r->dst, dst, sizeof(dst));
	sl_prefix_str(&r->src, src, sizeof(src));
	if (r->dport_lo == r->dport_hi && r->dport_lo)
		snprintf(port, sizeof(port), "%u", r->dport_lo);
	else if (r->dport_lo)
		snprintf(port, sizeof(port), "%u-%u", r->dport_lo, r->dport_hi);
	snprintf(win, sizeof(win), "%ums/%u", r->interval_ms, r->sample_count);
	if (r->per_source)
		snprintf(ps, sizeof(ps), "/%u,/%u max %u", r->src_prefix_v4,
			 r->src_prefix_v6, r->max_sources);
	printf("%-4d %-24s %-6s %-11s %-20s %-20s %-4s %12llu %-10s %-7s %-4u %s\n",
	       rank, r->name, sl_proto_str(r->proto), port, dst, src,
	       sl_grade_str(r->grade), (unsigned long long)r->count, win,
	       sl_mode_str(r->mode), r->has_priority ? r->priority : 0, ps);
}

static const struct sl_ruleset *rank_rs;

static int rank_cmp(const void *a, const void *b)
{
	return sl_rule_cmp(&rank_rs->rules[*(const size_t *)a],
			   &rank_rs->rules[*(const size_t *)b]);
}

static int cmd_check(int argc, char **argv)
{
	struct sl_ruleset rs = { 0 };
	struct sl_compiled comp;
	char *err = calloc(1, ERRBUF);
	uint32_t *slots;
	size_t *order;
	int ret;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: sluice check FILE\n");
		free(err);
		return 0;
	}
	if (argc != 2 || !err || (argv[1][0] == '-' && argv[1][1])) {
		if (argc == 2 && err)
			fprintf(stderr, "sluice check: unknown option '%s'\n",
				argv[1]);
		fprintf(stderr, "usage: sluice check FILE\n");
		free(err);
		return 2;
	}
	if (sl_rules_load_file(argv[1], &rs, err, ERRBUF)) {
		fprintf(stderr, "%s: invalid:\n%s\n", argv[1], err);
		free(err);
		return 1;
	}
	slots = calloc(rs.n + 1, sizeof(*slots));
	order = calloc(rs.n + 1, sizeof(*order));
	for (size_t i = 0; slots && i < rs.n; i++)
		slots[i] = i;
	ret = slots && order ? sl_compile(&rs, slots, 1, SLUICE_MAX_LPM / 2,
					  &comp, err, ERRBUF)
			     : -ENOMEM;
	if (ret) {
		fprintf(stderr, "%s: cannot compile: %s\n", argv[1],
			ret == -ENOMEM ? "out of memory" : err);
		ret = 1;
		goto out;
	}
	printf("%s: %zu rules, %u classes, %u IPv4 + %u IPv6 trie entries\n",
	       argv[1], rs.n, comp.n_classes, comp.n_lpm4, comp.n_lpm6);
	printf("%-4s %-24s %-6s %-11s %-20s %-20s %-4s %12s %-10s %-7s %-4s %s\n",
	       "rank", "name", "proto", "dport", "dst", "src", "grad",
	       "count", "window", "mode", "prio", "per_source");
	for (size_t i = 0; i < rs.n; i++)
		order[i] = i;
	rank_rs = &rs;
	qsort(order, rs.n, sizeof(*order), rank_cmp);
	for (size_t i = 0; i < rs.n; i++)
		print_rule_line(&rs.rules[order[i]], (int)i + 1);
	sl_compiled_free(&comp);
out:
	free(slots);
	free(order);
	free(err);
	sl_ruleset_free(&rs);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "agent"))
		return sl_agent_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rule") || !strcmp(argv[1], "status") ||
	    !strcmp(argv[1], "stats") || !strcmp(argv[1], "down"))
		return sl_cli_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "tokend"))
		return sl_tokend_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
