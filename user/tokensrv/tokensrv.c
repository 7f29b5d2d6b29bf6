// SPDX-License-Identifier: GPL-2.0
/*
 * The token server: workers on epoll with non-blocking sockets, and a
 * balancer. Every flow keeps its live lease holders; the sum of their
 * unexpired grants never exceeds count (docs/cluster.md).
 *
 * Worker 0 accepts and authenticates; a session then moves to the worker
 * with the fewest, which serves its SYNCs. Flows are shared: each has a
 * lock, held for one holder's grant. The balancer expires leases and
 * water-fills large flows off the SYNC path. Locks: a worker's own while
 * it handles a batch of events (the balancer's while it runs a pass);
 * under one, a namespace's (its nodes and SYNC budget) and then a flow's;
 * the role's alone. Whatever changes every flow or connection (rules,
 * secrets, the copy for metrics) takes every worker's lock in order, then
 * the balancer's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
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
	pthread_mutex_t lock; /* everything below but id, count, cl, rule */
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
	uint64_t fills; /* water fills begun: the balancer's is current */
	bool have_level, dirty;
	uint64_t warm_start; /* ms; the warm-up ramp runs from here */
	bool warm;	     /* ramped up, or found busy after a restart */
} __attribute__((aligned(64))); /* workers share flows, not cache lines */

struct conn;

/* A node id of a namespace: its slot stays put while it is in use. */
struct node {
	char name[SL_PROTO_NAME_MAX + 1];
	struct conn *conn;    /* the session holding it; NULL: none */
	uint64_t released_at; /* ms; when its last session closed */
	bool used;
};

#define NODE_CHUNK 1024

struct ns {
	char name[SL_NAME_MAX + 1];
	const struct sl_secret *secret;
	struct flow *flows; /* sorted by id */
	uint32_t n_flows;
	/* under lock: the node table and the SYNC budget */
	pthread_mutex_t lock;
	struct node **chunk; /* max_nodes / NODE_CHUNK, filled on demand */
	struct sl_index by_name; /* FNV-1a of a name -> node number */
	uint32_t *free_ids, n_free, free_cap; /* let go, reused first */
	uint32_t n_nodes, top;	    /* in use; numbers ever handed out */
	double tokens; /* SYNC frames the namespace may still send */
	uint64_t tokens_at;
};

struct worker;

struct conn {
	int fd;
	enum conn_state state;
	struct worker *w; /* the worker serving it */
	uint32_t events;  /* what epoll waits for now */
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
	/* ms; its node id is its own until then (atomic: worker 0 reads it
	 * when another session claims the node) */
	uint64_t holds_until;
	bool replaced; /* atomic: a newer session took its node id */
	uint64_t deadline; /* handshake or closing deadline, ms */
	uint8_t *in, *out;
	size_t in_len, in_cap, out_off, out_len, out_cap;
	bool dead; /* closed; freed after the event batch that saw it */
	bool session; /* authenticated: counted against max_conns */
	bool placed;  /* given its worker for good */
	struct conn *prev, *next;
	struct conn *hs_prev, *hs_next; /* handshakes, oldest first */
};

/* A thread serving connections: its own epoll, list and counters. */
struct worker {
	struct sl_tokend *td;
	pthread_t thread; /* not worker 0's: sl_tokend_run()'s caller */
	int epfd, ctl[2];
	pthread_mutex_t lock; /* held while an event batch runs */
	struct conn *conns;   /* list head */
	struct conn *dead;    /* closed, to free after the event batch */
	struct conn *hs_old, *hs_new; /* handshakes in accept order (0's) */
	pthread_mutex_t inbox_lock;
	struct conn *inbox; /* sessions handed over by worker 0 */
	uint32_t sessions;  /* atomic: served here now */
	uint64_t last_sweep;
	uint64_t *scratch, *needs; /* water filling */
	size_t scratch_cap;
	struct sl_flow_grant *grants; /* one SYNC's answer */
	struct sl_tokend_stats st;
	bool stopping;
};

/* What a SYNC is answered under, copied under role_lock. */
struct view {
	struct sl_tokend_role role; /* the role in force */
	uint64_t start;		    /* the learn period runs from here */
	bool draining;
};

struct sl_tokend {
	struct sl_tokend_cfg cfg;
	const struct sl_secrets *secrets; /* the last set, NULL: no auth */
	int lfd;
	uint16_t port;
	bool auth;
	/* what an unknown namespace's AUTH is checked against: as much work
	 * as a wrong secret, so its ERROR AUTH takes as long */
	uint8_t dummy_secret[SL_PROTO_NONCE_LEN];
	struct ns *ns;
	uint32_t n_ns;
	uint32_t sessions; /* atomic: authenticated, every worker's */
	int spare_fd; /* given up to accept and close when out of fds */
	uint64_t accept_paused_until, fd_logged_at;
	struct worker *w; /* cfg.threads of them */
	uint32_t n_w;
	int tick; /* ms between two sweeps */
	/* the balancer: expiry and large flows' water fills */
	pthread_t bal_thread;
	pthread_mutex_t bal_lock; /* held while a pass runs */
	int bal_ctl[2];
	uint64_t *bal_needs, *bal_scratch;
	size_t bal_cap;
	uint64_t last_expire, last_gc;
	uint64_t terms;	      /* worker 0's */
	uint64_t nodes_freed; /* the balancer's */
	pthread_mutex_t role_lock;   /* role and in_force */
	struct sl_tokend_role role;  /* set by sl_tokend_set_role() */
	struct view in_force;	     /* what SYNCs are answered under */
	struct sl_tokend_role acted; /* the role worker 0 last acted on */
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
	cfg->threads = SL_TOKEND_THREADS;
	cfg->forget_ms = SL_TOKEND_FORGET_MS;
}

/* ---- flows and leases ---- */

static struct node *node_at(const struct ns *ns, uint32_t id)
{
	return &ns->chunk[id / NODE_CHUNK][id % NODE_CHUNK];
}

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
	uint64_t reserve = vanished_reserve(f, node_at(ns, node)->name, h);
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

/* Room for n values in both buffers; -ENOMEM. */
static int fill_room(uint64_t **needs, uint64_t **scratch, size_t *cap,
		     size_t n)
{
	uint64_t *s, *d;

	if (n <= *cap)
		return 0;
	s = realloc(*scratch, 2 * n * sizeof(*s));
	if (s)
		*scratch = s;
	d = s ? realloc(*needs, 2 * n * sizeof(*d)) : NULL;
	if (!d)
		return -ENOMEM;
	*needs = d;
	*cap = 2 * n;
	return 0;
}

/* The live holders' needs into needs; the count to fill, net of the
 * vanished holders' reservations. */
static uint64_t fill_input(struct flow *f, uint64_t *needs, uint64_t now)
{
	uint64_t count = flow_count(f, now);

	for (uint32_t i = 0; i < f->live.n; i++)
		needs[i] = f->h[f->live.node[i]].need;
	return count > f->reserved ? count - f->reserved : 0;
}

/* The water level now, in the caller's buffers (a small flow's, in the
 * SYNC that finds it changed). */
static int rebalance(struct worker *w, struct flow *f, uint64_t now)
{
	uint64_t count;
	int ret = fill_room(&w->needs, &w->scratch, &w->scratch_cap,
			    f->live.n);

	if (ret)
		return ret;
	count = fill_input(f, w->needs, now);
	sl_quota_global_level(count, w->needs, f->live.n, w->scratch,
			      &f->level);
	f->fills++;
	f->have_level = true;
	f->dirty = false;
	f->level_at = now;
	return 0;
}

/* Least ms between two fills of f: more holders, fewer fills. */
static uint64_t fill_period(const struct sl_tokend *td, const struct flow *f)
{
	uint64_t by_size = f->live.n / SL_TOKEND_FILL_PER_MS;

	return by_size > td->cfg.rebalance_ms ? by_size : td->cfg.rebalance_ms;
}

/*
 * A large flow's fill by the balancer: the needs copied under the flow's
 * lock, the level computed outside it, and kept unless a fill began
 * meanwhile (a SYNC's, or a rule change's reset).
 */
static void fill_large(struct sl_tokend *td, struct flow *f, uint64_t now)
{
	struct sl_quota_level level;
	uint64_t count, fills;
	uint32_t n;

	pthread_mutex_lock(&f->lock);
	n = f->live.n;
	if (n <= SL_TOKEND_INLINE_FILL || !f->have_level || !f->dirty ||
	    now - f->level_at < fill_period(td, f) ||
	    fill_room(&td->bal_needs, &td->bal_scratch, &td->bal_cap, n)) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	count = fill_input(f, td->bal_needs, now);
	fills = ++f->fills;
	f->dirty = false;
	f->level_at = now;
	pthread_mutex_unlock(&f->lock);
	sl_quota_global_level(count, td->bal_needs, n, td->bal_scratch,
			      &level);
	pthread_mutex_lock(&f->lock);
	if (f->fills == fills)
		f->level = level;
	pthread_mutex_unlock(&f->lock);
}

/* The answer for one flow of one SYNC; the lease starts now. */
static int grant_flow(struct worker *w, const struct view *v, struct conn *c,
		      struct flow *f, const struct sl_flow_report *r,
		      uint64_t now, struct sl_flow_grant *g)
{
	struct sl_tokend *td = w->td;
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
	learning = now < v->start + td->cfg.learn_ms;
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
			/* a large flow's is the balancer's (fill_large) */
			if (!f->have_level ||
			    (f->dirty && f->live.n <= SL_TOKEND_INLINE_FILL &&
			     now - f->level_at >= td->cfg.rebalance_ms)) {
				ret = rebalance(w, f, now);
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

static void sl_tokend_command_worker(struct worker *w, char cmd);

#define LOAD(x)	    __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v)   __atomic_add_fetch(&(x), (v), __ATOMIC_RELAXED)

static void hs_add(struct worker *w, struct conn *c)
{
	c->hs_prev = w->hs_new;
	if (w->hs_new)
		w->hs_new->hs_next = c;
	else
		w->hs_old = c;
	w->hs_new = c;
	w->st.handshakes++;
}

static void hs_del(struct worker *w, struct conn *c)
{
	if (c->hs_prev)
		c->hs_prev->hs_next = c->hs_next;
	else
		w->hs_old = c->hs_next;
	if (c->hs_next)
		c->hs_next->hs_prev = c->hs_prev;
	else
		w->hs_new = c->hs_prev;
	c->hs_prev = c->hs_next = NULL;
	w->st.handshakes--;
}

static void conn_link(struct worker *w, struct conn *c)
{
	c->prev = NULL;
	c->next = w->conns;
	if (c->next)
		c->next->prev = c;
	w->conns = c;
	w->st.conns++;
}

static void conn_unlink(struct worker *w, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	w->st.conns--;
}

/* Close now, free later: the current event batch may still name c. */
static void conn_close(struct worker *w, struct conn *c)
{
	if (c->dead)
		return;
	if (!c->session) {
		hs_del(w, c);
	} else {
		ADD(w->td->sessions, -1);
		ADD(w->sessions, -1);
	}
	if (c->session && c->ns) {
		struct node *nd;

		pthread_mutex_lock(&c->ns->lock);
		nd = node_at(c->ns, c->node);
		if (nd->conn == c) {
			nd->conn = NULL;
			nd->released_at = sl_now_ms();
		}
		pthread_mutex_unlock(&c->ns->lock);
	}
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	sl_proto_session_clear(&c->keys);
	conn_unlink(w, c);
	c->dead = true;
	c->next = w->dead;
	w->dead = c;
}

static void reap(struct worker *w)
{
	while (w->dead) {
		struct conn *c = w->dead;

		w->dead = c->next;
		free(c->in);
		free(c->out);
		free(c);
	}
}

/* Room for a frame of n bytes and its seal; -ENOBUFS past the bound (a
 * slow client). */
static int out_reserve(struct worker *w, struct conn *c, size_t n)
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
	if (need > w->td->cfg.out_max)
		return -ENOBUFS;
	cap = c->out_cap ? c->out_cap : IN_INIT;
	while (cap < need)
		cap *= 2;
	if (cap > w->td->cfg.out_max)
		cap = w->td->cfg.out_max;
	p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Poll for what c waits for, re-arming only when that changed (a SYNC
 * answered at once leaves it as it was); a closing one with nothing left
 * goes. */
static void conn_update(struct worker *w, struct conn *c)
{
	struct epoll_event ev = {.data.ptr = c};

	if (c->state == CONN_CLOSING && c->out_off == c->out_len) {
		conn_close(w, c);
		return;
	}
	if (c->state != CONN_CLOSING)
		ev.events |= EPOLLIN;
	if (c->out_len > c->out_off)
		ev.events |= EPOLLOUT;
	if (ev.events == c->events)
		return;
	c->events = ev.events;
	epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
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
static void closing(struct worker *w, struct conn *c, uint64_t now)
{
	c->in_len = 0;
	STORE(c->state, CONN_CLOSING);
	c->deadline = now + w->td->cfg.handshake_ms;
}

/* Queue an ERROR and close once it is written: nothing else follows. */
static int fail_conn(struct worker *w, struct conn *c, uint32_t req,
		     uint16_t code, uint64_t now)
{
	size_t len;

	closing(w, c, now);
	if (out_reserve(w, c, SL_PROTO_HDR_LEN + 4))
		return -ENOBUFS;
	sl_proto_put_error(c->out + c->out_len, c->out_cap - c->out_len, req,
			   code, &len);
	return out_commit(c, len);
}

/* Queue it, write what goes, and poll for the rest (or close). */
static void send_or_close(struct worker *w, struct conn *c, int queued)
{
	if (queued || flush(c))
		conn_close(w, c);
	else
		conn_update(w, c);
}

/* What SYNCs are answered under now. */
static void view_get(struct sl_tokend *td, struct view *v)
{
	pthread_mutex_lock(&td->role_lock);
	*v = td->in_force;
	pthread_mutex_unlock(&td->role_lock);
}

/* A leader grants until its etcd lease may have run out, not after. */
static bool serving(const struct view *v, uint64_t now)
{
	return v->role.leader && (!v->role.until_ms || now < v->role.until_ms);
}

/* Not the leader (or no longer sure to be): say who is, sealed, and close. */
static int redirect_conn(struct worker *w, const struct view *v,
			 struct conn *c, uint32_t req, uint64_t now)
{
	const char *to = v->role.leader ? "" : v->role.leader_addr;
	size_t len;
	int ret;

	closing(w, c, now);
	w->st.redirects++;
	ret = out_reserve(w, c, SL_PROTO_HDR_LEN + 9 + strlen(to));
	if (!ret)
		ret = sl_proto_put_redirect(c->out + c->out_len,
					    c->out_cap - c->out_len, req,
					    v->role.term, to, &len);
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

/*
 * The namespace's number for node, under its lock: found through the
 * index, or a new one (a number let go first); -ENOSPC past max_nodes.
 */
static int intern_node(struct sl_tokend *td, struct ns *ns, const char *node)
{
	uint64_t hash = sl_fnv1a_str(node);
	size_t cursor = 0;
	struct node *nd;
	int64_t id;
	uint32_t i;

	while ((id = sl_index_next(&ns->by_name, hash, &cursor)) >= 0)
		if (!strcmp(node_at(ns, id)->name, node))
			return id;
	if (ns->n_nodes >= td->cfg.max_nodes)
		return -ENOSPC;
	if (ns->n_free) {
		i = ns->free_ids[ns->n_free - 1];
	} else {
		i = ns->top;
		if (!ns->chunk[i / NODE_CHUNK]) {
			ns->chunk[i / NODE_CHUNK] =
				calloc(NODE_CHUNK, sizeof(struct node));
			if (!ns->chunk[i / NODE_CHUNK])
				return -ENOMEM;
		}
	}
	if (sl_index_add(&ns->by_name, hash, i))
		return -ENOMEM;
	if (ns->n_free)
		ns->n_free--;
	else
		ns->top++;
	nd = node_at(ns, i);
	strcpy(nd->name, node);
	nd->conn = NULL;
	nd->released_at = sl_now_ms();
	nd->used = true;
	ns->n_nodes++;
	return i;
}

/* Let number id go, under the namespace's lock; -ENOMEM leaves it. */
static int free_node(struct ns *ns, uint32_t id)
{
	struct node *nd = node_at(ns, id);

	if (ns->n_free == ns->free_cap) {
		uint32_t cap = ns->free_cap ? 2 * ns->free_cap : 64;
		uint32_t *v = realloc(ns->free_ids, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ns->free_ids = v;
		ns->free_cap = cap;
	}
	sl_index_del(&ns->by_name, sl_fnv1a_str(nd->name), id);
	memset(nd, 0, sizeof(*nd));
	ns->free_ids[ns->n_free++] = id;
	ns->n_nodes--;
	return 0;
}

static int put_frame_grants(struct worker *w, const struct view *v,
			    struct conn *c, uint32_t req, uint16_t flags,
			    uint32_t ttl, uint32_t n)
{
	size_t len, need = SL_PROTO_HDR_LEN + SL_PROTO_GRANTS_FIXED +
			   (size_t)n * SL_PROTO_GRANT_LEN;
	int ret = out_reserve(w, c, need);

	if (ret)
		return ret;
	ret = sl_proto_put_grants(c->out + c->out_len, c->out_cap - c->out_len,
				  req, flags, ttl, v->role.term, w->grants, n,
				  &len);
	return ret ? ret : out_commit(c, len);
}

/* Refill the namespace's SYNC budget; false when it is spent. */
static bool ns_admit(struct sl_tokend *td, struct ns *ns, uint64_t now)
{
	double burst = td->cfg.ns_rate / 5.0 + 1;
	bool ok = true;

	if (!td->cfg.ns_rate)
		return true;
	pthread_mutex_lock(&ns->lock);
	if (now > ns->tokens_at) {
		ns->tokens +=
			(now - ns->tokens_at) * (td->cfg.ns_rate / 1000.0);
		ns->tokens_at = now;
	}
	if (ns->tokens > burst)
		ns->tokens = burst;
	if (ns->tokens < 1)
		ok = false;
	else
		ns->tokens -= 1;
	pthread_mutex_unlock(&ns->lock);
	return ok;
}

static int on_sync(struct worker *w, struct conn *c, const struct sl_msg *m,
		   uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct sl_flow_report r;
	struct view v;
	uint32_t i;
	int ret;

	view_get(td, &v);
	/* a fresh clock: the process may have been stopped mid-batch */
	if (!serving(&v, sl_now_ms()))
		return redirect_conn(w, &v, c, m->req_id, now);
	if (LOAD(c->replaced)) /* the new session's worker closes it soon */
		return fail_conn(w, c, m->req_id, SL_ERR_REPLACED, now);
	w->st.syncs++;
	STORE(c->holds_until, now + td->cfg.ttl_ms);
	if (v.draining) {
		w->st.drain_replies++;
		return put_frame_grants(w, &v, c, m->req_id, SL_SRV_DRAIN, 0,
					0);
	}
	if (!ns_admit(td, c->ns, now)) {
		/* Overloaded: the leases in force stay right; never push
		 * clients into fallback. */
		w->st.keep_replies++;
		return put_frame_grants(w, &v, c, m->req_id, SL_SRV_KEEP,
					td->cfg.ttl_ms, 0);
	}
	for (i = 0; i < m->sync.n; i++) {
		struct sl_flow_grant *g = &w->grants[i];
		struct flow *f;

		sl_proto_report(m, i, &r);
		f = find_flow(c->ns, r.flow_id);
		memset(g, 0, sizeof(*g));
		g->flow_id = r.flow_id;
		if (!f) {
			/* Another namespace's flow looks exactly like this. */
			g->flags = SL_GRANT_UNKNOWN;
			w->st.unknown_flows++;
			continue;
		}
		pthread_mutex_lock(&f->lock);
		ret = grant_flow(w, &v, c, f, &r, now, g);
		pthread_mutex_unlock(&f->lock);
		if (ret)
			return ret;
	}
	w->st.flow_updates += m->sync.n;
	return put_frame_grants(w, &v, c, m->req_id, 0, td->cfg.ttl_ms,
				m->sync.n);
}

static int on_hello(struct worker *w, struct conn *c, const struct sl_msg *m)
{
	size_t len;
	int ret;

	w->st.hellos++;
	/* Unknown namespaces get a challenge too, and fail at AUTH: the
	 * answer does not tell which namespaces exist. */
	c->ns = find_ns(w->td, m->hello.ns, m->hello.ns_len);
	memcpy(c->ns_name, m->hello.ns, m->hello.ns_len);
	c->ns_len = m->hello.ns_len;
	memcpy(c->node_name, m->hello.node, m->hello.node_len);
	c->node_name[m->hello.node_len] = '\0';
	c->node_len = m->hello.node_len;
	memcpy(c->peer_nonce, m->hello.nonce, SL_PROTO_NONCE_LEN);
	ret = sl_proto_nonce(c->nonce);
	if (ret)
		return ret;
	ret = out_reserve(w, c, SL_PROTO_HDR_LEN + SL_PROTO_NONCE_LEN);
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

/*
 * A node id is a claim: the session holding it keeps it until a TTL
 * after its last SYNC; only then may another take it over, and the old
 * one is told so and closed by its worker. Under the namespace's lock:
 * the holder cannot go meanwhile.
 */
static int claim_node(struct worker *w, struct conn *c, struct ns *ns,
		      int node, uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct node *nd = node_at(ns, node);
	struct conn *old = nd->conn;

	if (old && LOAD(old->state) == CONN_READY &&
	    now < LOAD(old->holds_until)) {
		w->st.refused_node_held++;
		pr_info("tokend: namespace '%s': node '%s' is held by a live "
			"session; refusing another", ns->name, c->node_name);
		return -EBUSY;
	}
	/* sessions have their own budget: handshakes cannot starve it */
	if (!old && LOAD(td->sessions) >= td->cfg.max_conns) {
		w->st.refused_busy++;
		return -EBUSY;
	}
	/* closed by its worker's next turn, not here: closing takes the
	 * namespace's lock this holds */
	if (old) {
		STORE(old->replaced, true);
		sl_tokend_command_worker(old->w, 'p');
	}
	nd->conn = c;
	nd->released_at = 0;
	return 0;
}

static int on_auth(struct worker *w, struct conn *c, const void *frame,
		   size_t flen, const struct sl_msg *m, uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct ns *ns = c->ns;
	struct view v;
	size_t len;
	int node, ret;

	if (!auth_check(td, c, frame, flen, m)) {
		sl_proto_session_clear(&c->keys);
		w->st.auth_failed++;
		pr_info("tokend: authentication failed for node '%s'",
			c->node_name);
		return fail_conn(w, c, m->req_id, SL_ERR_AUTH, now);
	}
	pthread_mutex_lock(&ns->lock);
	node = intern_node(td, ns, c->node_name);
	ret = node < 0 ? node : claim_node(w, c, ns, node, now);
	pthread_mutex_unlock(&ns->lock);
	if (node == -ENOSPC) {
		w->st.refused_nodes++;
		pr_warn("tokend: namespace '%s' has %u nodes; refusing '%s'",
			ns->name, td->cfg.max_nodes, c->node_name);
	}
	if (ret == -ENOSPC || ret == -EBUSY)
		return fail_conn(w, c, m->req_id, SL_ERR_BUSY, now);
	if (ret)
		return ret;
	c->node = node;
	c->keyed = true;
	hs_del(w, c);
	c->session = true;
	ADD(td->sessions, 1);
	ADD(w->sessions, 1);
	view_get(td, &v);
	if (!serving(&v, now))
		return redirect_conn(w, &v, c, m->req_id, now);
	ret = out_reserve(w, c, SL_PROTO_HDR_LEN + 16);
	if (ret)
		return ret;
	sl_proto_put_auth_ok(c->out + c->out_len, c->out_cap - c->out_len,
			     m->req_id, td->cfg.ttl_ms, td->cfg.sync_ms,
			     v.role.term, &len);
	STORE(c->holds_until, now + td->cfg.ttl_ms);
	STORE(c->state, CONN_READY);
	c->deadline = 0;
	w->st.auth_ok++;
	return out_commit(c, len);
}

/* One decoded frame; -errno drops the connection without a word. */
static int on_frame(struct worker *w, struct conn *c, const void *frame,
		    size_t len, const struct sl_msg *m, uint64_t now)
{
	if (m->type == SL_MSG_ERROR)
		return -ECONNRESET;
	if (c->state == CONN_HELLO && m->type == SL_MSG_HELLO)
		return on_hello(w, c, m);
	if (c->state == CONN_AUTH && m->type == SL_MSG_AUTH)
		return on_auth(w, c, frame, len, m, now);
	if (c->state == CONN_READY && m->type == SL_MSG_SYNC) {
		/* a replayed, reordered or rewritten SYNC is never answered */
		if (sl_proto_open(&c->keys, frame, len, m)) {
			w->st.integrity++;
			return fail_conn(w, c, m->req_id, SL_ERR_INTEGRITY,
					 now);
		}
		return on_sync(w, c, m, now);
	}
	w->st.unexpected++;
	return fail_conn(w, c, m->req_id, SL_ERR_UNEXPECTED, now);
}

/* Complete frames in the input buffer, in order. */
static int process_input(struct worker *w, struct conn *c, uint64_t now)
{
	size_t off = 0;
	int ret = 0;

	while (c->state != CONN_CLOSING && c->in_len - off >= 4) {
		struct sl_msg m;
		uint32_t len;

		ret = sl_proto_frame_len(c->in + off, c->in_len - off, &len);
		if (ret) {
			w->st.malformed++;
			return fail_conn(w, c, 0, SL_ERR_MALFORMED, now);
		}
		if (c->in_len - off < len)
			break;
		ret = sl_proto_decode(c->in + off, len, &m);
		if (ret) {
			w->st.malformed++;
			return fail_conn(w, c, 0,
					 ret == -EPROTONOSUPPORT
						 ? SL_ERR_VERSION
						 : SL_ERR_MALFORMED,
					 now);
		}
		ret = on_frame(w, c, c->in + off, len, &m, now);
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

static int on_readable(struct worker *w, struct conn *c, uint64_t now)
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
	return process_input(w, c, now);
}

/*
 * A session just authenticated at worker 0 goes to the worker serving
 * the fewest, to be polled there from now on (what it sent meanwhile
 * waits in its socket or its input buffer).
 */
static void hand_over(struct worker *w, struct conn *c)
{
	struct sl_tokend *td = w->td;
	struct worker *to = w;

	for (uint32_t i = 1; i < td->n_w; i++)
		if (LOAD(td->w[i].sessions) < LOAD(to->sessions))
			to = &td->w[i];
	if (to == w)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	conn_unlink(w, c);
	ADD(w->sessions, -1);
	ADD(to->sessions, 1);
	c->w = to;
	pthread_mutex_lock(&to->inbox_lock);
	c->next = to->inbox;
	to->inbox = c;
	pthread_mutex_unlock(&to->inbox_lock);
	sl_tokend_command_worker(to, 'a');
}

/* The sessions handed over to w: polled, and what they sent answered. */
static void adopt(struct worker *w, uint64_t now)
{
	struct conn *c, *next;

	pthread_mutex_lock(&w->inbox_lock);
	c = w->inbox;
	w->inbox = NULL;
	pthread_mutex_unlock(&w->inbox_lock);
	for (; c; c = next) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

		next = c->next;
		conn_link(w, c);
		c->events = EPOLLIN;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
			conn_close(w, c);
			continue;
		}
		send_or_close(w, c, process_input(w, c, now));
	}
}

static void on_conn_event(struct worker *w, struct conn *c, uint32_t ev,
			  uint64_t now)
{
	int ret = 0;

	if (c->dead)
		return;
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR) && c->state != CONN_CLOSING)
		ret = on_readable(w, c, now);
	else if (ev & (EPOLLHUP | EPOLLERR))
		ret = -ECONNRESET;
	if (!ret)
		ret = flush(c);
	if (ret == -ENOBUFS)
		w->st.dropped_slow++;
	if (ret) {
		conn_close(w, c);
		return;
	}
	conn_update(w, c);
	if (!c->dead && c->state == CONN_READY && !c->placed) {
		c->placed = true; /* once, right after AUTH_OK */
		if (w->td->n_w > 1)
			hand_over(w, c);
	}
}

/* The oldest handshake makes room for a newer connection. */
static bool evict_handshake(struct worker *w)
{
	if (!w->hs_old)
		return false;
	w->st.evicted++;
	conn_close(w, w->hs_old);
	return true;
}

/*
 * accept4 found no free fd. A handshake makes room; without one, the
 * spare fd takes the connection and closes it, so that the listener does
 * not stay readable and spin; without a spare either, the listener rests.
 * false: accept no more for now.
 */
static bool out_of_fds(struct worker *w, int err, uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct epoll_event ev = {.data.ptr = &td->lfd};
	int fd;

	w->st.fd_exhausted++;
	if (!td->fd_logged_at || now - td->fd_logged_at >= 10000) {
		pr_warn("tokend: accept: %s (%llu times so far): the oldest "
			"handshakes make room; raise the fd limit above "
			"--max-conns + --max-handshakes", strerror(err),
			(unsigned long long)w->st.fd_exhausted);
		td->fd_logged_at = now;
	}
	if (evict_handshake(w))
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
	epoll_ctl(w->epfd, EPOLL_CTL_MOD, td->lfd, &ev);
	return false;
}

static void accept_resume(struct worker *w)
{
	struct sl_tokend *td = w->td;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &td->lfd};

	td->accept_paused_until = 0;
	if (td->spare_fd < 0)
		td->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	epoll_ctl(w->epfd, EPOLL_CTL_MOD, td->lfd, &ev);
}

static void on_accept(struct worker *w, uint64_t now)
{
	struct sl_tokend *td = w->td;

	for (int i = 0; i < ACCEPT_BURST; i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd, one = 1;
		struct conn *c;

		fd = accept4(td->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			if (!out_of_fds(w, errno, now))
				return;
			continue;
		}
		if (fd < 0)
			return;
		w->st.accepted++;
		if (w->stopping) {
			uint8_t b[SL_PROTO_HDR_LEN + 4];
			size_t len;

			/* Best effort: the socket buffer is empty. */
			sl_proto_put_error(b, sizeof(b), 0, SL_ERR_BUSY, &len);
			if (send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				pr_debug("tokend: refusing: %s",
					 strerror(errno));
			close(fd);
			w->st.refused_busy++;
			continue;
		}
		/* unauthenticated peers take turns, never a session's place */
		if (w->st.handshakes >= td->cfg.max_handshakes)
			evict_handshake(w);
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
		c->w = w;
		c->in_cap = IN_INIT;
		c->state = CONN_HELLO;
		c->deadline = now + td->cfg.handshake_ms;
		c->events = ev.events;
		ev.data.ptr = c;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			free(c->in);
			free(c);
			close(fd);
			continue;
		}
		conn_link(w, c);
		hs_add(w, c);
	}
}

static void lock_all(struct sl_tokend *td)
{
	for (uint32_t i = 0; i < td->n_w; i++)
		pthread_mutex_lock(&td->w[i].lock);
	pthread_mutex_lock(&td->bal_lock);
}

static void unlock_all(struct sl_tokend *td)
{
	pthread_mutex_unlock(&td->bal_lock);
	for (uint32_t i = td->n_w; i--;)
		pthread_mutex_unlock(&td->w[i].lock);
}

/* Every flow's holders and reservations, each under its flow's lock. */
static void forget_flows(struct sl_tokend *td)
{
	for (uint32_t i = 0; i < td->n_ns; i++) {
		for (uint32_t j = 0; j < td->ns[i].n_flows; j++) {
			struct flow *f = &td->ns[i].flows[j];

			pthread_mutex_lock(&f->lock);
			forget_flow(f);
			f->have_level = false;
			pthread_mutex_unlock(&f->lock);
		}
	}
}

/* The command to every other worker. */
static void tell_workers(struct worker *w, char cmd)
{
	for (uint32_t i = 0; i < w->td->n_w; i++)
		if (&w->td->w[i] != w)
			sl_tokend_command_worker(&w->td->w[i], cmd);
}

/* Push TTL 0 to w's clients; later SYNCs get the same. */
static void drain_conns(struct worker *w)
{
	struct view v;
	struct conn *c, *next;

	view_get(w->td, &v);
	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_READY)
			continue;
		send_or_close(w, c,
			      put_frame_grants(w, &v, c, 0, SL_SRV_DRAIN, 0,
					       0));
	}
}

/* Every lease ends now (worker 0): SYNCs are answered DRAIN from here. */
static void drain(struct worker *w)
{
	struct sl_tokend *td = w->td;

	pthread_mutex_lock(&td->role_lock);
	if (td->in_force.draining) {
		pthread_mutex_unlock(&td->role_lock);
		return;
	}
	td->in_force.draining = true;
	pthread_mutex_unlock(&td->role_lock);
	pr_info("tokend: draining: every lease ends now");
	drain_conns(w);
	tell_workers(w, 'D');
	forget_flows(td);
}

/* Every READY client of w goes to the leader there is. */
static void redirect_conns(struct worker *w, uint64_t now)
{
	struct conn *c, *next;
	struct view v;

	view_get(w->td, &v);
	for (c = w->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_READY)
			continue;
		send_or_close(w, c, redirect_conn(w, &v, c, 0, now));
	}
}

/*
 * The role asked for, acted on by worker 0. A new term forgets every
 * holder, as a restarted server knows none, and learns for learn_ms:
 * clients may still hold the last leader's leases; only then are SYNCs
 * answered under it. Deposed, every client goes to the leader there is.
 */
static void on_role(struct worker *w, uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct sl_tokend_role r;
	bool elected, deposed;

	pthread_mutex_lock(&td->role_lock);
	r = td->role;
	pthread_mutex_unlock(&td->role_lock);
	elected = r.leader && (!td->acted.leader || r.term != td->acted.term);
	deposed = !r.leader && td->acted.leader;
	if (elected) {
		forget_flows(td);
		td->terms++;
		pr_info("tokend: leader, term %llu: learning for %u ms",
			(unsigned long long)r.term, td->cfg.learn_ms);
	}
	pthread_mutex_lock(&td->role_lock);
	td->in_force.role = r;
	if (elected)
		td->in_force.start = now;
	pthread_mutex_unlock(&td->role_lock);
	if (deposed) {
		pr_info("tokend: no longer the leader (term %llu): "
			"redirecting clients to '%s'",
			(unsigned long long)td->acted.term, r.leader_addr);
		redirect_conns(w, now);
		tell_workers(w, 'X');
	}
	td->acted = r;
}

/* w's sessions whose node id a newer session took: told and closed. */
static void close_replaced(struct worker *w, uint64_t now)
{
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (LOAD(c->replaced) && c->state != CONN_CLOSING)
			send_or_close(w, c,
				      fail_conn(w, c, 0, SL_ERR_REPLACED, now));
	}
}

static void on_ctl(struct worker *w, uint64_t now)
{
	char cmd[64];
	ssize_t n = read(w->ctl[0], cmd, sizeof(cmd));
	bool first = w == w->td->w;

	for (ssize_t i = 0; i < n; i++) {
		switch (cmd[i]) {
		case SL_TOKEND_DRAIN:
			if (first)
				drain(w);
			break;
		case SL_TOKEND_STOP:
			w->stopping = true;
			break;
		case SL_TOKEND_ROLE:
			if (first)
				on_role(w, now);
			break;
		case 'D': /* worker 0 drained: this one's clients */
			drain_conns(w);
			break;
		case 'X': /* worker 0 was deposed: this one's clients */
			redirect_conns(w, now);
			break;
		case 'a':
			adopt(w, now);
			break;
		case 'p':
			close_replaced(w, now);
			break;
		}
	}
}

/* Deadlines of w's connections, a few times per TTL. */
static void sweep(struct worker *w, uint64_t now)
{
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		next = c->next;
		if (!c->deadline || now < c->deadline)
			continue;
		w->st.timed_out++;
		if (c->state == CONN_CLOSING)
			conn_close(w, c);
		else
			send_or_close(w, c,
				      fail_conn(w, c, 0, SL_ERR_TIMEOUT, now));
	}
	w->last_sweep = now;
}

/* Serve until stopped; then tell connected clients, best effort. */
static int worker_loop(struct worker *w)
{
	struct sl_tokend *td = w->td;
	struct epoll_event ev[EVENTS];
	int ret = 0;

	while (!w->stopping) {
		uint64_t now;
		int n, i;

		n = epoll_wait(w->epfd, ev, EVENTS, td->tick);
		if (n < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		pthread_mutex_lock(&w->lock);
		now = sl_now_ms();
		for (i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &td->lfd)
				on_accept(w, now);
			else if (p == &w->ctl)
				on_ctl(w, now);
			else
				on_conn_event(w, p, ev[i].events, now);
		}
		if (td->accept_paused_until && w == td->w &&
		    now >= td->accept_paused_until)
			accept_resume(w);
		if (now - w->last_sweep >= (uint64_t)td->tick)
			sweep(w, now);
		reap(w);
		pthread_mutex_unlock(&w->lock);
	}
	pthread_mutex_lock(&w->lock);
	adopt(w, sl_now_ms()); /* handed over at the last moment */
	while (w->conns) {
		struct conn *c = w->conns;

		if (c->state == CONN_READY &&
		    !fail_conn(w, c, 0, SL_ERR_SHUTDOWN, sl_now_ms()))
			flush(c);
		conn_close(w, c);
	}
	reap(w);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int ret = worker_loop(w);

	if (ret)
		pr_err("tokend: worker: epoll: %s", strerror(-ret));
	return NULL;
}

/* Holders of node id in any flow of ns (under ns's lock). */
static bool node_held(const struct ns *ns, uint32_t id)
{
	bool held = false;

	for (uint32_t j = 0; j < ns->n_flows && !held; j++) {
		struct flow *f = &ns->flows[j];

		pthread_mutex_lock(&f->lock);
		held = id < f->h_cap && (f->h[id].live_pos != NO_POS ||
					 f->h[id].gone_pos != NO_POS);
		pthread_mutex_unlock(&f->lock);
	}
	return held;
}

/*
 * Node ids no session has held for a lease and a reservation's time: by
 * then no flow holds them (checked all the same), and they go, so that a
 * fleet renaming its hosts is never refused for the names it dropped.
 */
static void gc_nodes(struct sl_tokend *td, uint64_t now)
{
	uint64_t idle = (uint64_t)td->cfg.ttl_ms + td->cfg.forget_ms +
			2 * td->tick;

	for (uint32_t i = 0; i < td->n_ns; i++) {
		struct ns *ns = &td->ns[i];

		pthread_mutex_lock(&ns->lock);
		for (uint32_t id = 0; id < ns->top; id++) {
			struct node *nd = node_at(ns, id);

			if (!nd->used || nd->conn || now < nd->released_at ||
			    now - nd->released_at < idle ||
			    node_held(ns, id) || free_node(ns, id))
				continue;
			td->nodes_freed++;
		}
		pthread_mutex_unlock(&ns->lock);
	}
}

/* Leases that ended, large flows' water levels, node ids let go. */
static void balance(struct sl_tokend *td, uint64_t now)
{
	bool expire = now - td->last_expire >= (uint64_t)td->tick;

	for (uint32_t i = 0; i < td->n_ns; i++) {
		struct ns *ns = &td->ns[i];

		for (uint32_t j = 0; j < ns->n_flows; j++) {
			struct flow *f = &ns->flows[j];

			if (expire) {
				pthread_mutex_lock(&f->lock);
				expire_flow(td, ns, f, now);
				pthread_mutex_unlock(&f->lock);
			}
			fill_large(td, f, now);
		}
	}
	if (expire)
		td->last_expire = now;
	if (now - td->last_gc >= 1000) {
		gc_nodes(td, now);
		td->last_gc = now;
	}
}

static void *balancer_main(void *arg)
{
	struct sl_tokend *td = arg;
	int period = td->cfg.rebalance_ms < (uint32_t)td->tick
			     ? (int)td->cfg.rebalance_ms : td->tick;
	struct pollfd p = {.fd = td->bal_ctl[0], .events = POLLIN};

	if (period < 5)
		period = 5;
	for (;;) {
		if (poll(&p, 1, period) > 0)
			break; /* stop */
		pthread_mutex_lock(&td->bal_lock);
		balance(td, sl_now_ms());
		pthread_mutex_unlock(&td->bal_lock);
	}
	return NULL;
}

int sl_tokend_run(struct sl_tokend *td)
{
	uint32_t started = 1;
	bool balancer;
	int ret = 0;
	char b = 's';

	balancer = !pthread_create(&td->bal_thread, NULL, balancer_main, td);
	for (; balancer && started < td->n_w; started++)
		if (pthread_create(&td->w[started].thread, NULL, worker_main,
				   &td->w[started]))
			break;
	if (!balancer || started < td->n_w) {
		pr_err("tokend: cannot start %u threads", td->n_w + 1);
		ret = -EAGAIN;
		td->w[0].stopping = true;
	}
	if (!ret)
		ret = worker_loop(&td->w[0]);
	for (uint32_t i = 1; i < started; i++) {
		sl_tokend_command_worker(&td->w[i], SL_TOKEND_STOP);
		pthread_join(td->w[i].thread, NULL);
	}
	if (balancer) {
		if (write(td->bal_ctl[1], &b, 1) < 0)
			pr_debug("tokend: balancer: %s", strerror(errno));
		pthread_join(td->bal_thread, NULL);
	}
	return ret;
}

static void sl_tokend_command_worker(struct worker *w, char cmd)
{
	ssize_t n = write(w->ctl[1], &cmd, 1);

	(void)n; /* a full pipe already holds a command to act on */
}

void sl_tokend_command(struct sl_tokend *td, enum sl_tokend_cmd cmd)
{
	sl_tokend_command_worker(&td->w[0], cmd);
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

/* The node tables of n namespaces. */
static void free_nodes(struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t k = 0; v[i].chunk && k <= v[i].top / NODE_CHUNK;
		     k++)
			free(v[i].chunk[k]);
		free(v[i].chunk);
		free(v[i].free_ids);
		sl_index_free(&v[i].by_name);
		pthread_mutex_destroy(&v[i].lock);
	}
}

static void free_flows(struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < v[i].n_flows; j++) {
			pthread_mutex_destroy(&v[i].flows[j].lock);
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
		pthread_mutex_init(&v[i].lock, NULL); /* unlocked: all locks */
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
			pthread_mutex_init(&ns->lock, NULL);
			ns->chunk = calloc(td->cfg.max_nodes / NODE_CHUNK + 1,
					   sizeof(*ns->chunk));
			if (!ns->chunk || sl_index_init(&ns->by_name, 64)) {
				free_nodes(v + td->n_ns, n - td->n_ns);
				free(v);
				return -ENOMEM;
			}
		}
		ns->n_flows++;
	}
	for (i = 0; i < n; i++) {
		v[i].flows = calloc(v[i].n_flows + 1, sizeof(*v[i].flows));
		if (!v[i].flows) {
			free_flows(v, n);
			free_nodes(v + td->n_ns, n - td->n_ns);
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
		pthread_mutex_init(&f->lock, NULL);
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
			free_nodes(v + td->n_ns, n - td->n_ns);
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
	pthread_mutex_init(&to->lock, NULL); /* unlocked: all locks held */
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
	for (uint32_t k = 0; k < td->n_w; k++) {
		struct worker *w = &td->w[k];

		pthread_mutex_lock(&w->inbox_lock);
		for (struct conn *c = w->conns; c; c = c->next)
			if (c->ns)
				c->ns = v + (c->ns - td->ns);
		for (struct conn *c = w->inbox; c; c = c->next)
			if (c->ns)
				c->ns = v + (c->ns - td->ns);
		pthread_mutex_unlock(&w->inbox_lock);
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

	lock_all(td);
	ret = build_flows(td, rs, &v, &n, err, errlen);
	if (!ret)
		install_flows(td, v, n);
	unlock_all(td);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}

/* Worker i's epoll, control pipe and buffers; -errno. */
static int worker_init(struct sl_tokend *td, uint32_t i)
{
	struct worker *w = &td->w[i];
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->ctl};

	w->td = td;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->inbox_lock, NULL);
	w->last_sweep = sl_now_ms();
	w->grants = calloc(SL_PROTO_MAX_REPORTS, sizeof(*w->grants));
	if (!w->grants)
		return -ENOMEM;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0 || pipe2(w->ctl, O_NONBLOCK | O_CLOEXEC) ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ctl[0], &ev))
		return -errno;
	return 0;
}

static void worker_free(struct worker *w)
{
	while (w->conns)
		conn_close(w, w->conns);
	while (w->inbox) {
		struct conn *c = w->inbox;

		w->inbox = c->next;
		conn_link(w, c);
		conn_close(w, c);
	}
	reap(w);
	free(w->scratch);
	free(w->needs);
	free(w->grants);
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->ctl[0] >= 0)
		close(w->ctl[0]);
	if (w->ctl[1] >= 0)
		close(w->ctl[1]);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->inbox_lock);
}

int sl_tokend_new(const struct sl_tokend_cfg *cfg, const struct sl_ruleset *rs,
		  const struct sl_secrets *secrets, struct sl_tokend **out,
		  char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	struct sl_tokend *td;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	socklen_t sl;
	int one = 1, ret;

	if (!cfg->ttl_ms || !cfg->sync_ms || cfg->sync_ms >= cfg->ttl_ms ||
	    !cfg->max_conns || !cfg->max_handshakes ||
	    cfg->out_max < 2 * SL_PROTO_MAX_FRAME ||
	    !cfg->handshake_ms || !cfg->max_nodes ||
	    cfg->threads > SL_TOKEND_MAX_THREADS) {
		snprintf(err, errlen,
			 "bad settings: need 0 < sync period < lease TTL, "
			 "max sessions, handshakes and nodes > 0, output "
			 "bound >= %u, threads <= %u",
			 2 * SL_PROTO_MAX_FRAME, SL_TOKEND_MAX_THREADS);
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
	if (!td->cfg.threads)
		td->cfg.threads = cpus < 1 ? 1
				  : cpus > SL_TOKEND_MAX_THREADS
					  ? SL_TOKEND_MAX_THREADS
					  : cpus;
	td->tick = cfg->ttl_ms / 4;
	if (td->tick < 10)
		td->tick = 10;
	if (td->tick > 250)
		td->tick = 250;
	pthread_mutex_init(&td->bal_lock, NULL);
	pthread_mutex_init(&td->role_lock, NULL);
	td->auth = secrets != NULL;
	td->lfd = td->spare_fd = td->bal_ctl[0] = td->bal_ctl[1] = -1;
	td->w = calloc(td->cfg.threads, sizeof(*td->w));
	if (!td->w) {
		ret = -ENOMEM;
		goto fail;
	}
	for (; td->n_w < td->cfg.threads; td->n_w++) {
		td->w[td->n_w].epfd = -1;
		td->w[td->n_w].ctl[0] = td->w[td->n_w].ctl[1] = -1;
		ret = worker_init(td, td->n_w);
		if (ret) {
			td->n_w++;
			snprintf(err, errlen, "epoll: %s", strerror(-ret));
			goto fail;
		}
	}
	if (pipe2(td->bal_ctl, O_NONBLOCK | O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(-ret));
		goto fail;
	}
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
	    listen(td->lfd, 4096) ||
	    getsockname(td->lfd, (struct sockaddr *)&ss, &sl)) {
		ret = -errno;
		snprintf(err, errlen, "listen on %s: %s", cfg->listen,
			 strerror(-ret));
		goto fail;
	}
	td->port = ntohs(ss.ss_family == AF_INET
				 ? ((struct sockaddr_in *)&ss)->sin_port
				 : ((struct sockaddr_in6 *)&ss)->sin6_port);
	/* worker 0 accepts and authenticates */
	ev.data.ptr = &td->lfd;
	if (epoll_ctl(td->w[0].epfd, EPOLL_CTL_ADD, td->lfd, &ev)) {
		ret = -errno;
		goto fail;
	}
	td->last_expire = td->last_gc = td->in_force.start = sl_now_ms();
	td->role.leader = td->acted.leader = td->in_force.role.leader =
		!cfg->elected;
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
	struct sl_tokend_role *f = &td->in_force.role;

	pthread_mutex_lock(&td->role_lock);
	td->role = *r;
	/* a renewal (or a new leader's address) is in force at once; a
	 * change of term or leadership once worker 0 acted on it */
	if (r->leader == f->leader && r->term == f->term)
		*f = *r;
	pthread_mutex_unlock(&td->role_lock);
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
	lock_all(td);
	td->secrets = secrets;
	for (size_t i = 0; i < td->n_ns; i++) {
		struct ns *ns = &td->ns[i];

		ns->secret = sl_secrets_find(secrets, ns->name);
		if (!ns->secret)
			pr_warn("tokend: no secret for namespace '%s': its "
				"new clients will be refused", ns->name);
	}
	unlock_all(td);
	return 0;
}

/* Every worker's counters, summed: under every lock. */
static void stats_sum(const struct sl_tokend *td, struct sl_tokend_stats *st)
{
	/* the counters before conns are uint64_t, summed as an array */
	const size_t n64 = offsetof(struct sl_tokend_stats, conns) /
			   sizeof(uint64_t);
	_Static_assert(offsetof(struct sl_tokend_stats, conns) %
				       sizeof(uint64_t) == 0,
		       "the stats' uint64_t counters come first");

	memset(st, 0, sizeof(*st));
	for (uint32_t i = 0; i < td->n_w; i++) {
		const uint64_t *src = (const uint64_t *)&td->w[i].st;

		for (size_t k = 0; k < n64; k++)
			((uint64_t *)st)[k] += src[k];
		st->conns += td->w[i].st.conns;
		st->handshakes += td->w[i].st.handshakes;
	}
	st->terms = td->terms;
	st->nodes_freed = td->nodes_freed;
}

void sl_tokend_get_stats(struct sl_tokend *td, struct sl_tokend_stats *st)
{
	lock_all(td);
	stats_sum(td, st);
	unlock_all(td);
}

int sl_tokend_get_info(struct sl_tokend *td, struct sl_tokend_info *out)
{
	uint64_t now = sl_now_ms();
	size_t n = 0;
	struct view v;

	memset(out, 0, sizeof(*out));
	/* under every lock: a rule change replaces namespaces and flows */
	lock_all(td);
	for (uint32_t i = 0; i < td->n_ns; i++)
		n += td->ns[i].n_flows;
	out->flows = calloc(n ? n : 1, sizeof(*out->flows));
	out->ns = calloc(td->n_ns ? td->n_ns : 1, sizeof(*out->ns));
	if (!out->flows || !out->ns) {
		unlock_all(td);
		sl_tokend_info_free(out);
		return -ENOMEM;
	}
	stats_sum(td, &out->st);
	view_get(td, &v);
	out->serving = serving(&v, now);
	out->learning = out->serving && now < v.start + td->cfg.learn_ms;
	out->draining = v.draining;
	out->term = v.role.term;
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
	unlock_all(td);
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
	for (uint32_t i = 0; i < td->n_w; i++)
		worker_free(&td->w[i]);
	free(td->w);
	free_flows(td->ns, td->n_ns);
	free_nodes(td->ns, td->n_ns);
	free(td->ns);
	free(td->bal_scratch);
	free(td->bal_needs);
	if (td->lfd >= 0)
		close(td->lfd);
	if (td->spare_fd >= 0)
		close(td->spare_fd);
	for (int i = 0; i < 2; i++)
		if (td->bal_ctl[i] >= 0)
			close(td->bal_ctl[i]);
	pthread_mutex_destroy(&td->bal_lock);
	pthread_mutex_destroy(&td->role_lock);
	free(td);
}
