/* SPDX-License-Identifier: GPL-2.0 */
/* The rule model: copies, names of the enums, prefixes. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"
#include "util.h"

const char *const sl_proto_names[SL_PROTO_COUNT] = {
    [SL_PROTO_ANY] = "any",	  [SL_PROTO_TCP] = "tcp",
    [SL_PROTO_UDP] = "udp",	  [SL_PROTO_ICMP] = "icmp",
    [SL_PROTO_ICMPV6] = "icmpv6",
};
const char *const sl_grade_names[SL_GRADE_COUNT] = {
    [SL_GRADE_PPS] = "pps",
    [SL_GRADE_BPS] = "bps",
    [SL_GRADE_CPS] = "cps",
    [SL_GRADE_CONNS] = "conns",
};
const char *const sl_mode_names[SL_MODE_COUNT] = {
    [SL_MODE_ENFORCE] = "enforce",
    [SL_MODE_SHADOW] = "shadow",
};
const char *const sl_action_names[SL_ACTION_COUNT] = {
    [SL_ACTION_LIMIT] = "limit",
    [SL_ACTION_ALLOW] = "allow",
    [SL_ACTION_DENY] = "deny",
};
const char *const sl_threshold_names[SL_THRESHOLD_COUNT] = {
	[SL_THRESH_GLOBAL] = "global",
	[SL_THRESH_AVG_LOCAL] = "avg_local",
	[SL_THRESH_MANUAL] = "manual",
};
const char *const sl_fallback_names[SL_FALLBACK_COUNT] = {
	[SL_FB_SHARE] = "share", [SL_FB_LAST_LEASE] = "last_lease",
	[SL_FB_FULL] = "full",	 [SL_FB_BLOCK] = "block",
	[SL_FB_PASS] = "pass",	 [SL_FB_FIXED] = "fixed",
};

const char *const sl_strategy_names[SL_STRATEGY_COUNT] = {
	[SL_BRK_ERROR_RATIO] = "error_ratio",
	[SL_BRK_ERROR_COUNT] = "error_count",
	[SL_BRK_SLOW_RATIO] = "slow_request_ratio",
};
const char *const sl_open_action_names[SL_OPEN_ACTION_COUNT] = {
	[SL_OPEN_RST] = "rst",
	[SL_OPEN_DROP] = "drop",
};

uint64_t sl_cluster_quota(const struct sl_cluster *cl, const char *node)
{
	uint32_t lo = 0, hi = cl->n_quotas;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(cl->quotas[mid].node, node);

		if (!c)
			return cl->quotas[mid].count;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int sl_rule_copy(struct sl_rule *dst, const struct sl_rule *src)
{
	*dst = *src;
	if (!src->cluster.quotas)
		return 0;
	dst->cluster.quotas = malloc(src->cluster.n_quotas *
				     sizeof(*src->cluster.quotas));
	if (!dst->cluster.quotas)
		return -ENOMEM;
	memcpy(dst->cluster.quotas, src->cluster.quotas,
	       src->cluster.n_quotas * sizeof(*src->cluster.quotas));
	return 0;
}

void sl_rule_release(struct sl_rule *r)
{
	free(r->cluster.quotas);
	r->cluster.quotas = NULL;
	r->cluster.n_quotas = 0;
}

int sl_ruleset_copy(const struct sl_ruleset *src, size_t room,
		    struct sl_ruleset *out)
{
	struct sl_ruleset c = { .allow_empty = src->allow_empty };

	c.rules = calloc(src->n + room + 1, sizeof(*c.rules));
	if (!c.rules)
		return -ENOMEM;
	for (; c.n < src->n; c.n++)
		if (sl_rule_copy(&c.rules[c.n], &src->rules[c.n])) {
			sl_ruleset_free(&c);
			return -ENOMEM;
		}
	*out = c;
	return 0;
}

void sl_ruleset_free(struct sl_ruleset *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		sl_rule_release(&set->rules[i]);
	free(set->rules);
	set->rules = NULL;
	set->n = 0;
	set->allow_empty = false;
}

/* names[v], or "?" for a value out of the enum */
#define NAME_OF(names, v)                                                      \
	((unsigned int)(v) < ARRAY_SIZE(names) ? (names)[v] : "?")

const char *sl_proto_str(enum sl_proto p)
{
	return NAME_OF(sl_proto_names, p);
}

const char *sl_grade_str(enum sl_grade g)
{
	return NAME_OF(sl_grade_names, g);
}

const char *sl_mode_str(enum sl_mode m)
{
	return NAME_OF(sl_mode_names, m);
}

const char *sl_action_str(enum sl_action a)
{
	return NAME_OF(sl_action_names, a);
}

const char *sl_threshold_str(enum sl_threshold t)
{
	return NAME_OF(sl_threshold_names, t);
}

const char *sl_fallback_str(enum sl_fallback f)
{
	return NAME_OF(sl_fallback_names, f);
}

void sl_prefix_str(const struct sl_prefix *p, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	if (!len)
		return;
	if (!p || (p->family != AF_INET && p->family != AF_INET6)) {
		snprintf(buf, len, "any");
		return;
	}
	if (!inet_ntop(p->family, p->addr, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	snprintf(buf, len, "%s/%u", a, p->len);
}

bool sl_prefix_contains(const struct sl_prefix *a, const struct sl_prefix *b)
{
	unsigned int full, rem;

	if (a->family == 0)
		return true;
	if (a->family != b->family || a->len > b->len)
		return false;
	full = a->len / 8;
	rem = a->len % 8;
	if (memcmp(a->addr, b->addr, full))
		return false;
	if (rem) {
		uint8_t mask = (uint8_t) (0xff << (8 - rem));

		if ((a->addr[full] ^ b->addr[full]) & mask)
			return false;
	}
	return true;
}

