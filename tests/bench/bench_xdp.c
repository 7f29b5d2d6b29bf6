// SPDX-License-Identifier: GPL-2.0
/*
 * bench_xdp: the per-packet cost of sluice's XDP program against a bare
 * program that parses the same headers (tests/bench/bare.bpf.c), measured
 * with BPF_PROG_TEST_RUN on one pinned CPU (docs/benchmarks.md).
 *
 * Every case gets its own data plane, loaded with the production clock
 * (bpf_ktime_get_ns). Each run of a sluice case follows a run of the bare
 * program of its path, and its ratio is taken to that run, so a drift of
 * the machine's speed cancels. The program reports; it never fails on a
 * missed target (exit 1 only when it cannot measure).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bare.skel.h"
#include "bench_scale.h"
#include "genutil.h"
#include "loader.h"
#include "log.h"
#include "pkt.h"
#include "rules.h"
#include "rules_parse.h"
#include "sluice.skel.h"
#include "stats.h"

#define BENCH_RUNS	   7 /* runs per case; the median is reported */
#define BENCH_MAX_RUNS	   101
#define BENCH_REPEAT	   1000000u	/* packets per run */
#define BENCH_PORT	   9000		/* the measured rule's UDP port */
#define BENCH_PASS_COUNT   SL_MAX_COUNT /* pps: nothing reaches the limit */
#define BENCH_DROP_COUNT   1		/* pps: all but ~1 packet/s dropped */
#define BENCH_MANY_RULES   SL_MAX_RULES
#define BENCH_PREFIX_RULES 64	   /* dst-prefix rules in the big set */
#define BENCH_SOURCES	   100000u /* per_source: sources prefilled */
#define BENCH_MAX_SOURCES  200000u /* per_source: the rule's max_sources */
#define BENCH_SRC_FRAMES   64	   /* per_source: distinct frames measured */
#define BENCH_FRAME_LEN	   64
#define BENCH_SRC_BASE	   0xc6120001u /* 198.18.0.1: sources in 198.18/15 */
#define BENCH_DST	   0xc0000201u /* 192.0.2.1: in no prefix rule */
#define BENCH_TRIES	   5	/* attempts at a steady bracket */
#define BENCH_STEADY	   0.10	/* bare runs around a case agree within */

enum bench_kind {
	BK_BARE = 0,
	BK_ONE,
	BK_MANY_PORT,
	BK_MANY_TRIE,
	BK_MANY_VLAN,
	BK_PER_SOURCE,
	BK_ACTION, /* pass: an allow rule; drop: a deny rule */
	BK_LAYERS2, /* the measured rule in the last of 2-4 layers, those */
	BK_LAYERS3, /* before it passing */
	BK_LAYERS4,
	BK_CONNS, /* pass: an open connection's segment; drop: a SYN over
		   * count (refuse drop) */
	BK_FRAGS, /* BK_ONE through sluice_xdp_frags */
	BK_MAX,
};

static const char *const kind_name[BK_MAX] = {
    [BK_BARE] = "bare parse",
    [BK_ONE] = "sluice, 1 rule",
    [BK_MANY_PORT] = "sluice, 4096 rules",
    [BK_MANY_TRIE] = "sluice, 4096 rules, dst trie",
    [BK_MANY_VLAN] = "sluice, 4096 rules, VLAN stage",
    [BK_PER_SOURCE] = "sluice, per_source 100k src",
    [BK_ACTION] = "sluice, 1 allow (deny) rule",
    [BK_LAYERS2] = "sluice, 2 layers",
    [BK_LAYERS3] = "sluice, 3 layers",
    [BK_LAYERS4] = "sluice, 4 layers",
    [BK_CONNS] = "sluice, 1 conns rule (TCP)",
    [BK_FRAGS] = "sluice, 1 rule, multi-buffer",
};

/* Issue targets: the ratio to the bare program. */
static const double kind_target[BK_MAX] = {
    [BK_ONE] = 1.6,
    [BK_MANY_PORT] = 1.8,
    [BK_MANY_TRIE] = 1.8,
    [BK_PER_SOURCE] = 2.0,
};

/* The drop path's packet rate against the bare parse-and-drop's. */
#define BENCH_DROP_RATE_TARGET 0.95

static const char *const kind_tag[BK_MAX] = {
    [BK_ONE] = "1-rule",
    [BK_MANY_PORT] = "4096-rule",
    [BK_MANY_TRIE] = "4096-rule (dst trie)",
    [BK_PER_SOURCE] = "per_source",
};

struct frame {
	uint8_t data[BENCH_FRAME_LEN];
};

struct bench_case {
	enum bench_kind kind;
	bool drop;
	int prog_fd;
	struct bare_bpf *bare;	/* BK_BARE */
	struct sl_dataplane dp; /* the others */
	bool have_dp;
	struct frame *frames;
	uint32_t n_frames;
	/* ns per packet of each run; a bare case runs before and after
	 * each sluice case of its path in every round */
	double ns[2 * BENCH_MAX_RUNS * BK_MAX];
	int n_ns;
	double ratio[BENCH_MAX_RUNS]; /* ns / mean ns of the bare runs around */
	double added[BENCH_MAX_RUNS]; /* ns - mean ns of the bare runs around */
	uint64_t passed0, blocked0;   /* the measured rule, before the runs */
	double median, min, max, ratio_median;
	double added_mean, added_ci; /* and its 95 % confidence half-width */
	double passed_frac; /* of the measured packets; -1 for bare */
};

struct bench_opts {
	int runs;
	uint32_t repeat;
	int cpu;
	uint32_t sources;
	int threads;	  /* --threads: the scaling benchmark instead */
	const char *path; /* --path: its paths that contain this */
	bool runs_set;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bench_xdp: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* A 64-byte Ethernet/IPv4 frame, saddr -> BENCH_DST:BENCH_PORT: UDP
 * from port 10000, or with tcp_flags TCP from sport (the conns case). */
static void frame_build_l4(struct frame *f, uint32_t saddr, uint16_t sport,
			   uint8_t tcp_flags)
{
	struct pkt_ipv4_hdr h = { .src.s_addr = htonl(saddr),
				  .dst.s_addr = htonl(BENCH_DST) };
	struct pkt p;

	pkt_init(&p);
	pkt_eth(&p, NULL, NULL);
	pkt_ipv4_hdr(&p, &h);
	if (tcp_flags)
		pkt_tcp(&p, sport, BENCH_PORT, tcp_flags);
	else
		pkt_udp(&p, 10000, BENCH_PORT);
	memcpy(f->data, p.buf, pkt_finish(&p, sizeof(f->data)));
}

static void frame_build(struct frame *f, uint32_t saddr)
{
	frame_build_l4(f, saddr, 0, 0);
}

/* One rule document; count is the measured rule's threshold. */
static char *rules_json(enum bench_kind kind, uint64_t count)
{
	size_t cap = 256 * (BENCH_MANY_RULES + 1), len = 0;
	char *s = malloc(cap);
	int n_layers = kind >= BK_LAYERS2 && kind <= BK_LAYERS4
			   ? 2 + (kind - BK_LAYERS2)
			   : 1;
	int n_port, i;

	if (!s)
		die("out of memory");
#define EMIT(...) (len += snprintf(s + len, cap - len, __VA_ARGS__))
	/* VLAN stage: the measured (untagged) frame's port has VLAN rules,
	 * so it takes one lookup more before it finds its rule */
	EMIT("{\"rules\": [\n{\"name\": \"measured\", \"match\": "
	     "{\"proto\": \"%s\", \"dport\": %d%s}, ",
	     kind == BK_CONNS ? "tcp" : "udp", BENCH_PORT,
	     kind == BK_MANY_VLAN ? ", \"vlan\": \"untagged\"" : "");
	if (kind == BK_ACTION)
		EMIT("\"action\": \"%s\"",
		     count == BENCH_DROP_COUNT ? "deny" : "allow");
	else if (kind == BK_CONNS)
		EMIT("\"grade\": \"conns\", \"count\": %u, \"conns\": "
		     "{\"refuse\": \"drop\"}",
		     count == BENCH_DROP_COUNT ? 1 : 100000);
	else
		EMIT("\"grade\": \"pps\", \"count\": %llu",
		     (unsigned long long) count);
	if (kind == BK_PER_SOURCE)
		EMIT(", \"per_source\": {\"max_sources\": %u}",
		     BENCH_MAX_SOURCES);
	if (n_layers > 1)
		EMIT(", \"layer\": %d", n_layers - 1);
	EMIT("}");
	for (i = 0; i < n_layers - 1; i++)
		EMIT(",\n{\"name\": \"layer%d\", \"match\": {\"proto\": "
		     "\"udp\", \"dport\": %d}, \"grade\": \"pps\", "
		     "\"count\": %llu, \"layer\": %d}",
		     i, BENCH_PORT, (unsigned long long) BENCH_PASS_COUNT, i);
	if (kind == BK_MANY_VLAN)
		EMIT(",\n{\"name\": \"vlan100\", \"match\": {\"proto\": "
		     "\"udp\", \"dport\": %d, \"vlan\": 100}, \"grade\": "
		     "\"pps\", \"count\": 1000}",
		     BENCH_PORT);
	if (kind == BK_MANY_PORT || kind == BK_MANY_TRIE ||
	    kind == BK_MANY_VLAN) {
		/* dst-prefix rules: on the measured port (its packets then
		 * go through the dst trie) or on a port of their own */
		for (i = 0; i < BENCH_PREFIX_RULES; i++)
			EMIT(",\n{\"name\": \"prefix%d\", \"match\": "
			     "{\"proto\": \"%s\", \"dport\": %d, "
			     "\"dst\": \"10.%d.0.0/16\"}, \"grade\": \"pps\", "
			     "\"count\": 1000}",
			     i, kind == BK_MANY_TRIE ? "udp" : "tcp",
			     kind == BK_MANY_TRIE ? BENCH_PORT : 443, i);
		n_port = BENCH_MANY_RULES - 1 - BENCH_PREFIX_RULES -
			 (kind == BK_MANY_VLAN);
		for (i = 0; i < n_port; i++)
			EMIT(",\n{\"name\": \"port%d\", \"match\": "
			     "{\"proto\": \"%s\", \"dport\": %d}, "
			     "\"grade\": \"pps\", \"count\": %d}",
			     i, i & 1 ? "tcp" : "udp", 20000 + i, 1000 + i);
	}
	EMIT("\n]}\n");
#undef EMIT
	if (len >= cap)
		die("rule document too long");
	return s;
}

/* The measured rule's totals (it is rule 0 of every set). */
static void rule_totals(struct bench_case *c, uint64_t *passed,
			uint64_t *blocked)
{
	struct sl_rule_stats st;
	int err = sl_dp_rule_stats(&c->dp, 0, &st);

	if (err)
		die("reading rule stats: %s", strerror(-err));
	*passed = st.passed_pkts;
	*blocked = st.blocked_pkts;
}

/* The mean of v[0..n) and the half-width of its 95 % confidence
 * interval (normal approximation; 0 for one value). */
static void mean_ci(const double *v, int n, double *mean, double *ci)
{
	double sum = 0, sq = 0;

	for (int i = 0; i < n; i++)
		sum += v[i];
	*mean = sum / n;
	for (int i = 0; i < n; i++)
		sq += (v[i] - *mean) * (v[i] - *mean);
	*ci = n > 1 ? 1.96 * sqrt(sq / (n - 1) / n) : 0;
}

/*
 * Runs frames[] through the program, repeat packets in all, and returns
 * the kernel's mean ns per packet. The kernel times only its loop: a
 * test_run call with repeat > 1 also re-patches the XDP dispatcher, which
 * costs ~0.5 ms of CPU and an RCU grace period, so the time of the call
 * seen from user space is no measure of the program.
 */
static int run_frames(struct bench_case *c, uint32_t repeat, double *ns)
{
	uint32_t per = (repeat + c->n_frames - 1) / c->n_frames;
	double sum = 0;

	for (uint32_t i = 0; i < c->n_frames; i++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = c->frames[i].data,
			    .data_size_in = sizeof(c->frames[i].data),
			    .repeat = per);

		if (bpf_prog_test_run_opts(c->prog_fd, &o))
			return -errno;
		sum += o.duration;
	}
	if (ns)
		*ns = sum / c->n_frames;
	return 0;
}

/*
 * per_source: one packet from each of n sources. A source takes an exact
 * entry once the sketch has seen half its count from it (docs/rules.md):
 * at count 1 (the drop cases) that packet creates it; the pass cases'
 * sources stay in the sketch tier, which is what they then measure.
 */
static void prefill_sources(struct bench_case *c, uint32_t n)
{
	uint32_t want = c->drop ? n : 0;
	struct sl_rule_stats st;
	struct frame f;
	int err;

	for (uint32_t k = 0; k < n; k++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f.data,
			    .data_size_in = sizeof(f.data), .repeat = 1);

		frame_build(&f, BENCH_SRC_BASE + k);
		if (bpf_prog_test_run_opts(c->prog_fd, &o))
			die("prefill: test_run: %s", strerror(errno));
	}
	err = sl_dp_rule_stats(&c->dp, 0, &st);
	if (err)
		die("reading rule stats: %s", strerror(-err));
	if (st.sources != want)
		die("prefill: %llu live sources, wanted %u",
		    (unsigned long long) st.sources, want);
}

/*
 * conns: one connection open, from port 10001 (the drop case's one place
 * of count, so that its measured SYN from 10000 is always refused), or
 * from 10000 (the pass case's, whose measured ACK is its segment).
 */
static void open_connection(struct bench_case *c)
{
	uint16_t sport = c->drop ? 10001 : 10000;
	struct frame f;

	for (int k = 0; k < 2; k++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f.data,
			    .data_size_in = sizeof(f.data), .repeat = 1);

		frame_build_l4(&f, BENCH_SRC_BASE, sport,
				k ? PKT_ACK : PKT_SYN);
		if (bpf_prog_test_run_opts(c->prog_fd, &o) ||
		    o.retval != XDP_PASS)
			die("conns: opening a connection: %s",
			    strerror(errno));
	}
	frame_build_l4(&c->frames[0], BENCH_SRC_BASE, 10000,
			c->drop ? PKT_SYN : PKT_ACK);
}

static void setup_case(struct bench_case *c, const struct bench_opts *bo)
{
	uint32_t n_src = c->kind == BK_PER_SOURCE ? BENCH_SRC_FRAMES : 1;
	/* production clock */
	struct sl_dp_opts dopts = { .frags = c->kind == BK_FRAGS };
	struct sl_ruleset rs = {0};
	char err[4096];
	char *json;
	int ret;

	c->passed_frac = -1;
	c->frames = calloc(n_src, sizeof(*c->frames));
	if (!c->frames)
		die("out of memory");
	c->n_frames = n_src;
	/* measured sources spread evenly over the prefilled ones */
	for (uint32_t i = 0; i < n_src; i++) {
		uint32_t k = (uint64_t) i * bo->sources / n_src;

		frame_build(&c->frames[i], BENCH_SRC_BASE + k);
	}

	if (c->kind == BK_BARE) {
		c->bare = bare_bpf__open_and_load();
		if (!c->bare)
			die("loading the bare program: %s", strerror(errno));
		c->prog_fd =
		    bpf_program__fd(c->drop ? c->bare->progs.bare_drop
					    : c->bare->progs.bare_pass);
		return;
	}

	ret = sl_dp_load(&c->dp, &dopts);
	if (ret)
		die("loading sluice: %s", strerror(-ret));
	c->have_dp = true;
	json =
	    rules_json(c->kind, c->drop ? BENCH_DROP_COUNT : BENCH_PASS_COUNT);
	if (sl_rules_parse(json, strlen(json), &rs, err, sizeof(err)))
		die("bench rule set invalid:\n%s", err);
	free(json);
	if (sl_dp_apply(&c->dp, &rs, err, sizeof(err)))
		die("applying the bench rule set: %s", err);
	sl_ruleset_free(&rs);
	c->prog_fd = bpf_program__fd(c->kind == BK_FRAGS
					     ? c->dp.skel->progs.sluice_xdp_frags
					     : c->dp.skel->progs.sluice_xdp);
	if (c->prog_fd < 0)
		die("the multi-buffer program did not load (kernel < 5.18?)");
	if (c->kind == BK_PER_SOURCE)
		prefill_sources(c, bo->sources);
	if (c->kind == BK_CONNS)
		open_connection(c);
}

static int pin_cpu(int cpu)
{
	cpu_set_t set;

	if (cpu < 0) {
		/* the highest CPU we may use: usually the quietest */
		if (sched_getaffinity(0, sizeof(set), &set))
			return -errno;
		for (cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--)
			if (CPU_ISSET(cpu, &set))
				break;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return -errno;
	return cpu;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: bench_xdp [--runs N] [--repeat N] [--cpu N] "
	    "[--sources N]\n"
	    "       bench_xdp --threads N [--runs N] [--path TEXT]\n"
	    "  --runs N     runs per case, median reported (default %d)\n"
	    "  --repeat N   packets per run (default %u)\n"
	    "  --cpu N      CPU to pin to (default: the highest allowed)\n"
	    "  --sources N  per_source entries prefilled (default %u)\n"
	    "  --threads N  how each path scales: 1 thread against N, each\n"
	    "               on its own CPU, on one data plane (median of 3)\n"
	    "  --path TEXT  with --threads: only the paths named with TEXT\n",
	    BENCH_RUNS, BENCH_REPEAT, BENCH_SOURCES);
}

static void parse_args(int argc, char **argv, struct bench_opts *bo)
{
	static const struct option opts[] = {
	    {"runs", required_argument, NULL, 'n'},
	    {"repeat", required_argument, NULL, 'r'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"sources", required_argument, NULL, 's'},
	    {"threads", required_argument, NULL, 't'},
	    {"path", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	unsigned long v;
	char *end;
	int c;

	bo->runs = BENCH_RUNS;
	bo->repeat = BENCH_REPEAT;
	bo->cpu = -1;
	bo->sources = BENCH_SOURCES;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == '?') {
			usage(stderr);
			exit(2);
		}
		if (c == 'p') {
			bo->path = optarg;
			continue;
		}
		errno = 0;
		v = strtoul(optarg, &end, 10);
		if (errno || *end || !*optarg) {
			fprintf(stderr, "bench_xdp: '%s' is not a number\n",
				optarg);
			exit(2);
		}
		switch (c) {
		case 'n':
			if (v < 1 || v > BENCH_MAX_RUNS)
				die("--runs: 1 to %d", BENCH_MAX_RUNS);
			bo->runs = v;
			bo->runs_set = true;
			break;
		case 't':
			if (v < 1 || v > 64)
				die("--threads: 1 to 64");
			bo->threads = v;
			break;
		case 'r':
			if (v < 1000 || v > 100000000)
				die("--repeat: 1000 to 100000000");
			bo->repeat = v;
			break;
		case 'c':
			bo->cpu = v;
			break;
		case 's':
			if (v < BENCH_SRC_FRAMES || v > BENCH_MAX_SOURCES)
				die("--sources: %d to %u", BENCH_SRC_FRAMES,
				    BENCH_MAX_SOURCES);
			bo->sources = v;
			break;
		}
	}
	if (optind != argc) {
		usage(stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct bench_case cases[BK_MAX * 2];
	const int n_cases = BK_MAX * 2;
	struct bench_opts bo = {0};
	char cpu_model[128] = "?";
	FILE *f;
	int cpu, i, r, rebracketed = 0;

	parse_args(argc, argv, &bo);
	if (bo.threads)
		return bench_scale(bo.threads, bo.runs_set ? bo.runs : 3,
				   bo.path);
	sl_log_daemon(&(struct sl_log_opts){ .level = SL_LOG_WARN }, NULL);
	cpu = pin_cpu(bo.cpu);
	if (cpu < 0)
		die("pinning to CPU %d: %s", bo.cpu, strerror(-cpu));
	f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[256];

		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "model name", 10)) {
				char *p = strchr(line, ':');

				if (p)
					snprintf(cpu_model, sizeof(cpu_model),
						 "%s", p + 2);
				cpu_model[strcspn(cpu_model, "\n")] = 0;
				break;
			}
		fclose(f);
	}

	memset(cases, 0, sizeof(cases));
	for (i = 0; i < n_cases; i++) {
		cases[i].kind = i / 2;
		cases[i].drop = i & 1;
		setup_case(&cases[i], &bo);
	}

	/* warm-up, uncounted: caches, token caches, and the drop cases'
	 * one admitted packet of this second */
	for (i = 0; i < n_cases; i++)
		if (run_frames(&cases[i], bo.repeat / 10, NULL))
			die("test_run: %s", strerror(errno));
	for (i = 0; i < n_cases; i++)
		if (cases[i].have_dp)
			rule_totals(&cases[i], &cases[i].passed0,
				    &cases[i].blocked0);
	/* Rounds; in each, every sluice case runs between two runs of the
	 * bare program of its path (cases[0] pass, cases[1] drop), and its
	 * ratio is taken to their mean: this machine's speed drifts by tens
	 * of percent over seconds, more than the effects measured. A
	 * bracket whose bare runs disagree saw the speed change; it is run
	 * again, up to BENCH_TRIES times. */
	for (r = 0; r < bo.runs; r++)
		for (i = 2; i < n_cases; i++) {
			struct bench_case *b = &cases[cases[i].drop];
			double before, after, ns;
			int err, t;

			for (t = 0; t < BENCH_TRIES; t++) {
				err = run_frames(b, bo.repeat, &before);
				if (!err)
					err = run_frames(&cases[i], bo.repeat,
							 &ns);
				if (!err)
					err = run_frames(b, bo.repeat, &after);
				if (err)
					die("test_run: %s", strerror(-err));
				if (fabs(before - after) <=
				    BENCH_STEADY * fmin(before, after))
					break;
				rebracketed++;
			}
			b->ns[b->n_ns++] = before;
			b->ns[b->n_ns++] = after;
			cases[i].ns[cases[i].n_ns++] = ns;
			cases[i].ratio[r] = ns / ((before + after) / 2);
			cases[i].added[r] = ns - (before + after) / 2;
		}

	for (i = 0; i < n_cases; i++) {
		struct bench_case *c = &cases[i];

		c->median = gen_median(c->ns, c->n_ns, &c->min, &c->max);
		c->ratio_median =
		    c->kind == BK_BARE
			? 1.0
			: gen_median(c->ratio, bo.runs, NULL, NULL);
		if (c->kind != BK_BARE)
			mean_ci(c->added, bo.runs, &c->added_mean,
				&c->added_ci);
		if (c->have_dp) {
			uint64_t p, b;

			rule_totals(c, &p, &b);
			p -= c->passed0;
			b -= c->blocked0;
			c->passed_frac = p + b ? (double) p / (p + b) : -1;
		}
	}

	printf("sluice XDP cost per packet: BPF_PROG_TEST_RUN, %d-byte "
	       "UDP/IPv4 frame, CPU %d (%s)\n",
	       BENCH_FRAME_LEN, cpu, cpu_model);
	printf("%d runs x %u packets per case; production clock; ns = the "
	       "kernel's mean per packet\n(opts.duration, whole ns); ratio = "
	       "median over the runs of ns / mean ns of the bare runs\n"
	       "before and after, same path (%d of %d brackets run again: the "
	       "machine's speed changed);\npassed = share of the measured "
	       "rule's packets admitted\n\n",
	       bo.runs, bo.repeat, rebracketed, bo.runs * (n_cases - 2));
	printf("added = ns over the bare runs around, the mean over the "
	       "runs and its 95 %% confidence\ninterval (the kernel's whole "
	       "ns dither with the machine: many runs resolve a\nfraction); "
	       "Mpps = 1000 / median ns, one CPU\n\n");
	printf("%-30s %-4s %9s %7s %7s %6s %13s %6s %9s\n", "case", "path",
	       "median ns", "min", "max", "ratio", "added ns", "Mpps",
	       "passed");
	for (i = 0; i < n_cases; i++) {
		struct bench_case *c = &cases[i];
		char passed[16] = "-", added[24] = "-";

		if (c->passed_frac >= 0)
			snprintf(passed, sizeof(passed), "%.4f%%",
				 100 * c->passed_frac);
		if (c->kind != BK_BARE)
			snprintf(added, sizeof(added), "%.2f +- %.2f",
				 c->added_mean, c->added_ci);
		printf("%-30s %-4s %9.1f %7.1f %7.1f %6.2f %13s %6.1f %9s\n",
		       kind_name[c->kind], c->drop ? "drop" : "pass", c->median,
		       c->min, c->max, c->ratio_median, added,
		       1000 / c->median, passed);
	}
	printf("\n");
	for (i = 0; i < n_cases; i++) {
		struct bench_case *c = &cases[i];
		double t = kind_target[c->kind];

		if (!t)
			continue;
		printf("target %s %s <= %.1f: %.2f %s\n", kind_tag[c->kind],
		       c->drop ? "drop" : "pass", t, c->ratio_median,
		       c->ratio_median <= t ? "OK" : "MISS");
	}
	/* a layer's cost: the layered cases' ns over the one rule's (cases[2]
	 * pass, cases[3] drop), for each layer after the first */
	for (i = 2 * BK_LAYERS2; i < 2 * (BK_LAYERS4 + 1); i++) {
		struct bench_case *c = &cases[i];
		double over = c->added_mean - cases[2 + c->drop].added_mean;
		int layers = 2 + (c->kind - BK_LAYERS2);

		printf("%s %s: %.2f ns over 1 rule, %.2f a layer after the "
		       "first\n", kind_name[c->kind], c->drop ? "drop" : "pass",
		       over, over / (layers - 1));
	}
	/* the conns rule's added ns over the one pps rule's, same path */
	for (i = 2 * BK_CONNS; i < 2 * (BK_CONNS + 1); i++)
		printf("%s %s: %.2f ns over 1 pps rule\n", kind_name[BK_CONNS],
		       cases[i].drop ? "drop (a SYN over count)"
				     : "pass (a connection's segment)",
		       cases[i].added_mean - cases[2 + cases[i].drop].added_mean);
	/* the multi-buffer program's added ns over the one-buffer's */
	for (i = 2 * BK_FRAGS; i < 2 * (BK_FRAGS + 1); i++)
		printf("%s %s: %.2f ns over the one-buffer program\n",
		       kind_name[BK_FRAGS], cases[i].drop ? "drop" : "pass",
		       cases[i].added_mean - cases[2 + cases[i].drop].added_mean);
	/* cases[3]: one rule, drop; cases[1]: the bare parse and drop */
	printf("target 1-rule drop Mpps >= %.2f x parse-and-drop's: %.2f %s\n",
	       BENCH_DROP_RATE_TARGET, 1 / cases[3].ratio_median,
	       1 / cases[3].ratio_median >= BENCH_DROP_RATE_TARGET ? "OK"
								  : "MISS");

	for (i = 0; i < n_cases; i++) {
		if (cases[i].have_dp)
			sl_dp_destroy(&cases[i].dp);
		bare_bpf__destroy(cases[i].bare);
		free(cases[i].frames);
	}
	return 0;
}
