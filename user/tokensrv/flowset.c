// SPDX-License-Identifier: GPL-2.0
/*
 * The token server's flows from the rules: the namespaces and flows of a
 * rule set's cluster rules, and a rule change that hands the state of
 * each flow that stays to its successor (docs/cluster.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tokensrv_int.h"

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

/* A new namespace's SYNC budget, each worker's full; NULL: no memory. */
static struct ns_budget *new_budget(struct sl_tokend *td)
{
	struct ns_budget *b = aligned_alloc(_Alignof(struct ns_budget),
					    td->n_w * sizeof(*b));
	uint64_t now = sl_now_ms();

	for (uint32_t k = 0; b && k < td->n_w; k++)
		b[k] = (struct ns_budget){
			.tokens = ts_worker_burst(td),
			.tokens_at = now,
		};
	return b;
}

/* The node tables and SYNC budgets of n namespaces. */
void ts_free_nodes(struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(v[i].budget);
		for (uint32_t k = 0; v[i].chunk && k <= v[i].top / NODE_CHUNK;
		     k++)
			free(v[i].chunk[k]);
		free(v[i].chunk);
		free(v[i].free_ids);
		sl_index_free(&v[i].by_name);
		pthread_mutex_destroy(&v[i].lock);
	}
}

static void free_part(struct part *p)
{
	pthread_mutex_destroy(&p->lock);
	free(p->h);
	free(p->live.node);
	free(p->live.need);
	free(p->live.expires);
	free(p->gone.node);
}

void ts_free_flows(struct ns *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < v[i].n_flows; j++) {
			struct flow *f = &v[i].flows[j];

			for (uint32_t k = 0; f->part && k < f->n_parts; k++)
				free_part(&f->part[k]);
			free(f->part);
			pthread_mutex_destroy(&f->lock);
		}
		free(v[i].flows);
		v[i].flows = NULL;
		v[i].n_flows = 0;
	}
}

/* f's parts, one per worker, each on lines of its own; -ENOMEM. */
static int make_parts(struct flow *f, uint32_t n)
{
	f->part = aligned_alloc(_Alignof(struct part), n * sizeof(*f->part));
	if (!f->part)
		return -ENOMEM;
	memset(f->part, 0, n * sizeof(*f->part));
	f->n_parts = n;
	for (uint32_t k = 0; k < n; k++)
		pthread_mutex_init(&f->part[k].lock, NULL);
	return 0;
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
			pthread_mutex_init(&ns->lock, NULL);
			ns->budget = new_budget(td);
			ns->chunk = calloc(td->cfg.max_nodes / NODE_CHUNK + 1,
					   sizeof(*ns->chunk));
			if (!ns->budget || !ns->chunk ||
			    sl_index_init(&ns->by_name, 64)) {
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
		if (make_parts(f, td->n_w)) {
			ts_free_flows(v, n);
			ts_free_nodes(v + td->n_ns, n - td->n_ns);
			free(v);
			return -ENOMEM;
		}
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

/* The grants (reservations: their reservations) of p's holders of the
 * nodes in node[0..n) from a count of was to count; their sum. */
static uint64_t rescale(const struct flow *f, struct part *p,
			const uint32_t *node, uint32_t n, bool reservations,
			uint64_t count, uint64_t was)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct holder *h = ts_holder_of(f, p, node[i]);
		uint64_t *v = reservations ? &h->reserved : &h->grant;

		*v = sl_mul_div(*v, count, was);
		sum += *v;
	}
	return sum;
}

/*
 * A flow that stays (same namespace and id) keeps its holders, leases,
 * reservations and ramp; at a new count their grants are counted at its
 * scale, and each holder takes its new grant at its next sync.
 */
static void carry_flow(struct flow *to, struct flow *from)
{
	uint64_t count = to->count, was = from->count;

	to->warm = from->warm;
	to->warm_start = from->warm_start;
	to->n_live = from->n_live;
	to->n_gone = from->n_gone;
	to->changed = true;
	for (uint32_t k = 0; k < to->n_parts; k++) {
		struct part *t = &to->part[k], *p = &from->part[k];

		t->h = p->h;
		t->h_cap = p->h_cap;
		t->live = p->live;
		t->gone = p->gone;
		t->outstanding = p->outstanding;
		t->reserved = p->reserved;
		t->dirty = true;
		/* moved: the old set is freed without them (its ids stay
		 * sorted) */
		p->h = NULL;
		p->live = (struct live_set){ 0 };
		p->gone = (struct node_set){ 0 };
		if (count != was && was) {
			t->outstanding = rescale(to, t, t->live.node, t->live.n,
						 false, count, was);
			t->reserved = rescale(to, t, t->gone.node, t->gone.n,
					      true, count, was);
		}
		/* what each part holds, until the first fill */
		t->share = t->outstanding + t->reserved;
		to->shares += t->share;
		to->reserved += t->reserved;
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
