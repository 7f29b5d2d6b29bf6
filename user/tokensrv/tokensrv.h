/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The token server (docs/cluster.md): leases for cluster flows. A module
 * both programs use: `sluice tokend` (user/tokend/) runs it alone, `sluice
 * agent --serve-tokens` embeds it; no signals, no exit.
 */
#ifndef SLUICE_TOKENSRV_H
#define SLUICE_TOKENSRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "params.h"
#include "proto.h"
#include "rules.h"
#include "secrets.h"

/* Defaults; each is a field of struct sl_tokend_cfg and a tokend option. */
#ifndef SL_TOKEND_TTL_MS
#define SL_TOKEND_TTL_MS 1000 /* lease TTL */
#endif
#ifndef SL_TOKEND_SYNC_MS
#define SL_TOKEND_SYNC_MS 100 /* sync period advised to clients */
#endif
/* Sized for a fleet of 10,000 agents (docs/cluster.md, "How far one
 * replica goes"): sessions with room for a quarter more, and SYNCs/s of a
 * namespace twice 10,000 agents at the advised 100 ms. */
#ifndef SL_TOKEND_MAX_CONNS
#define SL_TOKEND_MAX_CONNS 12500 /* authenticated sessions */
#endif
#ifndef SL_TOKEND_MAX_HANDSHAKES
#define SL_TOKEND_MAX_HANDSHAKES 1024 /* connections before AUTH_OK */
#endif
#ifndef SL_TOKEND_ACCEPT_PAUSE_MS
#define SL_TOKEND_ACCEPT_PAUSE_MS 100 /* out of fds, nothing to evict */
#endif
#ifndef SL_TOKEND_NS_RATE
#define SL_TOKEND_NS_RATE 200000 /* SYNC frames/s per namespace */
#endif
#ifndef SL_TOKEND_OUT_MAX
#define SL_TOKEND_OUT_MAX (4 * SL_PROTO_MAX_FRAME) /* per connection */
#endif
#ifndef SL_TOKEND_HANDSHAKE_MS
#define SL_TOKEND_HANDSHAKE_MS 2000 /* accept to AUTH_OK, and closing */
#endif
#ifndef SL_TOKEND_THREADS
#define SL_TOKEND_THREADS 0 /* workers; 0: one per online CPU */
#endif
#ifndef SL_TOKEND_MAX_THREADS
#define SL_TOKEND_MAX_THREADS 64
#endif
#ifndef SL_TOKEND_REBALANCE_MS
#define SL_TOKEND_REBALANCE_MS 25 /* least time between two water fills */
#endif
/* A flow of at most this many holders is water-filled in the SYNC that
 * finds it changed (about 1 us); a larger one by the balancer thread, at
 * most every holders / SL_TOKEND_FILL_PER_MS ms (10,000 holders: 100 ms),
 * so that filling costs a flow about 1 ms of CPU a second at any size. */
#ifndef SL_TOKEND_INLINE_FILL
#define SL_TOKEND_INLINE_FILL 256
#endif
#ifndef SL_TOKEND_FILL_PER_MS
#define SL_TOKEND_FILL_PER_MS 100
#endif
#ifndef SL_TOKEND_FORGET_MS
#define SL_TOKEND_FORGET_MS 600000
#endif
/* Vanished holders' reservations per flow: at most this many, and at most
 * this share of count, so node ids minted by a member of the namespace
 * cannot hold a global flow's count away from the others. */
#ifndef SL_TOKEND_MAX_VANISHED
#define SL_TOKEND_MAX_VANISHED 1024
#endif
#ifndef SL_TOKEND_RESERVE_PCT
#define SL_TOKEND_RESERVE_PCT 50
#endif
#ifndef SL_TOKEND_MAX_NODES
#define SL_TOKEND_MAX_NODES 65536 /* node ids held per namespace */
#endif

struct sl_tokend_cfg {
	const char *listen; /* "ADDR:PORT", "[ADDR6]:PORT"; port 0: any */
	uint32_t ttl_ms;
	uint32_t sync_ms;
	uint32_t learn_ms; /* after start: grant no more than clients hold */
	uint32_t max_conns;	 /* authenticated sessions */
	uint32_t max_handshakes; /* connections before AUTH_OK; the oldest
				  * goes for a new one past it */
	uint32_t ns_rate; /* SYNC frames/s per namespace; 0: no limit */
	uint32_t out_max;
	uint32_t handshake_ms;
	uint32_t rebalance_ms;
	uint32_t max_nodes;
	uint32_t threads; /* workers serving sessions; 0: one per CPU */
	/* a vanished holder's fallback stays reserved this long; 0: none */
	uint32_t forget_ms;
	bool elected; /* a replica: grants nothing until sl_tokend_set_role() */
};

/* The defaults above; learn_ms = ttl_ms. */
void sl_tokend_cfg_default(struct sl_tokend_cfg *cfg);

struct sl_tokend_stats {
	uint64_t accepted;
	uint64_t refused_busy;   /* over max_conns, at AUTH */
	uint64_t refused_nodes;	 /* its namespace is at max_nodes */
	uint64_t nodes_freed;	 /* node ids let go, no session or lease left */
	uint64_t refused_node_held; /* its node id held by a live session */
	uint64_t hellos;
	uint64_t auth_ok;
	uint64_t auth_failed;
	uint64_t malformed;	 /* connections closed for a bad frame */
	uint64_t unexpected;	 /* ... for a frame out of turn */
	uint64_t integrity;	 /* ... for a SYNC that does not open */
	uint64_t timed_out;	 /* handshake or closing past its deadline */
	uint64_t evicted;	 /* handshakes closed for a newer connection */
	uint64_t fd_exhausted;	 /* accept4 failed: EMFILE or ENFILE */
	uint64_t dropped_slow;	 /* output buffer full */
	uint64_t syncs;
	uint64_t flow_updates;	 /* flow entries of the SYNCs answered */
	uint64_t unknown_flows;	 /* ... of no flow it has */
	uint64_t keep_replies;	 /* namespace over its request rate */
	uint64_t drain_replies;	 /* SYNCs answered while draining */
	uint64_t redirects;	 /* not the leader: sent to it, or told none */
	uint64_t terms;		 /* times this server became the leader */
	uint32_t conns;
	uint32_t handshakes;	 /* of conns, not yet authenticated */
};

enum sl_tokend_cmd {
	SL_TOKEND_DRAIN = 'd', /* every lease to TTL 0, keep serving DRAIN */
	SL_TOKEND_STOP = 's',
	SL_TOKEND_ROLE = 'r', /* sl_tokend_set_role() changed the role */
};

/*
 * Whether this server grants (docs/cluster.md, "Replicas"). Without an
 * election it always does, at term 0. A leader grants only before
 * until_ms (sl_now_ms(); 0: no end), the time its etcd lease may run out:
 * checked on every SYNC, so a leader that was paused or cut off from etcd
 * stops by itself. A follower answers every client with a REDIRECT to
 * leader_addr ("" when none is known) and closes.
 */
struct sl_tokend_role {
	bool leader;
	uint64_t term;	  /* the leader's election revision; 0: none */
	uint64_t until_ms;
	char leader_addr[SL_PROTO_ADDR_MAX + 1];
};

struct sl_tokend;

/*
 * Bind and listen, from the cluster rules of rs (at least one) and the
 * secrets (NULL: no authentication, allowed on loopback only); both must
 * outlive the server. Errors are explained in err.
 */
int sl_tokend_new(const struct sl_tokend_cfg *cfg, const struct sl_ruleset *rs,
		  const struct sl_secrets *secrets, struct sl_tokend **out,
		  char *err, size_t errlen);

/* The bound port (for port 0). */
uint16_t sl_tokend_port(const struct sl_tokend *td);

/* Serve until SL_TOKEND_STOP, in the calling thread and cfg.threads - 1
 * more, and a balancer thread; 0, or -errno if epoll fails. */
int sl_tokend_run(struct sl_tokend *td);

/* Ask the running server to drain or stop; async-signal-safe. */
void sl_tokend_command(struct sl_tokend *td, enum sl_tokend_cmd cmd);

/*
 * Authenticate new connections with secrets from now on (those already
 * authenticated stay): a rotation's reload. Safe from any thread, under
 * the server's lock; secrets must outlive the server or the next call.
 * -EINVAL for a server started without secrets (loopback only).
 */
int sl_tokend_set_secrets(struct sl_tokend *td,
			  const struct sl_secrets *secrets);

/*
 * Serve the cluster rules of rs from now on, under the server's lock: a
 * flow that stays (namespace and flow_id) keeps its holders and leases,
 * at its new count from each holder's next sync; a flow that goes is
 * answered UNKNOWN. rs must outlive the server or the next call. On
 * error (-EINVAL: a flow_id twice in a namespace; -ENOMEM) nothing
 * changes.
 */
int sl_tokend_set_rules(struct sl_tokend *td, const struct sl_ruleset *rs,
			char *err, size_t errlen);

/* From any thread: the role from now on. A new term (or leadership after
 * following) starts a learn period, as a restart does. */
void sl_tokend_set_role(struct sl_tokend *td, const struct sl_tokend_role *r);

/* A flow as the metrics see it. */
struct sl_tokend_flow_info {
	char ns[SL_NAME_MAX + 1];
	char rule[SL_NAME_MAX + 1];
	uint32_t flow_id;
	uint64_t count;	  /* the rule's, before any warm-up ramp */
	uint64_t granted; /* the live holders' grants */
	uint32_t holders;
	uint64_t reserved; /* the vanished holders' fallbacks */
	uint32_t vanished;
};

struct sl_tokend_info {
	struct sl_tokend_stats st;
	bool learning, draining;
	bool serving;  /* the leader (always, without an election) */
	uint64_t term; /* the newest leader's term this replica knows */
	size_t n_flows;
	struct sl_tokend_flow_info *flows; /* malloc'd, n_flows */
	size_t n_ns;
	struct sl_tokend_ns_info {
		char name[SL_NAME_MAX + 1];
		uint32_t nodes; /* node ids held, max_nodes at most */
	} *ns;			/* malloc'd, n_ns */
};

/* The counters and every flow, copied under the server's lock; -ENOMEM. */
int sl_tokend_get_info(struct sl_tokend *td, struct sl_tokend_info *out);
void sl_tokend_info_free(struct sl_tokend_info *info);

void sl_tokend_free(struct sl_tokend *td);

/* The server's metric families (user/tokensrv/metrics.c, docs/metrics.md),
 * for `sluice tokend --metrics` and the agent's embedded server; -ENOMEM. */
int sl_tokend_metrics(struct sl_tokend *td, struct sl_metrics *m);

#endif
