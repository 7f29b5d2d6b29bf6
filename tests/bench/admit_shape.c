// SPDX-License-Identifier: GPL-2.0
/*
 * admit_shape: how sluice admits a flood over time, with the test clock.
 * One rule (udp dport 9000, pps) on a data plane loaded with the test
 * clock; frames arrive in steps of --step-us, each step's share of the
 * offered rate run one by one through BPF_PROG_TEST_RUN at the step's
 * time. Prints, per arrival shape, the admitted share of count over the
 * whole seconds after the first two and the busiest 100 ms after 1.5 s
 * as a share of one interval's limit L (a flood paced at count has 0.10).
 * docs/architecture.md ("the echo") quotes it. Needs root.
 *
 *   admit_shape                       the shapes of docs/architecture.md
 *   admit_shape --count C --rate R [--seconds S] [--on-ms A --off-ms B]
 *               [--ramp-ms M] [--warm-up P:F] [--trace]
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "loader.h"
#include "log.h"
#include "rules.h"
#include "rules_parse.h"
#include "sluice.skel.h"
#include "frame.h"
#include "genutil.h"

struct shape {
	const char *name;
	uint64_t count, rate, seconds;
	double on_ms, off_ms;	/* bursts: rate is the mean over a cycle */
	double ramp_ms;		/* the rate rises from 0 over this long */
	int warm_period_s, warm_cold_factor;
};

static const struct shape shapes[] = {
	{ .name = "paced 50 kpps", .count = 20000, .rate = 50000,
	  .seconds = 10 },
	{ .name = "unpaced 1 Mpps", .count = 20000, .rate = 1000000,
	  .seconds = 8 },
	{ .name = "275 kpps in 10 ms bursts every 100 ms", .count = 100000,
	  .rate = 275000, .seconds = 10, .on_ms = 10, .off_ms = 90 },
	{ .name = "60 kpps in 30 ms bursts every 50 ms", .count = 20000,
	  .rate = 60000, .seconds = 10, .on_ms = 30, .off_ms = 20 },
	{ .name = "ramp from 0 to 100 kpps over 2 s", .count = 20000,
	  .rate = 100000, .seconds = 10, .ramp_ms = 2000 },
	{ .name = "warm-up 5 s, cold_factor 4, 50 kpps", .count = 20000,
	  .rate = 50000, .seconds = 8, .warm_period_s = 5,
	  .warm_cold_factor = 4 },
};

static unsigned step_us = 100;
static bool trace;
static struct frame frame;

/* 64 bytes, Ethernet, IPv4 198.18.0.1 -> 198.18.0.2, UDP to 9000: the
 * traffic tools' builder (tests/gen/frame.c); the MACs are arbitrary. */
static int build_frame(void)
{
	struct frame_spec spec;

	frame_spec_init(&spec);
	if (frame_spec_opt(&spec, FRAME_OPT_DST_MAC, "02:00:00:00:00:02") ||
	    frame_spec_opt(&spec, FRAME_OPT_SRC_MAC, "02:00:00:00:00:01") ||
	    frame_spec_opt(&spec, FRAME_OPT_DPORT, "9000"))
		return -EINVAL;
	return frame_build(&spec, NULL, &frame);
}

static double offered_rate(const struct shape *s, double t_ms)
{
	double r = s->rate;

	if (s->ramp_ms && t_ms < s->ramp_ms)
		r = r * t_ms / s->ramp_ms;
	if (s->on_ms) {
		if (fmod(t_ms, s->on_ms + s->off_ms) >= s->on_ms)
			return 0;
		r = r * (s->on_ms + s->off_ms) / s->on_ms;
	}
	return r;
}

static int apply_rule(struct sl_dataplane *dp, const struct shape *s)
{
	char json[512], behavior[128] = "", err[4096];
	struct sl_ruleset rs = { 0 };
	static int runs;
	int ret;

	if (s->warm_period_s)
		snprintf(behavior, sizeof(behavior),
			 ",\"behavior\":{\"warm_up\":{\"period_s\":%d,"
			 "\"cold_factor\":%d}}",
			 s->warm_period_s, s->warm_cold_factor);
	snprintf(json, sizeof(json),
		 "{\"rules\":[{\"name\":\"shape-%d\",\"match\":{\"proto\":"
		 "\"udp\",\"dport\":9000},\"grade\":\"pps\",\"count\":%llu%s}]}",
		 ++runs, (unsigned long long)s->count, behavior);
	ret = sl_rules_parse(json, strlen(json), &rs, err, sizeof(err));
	if (!ret)
		ret = sl_dp_apply(dp, &rs, err, sizeof(err));
	if (ret)
		fprintf(stderr, "admit_shape: rule: %s\n", err);
	sl_ruleset_free(&rs);
	return ret;
}

/* Admitted frames per step; NULL on error. */
static uint64_t *run_shape(struct sl_dataplane *dp, const struct shape *s,
			   uint64_t start_ns)
{
	uint64_t nsteps = s->seconds * 1000000 / step_us, *adm;
	int fd = bpf_program__fd(dp->skel->progs.sluice_xdp);
	double due = 0;

	adm = calloc(nsteps, sizeof(*adm));
	if (!adm)
		return NULL;
	sl_dp_set_test_time(dp, start_ns);
	if (apply_rule(dp, s)) {
		free(adm);
		return NULL;
	}
	for (uint64_t i = 0; i < nsteps; i++) {
		uint64_t n;

		due += offered_rate(s, i * step_us / 1000.0) * step_us / 1e6;
		n = (uint64_t)due;
		due -= n;
		sl_dp_set_test_time(dp, start_ns + i * step_us * 1000);
		for (uint64_t k = 0; k < n; k++) {
			LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame.data,
				    .data_size_in = frame.len,
				    .repeat = 1);

			if (bpf_prog_test_run_opts(fd, &o)) {
				fprintf(stderr, "admit_shape: test_run: %s\n",
					strerror(errno));
				free(adm);
				return NULL;
			}
			adm[i] += o.retval == XDP_PASS;
		}
	}
	return adm;
}

/* What the limit lets a flood have in second sec: count, or the mean of
 * a warm-up ramp's threshold over that second (docs/rules.md). */
static double due(const struct shape *s, uint64_t sec)
{
	double cold, sum = 0;

	if (!s->warm_period_s)
		return s->count;
	cold = (double)(s->count / s->warm_cold_factor);
	for (int i = 0; i < 100; i++) {
		double t = sec + (i + 0.5) / 100;

		sum += t < s->warm_period_s ?
			cold + (s->count - cold) * t / s->warm_period_s :
			s->count;
	}
	return sum / 100;
}

static void report(const struct shape *s, const uint64_t *adm)
{
	uint64_t per_s = 1000000 / step_us, w100 = per_s / 10;
	uint64_t nsteps = s->seconds * per_s, after = 0, busiest = 0, cur = 0;
	uint64_t limit = s->count;	/* L: interval_ms is 1000 */
	double after_due = 0;

	if (trace) {
		printf("# %s: admitted per 50 ms, a line per second\n", s->name);
		for (uint64_t i = 0; i < nsteps; i += w100 / 2) {
			uint64_t n = 0;

			for (uint64_t k = i; k < i + w100 / 2; k++)
				n += adm[k];
			printf("%s%llu", i % per_s ? " " : "\n",
			       (unsigned long long)n);
		}
		printf("\n");
	}
	printf("%-40s", s->name);
	for (uint64_t sec = 0; sec < s->seconds; sec++) {
		uint64_t n = 0;

		for (uint64_t k = sec * per_s; k < (sec + 1) * per_s; k++)
			n += adm[k];
		if (sec >= 2) {
			after += n;
			after_due += due(s, sec);
		}
		if (trace)
			printf(" %llu", (unsigned long long)n);
	}
	for (uint64_t i = per_s * 3 / 2; i < nsteps; i++) {
		cur += adm[i];
		if (i >= per_s * 3 / 2 + w100)
			cur -= adm[i - w100];
		if (cur > busiest)
			busiest = cur;
	}
	printf(" %7.2f%% %6.3f\n", 100.0 * after / after_due,
	       (double)busiest / limit);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: admit_shape [--count C --rate R [--seconds S] "
		"[--on-ms A --off-ms B] [--ramp-ms M] [--warm-up P:F]] "
		"[--step-us U] [--trace]\n");
	exit(2);
}

/* The value of option opt, or exit 2 naming what is wrong. */
static uint32_t arg_u32(const char *opt, uint32_t lo, uint32_t hi)
{
	uint32_t v;

	if (sl_parse_u32(optarg, lo, hi, &v)) {
		fprintf(stderr, "admit_shape: --%s: %u to %u, not '%s'\n", opt,
			lo, hi, optarg);
		exit(2);
	}
	return v;
}

static double arg_ms(const char *opt)
{
	double v;

	if (sl_parse_double(optarg, 0, 60000, &v)) {
		fprintf(stderr, "admit_shape: --%s: 0 to 60000 ms, not '%s'\n",
			opt, optarg);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "on-ms", required_argument, NULL, 'o' },
		{ "off-ms", required_argument, NULL, 'f' },
		{ "ramp-ms", required_argument, NULL, 'R' },
		{ "warm-up", required_argument, NULL, 'w' },
		{ "step-us", required_argument, NULL, 'u' },
		{ "trace", no_argument, NULL, 't' },
		{ 0 }
	};
	struct shape one = { .name = "custom", .seconds = 10 };
	struct sl_dp_opts o = { .test_clock = true };
	const struct shape *list = shapes;
	size_t n = sizeof(shapes) / sizeof(shapes[0]);
	struct sl_dataplane dp;
	uint64_t start_ns = 1000ULL * 1000000000ULL;
	cpu_set_t cpus;
	int c, err, end;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': one.count = arg_u32("count", 1, 100000000); break;
		case 'r': one.rate = arg_u32("rate", 1, 100000000); break;
		case 's': one.seconds = arg_u32("seconds", 3, 600); break;
		case 'o': one.on_ms = arg_ms("on-ms"); break;
		case 'f': one.off_ms = arg_ms("off-ms"); break;
		case 'R': one.ramp_ms = arg_ms("ramp-ms"); break;
		case 'w':
			/* the rule parser judges the values; 0 s would
			 * mean no warm-up here */
			if (sscanf(optarg, "%d:%d%n", &one.warm_period_s,
				   &one.warm_cold_factor, &end) != 2 ||
			    optarg[end] || one.warm_period_s < 1) {
				fprintf(stderr, "admit_shape: --warm-up: "
					"PERIOD_S:COLD_FACTOR, not '%s'\n",
					optarg);
				exit(2);
			}
			break;
		case 'u': step_us = arg_u32("step-us", 1, 100000); break;
		case 't': trace = true; break;
		default: usage();
		}
	}
	if (optind != argc || 100000 % step_us || !one.count != !one.rate)
		usage();
	if (one.count) {
		list = &one;
		n = 1;
	}

	/* the per-CPU token caches make one CPU's counts exact */
	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	sl_log_daemon(&(struct sl_log_opts){ .level = SL_LOG_WARN }, NULL);
	err = sl_dp_load(&dp, &o);
	if (err) {
		fprintf(stderr, "admit_shape: load the data plane: %s\n",
			strerror(-err));
		return 1;
	}
	if (build_frame()) {
		sl_dp_destroy(&dp);
		return 1;
	}
	printf("sluice admission shape: test clock, %u us steps, 1 rule, "
	       "interval 1 s\n%-40s %8s %6s\n", step_us, "arrivals",
	       "admitted", "100ms/L");
	for (size_t i = 0; i < n; i++) {
		uint64_t *adm = run_shape(&dp, &list[i], start_ns);

		if (!adm) {
			sl_dp_destroy(&dp);
			return 1;
		}
		report(&list[i], adm);
		free(adm);
		/* the next shape starts from idle */
		start_ns += (list[i].seconds + 10) * 1000000000ULL;
	}
	sl_dp_destroy(&dp);
	return 0;
}
