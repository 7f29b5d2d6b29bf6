/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a fleet admits while its shared limiter dies and comes back
 * (docs/benchmarks.md, "Cluster through a kill -9"). AGENTS simulated
 * agents offer a steady demand for every cluster flow of RULES, skewed:
 * agent i offers (1 + i % 7) / 4 x 2 x count / AGENTS a second, so the
 * fleet offers about twice the count. Every PERIOD ms each asks its
 * limiter; the caller kills the server with SIGKILL and starts it again
 * meanwhile. What the fleet admitted goes into 100 ms bins:
 *
 *  tokend     each agent runs the agent's own per-flow lease state machine
 *             (user/lib/lease.c) and its session's rules as
 *             user/agent/cluster.c has them: HELLO, CHALLENGE, sealed
 *             AUTH, one SYNC a sync period; a sync unanswered at the next
 *             is missed, N periods unanswered or a closed connection end
 *             the session, which retries after sl_backoff_ms(). An agent
 *             admits min(demand, threshold in force) of each flow,
 *             integrated every 10 ms: the rate its data plane settles at.
 *  redis      a fixed-window counter per flow and second: INCRBY of the
 *             period's tokens and EXPIRE; admitted what fitted under
 *             count (the reply less the ask is what others took).
 *  redis-lua  the Lua sliding window of redis_limiter.h, EVALSHA per flow.
 *
 * A Redis agent that cannot ask (its connection lost, reconnecting on the
 * same backoff as an agent's) fails open (admits its demand) or closed
 * (admits nothing); both are counted, the counters Redis keeps do not
 * depend on it. An ask still unanswered when the next is due admits
 * nothing for its period (the client is still waiting).
 *
 *   bench_failover tokend    PORT RULES SECRETS AGENTS PERIOD_MS SECONDS
 *   bench_failover redis     PORT RULES AGENTS PERIOD_MS SECONDS
 *   bench_failover redis-lua PORT RULES AGENTS PERIOD_MS SECONDS
 *
 * RULES: a rule file whose cluster rules are the flows (one namespace,
 * one count). Prints "T0 <unix ms>" when bin 0 starts, then at the end a
 * line per bin, "BIN <i> <open> <closed> <leased> <up>": admitted per
 * flow in the bin (packets; for tokend both the same), agent-flows under
 * a lease (tokend) and agents connected at the bin's end, then RESULT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
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

#include "cluster.h" /* the agent's timeouts and backoff */
#include "lease.h"
#include "proto.h"
#include "redis_limiter.h"
#include "rules_parse.h"
#include "secrets.h"
#include "util.h"

#define BIN_MS	   100
#define TICK_MS	   10 /* tokend: thresholds integrated this often */
#define MAX_FLOWS  64
#define BUF_LEN	   16384 /* a SYNC or GRANTS of MAX_FLOWS, many replies */

enum mode { TOKEND, REDIS, REDIS_LUA };
enum st { IDLE, CONNECTING, HELLO, AUTH, READY };

struct agent {
	int fd;
	enum st st;
	char node[32];
	uint32_t failures; /* in a row, for the backoff */
	uint64_t retry_ns, deadline_ns;
	uint64_t next_ns; /* next sync (tokend), next ask (redis) */
	uint32_t sync_ms, ttl_ms;
	uint32_t req_id, waiting; /* tokend: the unanswered SYNC, 0 none */
	uint64_t sent_ns;
	uint8_t nonce[SL_PROTO_NONCE_LEN];
	struct sl_proto_session keys;
	uint8_t in[BUF_LEN], out[BUF_LEN];
	size_t in_len, out_len;
	double demand;	       /* per flow, per second */
	struct sl_lease l[MAX_FLOWS];
	/* redis */
	double carry;	       /* a fraction of a token not yet asked */
	uint64_t want;	       /* asked per flow by the ask in flight */
	unsigned int ask_bin;  /* its bin */
	unsigned int replies;  /* replies of it still due */
	unsigned int answered; /* its flows answered */
	unsigned int skip;     /* replies to skip first (SCRIPT LOAD) */
};

static enum mode mode;
static struct sl_rule *flows[MAX_FLOWS];
static unsigned int n_flows, n_agents, period_ms, n_bins;
static uint64_t count;
static const char *ns;
static const uint8_t *secret;
static size_t secret_len;
static struct agent *agents;
static int epfd;
static uint16_t port;
static uint32_t rnd = 2463534242u;
static uint64_t t0;
static double *bin_open, *bin_closed;
static uint32_t *bin_leased, *bin_up;
static uint64_t asks, answers, missed, failures;
static char lua_sha[41];

static void die(const char *what)
{
	fprintf(stderr, "bench_failover: %s: %s\n", what, strerror(errno));
	exit(1);
}

static unsigned int bin_of(uint64_t now)
{
	unsigned int b = (now - t0) / (BIN_MS * NSEC_PER_MSEC);

	return b < n_bins ? b : n_bins - 1;
}

/* ---- sessions, as user/agent/cluster.c runs them ---- */

static void sess_close(struct agent *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	a->in_len = a->out_len = 0;
	a->waiting = 0;
	sl_proto_session_clear(&a->keys);
}

/* A Redis ask that will not be answered: the policy decides. */
static void ask_lost(struct agent *a)
{
	if (!a->replies)
		return;
	bin_open[a->ask_bin] += (double)a->want * (n_flows - a->answered);
	a->replies = 0;
}

static void sess_fail(struct agent *a, uint64_t now, bool at_once)
{
	failures++;
	sess_close(a);
	ask_lost(a);
	a->st = IDLE;
	for (unsigned int f = 0; mode == TOKEND && f < n_flows; f++)
		sl_lease_on_miss(&a->l[f]);
	if (at_once) {
		a->retry_ns = now;
		return;
	}
	a->failures++;
	a->retry_ns = now + sl_backoff_ms(SL_CLUSTER_BACKOFF_MIN_MS,
					  SL_CLUSTER_BACKOFF_MAX_MS,
					  a->failures, sl_xorshift32(&rnd)) *
				    NSEC_PER_MSEC;
}

static int queue(struct agent *a, const void *p, size_t n)
{
	if (a->out_len + n > BUF_LEN)
		return -ENOBUFS;
	memcpy(a->out + a->out_len, p, n);
	a->out_len += n;
	return 0;
}

static void watch(struct agent *a)
{
	struct epoll_event ev = {.data.ptr = a, .events = EPOLLIN};

	if (a->st == CONNECTING || a->out_len)
		ev.events |= EPOLLOUT;
	epoll_ctl(epfd, EPOLL_CTL_MOD, a->fd, &ev);
}

static void flush(struct agent *a, uint64_t now)
{
	while (a->out_len) {
		ssize_t w = send(a->fd, a->out, a->out_len, MSG_NOSIGNAL);

		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) {
			sess_fail(a, now, false);
			return;
		}
		memmove(a->out, a->out + w, a->out_len - w);
		a->out_len -= w;
	}
	watch(a);
}

static void sess_connect(struct agent *a, uint64_t now)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct epoll_event ev = {.data.ptr = a,
				 .events = EPOLLIN | EPOLLOUT};
	int one = 1;

	a->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0)
		die("socket");
	setsockopt(a->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    errno != EINPROGRESS) {
		sess_fail(a, now, false);
		return;
	}
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, a->fd, &ev))
		die("epoll_ctl");
	a->st = CONNECTING;
	a->deadline_ns = now + SL_CLUSTER_CONNECT_MS * NSEC_PER_MSEC;
}

/* The connection is up: HELLO, or for Redis ready to ask. */
static void on_connected(struct agent *a, uint64_t now)
{
	uint8_t buf[SL_PROTO_HDR_LEN + 2 + 2 * SL_PROTO_NAME_MAX +
		    SL_PROTO_NONCE_LEN];
	socklen_t len = sizeof(int);
	char cmd[1024];
	int soerr = 0, n;
	size_t fl;

	getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
	if (soerr) {
		sess_fail(a, now, false);
		return;
	}
	if (mode != TOKEND) {
		a->st = READY;
		a->failures = 0;
		if (mode == REDIS_LUA) {
			/* a restarted Redis has no scripts: load it again */
			n = snprintf(cmd, sizeof(cmd),
				     "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n"
				     "$%zu\r\n%s\r\n",
				     strlen(redis_sliding_window_lua),
				     redis_sliding_window_lua);
			queue(a, cmd, n);
			a->skip = 1;
		}
		flush(a, now);
		return;
	}
	if (sl_proto_nonce(a->nonce) ||
	    sl_proto_put_hello(buf, sizeof(buf), ++a->req_id, ns, a->node,
			       a->nonce, &fl) ||
	    queue(a, buf, fl))
		die("HELLO");
	a->st = HELLO;
	a->deadline_ns = now + SL_CLUSTER_HANDSHAKE_MS * NSEC_PER_MSEC;
	flush(a, now);
}

static uint64_t admitted_rate(const struct agent *a, unsigned int f)
{
	return a->demand < a->l[f].limit ? (uint64_t)a->demand : a->l[f].limit;
}

/* Each changed threshold is in force from now (the agent's map write). */
static void write_limits(struct agent *a, uint64_t now)
{
	for (unsigned int f = 0; f < n_flows; f++)
		if (a->l[f].dirty)
			sl_lease_written(&a->l[f], now);
}

static void send_sync(struct agent *a, uint64_t now)
{
	struct sl_flow_report r[MAX_FLOWS];
	size_t len;

	if (a->waiting) {
		missed++;
		for (unsigned int f = 0; f < n_flows; f++)
			sl_lease_on_miss(&a->l[f]);
		if (now - a->sent_ns >= SL_LEASE_MISS_LIMIT *
						(uint64_t)a->sync_ms *
						NSEC_PER_MSEC) {
			sess_fail(a, now, false);
			return;
		}
	}
	for (unsigned int f = 0; f < n_flows; f++)
		r[f] = (struct sl_flow_report){
			.flow_id = flows[f]->cluster.flow_id,
			.demand = (uint64_t)a->demand,
			.used = admitted_rate(a, f),
			.held = sl_lease_held(&a->l[f]),
		};
	if (sl_proto_put_sync(a->out + a->out_len, BUF_LEN - a->out_len,
			      ++a->req_id, r, n_flows, &len) ||
	    sl_proto_seal(&a->keys, a->out + a->out_len, BUF_LEN - a->out_len,
			  &len)) {
		a->next_ns = now + a->sync_ms * NSEC_PER_MSEC;
		return;
	}
	a->out_len += len;
	a->waiting = a->req_id;
	a->sent_ns = now;
	asks++;
	a->next_ns += a->sync_ms * NSEC_PER_MSEC;
	if (a->next_ns <= now)
		a->next_ns = now + a->sync_ms * NSEC_PER_MSEC;
	flush(a, now);
}

static void on_grants(struct agent *a, const struct sl_msg *m, uint64_t now)
{
	struct sl_lease_cfg lc = {.sync_ms = a->sync_ms,
				  .miss_limit = SL_LEASE_MISS_LIMIT,
				  .good_needed = SL_LEASE_GOOD_NEEDED};

	if (m->grants.flags & SL_SRV_DRAIN) {
		for (unsigned int f = 0; f < n_flows; f++)
			sl_lease_on_drain(&a->l[f], now);
		sess_fail(a, now, true);
		return;
	}
	if (!m->req_id || m->req_id != a->waiting)
		return; /* late, or unasked */
	a->waiting = 0;
	a->failures = 0;
	answers++;
	if (m->grants.flags & SL_SRV_KEEP) {
		for (unsigned int f = 0; f < n_flows; f++)
			sl_lease_on_keep(&a->l[f], m->grants.ttl_ms, now);
		return;
	}
	for (uint32_t i = 0; i < m->grants.n && i < n_flows; i++) {
		struct sl_flow_grant g;

		sl_proto_grant(m, i, &g);
		if (g.flow_id == flows[i]->cluster.flow_id)
			sl_lease_on_grant(&a->l[i], flows[i], a->node, &g, &lc,
					  now);
	}
}

static void on_frame(struct agent *a, const uint8_t *p, uint32_t len,
		     uint64_t now)
{
	uint8_t buf[SL_PROTO_HDR_LEN + SL_PROTO_SEAL_LEN];
	struct sl_msg m;
	size_t n;

	if (sl_proto_decode(p, len, &m)) {
		sess_fail(a, now, false);
		return;
	}
	if (a->st != HELLO && !(a->st == AUTH && !m.sealed) &&
	    sl_proto_open(&a->keys, p, len, &m)) {
		sess_fail(a, now, false);
		return;
	}
	if (m.type == SL_MSG_ERROR) {
		sess_fail(a, now, false);
		return;
	}
	if (a->st == HELLO && m.type == SL_MSG_CHALLENGE) {
		if (sl_proto_session_init(&a->keys, true, secret, secret_len,
					  a->nonce, m.challenge.nonce, ns,
					  strlen(ns), a->node,
					  strlen(a->node)) ||
		    sl_proto_put_auth(buf, sizeof(buf), ++a->req_id, &n) ||
		    sl_proto_seal(&a->keys, buf, sizeof(buf), &n) ||
		    queue(a, buf, n))
			die("AUTH");
		a->st = AUTH;
		flush(a, now);
	} else if (a->st == AUTH && m.type == SL_MSG_AUTH_OK) {
		a->ttl_ms = m.auth_ok.ttl_ms;
		if (m.auth_ok.sync_ms)
			a->sync_ms = m.auth_ok.sync_ms;
		a->st = READY;
		a->next_ns = now;
	} else if (a->st == READY && m.type == SL_MSG_GRANTS) {
		on_grants(a, &m, now);
	} else {
		sess_fail(a, now, false);
	}
}

/* ---- Redis replies ---- */

/* Length of the reply at p (integer, simple, error or bulk), 0 if it is
 * not all there; *v its integer, *err whether it is an error. */
static size_t resp_reply(const uint8_t *p, size_t n, long long *v, bool *err)
{
	const uint8_t *eol = memchr(p, '\n', n);
	size_t head;
	long long bulk;

	if (!eol)
		return 0;
	head = eol + 1 - p;
	*err = p[0] == '-';
	*v = strtoll((const char *)p + 1, NULL, 10);
	if (p[0] != '$')
		return head;
	bulk = *v;
	if (bulk < 0)
		return head;
	return n >= head + bulk + 2 ? head + bulk + 2 : 0;
}

static void on_reply(struct agent *a, long long v, bool err, uint64_t now)
{
	unsigned int per = mode == REDIS ? 2 : 1, i, f;
	uint64_t took, got;

	if (a->skip) {
		a->skip--;
		return;
	}
	if (!a->replies || err) {
		sess_fail(a, now, false);
		return;
	}
	i = n_flows * per - a->replies--;
	f = i / per;
	if (mode == REDIS && i % per)
		goto out; /* EXPIRE's */
	if (mode == REDIS) {
		/* INCRBY answers the window's total, ours included */
		took = (uint64_t)v - a->want;
		got = took >= count ? 0 : count - took;
		if (got > a->want)
			got = a->want;
	} else {
		got = v > 0 ? (uint64_t)v : 0;
	}
	bin_open[a->ask_bin] += got;
	bin_closed[a->ask_bin] += got;
	a->answered = f + 1;
out:
	if (!a->replies)
		answers++;
}

static void ask(struct agent *a, uint64_t now)
{
	unsigned int b = bin_of(now);
	uint64_t ms = (now - t0) / NSEC_PER_MSEC + 1000000000ull;
	char key[48], num[24], when[24];
	size_t len = 0;

	a->carry += a->demand * period_ms / 1000;
	a->want = (uint64_t)a->carry;
	a->carry -= a->want;
	a->next_ns += period_ms * NSEC_PER_MSEC;
	if (a->st != READY) {
		/* no Redis to ask: open admits all, closed nothing */
		bin_open[b] += (double)a->want * n_flows;
		return;
	}
	if (a->replies) {
		missed++; /* still waiting for the last one */
		return;
	}
	for (unsigned int f = 0; f < n_flows; f++) {
		int kl, nl = snprintf(num, sizeof(num), "%llu",
				      (unsigned long long)a->want);
		int wl;

		if (mode == REDIS) {
			kl = snprintf(key, sizeof(key), "fo:%u:%llu",
				      flows[f]->cluster.flow_id,
				      (unsigned long long)(ms / 1000));
			len += snprintf((char *)a->out + a->out_len + len,
					BUF_LEN - a->out_len - len,
					"*3\r\n$6\r\nINCRBY\r\n$%d\r\n%s\r\n"
					"$%d\r\n%s\r\n"
					"*3\r\n$6\r\nEXPIRE\r\n$%d\r\n%s\r\n"
					"$1\r\n2\r\n",
					kl, key, nl, num, kl, key);
			continue;
		}
		kl = snprintf(key, sizeof(key), "fo:%u",
			      flows[f]->cluster.flow_id);
		wl = snprintf(when, sizeof(when), "%llu",
			      (unsigned long long)ms);
		len += snprintf((char *)a->out + a->out_len + len,
				BUF_LEN - a->out_len - len,
				"*8\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n"
				"$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
				"$4\r\n1000\r\n$%d\r\n%llu\r\n$%d\r\n%s\r\n",
				lua_sha, kl, key, wl, when,
				snprintf(NULL, 0, "%llu",
					 (unsigned long long)count),
				(unsigned long long)count, nl, num);
	}
	if (a->out_len + len >= BUF_LEN) {
		errno = ENOBUFS;
		die("ask");
	}
	a->out_len += len;
	a->replies = n_flows * (mode == REDIS ? 2 : 1);
	a->answered = 0;
	a->ask_bin = b;
	asks++;
	flush(a, now);
}

static void on_input(struct agent *a, uint64_t now)
{
	for (;;) {
		ssize_t r = recv(a->fd, a->in + a->in_len, BUF_LEN - a->in_len,
				 MSG_DONTWAIT);
		size_t off = 0;

		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			sess_fail(a, now, false);
			return;
		}
		a->in_len += r;
		while (a->st != IDLE && off < a->in_len) {
			uint32_t len;
			long long v;
			bool err;

			if (mode != TOKEND) {
				len = resp_reply(a->in + off, a->in_len - off,
						 &v, &err);
				if (!len)
					break;
				on_reply(a, v, err, now);
			} else {
				int e = sl_proto_frame_len(a->in + off,
							   a->in_len - off,
							   &len);

				if (e == -EAGAIN ||
				    (!e && len > a->in_len - off))
					break;
				if (e) {
					sess_fail(a, now, false);
					return;
				}
				on_frame(a, a->in + off, len, now);
				write_limits(a, now);
			}
			off += len;
		}
		if (a->st == IDLE)
			return;
		memmove(a->in, a->in + off, a->in_len - off);
		a->in_len -= off;
	}
}

/* Timers of one agent. */
static void drive(struct agent *a, uint64_t now)
{
	switch (a->st) {
	case IDLE:
		if (now >= a->retry_ns)
			sess_connect(a, now);
		break;
	case CONNECTING:
	case HELLO:
	case AUTH:
		if (now >= a->deadline_ns)
			sess_fail(a, now, false);
		break;
	case READY:
		if (mode == TOKEND && now >= a->next_ns)
			send_sync(a, now);
		break;
	}
	/* a Redis agent's traffic asks whatever the connection does */
	while (mode != TOKEND && now >= a->next_ns)
		ask(a, now);
}

/* ---- setup ---- */

static void load(const char *rules, const char *secrets)
{
	static struct sl_ruleset rs;
	static struct sl_secrets sec;
	char err[256];

	if (sl_rules_load_file(rules, &rs, err, sizeof(err))) {
		fprintf(stderr, "bench_failover: %s\n", err);
		exit(2);
	}
	for (size_t i = 0; i < rs.n && n_flows < MAX_FLOWS; i++) {
		if (!rs.rules[i].cluster.enabled)
			continue;
		flows[n_flows++] = &rs.rules[i];
		ns = rs.rules[i].cluster.ns;
		count = rs.rules[i].count;
	}
	if (!n_flows) {
		fprintf(stderr, "bench_failover: no cluster rule in %s\n",
			rules);
		exit(2);
	}
	if (!secrets)
		return;
	if (sl_secrets_load(secrets, &sec, err, sizeof(err))) {
		fprintf(stderr, "bench_failover: %s\n", err);
		exit(2);
	}
	for (size_t i = 0; i < sec.n; i++) {
		if (strcmp(sec.v[i].ns, ns))
			continue;
		secret = sec.v[i].key[sec.v[i].n_keys - 1];
		secret_len = sec.v[i].len[sec.v[i].n_keys - 1];
	}
	if (!secret) {
		fprintf(stderr, "bench_failover: no secret for %s\n", ns);
		exit(2);
	}
}

/* The script's SHA1, as SCRIPT LOAD answers it: ask a Redis once. */
static void lua_sha_of(void)
{
	struct agent a = {.fd = -1};
	uint64_t end;
	size_t got = 0;
	char *p;
	int n;

	sess_connect(&a, sl_now_ns());
	if (a.fd < 0)
		die("connect");
	epoll_ctl(epfd, EPOLL_CTL_DEL, a.fd, NULL);
	n = snprintf((char *)a.out, BUF_LEN,
		     "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%zu\r\n%s\r\n",
		     strlen(redis_sliding_window_lua),
		     redis_sliding_window_lua);
	end = sl_now_ns() + 2000 * NSEC_PER_MSEC;
	while (send(a.fd, a.out, n, MSG_NOSIGNAL) < 0 && sl_now_ns() < end)
		usleep(1000);
	while (got < 47 && sl_now_ns() < end) {
		ssize_t r = recv(a.fd, a.in + got, BUF_LEN - got, 0);

		if (r > 0)
			got += r;
		else
			usleep(1000);
	}
	p = memchr(a.in, '\n', got);
	if (got < 47 || a.in[0] != '$' || !p) {
		errno = EPROTO;
		die("SCRIPT LOAD");
	}
	memcpy(lua_sha, p + 1, 40);
	close(a.fd);
}

int main(int argc, char **argv)
{
	struct rlimit rl = {65536, 65536};
	struct epoll_event evs[256];
	unsigned int seconds, i, a0;
	uint64_t now, next_tick, end, step;
	double offered = 0;
	struct timespec rt;

	if (argc == 8 && !strcmp(argv[1], "tokend")) {
		mode = TOKEND;
		load(argv[3], argv[4]);
		a0 = 5;
	} else if (argc == 7 && (!strcmp(argv[1], "redis") ||
				 !strcmp(argv[1], "redis-lua"))) {
		mode = strcmp(argv[1], "redis") ? REDIS_LUA : REDIS;
		load(argv[3], NULL);
		a0 = 4;
	} else {
		fprintf(stderr,
			"usage: bench_failover tokend PORT RULES SECRETS "
			"AGENTS PERIOD_MS SECONDS\n"
			"       bench_failover redis|redis-lua PORT RULES "
			"AGENTS PERIOD_MS SECONDS\n");
		return 2;
	}
	port = atoi(argv[2]);
	n_agents = atoi(argv[a0]);
	period_ms = atoi(argv[a0 + 1]);
	seconds = atoi(argv[a0 + 2]);
	if (!n_agents || !period_ms || !seconds) {
		fprintf(stderr, "bench_failover: bad numbers\n");
		return 2;
	}
	setrlimit(RLIMIT_NOFILE, &rl);
	n_bins = seconds * 1000 / BIN_MS;
	agents = calloc(n_agents, sizeof(*agents));
	bin_open = calloc(n_bins, sizeof(double));
	bin_closed = calloc(n_bins, sizeof(double));
	bin_leased = calloc(n_bins, sizeof(uint32_t));
	bin_up = calloc(n_bins, sizeof(uint32_t));
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!agents || !bin_open || !bin_closed || !bin_leased || !bin_up ||
	    epfd < 0)
		die("setup");
	if (mode == REDIS_LUA)
		lua_sha_of();

	now = sl_now_ns();
	t0 = now;
	step = (uint64_t)period_ms * NSEC_PER_MSEC / n_agents;
	for (i = 0; i < n_agents; i++) {
		struct agent *a = &agents[i];

		a->fd = -1;
		a->sync_ms = SL_CLUSTER_SYNC_MS; /* until AUTH_OK advises */
		a->demand = (1 + i % 7) / 4.0 * 2 * count / n_agents;
		offered += a->demand;
		snprintf(a->node, sizeof(a->node), "agent-%u", i);
		/* the fleet starts evenly spread over a period */
		a->retry_ns = a->next_ns = t0 + i * step;
		for (unsigned int f = 0; f < n_flows; f++)
			sl_lease_boot(&a->l[f], flows[f], a->node, -1, now);
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	printf("T0 %llu\n", (unsigned long long)rt.tv_sec * 1000 +
				    rt.tv_nsec / 1000000);
	fflush(stdout);

	end = t0 + seconds * 1000 * NSEC_PER_MSEC;
	next_tick = t0;
	while ((now = sl_now_ns()) < end) {
		int n = epoll_wait(epfd, evs, 256, 1);

		now = sl_now_ns();
		for (int k = 0; k < n; k++) {
			struct agent *a = evs[k].data.ptr;

			if (a->st == CONNECTING &&
			    (evs[k].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
				on_connected(a, now);
			if (a->st != IDLE && a->st != CONNECTING &&
			    (evs[k].events & EPOLLOUT) && a->out_len)
				flush(a, now);
			if (a->st != IDLE && a->st != CONNECTING &&
			    (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				on_input(a, now);
		}
		for (i = 0; i < n_agents; i++)
			drive(&agents[i], now);
		/* thresholds in force, the data plane's view, every tick */
		while (mode == TOKEND && next_tick <= now && next_tick < end) {
			struct sl_lease_cfg lc = {
				.miss_limit = SL_LEASE_MISS_LIMIT,
				.good_needed = SL_LEASE_GOOD_NEEDED};
			unsigned int b = bin_of(next_tick);
			double sum = 0;
			uint32_t leased = 0;

			for (i = 0; i < n_agents; i++) {
				struct agent *a = &agents[i];

				lc.sync_ms = a->sync_ms;
				for (unsigned int f = 0; f < n_flows; f++) {
					sl_lease_tick(&a->l[f], flows[f],
						      a->node, &lc, now);
					sum += admitted_rate(a, f);
					leased += a->l[f].state ==
						  SL_LEASE_CLUSTER;
				}
				write_limits(a, now);
			}
			sum = sum * TICK_MS / 1000 / n_flows;
			bin_open[b] += sum;
			bin_closed[b] += sum;
			bin_leased[b] = leased;
			next_tick += TICK_MS * NSEC_PER_MSEC;
		}
		{
			uint32_t up = 0;

			for (i = 0; i < n_agents; i++)
				up += agents[i].st == READY;
			bin_up[bin_of(now)] = up;
		}
	}
	for (i = 0; i < n_bins; i++) {
		double o = bin_open[i], c = bin_closed[i];

		if (mode != TOKEND) {
			o /= n_flows;
			c /= n_flows;
		}
		printf("BIN %u %.1f %.1f %u %u\n", i, o, c, bin_leased[i],
		       bin_up[i]);
	}
	printf("RESULT %s count %llu offered %.0f agents %u flows %u asks "
	       "%llu answered %llu missed %llu failures %llu\n",
	       argv[1], (unsigned long long)count, offered, n_agents, n_flows,
	       (unsigned long long)asks, (unsigned long long)answers,
	       (unsigned long long)missed, (unsigned long long)failures);
	return 0;
}
