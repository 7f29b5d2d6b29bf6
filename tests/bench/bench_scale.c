// SPDX-License-Identifier: GPL-2.0
/*
 * bench_xdp --threads N: how each path of the data plane scales with the
 * CPUs. One data plane per path; 1 thread, then N threads, each pinned
 * to its own CPU, run one BPF_PROG_TEST_RUN call of about 0.5 s at once
 * on it; the sources of the threads' frames are the same (shared) or
 * each thread's own (disjoint). Per thread: the kernel's ns per packet;
 * in all: the sum of the threads' rates, and total(N) / (N x total(1)),
 * which stays near 1 when no packet writes a cache line that another
 * CPU's packets write too (docs/architecture.md). total(1) is the mean
 * of one thread on each of the N CPUs in turn, so that a CPU slowed by
 * other work counts on both sides. Median of --runs rounds (default 3),
 * 1 and N threads alternated.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bench_scale.h"
#include "genutil.h"
#include "loader.h"
#include "log.h"
#include "pkt.h"
#include "rules.h"
#include "rules_parse.h"
#include "sluice.skel.h"
#include "stats.h"

#define SCALE_MAX_THREADS 64
#define SCALE_CALL_NS	  500000000.0 /* one test_run call: ~0.5 s */
#define SCALE_PORT	  9000	      /* the measured rule's UDP port */
#define SCALE_OTHER_PORT  9001	      /* in no rule */
#define SCALE_FRAME_LEN	  64
#define SCALE_SRC_BASE	  0xc6120001u /* 198.18.0.1 */
#define SCALE_DST	  0xc0000201u /* 192.0.2.1 */
#define SCALE_FILL	  0xc6130001u /* 198.19.0.1: the table-full entry */

enum scale_path {
	SP_PASS = 0,
	SP_DROP,
	SP_GRANTS,
	SP_SKETCH,
	SP_EXACT,
	SP_FULL,
	SP_BREAKER,
	SP_NO_RULE,
	SP_LAYERS,
	SP_CONNS,
	SP_MAX,
};

static const char *const path_name[SP_MAX] = {
	[SP_PASS] = "rule pass",
	[SP_DROP] = "rule drop",
	[SP_GRANTS] = "rule flood with grants",
	[SP_SKETCH] = "per_source sketch tier",
	[SP_EXACT] = "per_source exact entries",
	[SP_FULL] = "per_source table full",
	[SP_BREAKER] = "udp breaker closed, pass",
	[SP_NO_RULE] = "no rule matched",
	[SP_LAYERS] = "4 layers pass",
	[SP_CONNS] = "conns, a connection's segments",
};

/* The measured rule of each path (rule 0 of its set). */
static const char *const path_rule[SP_MAX] = {
	[SP_PASS] = "\"count\": 100000000000",
	[SP_DROP] = "\"count\": 1",
	/* ~10 Mpps of grants from a flood of more: chunks and refusals */
	[SP_GRANTS] = "\"count\": 10000000",
	/* half the count a second is never reached: every source light */
	[SP_SKETCH] = "\"count\": 100000000000, \"per_source\": "
		      "{\"max_sources\": 1000}",
	/* entries made from user space (scale_fill()) */
	[SP_EXACT] = "\"count\": 100000000000, \"per_source\": "
		     "{\"max_sources\": 1000}",
	/* one entry, taken by SCALE_FILL: the measured ones overflow */
	[SP_FULL] = "\"count\": 100, \"per_source\": {\"max_sources\": 1}",
	[SP_BREAKER] = "\"count\": 100000000000, \"breaker\": "
		       "{\"strategy\": \"error_ratio\", \"threshold\": 0.5, "
		       "\"open_ms\": 5000}",
	[SP_NO_RULE] = "\"count\": 100000000000",
	[SP_LAYERS] = "\"count\": 100000000000, \"layer\": 3",
	[SP_CONNS] = "\"count\": 100000",
};

#define SCALE_LAYER(n)                                                         \
	", {\"name\": \"layer" #n "\", \"match\": {\"proto\": \"udp\", "   \
	"\"dport\": 9000}, \"grade\": \"pps\", \"count\": 100000000000, "     \
	"\"layer\": " #n "}"

/* The rules after the measured one: its layers before it. */
static const char *const path_more[SP_MAX] = {
	[SP_LAYERS] = SCALE_LAYER(0) SCALE_LAYER(1) SCALE_LAYER(2),
};

struct scale_frame {
	uint8_t data[SCALE_FRAME_LEN];
};

struct scale_thread {
	pthread_t tid;
	pthread_barrier_t *start;
	int cpu;
	int prog_fd;
	const struct scale_frame *frame;
	uint32_t repeat;
	double ns;
	int err;
};

/* UDP to dport; or with tcp_flags, TCP (the conns path). */
static void scale_frame_build(struct scale_frame *f, uint32_t saddr,
			      uint16_t dport, uint8_t tcp_flags)
{
	struct pkt_ipv4_hdr h = { .src.s_addr = htonl(saddr),
				  .dst.s_addr = htonl(SCALE_DST) };
	struct pkt p;

	pkt_init(&p);
	pkt_eth(&p, NULL, NULL);
	pkt_ipv4_hdr(&p, &h);
	if (tcp_flags)
		pkt_tcp(&p, 10000, dport, tcp_flags);
	else
		pkt_udp(&p, 10000, dport);
	memcpy(f->data, p.buf, pkt_finish(&p, sizeof(f->data)));
}

/* conns: the connection of each frame opened (its SYN) before its
 * segments are measured. */
static void scale_open(int prog_fd, const struct scale_frame *frames, int n)
{
	for (int t = 0; t < n; t++) {
		struct scale_frame syn = frames[t];
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = syn.data,
			    .data_size_in = sizeof(syn.data), .repeat = 1);

		/* the ACK's flags byte made a SYN's (the checksum is not
		 * read) */
		syn.data[14 + 20 + 13] = PKT_SYN;
		if (bpf_prog_test_run_opts(prog_fd, &o) ||
		    o.retval != XDP_PASS) {
			fprintf(stderr, "bench_xdp: conns: a SYN refused\n");
			exit(1);
		}
	}
}

/* The source of thread t's frames: one for all, or one each, 257 apart
 * so that they fall in different lines of every per-CPU cache. */
static uint32_t scale_source(int t, bool shared)
{
	return SCALE_SRC_BASE + (shared ? 0 : 257u * (uint32_t)(t + 1));
}

/* A source entry made from user space, as the fast path would (the
 * rule's `added` counted). */
static int scale_fill(struct sl_dataplane *dp, uint32_t saddr)
{
	struct sluice_src_state st;
	struct sluice_src_key key;
	uint32_t slot = dp->slots[0];
	uint64_t added = 0;
	int fd_added = bpf_map__fd(dp->skel->maps.rule_src_added);
	__be32 a = htonl(saddr);

	memset(&key, 0, sizeof(key));
	memset(&st, 0, sizeof(st));
	key.rule = slot;
	key.family = 4;
	memcpy(key.addr, &a, 4);
	if (bpf_map_update_elem(bpf_map__fd(dp->skel->maps.src_table), &key,
				&st, BPF_NOEXIST))
		return -errno;
	if (bpf_map_lookup_elem(fd_added, &slot, &added))
		return -errno;
	added++;
	if (bpf_map_update_elem(fd_added, &slot, &added, BPF_ANY))
		return -errno;
	return 0;
}

static void scale_load(struct sl_dataplane *dp, enum scale_path p,
		       int threads)
{
	struct sl_dp_opts o = {0}; /* production clock */
	struct sl_ruleset rs = {0};
	char json[1024], err[4096];
	int ret;

	snprintf(json, sizeof(json),
		 "{\"rules\": [{\"name\": \"measured\", \"match\": "
		 "{\"proto\": \"%s\", \"dport\": %d}, \"grade\": \"%s\", "
		 "%s}%s]}\n",
		 p == SP_CONNS ? "tcp" : "udp", SCALE_PORT,
		 p == SP_CONNS ? "conns" : "pps", path_rule[p],
		 path_more[p] ? path_more[p] : "");
	ret = sl_dp_load(dp, &o);
	if (ret) {
		fprintf(stderr, "bench_xdp: loading sluice: %s\n",
			strerror(-ret));
		exit(1);
	}
	if (sl_rules_parse(json, strlen(json), &rs, err, sizeof(err))) {
		fprintf(stderr, "bench_xdp: rule invalid:\n%s", err);
		exit(1);
	}
	if (sl_dp_apply(dp, &rs, err, sizeof(err))) {
		fprintf(stderr, "bench_xdp: applying the rule: %s\n", err);
		exit(1);
	}
	sl_ruleset_free(&rs);
	ret = 0;
	if (p == SP_FULL)
		ret = scale_fill(dp, SCALE_FILL);
	for (int t = 0; !ret && p == SP_EXACT && t < threads; t++) {
		ret = scale_fill(dp, scale_source(t, false));
		if (!ret && !t)
			ret = scale_fill(dp, scale_source(0, true));
	}
	if (ret) {
		fprintf(stderr, "bench_xdp: making source entries: %s\n",
			strerror(-ret));
		exit(1);
	}
}

static void *scale_worker(void *arg)
{
	struct scale_thread *t = arg;
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = t->frame->data,
		    .data_size_in = sizeof(t->frame->data),
		    .repeat = t->repeat);

	if (gen_pin_cpu(t->cpu)) {
		t->err = -EINVAL;
		pthread_barrier_wait(t->start);
		return NULL;
	}
	pthread_barrier_wait(t->start);
	if (bpf_prog_test_run_opts(t->prog_fd, &o))
		t->err = -errno;
	t->ns = o.duration;
	return NULL;
}

/* One call on each of n threads at once (thread t on cpus[t], frames[t]
 * or frames[0] when shared); ns[t] per packet. */
static int scale_round(int prog_fd, const int *cpus, int n, bool shared,
		       const struct scale_frame *frames, uint32_t repeat,
		       double *ns)
{
	struct scale_thread th[SCALE_MAX_THREADS];
	pthread_barrier_t start;
	int err = 0;

	pthread_barrier_init(&start, NULL, n);
	for (int t = 0; t < n; t++) {
		th[t] = (struct scale_thread){
			.start = &start,
			.cpu = cpus[t],
			.prog_fd = prog_fd,
			.frame = &frames[shared ? 0 : t],
			.repeat = repeat,
		};
		if (pthread_create(&th[t].tid, NULL, scale_worker, &th[t])) {
			fprintf(stderr, "bench_xdp: pthread_create failed\n");
			exit(1);
		}
	}
	for (int t = 0; t < n; t++) {
		pthread_join(th[t].tid, NULL);
		if (th[t].err)
			err = th[t].err;
		ns[t] = th[t].ns;
	}
	pthread_barrier_destroy(&start);
	return err;
}

static double scale_total_mpps(const double *ns, int n)
{
	double sum = 0;

	for (int t = 0; t < n; t++)
		sum += ns[t] > 0 ? 1000.0 / ns[t] : 0;
	return sum;
}

struct scale_result {
	double ns1, total1;	    /* 1 thread */
	double nsn[SCALE_MAX_THREADS], totaln; /* n threads */
	double passed;		    /* of the rule's packets; -1: none */
};

static void scale_measure(enum scale_path p, bool shared, const int *cpus,
			  int n, int runs, struct scale_result *res)
{
	struct scale_frame frames[SCALE_MAX_THREADS];
	double ns1[16], tot1[16], totn[16], nsn[SCALE_MAX_THREADS][16];
	double ns[SCALE_MAX_THREADS], warm;
	struct sl_rule_stats st0, st1;
	struct sl_dataplane dp;
	uint32_t repeat;
	int prog_fd, r;

	memset(&dp, 0, sizeof(dp));
	scale_load(&dp, p, n);
	prog_fd = bpf_program__fd(dp.skel->progs.sluice_xdp);
	for (int t = 0; t < n; t++)
		scale_frame_build(&frames[t], scale_source(t, shared),
				  p == SP_NO_RULE ? SCALE_OTHER_PORT
						  : SCALE_PORT,
				  p == SP_CONNS ? PKT_ACK : 0);
	if (p == SP_CONNS)
		scale_open(prog_fd, frames, shared ? 1 : n);

	/* warm-up on every thread, and the length of a 0.5 s call */
	if (scale_round(prog_fd, cpus, n, shared, frames, 1000000, ns) ||
	    scale_round(prog_fd, cpus, 1, shared, frames, 1000000, &warm)) {
		fprintf(stderr, "bench_xdp: test_run: %s\n", strerror(errno));
		exit(1);
	}
	repeat = warm > 0 ? SCALE_CALL_NS / warm : 50000000;
	if (repeat < 1000000)
		repeat = 1000000;
	if (repeat > 200000000)
		repeat = 200000000;

	sl_dp_rule_stats(&dp, 0, &st0);
	for (r = 0; r < runs; r++) {
		double sum_ns = 0, sum_mpps = 0;

		/* 1 thread on each of the CPUs in turn: a CPU that other
		 * work slows weighs on both sides of the ratio alike */
		for (int t = 0; t < n; t++) {
			if (scale_round(prog_fd, cpus + t, 1, shared,
					frames + (shared ? 0 : t), repeat, ns))
				goto fail;
			sum_ns += ns[0];
			sum_mpps += scale_total_mpps(ns, 1);
		}
		ns1[r] = sum_ns / n;
		tot1[r] = sum_mpps / n;
		if (scale_round(prog_fd, cpus, n, shared, frames, repeat, ns))
			goto fail;
		totn[r] = scale_total_mpps(ns, n);
		for (int t = 0; t < n; t++)
			nsn[t][r] = ns[t];
	}
	sl_dp_rule_stats(&dp, 0, &st1);

	res->ns1 = gen_median(ns1, runs, NULL, NULL);
	res->total1 = gen_median(tot1, runs, NULL, NULL);
	res->totaln = gen_median(totn, runs, NULL, NULL);
	for (int t = 0; t < n; t++)
		res->nsn[t] = gen_median(nsn[t], runs, NULL, NULL);
	{
		double pa = st1.passed_pkts - st0.passed_pkts;
		double bl = st1.blocked_pkts - st0.blocked_pkts;

		res->passed = pa + bl > 0 ? pa / (pa + bl) : -1;
	}
	sl_dp_destroy(&dp);
	return;
fail:
	fprintf(stderr, "bench_xdp: test_run failed\n");
	exit(1);
}

int bench_scale(int threads, int runs, const char *only)
{
	int cpus[SCALE_MAX_THREADS], n = 0;
	cpu_set_t set;

	if (threads < 1 || threads > SCALE_MAX_THREADS) {
		fprintf(stderr, "bench_xdp: --threads: 1 to %d\n",
			SCALE_MAX_THREADS);
		return 2;
	}
	if (runs > 16)
		runs = 16;
	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	for (int c = 0; c < CPU_SETSIZE && n < threads; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	if (n < threads) {
		fprintf(stderr, "bench_xdp: --threads %d: only %d CPUs\n",
			threads, n);
		return 2;
	}
	sl_log_daemon(&(struct sl_log_opts){ .level = SL_LOG_WARN }, NULL);

	printf("sluice XDP scaling: BPF_PROG_TEST_RUN on one data plane per "
	       "path, 1 thread on each CPU\nin turn, then %d at once, pinned "
	       "to CPUs 0-%d, one call of ~0.5 s each; median of %d\nrounds; "
	       "ns = the kernel's ns per packet of each thread (1: the mean "
	       "over the CPUs);\ntotal = sum of the threads' Mpps (1: the "
	       "mean over the CPUs); ratio = total(%d) /\n(%d x total(1)); "
	       "passed = the rule's packets admitted\n\n",
	       threads, threads - 1, runs, threads, threads);
	printf("%-26s %-8s %6s %-17s %7s %7s %6s %9s\n", "path", "sources",
	       "1: ns", "N: ns each", "Mpps 1", "Mpps N", "ratio", "passed");
	for (int p = 0; p < SP_MAX; p++) {
		for (int s = 1; s >= 0; s--) {
			struct scale_result res = {0};
			char each[64] = "", passed[16] = "-";
			size_t len = 0;

			if (only && !strstr(path_name[p], only))
				continue;
			scale_measure(p, s, cpus, threads, runs, &res);
			for (int t = 0; t < threads && len < sizeof(each);
			     t++)
				len += snprintf(each + len, sizeof(each) - len,
						"%s%.1f", t ? " " : "",
						res.nsn[t]);
			if (res.passed >= 0)
				snprintf(passed, sizeof(passed), "%.4f%%",
					 100 * res.passed);
			printf("%-26s %-8s %6.1f %-17s %7.1f %7.1f %6.2f "
			       "%9s\n",
			       path_name[p], s ? "shared" : "disjoint",
			       res.ns1, each, res.total1, res.totaln,
			       res.totaln / (threads * res.total1), passed);
			fflush(stdout);
		}
	}
	return 0;
}
