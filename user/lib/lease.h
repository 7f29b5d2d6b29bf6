/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One cluster flow on the agent side (docs/cluster.md): the state machine
 * cluster -> lease_expired -> fallback -> cluster and the threshold it
 * puts in force. Pure functions of the events and an injected clock; the
 * caller (user/cluster.c) writes sl_lease.limit into the map whenever
 * sl_lease.dirty is set.
 */
#ifndef SLUICE_LEASE_H
#define SLUICE_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "rules.h"

/* Defaults (fields of struct sl_lease_cfg). */
#ifndef SL_LEASE_MISS_LIMIT
#define SL_LEASE_MISS_LIMIT 3 /* missed syncs before the lease is dropped */
#endif
#ifndef SL_LEASE_GOOD_NEEDED
#define SL_LEASE_GOOD_NEEDED 3 /* good syncs in a row to leave fallback */
#endif

/* The `pass` fallback: a threshold no host reaches (1e11/s), so the flow
 * keeps a limit in the map that never binds. */
#define SL_LEASE_NO_LIMIT SL_MAX_COUNT

enum sl_lease_state {
	SL_LEASE_FALLBACK = 0, /* no valid lease: the rule's fallback */
	SL_LEASE_CLUSTER,      /* a lease in force: its grant */
	SL_LEASE_EXPIRED,      /* lease gone, fallback not yet written */
};

struct sl_lease_cfg {
	uint32_t sync_ms;     /* the sync period in force */
	uint32_t miss_limit;  /* N */
	uint32_t good_needed; /* K */
};

struct sl_lease {
	enum sl_lease_state state;
	uint64_t since_ns;     /* time of the last state change */
	uint64_t limit;	       /* the threshold that should be in force */
	bool dirty;	       /* limit not yet written to the map */
	uint64_t grant;	       /* last grant received (0: none yet) */
	uint64_t lease_end_ns; /* the lease in force ends (cluster only) */
	uint64_t last_ok_ns;   /* last answer that renewed the lease */
	uint64_t last_lease;   /* last grant enforced under a lease; 0 none */
	bool has_last_lease;
	uint32_t holders;      /* last known live holders; 0: unknown */
	uint32_t good;	       /* good answers in a row (fallback) */
};

/*
 * What a node enforces without a lease (rule r, node id node). holders 0
 * means unknown (no answer yet): share then uses the last lease, or
 * count on a fresh data plane. last_lease with no lease yet uses share.
 */
uint64_t sl_lease_fallback(const struct sl_rule *r, const char *node,
			   uint32_t holders, const struct sl_lease *l);

/*
 * A flow at boot: in fallback. inherited is the threshold the data plane
 * already holds for the rule (an agent restart over a pinned data plane),
 * or -1 for a fresh slot.
 */
void sl_lease_boot(struct sl_lease *l, const struct sl_rule *r,
		   const char *node, int64_t inherited, uint64_t now_ns);

/* One entry of an answer to our SYNC, received at now_ns. */
void sl_lease_on_grant(struct sl_lease *l, const struct sl_rule *r,
		       const char *node, const struct sl_flow_grant *g,
		       const struct sl_lease_cfg *cfg, uint64_t now_ns);

/* The server is overloaded: keep the lease in force for ttl_ms more. */
void sl_lease_on_keep(struct sl_lease *l, uint32_t ttl_ms, uint64_t now_ns);

/* The server drains: the lease ends now. */
void sl_lease_on_drain(struct sl_lease *l, uint64_t now_ns);

/* A sync went unanswered or the session failed: recovery starts over. */
void sl_lease_on_miss(struct sl_lease *l);

/* Time passes: drop a lease that ended or missed N syncs. */
void sl_lease_tick(struct sl_lease *l, const struct sl_rule *r,
		   const char *node, const struct sl_lease_cfg *cfg,
		   uint64_t now_ns);

/* When the lease in force ends unless renewed: its TTL, or N missed syncs
 * and half a period after the last answer, whichever comes first; 0
 * outside a lease. sl_lease_tick() drops it then, and the data plane
 * switches to sl_lease_fallback() by itself then if no agent is left. */
uint64_t sl_lease_expiry(const struct sl_lease *l,
			 const struct sl_lease_cfg *cfg);

/* The rule changed (count, fallback): recompute what is in force. */
void sl_lease_refresh(struct sl_lease *l, const struct sl_rule *r,
		      const char *node);

/* l->limit is now in the map. */
void sl_lease_written(struct sl_lease *l, uint64_t now_ns);

/* What a SYNC reports as held: the grant under a lease, else 0. */
static inline uint64_t sl_lease_held(const struct sl_lease *l)
{
	return l->state == SL_LEASE_CLUSTER ? l->limit : 0;
}

const char *sl_lease_state_str(enum sl_lease_state s);

/* Where a rule's threshold in force comes from (stats, metrics, top). */
enum sl_threshold_source {
	SL_THRESHOLD_STATIC,   /* the rule's count */
	SL_THRESHOLD_LEASE,    /* a cluster lease's grant */
	SL_THRESHOLD_FALLBACK, /* a cluster flow without a lease */
	SL_THRESHOLD_WARMUP,   /* a local warm-up ramp */
	SL_THRESHOLD_ADAPTIVE, /* a "system" rule shedding (guard.h) */
	SL_THRESHOLD_SOURCES,
};

extern const char *const sl_threshold_source_names[SL_THRESHOLD_SOURCES];

/* A synced cluster flow's source follows its lease state (state is
 * ignored otherwise); a local rule's, whether it is ramping or shedding. */
enum sl_threshold_source sl_threshold_source_of(bool cluster_flow,
						enum sl_lease_state state,
						bool warming, bool shedding);

#endif
