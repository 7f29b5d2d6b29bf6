// SPDX-License-Identifier: GPL-2.0
/* The agent's per-flow lease state machine (lease.h, docs/cluster.md). */
#include <string.h>

#include "lease.h"
#include "util.h"


uint64_t sl_lease_fallback(const struct sl_rule *r, const char *node,
			   uint32_t holders, const struct sl_lease *l)
{
	bool known = l && l->has_last_lease;
	uint64_t share;

	switch (r->cluster.threshold) {
	case SL_THRESH_AVG_LOCAL:
		share = r->count;
		break;
	case SL_THRESH_MANUAL:
		share = sl_cluster_quota(&r->cluster, node);
		break;
	default:
		if (holders)
			share = r->count / holders;
		else
			share = known ? l->last_lease : r->count;
		break;
	}
	switch (r->cluster.fallback) {
	case SL_FB_LAST_LEASE:
		return known ? l->last_lease : share;
	case SL_FB_FULL:
		return r->count;
	case SL_FB_BLOCK:
		return 0;
	case SL_FB_PASS:
		return SL_LEASE_NO_LIMIT;
	case SL_FB_FIXED:
		return r->cluster.fallback_fixed;
	default:
		return share;
	}
}

static void set_limit(struct sl_lease *l, uint64_t v)
{
	if (v != l->limit) {
		l->limit = v;
		l->dirty = true;
	}
}

/* In fallback, a node that is recovering holds a fresh grant too: the
 * lower of the two, so that the switch back cannot overshoot. */
static uint64_t fallback_limit(const struct sl_lease *l,
			       const struct sl_rule *r, const char *node)
{
	uint64_t fb = sl_lease_fallback(r, node, l->holders, l);

	return l->good && l->grant < fb ? l->grant : fb;
}

void sl_lease_boot(struct sl_lease *l, const struct sl_rule *r,
		   const char *node, int64_t inherited, uint64_t now_ns)
{
	memset(l, 0, sizeof(*l));
	l->state = SL_LEASE_FALLBACK;
	l->since_ns = now_ns;
	if (inherited >= 0) {
		l->last_lease = inherited;
		l->has_last_lease = true;
	}
	l->limit = fallback_limit(l, r, node);
	l->dirty = true;
}

static void renew(struct sl_lease *l, uint64_t grant, uint32_t ttl_ms,
		  uint64_t now_ns)
{
	l->grant = grant;
	l->lease_end_ns = now_ns + ttl_ms * NSEC_PER_MSEC;
	l->last_ok_ns = now_ns;
	l->last_lease = grant;
	l->has_last_lease = true;
	set_limit(l, grant);
}

void sl_lease_on_grant(struct sl_lease *l, const struct sl_rule *r,
		       const char *node, const struct sl_flow_grant *g,
		       const struct sl_lease_cfg *cfg, uint64_t now_ns)
{
	bool leased = l->state == SL_LEASE_CLUSTER;

	if (g->flags & SL_GRANT_UNKNOWN) {
		/* the server does not serve this flow: no lease to be had */
		sl_lease_on_miss(l);
		return;
	}
	/* a learning server counts only the nodes that reported so far */
	if (g->holders && !(g->flags & SL_GRANT_LEARNING))
		l->holders = g->holders;
	if (g->flags & SL_GRANT_KEEP) {
		/* a learning server renews what we hold, grants nothing new:
		 * neither a step of recovery nor a reason to give up */
		if (leased && g->ttl_ms)
			renew(l, g->grant, g->ttl_ms, now_ns);
		else if (!leased)
			set_limit(l, fallback_limit(l, r, node));
		return;
	}
	if (!g->ttl_ms) {
		l->good = 0;
		if (leased)
			l->lease_end_ns = now_ns;
		else
			set_limit(l, fallback_limit(l, r, node));
		return;
	}
	if (leased) {
		renew(l, g->grant, g->ttl_ms, now_ns);
		return;
	}
	l->grant = g->grant;
	if (++l->good < cfg->good_needed) {
		set_limit(l, fallback_limit(l, r, node));
		return;
	}
	l->state = SL_LEASE_CLUSTER;
	l->since_ns = now_ns;
	l->good = 0;
	renew(l, g->grant, g->ttl_ms, now_ns);
}

void sl_lease_on_keep(struct sl_lease *l, uint32_t ttl_ms, uint64_t now_ns)
{
	uint64_t end = now_ns + ttl_ms * NSEC_PER_MSEC;

	if (l->state != SL_LEASE_CLUSTER)
		return;
	if (end > l->lease_end_ns)
		l->lease_end_ns = end;
	l->last_ok_ns = now_ns;
}

void sl_lease_on_drain(struct sl_lease *l, uint64_t now_ns)
{
	l->good = 0;
	if (l->state == SL_LEASE_CLUSTER)
		l->lease_end_ns = now_ns;
}

void sl_lease_on_miss(struct sl_lease *l)
{
	l->good = 0;
}

uint64_t sl_lease_expiry(const struct sl_lease *l,
			 const struct sl_lease_cfg *cfg)
{
	/* N periods and half a period of slack for a late answer */
	uint64_t window = (cfg->miss_limit * 2ULL + 1) * cfg->sync_ms *
			  NSEC_PER_MSEC / 2;
	uint64_t missed = l->last_ok_ns + window;

	if (l->state != SL_LEASE_CLUSTER)
		return 0;
	return missed < l->lease_end_ns ? missed : l->lease_end_ns;
}

void sl_lease_tick(struct sl_lease *l, const struct sl_rule *r,
		   const char *node, const struct sl_lease_cfg *cfg,
		   uint64_t now_ns)
{
	if (l->state != SL_LEASE_CLUSTER) {
		if (!l->good)
			set_limit(l, fallback_limit(l, r, node));
		return;
	}
	if (now_ns < sl_lease_expiry(l, cfg))
		return;
	l->state = SL_LEASE_EXPIRED;
	l->since_ns = now_ns;
	l->good = 0;
	l->limit = fallback_limit(l, r, node);
	l->dirty = true;
}

void sl_lease_refresh(struct sl_lease *l, const struct sl_rule *r,
		      const char *node)
{
	if (l->state != SL_LEASE_CLUSTER)
		set_limit(l, fallback_limit(l, r, node));
}

void sl_lease_written(struct sl_lease *l, uint64_t now_ns)
{
	l->dirty = false;
	if (l->state == SL_LEASE_EXPIRED) {
		l->state = SL_LEASE_FALLBACK;
		l->since_ns = now_ns;
	}
}

const char *sl_lease_state_str(enum sl_lease_state s)
{
	switch (s) {
	case SL_LEASE_CLUSTER:
		return "cluster";
	case SL_LEASE_EXPIRED:
		return "lease_expired";
	default:
		return "fallback";
	}
}

const char *const sl_threshold_source_names[SL_THRESHOLD_SOURCES] = {
	[SL_THRESHOLD_STATIC] = "static",
	[SL_THRESHOLD_LEASE] = "lease",
	[SL_THRESHOLD_FALLBACK] = "fallback",
	[SL_THRESHOLD_WARMUP] = "warmup",
	[SL_THRESHOLD_ADAPTIVE] = "adaptive",
};

enum sl_threshold_source sl_threshold_source_of(bool cluster_flow,
						enum sl_lease_state state,
						bool warming, bool shedding)
{
	if (cluster_flow)
		return state == SL_LEASE_CLUSTER ? SL_THRESHOLD_LEASE
						 : SL_THRESHOLD_FALLBACK;
	if (shedding)
		return SL_THRESHOLD_ADAPTIVE;
	return warming ? SL_THRESHOLD_WARMUP : SL_THRESHOLD_STATIC;
}
