/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to the cluster sync (cluster.h): its state, and what its files
 * call of each other. cluster.c: the configuration, the flows and the
 * limits written to the data plane, the thread; cluster_session.c: a
 * session with a token server, from resolving its name to the grants of
 * a SYNC, and the redirects and terms of replicas; cluster_status.c: what
 * the CLI and the metrics see.
 */
#ifndef SLUICE_CLUSTER_INT_H
#define SLUICE_CLUSTER_INT_H

#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "lease.h"
#include "metrics.h"
#include "proto.h"

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

/* cluster.c */
struct addrinfo *cluster_numeric_addr(const struct sl_cluster_server *sv);
uint32_t cluster_next_rand(struct sl_cluster_sync *c);
void cluster_resolve_free(struct resolve *r);
void cluster_sess_close(struct sl_cluster_sync *c, struct session *s);
void cluster_measure(struct sl_cluster_sync *c, struct flow *f);

/* cluster_session.c */
const struct sl_cluster_server *
cluster_sess_server(const struct sl_cluster_sync *c, const struct session *s);
void cluster_sess_fail(struct sl_cluster_sync *c, struct session *s,
		       uint64_t now, bool at_once, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int cluster_sess_flush(struct session *s);
void cluster_sess_hello(struct sl_cluster_sync *c, struct session *s,
			uint64_t now);
void cluster_sess_read(struct sl_cluster_sync *c, struct session *s,
		       uint64_t now);
uint64_t cluster_sess_drive(struct sl_cluster_sync *c, struct session *s,
			    uint64_t now);

#endif
