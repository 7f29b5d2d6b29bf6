// SPDX-License-Identifier: GPL-2.0
/*
 * Per-rule rates as `top` and `stats --watch` show them: the counters'
 * change between two stats answers over the agent's clock between them,
 * which is what an independent counter of the same packets sees. The
 * sliding window's estimate (passed_pps) is only the first answer's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The rule's previous totals; NULL when it is new or its slot was reset. */
static const struct cli_rate *previous(const struct cli_rates *rs,
				       const struct cli_rate *r)
{
	size_t cursor = 0;
	int64_t i;

	if (!rs->by_name.size)
		return NULL;
	while ((i = sl_index_next(&rs->by_name, sl_fnv1a_str(r->name),
				  &cursor)) >= 0) {
		const struct cli_rate *p = &rs->r[i];

		if (strcmp(p->name, r->name))
			continue;
		if (p->bytes != r->bytes || r->passed < p->passed ||
		    r->blocked < p->blocked)
			return NULL;
		return p;
	}
	return NULL;
}

static void take_rule(const struct cli_rates *old, struct cli_rate *r,
		      const cJSON *j, double dt_s)
{
	const struct cli_rate *p;

	snprintf(r->name, sizeof(r->name), "%s", cli_get_str(j, "name", "?"));
	r->bytes = !strcmp(cli_get_str(j, "grade", "pps"), "bps");
	r->passed = cli_get_num(j, r->bytes ? "passed_bytes" : "passed_pkts",
				0);
	r->blocked = cli_get_num(j, r->bytes ? "blocked_bytes"
					     : "blocked_pkts", 0);
	p = dt_s > 0 ? previous(old, r) : NULL;
	if (p) {
		r->passed_s = (r->passed - p->passed) / dt_s;
		r->blocked_s = (r->blocked - p->blocked) / dt_s;
	} else {
		r->passed_s = cli_get_num(j, r->bytes ? "passed_Bps"
						      : "passed_pps", 0);
		r->blocked_s = cli_get_num(j, r->bytes ? "blocked_Bps"
						       : "blocked_pps", 0);
	}
}

int cli_rates_take(struct cli_rates *rs, const cJSON *resp)
{
	const cJSON *rules = cli_get(resp, "rules"), *j;
	uint64_t now = (uint64_t)cli_get_num(resp, "time_ns", 0);
	size_t n = cJSON_GetArraySize(rules);
	struct cli_rates next = { .time_ns = now };
	double dt_s;

	next.r = calloc(n ? n : 1, sizeof(*next.r));
	if (!next.r || sl_index_init(&next.by_name, n)) {
		cli_rates_free(&next);
		return -ENOMEM;
	}
	dt_s = rs->time_ns && now > rs->time_ns ? (now - rs->time_ns) / 1e9
						 : 0;
	cJSON_ArrayForEach(j, rules) {
		if (!cJSON_IsObject(j) || next.n == n)
			continue;
		take_rule(rs, &next.r[next.n], j, dt_s);
		if (sl_index_add(&next.by_name,
				 sl_fnv1a_str(next.r[next.n].name), next.n)) {
			cli_rates_free(&next);
			return -ENOMEM;
		}
		next.n++;
	}
	cli_rates_free(rs);
	*rs = next;
	return 0;
}

void cli_rates_free(struct cli_rates *rs)
{
	free(rs->r);
	sl_index_free(&rs->by_name);
	memset(rs, 0, sizeof(*rs));
}
