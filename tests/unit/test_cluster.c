/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit tests for the agent's cluster side: the per-flow lease state
 * machine and fallback thresholds (user/lease.c) driven by an injected
 * clock, and the argument checks of user/cluster.c and `sluice agent`.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "cluster.h"
#include "lease.h"
#include "sluice.h"

#define MS 1000000ULL

static const struct sl_lease_cfg cfg = {
	.sync_ms = 100, .miss_limit = 3, .good_needed = 3,
};

static struct sl_rule rule(enum sl_threshold t, enum sl_fallback fb)
{
	struct sl_rule r = { .name = "r", .count = 20000 };

	r.cluster.enabled = true;
	strcpy(r.cluster.ns, "web");
	r.cluster.flow_id = 7;
	r.cluster.threshold = t;
	r.cluster.fallback = fb;
	r.cluster.fallback_fixed = 1234;
	/* the rules of these tests share one quota table, never freed */
	static struct sl_quota quotas[2] = { { "a", 600 }, { "b", 400 } };

	r.cluster.n_quotas = 2;
	r.cluster.quotas = quotas;
	return r;
}

static struct sl_flow_grant grant(uint64_t g, uint32_t holders)
{
	return (struct sl_flow_grant){ .flow_id = 7, .ttl_ms = 1000,
				       .grant = g, .holders = holders };
}

/* Boots r, then K good answers a sync period apart: in cluster with g. */
static uint64_t to_cluster(struct sl_lease *l, const struct sl_rule *r,
			   uint64_t g, uint64_t now)
{
	struct sl_flow_grant e = grant(g, 4);

	sl_lease_boot(l, r, "a", -1, now);
	sl_lease_written(l, now);
	for (int i = 0; i < 3; i++) {
		now += 100 * MS;
		sl_lease_on_grant(l, r, "a", &e, &cfg, now);
	}
	assert_int_equal(l->state, SL_LEASE_CLUSTER);
	sl_lease_written(l, now);
	return now;
}

/* The threshold's source, as stats, metrics and top name it. */
static void test_threshold_source(void **state)
{
	(void)state;
	assert_int_equal(sl_threshold_source_of(true, SL_LEASE_CLUSTER, false,
						false),
			 SL_THRESHOLD_LEASE);
	/* a flow's lease state decides, a warm-up ramp does not */
	assert_int_equal(sl_threshold_source_of(true, SL_LEASE_EXPIRED, true,
						false),
			 SL_THRESHOLD_FALLBACK);
	assert_int_equal(sl_threshold_source_of(true, SL_LEASE_FALLBACK, false,
						false),
			 SL_THRESHOLD_FALLBACK);
	assert_int_equal(sl_threshold_source_of(false, SL_LEASE_CLUSTER, true,
						false),
			 SL_THRESHOLD_WARMUP);
	assert_int_equal(sl_threshold_source_of(false, SL_LEASE_CLUSTER, false,
						false),
			 SL_THRESHOLD_STATIC);
	/* a system rule that sheds */
	assert_int_equal(sl_threshold_source_of(false, SL_LEASE_FALLBACK,
						false, true),
			 SL_THRESHOLD_ADAPTIVE);
	for (int k = 0; k < SL_THRESHOLD_SOURCES; k++)
		assert_non_null(sl_threshold_source_names[k]);
	assert_string_equal(sl_threshold_source_names[SL_THRESHOLD_WARMUP],
			    "warmup");
	assert_string_equal(sl_threshold_source_names[SL_THRESHOLD_ADAPTIVE],
			    "adaptive");
}

static void test_fallback_thresholds(void **state)
{
	struct sl_rule g = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_lease l = { .last_lease = 7000, .has_last_lease = true };

	/* share: count / holders; unknown holders: the last lease, else
	 * count */
	assert_int_equal(sl_lease_fallback(&g, "a", 4, NULL), 5000);
	assert_int_equal(sl_lease_fallback(&g, "a", 3, NULL), 6666);
	assert_int_equal(sl_lease_fallback(&g, "a", 0, &l), 7000);
	assert_int_equal(sl_lease_fallback(&g, "a", 0, NULL), 20000);
	g.cluster.fallback = SL_FB_LAST_LEASE;
	assert_int_equal(sl_lease_fallback(&g, "a", 4, &l), 7000);
	assert_int_equal(sl_lease_fallback(&g, "a", 4, NULL), 5000);
	g.cluster.fallback = SL_FB_FULL;
	assert_int_equal(sl_lease_fallback(&g, "a", 4, &l), 20000);
	g.cluster.fallback = SL_FB_BLOCK;
	assert_int_equal(sl_lease_fallback(&g, "a", 4, &l), 0);
	g.cluster.fallback = SL_FB_PASS;
	assert_true(sl_lease_fallback(&g, "a", 4, &l) >= SL_MAX_COUNT);
	g.cluster.fallback = SL_FB_FIXED;
	assert_int_equal(sl_lease_fallback(&g, "a", 4, &l), 1234);

	/* avg_local: count is per node; manual: the node's quota */
	g = rule(SL_THRESH_AVG_LOCAL, SL_FB_SHARE);
	assert_int_equal(sl_lease_fallback(&g, "a", 4, NULL), 20000);
	g = rule(SL_THRESH_MANUAL, SL_FB_SHARE);
	assert_int_equal(sl_lease_fallback(&g, "a", 4, NULL), 600);
	assert_int_equal(sl_lease_fallback(&g, "b", 0, NULL), 400);
	assert_int_equal(sl_lease_fallback(&g, "zz", 4, NULL), 0);
}

static void test_boot_in_fallback(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_lease l;

	/* a fresh data plane: share with no holders known is count */
	sl_lease_boot(&l, &r, "a", -1, 5 * MS);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	assert_int_equal(l.since_ns, 5 * MS);
	assert_int_equal(l.limit, 20000);
	assert_true(l.dirty);
	assert_int_equal(sl_lease_held(&l), 0);
	/* an agent restart: what the previous agent left stays */
	sl_lease_boot(&l, &r, "a", 4321, 5 * MS);
	assert_int_equal(l.limit, 4321);
	/* block is 0 from the first moment */
	r.cluster.fallback = SL_FB_BLOCK;
	sl_lease_boot(&l, &r, "a", 4321, 5 * MS);
	assert_int_equal(l.limit, 0);
}

static void test_recovery_needs_k_good(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_flow_grant e = grant(12000, 4);
	struct sl_lease l;
	uint64_t now = 0;

	sl_lease_boot(&l, &r, "a", -1, now);
	sl_lease_written(&l, now);
	/* first answer: holders known, the lower of share and grant */
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	assert_int_equal(l.limit, 5000);
	e.grant = 3000;
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	assert_int_equal(l.limit, 3000);
	/* a miss starts over: back to the plain fallback */
	sl_lease_on_miss(&l);
	sl_lease_tick(&l, &r, "a", &cfg, now += 100 * MS);
	assert_int_equal(l.limit, 5000);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	e.grant = 12000;
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	/* the third in a row: cluster, with that grant, at that time */
	assert_int_equal(l.state, SL_LEASE_CLUSTER);
	assert_int_equal(l.since_ns, now);
	assert_int_equal(l.limit, 12000);
	assert_true(l.dirty);
	assert_int_equal(sl_lease_held(&l), 12000);
	assert_int_equal(l.lease_end_ns, now + 1000 * MS);
}

/*
 * The expiry the data plane is given is the moment tick drops the lease,
 * and the fallback written beside it is what tick then enforces: 350 ms
 * after the last answer with 3 syncs of 100 ms, or the TTL if that ends
 * first; none outside a lease.
 */
static void test_expiry_in_data_plane(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_flow_grant keep = grant(9000, 4);
	struct sl_lease l;
	uint64_t t0, expiry;

	(void)state;
	t0 = to_cluster(&l, &r, 9000, 1000 * MS);
	expiry = sl_lease_expiry(&l, &cfg);
	assert_int_equal(expiry, t0 + 350 * MS);
	assert_int_equal(sl_lease_fallback(&r, "a", l.holders, &l), 5000);
	sl_lease_tick(&l, &r, "a", &cfg, expiry - 1);
	assert_int_equal(l.state, SL_LEASE_CLUSTER);
	sl_lease_tick(&l, &r, "a", &cfg, expiry);
	assert_int_equal(l.state, SL_LEASE_EXPIRED);
	assert_int_equal(l.limit, 5000);
	assert_int_equal(sl_lease_expiry(&l, &cfg), 0);

	/* a short TTL ends the lease before the missed syncs would */
	t0 = to_cluster(&l, &r, 9000, 10000 * MS);
	keep.ttl_ms = 200;
	sl_lease_on_grant(&l, &r, "a", &keep, &cfg, t0 + 100 * MS);
	assert_int_equal(sl_lease_expiry(&l, &cfg), t0 + 300 * MS);
}

static void test_expiry_after_n_missed(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_lease l;
	uint64_t t0, now;

	t0 = now = to_cluster(&l, &r, 9000, 1000 * MS);
	/* answers stop; ticks every 10 ms */
	while (l.state == SL_LEASE_CLUSTER && now < t0 + 2000 * MS) {
		now += 10 * MS;
		sl_lease_tick(&l, &r, "a", &cfg, now);
	}
	assert_int_equal(l.state, SL_LEASE_EXPIRED);
	/* N = 3 periods and half a period of slack; well under 1 s */
	assert_int_equal(now - t0, 350 * MS);
	assert_int_equal(l.since_ns, now);
	assert_int_equal(l.limit, 5000); /* share of the last 4 holders */
	assert_true(l.dirty);
	assert_int_equal(sl_lease_held(&l), 0);
	/* written: fallback, at the time of the write */
	sl_lease_written(&l, now + 2 * MS);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	assert_int_equal(l.since_ns, now + 2 * MS);
	assert_false(l.dirty);
}

static void test_expiry_last_lease(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_LAST_LEASE);
	struct sl_lease l;
	uint64_t now = to_cluster(&l, &r, 9000, 0);

	sl_lease_tick(&l, &r, "a", &cfg, now + 400 * MS);
	assert_int_equal(l.state, SL_LEASE_EXPIRED);
	assert_int_equal(l.limit, 9000);
}

static void test_ttl_bounds_the_lease(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_FIXED);
	struct sl_flow_grant e = grant(9000, 4);
	struct sl_lease l;
	uint64_t now = to_cluster(&l, &r, 9000, 0);

	/* a short lease ends before N syncs are missed */
	e.ttl_ms = 150;
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now);
	sl_lease_tick(&l, &r, "a", &cfg, now + 149 * MS);
	assert_int_equal(l.state, SL_LEASE_CLUSTER);
	sl_lease_tick(&l, &r, "a", &cfg, now + 150 * MS);
	assert_int_equal(l.state, SL_LEASE_EXPIRED);
	assert_int_equal(l.limit, 1234);
}

static void test_server_keep_extends(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_lease l, fb;
	uint64_t now = to_cluster(&l, &r, 9000, 0);

	/* overloaded server: KEEP, no entries; the lease lives on */
	for (int i = 0; i < 20; i++) {
		now += 100 * MS;
		sl_lease_on_keep(&l, 1000, now);
		sl_lease_tick(&l, &r, "a", &cfg, now);
		assert_int_equal(l.state, SL_LEASE_CLUSTER);
		assert_int_equal(l.limit, 9000);
	}
	/* KEEP never brings a flow in fallback closer to cluster */
	sl_lease_boot(&fb, &r, "a", -1, 0);
	sl_lease_on_keep(&fb, 1000, 100 * MS);
	assert_int_equal(fb.state, SL_LEASE_FALLBACK);
}

static void test_learning_server(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_flow_grant e = grant(0, 3);
	struct sl_lease l;
	uint64_t now = 0;

	/* in fallback, KEEP entries with grant 0 are neither progress nor
	 * a reset: many of them never reach cluster (a 0 threshold) */
	sl_lease_boot(&l, &r, "a", -1, now);
	e.flags = SL_GRANT_KEEP | SL_GRANT_LEARNING;
	for (int i = 0; i < 10; i++)
		sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	/* its holders are the nodes that reported so far: not a share */
	assert_int_equal(l.holders, 0);
	assert_int_equal(l.limit, 20000);
	/* in cluster, a KEEP entry renews what the server caps us at */
	now = to_cluster(&l, &r, 9000, now);
	e.grant = 8000;
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now + 100 * MS);
	assert_int_equal(l.state, SL_LEASE_CLUSTER);
	assert_int_equal(l.limit, 8000);
	assert_int_equal(l.lease_end_ns, now + 1100 * MS);
}

static void test_drain_and_unknown(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_flow_grant e = grant(9000, 4);
	struct sl_lease l;
	uint64_t now = to_cluster(&l, &r, 9000, 0);

	sl_lease_on_drain(&l, now);
	sl_lease_tick(&l, &r, "a", &cfg, now);
	assert_int_equal(l.state, SL_LEASE_EXPIRED);
	sl_lease_written(&l, now);
	/* an unknown flow resets recovery */
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	e.flags = SL_GRANT_UNKNOWN;
	e.grant = 0;
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	assert_int_equal(l.good, 0);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
	/* a lease of no time is no lease */
	e = grant(9000, 4);
	e.ttl_ms = 0;
	for (int i = 0; i < 5; i++)
		sl_lease_on_grant(&l, &r, "a", &e, &cfg, now += 100 * MS);
	assert_int_equal(l.state, SL_LEASE_FALLBACK);
}

static void test_refresh_on_rule_change(void **state)
{
	struct sl_rule r = rule(SL_THRESH_GLOBAL, SL_FB_SHARE);
	struct sl_flow_grant e = grant(0, 4);
	struct sl_lease l;

	sl_lease_boot(&l, &r, "a", -1, 0);
	e.flags = SL_GRANT_KEEP;
	sl_lease_on_grant(&l, &r, "a", &e, &cfg, 100 * MS);
	sl_lease_written(&l, 100 * MS);
	assert_int_equal(l.limit, 5000);
	r.count = 8000;
	sl_lease_refresh(&l, &r, "a");
	assert_int_equal(l.limit, 2000);
	assert_true(l.dirty);
}

static void test_parse_servers(void **state)
{
	struct sl_cluster_server sv[SL_CLUSTER_MAX_SERVERS];
	char err[256];
	size_t n;

	assert_int_equal(sl_cluster_parse_servers("198.18.0.1:7070,"
						  "[2001:db8::1]:7071,"
						  "td.example:1",
						  sv, 16, &n, err,
						  sizeof(err)),
			 0);
	assert_int_equal(n, 3);
	assert_string_equal(sv[0].host, "198.18.0.1");
	assert_string_equal(sv[0].port, "7070");
	assert_string_equal(sv[1].host, "2001:db8::1");
	assert_string_equal(sv[1].port, "7071");
	assert_string_equal(sv[2].host, "td.example");

	static const char *const bad[] = {
		"", "198.18.0.1", "198.18.0.1:", ":7070", "h:0", "h:65536",
		"h:70x", "2001:db8::1:7070", "[2001:db8::1]7070",
		"[2001:db8::1", "h:1,", "h:1,,h:2", "[]:1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(sl_cluster_parse_servers(bad[i], sv, 16, &n,
							  err, sizeof(err)),
				 -EINVAL);
		assert_true(err[0]);
	}
	assert_int_equal(sl_cluster_parse_servers("a:1,b:2,c:3", sv, 2, &n,
						  err, sizeof(err)),
			 -EINVAL);
}

static void test_backoff(void **state)
{
	struct sl_cluster_cfg c;

	sl_cluster_cfg_default(&c);
	/* doubling from min, capped at max, jitter within [d/2, d] */
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 1, UINT32_MAX), 100);
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 1, 0), 50);
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 2, UINT32_MAX), 200);
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 3, UINT32_MAX), 400);
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 4, UINT32_MAX), 500);
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 40, UINT32_MAX), 500);
	assert_int_equal(sl_backoff_ms(c.backoff_min_ms, c.backoff_max_ms, 40, 0), 250);
}

static void test_new_errors(void **state)
{
	struct sl_dataplane dp = { 0 };
	struct sl_cluster_sync *c = NULL;
	struct sl_cluster_cfg cfg;
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	char err[256];

	sl_cluster_cfg_default(&cfg);
	cfg.servers = "198.18.0.1:7070";
	cfg.node_id = "bad node";
	assert_int_equal(sl_cluster_new(&cfg, &dp, &lock, &c, err,
					sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "node id"));
	assert_null(dp.first_limit);
	cfg.node_id = "h1";
	cfg.servers = "nope";
	assert_int_equal(sl_cluster_new(&cfg, &dp, &lock, &c, err,
					sizeof(err)),
			 -EINVAL);
	/* without secrets, only a loopback server is trusted */
	cfg.servers = "127.0.0.1:7070,198.18.0.1:7070";
	assert_int_equal(sl_cluster_new(&cfg, &dp, &lock, &c, err,
					sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "198.18.0.1:7070 is not a loopback "
				    "address: a session with it needs "
				    "--secrets"));
	cfg.servers = "127.0.0.1:7070,localhost:7070,[::1]:7070";
	cfg.sync_ms = 0;
	assert_int_equal(sl_cluster_new(&cfg, &dp, &lock, &c, err,
					sizeof(err)),
			 -EINVAL);
	cfg.sync_ms = 100;
	assert_int_equal(sl_cluster_new(&cfg, &dp, &lock, &c, err,
					sizeof(err)),
			 0);
	assert_non_null(dp.first_limit);
	sl_cluster_free(c);
	assert_null(dp.first_limit);
}

static void test_agent_args(void **state)
{
	char *a1[] = { "agent", "--iface", "lo", "--node-id", "h1", NULL };
	char *a2[] = { "agent", "--iface", "lo", "--secrets", "/x", NULL };

	/* cluster options without a token server are refused up front */
	assert_int_equal(sl_main(5, a1), 2);
	assert_int_equal(sl_main(5, a2), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback_thresholds),
		cmocka_unit_test(test_boot_in_fallback),
		cmocka_unit_test(test_recovery_needs_k_good),
		cmocka_unit_test(test_expiry_after_n_missed),
		cmocka_unit_test(test_expiry_last_lease),
		cmocka_unit_test(test_ttl_bounds_the_lease),
		cmocka_unit_test(test_server_keep_extends),
		cmocka_unit_test(test_learning_server),
		cmocka_unit_test(test_drain_and_unknown),
		cmocka_unit_test(test_refresh_on_rule_change),
		cmocka_unit_test(test_parse_servers),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_threshold_source),
		cmocka_unit_test(test_expiry_in_data_plane),
		cmocka_unit_test(test_new_errors),
		cmocka_unit_test(test_agent_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
