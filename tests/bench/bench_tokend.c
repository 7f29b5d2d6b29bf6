/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Load generator for the token server (docs/benchmarks.md): AGENTS
 * connections, each syncing FLOWS flows every PERIOD ms, staggered evenly;
 * or the same load as a Redis counter per flow (INCRBY + EXPIRE,
 * pipelined per sync), or as the usual Redis limiter, a Lua sliding
 * window (redis_limiter.h), one EVALSHA per flow, pipelined.
 * Prints achieved flow updates/s and the latency of each sync (request
 * written to last answer byte read). PERIOD_MS 0: closed loop, each agent
 * syncs again as soon as it is answered (the server's most). With
 * TOKEND_PID set, also the CPU that process used over the measured
 * seconds, and the flow updates/s per core that makes.
 *
 *   bench_tokend tokend    PORT NS SECRET AGENTS FLOWS PERIOD_MS SECONDS
 *   bench_tokend redis     PORT AGENTS FLOWS PERIOD_MS SECONDS
 *   bench_tokend redis-lua PORT AGENTS FLOWS PERIOD_MS SECONDS
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "redis_limiter.h"

#define WARMUP_S 2
#define BUF_MAX	 (SL_PROTO_MAX_FRAME * 2)

struct agent {
	int fd;
	bool busy;	    /* a sync is in flight */
	uint64_t sent_ns;
	uint32_t req;
	uint8_t in[BUF_MAX];
	size_t in_len;
	unsigned int replies; /* redis: replies still expected */
	uint64_t *held;
	struct sl_proto_session keys; /* sealed, as an agent's */
};

static bool redis, lua;
static char lua_sha[41];
static unsigned int n_agents, n_flows;
static struct agent *agents;
static uint8_t *out;
static uint64_t *lat; /* µs, one per answered sync after warm-up */
static size_t n_lat, lat_cap;
static uint64_t answered, missed, measure_from;
static bool closed_loop;
static uint64_t loop_seq; /* closed loop: syncs sent */

/* utime + stime of process pid, in seconds; -1 without one. */
static double proc_cpu_s(const char *pid)
{
	unsigned long long ut, st;
	char path[64], buf[1024], *p;
	FILE *f;
	size_t n;

	if (!pid)
		return -1;
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

enum { SCHED_RAN, SCHED_WAITED };

/*
 * Seconds that the tasks under dir (/proc/PID/task, or /proc) whose
 * name starts with prefix ran on a CPU (SCHED_RAN) or waited for one
 * when runnable (SCHED_WAITED): schedstat's nanoseconds, as a thread's
 * few ms a second need them. -1 when no such task.
 */
static double sched_s(const char *dir, const char *prefix, int field)
{
	unsigned long long v[2];
	double sum = -1;
	char path[300], comm[32];
	struct dirent *d;
	DIR *dp = opendir(dir);
	FILE *f;

	while (dp && (d = readdir(dp))) {
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/%s/comm", dir, d->d_name);
		f = fopen(path, "r");
		comm[0] = '\0';
		if (f && !fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		if (f)
			fclose(f);
		if (strncmp(comm, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/schedstat", dir, d->d_name);
		f = fopen(path, "r");
		if (f && fscanf(f, "%llu %llu", &v[0], &v[1]) == 2)
			sum = (sum < 0 ? 0 : sum) + v[field] / 1e9;
		if (f)
			fclose(f);
	}
	if (dp)
		closedir(dp);
	return sum;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_tokend: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int dial(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EAGAIN)
			continue; /* a sync is small; the socket drains fast */
		if (w <= 0)
			die("send");
		p = (const uint8_t *)p + w;
		n -= w;
	}
}

/* Blocking: one frame into a->in; returns its length. */
static uint32_t recv_frame(struct agent *a, struct sl_msg *m)
{
	uint32_t len;
	size_t got = 0;

	while (got < 4 || sl_proto_frame_len(a->in, got, &len) || got < len) {
		ssize_t r = recv(a->fd, a->in + got, BUF_MAX - got, 0);

		if (r <= 0)
			die("handshake recv");
		got += r;
	}
	if (sl_proto_decode(a->in, len, m))
		die("handshake decode");
	return len;
}

static void handshake(struct agent *a, const char *ns, const char *secret,
		      unsigned int i)
{
	uint8_t nonce[SL_PROTO_NONCE_LEN];
	struct sl_msg m;
	char node[32];
	size_t len;
	uint32_t flen;

	snprintf(node, sizeof(node), "agent-%u", i);
	if (sl_proto_nonce(nonce))
		die("nonce");
	sl_proto_put_hello(out, BUF_MAX, 1, ns, node, nonce, &len);
	send_all(a->fd, out, len);
	recv_frame(a, &m);
	if (m.type != SL_MSG_CHALLENGE)
		die("no challenge");
	if (sl_proto_session_init(&a->keys, true, secret, strlen(secret), nonce,
				  m.challenge.nonce, ns, strlen(ns), node,
				  strlen(node)))
		die("session keys");
	sl_proto_put_auth(out, BUF_MAX, 2, &len);
	sl_proto_seal(&a->keys, out, BUF_MAX, &len);
	send_all(a->fd, out, len);
	flen = recv_frame(a, &m);
	if (m.type != SL_MSG_AUTH_OK || sl_proto_open(&a->keys, a->in, flen, &m)) {
		errno = EACCES;
		die("authentication");
	}
}

/* One sync: demand wanders around a per-agent base so grants move. */
static void send_sync(struct agent *a, unsigned int idx, uint64_t seq)
{
	static struct sl_flow_report r[SL_PROTO_MAX_REPORTS];
	size_t len = 0;

	if (!redis) {
		for (unsigned int f = 0; f < n_flows; f++) {
			uint64_t d = 1000 + (idx * 7 + f * 13) % 1000 +
				     (seq * 31 + f) % 200;

			r[f] = (struct sl_flow_report){f + 1, d, d, a->held[f]};
		}
		sl_proto_put_sync(out, BUF_MAX, ++a->req, r, n_flows, &len);
		sl_proto_seal(&a->keys, out, BUF_MAX, &len);
	} else if (lua) {
		char now[24];
		int nl = snprintf(now, sizeof(now), "%llu",
				  (unsigned long long)(now_ns() / 1000000));

		for (unsigned int f = 0; f < n_flows; f++) {
			char key[32], val[24];
			int kl = snprintf(key, sizeof(key), "bench:%u", f + 1);
			int vl = snprintf(val, sizeof(val), "%u",
					  1000 + (idx + f) % 1000);

			len += sprintf((char *)out + len,
				       "*8\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n"
				       "$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
				       "$4\r\n1000\r\n$10\r\n1000000000\r\n"
				       "$%d\r\n%s\r\n",
				       lua_sha, kl, key, nl, now, vl, val);
		}
		a->replies = n_flows;
	} else {
		for (unsigned int f = 0; f < n_flows; f++) {
			char key[32], val[24];
			int kl = snprintf(key, sizeof(key), "bench:%u", f + 1);
			int vl = snprintf(val, sizeof(val), "%u",
					  1000 + (idx + f) % 1000);

			len += sprintf((char *)out + len,
				       "*3\r\n$6\r\nINCRBY\r\n$%d\r\n%s\r\n"
				       "$%d\r\n%s\r\n"
				       "*3\r\n$6\r\nEXPIRE\r\n$%d\r\n%s\r\n"
				       "$1\r\n1\r\n",
				       kl, key, vl, val, kl, key);
		}
		a->replies = 2 * n_flows;
	}
	a->busy = true;
	a->sent_ns = now_ns();
	send_all(a->fd, out, len);
}

/* SCRIPT LOAD on a's connection, blocking: the script's SHA1. */
static void lua_load(struct agent *a)
{
	size_t len, got = 0;
	char *p;

	len = sprintf((char *)out, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n"
				    "$%zu\r\n%s\r\n",
		      strlen(redis_sliding_window_lua),
		      redis_sliding_window_lua);
	send_all(a->fd, out, len);
	/* "$40\r\n" + 40 hex digits + "\r\n" */
	while (got < 47) {
		ssize_t r = recv(a->fd, a->in + got, BUF_MAX - got, 0);

		if (r <= 0)
			die("SCRIPT LOAD");
		got += r;
	}
	p = memchr(a->in, '\n', got);
	if (a->in[0] != '$' || !p ||
	    (size_t)(p + 1 - (char *)a->in) + 40 > got) {
		errno = EPROTO;
		die("SCRIPT LOAD reply");
	}
	memcpy(lua_sha, p + 1, 40);
	lua_sha[40] = 0;
}

static void send_sync(struct agent *a, unsigned int idx, uint64_t seq);

static void done(struct agent *a)
{
	uint64_t t = now_ns();

	a->busy = false;
	if (a->sent_ns >= measure_from) {
		answered++;
		if (n_lat < lat_cap)
			lat[n_lat++] = (t - a->sent_ns) / 1000;
	}
	if (closed_loop)
		send_sync(a, a - agents, loop_seq++);
}

/* Consume what arrived: whole GRANTS frames, or Redis integer replies. */
static void on_input(struct agent *a)
{
	ssize_t r = recv(a->fd, a->in + a->in_len, BUF_MAX - a->in_len,
			 MSG_DONTWAIT);
	size_t off = 0;

	if (r == 0) {
		errno = ECONNRESET;
		die("server closed a connection");
	}
	if (r < 0)
		return;
	a->in_len += r;
	if (redis) {
		for (size_t i = 0; i < a->in_len; i++) {
			if (a->in[i] == '-') {
				errno = EPROTO;
				die("redis error reply");
			}
			if (a->in[i] == '\n' && a->replies && !--a->replies)
				done(a);
		}
		a->in_len = 0;
		return;
	}
	for (;;) {
		struct sl_msg m;
		uint32_t len;

		if (sl_proto_frame_len(a->in + off, a->in_len - off, &len) ||
		    a->in_len - off < len)
			break;
		if (sl_proto_decode(a->in + off, len, &m) ||
		    m.type != SL_MSG_GRANTS ||
		    sl_proto_open(&a->keys, a->in + off, len, &m)) {
			errno = EPROTO;
			die("bad answer");
		}
		for (uint32_t i = 0; i < m.grants.n && i < n_flows; i++) {
			struct sl_flow_grant g;

			sl_proto_grant(&m, i, &g);
			a->held[i] = g.grant;
		}
		if (m.req_id == a->req)
			done(a);
		off += len;
	}
	memmove(a->in, a->in + off, a->in_len - off);
	a->in_len -= off;
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
	struct rlimit rl = {65536, 65536};
	struct epoll_event ev, evs[256];
	unsigned int period_ms, seconds, i;
	uint64_t t0, step, end, seq = 0;
	const char *ns = NULL, *secret = NULL, *mode;
	const char *pid = getenv("TOKEND_PID");
	double cpu0 = -1, cpu1, cores = 0, bal0 = -1, bal1, bal_cores = -1;
	/* what delays a SYNC besides the server's work: its threads' wait
	 * for a CPU (worker 0 is the main thread), and the kernel's DAMON
	 * threads, which run for ms at a time (docs/benchmarks.md, "What
	 * the figures say") */
	double wait0 = -1, wait1, waited = -1, damon0 = -1, damon1, damon = -1;
	char tasks[64] = "";
	unsigned int unanswered = 0;
	int epfd, a0;
	uint16_t port;

	if (argc == 9 && !strcmp(argv[1], "tokend")) {
		ns = argv[3];
		secret = argv[4];
		a0 = 5;
	} else if (argc == 7 && (!strcmp(argv[1], "redis") ||
				 !strcmp(argv[1], "redis-lua"))) {
		redis = true;
		lua = !strcmp(argv[1], "redis-lua");
		a0 = 3;
	} else {
		fprintf(stderr, "usage: bench_tokend tokend PORT NS SECRET "
				"AGENTS FLOWS PERIOD_MS SECONDS\n"
				"       bench_tokend redis|redis-lua PORT "
				"AGENTS FLOWS PERIOD_MS SECONDS\n");
		return 2;
	}
	port = atoi(argv[2]);
	n_agents = atoi(argv[a0]);
	n_flows = atoi(argv[a0 + 1]);
	period_ms = atoi(argv[a0 + 2]);
	seconds = atoi(argv[a0 + 3]);
	closed_loop = !period_ms && !redis;
	if (!n_agents || !n_flows || n_flows > SL_PROTO_MAX_REPORTS ||
	    (!period_ms && !closed_loop) || !seconds) {
		fprintf(stderr, "bench_tokend: bad numbers\n");
		return 2;
	}
	setrlimit(RLIMIT_NOFILE, &rl);
	agents = calloc(n_agents, sizeof(*agents));
	out = malloc(BUF_MAX);
	/* closed loop: room for 100,000 syncs/s */
	lat_cap = closed_loop ? 100000ull * (seconds + WARMUP_S + 1)
			      : (uint64_t)n_agents * (1000 / period_ms + 1) *
					(seconds + 1);
	lat = malloc(lat_cap * sizeof(*lat));
	epfd = epoll_create1(0);
	if (!agents || !out || !lat || epfd < 0)
		die("setup");
	for (i = 0; i < n_agents; i++) {
		struct agent *a = &agents[i];

		a->fd = dial(port);
		a->held = calloc(n_flows, sizeof(*a->held));
		if (!a->held)
			die("calloc");
		if (!redis)
			handshake(a, ns, secret, i);
		else if (lua && !i)
			lua_load(a); /* scripts are the server's */
		ev.events = EPOLLIN;
		ev.data.ptr = a;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, a->fd, &ev))
			die("epoll_ctl");
	}

	/* Agent seq % n sends at t0 + seq * step: an even stream. */
	step = (uint64_t)period_ms * 1000000 / n_agents;
	t0 = now_ns();
	measure_from = t0 + WARMUP_S * 1000000000ull;
	end = measure_from + seconds * 1000000000ull;
	if (closed_loop)
		for (i = 0; i < n_agents; i++)
			send_sync(&agents[i], i, loop_seq++);
	for (;;) {
		uint64_t now = now_ns();
		int n, timeout;

		if (cpu0 < 0 && now >= measure_from) {
			if (pid)
				snprintf(tasks, sizeof(tasks), "/proc/%s/task",
					 pid);
			cpu0 = proc_cpu_s(pid);
			bal0 = sched_s(tasks, "tokend-balance", SCHED_RAN);
			wait0 = sched_s(tasks, "", SCHED_WAITED);
			damon0 = sched_s("/proc", "kdamond", SCHED_RAN);
		}
		/* what falls due within 1 ms goes now: the loop sleeps in
		 * whole ms, never spins (it shares a core with the server) */
		while (!closed_loop && t0 + seq * step <= now + 1000000) {
			struct agent *a = &agents[seq % n_agents];

			if (a->busy) {
				/* still waiting: this sync is not offered */
				if (now >= measure_from)
					missed++;
			} else {
				send_sync(a, seq % n_agents, seq);
			}
			seq++;
		}
		if (now >= end)
			break;
		timeout = closed_loop ? 10
				      : (t0 + seq * step - now) / 1000000 + 1;
		n = epoll_wait(epfd, evs, 256, timeout);
		for (int k = 0; k < n; k++)
			on_input(evs[k].data.ptr);
	}

	cpu1 = proc_cpu_s(pid);
	bal1 = sched_s(tasks, "tokend-balance", SCHED_RAN);
	wait1 = sched_s(tasks, "", SCHED_WAITED);
	damon1 = sched_s("/proc", "kdamond", SCHED_RAN);
	for (i = 0; i < n_agents; i++)
		if (agents[i].busy && agents[i].sent_ns + 1000000000ull < end)
			unanswered++;
	if (cpu0 >= 0 && cpu1 >= 0)
		cores = (cpu1 - cpu0) / seconds;
	if (bal0 >= 0 && bal1 >= 0)
		bal_cores = (bal1 - bal0) / seconds;
	if (wait0 >= 0 && wait1 >= 0)
		waited = wait1 - wait0;
	if (damon0 >= 0 && damon1 >= 0)
		damon = damon1 - damon0;
	qsort(lat, n_lat, sizeof(*lat), u64_cmp);
	mode = lua ? "redis-lua" : redis ? "redis" : "tokend";
	if (closed_loop)
		printf("%s: %u agents x %u flows, closed loop: offered what "
		       "is answered, ", mode, n_agents, n_flows);
	else
		printf("%s: %u agents x %u flows every %u ms: offered %.0f "
		       "flow updates/s, ", mode, n_agents, n_flows, period_ms,
		       (double)n_agents * n_flows * 1000 / period_ms);
	printf("achieved %.0f/s (%llu syncs missed, %u agents unanswered "
	       "for 1 s at the end); sync latency p50 %llu us, p99 %llu us\n",
	       (double)answered * n_flows / seconds,
	       (unsigned long long)missed, unanswered,
	       n_lat ? (unsigned long long)lat[n_lat / 2] : 0ULL,
	       n_lat ? (unsigned long long)lat[n_lat * 99 / 100] : 0ULL);
	if (cores > 0)
		printf("%s: %.0f%% of one core over the measured %u s: %.2fM "
		       "flow updates/s per core\n", mode, 100 * cores, seconds,
		       answered * n_flows / seconds / cores / 1e6);
	if (bal_cores >= 0)
		printf("%s: its balancer thread (lease expiry, large flows' "
		       "water levels): %.2f%% of one core\n", mode,
		       100 * bal_cores);
	if (waited >= 0)
		printf("%s: its threads waited %.1f ms for a CPU over the "
		       "measured %u s\n", mode, waited * 1e3, seconds);
	if (damon >= 0)
		printf("%s: the kernel's DAMON threads (kdamond) ran %.1f ms "
		       "meanwhile\n", mode, damon * 1e3);
	printf("RESULT %s %.0f %llu %llu %.3f %.1f\n", mode,
	       (double)answered * n_flows / seconds,
	       n_lat ? (unsigned long long)lat[n_lat / 2] : 0ULL,
	       n_lat ? (unsigned long long)lat[n_lat * 99 / 100] : 0ULL,
	       cores, waited >= 0 ? waited * 1e3 : -1);
	return 0;
}
