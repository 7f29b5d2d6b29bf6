/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Rule pushes to a fleet (docs/fleet.md, "Pushes to a large fleet"):
 * AGENTS simulated agents in one process, each the agent's own etcd
 * config source (etcd_source.c: its thread, its watch, its body fetch and
 * check), each value parsed as the agent's control loop parses it. A
 * rule set of RULES rules is put, then PUTS puts that each change one
 * rule, then one put that changes every rule, either as the key's value
 * (--mode value, before manifests) or as a manifest whose body a static
 * HTTP server serves (--mode manifest). For each put: the time from the
 * put's start to each agent's parse done, the bytes etcd and the body
 * server sent meanwhile, read before and after with the shell commands
 * --etcd-bytes and --body-bytes (counters of the loopback,
 * tests/bench/bench_push.sh), and the CPU time that this process (the
 * agents and the body server) and etcd (--etcd-pid) spent on it.
 *
 * The body server is libmicrohttpd in this process, standing in for the
 * operator's static server (nginx with gzip_static, an object store): it
 * serves each body, gzipped to a client that accepts it, from memory on
 * --body-port.
 *
 *   bench_push --etcd URL --key KEY --agents N --rules N --puts N
 *              --mode value|manifest [--body-port PORT] [--body-dir DIR]
 *              [--parse-every K] [--gzip 0|1] [--warm-mb MB]
 *              [--etcd-bytes CMD] [--body-bytes CMD] [--etcd-pid PID]
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <microhttpd.h>
#include <zlib.h>

#include "etcd.h"
#include "etcd_source.h"
#include "manifest.h"
#include "rules.h"
#include "rules_parse.h"
#include "util.h"

struct agent {
	struct sl_etcd_source *src;
	bool parses;	     /* false: fetched and checked is in force */
	uint64_t revision;   /* __atomic: the newest parsed */
	uint64_t fetched_ns; /* when it was handed over (fetched, checked) */
	uint64_t applied_ns; /* __atomic: when parsed */
	uint64_t failed;     /* values that did not parse */
};

static const char *etcd_url, *key = "/sluice/bench-push", *mode = "manifest";
static const char *body_dir, *etcd_cmd, *body_cmd;
static char body_url[64];
static int n_agents = 1000, n_rules = 4096, n_puts = 5, body_port = 8080;
static int warm_mb; /* --warm-mb: the heap faulted in before the puts */
static int parse_every = 1, gzip_bodies = 1, etcd_pid;

/* The body being served: its name, its bytes and their gzip. */
static struct {
	pthread_mutex_t lock;
	char name[SL_SHA256_HEX_LEN + 8];
	struct MHD_Response *plain, *gz;
} served = { .lock = PTHREAD_MUTEX_INITIALIZER };

static enum MHD_Result serve(void *cls, struct MHD_Connection *c,
			     const char *url, const char *method,
			     const char *version, const char *upload,
			     size_t *upload_len, void **state)
{
	const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      "Accept-Encoding");
	struct MHD_Response *r = NULL;
	enum MHD_Result ret;

	pthread_mutex_lock(&served.lock);
	if (url[0] == '/' && !strcmp(url + 1, served.name))
		r = gzip_bodies && ae && strstr(ae, "gzip") ? served.gz
							     : served.plain;
	if (r)
		ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	pthread_mutex_unlock(&served.lock);
	if (!r) {
		r = MHD_create_response_from_buffer(0, "",
						    MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(c, MHD_HTTP_NOT_FOUND, r);
		MHD_destroy_response(r);
	}
	return ret;
}

/* text as the body server's <sha256>.json, plain and gzipped. */
static int serve_body(const char *sha, const char *text, size_t len)
{
	z_stream z = { 0 };
	uLong cap = compressBound(len) + 32;
	unsigned char *gz = malloc(cap);
	struct MHD_Response *plain, *zr;

	/* windowBits 31: a gzip header, as Content-Encoding: gzip wants */
	if (!gz || deflateInit2(&z, 6, Z_DEFLATED, 31, 8,
				Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (unsigned char *)text;
	z.avail_in = len;
	z.next_out = gz;
	z.avail_out = cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		return -EIO;
	plain = MHD_create_response_from_buffer(len, (void *)text,
						MHD_RESPMEM_MUST_COPY);
	zr = MHD_create_response_from_buffer(z.total_out, gz,
					     MHD_RESPMEM_MUST_FREE);
	deflateEnd(&z);
	MHD_add_response_header(zr, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	pthread_mutex_lock(&served.lock);
	if (served.plain) {
		MHD_destroy_response(served.plain);
		MHD_destroy_response(served.gz);
	}
	snprintf(served.name, sizeof(served.name), "%s.json", sha);
	served.plain = plain;
	served.gz = zr;
	pthread_mutex_unlock(&served.lock);
	return 0;
}

/*
 * As the agent's control loop: take the value, parse it, report. The
 * parse runs at nice 10: on a fleet each agent parses on its own host,
 * here a thousand share two cores with etcd and the body server, which
 * would otherwise wait behind them (1,000 parses of 4,096 rules are
 * seconds of CPU). The watch and the body's fetch and check run at 0.
 */
static void wake(void *arg)
{
	struct agent *a = arg;
	struct sl_etcd_value v;
	struct sl_ruleset rs = { 0 };
	char err[512];

	uint64_t fetched = sl_now_ns();

	if (!sl_etcd_source_take(a->src, &v))
		return;
	if (a->parses)
		setpriority(PRIO_PROCESS, gettid(), 10);
	if (v.deleted ||
	    (a->parses && sl_rules_parse(v.text, v.len, &rs, err,
					  sizeof(err)))) {
		__atomic_add_fetch(&a->failed, 1, __ATOMIC_RELAXED);
		sl_etcd_source_refused(a->src, v.revision, "bad");
	} else {
		sl_etcd_source_applied(a->src, v.revision);
		a->fetched_ns = fetched;
		__atomic_store_n(&a->applied_ns, sl_now_ns(), __ATOMIC_RELAXED);
		__atomic_store_n(&a->revision, v.revision, __ATOMIC_RELEASE);
	}
	sl_ruleset_free(&rs);
	free(v.text);
	if (a->parses)
		setpriority(PRIO_PROCESS, gettid(), 0);
}

#define EVERY_RULE (-2)

/*
 * --warm-mb: a fleet's agent grows its heap by one body (about 100 page
 * faults); a thousand agents in this one process grow it by a thousand
 * at once, and in this VM a fault costs 15-20 us of CPU: 2 s of a put
 * that no host of a fleet spends. So the heap is faulted in first: each
 * of malloc's arenas (as many as glibc makes for this machine's CPUs,
 * taken by the agents' threads in turn) grows by its share of warm_mb
 * in pieces of a body's size, kept when freed (the threads live
 * together, so each takes an arena of its own).
 */
#define WARM_PIECE (448u << 10)

static int warm_arenas;

static void *warm_arena(void *arg)
{
	size_t n = (size_t)warm_mb * (1 << 20) / WARM_PIECE / warm_arenas;
	char **pieces = calloc(n, sizeof(*pieces));

	for (size_t k = 0; pieces && k < n; k++)
		if ((pieces[k] = malloc(WARM_PIECE)))
			memset(pieces[k], 1, WARM_PIECE);
	for (size_t k = 0; pieces && k < n; k++)
		free(pieces[k]);
	free(pieces);
	return arg;
}

static void warm_heap(void)
{
	pthread_t t[256];

	/* glibc's arena_max: 8 a CPU on 64-bit */
	warm_arenas = 8 * sysconf(_SC_NPROCESSORS_ONLN);
	if (warm_arenas > 256)
		warm_arenas = 256;
	/* a body from an arena, not an mmap of its own; freed, kept */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	for (int i = 0; i < warm_arenas; i++)
		if (pthread_create(&t[i], NULL, warm_arena, NULL))
			t[i] = 0;
	for (int i = 0; i < warm_arenas; i++)
		if (t[i])
			pthread_join(t[i], NULL);
}

/* A rule file of n rules; rule `changed` (or EVERY_RULE) has count +
 * delta. */
static char *rule_file(int n, int changed, int delta, size_t *len)
{
	size_t cap = (size_t)n * 200 + 64, used = 0;
	char *t = malloc(cap);

	used += sprintf(t, "{\"rules\":[");
	for (int i = 0; i < n; i++)
		used += snprintf(t + used, cap - used,
				 "%s{\"name\":\"svc-%04d\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":%d,\"dst\":\"10.%d.%d.0/24\"},"
				 "\"grade\":\"pps\",\"count\":%d}",
				 i ? "," : "", i, 1024 + i % 60000,
				 i / 256 % 256, i % 256,
				 1000 + i +
				     (i == changed || changed == EVERY_RULE
					  ? delta : 0));
	used += snprintf(t + used, cap - used, "]}");
	*len = used;
	return t;
}

static long long run_count(const char *cmd)
{
	long long v = -1;
	FILE *f;

	if (!cmd || !(f = popen(cmd, "r")))
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	pclose(f);
	return v;
}

/* The key's new value: the file itself, or its body then its manifest. */
static int publish(struct sl_etcd *e, const char *text, size_t len,
		   int64_t *rev)
{
	struct sl_manifest m;
	char err[1024], path[4096], *man;
	FILE *f;
	int ret;

	if (!strcmp(mode, "value"))
		return sl_etcd_put(e, text, len, false, 0, rev, err,
				   sizeof(err));
	man = sl_manifest_build(text, len, n_rules, body_url, &m, err,
				sizeof(err));
	if (!man)
		return -EINVAL;
	/* the body first, then the manifest that names it */
	if (serve_body(m.sha256, text, len)) {
		free(man);
		return -ENOMEM;
	}
	snprintf(path, sizeof(path), "%s/%s.json", body_dir ? body_dir : "",
		 m.sha256);
	if (body_dir && (!(f = fopen(path, "w")) ||
			 fwrite(text, 1, len, f) != len || fclose(f))) {
		free(man);
		return -EIO;
	}
	ret = sl_etcd_put(e, man, strlen(man), false, 0, rev, err,
			  sizeof(err));
	free(man);
	if (ret)
		fprintf(stderr, "put: %s\n", err);
	return ret;
}

/* CPU seconds: of this process, and its minor page faults; of etcd. */
struct cpu_use {
	double self_s, etcd_s;
	long faults;
};

static void cpu_use(struct cpu_use *u)
{
	unsigned long long ut = 0, st = 0;
	struct rusage r;
	char path[64];
	FILE *f;

	getrusage(RUSAGE_SELF, &r);
	u->self_s = r.ru_utime.tv_sec + r.ru_stime.tv_sec +
		    (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
	u->faults = r.ru_minflt;
	u->etcd_s = -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", etcd_pid);
	if (etcd_pid && (f = fopen(path, "r"))) {
		/* fields 14 and 15; the name (2) has no blank: "(etcd)" */
		if (fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u "
			      "%*u %*u %llu %llu", &ut, &st) == 2)
			u->etcd_s = (double)(ut + st) / sysconf(_SC_CLK_TCK);
		fclose(f);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double q)
{
	size_t i = q * n;

	return v[i < n ? i : n - 1] / 1e6;
}

/* Until every agent parsed rev (or timeout_s): how many did. */
static int wait_all(struct agent *ag, uint64_t rev, int timeout_s)
{
	uint64_t until = sl_now_ns() + timeout_s * 1000000000ull;
	int done;

	do {
		done = 0;
		for (int i = 0; i < n_agents; i++)
			done += __atomic_load_n(&ag[i].revision,
						__ATOMIC_ACQUIRE) >= rev;
		if (done == n_agents)
			break;
		usleep(1000);
	} while (sl_now_ns() < until);
	return done;
}

int main(int argc, char **argv)
{
	struct rlimit rl = { 65536, 65536 };
	uint64_t *lat, *all, *flat, *fall;
	size_t n_all = 0, n_fall = 0, n_lat, len;
	struct sl_etcd etcd;
	struct agent *ag;
	char err[1024], *text;
	int64_t rev;

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *o = argv[i], *v = argv[i + 1];

		if (!strcmp(o, "--etcd")) etcd_url = v;
		else if (!strcmp(o, "--key")) key = v;
		else if (!strcmp(o, "--mode")) mode = v;
		else if (!strcmp(o, "--agents")) n_agents = atoi(v);
		else if (!strcmp(o, "--rules")) n_rules = atoi(v);
		else if (!strcmp(o, "--puts")) n_puts = atoi(v);
		else if (!strcmp(o, "--body-dir")) body_dir = v;
		else if (!strcmp(o, "--body-port")) body_port = atoi(v);
		else if (!strcmp(o, "--parse-every")) parse_every = atoi(v);
		else if (!strcmp(o, "--warm-mb")) warm_mb = atoi(v);
		else if (!strcmp(o, "--gzip")) gzip_bodies = atoi(v);
		else if (!strcmp(o, "--etcd-bytes")) etcd_cmd = v;
		else if (!strcmp(o, "--body-bytes")) body_cmd = v;
		else if (!strcmp(o, "--etcd-pid")) etcd_pid = atoi(v);
		else {
			fprintf(stderr, "bench_push: unknown option %s\n", o);
			return 2;
		}
	}
	if (!etcd_url) {
		fprintf(stderr, "bench_push: --etcd URL\n");
		return 2;
	}
	if (warm_mb > 0)
		warm_heap();
	snprintf(body_url, sizeof(body_url), "http://127.0.0.1:%d", body_port);
	if (strcmp(mode, "value") &&
	    !MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD |
				      MHD_USE_ERROR_LOG,
			      body_port, NULL, NULL, serve, NULL,
			      MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u,
			      MHD_OPTION_CONNECTION_LIMIT, 8192u,
			      MHD_OPTION_THREAD_POOL_SIZE, 2u,
			      MHD_OPTION_END)) {
		fprintf(stderr, "bench_push: no body server on port %d\n",
			body_port);
		return 1;
	}
	setrlimit(RLIMIT_NOFILE, &rl);
	if (sl_etcd_init(&etcd, etcd_url, NULL, key, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	/* the agents boot on a small set: the first put brings the whole */
	text = rule_file(1, -1, 0, &len);
	if (publish(&etcd, text, len, &rev)) {
		fprintf(stderr, "cannot publish %s\n", key);
		return 1;
	}
	free(text);
	ag = calloc(n_agents, sizeof(*ag));
	lat = calloc(n_agents, sizeof(*lat));
	all = calloc((size_t)n_agents * (n_puts + 1), sizeof(*all));
	flat = calloc(n_agents, sizeof(*flat));
	fall = calloc((size_t)n_agents * (n_puts + 1), sizeof(*fall));
	for (int i = 0; i < n_agents; i++)
		ag[i].parses = parse_every > 0 && i % parse_every == 0;
	for (int i = 0; i < n_agents; i++)
		if (sl_etcd_source_new(etcd_url, NULL, key, 0, wake, &ag[i],
				       &ag[i].src, err, sizeof(err)) ||
		    sl_etcd_source_start(ag[i].src)) {
			fprintf(stderr, "agent %d: %s\n", i, err);
			return 1;
		}
	if (wait_all(ag, rev, 120) < n_agents) {
		fprintf(stderr, "the agents did not all start\n");
		return 1;
	}
	sleep(1); /* every watch in place */
	printf("# %s: %d agents, %d rules, 1 full set, %d puts of one rule "
	       "changed, 1 of every rule changed\n", mode, n_agents, n_rules,
	       n_puts);
	if (warm_mb > 0)
		printf("# the process's heap faulted in first: %d MB over %d "
		       "arenas (--warm-mb)\n", warm_mb, warm_arenas);
	for (int p = 0; p <= n_puts + 1; p++) {
		bool every = p == n_puts + 1;
		struct cpu_use c0, c1;
		long long e0, e1, b0, b1;
		uint64_t t0;
		int done;

		/* put 0 brings the whole set; then one rule's count moves;
		 * the last moves every rule's */
		text = rule_file(n_rules, every ? EVERY_RULE : p ? 7 : -1, p,
				 &len);
		e0 = run_count(etcd_cmd);
		b0 = run_count(body_cmd);
		cpu_use(&c0);
		t0 = sl_now_ns();
		if (publish(&etcd, text, len, &rev)) {
			fprintf(stderr, "put %d failed\n", p);
			return 1;
		}
		done = wait_all(ag, rev, 60);
		cpu_use(&c1);
		e1 = run_count(etcd_cmd);
		b1 = run_count(body_cmd);
		if (done < n_agents) {
			fprintf(stderr, "put %d: in force on %d of %d agents "
					"after 60 s\n", p, done, n_agents);
			return 1;
		}
		n_lat = 0;
		for (int i = 0; i < n_agents; i++) {
			fall[n_fall++] = flat[i] = ag[i].fetched_ns - t0;
			if (ag[i].parses)
				all[n_all++] = lat[n_lat++] =
					ag[i].applied_ns - t0;
		}
		qsort(lat, n_lat, sizeof(*lat), cmp_u64);
		qsort(flat, n_agents, sizeof(*flat), cmp_u64);
		printf("put %d (%s, %zu bytes): fetched and checked p50 %.0f "
		       "ms, p99 %.0f ms; parsed (%zu agents) p50 %.0f ms, p99 "
		       "%.0f ms, max %.0f ms; etcd sent %.2f MB (%.0f bytes an "
		       "agent), the body server %.2f MB (%.0f bytes an agent); "
		       "CPU: agents and body server %.2f s (%ld page faults), "
		       "etcd %.2f s\n", p,
		       every ? "every rule changed"
		       : p   ? "one rule changed"
			     : "the whole set",
		       len,
		       pct(flat, n_agents, 0.5), pct(flat, n_agents, 0.99),
		       n_lat, pct(lat, n_lat, 0.5), pct(lat, n_lat, 0.99),
		       lat[n_lat - 1] / 1e6, (e1 - e0) / 1e6,
		       (double)(e1 - e0) / n_agents, (b1 - b0) / 1e6,
		       (double)(b1 - b0) / n_agents, c1.self_s - c0.self_s,
		       c1.faults - c0.faults,
		       c0.etcd_s < 0 ? 0 : c1.etcd_s - c0.etcd_s);
		fflush(stdout);
		free(text);
		sleep(1);
	}
	qsort(all, n_all, sizeof(*all), cmp_u64);
	qsort(fall, n_fall, sizeof(*fall), cmp_u64);
	printf("%s, %d agents (1 in %d parses), %d rules, %d puts: put -> "
	       "fetched and checked p50 %.0f ms, p99 %.0f ms; -> parsed p50 "
	       "%.0f ms, p99 %.0f ms, max %.0f ms\n", mode, n_agents,
	       parse_every, n_rules, n_puts + 2,
	       pct(fall, n_fall, 0.5), pct(fall, n_fall, 0.99),
	       pct(all, n_all, 0.5), pct(all, n_all, 0.99),
	       all[n_all - 1] / 1e6);
	/* a thousand sources stopped one by one would take minutes (each
	 * notices within a second): the process ends them all at once */
	fflush(stdout);
	_exit(0);
}
