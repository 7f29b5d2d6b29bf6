// SPDX-License-Identifier: GPL-2.0
/* sluice: one binary, subcommands. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compile.h"
#include "loader.h"
#include "log.h"
#include "rules.h"
#include "stats.h"

#define ERRBUF 8192

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice COMMAND [OPTIONS]\n"
		"\n"
		"commands:\n"
		"  agent --iface IF[,IF...] --rules FILE [--xdp-mode native|generic|auto]\n"
		"        [--stats-interval SECONDS] [--allow-empty] [--drop-malformed]\n"
		"      attach the limiter and run in the foreground; detaches on\n"
		"      SIGINT/SIGTERM\n"
		"  check FILE\n"
		"      validate a rule file and print the compiled rules\n"
		"  help\n");
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

	if (argc != 2 || !err) {
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

static void print_stats(const struct sl_dataplane *dp, uint64_t *prev_pass,
			uint64_t *prev_block, double dt)
{
	printf("%-24s %-8s %12s %12s %14s %14s %10s\n", "rule", "mode",
	       "passed/s", "dropped/s", "passed", "dropped", "sources");
	for (size_t i = 0; i < dp->rules.n; i++) {
		const struct sl_rule *r = &dp->rules.rules[i];
		struct sl_rule_stats st;

		if (sl_dp_rule_stats(dp, i, &st))
			continue;
		printf("%-24s %-8s %12.0f %12.0f %14llu %14llu %10llu\n",
		       r->name, sl_mode_str(r->mode),
		       (st.passed_pkts - prev_pass[i]) / dt,
		       (st.blocked_pkts - prev_block[i]) / dt,
		       (unsigned long long)st.passed_pkts,
		       (unsigned long long)st.blocked_pkts,
		       (unsigned long long)st.sources);
		prev_pass[i] = st.passed_pkts;
		prev_block[i] = st.blocked_pkts;
	}
	fflush(stdout);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmd_agent(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "iface", required_argument, NULL, 'i' },
		{ "rules", required_argument, NULL, 'r' },
		{ "xdp-mode", required_argument, NULL, 'm' },
		{ "stats-interval", required_argument, NULL, 's' },
		{ "allow-empty", no_argument, NULL, 'e' },
		{ "drop-malformed", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct sl_dp_opts dopts = { 0 };
	enum sl_xdp_mode mode = SL_XDP_AUTO;
	const char *ifaces = NULL, *rules = NULL;
	struct sl_ruleset rs = { 0 };
	struct sl_dataplane dp;
	bool allow_empty = false;
	long stats_interval = 1;
	uint64_t *prev_pass = NULL, *prev_block = NULL;
	char *err, *end, *list, *tok, *save;
	int c, ret = 1;
	double last_stats, last_gc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			ifaces = optarg;
			break;
		case 'r':
			rules = optarg;
			break;
		case 'm':
			if (sl_xdp_mode_parse(optarg, &mode)) {
				pr_err("--xdp-mode: '%s' is not native, generic "
				       "or auto", optarg);
				return 2;
			}
			break;
		case 's':
			errno = 0;
			stats_interval = strtol(optarg, &end, 10);
			if (errno || *end || stats_interval < 0) {
				pr_err("--stats-interval: '%s' is not a number "
				       "of seconds >= 0", optarg);
				return 2;
			}
			break;
		case 'e':
			allow_empty = true;
			break;
		case 'd':
			dopts.drop_malformed = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		pr_err("unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (!ifaces || !rules) {
		pr_err("agent needs --iface and --rules");
		return 2;
	}

	err = calloc(1, ERRBUF);
	if (!err)
		return 1;
	if (sl_rules_load_file(rules, &rs, err, ERRBUF)) {
		pr_err("%s: refusing to start, the rule file is invalid:\n%s",
		       rules, err);
		goto out_free;
	}
	if (!rs.n && !allow_empty) {
		pr_err("%s holds no rules: refusing to start with nothing in "
		       "force (pass --allow-empty if that is intended)",
		       rules);
		goto out_free;
	}

	ret = sl_dp_load(&dp, &dopts);
	if (ret) {
		pr_err("loading the XDP program: %s", strerror(-ret));
		ret = 1;
		goto out_free;
	}
	/* every map is filled before the first attach: the first packet
	 * is already judged by the rules */
	if (sl_dp_apply(&dp, &rs, err, ERRBUF)) {
		pr_err("%s: %s", rules, err);
		ret = 1;
		goto out_dp;
	}
	list = strdup(ifaces);
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		ret = sl_dp_attach(&dp, tok, mode);
		if (ret) {
			pr_err("%s: cannot attach XDP (%s mode): %s", tok,
			       sl_xdp_mode_str(mode), strerror(-ret));
			free(list);
			ret = 1;
			goto out_dp;
		}
		pr_info("%s: attached in %s mode, %zu rules in force", tok,
			sl_xdp_mode_str(dp.ifaces[dp.n_ifaces - 1].mode),
			rs.n);
	}
	free(list);

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	prev_pass = calloc(rs.n + 1, sizeof(*prev_pass));
	prev_block = calloc(rs.n + 1, sizeof(*prev_block));
	last_stats = last_gc = mono_s();
	while (!stop) {
		double now;

		usleep(100000);
		now = mono_s();
		if (stats_interval && now - last_stats >= stats_interval) {
			print_stats(&dp, prev_pass, prev_block,
				    now - last_stats);
			last_stats = now;
		}
		if (now - last_gc >= 1.0) {
			sl_dp_gc_sources(&dp);
			last_gc = now;
		}
	}
	pr_info("signal %d: detaching", (int)stop);
	ret = 0;
out_dp:
	sl_dp_destroy(&dp);
out_free:
	free(prev_pass);
	free(prev_block);
	sl_ruleset_free(&rs);
	free(err);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "agent"))
		return cmd_agent(argc - 1, argv + 1);
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
