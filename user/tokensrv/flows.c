// SPDX-License-Identifier: GPL-2.0
/*
 * The token server's flows: holders and their leases, water filling, a
 * SYNC's grant, and the balancer thread that expires leases and fills
 * large flows (docs/cluster.md). flowset.c builds them from the rules.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "log.h"
#include "tokensrv_int.h"

/* ---- flows and leases ---- */

struct node *ts_node_at(const struct ns *ns, uint32_t id)
{
	return &ns->chunk[id / NODE_CHUNK][id % NODE_CHUNK];
}

struct flow *ts_find_flow(struct ns *ns, uint32_t id)
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

/* The holder at slot of p, room made for it. */
static struct holder *get_holder(struct part *p, uint32_t slot)
{
	if (slot >= p->h_cap) {
		uint32_t cap = p->h_cap ? p->h_cap : 16;
		struct holder *h;

		while (cap <= slot)
			cap *= 2;
		h = realloc(p->h, cap * sizeof(*h));
		if (!h)
			return NULL;
		for (uint32_t i = p->h_cap; i < cap; i++)
			h[i] = (struct holder){.live_pos = NO_POS,
						.gone_pos = NO_POS};
		p->h = h;
		p->h_cap = cap;
	}
	return &p->h[slot];
}

/* Every part of f locked, in order; unlocked in reverse. */
static void lock_parts(struct flow *f)
{
	for (uint32_t k = 0; k < f->n_parts; k++)
		pthread_mutex_lock(&f->part[k].lock);
}

static void unlock_parts(struct flow *f)
{
	for (uint32_t k = f->n_parts; k--;)
		pthread_mutex_unlock(&f->part[k].lock);
}

/* An array of node numbers twice as large (first: its first size). */
int ts_grow_nodes(uint32_t **v, uint32_t *cap, uint32_t first)
{
	uint32_t n = *cap ? 2 * *cap : first;
	uint32_t *to = realloc(*v, n * sizeof(*to));

	if (!to)
		return -ENOMEM;
	*v = to;
	*cap = n;
	return 0;
}

/* The index of node in s, or -ENOMEM. */
static int set_add(struct node_set *s, uint32_t node)
{
	if (s->n == s->cap && ts_grow_nodes(&s->node, &s->cap, 16))
		return -ENOMEM;
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

/* Room for one more live holder in each of the set's arrays. */
static int live_grow(struct live_set *s)
{
	uint32_t cap = s->cap ? 2 * s->cap : 16;
	uint32_t *node = realloc(s->node, cap * sizeof(*node));
	uint64_t *need, *expires;

	if (!node)
		return -ENOMEM;
	s->node = node;
	need = realloc(s->need, cap * sizeof(*need));
	if (!need)
		return -ENOMEM;
	s->need = need;
	expires = realloc(s->expires, cap * sizeof(*expires));
	if (!expires)
		return -ENOMEM;
	s->expires = expires;
	s->cap = cap;
	return 0;
}

/* A holder came or went: counted, and the next fill is due. */
static void count_holders(struct flow *f, int32_t live, int32_t gone)
{
	pthread_mutex_lock(&f->lock);
	STORE(f->n_live, f->n_live + live);
	STORE(f->n_gone, f->n_gone + gone);
	if (!f->n_live)
		STORE(f->warm, false); /* idle: the next holder ramps it */
	STORE(f->changed, true);
	pthread_mutex_unlock(&f->lock);
}

static int make_live(struct flow *f, struct part *p, struct holder *h,
		     uint32_t node)
{
	struct live_set *s = &p->live;

	if (s->n == s->cap && live_grow(s))
		return -ENOMEM;
	s->node[s->n] = node;
	s->need[s->n] = 0;
	s->expires[s->n] = 0;
	h->live_pos = s->n++;
	h->grant = 0;
	p->dirty = true;
	count_holders(f, 1, 0);
	return 0;
}

static void drop_live(struct flow *f, struct part *p, struct holder *h)
{
	struct live_set *s = &p->live;
	uint32_t pos = h->live_pos, last = --s->n;

	if (pos != last) {
		s->node[pos] = s->node[last];
		s->need[pos] = s->need[last];
		s->expires[pos] = s->expires[last];
		ts_holder_of(f, p, s->node[pos])->live_pos = pos;
	}
	p->outstanding -= h->grant;
	h->grant = 0;
	h->live_pos = NO_POS;
	p->dirty = true;
	count_holders(f, -1, 0);
}

static void drop_gone(struct flow *f, struct part *p, struct holder *h)
{
	uint32_t moved = set_del(&p->gone, h->gone_pos);

	if (moved != NO_POS)
		ts_holder_of(f, p, moved)->gone_pos = h->gone_pos;
	p->reserved -= h->reserved;
	pthread_mutex_lock(&f->lock);
	f->reserved -= h->reserved;
	pthread_mutex_unlock(&f->lock);
	h->reserved = 0;
	h->gone_pos = NO_POS;
	p->dirty = true;
	count_holders(f, 0, -1);
}

/*
 * The flow's count at now: a rule with warm_up ramps it from count /
 * cold_factor to count over warm_period_s, like the data plane's ramp,
 * from the first grant to a cold flow (one without live holders). A host
 * joining a warm flow takes its share of the warm count; a flow whose
 * leases all expired is cold again. After a restart, a holding reported
 * in the learn period shows the flow was warm.
 */
static uint64_t ramp(const struct flow *f, uint64_t start, uint64_t now)
{
	uint64_t period = (uint64_t)f->rule->warm_period_s * 1000;
	uint64_t cold = f->count / f->rule->cold_factor;

	return cold + sl_mul_div(f->count - cold, now - start, period);
}

static bool ramped(const struct flow *f)
{
	return LOAD(f->warm) || !f->rule->warm_up || !f->rule->cold_factor ||
	       !f->rule->warm_period_s;
}

/* The count at now, changing nothing: the ramp not begun is cold. */
static uint64_t count_at(const struct flow *f, uint64_t now)
{
	uint64_t start = LOAD(f->warm_start);

	if (ramped(f))
		return f->count;
	return ramp(f, start && start <= now ? start : now, now);
}

/* The count at now for a grant: begins the ramp, or ends it. */
static uint64_t grant_count(struct flow *f, struct part *p, uint64_t now)
{
	uint64_t count;

	if (ramped(f))
		return f->count;
	pthread_mutex_lock(&f->lock);
	if (!f->warm_start)
		STORE(f->warm_start, now);
	if (now - f->warm_start >= (uint64_t)f->rule->warm_period_s * 1000) {
		STORE(f->warm, true);
		STORE(f->warm_start, 0);
		count = f->count;
	} else {
		count = ramp(f, f->warm_start, now);
		p->dirty = true; /* the level follows the ramp */
	}
	pthread_mutex_unlock(&f->lock);
	return count;
}

/*
 * Moves up to more of the count no part holds into p's share: what it
 * got. Reading the free count first keeps a flow whose count is all
 * shared out from writing the flow's line at every SYNC.
 */
static uint64_t draw(struct flow *f, struct part *p, uint64_t count,
		     uint64_t more)
{
	uint64_t got;

	if (LOAD(f->shares) >= count)
		return 0;
	pthread_mutex_lock(&f->lock);
	got = f->shares < count ? count - f->shares : 0;
	if (got > more)
		got = more;
	STORE(f->shares, f->shares + got);
	p->share += got;
	pthread_mutex_unlock(&f->lock);
	return got;
}

/*
 * The most p may grant a holder now (others: its other holders'
 * grants), so that every part's grants and reservations never sum above
 * count: within p's share, and what p lacks drawn from the free count.
 * One part may have all of count.
 */
static uint64_t part_cap(struct flow *f, struct part *p, uint64_t count,
			 uint64_t others, uint64_t want)
{
	uint64_t used = others + p->reserved, have = p->share;

	if (f->n_parts == 1)
		return sl_quota_cap(count, used, want);
	if (have < used + want)
		have += draw(f, p, count, used + want - have);
	return sl_quota_cap(have, used, want);
}

/* A vanished holder's part takes its reservation into its share. */
static void reserve_in_part(struct flow *f, struct part *p, uint64_t count)
{
	uint64_t used = p->outstanding + p->reserved;

	if (p->share < used)
		draw(f, p, count, used - p->share);
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
		   struct part *p, uint32_t node, uint64_t now)
{
	struct holder *h = ts_holder_of(f, p, node);
	uint64_t reserve = vanished_reserve(f, ts_node_at(ns, node)->name, h);
	uint64_t cap = sl_mul_div(f->count, SL_TOKEND_RESERVE_PCT, 100);
	int pos;

	drop_live(f, p, h);
	pthread_mutex_lock(&f->lock);
	if (f->n_gone >= SL_TOKEND_MAX_VANISHED || f->reserved >= cap)
		reserve = 0;
	else if (reserve > cap - f->reserved)
		reserve = cap - f->reserved;
	pos = reserve && td->cfg.forget_ms ? set_add(&p->gone, node) : -1;
	if (pos >= 0) {
		f->reserved += reserve;
		STORE(f->n_gone, f->n_gone + 1);
	}
	pthread_mutex_unlock(&f->lock);
	if (pos < 0)
		return; /* none, or out of memory: the others may take it */
	h->gone_pos = pos;
	h->reserved = reserve;
	h->forget_at = now + td->cfg.forget_ms;
	p->reserved += reserve;
	reserve_in_part(f, p, count_at(f, now));
}

/* Leases that ended become reservations; reservations that ended go. */
static void expire_part(struct sl_tokend *td, struct ns *ns, struct flow *f,
			struct part *p, uint64_t now)
{
	uint32_t i = 0;

	while (i < p->live.n) {
		/* vanish() moves another holder to i */
		if (p->live.expires[i] <= now)
			vanish(td, ns, f, p, p->live.node[i], now);
		else
			i++;
	}
	i = 0;
	while (i < p->gone.n) {
		struct holder *h = ts_holder_of(f, p, p->gone.node[i]);

		if (h->forget_at <= now)
			drop_gone(f, p, h);
		else
			i++;
	}
}

/* Forget every holder, reservation and share: a drain, or a new term. */
void ts_forget_flow(struct flow *f)
{
	lock_parts(f);
	for (uint32_t k = 0; k < f->n_parts; k++) {
		struct part *p = &f->part[k];

		while (p->live.n)
			drop_live(f, p, ts_holder_of(f, p, p->live.node[0]));
		while (p->gone.n)
			drop_gone(f, p, ts_holder_of(f, p, p->gone.node[0]));
		p->share = 0;
		p->have_level = false;
	}
	pthread_mutex_lock(&f->lock);
	STORE(f->shares, 0);
	pthread_mutex_unlock(&f->lock);
	unlock_parts(f);
}

/* What f's live holders are granted now (every part locked, or all). */
uint64_t ts_flow_granted(const struct flow *f)
{
	uint64_t sum = 0;

	for (uint32_t k = 0; k < f->n_parts; k++)
		sum += f->part[k].outstanding;
	return sum;
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

/* Every part's live holders' needs into needs (every part locked), part
 * k's from needs[at[k]] to needs[at[k + 1]]; how many. */
static uint32_t gather_needs(const struct flow *f, uint64_t *needs,
			     uint32_t *at)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < f->n_parts; k++) {
		const struct part *p = &f->part[k];

		at[k] = n;
		if (p->live.n)
			memcpy(needs + n, p->live.need,
			       p->live.n * sizeof(*needs));
		n += p->live.n;
	}
	at[f->n_parts] = n;
	return n;
}

/* What the level grants each part's holders, from gathered needs (no
 * lock: a large flow's workers do not wait for it). */
static void part_grants(const struct flow *f, const uint64_t *needs,
			const uint32_t *at, const struct sl_quota_level *level,
			uint64_t *granted)
{
	for (uint32_t k = 0; k < f->n_parts; k++) {
		uint64_t sum = 0;

		for (uint32_t i = at[k]; i < at[k + 1]; i++)
			sum = sl_add_sat(sum, sl_quota_grant(level, needs[i]));
		granted[k] = sum;
	}
}

static uint32_t live_holders(const struct flow *f)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < f->n_parts; k++)
		n += f->part[k].live.n;
	return n;
}

/* The count a fill shares out: the vanished holders' reservations stay. */
static uint64_t fill_count(const struct flow *f, uint64_t count)
{
	return count > f->reserved ? count - f->reserved : 0;
}

/*
 * A fill's level into every part (every part locked), and the shares:
 * each part keeps at least what its holders hold now (a share below it
 * would let another part grant what is still held), and gets toward what
 * the level grants its holders (granted), as far as count allows; the
 * rest stays free for the first part that lacks it. One part has no
 * share to set: it may have all of count.
 */
static void apply_fill(struct flow *f, const struct sl_quota_level *level,
		       const uint64_t *granted, uint64_t count, uint64_t now)
{
	uint64_t extra[SL_TOKEND_MAX_THREADS], used[SL_TOKEND_MAX_THREADS];
	uint64_t used_sum = 0, extra_sum = 0, budget, shares = 0;

	for (uint32_t k = 0; k < f->n_parts; k++) {
		struct part *p = &f->part[k];
		uint64_t plan = f->n_parts > 1
					? sl_add_sat(p->reserved, granted[k])
					: 0;

		used[k] = p->outstanding + p->reserved;
		extra[k] = plan > used[k] ? plan - used[k] : 0;
		used_sum += used[k];
		extra_sum = sl_add_sat(extra_sum, extra[k]);
	}
	budget = count > used_sum ? count - used_sum : 0;
	pthread_mutex_lock(&f->lock);
	for (uint32_t k = 0; k < f->n_parts; k++) {
		struct part *p = &f->part[k];

		p->share = used[k] + (extra_sum <= budget
					      ? extra[k]
					      : sl_mul_div(extra[k], budget,
							   extra_sum));
		shares += p->share;
		p->level = *level;
		p->have_level = true;
		p->dirty = false;
		p->level_at = now;
	}
	STORE(f->shares, shares);
	STORE(f->changed, false);
	pthread_mutex_unlock(&f->lock);
}

/* The water level now and the shares from it, in the caller's buffers
 * (every part locked). */
static int fill_now(struct flow *f, uint64_t **needs, uint64_t **scratch,
		    size_t *cap, uint64_t now)
{
	uint64_t granted[SL_TOKEND_MAX_THREADS];
	uint32_t at[SL_TOKEND_MAX_THREADS + 1];
	struct sl_quota_level level;
	uint64_t count = count_at(f, now);
	uint32_t n = live_holders(f);
	int ret = fill_room(needs, scratch, cap, n);

	if (ret || !n)
		return ret;
	gather_needs(f, *needs, at);
	sl_quota_global_level(fill_count(f, count), *needs, n, *scratch,
			      &level);
	if (f->n_parts > 1)
		part_grants(f, *needs, at, &level, granted);
	f->fills++;
	apply_fill(f, &level, granted, count, now);
	return 0;
}

/*
 * A small flow's fill in the SYNC that finds it changed: every part
 * locked in order, p's released first so that no thread holding a part
 * waits for another.
 */
static int fill_inline(struct worker *w, struct flow *f, struct part *p,
		       uint64_t now)
{
	int ret;

	if (f->n_parts > 1) {
		pthread_mutex_unlock(&p->lock);
		lock_parts(f);
	}
	ret = fill_now(f, &w->needs, &w->scratch, &w->scratch_cap, now);
	if (f->n_parts > 1) {
		for (uint32_t k = f->n_parts; k--;)
			if (&f->part[k] != p)
				pthread_mutex_unlock(&f->part[k].lock);
	}
	return ret;
}

/* Least ms between two fills of f: more holders, fewer fills. */
static uint64_t fill_period(const struct sl_tokend *td, uint32_t holders)
{
	uint64_t by_size = holders / SL_TOKEND_FILL_PER_MS;

	return by_size > td->cfg.rebalance_ms ? by_size : td->cfg.rebalance_ms;
}

static bool any_dirty(const struct flow *f)
{
	for (uint32_t k = 0; k < f->n_parts; k++)
		if (f->part[k].dirty)
			return true;
	return LOAD(f->changed);
}

/*
 * A large flow's fill by the balancer: the needs copied with every part
 * locked, the level and what it grants each part computed with none, and
 * applied unless a fill began meanwhile (a SYNC's, or a rule change's reset).
 */
static void fill_large(struct sl_tokend *td, struct flow *f, uint64_t now)
{
	uint64_t granted[SL_TOKEND_MAX_THREADS];
	uint32_t at[SL_TOKEND_MAX_THREADS + 1];
	struct sl_quota_level level;
	uint64_t count, fills;
	uint32_t n;

	lock_parts(f);
	n = live_holders(f);
	if (n <= SL_TOKEND_INLINE_FILL || !f->part[0].have_level ||
	    !any_dirty(f) || now - f->part[0].level_at < fill_period(td, n) ||
	    fill_room(&td->bal_needs, &td->bal_scratch, &td->bal_cap, n)) {
		unlock_parts(f);
		return;
	}
	gather_needs(f, td->bal_needs, at);
	count = count_at(f, now);
	fills = ++f->fills;
	for (uint32_t k = 0; k < f->n_parts; k++) {
		f->part[k].dirty = false;
		f->part[k].level_at = now;
	}
	STORE(f->changed, false);
	unlock_parts(f);
	sl_quota_global_level(fill_count(f, count), td->bal_needs, n,
			      td->bal_scratch, &level);
	if (f->n_parts > 1)
		part_grants(f, td->bal_needs, at, &level, granted);
	lock_parts(f);
	if (f->fills == fills)
		apply_fill(f, &level, granted, count, now);
	unlock_parts(f);
}

/* Whether the SYNC fills the flow: a small one changed, or none yet. */
static bool fill_due(const struct sl_tokend *td, const struct flow *f,
		     const struct part *p, uint64_t now)
{
	return !p->have_level ||
	       ((p->dirty || LOAD(f->changed)) &&
		LOAD(f->n_live) <= SL_TOKEND_INLINE_FILL &&
		now - p->level_at >= td->cfg.rebalance_ms);
}

/*
 * Whether a SYNC that its part's share cuts short fills the flow: the
 * count it lacks may sit in another part's share, which only a fill
 * moves. One part holds every share there is.
 */
static bool short_fill_due(const struct sl_tokend *td, const struct flow *f,
			   const struct part *p, uint64_t now)
{
	return f->n_parts > 1 && LOAD(f->n_live) <= SL_TOKEND_INLINE_FILL &&
	       now - p->level_at >= td->cfg.rebalance_ms;
}

/* The answer for one flow of one SYNC in its node's part (locked). */
static int grant_in_part(struct worker *w, const struct view *v,
			 struct conn *c, struct flow *f, struct part *p,
			 const struct sl_flow_report *r, uint64_t now,
			 struct sl_flow_grant *g)
{
	struct sl_tokend *td = w->td;
	uint64_t want, capped, count, need = sl_quota_need(r->demand);
	bool learning = now < v->start + td->cfg.learn_ms;
	struct holder *h;
	int ret;

again:
	h = get_holder(p, c->slot);
	if (!h)
		return -ENOMEM;
	if (h->live_pos != NO_POS && p->live.expires[h->live_pos] <= now)
		drop_live(f, p, h);
	if (h->gone_pos != NO_POS)
		drop_gone(f, p, h); /* back: its answer replaces it */
	if (h->live_pos == NO_POS) {
		ret = make_live(f, p, h, c->node);
		if (ret)
			return ret;
	}
	if (p->live.need[h->live_pos] != need)
		p->dirty = true;
	p->live.need[h->live_pos] = need;
	/* the lease starts now: no expiry takes it while a fill runs */
	p->live.expires[h->live_pos] = now + td->cfg.ttl_ms;
	g->flags = 0;
	if (learning && r->held && !LOAD(f->warm)) {
		pthread_mutex_lock(&f->lock);
		STORE(f->warm, true);
		pthread_mutex_unlock(&f->lock);
	}
	count = learning ? f->count : grant_count(f, p, now);

	switch (f->cl->threshold) {
	case SL_THRESH_GLOBAL:
		if (learning) {
			/* Unknown holders may still hold the last server's
			 * leases: renew what the client holds, no more. */
			g->flags = SL_GRANT_KEEP | SL_GRANT_LEARNING;
			want = part_cap(f, p, count, p->outstanding - h->grant,
					r->held);
			break;
		}
		/* a large flow's is the balancer's (fill_large) */
		for (bool fill = fill_due(td, f, p, now);; fill = true) {
			if (fill) {
				ret = fill_inline(w, f, p, now);
				if (ret)
					return ret;
				h = &p->h[c->slot];
				if (h->live_pos == NO_POS)
					goto again; /* forgotten meanwhile */
			}
			want = sl_quota_grant(&p->level, need);
			/* vanished holders' fallbacks count as granted */
			capped = part_cap(f, p, count,
					  p->outstanding - h->grant, want);
			if (capped == want || fill ||
			    !short_fill_due(td, f, p, now))
				break;
		}
		if (capped < want && f->n_parts > 1 && !LOAD(f->changed))
			STORE(f->changed, true); /* the balancer's fill */
		want = capped;
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
	p->outstanding = p->outstanding - h->grant + want;
	h->grant = want;
	g->grant = want;
	g->ttl_ms = td->cfg.ttl_ms;
	g->holders = LOAD(f->n_live) + LOAD(f->n_gone);
	if (!learning)
		h->told = g->holders;
	return 0;
}

/* The answer for one flow of one SYNC; the lease starts now. */
int ts_grant_flow(struct worker *w, const struct view *v, struct conn *c,
		  struct flow *f, const struct sl_flow_report *r, uint64_t now,
		  struct sl_flow_grant *g)
{
	struct part *p = &f->part[c->part];
	int ret;

	pthread_mutex_lock(&p->lock);
	ret = grant_in_part(w, v, c, f, p, r, now, g);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* ---- the balancer ---- */

/* Holders of node id in any flow of ns (under ns's lock). */
static bool node_held(const struct ns *ns, uint32_t id)
{
	bool held = false;

	for (uint32_t j = 0; j < ns->n_flows && !held; j++) {
		struct flow *f = &ns->flows[j];
		struct part *p = &f->part[id % f->n_parts];
		uint32_t at = id / f->n_parts;

		pthread_mutex_lock(&p->lock);
		held = at < p->h_cap && (p->h[at].live_pos != NO_POS ||
					 p->h[at].gone_pos != NO_POS);
		pthread_mutex_unlock(&p->lock);
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
			struct node *nd = ts_node_at(ns, id);

			if (!nd->used || nd->conn || now < nd->released_at ||
			    now - nd->released_at < idle || node_held(ns, id) ||
			    ts_free_node(ns, id))
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

			for (uint32_t k = 0; expire && k < f->n_parts; k++) {
				pthread_mutex_lock(&f->part[k].lock);
				expire_part(td, ns, f, &f->part[k], now);
				pthread_mutex_unlock(&f->part[k].lock);
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

void *ts_balancer_main(void *arg)
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
