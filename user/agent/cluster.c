// SPDX-License-Identifier: GPL-2.0
/*
 * Cluster sync (cluster.h): one thread, one non-blocking TCP session per
 * namespace, HELLO/CHALLENGE/AUTH then one SYNC per sync period for all
 * the namespace's flows. Every threshold change, and every renewal of a
 * lease (its expiry), is one sl_dp_set_limit().
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "log.h"
#include "sluice_abi.h"
#include "stats.h"
#include "util.h"

/* Buckets of the sync round trip, in seconds: a LAN's 100 us up to the
 * 300 ms after which three missed syncs end a session. */
static const double sync_rtt_bounds[] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	0.01,	0.025,	 0.05,	 0.1,	0.25,	0.5,
};

enum sess_state {
	SESS_IDLE,	 /* waiting for retry_ns */
	SESS_RESOLVING,	 /* a host name being resolved */
	SESS_CONNECTING, /* TCP connect in progress */
	SESS_HELLO,	 /* HELLO sent, waiting for CHALLENGE */
	SESS_AUTH,	 /* AUTH sent, waiting for AUTH_OK */
	SESS_READY,	 /* syncing */
};

/*
 * A host name resolved by glibc's getaddrinfo_a, off the locks the data
 * plane's users wait on (a resolver that does not answer holds a lookup
 * for seconds). glibc may still write it after the session gave up on
 * it, so it lives apart from the session.
 */
struct resolve {
	struct gaicb cb;
	struct gaicb *list[1];
	struct addrinfo hints;
	char host[256];
	char port[8];
	struct resolve *next; /* on c->abandoned */
};

struct session {
	char ns[SL_NAME_MAX + 1];
	int fd;
	enum sess_state st;
	size_t server;	   /* index into c->servers */
	uint32_t failures; /* in a row, for the backoff */
	uint64_t retry_ns;
	uint64_t deadline_ns; /* connect or handshake */
	uint32_t sync_ms;
	uint32_t ttl_ms;
	uint64_t next_sync_ns;
	uint32_t req_id;
	uint32_t waiting;     /* request id of the unanswered SYNC, 0: none */
	uint64_t sent_ns;
	uint64_t gen;	      /* c->gen when that SYNC was built */
	uint64_t rtt_us;
	struct sl_histogram sync_rtt;
	char last_error[192];
	uint8_t *in, *out;
	size_t in_len, out_len;
	bool alive;	      /* still has flows after a rules change */
	uint64_t refused[SL_REFUSALS];
	uint32_t key_tries; /* refused AUTHs: which secret of a rotation */
	uint8_t nonce[SL_PROTO_NONCE_LEN]; /* this connection's, in HELLO */
	struct sl_proto_session keys;	   /* from the CHALLENGE on */
	uint64_t term;	/* the newest leader's term seen; older is refused */
	uint64_t term_heard_ns; /* an answer of that term last came */
	struct resolve *res;	/* while SESS_RESOLVING */
	size_t *sent;	/* flow index of each entry of the last SYNC */
	uint32_t n_sent;
	/* a follower named the leader: the next connection goes there */
	struct sl_cluster_server redirect;
	bool redirected;
	uint32_t redirects; /* in a row, without a sync answered */
};

struct flow {
	char rule[SL_NAME_MAX + 1];
	struct sl_rule r; /* copy: the count, fallback and quotas */
	size_t idx;	  /* index in dp->rules */
	size_t sess;
	struct sl_lease l;
	enum sl_lease_state logged; /* the state last logged */
	uint64_t dp_expires; /* the lease expiry the data plane holds */
	uint64_t demand, used; /* per second, in the rule's unit */
};

struct sl_cluster_sync {
	struct sl_cluster_cfg cfg;
	char node[SL_PROTO_NAME_MAX + 1];
	struct sl_cluster_server servers[SL_CLUSTER_MAX_SERVERS];
	size_t n_servers;
	struct sl_dataplane *dp;
	pthread_mutex_t *dp_lock;
	pthread_mutex_t lock; /* flows and sessions; after dp_lock */
	struct flow *flows;
	size_t n_flows;
	struct session *sess;
	size_t n_sess;
	uint64_t gen; /* bumped when the flow list changes */
	int wake_fd;
	pthread_t thread;
	bool running;
	volatile bool stop;
	uint32_t rnd;
	/* scratch for a SYNC and its flows */
	struct sl_flow_report *reports;
	struct resolve *abandoned; /* lookups given up, still in glibc's hands */
};

void sl_cluster_cfg_default(struct sl_cluster_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->sync_ms = SL_CLUSTER_SYNC_MS;
	cfg->miss_limit = SL_LEASE_MISS_LIMIT;
	cfg->good_needed = SL_LEASE_GOOD_NEEDED;
	cfg->resolve_ms = SL_CLUSTER_RESOLVE_MS;
	cfg->connect_ms = SL_CLUSTER_CONNECT_MS;
	cfg->handshake_ms = SL_CLUSTER_HANDSHAKE_MS;
	cfg->backoff_min_ms = SL_CLUSTER_BACKOFF_MIN_MS;
	cfg->backoff_max_ms = SL_CLUSTER_BACKOFF_MAX_MS;
	cfg->max_ttl_ms = SL_CLUSTER_MAX_TTL_MS;
}

const char *const sl_cluster_refusal_names[SL_REFUSALS] = {
	[SL_REFUSED_OVER_COUNT] = "over_count",
	[SL_REFUSED_TTL] = "ttl",
	[SL_REFUSED_SERVER_AUTH] = "server_auth",
	[SL_REFUSED_MAC] = "mac",
	[SL_REFUSED_SEQUENCE] = "sequence",
	[SL_REFUSED_UNSEALED] = "unsealed",
	[SL_REFUSED_TERM] = "term",
	[SL_REFUSED_MALFORMED] = "malformed",
};

int sl_cluster_parse_servers(const char *list, struct sl_cluster_server *out,
			     size_t max, size_t *n, char *err, size_t errlen)
{
	const char *cur = list, *it;
	struct sl_hostport hp;
	size_t len;

	*n = 0;
	if (!list || !*list) {
		snprintf(err, errlen, "no token server given");
		return -EINVAL;
	}
	while (sl_list_next(&cur, &it, &len)) {
		if (*n == max) {
			snprintf(err, errlen, "more than %zu token servers",
				 max);
			return -EINVAL;
		}
		if (sl_parse_hostport(it, len, &hp) || !hp.port) {
			snprintf(err, errlen,
				 "'%.*s' is not HOST:PORT ([ADDR6]:PORT for "
				 "IPv6, port 1-65535)", (int)len, it);
			return -EINVAL;
		}
		snprintf(out[*n].host, sizeof(out[*n].host), "%s", hp.host);
		snprintf(out[*n].port, sizeof(out[*n].port), "%u", hp.port);
		(*n)++;
	}
	return 0;
}

/* sv's address when its host is numeric (freeaddrinfo it); NULL for a
 * name, which only a resolver answers. */
static struct addrinfo *numeric_addr(const struct sl_cluster_server *sv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;

	return getaddrinfo(sv->host, sv->port, &hints, &ai) ? NULL : ai;
}

/*
 * Without secrets the token protocol has no key: a peer is trusted only
 * on loopback, as tokend listens only there then. A name other than
 * localhost is checked again once resolved.
 */
static int check_unkeyed(const struct sl_cluster_server *sv, char *err,
			 size_t errlen)
{
	struct addrinfo *ai = numeric_addr(sv);
	bool loopback = ai && sl_sockaddr_is_loopback(ai->ai_addr);

	if (ai)
		freeaddrinfo(ai);
	if (loopback || !strcmp(sv->host, "localhost"))
		return 0;
	snprintf(err, errlen, "token server %s:%s is not a loopback address: "
		 "a session with it needs --secrets", sv->host, sv->port);
	return -EINVAL;
}

static uint32_t next_rand(struct sl_cluster_sync *c)
{
	return sl_xorshift32(&c->rnd);
}

static struct flow *find_flow(struct sl_cluster_sync *c, const struct sl_rule *r)
{
	for (size_t i = 0; i < c->n_flows; i++)
		if (c->flows[i].r.cluster.flow_id == r->cluster.flow_id &&
		    !strcmp(c->flows[i].r.cluster.ns, r->cluster.ns) &&
		    !strcmp(c->flows[i].rule, r->name))
			return &c->flows[i];
	return NULL;
}

/* dp's hook for a fresh slot: called inside sl_dp_apply (dp_lock held). */
static uint64_t first_limit(const struct sl_rule *r, void *arg)
{
	struct sl_cluster_sync *c = arg;
	struct sl_lease l;
	struct flow *f;
	uint64_t v;

	if (!r->cluster.enabled)
		return r->count;
	pthread_mutex_lock(&c->lock);
	f = find_flow(c, r);
	if (f) {
		l = f->l;
		sl_lease_refresh(&l, r, c->node);
		v = l.limit;
	} else {
		v = sl_lease_fallback(r, c->node, 0, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return v;
}

int sl_cluster_new(const struct sl_cluster_cfg *cfg, struct sl_dataplane *dp,
		   pthread_mutex_t *dp_lock, struct sl_cluster_sync **out,
		   char *err, size_t errlen)
{
	struct sl_cluster_sync *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->dp = dp;
	c->dp_lock = dp_lock;
	c->wake_fd = -1;
	ret = sl_cluster_parse_servers(cfg->servers, c->servers,
				       SL_CLUSTER_MAX_SERVERS, &c->n_servers,
				       err, errlen);
	if (ret)
		goto fail;
	if (cfg->node_id)
		snprintf(c->node, sizeof(c->node), "%s", cfg->node_id);
	else if (gethostname(c->node, sizeof(c->node) - 1))
		c->node[0] = 0;
	if (!sl_proto_name_valid(c->node, strlen(c->node))) {
		snprintf(err, errlen,
			 "node id '%s' is not 1-63 of [A-Za-z0-9_.:-]%s",
			 c->node,
			 cfg->node_id ? "" : " (the host name; give --node-id)");
		ret = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < c->n_servers && !cfg->secrets; i++) {
		ret = check_unkeyed(&c->servers[i], err, errlen);
		if (ret)
			goto fail;
	}
	if (!cfg->sync_ms || !cfg->miss_limit || !cfg->good_needed ||
	    !cfg->backoff_min_ms || cfg->backoff_max_ms < cfg->backoff_min_ms) {
		snprintf(err, errlen, "sync period, N, K and the backoff "
				      "must be positive");
		ret = -EINVAL;
		goto fail;
	}
	c->reports = calloc(SL_PROTO_MAX_REPORTS, sizeof(*c->reports));
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!c->reports || c->wake_fd < 0) {
		ret = -ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->rnd = (uint32_t)sl_now_ns() ^ (uint32_t)getpid() << 8;
	if (!c->rnd)
		c->rnd = 1;
	dp->first_limit = first_limit;
	dp->first_limit_arg = c;
	*out = c;
	return 0;
fail:
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	free(c->reports);
	free(c);
	return ret;
}

/* ---- the flows ---- */

static void log_state(struct flow *f)
{
	if (f->logged == f->l.state)
		return;
	pr_info("cluster: %s: %s -> %s, threshold %llu", f->rule,
		sl_lease_state_str(f->logged), sl_lease_state_str(f->l.state),
		(unsigned long long)f->l.limit);
	f->logged = f->l.state;
}

/*
 * The threshold of each flow whose limit changed, and under a lease its
 * expiry whenever a renewal moved it, with the fallback beside it: the
 * data plane switches to that by itself at the expiry, the moment
 * sl_lease_tick() would, should this agent be gone by then. (Under a
 * lease good is 0, so sl_lease_fallback() is what tick writes.)
 */
static void write_limits(struct sl_cluster_sync *c, uint64_t now)
{
	for (size_t i = 0; i < c->n_flows; i++) {
		struct flow *f = &c->flows[i];
		struct sl_lease_cfg lc = {
			.sync_ms = c->sess[f->sess].sync_ms,
			.miss_limit = c->cfg.miss_limit,
		};
		struct sluice_lease dl = {
			.expires_ns = sl_lease_expiry(&f->l, &lc),
		};
		int err;

		log_state(f);
		if (!f->l.dirty && dl.expires_ns == f->dp_expires)
			continue;
		if (dl.expires_ns)
			dl.fallback = sl_lease_fallback(&f->r, c->node,
							f->l.holders, &f->l);
		err = sl_dp_set_limit(c->dp, f->rule, f->l.limit,
				      dl.expires_ns ? &dl : NULL);
		if (err) {
			pr_warn("cluster: %s: cannot write threshold %llu: %s",
				f->rule, (unsigned long long)f->l.limit,
				strerror(-err));
			continue;
		}
		f->dp_expires = dl.expires_ns;
		sl_lease_written(&f->l, now);
		log_state(f);
	}
}

static int64_t map_limit(struct sl_cluster_sync *c, size_t idx)
{
	uint64_t v;

	if (sl_dp_get_limit(c->dp, idx, &v))
		return -1;
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static struct session *find_sess(struct session *s, size_t n, const char *ns)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s[i].ns, ns))
			return &s[i];
	return NULL;
}

static void resolve_free(struct resolve *r)
{
	if (r->cb.ar_result)
		freeaddrinfo(r->cb.ar_result);
	free(r);
}

/* Lookups given up that glibc has finished with since. */
static void reap_abandoned(struct sl_cluster_sync *c)
{
	struct resolve **p = &c->abandoned;

	while (*p) {
		struct resolve *r = *p;

		if (gai_error(&r->cb) == EAI_INPROGRESS) {
			p = &r->next;
			continue;
		}
		*p = r->next;
		resolve_free(r);
	}
}

static void sess_close(struct sl_cluster_sync *c, struct session *s)
{
	struct resolve *r = s->res;

	if (r && gai_error(&r->cb) == EAI_INPROGRESS &&
	    gai_cancel(&r->cb) == EAI_NOTCANCELED) {
		r->next = c->abandoned;
		c->abandoned = r;
	} else if (r) {
		resolve_free(r);
	}
	s->res = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->in_len = s->out_len = 0;
	s->waiting = 0;
	sl_proto_session_clear(&s->keys);
}

static void sess_free(struct session *s)
{
	free(s->in);
	free(s->out);
	free(s->sent);
}

static int sess_init(struct sl_cluster_sync *c, struct session *s, const char *ns)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->ns, sizeof(s->ns), "%s", ns);
	s->fd = -1;
	s->sync_ms = c->cfg.sync_ms;
	sl_histogram_init(&s->sync_rtt, sync_rtt_bounds,
			  ARRAY_SIZE(sync_rtt_bounds));
	s->in = malloc(SL_PROTO_MAX_FRAME);
	s->out = malloc(SL_PROTO_MAX_FRAME);
	s->sent = calloc(SL_PROTO_MAX_REPORTS, sizeof(*s->sent));
	if (!s->in || !s->out || !s->sent) {
		sess_free(s);
		return -ENOMEM;
	}
	return 0;
}

void sl_cluster_rules_changed(struct sl_cluster_sync *c)
{
	const struct sl_ruleset *rs = &c->dp->rules;
	struct flow *flows = calloc(rs->n + 1, sizeof(*flows));
	struct session *sess = calloc(rs->n + 1, sizeof(*sess));
	uint64_t now = sl_now_ns();
	size_t nf = 0, ns = 0;

	if (!flows || !sess) {
		pr_err("cluster: out of memory: the flows keep their old list");
		free(flows);
		free(sess);
		return;
	}
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < rs->n; i++) {
		const struct sl_rule *r = &rs->rules[i];
		struct flow *f = &flows[nf], *old;
		struct session *s;

		if (!r->cluster.enabled)
			continue;
		old = find_flow(c, r);
		if (old) {
			*f = *old;
		} else {
			snprintf(f->rule, sizeof(f->rule), "%s", r->name);
			sl_lease_boot(&f->l, r, c->node, map_limit(c, i), now);
		}
		if (sl_rule_copy(&f->r, r)) {
			pr_err("cluster: out of memory: rule '%s' is not "
			       "synced", r->name);
			sl_rule_release(&f->r);
			continue;
		}
		f->idx = i;
		sl_lease_refresh(&f->l, r, c->node);
		f->l.dirty = true;
		s = find_sess(sess, ns, r->cluster.ns);
		if (!s) {
			struct session *o = find_sess(c->sess, c->n_sess,
						      r->cluster.ns);

			s = &sess[ns++];
			if (o) {
				*s = *o;
				o->alive = true;
			} else if (sess_init(c, s, r->cluster.ns)) {
				ns--;
				sl_rule_release(&f->r);
				continue;
			}
		}
		f->sess = s - sess;
		nf++;
	}
	for (size_t i = 0; i < c->n_sess; i++) {
		if (c->sess[i].alive)
			continue;
		sess_close(c, &c->sess[i]);
		sess_free(&c->sess[i]);
	}
	for (size_t i = 0; i < ns; i++)
		sess[i].alive = false;
	for (size_t i = 0; i < c->n_flows; i++)
		sl_rule_release(&c->flows[i].r);
	free(c->flows);
	free(c->sess);
	c->flows = flows;
	c->n_flows = nf;
	c->sess = sess;
	c->n_sess = ns;
	c->gen++;
	write_limits(c, now);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Demand and use per second over the rule's sliding window, the time
 * scale on which the data plane holds the grant. A sync period's own rate
 * follows every burst and stall of the sender, and a grant that follows
 * it dips under the traffic every other sync (docs/cluster.md).
 */
static void measure(struct sl_cluster_sync *c, struct flow *f)
{
	struct sl_rule_stats st;
	bool bytes = f->r.grade == SL_GRADE_BPS;

	if (sl_dp_rule_stats(c->dp, f->idx, &st))
		return;
	f->used = bytes ? st.passed_Bps : st.passed_pps;
	f->demand = f->used + (bytes ? st.blocked_Bps : st.blocked_pps);
}

/* ---- the sessions ---- */

/* Where the session connects: the leader a follower named, else the list. */
static const struct sl_cluster_server *sess_server(const struct sl_cluster_sync *c,
						   const struct session *s)
{
	return s->redirected ? &s->redirect : &c->servers[s->server];
}

static void sess_fail(struct sl_cluster_sync *c, struct session *s, uint64_t now,
		      bool at_once, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void sess_fail(struct sl_cluster_sync *c, struct session *s, uint64_t now,
		      bool at_once, const char *fmt, ...)
{
	const struct sl_cluster_server *sv = sess_server(c, s);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
	va_end(ap);
	pr_warn("cluster: namespace %s, token server %s:%s: %s", s->ns,
		sv->host, sv->port, s->last_error);
	sess_close(c, s);
	s->st = SESS_IDLE;
	for (size_t i = 0; i < c->n_flows; i++)
		if (&c->sess[c->flows[i].sess] == s)
			sl_lease_on_miss(&c->flows[i].l);
	/* a leader that fails sends the session back to its list */
	if (s->redirected)
		s->redirected = false;
	else
		s->server = (s->server + 1) % c->n_servers;
	if (at_once) {
		s->retry_ns = now;
	} else {
		s->failures++;
		s->retry_ns = now + sl_backoff_ms(c->cfg.backoff_min_ms,
						  c->cfg.backoff_max_ms,
						  s->failures, next_rand(c)) *
					    NSEC_PER_MSEC;
	}
}

static int sess_queue(struct session *s, const void *buf, size_t len)
{
	if (s->out_len + len > SL_PROTO_MAX_FRAME)
		return -ENOBUFS;
	memcpy(s->out + s->out_len, buf, len);
	s->out_len += len;
	return 0;
}

static int sess_flush(struct session *s)
{
	while (s->out_len) {
		ssize_t w = send(s->fd, s->out, s->out_len, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w < 0)
			return -errno;
		memmove(s->out, s->out + w, s->out_len - w);
		s->out_len -= w;
	}
	return 0;
}

/* Connect to the first address of ai (resolved, or a numeric host). */
static void sess_dial(struct sl_cluster_sync *c, struct session *s,
		      const struct addrinfo *ai, uint64_t now)
{
	int one = 1;

	if (!c->cfg.secrets && !sl_sockaddr_is_loopback(ai->ai_addr)) {
		sess_fail(c, s, now, false, "not a loopback address: a "
			  "session with it needs --secrets");
		return;
	}
	s->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
					      SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		sess_fail(c, s, now, false, "socket: %s", strerror(errno));
		return;
	}
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s->fd, ai->ai_addr, ai->ai_addrlen) &&
	    errno != EINPROGRESS) {
		sess_fail(c, s, now, false, "connect: %s", strerror(errno));
		return;
	}
	s->st = SESS_CONNECTING;
	s->deadline_ns = now + c->cfg.connect_ms * NSEC_PER_MSEC;
}

/* A numeric host is dialled at once; a name is looked up in the
 * background (struct resolve) and dialled when sess_drive sees it done. */
static void sess_connect(struct sl_cluster_sync *c, struct session *s,
			 uint64_t now)
{
	const struct sl_cluster_server *sv = sess_server(c, s);
	struct sigevent none = { .sigev_notify = SIGEV_NONE };
	struct addrinfo *ai = numeric_addr(sv);
	struct resolve *r;
	int ret;

	if (ai) {
		sess_dial(c, s, ai, now);
		freeaddrinfo(ai);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		sess_fail(c, s, now, false, "cannot resolve: out of memory");
		return;
	}
	snprintf(r->host, sizeof(r->host), "%s", sv->host);
	snprintf(r->port, sizeof(r->port), "%s", sv->port);
	r->hints = (struct addrinfo){ .ai_socktype = SOCK_STREAM,
				      .ai_flags = AI_NUMERICSERV };
	r->cb = (struct gaicb){ .ar_name = r->host, .ar_service = r->port,
				.ar_request = &r->hints };
	r->list[0] = &r->cb;
	ret = getaddrinfo_a(GAI_NOWAIT, r->list, 1, &none);
	if (ret) {
		free(r);
		sess_fail(c, s, now, false, "cannot resolve: %s",
			  gai_strerror(ret));
		return;
	}
	s->res = r;
	s->st = SESS_RESOLVING;
	s->deadline_ns = now + c->cfg.resolve_ms * NSEC_PER_MSEC;
}

/* A lookup in progress: dial its answer once it has one. */
static uint64_t sess_resolving(struct sl_cluster_sync *c, struct session *s,
			       uint64_t now)
{
	int ret = gai_error(&s->res->cb);

	if (ret == EAI_INPROGRESS) {
		if (now < s->deadline_ns)
			return now + SL_CLUSTER_RESOLVE_POLL_NS < s->deadline_ns
				       ? now + SL_CLUSTER_RESOLVE_POLL_NS
				       : s->deadline_ns;
		sess_fail(c, s, now, false, "cannot resolve: no answer in "
			  "%u ms", c->cfg.resolve_ms);
	} else if (ret) {
		sess_fail(c, s, now, false, "cannot resolve: %s",
			  gai_strerror(ret));
	} else {
		struct resolve *r = s->res;

		s->res = NULL;
		sess_dial(c, s, r->cb.ar_result, now);
		resolve_free(r);
	}
	return s->st == SESS_IDLE ? s->retry_ns : s->deadline_ns;
}

static void sess_hello(struct sl_cluster_sync *c, struct session *s, uint64_t now)
{
	uint8_t buf[SL_PROTO_HDR_LEN + 2 + 2 * SL_PROTO_NAME_MAX +
		    SL_PROTO_NONCE_LEN];
	socklen_t len = sizeof(int);
	size_t n;
	int soerr = 0;

	getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
	if (soerr) {
		sess_fail(c, s, now, false, "connect: %s", strerror(soerr));
		return;
	}
	if (sl_proto_nonce(s->nonce) ||
	    sl_proto_put_hello(buf, sizeof(buf), ++s->req_id, s->ns, c->node,
			       s->nonce, &n) ||
	    sess_queue(s, buf, n)) {
		sess_fail(c, s, now, false, "cannot encode HELLO");
		return;
	}
	s->st = SESS_HELLO;
	s->deadline_ns = now + c->cfg.handshake_ms * NSEC_PER_MSEC;
}

static void send_sync(struct sl_cluster_sync *c, struct session *s, uint64_t now)
{
	size_t n = 0, len;
	int err;

	if (s->waiting) {
		/* the last SYNC went unanswered: a missed sync */
		for (size_t i = 0; i < c->n_flows; i++)
			if (&c->sess[c->flows[i].sess] == s)
				sl_lease_on_miss(&c->flows[i].l);
		if (now - s->sent_ns >=
		    c->cfg.miss_limit * (uint64_t)s->sync_ms * NSEC_PER_MSEC) {
			sess_fail(c, s, now, false, "%u syncs unanswered",
				  c->cfg.miss_limit);
			return;
		}
	}
	for (size_t i = 0; i < c->n_flows && n < SL_PROTO_MAX_REPORTS; i++) {
		struct flow *f = &c->flows[i];

		if (&c->sess[f->sess] != s)
			continue;
		measure(c, f);
		c->reports[n] = (struct sl_flow_report){
			.flow_id = f->r.cluster.flow_id,
			.demand = f->demand,
			.used = f->used,
			.held = sl_lease_held(&f->l),
		};
		s->sent[n++] = i;
	}
	err = sl_proto_put_sync(s->out + s->out_len,
				SL_PROTO_MAX_FRAME - s->out_len, ++s->req_id,
				c->reports, n, &len);
	if (!err)
		err = sl_proto_seal(&s->keys, s->out + s->out_len,
				    SL_PROTO_MAX_FRAME - s->out_len, &len);
	if (err) {
		/* the previous frames are still unsent: skip this period */
		s->next_sync_ns = now + s->sync_ms * NSEC_PER_MSEC;
		return;
	}
	s->out_len += len;
	s->n_sent = n;
	s->waiting = s->req_id;
	s->sent_ns = now;
	s->gen = c->gen;
	s->next_sync_ns += s->sync_ms * NSEC_PER_MSEC;
	if (s->next_sync_ns <= now)
		s->next_sync_ns = now + s->sync_ms * NSEC_PER_MSEC;
}

/*
 * What an answer may not say, whoever sent it: a grant above the rule's
 * count (a manual flow's: this node's quota), which no share of the
 * cluster's count can be, or a lease longer than max_ttl_ms. Returns the
 * reason (why says it), or -1 for an answer within bounds.
 */
static int out_of_bounds(const struct sl_cluster_sync *c,
			 const struct session *s, const struct sl_msg *m,
			 char *why, size_t len)
{
	if ((m->grants.flags & SL_SRV_KEEP) &&
	    m->grants.ttl_ms > c->cfg.max_ttl_ms) {
		snprintf(why, len, "a lease of %u ms, above --max-lease-ttl-ms "
			 "%u", m->grants.ttl_ms, c->cfg.max_ttl_ms);
		return SL_REFUSED_TTL;
	}
	if (m->grants.flags & SL_SRV_KEEP)
		return -1;
	if (m->grants.n != s->n_sent) {
		snprintf(why, len, "%u grants for the %u flows of the SYNC",
			 m->grants.n, s->n_sent);
		return SL_REFUSED_MALFORMED;
	}
	if (s->gen != c->gen)
		return -1;
	for (uint32_t i = 0; i < m->grants.n; i++) {
		struct sl_flow_grant g;
		const struct flow *f;
		uint64_t bound;

		sl_proto_grant(m, i, &g);
		f = &c->flows[s->sent[i]];
		if (g.flow_id != f->r.cluster.flow_id ||
		    (g.flags & SL_GRANT_UNKNOWN))
			continue;
		bound = f->r.cluster.threshold == SL_THRESH_MANUAL
				? sl_cluster_quota(&f->r.cluster, c->node)
				: f->r.count;
		if (g.grant > bound) {
			snprintf(why, len, "%s: a grant of %llu, above the "
				 "rule's %s %llu", f->rule,
				 (unsigned long long)g.grant,
				 f->r.cluster.threshold == SL_THRESH_MANUAL
					 ? "quota for this node"
					 : "count",
				 (unsigned long long)bound);
			return SL_REFUSED_OVER_COUNT;
		}
		if (g.ttl_ms > c->cfg.max_ttl_ms) {
			snprintf(why, len, "%s: a lease of %u ms, above "
				 "--max-lease-ttl-ms %u", f->rule, g.ttl_ms,
				 c->cfg.max_ttl_ms);
			return SL_REFUSED_TTL;
		}
	}
	return -1;
}

static void on_grants(struct sl_cluster_sync *c, struct session *s,
		      const struct sl_msg *m, uint64_t now)
{
	char why[sizeof(s->last_error) - 16];
	int refused;
	struct sl_lease_cfg lc = { .sync_ms = s->sync_ms,
				   .miss_limit = c->cfg.miss_limit,
				   .good_needed = c->cfg.good_needed };
	bool answer = m->req_id && m->req_id == s->waiting;

	if (m->grants.flags & SL_SRV_DRAIN) {
		for (size_t i = 0; i < c->n_flows; i++)
			if (&c->sess[c->flows[i].sess] == s)
				sl_lease_on_drain(&c->flows[i].l, now);
		sess_fail(c, s, now, true, "the server drains");
		return;
	}
	if (!answer)
		return; /* late, or unasked: nothing to apply */
	refused = out_of_bounds(c, s, m, why, sizeof(why));
	if (refused >= 0) {
		/* nothing of it applied; the leases run out as if unanswered */
		s->refused[refused]++;
		sess_fail(c, s, now, false, "refused: %s", why);
		return;
	}
	s->waiting = 0;
	s->failures = 0;
	s->redirects = 0;
	s->rtt_us = (now - s->sent_ns) / 1000;
	sl_histogram_observe(&s->sync_rtt, (now - s->sent_ns) / 1e9);
	s->last_error[0] = 0;
	if (m->grants.flags & SL_SRV_KEEP) {
		for (size_t i = 0; i < c->n_flows; i++)
			if (&c->sess[c->flows[i].sess] == s)
				sl_lease_on_keep(&c->flows[i].l,
						 m->grants.ttl_ms, now);
		return;
	}
	if (s->gen != c->gen)
		return; /* the flows changed since: the entries do not map */
	for (uint32_t i = 0; i < m->grants.n; i++) {
		struct sl_flow_grant g;
		struct flow *f;

		sl_proto_grant(m, i, &g);
		f = &c->flows[s->sent[i]];
		if (g.flow_id != f->r.cluster.flow_id)
			continue;
		if ((g.flags & SL_GRANT_UNKNOWN) &&
		    !(f->l.state == SL_LEASE_FALLBACK && !f->l.good))
			pr_warn("cluster: %s: namespace %s has no flow %u on "
				"the token server", f->rule, s->ns, g.flow_id);
		sl_lease_on_grant(&f->l, &f->r, c->node, &g, &lc, now);
	}
}

/* Keys for the session from the namespace's secret: the newest first,
 * after a refused AUTH the other. */
static int sess_keys(struct sl_cluster_sync *c, struct session *s,
		     const struct sl_msg *m)
{
	const struct sl_secret *sec = NULL;
	size_t k = 0;

	if (c->cfg.secrets) {
		sec = sl_secrets_find(c->cfg.secrets, s->ns);
		if (!sec)
			return -ENOKEY;
		k = sec->n_keys - 1 - s->key_tries % sec->n_keys;
	}
	return sl_proto_session_init(&s->keys, true,
				     sec ? sec->key[k] : NULL,
				     sec ? sec->len[k] : 0, s->nonce,
				     m->challenge.nonce, s->ns, strlen(s->ns),
				     c->node, strlen(c->node));
}

/*
 * A sealed frame from the server must open under the session's keys:
 * before AUTH_OK only an unsealed ERROR may come (the server could not
 * check our AUTH, so it has no keys); a frame that does not open is
 * refused and the session closed.
 */
static bool sess_open(struct sl_cluster_sync *c, struct session *s,
		      const void *frame, size_t len, const struct sl_msg *m,
		      uint64_t now)
{
	static const char *const why[] = {
		[SL_REFUSED_SERVER_AUTH] = "the token server does not hold "
					   "the namespace secret (AUTH_OK "
					   "not sealed with it)",
		[SL_REFUSED_MAC] = "a frame with a wrong MAC (tampered)",
		[SL_REFUSED_SEQUENCE] = "a frame out of sequence (replayed "
					"or reordered)",
		[SL_REFUSED_UNSEALED] = "a frame without a seal",
	};
	int err, reason;

	if (s->st == SESS_HELLO || (s->st == SESS_AUTH && !m->sealed &&
				    m->type == SL_MSG_ERROR))
		return true;
	err = sl_proto_open(&s->keys, frame, len, m);
	if (!err)
		return true;
	if (err == -EPERM)
		reason = SL_REFUSED_UNSEALED;
	else if (err == -ESTALE)
		reason = SL_REFUSED_SEQUENCE;
	else if (s->st == SESS_AUTH)
		reason = SL_REFUSED_SERVER_AUTH;
	else
		reason = SL_REFUSED_MAC;
	s->refused[reason]++;
	sess_fail(c, s, now, false, "refused: %s", why[reason]);
	return false;
}

/*
 * A term older than the newest this namespace has seen comes from a
 * deposed leader: refused, nothing of it applied, for as long as a lease
 * of the newer term may last (--max-lease-ttl-ms since that term was last
 * heard). After that no lease of the newer term is left to overlap, and
 * a term nobody answers in (or a forged one) locks nobody out for good.
 * Only the server's own answers teach a term (learn); a REDIRECT only
 * points.
 */
static bool term_ok(struct sl_cluster_sync *c, struct session *s,
		    uint64_t term, bool learn, uint64_t now)
{
	if (term < s->term) {
		if (now - s->term_heard_ns <
		    c->cfg.max_ttl_ms * (uint64_t)NSEC_PER_MSEC) {
			s->refused[SL_REFUSED_TERM]++;
			sess_fail(c, s, now, false, "refused: an answer of "
				  "term %llu, older than term %llu seen (a "
				  "deposed leader)", (unsigned long long)term,
				  (unsigned long long)s->term);
			return false;
		}
		if (learn)
			pr_warn("cluster: namespace %s: term %llu unheard for "
				"%u ms (--max-lease-ttl-ms): no lease of it "
				"is left, term %llu believed", s->ns,
				(unsigned long long)s->term,
				c->cfg.max_ttl_ms, (unsigned long long)term);
	}
	if (learn) {
		s->term = term;
		s->term_heard_ns = now;
	}
	return true;
}

/* A follower's answer: go to the leader it names, at once the first time
 * (a failover), with the backoff when followers keep sending us round. */
static void on_redirect(struct sl_cluster_sync *c, struct session *s,
			const struct sl_msg *m, uint64_t now)
{
	struct sl_hostport hp;

	if (!m->redirect.addr_len ||
	    sl_parse_hostport(m->redirect.addr, m->redirect.addr_len, &hp) ||
	    !hp.port) {
		sess_fail(c, s, now, false, "not the leader, and no leader "
			  "known (term %llu)",
			  (unsigned long long)m->redirect.term);
		return;
	}
	sess_fail(c, s, now, s->redirects++ == 0, "not the leader: the "
		  "leader is %.*s (term %llu)", (int)m->redirect.addr_len,
		  m->redirect.addr, (unsigned long long)m->redirect.term);
	snprintf(s->redirect.host, sizeof(s->redirect.host), "%s", hp.host);
	snprintf(s->redirect.port, sizeof(s->redirect.port), "%u", hp.port);
	/* a leader of the list is that entry, as the metrics name it */
	for (size_t i = 0; i < c->n_servers; i++) {
		if (!strcmp(c->servers[i].host, s->redirect.host) &&
		    !strcmp(c->servers[i].port, s->redirect.port)) {
			s->server = i;
			return;
		}
	}
	s->redirected = true;
}

static void on_frame(struct sl_cluster_sync *c, struct session *s,
		     const struct sl_msg *m, uint64_t now)
{
	uint8_t buf[SL_PROTO_HDR_LEN + SL_PROTO_SEAL_LEN];
	size_t n;
	int err;

	if (m->type == SL_MSG_REDIRECT &&
	    (s->st == SESS_AUTH || s->st == SESS_READY)) {
		if (term_ok(c, s, m->redirect.term, false, now))
			on_redirect(c, s, m, now);
		return;
	}
	if (m->type == SL_MSG_ERROR) {
		if (m->error.code == SL_ERR_AUTH && s->st == SESS_AUTH)
			s->key_tries++;
		sess_fail(c, s, now, false, "error from the server: %s",
			  sl_proto_err_str(m->error.code));
		return;
	}
	switch (s->st) {
	case SESS_HELLO:
		if (m->type != SL_MSG_CHALLENGE)
			break;
		err = sess_keys(c, s, m);
		if (err == -ENOKEY) {
			sess_fail(c, s, now, false,
				  "no secret for the namespace in --secrets");
			return;
		}
		if (err ||
		    sl_proto_put_auth(buf, sizeof(buf), ++s->req_id, &n) ||
		    sl_proto_seal(&s->keys, buf, sizeof(buf), &n) ||
		    sess_queue(s, buf, n)) {
			sess_fail(c, s, now, false, "cannot answer CHALLENGE");
			return;
		}
		s->st = SESS_AUTH;
		return;
	case SESS_AUTH:
		if (m->type != SL_MSG_AUTH_OK)
			break;
		if (!term_ok(c, s, m->auth_ok.term, true, now))
			return;
		s->ttl_ms = m->auth_ok.ttl_ms;
		if (m->auth_ok.sync_ms)
			s->sync_ms = m->auth_ok.sync_ms;
		s->st = SESS_READY;
		s->next_sync_ns = now;
		pr_info("cluster: namespace %s: token server %s:%s, term "
			"%llu, sync every %u ms, lease %u ms", s->ns,
			sess_server(c, s)->host, sess_server(c, s)->port,
			(unsigned long long)s->term, s->sync_ms, s->ttl_ms);
		return;
	case SESS_READY:
		if (m->type != SL_MSG_GRANTS)
			break;
		if (term_ok(c, s, m->grants.term, true, now))
			on_grants(c, s, m, now);
		return;
	default:
		break;
	}
	sess_fail(c, s, now, false, "unexpected message type %u", m->type);
}

static void sess_read(struct sl_cluster_sync *c, struct session *s, uint64_t now)
{
	for (;;) {
		ssize_t r = read(s->fd, s->in + s->in_len,
				 SL_PROTO_MAX_FRAME - s->in_len);
		size_t off = 0;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			sess_fail(c, s, now, false, "%s",
				  r ? strerror(errno) : "connection closed");
			return;
		}
		s->in_len += r;
		while (s->st != SESS_IDLE) {
			struct sl_msg m;
			uint32_t len;
			int err = sl_proto_frame_len(s->in + off,
						     s->in_len - off, &len);

			if (err == -EAGAIN || (!err && len > s->in_len - off))
				break;
			if (!err)
				err = sl_proto_decode(s->in + off, len, &m);
			if (err == -EPERM) {
				s->refused[SL_REFUSED_UNSEALED]++;
				sess_fail(c, s, now, false, "refused: a frame "
					  "without a seal");
				return;
			}
			if (err) {
				sess_fail(c, s, now, false, "bad frame: %s",
					  strerror(-err));
				return;
			}
			if (!sess_open(c, s, s->in + off, len, &m, now))
				return;
			on_frame(c, s, &m, now);
			off += len;
		}
		if (s->st == SESS_IDLE)
			return;
		memmove(s->in, s->in + off, s->in_len - off);
		s->in_len -= off;
	}
}

/* Timers of one session; returns when it next needs attention. */
static uint64_t sess_drive(struct sl_cluster_sync *c, struct session *s,
			   uint64_t now)
{
	switch (s->st) {
	case SESS_IDLE:
		if (now < s->retry_ns)
			return s->retry_ns;
		sess_connect(c, s, now);
		return s->st == SESS_IDLE ? s->retry_ns : s->deadline_ns;
	case SESS_RESOLVING:
		return sess_resolving(c, s, now);
	case SESS_CONNECTING:
	case SESS_HELLO:
	case SESS_AUTH:
		if (now >= s->deadline_ns) {
			sess_fail(c, s, now, false, "%s timed out",
				  s->st == SESS_CONNECTING ? "connect"
							   : "handshake");
			return s->retry_ns;
		}
		return s->deadline_ns;
	case SESS_READY:
		if (now >= s->next_sync_ns)
			send_sync(c, s, now);
		return s->st == SESS_READY ? s->next_sync_ns : s->retry_ns;
	}
	return now;
}

static void *run(void *arg)
{
	struct sl_cluster_sync *c = arg;
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	while (!c->stop) {
		struct sl_lease_cfg lc = { .miss_limit = c->cfg.miss_limit,
					   .good_needed = c->cfg.good_needed };
		uint64_t now, next;
		size_t n = 0;
		int timeout;

		pthread_mutex_lock(c->dp_lock);
		pthread_mutex_lock(&c->lock);
		now = sl_now_ns();
		next = now + 50 * NSEC_PER_MSEC;
		reap_abandoned(c);
		if (cap < c->n_sess + 1) {
			free(pfd);
			cap = c->n_sess + 1;
			pfd = calloc(cap, sizeof(*pfd));
			if (!pfd)
				cap = 0;
		}
		for (size_t i = 0; i < c->n_sess && cap; i++) {
			struct session *s = &c->sess[i];
			uint64_t t = sess_drive(c, s, now);

			if (s->fd >= 0 && s->out_len &&
			    sess_flush(s))
				sess_fail(c, s, now, false, "send: %s",
					  strerror(errno));
			if (t < next)
				next = t;
			if (s->fd < 0)
				continue;
			pfd[n].fd = s->fd;
			pfd[n].events = POLLIN;
			if (s->st == SESS_CONNECTING || s->out_len)
				pfd[n].events |= POLLOUT;
			n++;
		}
		for (size_t i = 0; i < c->n_flows; i++) {
			lc.sync_ms = c->sess[c->flows[i].sess].sync_ms;
			sl_lease_tick(&c->flows[i].l, &c->flows[i].r, c->node,
				      &lc, now);
		}
		write_limits(c, now);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(c->dp_lock);

		if (!cap) {
			usleep(10000);
			continue;
		}
		pfd[n].fd = c->wake_fd;
		pfd[n].events = POLLIN;
		now = sl_now_ns();
		timeout = next > now ? (next - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC
				     : 0;
		if (poll(pfd, n + 1, timeout) <= 0)
			continue;

		pthread_mutex_lock(c->dp_lock);
		pthread_mutex_lock(&c->lock);
		now = sl_now_ns();
		for (size_t i = 0; i < n; i++) {
			struct session *s = NULL;

			for (size_t j = 0; j < c->n_sess; j++)
				if (c->sess[j].fd == pfd[i].fd)
					s = &c->sess[j];
			if (!s || !pfd[i].revents)
				continue;
			if (s->st == SESS_CONNECTING &&
			    (pfd[i].revents & (POLLOUT | POLLERR | POLLHUP)))
				sess_hello(c, s, now);
			if (s->st != SESS_IDLE &&
			    (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)))
				sess_read(c, s, now);
		}
		write_limits(c, now);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(c->dp_lock);
		if (pfd[n].revents) {
			uint64_t v;

			if (read(c->wake_fd, &v, sizeof(v)) < 0)
				continue;
		}
	}
	free(pfd);
	return NULL;
}

int sl_cluster_start(struct sl_cluster_sync *c)
{
	int err = pthread_create(&c->thread, NULL, run, c);

	if (err)
		return -err;
	c->running = true;
	return 0;
}

/* ---- what the CLI sees ---- */

static void add_u64(cJSON *o, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	cJSON_AddRawToObject(o, name, buf);
}

static void add_time(cJSON *o, const char *name, uint64_t mono, uint64_t now)
{
	char buf[SL_UTC_MS_LEN + 1];

	sl_format_mono(mono, now, buf);
	cJSON_AddStringToObject(o, name, buf);
}

static const char *sess_state_str(enum sess_state s)
{
	static const char *const names[] = {
		[SESS_IDLE] = "retrying",     [SESS_RESOLVING] = "resolving",
		[SESS_CONNECTING] = "connecting",
		[SESS_HELLO] = "handshake",   [SESS_AUTH] = "handshake",
		[SESS_READY] = "ready",
	};

	return names[s];
}

/* HOST:PORT, [HOST]:PORT for an IPv6 address. */
static void server_str(const struct sl_cluster_server *sv, char *buf,
		       size_t len)
{
	snprintf(buf, len, strchr(sv->host, ':') ? "[%s]:%s" : "%s:%s",
		 sv->host, sv->port);
}

/* The server a session syncs with, null while it has none. */
static void add_token_server(cJSON *e, const struct sl_cluster_sync *c,
			     const struct session *s)
{
	char buf[300];

	if (s->st != SESS_READY) {
		cJSON_AddNullToObject(e, "token_server");
		return;
	}
	server_str(sess_server(c, s), buf, sizeof(buf));
	cJSON_AddStringToObject(e, "token_server", buf);
}

cJSON *sl_cluster_status(struct sl_cluster_sync *c)
{
	cJSON *o = cJSON_CreateObject(), *a, *fl, *ss;
	uint64_t now = sl_now_ns();
	char buf[300];

	if (!o)
		return NULL;
	pthread_mutex_lock(&c->lock);
	cJSON_AddStringToObject(o, "node_id", c->node);
	a = cJSON_AddArrayToObject(o, "token_servers");
	for (size_t i = 0; i < c->n_servers; i++) {
		server_str(&c->servers[i], buf, sizeof(buf));
		cJSON_AddItemToArray(a, cJSON_CreateString(buf));
	}
	ss = cJSON_AddArrayToObject(o, "sessions");
	fl = cJSON_AddArrayToObject(o, "flows");
	for (size_t i = 0; i < c->n_sess; i++) {
		struct session *s = &c->sess[i];
		cJSON *e = cJSON_CreateObject();

		cJSON_AddStringToObject(e, "namespace", s->ns);
		cJSON_AddStringToObject(e, "state", sess_state_str(s->st));
		add_token_server(e, c, s);
		add_u64(e, "sync_ms", s->sync_ms);
		add_u64(e, "failures", s->failures);
		add_u64(e, "term", s->term);
		cJSON_AddStringToObject(e, "last_error", s->last_error);
		cJSON_AddItemToArray(ss, e);
	}
	for (size_t i = 0; i < c->n_flows; i++) {
		struct flow *f = &c->flows[i];
		struct session *s = &c->sess[f->sess];
		bool leased = f->l.state == SL_LEASE_CLUSTER;
		cJSON *e = cJSON_CreateObject();

		cJSON_AddStringToObject(e, "name", f->rule);
		cJSON_AddStringToObject(e, "namespace", f->r.cluster.ns);
		add_u64(e, "flow_id", f->r.cluster.flow_id);
		cJSON_AddStringToObject(e, "threshold_type",
					sl_threshold_str(f->r.cluster.threshold));
		cJSON_AddStringToObject(e, "fallback",
					sl_fallback_str(f->r.cluster.fallback));
		cJSON_AddStringToObject(e, "state",
					sl_lease_state_str(f->l.state));
		add_time(e, "since", f->l.since_ns, now);
		add_u64(e, "since_ms_ago", (now - f->l.since_ns) / NSEC_PER_MSEC);
		add_u64(e, "limit", f->l.limit);
		add_u64(e, "grant", f->l.grant);
		add_u64(e, "lease_expires_in_ms",
			leased && f->l.lease_end_ns > now
				? (f->l.lease_end_ns - now) / NSEC_PER_MSEC
				: 0);
		add_token_server(e, c, s);
		add_u64(e, "last_sync_rtt_us", s->rtt_us);
		add_u64(e, "holders", f->l.holders);
		add_u64(e, "demand", f->demand);
		add_u64(e, "used", f->used);
		add_u64(e, "good_syncs", f->l.good);
		cJSON_AddItemToArray(fl, e);
	}
	pthread_mutex_unlock(&c->lock);
	return o;
}

void sl_cluster_set_secrets(struct sl_cluster_sync *c,
			    const struct sl_secrets *secrets)
{
	pthread_mutex_lock(&c->lock);
	c->cfg.secrets = secrets;
	pthread_mutex_unlock(&c->lock);
}

bool sl_cluster_rule_state(struct sl_cluster_sync *c, const char *rule,
			   enum sl_lease_state *state)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_flows && !found; i++)
		if (!strcmp(c->flows[i].rule, rule)) {
			*state = c->flows[i].l.state;
			found = true;
		}
	pthread_mutex_unlock(&c->lock);
	return found;
}

void sl_cluster_info(struct sl_cluster_sync *c,
		     struct sl_cluster_flow_info *flows,
		     struct sl_cluster_session_info *sess, size_t max,
		     size_t *n_flows, size_t *n_sess)
{
	uint64_t now = sl_now_ns();

	pthread_mutex_lock(&c->lock);
	*n_flows = c->n_flows < max ? c->n_flows : max;
	*n_sess = c->n_sess < max ? c->n_sess : max;
	for (size_t i = 0; i < *n_flows; i++) {
		const struct flow *f = &c->flows[i];
		bool leased = f->l.state == SL_LEASE_CLUSTER &&
			      f->l.lease_end_ns > now;

		flows[i] = (struct sl_cluster_flow_info){
			.rule = f->idx,
			.state = f->l.state,
			.lease_left_ns = leased ? f->l.lease_end_ns - now : 0,
			.holders = f->l.holders,
		};
	}
	for (size_t i = 0; i < *n_sess; i++) {
		const struct session *s = &c->sess[i];
		struct sl_cluster_session_info *o = &sess[i];

		memcpy(o->ns, s->ns, sizeof(o->ns));
		o->syncing = s->st == SESS_READY;
		o->server = s->server;
		o->failures = s->failures;
		o->term = s->term;
		memcpy(o->refused, s->refused, sizeof(o->refused));
		o->sync_rtt = s->sync_rtt;
	}
	pthread_mutex_unlock(&c->lock);
}

size_t sl_cluster_n_servers(const struct sl_cluster_sync *c)
{
	return c->n_servers;
}

void sl_cluster_server_name(const struct sl_cluster_sync *c, size_t i,
			    char *buf, size_t len)
{
	server_str(&c->servers[i], buf, len);
}

void sl_cluster_free(struct sl_cluster_sync *c)
{
	uint64_t one = 1;

	if (!c)
		return;
	if (c->running) {
		c->stop = true;
		if (write(c->wake_fd, &one, sizeof(one)) < 0)
			pr_warn("cluster: cannot wake the sync thread");
		pthread_join(c->thread, NULL);
	}
	c->dp->first_limit = NULL;
	for (size_t i = 0; i < c->n_sess; i++) {
		sess_close(c, &c->sess[i]);
		sess_free(&c->sess[i]);
	}
	free(c->sess);
	/* a lookup glibc still runs is left to the exit */
	reap_abandoned(c);
	for (size_t i = 0; i < c->n_flows; i++)
		sl_rule_release(&c->flows[i].r);
	free(c->flows);
	free(c->reports);
	close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
