// SPDX-License-Identifier: GPL-2.0
/*
 * The token server: one thread, epoll, non-blocking sockets. Every flow
 * keeps its live lease holders; the sum of their unexpired grants never
 * exceeds count (docs/cluster.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lease.h"
#include "log.h"
#include "proto.h"
#include "quota.h"
#include "tokensrv.h"
#include "util.h"

#define IN_INIT	     4096
#define EVENTS	     256
#define ACCEPT_BURST 64
#define NO_POS	     UINT32_MAX

enum conn_state {
	CONN_HELLO,   /* waiting for HELLO */
	CONN_AUTH,    /* CHALLENGE sent, waiting for AUTH */
	CONN_READY,   /* authenticated: SYNCs */
	CONN_CLOSING, /* flushing a final ERROR or DRAIN, reading nothing */
};

struct holder {
	uint64_t need;	  /* the last demand and its headroom (sl_quota_need) */
	uint64_t grant;	  /* counted in the flow's outstanding while live */
	uint64_t expires; /* ms; the lease ends here */
	uint32_t live_pos; /* index in flow->live, NO_POS if not live */
	uint32_t told;	   /* holders in its last answer (its share's H) */
	/* Vanished (its lease ran out unrenewed): its host may enforce
	 * its fallback from then on, so that much stays reserved. */
	uint64_t reserved;
	uint64_t forget_at; /* ms; the reservation ends */
	uint32_t gone_pos;  /* index in flow->gone, NO_POS if not vanished */
};

/* Node numbers in no order; each member knows its index. */
struct node_set {
	uint32_t *node;
	uint32_t n, cap;
};

struct flow {
	uint32_t id;
	uint64_t count;
	const struct sl_cluster *cl;
	const struct sl_rule *rule;
	struct holder *h; /* indexed by node number of the namespace */
	uint32_t h_cap;
	struct node_set live; /* holders with a lease */
	struct node_set gone; /* vanished holders with a reservation */
	uint64_t outstanding; /* sum of live holders' grants */
	uint64_t reserved;    /* sum of vanished holders' reservations */
	struct sl_quota_level level;
	uint64_t level_at;
	bool have_level, dirty;
	uint64_t warm_start; /* ms; the warm-up ramp runs from here */
	bool warm;	     /* ramped up, or found busy after a restart */
};

struct conn;

struct ns {
	char name[SL_NAME_MAX + 1];
	const struct sl_secret *secret;
	struct flow *flows; /* sorted by id */
	uint32_t n_flows;
	char (*nodes)[SL_PROTO_NAME_MAX + 1];
	struct conn **node_conn;
	uint32_t n_nodes, nodes_cap;
	double tokens; /* SYNC frames the namespace may still send */
	uint64_t tokens_at;
};

struct conn {
	int fd;
	enum conn_state state;
	struct ns *ns; /* NULL until HELLO names a known namespace */
	char ns_name[SL_PROTO_NAME_MAX + 1]; /* as HELLO named it */
	uint8_t ns_len;
	uint32_t node;
	char node_name[SL_PROTO_NAME_MAX + 1];
	uint8_t node_len;
	uint8_t nonce[SL_PROTO_NONCE_LEN];	   /* ours, in the CHALLENGE */
	uint8_t peer_nonce[SL_PROTO_NONCE_LEN];	   /* the client's, in HELLO */
	struct sl_proto_session keys;
	bool keyed; /* AUTH opened: every frame from here on is sealed */
	uint64_t holds_until; /* ms; its node id is its own until then */
	uint64_t deadline; /* handshake or closing deadline, ms */
	uint8_t *in, *out;
	size_t in_len, in_cap, out_off, out_len, out_cap;
	bool dead; /* closed; freed after the event batch that saw it */
	bool session; /* authenticated: counted against max_conns */
	struct conn *prev, *next;
	struct conn *hs_prev, *hs_next; /* handshakes, oldest first */
};

struct sl_tokend {
	struct sl_tokend_cfg cfg;
	const struct sl_secrets *secrets; /* the last set, NULL: no auth */
	int lfd, epfd, ctl[2];
	uint16_t port;
	bool auth;
	/* what an unknown namespace's AUTH is checked against: as much work
	 * as a wrong secret, so its ERROR AUTH takes as long */
	uint8_t dummy_secret[SL_PROTO_NONCE_LEN];
	bool draining, stopping;
	uint64_t start, last_sweep;
	struct ns *ns;
	uint32_t n_ns;
	struct conn *conns; /* list head */
	struct conn *dead;  /* closed, to free after the event batch */
	struct conn *hs_old, *hs_new; /* handshakes in accept order */
	int spare_fd; /* given up to accept and close when out of fds */
	uint64_t accept_paused_until, fd_logged_at;
	uint64_t *scratch, *needs; /* water filling */
	size_t scratch_cap;
	struct sl_flow_grant *grants; /* one SYNC's answer */
	struct sl_tokend_stats st;
	struct sl_tokend_role role;  /* set by sl_tokend_set_role() */
	struct sl_tokend_role acted; /* the role the loop last acted on */
	/* held while an event batch runs: the metrics copy between two */
	pthread_mutex_t lock;
};

void sl_tokend_cfg_default(struct sl_tokend_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ttl_ms = SL_TOKEND_TTL_MS;
	cfg->sync_ms = SL_TOKEND_SYNC_MS;
	cfg->learn_ms = SL_TOKEND_TTL_MS;
	cfg->max_conns = SL_TOKEND_MAX_CONNS;
	cfg->max_handshakes = SL_TOKEND_MAX_HANDSHAKES;
	cfg->ns_rate = SL_TOKEND_NS_RATE;
	cfg->out_max = SL_TOKEND_OUT_MAX;
	cfg->handshake_ms = SL_TOKEND_HANDSHAKE_MS;
	cfg->rebalance_ms = SL_TOKEND_REBALANCE_MS;
	cfg->max_nodes = SL_TOKEND_MAX_NODES;
	cfg->forget_ms = SL_TOKEND_FORGET_MS;
}

/* ---- flows and leases ---- */

static struct flow *find_flow(struct ns *ns, uint32_t id)
{
	uint32_t lo = 0, hi = ns->n_flows;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ns->flows[mid].id == id)
			return &ns->flows[mid];
		if (ns->flows[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct holder *get_holder(struct flow *f, uint32_t node)
{
	if (node >= f->h_cap) {
		uint32_t cap = f->h_cap ? f->h_cap : 16;
		struct holder *h;

		while (cap <= node)
			cap *= 2;
		h = realloc(f->h, cap * sizeof(*h));
		if (!h)
			return NULL;
		for (uint32_t i = f->h_cap; i < cap; i++)
			h[i] = (struct holder){.live_pos = NO_POS,
						.gone_pos = NO_POS};
		f->h = h;
		f->h_cap = cap;
	}
	return &f->h[node];
}

/* The index of node in s, or -ENOMEM. */
static int set_add(struct node_set *s, uint32_t node)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 16;
		uint32_t *v = realloc(s->node, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->node = v;
		s->cap = cap;
	}
	s->node[s->n] = node;
	return s->n++;
}

/* Removes the member at pos; the node moved into pos, or NO_POS. */
static uint32_t set_del(struct node_set *s, uint32_t pos)
{
	uint32_t last = s->node[--s->n];

	if (pos == s->n)
		return NO_POS;
	s->node[pos] = last;
	return last;
}

static int make_live(struct flow *f, struct holder *h, uint32_t node)
{
	int pos = set_add(&f->live, node);

	if (pos < 0)
		return pos;
	h->live_pos = pos;
	h->grant = 0;
	f->dirty = true;
	return 0;
}

static void drop_live(struct flow *f, struct holder *h)
{
	uint32_t moved = set_del(&f->live, h->live_pos);

	if (moved != NO_POS)
		f->h[moved].live_pos = h->live_pos;
	f->outstanding -= h->grant;
	h->grant = 0;
	h->live_pos = NO_POS;
	f->dirty = true;
	if (!f->live.n)
		f->warm = false; /* idle: the next holder ramps it again */
}

static void drop_gone(struct flow *f, struct holder *h)
{
	uint32_t moved = set_del(&f->gone, h->gone_pos);

	if (moved != NO_POS)
		f->h[moved].gone_pos = h->gone_pos;
	f->reserved -= h->reserved;
	h->reserved = 0;
	h->gone_pos = NO_POS;
	f->dirty = true;
}

/*
 * What a vanished holder's host may admit from now on: the fallback its
 * agent wrote beside the lease (sl_lease_fallback(), the same function),
 * for a global flow whose fallback bounds it. The others' grants leave
 * that much of count free, so the cluster keeps count while that host
 * may still be up without an agent, or partitioned.
 */
static uint64_t vanished_reserve(const struct flow *f, const char *node,
				 const struct holder *h)
{
	struct sl_lease last = {
		.last_lease = h->grant,
		.has_last_lease = true,
	};
	uint64_t fb;

	if (f->cl->threshold != SL_THRESH_GLOBAL)
		return 0; /* bounded per node already */
	switch (f->cl->fallback) {
	case SL_FB_FULL:
	case SL_FB_PASS:
		return 0; /* unbounded by the rule's choice */
	default:
		fb = sl_lease_fallback(f->rule, node, h->told, &last);
		return fb < f->count ? fb : f->count;
	}
}

/* A live holder's lease ran out: it keeps its reservation for forget_ms. */
static void vanish(struct sl_tokend *td, struct ns *ns, struct flow *f,
		   uint32_t node, uint64_t now)
{
	struct holder *h = &f->h[node];
	uint64_t reserve = vanished_reserve(f, ns->nodes[node], h);
	uint64_t cap = sl_mul_div(f->count, SL_TOKEND_RESERVE_PCT, 100);
	int pos;

	drop_live(f, h);
	if (f->gone.n >= SL_TOKEND_MAX_VANISHED || f->reserved >= cap)
		return;
	if (reserve > cap - f->reserved)
		reserve = cap - f->reserved;
	if (!reserve || !td->cfg.forget_ms)
		return;
	pos = set_add(&f->gone, node);
	if (pos < 0)
		return; /* out of memory: the others may take its share */
	h->gone_pos = pos;
	h->reserved = reserve;
	h->forget_at = now + td->cfg.forget_ms;
	f->reserved += reserve;
}

/* Leases that ended become reservations; reservations that ended go. */
static void expire_flow(struct sl_tokend *td, struct ns *ns, struct flow *f,
			uint64_t now)
{
	uint32_t i = 0;

	while (i < f->live.n) {
		uint32_t node = f->live.node[i];

		if (f->h[node].expires <= now)
			vanish(td, ns, f, node, now); /* moves another to i */
		else
			i++;
	}
	i = 0;
	while (i < f->gone.n) {
		struct holder *h = &f->h[f->gone.node[i]];

		if (h->forget_at <= now)
			drop_gone(f, h);
		else
			i++;
	}
}

/* Forget every holder and reservation: a drain, or a new term. */
static void forget_flow(struct flow *f)
{
	while (f->live.n)
		drop_live(f, &f->h[f->live.node[0]]);
	while (f->gone.n)
		drop_gone(f, &f->h[f->gone.node[0]]);
}

/*
 * The flow's count now: a rule with warm_up ramps it from count /
 * cold_factor to count over warm_period_s, like the data plane's ramp,
 * from the first grant to a cold flow (one without live holders). A host
 * joining a warm flow takes its share of the warm count; a flow whose
 * leases all expired is cold again. After a restart, a holding reported
 * in the learn period shows the flow was warm.
 */
static uint64_t flow_count(struct flow *f, uint64_t now)
{
	const struct sl_rule *r = f->rule;
	uint64_t period = (uint64_t)r->warm_period_s * 1000, cold, elapsed;

	if (f->warm || !r->warm_up || !r->cold_factor || !period)
		return f->count;
	if (!f->warm_start)
		f->warm_start = now;
	elapsed = now - f->warm_start;
	if (elapsed >= period) {
		f->warm = true;
		f->warm_start = 0;
		return f->count;
	}
	cold = f->count / r->cold_factor;
	f->dirty = true; /* the level follows the ramp */
	return cold + sl_mul_div(f->count - cold, elapsed, period);
}

static int rebalance(struct sl_tokend *td, struct flow *f, uint64_t now)
{
	uint32_t i;

	uint64_t count = flow_count(f, now);

	if (f->live.n > td->scratch_cap) {
		size_t cap = 2 * f->live.n;
		uint64_t *s = realloc(td->scratch, cap * sizeof(*s));
		uint64_t *d = s ? realloc(td->needs, cap * sizeof(*d)) : NULL;

		if (s)
			td->scratch = s;
		if (!d)
			return -ENOMEM;
		td->needs = d;
		td->scratch_cap = cap;
	}
	for (i = 0; i < f->live.n; i++)
		td->needs[i] = f->h[f->live.node[i]].need;
	count = count > f->reserved ? count - f->reserved : 0;
	sl_quota_global_level(count, td->needs, f->live.n,
			      td->scratch, &f->level);
	f->have_level = true;
	f->dirty = false;
	f->level_at = now;
	return 0;
}

/* The answer for one flow of one SYNC; the lease starts now. */
static int grant_flow(struct sl_tokend *td, struct conn *c, struct flow *f,
		      const struct sl_flow_report *r, uint64_t now,
		      struct sl_flow_grant *g)
{
	struct holder *h = get_holder(f, c->node);
	uint64_t others, want, count, need;
	bool learning;
	int ret;

	if (!h)
		return -ENOMEM;
	if (h->live_pos != NO_POS && h->expires <= now)
		drop_live(f, h);
	if (h->gone_pos != NO_POS)
		drop_gone(f, h); /* back: its answer replaces the reservation */
	if (h->live_pos == NO_POS) {
		ret = make_live(f, h, c->node);
		if (ret)
			return ret;
	}
	need = sl_quota_need(r->demand);
	if (h->need != need)
		f->dirty = true;
	h->need = need;
	others = f->outstanding - h->grant;
	g->flags = 0;
	learning = now < td->start + td->cfg.learn_ms;
	if (learning && r->held)
		f->warm = true;
	count = learning ? f->count : flow_count(f, now);

	switch (f->cl->threshold) {
	case SL_THRESH_GLOBAL:
		if (learning) {
			/* Unknown holders may still hold the last server's
			 * leases: renew what the client holds, no more. */
			want = r->held;
			g->flags = SL_GRANT_KEEP | SL_GRANT_LEARNING;
		} else {
			if (!f->have_level ||
			    (f->dirty &&
			     now - f->level_at >= td->cfg.rebalance_ms)) {
				ret = rebalance(td, f, now);
				if (ret)
					return ret;
			}
			want = sl_quota_grant(&f->level, h->need);
		}
		/* vanished holders' fallbacks count as granted */
		want = sl_quota_cap(count, others + f->reserved, want);
		break;
	case SL_THRESH_AVG_LOCAL:
		want = count;
		break;
	default:
		/* a ramp scales every quota alike */
		want = sl_mul_div(sl_cluster_quota(f->cl, c->node_name),
				  count, f->count);
		break;
	}
	f->outstanding = others + want;
	h->grant = want;
	h->expires = now + td->cfg.ttl_ms;
	g->grant = want;
	g->ttl_ms = td->cfg.ttl_ms;
	g->holders = f->live.n + f->gone.n;
	if (!learning)
		h->told = g->holders;
	return 0;
}

/* ---- connections ---- */

static void hs_add(struct sl_tokend *td, struct conn *c)
{
	c->hs_prev = td->hs_new;
	if (td->hs_new)
		td->hs_new->hs_next = c;
	else
		td->hs_old = c;
	td->hs_new = c;
	td->st.handshakes++;
}

static void hs_del(struct sl_tokend *td, struct conn *c)
{
	if (c->hs_prev)
		c->hs_prev->hs_next = c->hs_next;
	else
		td->hs_old = c->hs_next;
	if (c->hs_next)
		c->hs_next->hs_prev = c->hs_prev;
	else
		td->hs_new = c->hs_prev;
	c->hs_prev = c->hs_next = NULL;
	td->st.handshakes--;
}

/* Close now, free later: the current event batch may still name c. */
static void conn_close(struct sl_tokend *td, struct conn *c)
{
	if (c->dead)
		return;
	if (!c->session)
		hs_del(td, c);
	if (c->ns && c->node < c->ns->n_nodes && c->ns->node_conn[c->node] == c)
		c->ns->node_conn[c->node] = NULL;
	epoll_ctl(td->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	sl_proto_session_clear(&c->keys);
	if (c->prev)
		c->prev->next = c->next;
	else
		td->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->dead = true;
	c->next = td->dead;
	td->dead = c;
	td->st.conns--;
}

static void reap(struct sl_tokend *td)
{
	while (td->dead) {
		struct conn *c = td->dead;

		td->dead = c->next;
		free(c->in);
		free(c->out);
		free(c);
	}
}

/* Room for a frame of n bytes and its seal; -ENOBUFS past the bound (a
 * slow client). */
static int out_reserve(struct sl_tokend *td, struct conn *c, size_t n)
{
	size_t need, cap;
	uint8_t *p;

	n += SL_PROTO_SEAL_LEN;
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	need = c->out_len + n;
	if (need <= c->out_cap)
		return 0;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		need = c->out_len + n;
		if (need <= c->out_cap)
			return 0;
	}
	if (need > td->cfg.out_max)
		return -ENOBUFS;
	cap = c->out_cap ? c->out_cap : IN_INIT;
	while (cap < need)
		cap *= 2;
	if (cap > td->cfg.out_max)
		cap = td->cfg.out_max;
	p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Poll for what c waits for; a closing one with nothing left goes. */
static void conn_update(struct sl_tokend *td, struct conn *c)
{
	struct epoll_event ev = {.data.ptr = c};

	if (c->state == CONN_CLOSING && c->out_off == c->out_len) {
		conn_close(td, c);
		return;
	}
	if (c->state != CONN_CLOSING)
		ev.events |= EPOLLIN;
	if (c->out_len > c->out_off)
		ev.events |= EPOLLOUT;
	epoll_ctl(td->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Write what the socket takes; -errno when the peer is gone. */
static int flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		c->out_off += n;
	}
	return 0;
}

/* The frame of len bytes just written at the end of the output: sealed
 * once the session has keys, then queued. */
static int out_commit(struct conn *c, size_t len)
{
	int ret = 0;

	if (c->keyed)
		ret = sl_proto_seal(&c->keys, c->out + c->out_len,
				    c->out_cap - c->out_len, &len);
	if (!ret)
		c->out_len += len;
	return ret;
}

/* Read nothing more; close once the last frame is written (or at the
 * deadline, if the client does not read it). */
static void closing(struct sl_tokend *td, struct conn *c, uint64_t now)
{
	c->in_len = 0;
	c->state = CONN_CLOSING;
	c->deadline = now + td->cfg.handshake_ms;
}

/* Queue an ERROR and close once it is written: nothing else follows. */
static int fail_conn(struct sl_tokend *td, struct conn *c, uint32_t req,
		     uint16_t code, uint64_t now)
{
	size_t len;

	closing(td, c, now);
	if (out_reserve(td, c, SL_PROTO_HDR_LEN + 4))
		return -ENOBUFS;
	sl_proto_put_error(c->out + c->out_len, c->out_cap - c->out_len, req,
			   code, &len);
	return out_commit(c, len);
}

/* A leader grants until its etcd lease may have run out, not after. */
static bool serving(const struct sl_tokend *td, uint64_t now)
{
	return td->role.leader && (!td->role.until_ms || now < td->role.until_ms);
}

/* Not the leader (or no longer sure to be): say who is, sealed, and close. */
static int redirect_conn(struct sl_tokend *td, struct conn *c, uint32_t req,
			 uint64_t now)
{
	const char *to = td->role.leader ? "" : td->role.leader_addr;
	size_t len;
	int ret;

	closing(td, c, now);
	td->st.redirects++;
	ret = out_reserve(td, c, SL_PROTO_HDR_LEN + 9 + strlen(to));
	if (!ret)
		ret = sl_proto_put_redirect(c->out + c->out_len,
					    c->out_cap - c->out_len, req,
					    td->role.term, to, &len);
	return ret ? ret : out_commit(c, len);
}

static struct ns *find_ns(struct sl_tokend *td, const char *name, size_t n)
{
	for (uint32_t i = 0; i < td->n_ns; i++) {
		if (strlen(td->ns[i].name) == n &&
		    !memcmp(td->ns[i].name, name, n))
			return &td->ns[i];
	}
	return NULL;
}

/* The namespace's number for node, added if new; -ENOSPC past max_nodes. */
static int intern_node(struct sl_tokend *td, struct ns *ns, const char *node)
{
	uint32_t i;

	/* Linear: runs once per authentication, not per SYNC. */
	for (i = 0; i < ns->n_nodes; i++) {
		if (!strcmp(ns->nodes[i], node))
			return i;
	}
	if (ns->n_nodes >= td->cfg.max_nodes)
		return -ENOSPC;
	if (ns->n_nodes == ns->nodes_cap) {
		uint32_t cap = ns->nodes_cap ? 2 * ns->nodes_cap : 64;
		void *n = realloc(ns->nodes, cap * sizeof(*ns->nodes));
		void *cn = n ? realloc(ns->node_conn,
				       cap * sizeof(*ns->node_conn))
			     : NULL;

		if (n)
			ns->nodes = n;
		if (!cn)
			return -ENOMEM;
		ns->node_conn = cn;
		ns->nodes_cap = cap;
	}
	strcpy(ns->nodes[ns->n_nodes], node);
	ns->node_conn[ns->n_nodes] = NULL;
	return ns->n_nodes++;
}

static int put_frame_grants(struct sl_tokend *td, struct conn *c, uint32_t req,
			    uint16_t flags, uint32_t ttl, uint32_t n)
{
	size_t len, need = SL_PROTO_HDR_LEN + SL_PROTO_GRANTS_FIXED +
			   (size_t)n * SL_PROTO_GRANT_LEN;
	int ret = out_reserve(td, c, need);

	if (ret)
		return ret;
	ret = sl_proto_put_grants(c->out + c->out_len, c->out_cap - c->out_len,
				  req, flags, ttl, td->role.term, td->grants, n,
				  &len);
	return ret ? ret : out_commit(c, len);
}

/* Refill the namespace's SYNC budget; false when it is spent. */
static bool ns_admit(struct sl_tokend *td, struct ns *ns, uint64_t now)
{
	double burst = td->cfg.ns_rate / 5.0 + 1;

	if (!td->cfg.ns_rate)
		return true;
	ns->tokens += (now - ns->tokens_at) * (td->cfg.ns_rate / 1000.0);
	ns->tokens_at = now;
	if (ns->tokens > burst)
		ns->tokens = burst;
	if (ns->tokens < 1)
		return false;
	ns->tokens -= 1;
	return true;
}

static int on_sync(struct sl_tokend *td, struct conn *c,
		   const struct sl_msg *m, uint64_t now)
{
	struct sl_flow_report r;
	uint32_t i;
	int ret;

	/* a fresh clock: the process may have been stopped mid-batch */
	if (!serving(td, sl_now_ms()))
		return redirect_conn(td, c, m->req_id, now);
	td->st.syncs++;
	c->holds_until = now + td->cfg.ttl_ms;
	if (td->draining) {
		td->st.drain_replies++;
		return put_frame_grants(td, c, m->req_id, SL_SRV_DRAIN, 0, 0);
	}
	if (!ns_admit(td, c->ns, now)) {
		/* Overloaded: the leases in force stay right; never push
		 * clients into fallback. */
		td->st.keep_replies++;
		return put_frame_grants(td, c, m->req_id, SL_SRV_KEEP,
					td->cfg.ttl_ms, 0);
	}
	for (i = 0; i < m->sync.n; i++) {
		struct sl_flow_grant *g = &td->grants[i];
		struct flow *f;

		sl_proto_report(m, i, &r);
		f = find_flow(c->ns, r.flow_id);
		memset(g, 0, sizeof(*g));
		g->flow_id = r.flow_id;
		if (!f) {
			/* Another namespace's flow looks exactly like this. */
			g->flags = SL_GRANT_UNKNOWN;
			td->st.unknown_flows++;
			continue;
		}
		ret = grant_flow(td, c, f, &r, now, g);
		if (ret)
			return ret;
	}
	td->st.flow_updates += m->sync.n;
	return put_frame_grants(td, c, m->req_id, 0, td->cfg.ttl_ms,
				m->sync.n);
}

static int on_hello(struct sl_tokend *td, struct conn *c,
		    const struct sl_msg *m)
{
	size_t len;
	int ret;

	td->st.hellos++;
	/* Unknown namespaces get a challenge too, and fail at AUTH: the
	 * answer does not tell which namespaces exist. */
	c->ns = find_ns(td, m->hello.ns, m->hello.ns_len);
	memcpy(c->ns_name, m->hello.ns, m->hello.ns_len);
	c->ns_len = m->hello.ns_len;
	memcpy(c->node_name, m->hello.node, m->hello.node_len);
	c->node_name[m->hello.node_len] = '\0';
	c->node_len = m->hello.node_len;
	memcpy(c->peer_nonce, m->hello.nonce, SL_PROTO_NONCE_LEN);
	ret = sl_proto_nonce(c->nonce);
	if (ret)
		return ret;
	ret = out_reserve(td, c, SL_PROTO_HDR_LEN + SL_PROTO_NONCE_LEN);
	if (ret)
		return ret;
	sl_proto_put_challenge(c->out + c->out_len, c->out_cap - c->out_len,
			       m->req_id, c->nonce, &len);
	c->state = CONN_AUTH;
	return out_commit(c, len);
}

/* Keys from a secret (none without --secrets), kept when the AUTH frame
 * opens under them. */
static bool auth_opens(struct conn *c, const void *key, size_t key_len,
		       const void *frame, size_t len, const struct sl_msg *m)
{
	return !sl_proto_session_init(&c->keys, false, key, key_len,
				      c->peer_nonce, c->nonce, c->ns_name,
				      c->ns_len, c->node_name, c->node_len) &&
	       !sl_proto_open(&c->keys, frame, len, m);
}

/*
 * Whether the AUTH frame proves the namespace's secret: during a rotation
 * either one, the newest first. A namespace that is unknown or has no
 * secret derives keys from the dummy secret and checks the MAC all the
 * same, refused whatever it says: the same work as a wrong secret.
 */
static bool auth_check(struct sl_tokend *td, struct conn *c,
		       const void *frame, size_t len, const struct sl_msg *m)
{
	const struct sl_secret *sec = c->ns && td->auth ? c->ns->secret : NULL;

	if (c->ns && !td->auth)
		return auth_opens(c, NULL, 0, frame, len, m);
	for (size_t k = sec ? sec->n_keys : 0; k--;)
		if (auth_opens(c, sec->key[k], sec->len[k], frame, len, m))
			return true;
	if (!sec)
		auth_opens(c, td->dummy_secret, sizeof(td->dummy_secret),
			   frame, len, m);
	return false;
}

static int on_auth(struct sl_tokend *td, struct conn *c, const void *frame,
		   size_t flen, const struct sl_msg *m, uint64_t now)
{
	struct ns *ns = c->ns;
	struct conn *old;
	size_t len;
	int node, ret;

	if (!auth_check(td, c, frame, flen, m)) {
		sl_proto_session_clear(&c->keys);
		td->st.auth_failed++;
		pr_info("tokend: authentication failed for node '%s'",
			c->node_name);
		return fail_conn(td, c, m->req_id, SL_ERR_AUTH, now);
	}
	node = intern_node(td, ns, c->node_name);
	if (node < 0) {
		td->st.refused_nodes++;
		pr_warn("tokend: namespace '%s' has %u nodes; refusing '%s'",
			ns->name, td->cfg.max_nodes, c->node_name);
		return fail_conn(td, c, m->req_id, SL_ERR_BUSY, now);
	}
	/* A node id is a claim: the session holding it keeps it until a TTL
	 * after its last SYNC; only then may another take it over. */
	old = ns->node_conn[node];
	if (old && old->session && old->state == CONN_READY &&
	    now < old->holds_until) {
		td->st.refused_node_held++;
		pr_info("tokend: namespace '%s': node '%s' is held by a live "
			"session; refusing another", ns->name, c->node_name);
		return fail_conn(td, c, m->req_id, SL_ERR_BUSY, now);
	}
	/* sessions have their own budget: handshakes cannot starve it */
	if (!old && td->st.conns - td->st.handshakes >= td->cfg.max_conns) {
		td->st.refused_busy++;
		return fail_conn(td, c, m->req_id, SL_ERR_BUSY, now);
	}
	c->node = node;
	c->keyed = true;
	hs_del(td, c);
	c->session = true;
	/* The node reconnected: its old connection is stale. */
	if (old && old != c && old->state != CONN_CLOSING) {
		if (fail_conn(td, old, 0, SL_ERR_REPLACED, now) || flush(old))
			conn_close(td, old);
		else
			conn_update(td, old);
		ns->node_conn[node] = NULL;
	}
	ns->node_conn[node] = c;
	if (!serving(td, now))
		return redirect_conn(td, c, m->req_id, now);
	ret = out_reserve(td, c, SL_PROTO_HDR_LEN + 16);
	if (ret)
		return ret;
	sl_proto_put_auth_ok(c->out + c->out_len, c->out_cap - c->out_len,
			     m->req_id, td->cfg.ttl_ms, td->cfg.sync_ms,
			     td->role.term, &len);
	c->state = CONN_READY;
	c->deadline = 0;
	c->holds_until = now + td->cfg.ttl_ms;
	td->st.auth_ok++;
	return out_commit(c, len);
}

/* One decoded frame; -errno drops the connection without a word. */
static int on_frame(struct sl_tokend *td, struct conn *c, const void *frame,
		    size_t len, const struct sl_msg *m, uint64_t now)
{
	if (m->type == SL_MSG_ERROR)
		return -ECONNRESET;
	if (c->state == CONN_HELLO && m->type == SL_MSG_HELLO)
		return on_hello(td, c, m);
	if (c->state == CONN_AUTH && m->type == SL_MSG_AUTH)
		return on_auth(td, c, frame, len, m, now);
	if (c->state == CONN_READY && m->type == SL_MSG_SYNC) {
		/* a replayed, reordered or rewritten SYNC is never answered */
		if (sl_proto_open(&c->keys, frame, len, m)) {
			td->st.integrity++;
			return fail_conn(td, c, m->req_id, SL_ERR_INTEGRITY,
					 now);
		}
		return on_sync(td, c, m, now);
	}
	td->st.unexpected++;
	return fail_conn(td, c, m->req_id, SL_ERR_UNEXPECTED, now);
}

/* Complete frames in the input buffer, in order. */
static int process_input(struct sl_tokend *td, struct conn *c, uint64_t now)
{
	size_t off = 0;
	int ret = 0;

	while (c->state != CONN_CLOSING && c->in_len - off >= 4) {
		struct sl_msg m;
		uint32_t len;

		ret = sl_proto_frame_len(c->in + off, c->in_len - off, &len);
		if (ret) {
			td->st.malformed++;
			return fail_conn(td, c, 0, SL_ERR_MALFORMED, now);
		}
		if (c->in_len - off < len)
			break;
		ret = sl_proto_decode(c->in + off, len, &m);
		if (ret) {
			td->st.malformed++;
			return fail_conn(td, c, 0,
					 ret == -EPROTONOSUPPORT
						 ? SL_ERR_VERSION
						 : SL_ERR_MALFORMED,
					 now);
		}
		ret = on_frame(td, c, c->in + off, len, &m, now);
		if (ret)
			return ret;
		off += len;
	}
	if (c->state == CONN_CLOSING) {
		c->in_len = 0;
		return 0;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	return 0;
}

static int on_readable(struct sl_tokend *td, struct conn *c, uint64_t now)
{
	size_t want = SL_PROTO_HDR_LEN;
	uint32_t flen;
	ssize_t n;

	/* Grow towards the frame being read, never past the maximum. */
	if (sl_proto_frame_len(c->in, c->in_len, &flen) == 0)
		want = flen;
	if (c->in_len == c->in_cap || want > c->in_cap) {
		size_t cap = c->in_cap * 2;
		uint8_t *p;

		if (cap < want)
			cap = want;
		if (cap > SL_PROTO_MAX_FRAME)
			cap = SL_PROTO_MAX_FRAME;
		if (cap > c->in_cap) {
			p = realloc(c->in, cap);
			if (!p)
				return -ENOMEM;
			c->in = p;
			c->in_cap = cap;
		}
	}
	n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len,
		 MSG_DONTWAIT);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	c->in_len += n;
	return process_input(td, c, now);
}

static void on_conn_event(struct sl_tokend *td, struct conn *c, uint32_t ev,
			  uint64_t now)
{
	int ret = 0;

	if (c->dead)
		return;
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR) && c->state != CONN_CLOSING)
		ret = on_readable(td, c, now);
	else if (ev & (EPOLLHUP | EPOLLERR))
		ret = -ECONNRESET;
	if (!ret)
		ret = flush(c);
	if (ret == -ENOBUFS)
		td->st.dropped_slow++;
	if (ret)
		conn_close(td, c);
	else
		conn_update(td, c);
}

/* The oldest handshake makes room for a newer connection. */
static bool evict_handshake(struct sl_tokend *td)
{
	if (!td->hs_old)
		return false;
	td->st.evicted++;
	conn_close(td, td->hs_old);
	return true;
}

/*
 * accept4 found no free fd. A handshake makes room; without one, the
 * spare fd takes the connection and closes it, so that the listener does
 * not stay readable and spin; without a spare either, the listener rests.
 * false: accept no more for now.
 */
static bool out_of_fds(struct sl_tokend *td, int err, uint64_t now)
{
	struct epoll_event ev = {.data.ptr = &td->lfd};
	int fd;

	td->st.fd_exhausted++;
	if (!td->fd_logged_at || now - td->fd_logged_at >= 10000) {
		pr_warn("tokend: accept: %s (%llu times so far): the oldest "
			"handshakes make room; raise the fd limit above "
			"--max-conns + --max-handshakes", strerror(err),
			(unsigned long long)td->st.fd_exhausted);
		td->fd_logged_at = now;
	}
	if (evict_handshake(td))
		return true;
	if (td->spare_fd >= 0) {
		close(td->spare_fd);
		fd = accept4(td->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close(fd);
		td->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return fd >= 0;
	}
	td->accept_paused_until = now + SL_TOKEND_ACCEPT_PAUSE_MS;
	epoll_ctl(td->epfd, EPOLL_CTL_MOD, td->lfd, &ev);
	return false;
}

static void accept_resume(struct sl_tokend *td)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &td->lfd};

	td->accept_paused_until = 0;
	if (td->spare_fd < 0)
		td->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	epoll_ctl(td->epfd, EPOLL_CTL_MOD, td->lfd, &ev);
}

static void on_accept(struct sl_tokend *td, uint64_t now)
{
	for (int i = 0; i < ACCEPT_BURST; i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd, one = 1;
		struct conn *c;

		fd = accept4(td->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			if (!out_of_fds(td, errno, now))
				return;
			continue;
		}
		if (fd < 0)
			return;
		td->st.accepted++;
		if (td->stopping) {
			uint8_t b[SL_PROTO_HDR_LEN + 4];
			size_t len;

			/* Best effort: the socket buffer is empty. */
			sl_proto_put_error(b, sizeof(b), 0, SL_ERR_BUSY, &len);
			if (send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				pr_debug("tokend: refusing: %s",
					 strerror(errno));
			close(fd);
			td->st.refused_busy++;
			continue;
		}
		/* unauthenticated peers take turns, never a session's place */
		if (td->st.handshakes >= td->cfg.max_handshakes)
			evict_handshake(td);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (c)
			c->in = malloc(IN_INIT);
		if (!c || !c->in) {
			if (c)
				free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->in_cap = IN_INIT;
		c->state = CONN_HELLO;
		c->deadline = now + td->cfg.handshake_ms;
		ev.data.ptr = c;
		if (epoll_ctl(td->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			free(c->in);
			free(c);
			close(fd);
			continue;
		}
		c->next = td->conns;
		if (c->next)
			c->next->prev = c;
		td->conns = c;
		td->st.conns++;
		hs_add(td, c);
	}
}

/* Push TTL 0 to every client; later SYNCs get the same. */
static void drain(struct sl_tokend *td)
{
	struct conn *c, *next;

	td->draining = true;
	pr_info("tokend: draining: every lease ends now");
	for (c = td->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_READY)
			continue;
		if (put_frame_grants(td, c, 0, SL_SRV_DRAIN, 0, 0) || flush(c))
			conn_close(td, c);
		else
			conn_update(td, c);
	}
	for (uint32_t i = 0; i < td->n_ns; i++) {
		for (uint32_t j = 0; j < td->ns[i].n_flows; j++)
			forget_flow(&td->ns[i].flows[j]);
	}
}

/*
 * A new term: forget every holder, as a restarted server knows none, and
 * learn for learn_ms: clients may still hold the last leader's leases.
 */
static void become_leader(struct sl_tokend *td, uint64_t now)
{
	for (uint32_t i = 0; i < td->n_ns; i++) {
		for (uint32_t j = 0; j < td->ns[i].n_flows; j++) {
			struct flow *f = &td->ns[i].flows[j];

			forget_flow(f);
			f->have_level = false;
		}
	}
	td->start = now;
	td->st.terms++;
	pr_info("tokend: leader, term %llu: learning for %u ms",
		(unsigned long long)td->role.term, td->cfg.learn_ms);
}

/* No longer the leader: every client goes to the one there is. */
static void deposed(struct sl_tokend *td, uint64_t now)
{
	struct conn *c, *next;

	pr_info("tokend: no longer the leader (term %llu): redirecting "
		"clients to '%s'", (unsigned long long)td->acted.term,
		td->role.leader_addr);
	for (c = td->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_READY)
			continue;
		if (redirect_conn(td, c, 0, now) || flush(c))
			conn_close(td, c);
		else
			conn_update(td, c);
	}
}

static void on_role(struct sl_tokend *td, uint64_t now)
{
	const struct sl_tokend_role *r = &td->role, *was = &td->acted;

	if (r->leader && (!was->leader || r->term != was->term))
		become_leader(td, now);
	else if (!r->leader && was->leader)
		deposed(td, now);
	td->acted = *r;
}

static void on_ctl(struct sl_tokend *td)
{
	char cmd[16];
	ssize_t n = read(td->ctl[0], cmd, sizeof(cmd));

	for (ssize_t i = 0; i < n; i++) {
		if (cmd[i] == SL_TOKEND_DRAIN && !td->draining)
			drain(td);
		else if (cmd[i] == SL_TOKEND_STOP)
			td->stopping = true;
		else if (cmd[i] == SL_TOKEND_ROLE)
			on_role(td, sl_now_ms());
	}
}

/* Deadlines and lease expiry, a few times per TTL. */
static void sweep(struct sl_tokend *td, uint64_t now)
{
	struct conn *c, *next;

	for (c = td->conns; c; c = next) {
		next = c->next;
		if (c->deadline && now >= c->deadline) {
			td->st.timed_out++;
			if (c->state == CONN_CLOSING) {
				conn_close(td, c);
			} else if (fail_conn(td, c, 0, SL_ERR_TIMEOUT, now) ||
				   flush(c)) {
				conn_close(td, c);
			} else {
				conn_update(td, c);
			}
		}
	}
	for (uint32_t i = 0; i < td->n_ns; i++) {
		for (uint32_t j = 0; j < td->ns[i].n_flows; j++)
			expire_flow(td, &td->ns[i], &td->ns[i].flows[j], now);
	}
	td->last_sweep = now;
}

int sl_tokend_run(struct sl_tokend *td)
{
	struct epoll_event ev[EVENTS];
	int tick = td->cfg.ttl_ms / 4;

	if (tick < 10)
		tick = 10;
	if (tick > 250)
		tick = 250;
	while (!td->stopping) {
		uint64_t now;
		int n, i;

		n = epoll_wait(td->epfd, ev, EVENTS, tick);
		if (n < 0 && errno != EINTR)
			return -errno;
		pthread_mutex_lock(&td->lock);
		now = sl_now_ms();
		for (i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &td->lfd)
				on_accept(td, now);
			else if (p == &td->ctl)
				on_ctl(td);
			else
				on_conn_event(td, p, ev[i].events, now);
		}
		if (td->accept_paused_until && now >= td->accept_paused_until)
			accept_resume(td);
		if (now - td->last_sweep >= (uint64_t)tick)
			sweep(td, now);
		reap(td);
		pthread_mutex_unlock(&td->lock);
	}
	/* A clean stop: tell connected clients, best effort. */
	pthread_mutex_lock(&td->lock);
	while (td->conns) {
		struct conn *c = td->conns;

		if (c->state == CONN_READY &&
		    !fail_conn(td, c, 0, SL_ERR_SHUTDOWN, sl_now_ms()))
			flush(c);
		conn_close(td, c);
	}
	reap(td);
	pthread_mutex_unlock(&td->lock);
	return 0;
}

void sl_tokend_command(struct sl_tokend *td, enum sl_tokend_cmd cmd)
{
	char b = cmd;
	ssize_t n = write(td->ctl[1], &b, 1);

	(void)n; /* a full pipe already holds a command to act on */
}

/* ---- setup ---- */

static int parse_listen(const char *s, struct sockaddr_storage *ss,
			socklen_t *sl, char *err, size_t errlen)
{
	if (!s || sl_parse_sockaddr(s, ss, sl)) {
		snprintf(err, errlen,
			 "listen address '%s': expected ADDR:PORT with a "
			 "numeric address ([ADDR6]:PORT for IPv6, port "
			 "0-65535)", s ? s : "");
		return -EINVAL;
	}
	return 0;
}

static int flow_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct flow *)a)->id,
		 y = ((const struct flow *)b)->id;

	return x < y ? -1 : x > y;
}

/* Namespaces and flows from the cluster rules; one rule per flow. */
static struct ns *find_ns_in(struct ns *v, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!strcmp(v[i].name, name))
			return &v[i];
	}
	return NULL;
}

static void free_flows(struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < v[i].n_flows; j++) {
			free(v[i].flows[j].h);
			free(v[i].flows[j].live.node);
			free(v[i].flows[j].gone.node);
		}
		free(v[i].flows);
		v[i].flows = NULL;
		v[i].n_flows = 0;
	}
}

/*
 * The namespaces serving rs's cluster rules: td's own first, in their
 * order and with their nodes (a namespace no rule names any more keeps
 * them, with no flows), then new ones. Their flows are new and empty.
 */
static int build_flows(struct sl_tokend *td, const struct sl_ruleset *rs,
		       struct ns **out, uint32_t *n_out, char *err,
		       size_t errlen)
{
	struct ns *v = calloc(td->n_ns + rs->n + 1, sizeof(*v));
	uint32_t n = td->n_ns;
	size_t i;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < td->n_ns; i++) {
		v[i] = td->ns[i];
		v[i].flows = NULL;
		v[i].n_flows = 0;
	}
	for (i = 0; i < rs->n; i++) {
		const struct sl_cluster *cl = &rs->rules[i].cluster;
		struct ns *ns;

		if (!cl->enabled)
			continue;
		ns = find_ns_in(v, n, cl->ns);
		if (!ns) {
			ns = &v[n++];
			strcpy(ns->name, cl->ns);
			ns->secret = td->secrets
					     ? sl_secrets_find(td->secrets, cl->ns)
					     : NULL;
			if (td->secrets && !ns->secret)
				pr_warn("tokend: no secret for namespace "
					"'%s': its clients will be refused",
					ns->name);
			ns->tokens = td->cfg.ns_rate / 5.0 + 1;
			ns->tokens_at = sl_now_ms();
		}
		ns->n_flows++;
	}
	for (i = 0; i < n; i++) {
		v[i].flows = calloc(v[i].n_flows + 1, sizeof(*v[i].flows));
		if (!v[i].flows) {
			free_flows(v, n);
			free(v);
			return -ENOMEM;
		}
		v[i].n_flows = 0;
	}
	for (i = 0; i < rs->n; i++) {
		const struct sl_rule *r = &rs->rules[i];
		struct ns *ns;
		struct flow *f;

		if (!r->cluster.enabled)
			continue;
		ns = find_ns_in(v, n, r->cluster.ns);
		f = &ns->flows[ns->n_flows++];
		f->id = r->cluster.flow_id;
		f->count = r->count;
		f->cl = &r->cluster;
		f->rule = r;
	}
	for (i = 0; i < n; i++) {
		struct ns *ns = &v[i];

		qsort(ns->flows, ns->n_flows, sizeof(*ns->flows), flow_cmp);
		for (uint32_t j = 1; j < ns->n_flows; j++) {
			if (ns->flows[j].id != ns->flows[j - 1].id)
				continue;
			snprintf(err, errlen,
				 "namespace '%s': flow_id %u is used by more "
				 "than one rule",
				 ns->name, ns->flows[j].id);
			free_flows(v, n);
			free(v);
			return -EINVAL;
		}
	}
	*out = v;
	*n_out = n;
	return 0;
}

/*
 * A flow that stays (same namespace and id) keeps its holders, leases,
 * reservations and ramp; at a new count their grants are counted at its
 * scale, and each holder takes its new grant at its next sync.
 */
static void carry_flow(struct flow *to, struct flow *from)
{
	const struct sl_cluster *cl = to->cl;
	const struct sl_rule *rule = to->rule;
	uint64_t count = to->count, was = from->count;

	*to = *from;
	to->cl = cl;
	to->rule = rule;
	to->count = count;
	to->have_level = false;
	to->dirty = true;
	/* moved: the old set is freed without them (its ids stay sorted) */
	from->h = NULL;
	from->live = (struct node_set){ 0 };
	from->gone = (struct node_set){ 0 };
	if (count == was || !was)
		return;
	to->outstanding = 0;
	for (uint32_t i = 0; i < to->live.n; i++) {
		struct holder *h = &to->h[to->live.node[i]];

		h->grant = sl_mul_div(h->grant, count, was);
		to->outstanding += h->grant;
	}
	to->reserved = 0;
	for (uint32_t i = 0; i < to->gone.n; i++) {
		struct holder *h = &to->h[to->gone.node[i]];

		h->reserved = sl_mul_div(h->reserved, count, was);
		to->reserved += h->reserved;
	}
}

/* Puts v in force; old flows that stay hand their state over. */
static void install_flows(struct sl_tokend *td, struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n && i < td->n_ns; i++) {
		for (uint32_t j = 0; j < v[i].n_flows; j++) {
			struct flow *f = &v[i].flows[j];
			struct flow *was = find_flow(&td->ns[i], f->id);

			if (!was)
				continue;
			carry_flow(f, was);
			if (was->count != f->count)
				pr_info("tokend: namespace '%s' flow %u: count "
					"%llu, was %llu", v[i].name, f->id,
					(unsigned long long)f->count,
					(unsigned long long)was->count);
		}
	}
	for (struct conn *c = td->conns; c; c = c->next) {
		if (c->ns)
			c->ns = v + (c->ns - td->ns);
	}
	free_flows(td->ns, td->n_ns);
	free(td->ns);
	td->ns = v;
	td->n_ns = n;
}

int sl_tokend_set_rules(struct sl_tokend *td, const struct sl_ruleset *rs,
			char *err, size_t errlen)
{
	struct ns *v;
	uint32_t n;
	int ret;

	pthread_mutex_lock(&td->lock);
	ret = build_flows(td, rs, &v, &n, err, errlen);
	if (!ret)
		install_flows(td, v, n);
	pthread_mutex_unlock(&td->lock);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}

int sl_tokend_new(const struct sl_tokend_cfg *cfg, const struct sl_ruleset *rs,
		  const struct sl_secrets *secrets, struct sl_tokend **out,
		  char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	struct sl_tokend *td;
	socklen_t sl;
	int one = 1, ret;

	if (!cfg->ttl_ms || !cfg->sync_ms || cfg->sync_ms >= cfg->ttl_ms ||
	    !cfg->max_conns || !cfg->max_handshakes ||
	    cfg->out_max < 2 * SL_PROTO_MAX_FRAME ||
	    !cfg->handshake_ms || !cfg->max_nodes) {
		snprintf(err, errlen,
			 "bad settings: need 0 < sync period < lease TTL, "
			 "max sessions, handshakes and nodes > 0, output "
			 "bound >= %u",
			 2 * SL_PROTO_MAX_FRAME);
		return -EINVAL;
	}
	ret = parse_listen(cfg->listen, &ss, &sl, err, errlen);
	if (ret)
		return ret;
	if (!secrets && !sl_sockaddr_is_loopback((struct sockaddr *)&ss)) {
		snprintf(err, errlen,
			 "without --secrets clients are not authenticated: "
			 "listen on a loopback address only");
		return -EPERM;
	}
	td = calloc(1, sizeof(*td));
	if (!td)
		return -ENOMEM;
	td->cfg = *cfg;
	pthread_mutex_init(&td->lock, NULL);
	td->auth = secrets != NULL;
	td->lfd = td->epfd = td->ctl[0] = td->ctl[1] = td->spare_fd = -1;
	ret = sl_proto_nonce(td->dummy_secret);
	if (ret) {
		snprintf(err, errlen, "no random bytes for the dummy secret");
		goto fail;
	}
	td->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (td->spare_fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "/dev/null: %s", strerror(-ret));
		goto fail;
	}
	td->grants = calloc(SL_PROTO_MAX_REPORTS, sizeof(*td->grants));
	if (!td->grants) {
		ret = -ENOMEM;
		goto fail;
	}
	td->secrets = secrets;
	ret = build_flows(td, rs, &td->ns, &td->n_ns, err, errlen);
	if (ret)
		goto fail;
	if (!td->n_ns) {
		snprintf(err, errlen,
			 "no rule has a cluster object: nothing to serve");
		ret = -EINVAL;
		goto fail;
	}
	td->lfd = socket(ss.ss_family,
			 SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (td->lfd < 0 ||
	    setsockopt(td->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(td->lfd, (struct sockaddr *)&ss, sl) ||
	    listen(td->lfd, 1024) ||
	    getsockname(td->lfd, (struct sockaddr *)&ss, &sl)) {
		ret = -errno;
		snprintf(err, errlen, "listen on %s: %s", cfg->listen,
			 strerror(-ret));
		goto fail;
	}
	td->port = ntohs(ss.ss_family == AF_INET
				 ? ((struct sockaddr_in *)&ss)->sin_port
				 : ((struct sockaddr_in6 *)&ss)->sin6_port);
	td->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (td->epfd < 0 || pipe2(td->ctl, O_NONBLOCK | O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, errlen, "epoll: %s", strerror(-ret));
		goto fail;
	}
	ev.data.ptr = &td->lfd;
	if (epoll_ctl(td->epfd, EPOLL_CTL_ADD, td->lfd, &ev)) {
		ret = -errno;
		goto fail;
	}
	ev.data.ptr = &td->ctl;
	if (epoll_ctl(td->epfd, EPOLL_CTL_ADD, td->ctl[0], &ev)) {
		ret = -errno;
		goto fail;
	}
	td->start = td->last_sweep = sl_now_ms();
	td->role.leader = td->acted.leader = !cfg->elected;
	*out = td;
	return 0;
fail:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	sl_tokend_free(td);
	return ret;
}

void sl_tokend_set_role(struct sl_tokend *td, const struct sl_tokend_role *r)
{
	pthread_mutex_lock(&td->lock);
	td->role = *r;
	pthread_mutex_unlock(&td->lock);
	sl_tokend_command(td, SL_TOKEND_ROLE);
}

uint16_t sl_tokend_port(const struct sl_tokend *td)
{
	return td->port;
}

int sl_tokend_set_secrets(struct sl_tokend *td,
			  const struct sl_secrets *secrets)
{
	if (!td->auth || !secrets)
		return -EINVAL;
	pthread_mutex_lock(&td->lock);
	td->secrets = secrets;
	for (size_t i = 0; i < td->n_ns; i++) {
		struct ns *ns = &td->ns[i];

		ns->secret = sl_secrets_find(secrets, ns->name);
		if (!ns->secret)
			pr_warn("tokend: no secret for namespace '%s': its "
				"new clients will be refused", ns->name);
	}
	pthread_mutex_unlock(&td->lock);
	return 0;
}

void sl_tokend_get_stats(struct sl_tokend *td, struct sl_tokend_stats *st)
{
	pthread_mutex_lock(&td->lock);
	*st = td->st;
	pthread_mutex_unlock(&td->lock);
}

int sl_tokend_get_info(struct sl_tokend *td, struct sl_tokend_info *out)
{
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	/* under the lock: a rule change replaces namespaces and flows */
	pthread_mutex_lock(&td->lock);
	for (uint32_t i = 0; i < td->n_ns; i++)
		n += td->ns[i].n_flows;
	out->flows = calloc(n ? n : 1, sizeof(*out->flows));
	out->ns = calloc(td->n_ns ? td->n_ns : 1, sizeof(*out->ns));
	if (!out->flows || !out->ns) {
		pthread_mutex_unlock(&td->lock);
		sl_tokend_info_free(out);
		return -ENOMEM;
	}
	out->st = td->st;
	out->serving = serving(td, sl_now_ms());
	out->learning = out->serving &&
			sl_now_ms() < td->start + td->cfg.learn_ms;
	out->draining = td->draining;
	out->term = td->role.term;
	for (uint32_t i = 0; i < td->n_ns; i++) {
		const struct ns *ns = &td->ns[i];

		strcpy(out->ns[i].name, ns->name);
		out->ns[i].nodes = ns->n_nodes;
		for (uint32_t j = 0; j < ns->n_flows; j++) {
			const struct flow *f = &ns->flows[j];
			struct sl_tokend_flow_info *o =
				&out->flows[out->n_flows++];

			strcpy(o->ns, ns->name);
			strcpy(o->rule, f->rule->name);
			o->flow_id = f->id;
			o->count = f->count;
			o->granted = f->outstanding;
			o->holders = f->live.n;
			o->vanished = f->gone.n;
			o->reserved = f->reserved;
		}
	}
	out->n_ns = td->n_ns;
	pthread_mutex_unlock(&td->lock);
	return 0;
}

void sl_tokend_info_free(struct sl_tokend_info *info)
{
	free(info->flows);
	free(info->ns);
	info->flows = NULL;
	info->ns = NULL;
}

void sl_tokend_free(struct sl_tokend *td)
{
	if (!td)
		return;
	while (td->conns)
		conn_close(td, td->conns);
	reap(td);
	free_flows(td->ns, td->n_ns);
	for (uint32_t i = 0; i < td->n_ns; i++) {
		struct ns *ns = &td->ns[i];

		free(ns->nodes);
		free(ns->node_conn);
	}
	free(td->ns);
	free(td->scratch);
	free(td->needs);
	free(td->grants);
	if (td->lfd >= 0)
		close(td->lfd);
	if (td->spare_fd >= 0)
		close(td->spare_fd);
	if (td->epfd >= 0)
		close(td->epfd);
	if (td->ctl[0] >= 0)
		close(td->ctl[0]);
	if (td->ctl[1] >= 0)
		close(td->ctl[1]);
	pthread_mutex_destroy(&td->lock);
	free(td);
}
