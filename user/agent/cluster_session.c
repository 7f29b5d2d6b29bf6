// SPDX-License-Identifier: GPL-2.0
/*
 * A session of the cluster sync with a token server: the name resolved
 * off the locks, the non-blocking connect, HELLO/CHALLENGE/AUTH, a SYNC
 * per period and the grants it brings, and a replica's REDIRECT and
 * terms (docs/cluster.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_int.h"
#include "log.h"
#include "util.h"

/* ---- the sessions ---- */

/* Where the session connects: the leader a follower named, else the list. */
const struct sl_cluster_server *
cluster_sess_server(const struct sl_cluster_sync *c, const struct session *s)
{
	return s->redirected ? &s->redirect : &c->servers[s->server];
}

void cluster_sess_fail(struct sl_cluster_sync *c, struct session *s,
		       uint64_t now, bool at_once, const char *fmt, ...)
{
	const struct sl_cluster_server *sv = cluster_sess_server(c, s);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
	va_end(ap);
	pr_warn("cluster: namespace %s, token server %s:%s: %s", s->ns,
		sv->host, sv->port, s->last_error);
	cluster_sess_close(c, s);
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
		s->retry_ns =
		    now + sl_backoff_ms(c->cfg.backoff_min_ms,
					c->cfg.backoff_max_ms, s->failures,
					cluster_next_rand(c)) *
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

int cluster_sess_flush(struct session *s)
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
		cluster_sess_fail(c, s, now, false,
				  "not a loopback address: a "
				  "session with it needs --secrets");
		return;
	}
	s->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
					      SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		cluster_sess_fail(c, s, now, false, "socket: %s",
				  strerror(errno));
		return;
	}
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s->fd, ai->ai_addr, ai->ai_addrlen) &&
	    errno != EINPROGRESS) {
		cluster_sess_fail(c, s, now, false, "connect: %s",
				  strerror(errno));
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
	const struct sl_cluster_server *sv = cluster_sess_server(c, s);
	struct sigevent none = { .sigev_notify = SIGEV_NONE };
	struct addrinfo *ai = cluster_numeric_addr(sv);
	struct resolve *r;
	int ret;

	if (ai) {
		sess_dial(c, s, ai, now);
		freeaddrinfo(ai);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		cluster_sess_fail(c, s, now, false,
				  "cannot resolve: out of memory");
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
		cluster_sess_fail(c, s, now, false, "cannot resolve: %s",
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
		cluster_sess_fail(c, s, now, false,
				  "cannot resolve: no answer in "
				  "%u ms",
				  c->cfg.resolve_ms);
	} else if (ret) {
		cluster_sess_fail(c, s, now, false, "cannot resolve: %s",
				  gai_strerror(ret));
	} else {
		struct resolve *r = s->res;

		s->res = NULL;
		sess_dial(c, s, r->cb.ar_result, now);
		cluster_resolve_free(r);
	}
	return s->st == SESS_IDLE ? s->retry_ns : s->deadline_ns;
}

void cluster_sess_hello(struct sl_cluster_sync *c, struct session *s,
			uint64_t now)
{
	uint8_t buf[SL_PROTO_HDR_LEN + 2 + 2 * SL_PROTO_NAME_MAX +
		    SL_PROTO_NONCE_LEN];
	socklen_t len = sizeof(int);
	size_t n;
	int soerr = 0;

	getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
	if (soerr) {
		cluster_sess_fail(c, s, now, false, "connect: %s",
				  strerror(soerr));
		return;
	}
	if (sl_proto_nonce(s->nonce) ||
	    sl_proto_put_hello(buf, sizeof(buf), ++s->req_id, s->ns, c->node,
			       s->nonce, &n) ||
	    sess_queue(s, buf, n)) {
		cluster_sess_fail(c, s, now, false, "cannot encode HELLO");
		return;
	}
	s->st = SESS_HELLO;
	s->deadline_ns = now + c->cfg.handshake_ms * NSEC_PER_MSEC;
}

static void send_sync(struct sl_cluster_sync *c, struct session *s,
		      uint64_t now)
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
			cluster_sess_fail(c, s, now, false,
					  "%u syncs unanswered",
					  c->cfg.miss_limit);
			return;
		}
	}
	for (size_t i = 0; i < c->n_flows && n < SL_PROTO_MAX_REPORTS; i++) {
		struct flow *f = &c->flows[i];

		if (&c->sess[f->sess] != s)
			continue;
		cluster_measure(c, f);
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
		cluster_sess_fail(c, s, now, true, "the server drains");
		return;
	}
	if (!answer)
		return; /* late, or unasked: nothing to apply */
	refused = out_of_bounds(c, s, m, why, sizeof(why));
	if (refused >= 0) {
		/* nothing of it applied; the leases run out as if unanswered */
		s->refused[refused]++;
		cluster_sess_fail(c, s, now, false, "refused: %s", why);
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
	cluster_sess_fail(c, s, now, false, "refused: %s", why[reason]);
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
			cluster_sess_fail(
			    c, s, now, false,
			    "refused: an answer of "
			    "term %llu, older than term %llu seen (a "
			    "deposed leader)",
			    (unsigned long long) term,
			    (unsigned long long) s->term);
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
		cluster_sess_fail(c, s, now, false,
				  "not the leader, and no leader "
				  "known (term %llu)",
				  (unsigned long long) m->redirect.term);
		return;
	}
	cluster_sess_fail(c, s, now, s->redirects++ == 0,
			  "not the leader: the "
			  "leader is %.*s (term %llu)",
			  (int) m->redirect.addr_len, m->redirect.addr,
			  (unsigned long long) m->redirect.term);
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
		cluster_sess_fail(c, s, now, false, "error from the server: %s",
				  sl_proto_err_str(m->error.code));
		return;
	}
	switch (s->st) {
	case SESS_HELLO:
		if (m->type != SL_MSG_CHALLENGE)
			break;
		err = sess_keys(c, s, m);
		if (err == -ENOKEY) {
			cluster_sess_fail(
			    c, s, now, false,
			    "no secret for the namespace in --secrets");
			return;
		}
		if (err ||
		    sl_proto_put_auth(buf, sizeof(buf), ++s->req_id, &n) ||
		    sl_proto_seal(&s->keys, buf, sizeof(buf), &n) ||
		    sess_queue(s, buf, n)) {
			cluster_sess_fail(c, s, now, false,
					  "cannot answer CHALLENGE");
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
			"%llu, sync every %u ms, lease %u ms",
			s->ns, cluster_sess_server(c, s)->host,
			cluster_sess_server(c, s)->port,
			(unsigned long long) s->term, s->sync_ms, s->ttl_ms);
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
	cluster_sess_fail(c, s, now, false, "unexpected message type %u",
			  m->type);
}

void cluster_sess_read(struct sl_cluster_sync *c, struct session *s,
		       uint64_t now)
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
			cluster_sess_fail(c, s, now, false, "%s",
					  r ? strerror(errno)
					    : "connection closed");
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
				cluster_sess_fail(c, s, now, false,
						  "refused: a frame "
						  "without a seal");
				return;
			}
			if (err) {
				cluster_sess_fail(c, s, now, false,
						  "bad frame: %s",
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
uint64_t cluster_sess_drive(struct sl_cluster_sync *c, struct session *s,
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
			cluster_sess_fail(
			    c, s, now, false, "%s timed out",
			    s->st == SESS_CONNECTING ? "connect" : "handshake");
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
