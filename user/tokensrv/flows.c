// SPDX-License-Identifier: GPL-2.0
/*
 * The token server's flows: holders and their leases, water filling, a
 * SYNC's grant, the balancer thread that expires leases and fills large
 * flows, and the flows built from the rules (docs/cluster.md).
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

static int make_live(struct flow *f, struct holder *h, uint32_t node)
{
	struct live_set *s = &f->live;

	if (s->n == s->cap && live_grow(s))
		return -ENOMEM;
	s->node[s->n] = node;
	s->need[s->n] = 0;
	s->expires[s->n] = 0;
	h->live_pos = s->n++;
	h->grant = 0;
	f->dirty = true;
	return 0;
}

static void drop_live(struct flow *f, struct holder *h)
{
	struct live_set *s = &f->live;
	uint32_t pos = h->live_pos, last = --s->n;

	if (pos != last) {
		s->node[pos] = s->node[last];
		s->need[pos] = s->need[last];
		s->expires[pos] = s->expires[last];
		f->h[s->node[pos]].live_pos = pos;
	}
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
	uint64_t reserve = vanished_reserve(f, ts_node_at(ns, node)->name, h);
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
		/* vanish() moves another holder to i */
		if (f->live.expires[i] <= now)
			vanish(td, ns, f, f->live.node[i], now);
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
void ts_forget_flow(struct flow *f)
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

	memcpy(needs, f->live.need, f->live.n * sizeof(*needs));
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
int ts_grant_flow(struct worker *w, const struct view *v, struct conn *c,
		  struct flow *f, const struct sl_flow_report *r, uint64_t now,
		  struct sl_flow_grant *g)
{
	struct sl_tokend *td = w->td;
	struct holder *h = get_holder(f, c->node);
	uint64_t others, want, count, need;
	bool learning;
	int ret;

	if (!h)
		return -ENOMEM;
	if (h->live_pos != NO_POS && f->live.expires[h->live_pos] <= now)
		drop_live(f, h);
	if (h->gone_pos != NO_POS)
		drop_gone(f, h); /* back: its answer replaces the reservation */
	if (h->live_pos == NO_POS) {
		ret = make_live(f, h, c->node);
		if (ret)
			return ret;
	}
	need = sl_quota_need(r->demand);
	if (f->live.need[h->live_pos] != need)
		f->dirty = true;
	f->live.need[h->live_pos] = need;
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
			want = sl_quota_grant(&f->level, need);
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
	f->live.expires[h->live_pos] = now + td->cfg.ttl_ms;
	g->grant = want;
	g->ttl_ms = td->cfg.ttl_ms;
	g->holders = f->live.n + f->gone.n;
	if (!learning)
		h->told = g->holders;
	return 0;
}

/* ---- the balancer ---- */

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

/* ---- the flows of the rules ---- */

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
void ts_free_nodes(struct ns *v, uint32_t n)
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

void ts_free_flows(struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < v[i].n_flows; j++) {
			pthread_mutex_destroy(&v[i].flows[j].lock);
			free(v[i].flows[j].h);
			free(v[i].flows[j].live.node);
			free(v[i].flows[j].live.need);
			free(v[i].flows[j].live.expires);
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
int ts_build_flows(struct sl_tokend *td, const struct sl_ruleset *rs,
		   struct ns **out, uint32_t *n_out, char *err, size_t errlen)
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
				ts_free_nodes(v + td->n_ns, n - td->n_ns);
				free(v);
				return -ENOMEM;
			}
		}
		ns->n_flows++;
	}
	for (i = 0; i < n; i++) {
		v[i].flows = calloc(v[i].n_flows + 1, sizeof(*v[i].flows));
		if (!v[i].flows) {
			/* nothing built yet: only the arrays to free */
			for (size_t k = 0; k < n; k++)
				v[k].n_flows = 0;
			ts_free_flows(v, n);
			ts_free_nodes(v + td->n_ns, n - td->n_ns);
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
			ts_free_flows(v, n);
			ts_free_nodes(v + td->n_ns, n - td->n_ns);
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
	from->live = (struct live_set){ 0 };
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
			struct flow *was = ts_find_flow(&td->ns[i], f->id);

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
	ts_free_flows(td->ns, td->n_ns);
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

	ts_lock_all(td);
	ret = ts_build_flows(td, rs, &v, &n, err, errlen);
	if (!ret)
		install_flows(td, v, n);
	ts_unlock_all(td);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}
