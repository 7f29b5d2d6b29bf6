// SPDX-License-Identifier: GPL-2.0
/*
 * The token server's connections, from accept to close: buffers and
 * framing, HELLO and AUTH, node ids, SYNC answers, redirects, and the
 * handshakes evicted or refused when sessions or fds run out.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "tokensrv_int.h"

/* ---- connections ---- */

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

void ts_conn_link(struct worker *w, struct conn *c)
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
void ts_conn_close(struct worker *w, struct conn *c)
{
	if (c->dead)
		return;
	if (!c->session) {
		hs_del(w, c);
	} else {
		ADD(w->td->sessions, -1);
	}
	if (c->session && c->ns) {
		struct node *nd;

		pthread_mutex_lock(&c->ns->lock);
		nd = ts_node_at(c->ns, c->node);
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

void ts_reap(struct worker *w)
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
		ts_conn_close(w, c);
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
int ts_flush(struct conn *c)
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
int ts_fail_conn(struct worker *w, struct conn *c, uint32_t req, uint16_t code,
		 uint64_t now)
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
void ts_send_or_close(struct worker *w, struct conn *c, int queued)
{
	if (queued || ts_flush(c))
		ts_conn_close(w, c);
	else
		conn_update(w, c);
}

/* What SYNCs are answered under now. */
void ts_view_get(struct sl_tokend *td, struct view *v)
{
	pthread_mutex_lock(&td->role_lock);
	*v = td->in_force;
	pthread_mutex_unlock(&td->role_lock);
}

/* in_force changed (under role_lock): workers copy it at their next SYNC. */
void ts_view_changed(struct sl_tokend *td)
{
	STORE(td->view_gen, td->view_gen + 1);
}

/* The same as w last copied it, copied again once it changed: a SYNC
 * reads the role's line and writes none. */
static void worker_view(struct worker *w, struct view *v)
{
	struct sl_tokend *td = w->td;

	if (LOAD(td->view_gen) != w->view_gen) {
		pthread_mutex_lock(&td->role_lock);
		w->view = td->in_force;
		w->view_gen = td->view_gen;
		pthread_mutex_unlock(&td->role_lock);
	}
	*v = w->view;
}

/* A leader grants until its etcd lease may have run out, not after. */
bool ts_serving(const struct view *v, uint64_t now)
{
	return v->role.leader && (!v->role.until_ms || now < v->role.until_ms);
}

/* Not the leader (or no longer sure to be): say who is, sealed, and close. */
int ts_redirect_conn(struct worker *w, const struct view *v, struct conn *c,
		     uint32_t req, uint64_t now)
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
		if (!strcmp(ts_node_at(ns, id)->name, node))
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
	nd = ts_node_at(ns, i);
	strcpy(nd->name, node);
	nd->conn = NULL;
	nd->released_at = sl_now_ms();
	nd->used = true;
	ns->n_nodes++;
	return i;
}

/* Let number id go, under the namespace's lock; -ENOMEM leaves it. */
int ts_free_node(struct ns *ns, uint32_t id)
{
	struct node *nd = ts_node_at(ns, id);

	if (ns->n_free == ns->free_cap &&
	    ts_grow_nodes(&ns->free_ids, &ns->free_cap, 64))
		return -ENOMEM;
	sl_index_del(&ns->by_name, sl_fnv1a_str(nd->name), id);
	memset(nd, 0, sizeof(*nd));
	ns->free_ids[ns->n_free++] = id;
	ns->n_nodes--;
	return 0;
}

int ts_put_frame_grants(struct worker *w, const struct view *v, struct conn *c,
			uint32_t req, uint16_t flags, uint32_t ttl, uint32_t n)
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

/*
 * Refill w's share of the namespace's SYNC budget; false when it is
 * spent. Each worker has ns_rate / threads: its sessions are the
 * namespace's nodes it owns, a share of them.
 */
static bool ns_admit(struct worker *w, struct ns *ns, uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct ns_budget *b = &ns->budget[w - td->w];
	double rate = ts_worker_rate(td), burst = ts_worker_burst(td);

	if (!td->cfg.ns_rate)
		return true;
	if (now > b->tokens_at) {
		b->tokens += (now - b->tokens_at) * (rate / 1000);
		b->tokens_at = now;
	}
	if (b->tokens > burst)
		b->tokens = burst;
	if (b->tokens < 1)
		return false;
	b->tokens -= 1;
	return true;
}

static int on_sync(struct worker *w, struct conn *c, const struct sl_msg *m,
		   uint64_t now)
{
	struct sl_tokend *td = w->td;
	struct sl_flow_report r;
	struct view v;
	uint32_t i;
	int ret;

	worker_view(w, &v);
	/* a fresh clock: the process may have been stopped mid-batch */
	if (!ts_serving(&v, sl_now_ms()))
		return ts_redirect_conn(w, &v, c, m->req_id, now);
	if (LOAD(c->replaced)) /* the new session's worker closes it soon */
		return ts_fail_conn(w, c, m->req_id, SL_ERR_REPLACED, now);
	w->st.syncs++;
	STORE(c->holds_until, now + td->cfg.ttl_ms);
	if (v.draining) {
		w->st.drain_replies++;
		return ts_put_frame_grants(w, &v, c, m->req_id, SL_SRV_DRAIN, 0,
					   0);
	}
	if (!ns_admit(w, c->ns, now)) {
		/* Overloaded: the leases in force stay right; never push
		 * clients into fallback. */
		w->st.keep_replies++;
		return ts_put_frame_grants(w, &v, c, m->req_id, SL_SRV_KEEP,
					   td->cfg.ttl_ms, 0);
	}
	for (i = 0; i < m->sync.n; i++) {
		struct sl_flow_grant *g = &w->grants[i];
		struct flow *f;

		sl_proto_report(m, i, &r);
		f = ts_find_flow(c->ns, r.flow_id);
		memset(g, 0, sizeof(*g));
		g->flow_id = r.flow_id;
		if (!f) {
			/* Another namespace's flow looks exactly like this. */
			g->flags = SL_GRANT_UNKNOWN;
			w->st.unknown_flows++;
			continue;
		}
		ret = ts_grant_flow(w, &v, c, f, &r, now, g);
		if (ret)
			return ret;
	}
	w->st.flow_updates += m->sync.n;
	return ts_put_frame_grants(w, &v, c, m->req_id, 0, td->cfg.ttl_ms,
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
	struct node *nd = ts_node_at(ns, node);
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
		ts_command_worker(old->w, 'p');
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
		return ts_fail_conn(w, c, m->req_id, SL_ERR_AUTH, now);
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
		return ts_fail_conn(w, c, m->req_id, SL_ERR_BUSY, now);
	if (ret)
		return ret;
	c->node = node;
	c->part = node % td->n_w;
	c->slot = node / td->n_w;
	c->keyed = true;
	hs_del(w, c);
	c->session = true;
	ADD(td->sessions, 1);
	ts_view_get(td, &v);
	if (!ts_serving(&v, now))
		return ts_redirect_conn(w, &v, c, m->req_id, now);
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
			return ts_fail_conn(w, c, m->req_id, SL_ERR_INTEGRITY,
					    now);
		}
		return on_sync(w, c, m, now);
	}
	w->st.unexpected++;
	return ts_fail_conn(w, c, m->req_id, SL_ERR_UNEXPECTED, now);
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
			return ts_fail_conn(w, c, 0, SL_ERR_MALFORMED, now);
		}
		if (c->in_len - off < len)
			break;
		ret = sl_proto_decode(c->in + off, len, &m);
		if (ret) {
			w->st.malformed++;
			return ts_fail_conn(w, c, 0,
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
 * A session just authenticated at worker 0 goes to the worker that owns
 * its node id, to be polled there from now on (what it sent meanwhile
 * waits in its socket or its input buffer): that worker's SYNCs write its
 * own part of each flow only.
 */
static void hand_over(struct worker *w, struct conn *c)
{
	struct sl_tokend *td = w->td;
	struct worker *to = &td->w[c->part];

	if (to == w)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	conn_unlink(w, c);
	c->w = to;
	pthread_mutex_lock(&to->inbox_lock);
	c->next = to->inbox;
	to->inbox = c;
	pthread_mutex_unlock(&to->inbox_lock);
	ts_command_worker(to, 'a');
}

/* The sessions handed over to w: polled, and what they sent answered. */
void ts_adopt(struct worker *w, uint64_t now)
{
	struct conn *c, *next;

	pthread_mutex_lock(&w->inbox_lock);
	c = w->inbox;
	w->inbox = NULL;
	pthread_mutex_unlock(&w->inbox_lock);
	for (; c; c = next) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

		next = c->next;
		ts_conn_link(w, c);
		c->events = EPOLLIN;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
			ts_conn_close(w, c);
			continue;
		}
		ts_send_or_close(w, c, process_input(w, c, now));
	}
}

void ts_on_conn_event(struct worker *w, struct conn *c, uint32_t ev,
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
		ret = ts_flush(c);
	if (ret == -ENOBUFS)
		w->st.dropped_slow++;
	if (ret) {
		ts_conn_close(w, c);
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
	ts_conn_close(w, w->hs_old);
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

void ts_accept_resume(struct worker *w)
{
	struct sl_tokend *td = w->td;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &td->lfd};

	td->accept_paused_until = 0;
	if (td->spare_fd < 0)
		td->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	epoll_ctl(w->epfd, EPOLL_CTL_MOD, td->lfd, &ev);
}

void ts_on_accept(struct worker *w, uint64_t now)
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
		ts_conn_link(w, c);
		hs_add(w, c);
	}
}
