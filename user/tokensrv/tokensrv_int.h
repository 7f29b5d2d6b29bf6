/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to the token server: its state, and what its files call of
 * each other. tokensrv.c: the worker threads on epoll, the commands, the
 * server's start, stats and end; session.c: a connection from accept to
 * close (framing, HELLO/AUTH, SYNC answers); flows.c: flows and leases,
 * the balancer thread and the flows built from the rules.
 *
 * Worker 0 accepts and authenticates; a session then moves to the worker
 * that owns its node id (node % threads), which serves its SYNCs. A flow
 * has a part per worker: the holders of that worker's nodes and a share
 * of the count; a SYNC locks its node's part only. The balancer expires
 * leases and water-fills large flows off the SYNC path, and a fill moves
 * the shares between parts. Locks: a worker's own while it handles a
 * batch of events (the balancer's while it runs a pass); under one, a
 * namespace's (its nodes and SYNC budget), or a flow's parts (one, or
 * all in order; a thread holding one part waits for no other), and under
 * those the flow's own lock; the role's alone. Whatever changes every
 * flow or connection (rules, secrets, the copy for metrics) takes every
 * worker's lock in order, then the balancer's.
 */
#ifndef SLUICE_TOKENSRV_INT_H
#define SLUICE_TOKENSRV_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "quota.h"
#include "tokensrv.h"
#include "util.h"

/* What two workers write stays this far apart: the L2 fetches the cache
 * lines next to a missed one, so one line apart still bounces
 * (docs/benchmarks.md, "The token server's grant path over threads"). */
#define TS_APART 256

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
	uint64_t grant;	   /* counted in the flow's outstanding while live */
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

/*
 * The live holders, with what the balancer reads of each beside its node
 * number: its fills and expiry scans walk contiguous arrays, not a cache
 * line of f->h per holder (10,000 holders: 160 KB, not 640 KB).
 */
struct live_set {
	uint64_t *need;	   /* the last demand and its headroom (sl_quota_need) */
	uint64_t *expires; /* ms; the lease ends here */
	uint32_t *node;
	uint32_t n, cap;
};

/*
 * A worker's part of a flow: the holders of the nodes its sessions serve
 * (node n is in part n % n_parts, at h[n / n_parts]) and the share of the
 * flow's count they may hold. A SYNC writes only its node's part, so the
 * workers of one fleet's flows write no line in common (docs/cluster.md,
 * "Threads").
 */
struct part {
	/* what a SYNC reads and writes, in two cache lines */
	pthread_mutex_t lock; /* everything below */
	struct live_set live; /* holders with a lease */
	struct holder *h;
	uint32_t h_cap;
	bool have_level, dirty; /* dirty: a need changed since the last fill */
	uint64_t outstanding; /* sum of live holders' grants */
	uint64_t reserved;    /* sum of vanished holders' reservations */
	uint64_t share;	      /* what outstanding + reserved may reach */
	struct sl_quota_level level; /* the flow's, from its last fill */
	uint64_t level_at;
	struct node_set gone; /* vanished holders with a reservation */
} __attribute__((aligned(TS_APART)));

struct flow {
	/* read at every SYNC; n_live to warm written when holders come and
	 * go, at fills and when a part's share runs short */
	uint32_t id;
	uint32_t n_parts; /* one per worker */
	uint64_t count;
	const struct sl_cluster *cl;
	const struct sl_rule *rule;
	struct part *part;
	uint32_t n_live, n_gone; /* every part's holders and vanished */
	bool changed; /* a holder came or went, or a part ran short */
	bool warm;    /* ramped up, or found busy after a restart */
	/* read when a part's share runs short */
	pthread_mutex_t lock __attribute__((aligned(64)));
	uint64_t shares;   /* sum of the parts' shares; the rest is free */
	uint64_t reserved; /* sum of the parts' reservations */
	uint64_t fills; /* begun (every part locked): the last is current */
	uint64_t warm_start; /* ms; the warm-up ramp runs from here */
} __attribute__((aligned(64)));

struct conn;

/* A node id of a namespace: its slot stays put while it is in use. */
struct node {
	char name[SL_PROTO_NAME_MAX + 1];
	struct conn *conn;    /* the session holding it; NULL: none */
	uint64_t released_at; /* ms; when its last session closed */
	bool used;
};

#define NODE_CHUNK 1024

/* A worker's share of a namespace's SYNC rate: only its SYNCs spend it. */
struct ns_budget {
	double tokens; /* SYNC frames the namespace may still send here */
	uint64_t tokens_at;
} __attribute__((aligned(TS_APART)));

struct ns {
	char name[SL_NAME_MAX + 1];
	const struct sl_secret *secret;
	struct flow *flows; /* sorted by id */
	uint32_t n_flows;
	/* under lock: the node table */
	pthread_mutex_t lock;
	struct node **chunk; /* max_nodes / NODE_CHUNK, filled on demand */
	struct sl_index by_name; /* FNV-1a of a name -> node number */
	uint32_t *free_ids, n_free, free_cap; /* let go, reused first */
	uint32_t n_nodes, top;	    /* in use; numbers ever handed out */
	struct ns_budget *budget;   /* one per worker */
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
	uint32_t part, slot; /* node % threads, node / threads: its flows'
			      * part and its holder's place there */
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

/* What a SYNC is answered under, copied under role_lock. */
struct view {
	struct sl_tokend_role role; /* the role in force */
	uint64_t start;		    /* the learn period runs from here */
	bool draining;
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
	uint64_t last_sweep;
	uint64_t *scratch, *needs; /* water filling */
	size_t scratch_cap;
	struct sl_flow_grant *grants; /* one SYNC's answer */
	struct sl_tokend_stats st;
	bool stopping;
	struct view view; /* in_force as of view_gen */
	uint64_t view_gen;
} __attribute__((aligned(TS_APART))); /* each writes its own counters */

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
	uint64_t view_gen; /* atomic: bumped at each change of in_force */
	struct sl_tokend_role acted; /* the role worker 0 last acted on */
};

/* A worker's share of --ns-rate (SYNCs per second), and its burst. */
static inline double ts_worker_rate(const struct sl_tokend *td)
{
	return (double)td->cfg.ns_rate / td->n_w;
}

static inline double ts_worker_burst(const struct sl_tokend *td)
{
	return ts_worker_rate(td) / 5 + 1;
}

#define LOAD(x)	    __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v)   __atomic_add_fetch(&(x), (v), __ATOMIC_RELAXED)

/* tokensrv.c */
void ts_lock_all(struct sl_tokend *td);
void ts_unlock_all(struct sl_tokend *td);
void ts_command_worker(struct worker *w, char cmd);

/* session.c */
void ts_conn_link(struct worker *w, struct conn *c);
void ts_conn_close(struct worker *w, struct conn *c);
void ts_reap(struct worker *w);
int ts_flush(struct conn *c);
int ts_fail_conn(struct worker *w, struct conn *c, uint32_t req, uint16_t code,
		 uint64_t now);
void ts_send_or_close(struct worker *w, struct conn *c, int queued);
void ts_view_get(struct sl_tokend *td, struct view *v);
void ts_view_changed(struct sl_tokend *td);
bool ts_serving(const struct view *v, uint64_t now);
int ts_redirect_conn(struct worker *w, const struct view *v, struct conn *c,
		     uint32_t req, uint64_t now);
int ts_free_node(struct ns *ns, uint32_t id);
int ts_put_frame_grants(struct worker *w, const struct view *v, struct conn *c,
			uint32_t req, uint16_t flags, uint32_t ttl, uint32_t n);
void ts_adopt(struct worker *w, uint64_t now);
void ts_on_conn_event(struct worker *w, struct conn *c, uint32_t ev,
		      uint64_t now);
void ts_accept_resume(struct worker *w);
void ts_on_accept(struct worker *w, uint64_t now);

/* flows.c */
int ts_grow_nodes(uint32_t **v, uint32_t *cap, uint32_t first);
struct node *ts_node_at(const struct ns *ns, uint32_t id);
struct flow *ts_find_flow(struct ns *ns, uint32_t id);
void ts_forget_flow(struct flow *f);
uint64_t ts_flow_granted(const struct flow *f);
int ts_grant_flow(struct worker *w, const struct view *v, struct conn *c,
		  struct flow *f, const struct sl_flow_report *r, uint64_t now,
		  struct sl_flow_grant *g);
void *ts_balancer_main(void *arg);

/* p's holder of node: a part holds the nodes its worker serves */
static inline struct holder *ts_holder_of(const struct flow *f,
					  struct part *p, uint32_t node)
{
	return &p->h[node / f->n_parts];
}

/* flowset.c */
void ts_free_nodes(struct ns *v, uint32_t n);
void ts_free_flows(struct ns *v, uint32_t n);
int ts_build_flows(struct sl_tokend *td, const struct sl_ruleset *rs,
		   struct ns **out, uint32_t *n_out, char *err, size_t errlen);

#endif
