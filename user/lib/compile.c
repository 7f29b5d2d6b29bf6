// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "compile.h"
#include "rules_json.h"
#include "util.h"

static int cmp_u32(uint32_t a, uint32_t b)
{
	return a < b ? -1 : a > b;
}

int sl_rule_cmp(const struct sl_rule *a, const struct sl_rule *b)
{
	uint32_t pa = sl_rule_priority(a), pb = sl_rule_priority(b);
	uint32_t wa, wb;
	int c;

	if ((c = cmp_u32(pb, pa)))
		return c;
	if ((c = cmp_u32(a->proto == SL_PROTO_ANY, b->proto == SL_PROTO_ANY)))
		return c;
	if ((c = cmp_u32(b->has_vlan, a->has_vlan)))
		return c;
	if ((c = cmp_u32(b->dst.len, a->dst.len)))
		return c;
	if ((c = cmp_u32(b->src.len, a->src.len)))
		return c;
	wa = a->dport_lo ? a->dport_hi - a->dport_lo + 1u : 65536u;
	wb = b->dport_lo ? b->dport_hi - b->dport_lo + 1u : 65536u;
	if ((c = cmp_u32(wa, wb)))
		return c;
	return cmp_u32(a->file_index, b->file_index);
}

static bool rule_in_slot(const struct sl_rule *r, enum sluice_slot slot)
{
	switch (slot) {
	case SLUICE_SLOT_TCP:
		return (r->proto == SL_PROTO_TCP && r->grade != SL_GRADE_CPS) ||
		       r->proto == SL_PROTO_ANY;
	case SLUICE_SLOT_TCP_SYN:
		return r->proto == SL_PROTO_TCP || r->proto == SL_PROTO_ANY;
	case SLUICE_SLOT_UDP:
		return r->proto == SL_PROTO_UDP || r->proto == SL_PROTO_ANY;
	case SLUICE_SLOT_ICMP:
		return r->proto == SL_PROTO_ICMP || r->proto == SL_PROTO_ANY;
	case SLUICE_SLOT_ICMPV6:
		return r->proto == SL_PROTO_ICMPV6 || r->proto == SL_PROTO_ANY;
	default:
		return r->proto == SL_PROTO_ANY;
	}
}

static bool rule_in_family(const struct sl_rule *r, int af)
{
	return (!r->dst.family || r->dst.family == af) &&
	       (!r->src.family || r->src.family == af);
}

/* The port table's references for one list of ranks, per family. */
struct class_refs {
	uint32_t v4;
	uint32_t v6;
};

/* Compilation state: rules in precedence order ("ranks"). */
struct ctx {
	const struct sl_ruleset *rs;
	const uint32_t *slots;
	uint32_t *order; /* rank -> rule index */
	uint32_t next_class;
	uint32_t max_lpm;
	struct sl_compiled *out;
	char *err;
	size_t errlen;
	/* classes already built: a rank list -> its references, found by
	 * the list's hash */
	struct known {
		uint32_t *ranks;
		uint32_t n;
		struct class_refs ref;
	} *known;
	size_t n_known, cap_known;
	struct sl_index index;
	/* the chains made so far, found by their refs' hash */
	struct sl_index chain_index;
	uint32_t cap_chains;
	/* watch_class(): a direct answer's class, by family */
	struct {
		uint32_t ref;
		uint32_t cls[2];
	} *watch;
	size_t n_watch;
};

static const struct sl_rule *by_rank(struct ctx *x, uint32_t rank)
{
	return &x->rs->rules[x->order[rank]];
}

static uint32_t rule_ref(struct ctx *x, uint32_t rank)
{
	return x->slots[x->order[rank]] + 1;
}

static bool contains(const struct sl_prefix *rule_p,
		     const struct sl_prefix *node)
{
	return !rule_p->family || sl_prefix_contains(rule_p, node);
}

/* Whether two of a chain's rules have a breaker: an answer on egress
 * counts for one breaker (bpf/breaker.h breaker_ref()), so the set is
 * refused, naming them. */
static bool two_breakers(struct ctx *x, const uint32_t *cand, uint32_t n,
			 const struct sluice_chain *chain)
{
	const struct sl_rule *first = NULL;

	for (uint32_t i = 0; i < n; i++) {
		const struct sl_rule *r = by_rank(x, cand[i]);

		if (!r->breaker.enabled ||
		    chain->ref[r->layer] != rule_ref(x, cand[i]))
			continue;
		if (first) {
			snprintf(x->err, x->errlen,
				 "rules '%s' (layer %u) and '%s' (layer %u) "
				 "both have a breaker and judge the same "
				 "packets: one breaker a packet",
				 first->name, first->layer, r->name,
				 r->layer);
			return true;
		}
		first = r;
	}
	return false;
}

/*
 * The answer for a packet that the rules of cand (ranks, in precedence
 * order) match, those with src_node given only if their src contains it:
 * the first of each layer. One winner is its rule; two or more, a chain.
 */
static int answer(struct ctx *x, const uint32_t *cand, uint32_t n,
		  const struct sl_prefix *src_node, uint32_t *ref)
{
	struct sluice_chain chain = { 0 };
	struct sl_compiled *o = x->out;
	uint32_t winners = 0, last = 0;
	size_t cursor = 0;
	uint64_t hash;
	int64_t k;

	for (uint32_t i = 0; i < n && winners < SLUICE_LAYERS; i++) {
		const struct sl_rule *r = by_rank(x, cand[i]);

		if (chain.ref[r->layer] ||
		    (src_node && !contains(&r->src, src_node)))
			continue;
		chain.ref[r->layer] = last = rule_ref(x, cand[i]);
		winners++;
	}
	if (winners <= 1) {
		*ref = last;
		return 0;
	}
	if (two_breakers(x, cand, n, &chain))
		return -EINVAL;
	hash = sl_fnv1a(SL_FNV1A_INIT, &chain, sizeof(chain));
	while ((k = sl_index_next(&x->chain_index, hash, &cursor)) >= 0) {
		if (!memcmp(&o->chains[k], &chain, sizeof(chain))) {
			*ref = SLUICE_REF_CHAIN | (o->chain_base + k);
			return 0;
		}
	}
	if (o->n_chains == SLUICE_MAX_CHAINS) {
		snprintf(x->err, x->errlen,
			 "rule set needs more than %u combinations of layer "
			 "winners; fewer overlapping rules in layers above 0",
			 SLUICE_MAX_CHAINS);
		return -E2BIG;
	}
	if (o->n_chains == x->cap_chains) {
		size_t cap = x->cap_chains ? 2 * x->cap_chains : 16;
		void *p = realloc(o->chains, cap * sizeof(*o->chains));

		if (!p)
			return -ENOMEM;
		o->chains = p;
		x->cap_chains = cap;
	}
	o->chains[o->n_chains] = chain;
	*ref = SLUICE_REF_CHAIN | (o->chain_base + o->n_chains);
	return sl_index_add(&x->chain_index, hash, o->n_chains++);
}

/* Whether the winners among cand are the same for every address in the
 * stage (dst: no winner has a src or dst; else no winner has a src), so
 * that answer() is the stage's one answer and needs no trie. */
static bool winners_fixed(struct ctx *x, const uint32_t *cand, uint32_t n,
			  bool dst)
{
	bool seen[SLUICE_LAYERS] = { false };

	for (uint32_t i = 0; i < n; i++) {
		const struct sl_rule *r = by_rank(x, cand[i]);

		if (seen[r->layer])
			continue;
		seen[r->layer] = true;
		if (r->src.family || (dst && r->dst.family))
			return false;
	}
	return true;
}

static int add_lpm(struct ctx *x, int af, uint32_t class_id,
		   const struct sl_prefix *p, uint32_t ref)
{
	struct sl_compiled *o = x->out;
	struct sl_lpm_entry *e;
	uint32_t *n = af == AF_INET ? &o->n_lpm4 : &o->n_lpm6;

	if (*n >= x->max_lpm) {
		snprintf(x->err, x->errlen,
			 "rule set needs more than %u IPv%d trie entries; "
			 "simplify overlapping address rules",
			 x->max_lpm, af == AF_INET ? 4 : 6);
		return -E2BIG;
	}
	if (o->n_lpm == o->cap_lpm) {
		size_t cap = o->cap_lpm ? o->cap_lpm * 2 : 256;
		void *p2 = realloc(o->lpm, cap * sizeof(*o->lpm));

		if (!p2)
			return -ENOMEM;
		o->lpm = p2;
		o->cap_lpm = cap;
	}
	e = &o->lpm[o->n_lpm++];
	memset(e, 0, sizeof(*e));
	e->family = af == AF_INET ? 4 : 6;
	e->class_id = class_id;
	e->ref = ref;
	e->plen = p->family ? p->len : 0;
	if (p->family)
		memcpy(e->addr, p->addr, 16);
	(*n)++;
	return 0;
}

static bool has_prefix(const struct sl_prefix *list, size_t n,
		       const struct sl_prefix *p)
{
	for (size_t i = 0; i < n; i++)
		if (list[i].len == p->len &&
		    !memcmp(list[i].addr, p->addr, 16))
			return true;
	return false;
}

/* The distinct prefixes (field dst or src) of cand, "any" as /0. */
static size_t distinct_prefixes(struct ctx *x, const uint32_t *cand,
				uint32_t n, bool dst, int af,
				struct sl_prefix *out)
{
	size_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct sl_prefix p = dst ? by_rank(x, cand[i])->dst
					 : by_rank(x, cand[i])->src;

		if (!p.family) {
			memset(&p, 0, sizeof(p));
			p.family = af;
		}
		if (!has_prefix(out, k, &p))
			out[k++] = p;
	}
	return k;
}

/* Source stage for the rules in cand (rank order) under one dst node. */
static int build_src(struct ctx *x, int af, const uint32_t *cand, uint32_t n,
		     uint32_t *ref)
{
	struct sl_prefix *nodes = calloc(n, sizeof(*nodes));
	uint32_t class_id = x->next_class++;
	size_t k;
	int err = 0;

	if (!nodes)
		return -ENOMEM;
	k = distinct_prefixes(x, cand, n, false, af, nodes);
	for (size_t i = 0; i < k && !err; i++) {
		uint32_t node_ref;

		err = answer(x, cand, n, &nodes[i], &node_ref);
		if (!err && node_ref != SLUICE_REF_NONE)
			err = add_lpm(x, af, class_id, &nodes[i], node_ref);
	}
	free(nodes);
	*ref = SLUICE_REF_LPM | class_id;
	return err;
}

/* The reference for the rules fam[0..nf) (rank order, one family, all
 * matching the packet's VLAN): a rule, or a destination class. */
static int build_addr(struct ctx *x, int af, const uint32_t *fam, uint32_t nf,
		      uint32_t *ref)
{
	uint32_t *cand = calloc(nf ? nf : 1, sizeof(*cand));
	struct sl_prefix *nodes = calloc(nf ? nf : 1, sizeof(*nodes));
	uint32_t class_id;
	size_t k;
	int err = 0;

	if (!cand || !nodes) {
		err = -ENOMEM;
		goto out;
	}
	if (!nf) {
		*ref = SLUICE_REF_NONE;
		goto out;
	}
	if (winners_fixed(x, fam, nf, true)) {
		/* the best rules match every address: no trie needed */
		err = answer(x, fam, nf, NULL, ref);
		goto out;
	}

	class_id = x->next_class++;
	*ref = SLUICE_REF_LPM | class_id;
	k = distinct_prefixes(x, fam, nf, true, af, nodes);
	for (size_t i = 0; i < k && !err; i++) {
		uint32_t nc = 0, node_ref;

		for (uint32_t j = 0; j < nf; j++)
			if (contains(&by_rank(x, fam[j])->dst, &nodes[i]))
				cand[nc++] = fam[j];
		if (winners_fixed(x, cand, nc, false))
			err = answer(x, cand, nc, NULL, &node_ref);
		else
			err = build_src(x, af, cand, nc, &node_ref);
		if (!err)
			err = add_lpm(x, af, class_id, &nodes[i], node_ref);
	}
out:
	free(cand);
	free(nodes);
	return err;
}

/* A VLAN stage entry: the VID's two bytes as a 16-bit prefix of the
 * address of an IPv4 trie key (docs/architecture.md), or /0 for the
 * rules without match.vlan. */
static int add_vlan(struct ctx *x, uint32_t class_id, int vid, uint32_t ref)
{
	struct sl_prefix p = { .family = AF_INET };

	if (vid >= 0) {
		p.len = 16;
		p.addr[0] = vid >> 8;
		p.addr[1] = vid & 0xff;
	}
	return add_lpm(x, AF_INET, class_id, &p, ref);
}

/* The reference for one family of a class whose rules are ranks[]: when
 * some of them match a VLAN, a VLAN class whose entries each lead to the
 * rules of one VID (or of none) by build_addr(). */
static int build_family(struct ctx *x, int af, const uint32_t *ranks,
			uint32_t n, uint32_t *ref)
{
	uint32_t *fam = calloc(n ? n : 1, sizeof(*fam));
	uint32_t *cand = calloc(n ? n : 1, sizeof(*cand));
	uint32_t nf = 0, nv = 0, nc, class_id, sub;
	int err = 0;

	if (!fam || !cand) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct sl_rule *r = by_rank(x, ranks[i]);

		if (rule_in_family(r, af)) {
			fam[nf++] = ranks[i];
			nv += r->has_vlan;
		}
	}
	if (!nv) {
		err = build_addr(x, af, fam, nf, ref);
		goto out;
	}
	class_id = x->next_class++;
	*ref = SLUICE_REF_LPM | SLUICE_REF_VLAN | class_id;
	for (uint32_t i = 0; i < nf && !err; i++) {
		const struct sl_rule *r = by_rank(x, fam[i]);
		bool seen = false;

		if (!r->has_vlan)
			continue;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = by_rank(x, fam[j])->has_vlan &&
			       by_rank(x, fam[j])->vlan == r->vlan;
		if (seen)
			continue;
		nc = 0;
		for (uint32_t j = 0; j < nf; j++) {
			const struct sl_rule *o = by_rank(x, fam[j]);

			if (!o->has_vlan || o->vlan == r->vlan)
				cand[nc++] = fam[j];
		}
		err = build_addr(x, af, cand, nc, &sub);
		if (!err && sub != SLUICE_REF_NONE)
			err = add_vlan(x, class_id, r->vlan, sub);
	}
	nc = 0;
	for (uint32_t j = 0; j < nf; j++)
		if (!by_rank(x, fam[j])->has_vlan)
			cand[nc++] = fam[j];
	if (!err)
		err = build_addr(x, af, cand, nc, &sub);
	/* a miss is no rule, so an empty default needs no entry */
	if (!err && sub != SLUICE_REF_NONE)
		err = add_vlan(x, class_id, -1, sub);
out:
	free(fam);
	free(cand);
	return err;
}

/* The references for a list of ranks, built once per distinct list. */
static int class_ref(struct ctx *x, uint32_t *ranks, uint32_t n,
		     struct class_refs *ref)
{
	uint64_t hash = sl_fnv1a(SL_FNV1A_INIT, ranks, n * sizeof(*ranks));
	struct known *kn;
	size_t cursor = 0;
	int64_t k;
	int err;

	while ((k = sl_index_next(&x->index, hash, &cursor)) >= 0) {
		kn = &x->known[k];
		if (kn->n == n &&
		    !memcmp(kn->ranks, ranks, n * sizeof(*ranks))) {
			*ref = kn->ref;
			return 0;
		}
	}
	if (!n) {
		memset(ref, 0, sizeof(*ref));
		return 0;
	}
	err = build_family(x, AF_INET, ranks, n, &ref->v4);
	if (!err)
		err = build_family(x, AF_INET6, ranks, n, &ref->v6);
	if (err)
		return err;

	if (x->n_known == x->cap_known) {
		size_t cap = x->cap_known ? x->cap_known * 2 : 64;
		void *p = realloc(x->known, cap * sizeof(*x->known));

		if (!p)
			return -ENOMEM;
		x->known = p;
		x->cap_known = cap;
	}
	kn = &x->known[x->n_known];
	kn->ranks = malloc(n * sizeof(*ranks));
	if (!kn->ranks)
		return -ENOMEM;
	x->n_known++;
	memcpy(kn->ranks, ranks, n * sizeof(*ranks));
	kn->n = n;
	kn->ref = *ref;
	return sl_index_add(&x->index, hash, x->n_known - 1);
}

static int cmp_rank(const void *a, const void *b, void *rs)
{
	const struct sl_rule *rules = ((const struct sl_ruleset *)rs)->rules;

	return sl_rule_cmp(&rules[*(const uint32_t *)a],
			   &rules[*(const uint32_t *)b]);
}

/* A rule's dport range starts (add) or has just ended (!add) at port. */
struct edge {
	uint32_t port;
	uint32_t rank;
	bool add;
};

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	return x->port < y->port ? -1 : x->port > y->port;
}

/* Insert or remove rank in the sorted list active[0..*n). */
static void set_active(uint32_t *active, uint32_t *n, uint32_t rank, bool add)
{
	uint32_t lo = 0, hi = *n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (active[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (add) {
		memmove(active + lo + 1, active + lo,
			(*n - lo) * sizeof(*active));
		active[lo] = rank;
		(*n)++;
	} else if (lo < *n && active[lo] == rank) {
		memmove(active + lo, active + lo + 1,
			(*n - lo - 1) * sizeof(*active));
		(*n)--;
	}
}

/*
 * A sweep over the ports: the rules of the slot that cover the current
 * port are kept sorted by rank, and change only where a dport range
 * starts or ends, so each distinct rank list is built once per edge.
 */
static int build_slot(struct ctx *x, enum sluice_slot slot, uint32_t *ranks)
{
	uint32_t nports = slot < SLUICE_PORTED_SLOTS ? 65536 : 1;
	struct edge *edges = calloc(2 * x->rs->n + 1, sizeof(*edges));
	struct class_refs ref = { 0 };
	uint32_t n = 0, ne = 0, e = 0;
	int err = 0;

	if (!edges)
		return -ENOMEM;
	for (uint32_t rk = 0; rk < x->rs->n; rk++) {
		const struct sl_rule *r = by_rank(x, rk);

		if (!rule_in_slot(r, slot))
			continue;
		if (!r->dport_lo) {
			ranks[n++] = rk; /* every port, in rank order */
		} else if (nports > 1) {
			edges[ne++] = (struct edge){ r->dport_lo, rk, true };
			edges[ne++] = (struct edge){ r->dport_hi + 1u, rk,
						     false };
		}
	}
	qsort(edges, ne, sizeof(*edges), cmp_edge);
	/* port 0 (fragments) never matches a dport rule; port 1 may */
	for (uint32_t port = 0; port < nports && !err; port++) {
		bool edge = port <= 1;

		for (; e < ne && edges[e].port == port; e++) {
			set_active(ranks, &n, edges[e].rank, edges[e].add);
			edge = true;
		}
		if (edge)
			err = class_ref(x, ranks, n, &ref);
		x->out->port[sluice_port_key(4, slot, port)] = ref.v4;
		x->out->port[sluice_port_key(6, slot, port)] = ref.v6;
	}
	free(edges);
	return err;
}

/*
 * What the set needs of a packet to classify it, per family: the port
 * of a protocol whose entries are not all its port-0 entry (a dport or
 * cps rule), the protocol when the entries of some slot are not all the
 * "other" slot's. A packet lacking only what is not needed is classified
 * by the port-0 entry, as every port or protocol would be.
 */
static uint32_t needs_l4(const uint32_t *port)
{
	uint32_t needs = 0;

	for (int f = 0; f < 2; f++) {
		uint32_t fam = f ? 6 : 4, bits = 0;
		uint32_t other = port[sluice_port_key(fam, SLUICE_SLOT_OTHER, 0)];
		uint32_t tcp0 = port[sluice_port_key(fam, SLUICE_SLOT_TCP, 0)];
		uint32_t udp0 = port[sluice_port_key(fam, SLUICE_SLOT_UDP, 0)];

		for (uint32_t s = 0; s < SLUICE_SLOT_MAX; s++) {
			uint32_t nports = s < SLUICE_PORTED_SLOTS ? 65536 : 1;

			for (uint32_t p = 0; p < nports; p++) {
				uint32_t v = port[sluice_port_key(fam, s, p)];

				if (v != other)
					bits |= SLUICE_NEED_PROTO;
				if (s == SLUICE_SLOT_UDP && v != udp0)
					bits |= SLUICE_NEED_UDP_PORT;
				if (s <= SLUICE_SLOT_TCP_SYN && v != tcp0)
					bits |= SLUICE_NEED_TCP_PORT;
			}
		}
		needs |= bits << (f ? SLUICE_NEED_V6_SHIFT : 0);
	}
	return needs;
}

/* A class for a watched port whose entry is a direct answer (a rule, or
 * none): its /0 holds the answer. One per answer and family. */
static int watch_class(struct ctx *x, uint32_t ref, int f, uint32_t *cls)
{
	struct sl_prefix all = { .family = f ? AF_INET6 : AF_INET };
	size_t m;

	for (m = 0; m < x->n_watch; m++)
		if (x->watch[m].ref == ref)
			break;
	if (m == x->n_watch) {
		void *p = realloc(x->watch, (m + 1) * sizeof(*x->watch));

		if (!p)
			return -ENOMEM;
		x->watch = p;
		x->watch[m].ref = ref;
		x->watch[m].cls[0] = x->watch[m].cls[1] = 0;
		x->n_watch++;
	}
	if (!x->watch[m].cls[f]) {
		x->watch[m].cls[f] = x->next_class++;
		if (ref) {
			int err = add_lpm(x, all.family, x->watch[m].cls[f],
					  &all, ref);

			if (err)
				return err;
		}
	}
	*cls = x->watch[m].cls[f];
	return 0;
}

/*
 * The ports of the TCP slot whose connections a slow_request_ratio
 * breaker times: a client's data there looks its connection up. Their
 * entries become classes marked SLUICE_REF_WATCH, so that only packets
 * already on the tries' path test the mark.
 */
static int watch_ports(struct ctx *x)
{
	uint32_t *port = x->out->port, cls = 0;
	int err = 0;

	for (size_t i = 0; i < x->rs->n && !err; i++) {
		const struct sl_rule *r = &x->rs->rules[i];
		uint32_t lo = r->dport_lo, hi = lo ? r->dport_hi : 65535;

		if (!r->breaker.enabled ||
		    r->breaker.strategy != SL_BRK_SLOW_RATIO)
			continue;
		for (uint32_t p = lo; p <= hi && !err; p++) {
			for (int f = 0; f < 2 && !err; f++) {
				int af = f ? AF_INET6 : AF_INET;
				uint32_t *ref = &port[sluice_port_key(
				    f ? 6 : 4, SLUICE_SLOT_TCP, p)];

				if (!rule_in_family(r, af) ||
				    *ref & SLUICE_REF_WATCH)
					continue;
				if (!(*ref & SLUICE_REF_LPM)) {
					err = watch_class(x, *ref, f, &cls);
					*ref = SLUICE_REF_LPM | cls;
				}
				*ref |= SLUICE_REF_WATCH;
			}
		}
	}
	return err;
}

/* One of the tables the rules of a set share, which must hold what they
 * need of it together (never evicting, for conns). */
struct shared_table {
	const char *what;  /* "per_source: ... need %llu " what */
	const char *of;	   /* what each rule needs */
	const char *table; /* the table's name */
	const char *lower; /* what to lower */
	uint64_t cap, need;
};

/* Add a rule's need to t: 0, or -E2BIG with the error. */
static int need_of(struct shared_table *t, const struct sl_rule *r,
		   uint64_t n, char *err, size_t errlen)
{
	t->need += n;
	if (t->need <= t->cap)
		return 0;
	snprintf(err, errlen,
		 "%s: with rule '%s' the rules need %llu %s (%s), more than "
		 "the %s's %llu; lower %s",
		 r->grade == SL_GRADE_CONNS ? "conns" : "per_source", r->name,
		 (unsigned long long)t->need, t->what, t->of, t->table,
		 (unsigned long long)t->cap, t->lower);
	return -E2BIG;
}

/*
 * The rules of a set share the source table (per_source rates:
 * max_sources and an overflow entry each, or sources past the table
 * would be blocked as source_table_full while every rule is under its
 * max_sources), and conns rules the connection table and its source
 * table, which never evict: every place of every rule's count must fit,
 * so that a SYN flood at one rule cannot refuse another's. Sets whether
 * any rule is a conns rule.
 */
static int check_tables(const struct sl_ruleset *rs, bool *conns, char *err,
			size_t errlen)
{
	struct shared_table sources = {
		"source entries", "max_sources + 1 each, for the overflow",
		"source table", "max_sources", SLUICE_MAX_SOURCES, 0 };
	struct shared_table conn = {
		"connections", "count, times max_sources + 1 for per_source",
		"connection table", "count or max_sources", SLUICE_MAX_CONNS,
		0 };
	struct shared_table conn_src = {
		"source entries", "max_sources + 1 each, for the overflow",
		"connections' source table", "max_sources",
		SLUICE_MAX_CONN_SOURCES, 0 };
	int ret = 0;

	*conns = false;
	for (size_t i = 0; i < rs->n && !ret; i++) {
		const struct sl_rule *r = &rs->rules[i];
		uint64_t n = r->per_source ? r->max_sources + 1ULL : 1;

		if (r->action != SL_ACTION_LIMIT)
			continue;
		if (r->grade != SL_GRADE_CONNS) {
			if (r->per_source)
				ret = need_of(&sources, r, n, err, errlen);
			continue;
		}
		*conns = true;
		ret = need_of(&conn, r, r->count * n, err, errlen);
		if (!ret && r->per_source)
			ret = need_of(&conn_src, r, n, err, errlen);
	}
	return ret;
}

int sl_compile(const struct sl_ruleset *rs, const uint32_t *slots,
	       uint32_t class_base, uint32_t chain_base,
	       uint32_t max_lpm_per_family, struct sl_compiled *out,
	       char *err, size_t errlen)
{
	struct ctx x = {
		.rs = rs,
		.slots = slots,
		.next_class = class_base,
		.max_lpm = max_lpm_per_family,
		.out = out,
		.err = err,
		.errlen = errlen,
	};
	uint32_t *ranks = NULL;
	int ret = -ENOMEM;
	bool conns;

	memset(out, 0, sizeof(*out));
	out->chain_base = chain_base;
	ret = check_tables(rs, &conns, err, errlen);
	if (ret)
		return ret;
	ret = -ENOMEM;
	out->port = calloc(SLUICE_SET_SPACE, sizeof(*out->port));
	x.order = calloc(rs->n ? rs->n : 1, sizeof(*x.order));
	ranks = calloc(rs->n ? rs->n : 1, sizeof(*ranks));
	if (!out->port || !x.order || !ranks ||
	    sl_index_init(&x.index, 256) || sl_index_init(&x.chain_index, 64))
		goto out;
	for (uint32_t i = 0; i < rs->n; i++)
		x.order[i] = i;
	qsort_r(x.order, rs->n, sizeof(*x.order), cmp_rank, (void *)rs);

	for (int s = 0; s < SLUICE_SLOT_MAX; s++) {
		ret = build_slot(&x, s, ranks);
		if (ret)
			break;
	}
	if (!ret)
		ret = watch_ports(&x);
	if (!ret)
		out->needs_l4 = needs_l4(out->port) |
				(conns ? SLUICE_NEED_CONNS : 0);
	out->n_classes = x.next_class - class_base;
	if (!ret && out->n_classes >= SLUICE_REF_WATCH) {
		/* unreachable while the tries bound the classes */
		snprintf(err, errlen, "rule set needs too many classes");
		ret = -E2BIG;
	}
out:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory compiling the rule set");
	for (size_t i = 0; i < x.n_known; i++)
		free(x.known[i].ranks);
	free(x.known);
	free(x.watch);
	sl_index_free(&x.index);
	sl_index_free(&x.chain_index);
	free(x.order);
	free(ranks);
	if (ret)
		sl_compiled_free(out);
	return ret;
}

void sl_compiled_free(struct sl_compiled *c)
{
	free(c->port);
	free(c->lpm);
	free(c->chains);
	memset(c, 0, sizeof(*c));
}

void sl_rule_cfg(const struct sl_rule *r, struct sluice_rule_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->interval_ms = r->interval_ms;
	cfg->sample_count = r->sample_count;
	cfg->interval_ns = (uint64_t)r->interval_ms * 1000000ULL;
	cfg->bucket_ns = cfg->interval_ns / r->sample_count;
	cfg->slot_ns = cfg->interval_ns / SLUICE_ADMIT_SLOTS;
	static const uint32_t grade[SL_GRADE_COUNT] = {
		[SL_GRADE_PPS] = SLUICE_GRADE_PPS,
		[SL_GRADE_BPS] = SLUICE_GRADE_BPS,
		[SL_GRADE_CPS] = SLUICE_GRADE_CPS,
		[SL_GRADE_CONNS] = SLUICE_GRADE_CONNS,
	};

	cfg->grade = grade[r->grade];
	if (r->mode == SL_MODE_SHADOW)
		cfg->flags |= SLUICE_RULE_SHADOW;
	if (r->action == SL_ACTION_ALLOW)
		cfg->flags |= SLUICE_RULE_ALLOW;
	else if (r->action == SL_ACTION_DENY)
		cfg->flags |= SLUICE_RULE_DENY;
	if (r->warm_up) {
		cfg->warm_period_ms = r->warm_period_s * 1000;
		cfg->cold_factor = r->cold_factor;
	}
	if (r->per_source) {
		cfg->flags |= SLUICE_RULE_PER_SOURCE;
		cfg->max_sources = r->max_sources;
		cfg->src_prefix_v4 = r->src_prefix_v4;
		cfg->src_prefix_v6 = r->src_prefix_v6;
		cfg->sketch_seed = sl_rule_def_hash(r);
	}
	if (r->grade == SL_GRADE_CONNS) {
		cfg->conn_idle_s = r->conn_idle_s;
		if (r->conn_refuse == SL_OPEN_DROP)
			cfg->flags |= SLUICE_RULE_CONNS_DROP;
	}
}

void sl_breaker_cfg(const struct sl_rule *r, struct sluice_breaker_cfg *cfg)
{
	static const uint32_t strategy[SL_STRATEGY_COUNT] = {
		[SL_BRK_ERROR_RATIO] = SLUICE_BRK_ERROR_RATIO,
		[SL_BRK_ERROR_COUNT] = SLUICE_BRK_ERROR_COUNT,
		[SL_BRK_SLOW_RATIO] = SLUICE_BRK_SLOW_RATIO,
	};
	const struct sl_breaker *b = &r->breaker;

	memset(cfg, 0, sizeof(*cfg));
	if (!b->enabled)
		return;
	cfg->open_ns = (uint64_t)b->open_ms * 1000000ULL;
	cfg->stat_ns = (uint64_t)b->stat_interval_ms * 1000000ULL;
	cfg->strategy = strategy[b->strategy];
	cfg->max_rt_ns = (uint64_t)b->max_rt_ms * 1000000ULL;
	cfg->threshold = b->threshold;
	cfg->min_requests = b->min_requests;
	cfg->probes = b->probes;
	cfg->open_drop = b->open_action == SL_OPEN_DROP;
	cfg->udp = r->proto == SL_PROTO_UDP;
}
