/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The token server's grant path on 1 and THREADS worker threads
 * (docs/benchmarks.md, "The grant path over threads"): a server built
 * from FLOWS global flows, AGENTS agents spread over its workers as
 * sessions are (node n on worker n % threads), each worker thread pinned
 * to a CPU and answering its agents' flows in turn through
 * ts_grant_flow(), with the balancer running. No sockets, no MACs: what
 * threads share is the flows, so this is where they could stop scaling.
 * Runs of 1 and THREADS threads alternate, RUNS of each; prints grants/s
 * per run, the medians, and total(THREADS) / (THREADS x total(1)).
 *
 *   bench_grants [THREADS (2)] [AGENTS (10000)] [FLOWS (100)] [SECONDS (1)]
 *                [RUNS (5)]
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "rules_parse.h"
#include "tokensrv_int.h"

#define COUNT 1000000

struct run {
	struct sl_tokend *td;
	struct worker *w;
	uint32_t first, step; /* its agents: first, first + step, ... */
	bool alone; /* its own server: agent a is its node a / step */
	uint32_t cpu;
	pthread_t thread;
	volatile bool *stop;
	uint64_t grants;
} __attribute__((aligned(64))); /* each thread writes its own */

struct result {
	double rate;	/* grants/s */
	double per_cpu; /* grants per second of the workers' CPU time */
};

static unsigned int n_agents, n_flows, n_cpus;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* An agent's demand for a flow, below range: it moves every 8 rounds. */
static uint64_t demand(uint32_t agent, uint32_t flow, uint64_t round,
		       uint64_t range)
{
	uint64_t x = ((uint64_t)agent << 32 | flow) ^ (round / 8) << 20;

	x *= 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
	return (x >> 32) % range;
}

static double thread_cpu_s(pthread_t t)
{
	struct timespec ts = {0};
	clockid_t id;

	if (!pthread_getcpuclockid(t, &id))
		clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(pthread_t t, uint32_t cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(t, sizeof(set), &set);
}

/* One worker: every flow of each of its agents in turn, each demand
 * around count / agents. */
static void *worker(void *arg)
{
	struct run *r = arg;
	struct conn c = {0};
	struct sl_flow_grant g;
	uint64_t round = 0;
	struct ns *ns = &r->td->ns[0];
	struct view v;

	pin(pthread_self(), r->cpu);
	ts_view_get(r->td, &v);
	while (!*r->stop) {
		for (uint32_t a = r->first; a < n_agents && !*r->stop;
		     a += r->step) {
			uint64_t now = sl_now_ms();

			c.node = r->alone ? a / r->step : a;
			c.part = r->alone ? 0 : a % r->step;
			c.slot = r->alone ? c.node : a / r->step;
			snprintf(c.node_name, sizeof(c.node_name), "a%u", a);
			for (uint32_t i = 0; i < n_flows; i++) {
				uint64_t mean = COUNT / n_agents;
				struct sl_flow_report rep = {
					.flow_id = ns->flows[i].id,
					.demand = mean / 2 + demand(a, i, round,
								    mean + 1),
				};

				if (ts_grant_flow(r->w, &v, &c, &ns->flows[i],
						  &rep, now, &g)) {
					fputs("out of memory\n", stderr);
					exit(1);
				}
			}
			r->grants += n_flows;
		}
		round++;
	}
	return NULL;
}

/*
 * Grants per second of `threads` workers, and per second of their CPU
 * time (the balancers' apart): one server with that many workers, or
 * (servers) as many servers of one worker each, every agent's state in
 * one thread's server: nothing shared, this machine's ceiling.
 */
static struct result one_run(const struct sl_ruleset *rs, uint32_t threads,
			     bool servers, double seconds)
{
	struct sl_tokend *td[SL_TOKEND_MAX_THREADS];
	struct run r[SL_TOKEND_MAX_THREADS];
	pthread_t bal[SL_TOKEND_MAX_THREADS];
	uint32_t n_td = servers ? threads : 1;
	volatile bool stop = false;
	struct sl_tokend_cfg cfg;
	double t0, cpu = 0;
	uint64_t grants = 0;
	char err[256];

	sl_tokend_cfg_default(&cfg);
	cfg.listen = "127.0.0.1:0";
	cfg.threads = servers ? 1 : threads;
	cfg.learn_ms = 0;
	cfg.ttl_ms = 600000; /* no lease ends within a run */
	for (uint32_t k = 0; k < n_td; k++) {
		if (sl_tokend_new(&cfg, rs, NULL, &td[k], err, sizeof(err))) {
			fprintf(stderr, "tokend: %s\n", err);
			exit(1);
		}
		pthread_create(&bal[k], NULL, ts_balancer_main, td[k]);
		pin(bal[k], n_cpus - 1); /* never beside one worker alone */
	}
	for (uint32_t k = 0; k < threads; k++) {
		struct sl_tokend *t = td[servers ? k : 0];

		r[k] = (struct run){.td = t, .w = &t->w[servers ? 0 : k],
				    .first = k, .step = threads,
				    .alone = servers, .cpu = k, .stop = &stop};
		pthread_create(&r[k].thread, NULL, worker, &r[k]);
	}
	usleep(500 * 1000); /* every holder in, every flow filled once */
	for (uint32_t k = 0; k < threads; k++) {
		grants -= __atomic_load_n(&r[k].grants, __ATOMIC_RELAXED);
		cpu -= thread_cpu_s(r[k].thread);
	}
	t0 = now_s();
	usleep(seconds * 1e6);
	for (uint32_t k = 0; k < threads; k++) {
		grants += __atomic_load_n(&r[k].grants, __ATOMIC_RELAXED);
		cpu += thread_cpu_s(r[k].thread);
	}
	t0 = now_s() - t0;
	stop = true;
	for (uint32_t k = 0; k < threads; k++)
		pthread_join(r[k].thread, NULL);
	for (uint32_t k = 0; k < n_td; k++) {
		if (write(td[k]->bal_ctl[1], "s", 1) != 1)
			exit(1);
		pthread_join(bal[k], NULL);
		sl_tokend_free(td[k]);
	}
	return (struct result){grants / t0, grants / cpu};
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const struct result *r, int n, bool per_cpu)
{
	double v[64];

	for (int i = 0; i < n; i++)
		v[i] = per_cpu ? r[i].per_cpu : r[i].rate;
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	uint32_t threads = argc > 1 ? atoi(argv[1]) : 2;
	double seconds = argc > 4 ? atof(argv[4]) : 1;
	int runs = argc > 5 ? atoi(argv[5]) : 5;
	const char *mode[3] = {"thread", "threads, one server",
			       "threads, a server each"};
	struct result res[3][64];
	double med[3], med_cpu[3];
	struct sl_ruleset rs = {0};
	char err[256], *json;
	size_t len = 0, cap = 64 + 200 * 1024;

	n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	n_agents = argc > 2 ? atoi(argv[2]) : 10000;
	n_flows = argc > 3 ? atoi(argv[3]) : 100;
	if (threads < 2 || threads > n_cpus ||
	    threads > SL_TOKEND_MAX_THREADS || !n_agents ||
	    n_agents > COUNT || !n_flows || n_flows > 1000 || seconds <= 0 ||
	    runs < 1 || runs > 64) {
		fprintf(stderr, "usage: bench_grants [THREADS 2-CPUs] [AGENTS] "
			"[FLOWS 1-1000] [SECONDS] [RUNS 1-64]\n");
		return 2;
	}
	json = malloc(cap);
	len += snprintf(json + len, cap - len, "{\"rules\": [");
	for (uint32_t i = 0; i < n_flows; i++)
		len += snprintf(json + len, cap - len,
				"%s{\"name\": \"f%u\", \"match\": {\"proto\": "
				"\"udp\", \"dport\": %u}, \"grade\": \"pps\", "
				"\"count\": %u, \"cluster\": {\"namespace\": "
				"\"bench\", \"flow_id\": %u, "
				"\"threshold_type\": \"global\"}}",
				i ? "," : "", i, 1000 + i, COUNT, i + 1);
	len += snprintf(json + len, cap - len, "]}");
	if (sl_rules_parse(json, len, &rs, err, sizeof(err))) {
		fprintf(stderr, "rules: %s\n", err);
		return 1;
	}
	printf("grant path: %u agents x %u global flows (count %u each), "
	       "1 and %u worker threads pinned to CPUs 0..%u, the balancer "
	       "on CPU %u; %d runs of %.1f s each, alternated\n",
	       n_agents, n_flows, COUNT, threads, threads - 1, n_cpus - 1,
	       runs, seconds);
	for (int i = 0; i < runs; i++) {
		res[0][i] = one_run(&rs, 1, false, seconds);
		res[1][i] = one_run(&rs, threads, false, seconds);
		res[2][i] = one_run(&rs, threads, true, seconds);
		printf("run %d:", i + 1);
		for (int m = 0; m < 3; m++)
			printf(" %u %s %.2fM grants/s (%.2fM per CPU s)%s",
			       m ? threads : 1, mode[m], res[m][i].rate / 1e6,
			       res[m][i].per_cpu / 1e6,
			       m < 2 ? "," : "\n");
	}
	for (int m = 0; m < 3; m++) {
		med[m] = median(res[m], runs, false);
		med_cpu[m] = median(res[m], runs, true);
	}
	printf("medians: 1 thread %.2fM grants/s; %u threads, one server "
	       "%.2fM (%.2f x one), %u servers %.2fM (%.2f x one)\n",
	       med[0] / 1e6, threads, med[1] / 1e6, med[1] / med[0],
	       threads, med[2] / 1e6, med[2] / med[0]);
	printf("per CPU second: 1 thread %.2fM; %u threads, one server "
	       "%.2fM: %u threads make %.2f x one (target >= %.1f); %u "
	       "servers %.2fM: %.2f x one, this machine's ceiling\n",
	       med_cpu[0] / 1e6, threads, med_cpu[1] / 1e6, threads,
	       threads * med_cpu[1] / med_cpu[0], 0.9 * threads, threads,
	       med_cpu[2] / 1e6, threads * med_cpu[2] / med_cpu[0]);
	sl_ruleset_free(&rs);
	free(json);
	return 0;
}
