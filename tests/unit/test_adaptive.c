/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The adaptive protection controller (user/lib/adaptive.c) against a
 * simulated host, in 1 ms steps: clients offering SYNs at a rate, the
 * rule's threshold as a token bucket (the data plane paces at the
 * threshold with a burst of 1/16 s), a listener whose accept queue holds
 * `backlog` connections and an application that accepts `service` of them
 * per second; CPU pressure as a function of the admitted rate. The
 * controller samples every SL_ADAPT_TICK_MS, as the agent does.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "adaptive.h"

#define MS 1000000ULL

struct host {
	/* the world */
	double offered; /* SYNs per second */
	double service; /* accepts per second */
	uint32_t backlog;
	/* CPU pressure = admitted rate / cpu_capacity x cpu_gain, when
	 * cpu_capacity is set; else unknown (-1) */
	double cpu_capacity, cpu_gain;
	/* state */
	uint64_t now_ns;
	double tokens, arrivals, accepts;
	int64_t queue;
	uint64_t passed, blocked, overflows;
	double rate_1s[100]; /* admitted per whole second */
	int64_t max_queue[100]; /* per second */
	uint64_t limit;
	double admitted_window; /* admitted in the current tick, for PSI */
	double pressure;
};

static struct sl_rule system_rule(uint64_t count, uint32_t queue,
				  uint32_t psi_ppm, uint64_t floor)
{
	struct sl_rule r = { .name = "guard", .count = count };

	r.system.enabled = true;
	r.system.accept_queue = queue;
	r.system.cpu_pressure = psi_ppm;
	r.system.floor = floor;
	return r;
}

/* The host for one ms. */
static void host_ms(struct host *h)
{
	double burst = fmax(1, h->limit / 16.0);

	h->now_ns += MS;
	h->tokens = fmin(h->tokens + h->limit / 1000.0, burst);
	for (h->arrivals += h->offered / 1000.0; h->arrivals >= 1;
	     h->arrivals--) {
		if (h->tokens < 1) {
			h->blocked++;
			continue;
		}
		h->tokens--;
		h->passed++;
		h->admitted_window++;
		h->rate_1s[h->now_ns / 1000000000ULL]++;
		if (h->queue >= h->backlog)
			h->overflows++;
		else
			h->queue++;
	}
	for (h->accepts += h->service / 1000.0; h->accepts >= 1 &&
	     h->queue > 0; h->accepts--)
		h->queue--;
	if (h->queue == 0 && h->accepts > 1)
		h->accepts = 1; /* an idle server banks nothing */
	if (h->queue > h->max_queue[h->now_ns / 1000000000ULL])
		h->max_queue[h->now_ns / 1000000000ULL] = h->queue;
}

/* Runs the host and the controller until until_s; the limits each tick
 * into limits[] (per 100 ms) when given. */
static void run(struct host *h, struct sl_adaptive *c,
		const struct sl_rule *r, double until_s, uint64_t *limits)
{
	while (h->now_ns < (uint64_t)(until_s * 1e9)) {
		host_ms(h);
		if (h->now_ns % (SL_ADAPT_TICK_MS * MS))
			continue;
		h->pressure = h->cpu_capacity
			? h->admitted_window * 1000.0 / SL_ADAPT_TICK_MS /
				  h->cpu_capacity * h->cpu_gain
			: -1;
		h->admitted_window = 0;
		struct sl_sys_sample s = {
			.now_ns = h->now_ns,
			.cpu_pressure = h->pressure,
			.softirq = -1,
			.load = -1,
			.queue = r->system.accept_queue ? h->queue : -1,
			.overflows = h->overflows,
			.passed = h->passed,
			.blocked = h->blocked,
		};
		h->limit = sl_adaptive_step(c, r, &s);
		if (limits)
			limits[h->now_ns / (SL_ADAPT_TICK_MS * MS)] = h->limit;
	}
}

static struct host new_host(const struct sl_rule *r, double offered,
			    double service)
{
	return (struct host){ .offered = offered, .service = service,
			      .backlog = 128, .limit = r->count };
}

/* Offered 5 N against a server of N: the queue stays below its target,
 * the admitted rate settles within 10 % of N, the threshold's swing is
 * within the documented bound (docs/rules.md: 10 % of N). */
static void test_queue_settles(void **state)
{
	struct sl_rule r = system_rule(5000, 32, 0, 10);
	struct host h = new_host(&r, 1000, 200);
	struct sl_adaptive c;
	uint64_t limits[200] = { 0 }, lo = UINT64_MAX, hi = 0;

	sl_adaptive_init(&c, &r);
	/* quiet for a second, then the flood */
	h.offered = 0;
	run(&h, &c, &r, 1, NULL);
	h.offered = 1000;
	run(&h, &c, &r, 12, limits);
	assert_true(c.shedding);
	assert_int_equal(c.why, SL_ADAPT_QUEUE);
	for (int s = 2; s < 12; s++) {
		assert_in_range(h.rate_1s[s], 180, 220);
		assert_true(h.max_queue[s] < 32);
	}
	for (int t = 30; t < 120; t++) {
		lo = limits[t] < lo ? limits[t] : lo;
		hi = limits[t] > hi ? limits[t] : hi;
	}
	print_message("# settled: threshold %llu-%llu, admitted %.0f/s\n",
		      (unsigned long long)lo, (unsigned long long)hi,
		      h.rate_1s[11]);
	assert_true(hi - lo <= 20);
	assert_int_equal(h.overflows, 0);
}

/* The load falls under what the server takes: shedding ends within the
 * calm period and a probe, and the threshold is count again. */
static void test_queue_recovers(void **state)
{
	struct sl_rule r = system_rule(5000, 32, 0, 10);
	struct host h = new_host(&r, 1000, 200);
	struct sl_adaptive c;

	sl_adaptive_init(&c, &r);
	run(&h, &c, &r, 5, NULL);
	assert_true(c.shedding);
	h.offered = 150;
	run(&h, &c, &r, 9, NULL);
	assert_false(c.shedding);
	assert_int_equal(h.limit, 5000);
	assert_in_range(h.rate_1s[8], 145, 155);
}

/* The server gets faster: the estimate follows (the probe while the
 * queue is empty), the admitted rate with it. */
static void test_capacity_rises(void **state)
{
	struct sl_rule r = system_rule(5000, 32, 0, 10);
	struct host h = new_host(&r, 1000, 200);
	struct sl_adaptive c;

	sl_adaptive_init(&c, &r);
	run(&h, &c, &r, 5, NULL);
	h.service = 400;
	run(&h, &c, &r, 12, NULL);
	assert_true(c.shedding);
	assert_in_range(h.rate_1s[11], 360, 440);
	assert_true(h.max_queue[11] < 32);
}

/* A server that stops accepting: the threshold falls to the floor, not
 * below; and never above count. */
static void test_floor(void **state)
{
	struct sl_rule r = system_rule(5000, 32, 0, 25);
	struct host h = new_host(&r, 1000, 200);
	struct sl_adaptive c;
	uint64_t limits[100] = { 0 };

	sl_adaptive_init(&c, &r);
	run(&h, &c, &r, 3, NULL);
	h.service = 0;
	run(&h, &c, &r, 8, limits);
	assert_int_equal(h.limit, 25);
	for (int t = 31; t <= 80; t++)
		assert_in_range(limits[t], 25, 5000);
}

/* CPU pressure: AIMD around where pressure crosses its threshold. With
 * pressure = admitted / 625 x 0.8, 0.5 is crossed at 390/s; the
 * threshold's sawtooth stays between SL_ADAPT_MD of that and the point. */
static void test_cpu_aimd(void **state)
{
	struct sl_rule r = system_rule(2000, 0, 500000, 10);
	struct host h = new_host(&r, 1000, 1e9);
	struct sl_adaptive c;
	uint64_t limits[200] = { 0 };
	double sum = 0;

	h.cpu_capacity = 625;
	h.cpu_gain = 0.8;
	sl_adaptive_init(&c, &r);
	run(&h, &c, &r, 15, limits);
	assert_true(c.shedding);
	assert_int_equal(c.why, SL_ADAPT_CPU_PRESSURE);
	for (int t = 50; t < 150; t++) {
		assert_in_range(limits[t], 390 * SL_ADAPT_MD * SL_ADAPT_MD,
				420);
		sum += limits[t];
	}
	print_message("# AIMD: mean threshold %.0f (crossing at 390)\n",
		      sum / 100);
	assert_in_range(sum / 100, 390 * SL_ADAPT_MD, 390);
	/* the pressure goes away: back to count after the calm period */
	h.cpu_gain = 0.1;
	run(&h, &c, &r, 60, NULL);
	assert_false(c.shedding);
	assert_int_equal(h.limit, 2000);
}

/* A signal the host does not have (PSI off) never sheds; a host whose
 * counters start over (a new rule set) is not mistaken for a flood. */
static void test_unknown_and_reset(void **state)
{
	struct sl_rule r = system_rule(2000, 0, 500000, 10);
	struct sl_adaptive c;
	struct sl_sys_sample s = { .now_ns = 100 * MS, .cpu_pressure = -1,
				   .softirq = -1, .load = -1, .queue = -1 };

	sl_adaptive_init(&c, &r);
	for (int i = 0; i < 50; i++) {
		s.now_ns += 100 * MS;
		s.passed += 1000;
		s.blocked += 1000;
		assert_int_equal(sl_adaptive_step(&c, &r, &s), 2000);
	}
	assert_false(c.shedding);
	s.cpu_pressure = 0.9;
	s.now_ns += 100 * MS;
	s.passed += 100;
	assert_int_equal(sl_adaptive_step(&c, &r, &s), 700);
	assert_true(c.shedding);
	/* counters from zero: that tick says nothing */
	s.now_ns += 100 * MS;
	s.passed = 5;
	s.blocked = 0;
	assert_int_equal(sl_adaptive_step(&c, &r, &s), 700);
}

/* softirq and load are AIMD signals like PSI, named as the cause. */
static void test_softirq_and_load(void **state)
{
	struct sl_rule r = { .name = "g", .count = 1000 };
	struct sl_adaptive c;
	struct sl_sys_sample s = { .now_ns = 100 * MS, .cpu_pressure = -1,
				   .softirq = 0.1, .load = 0.5, .queue = -1 };

	r.system.enabled = true;
	r.system.softirq = 300000;
	r.system.load = 2000;
	r.system.floor = 10;
	sl_adaptive_init(&c, &r);
	sl_adaptive_step(&c, &r, &s);
	s.now_ns += 100 * MS;
	s.passed += 100;
	s.load = 2.5;
	assert_int_equal(sl_adaptive_step(&c, &r, &s), 700);
	assert_int_equal(c.why, SL_ADAPT_LOAD);
	sl_adaptive_init(&c, &r);
	s.load = 0.5;
	sl_adaptive_step(&c, &r, &s);
	s.now_ns += 100 * MS;
	s.passed += 50;
	s.softirq = 0.35;
	assert_int_equal(sl_adaptive_step(&c, &r, &s), 350);
	assert_int_equal(c.why, SL_ADAPT_SOFTIRQ);
	assert_string_equal(sl_adapt_signal_names[c.why], "softirq");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queue_settles),
		cmocka_unit_test(test_queue_recovers),
		cmocka_unit_test(test_capacity_rises),
		cmocka_unit_test(test_floor),
		cmocka_unit_test(test_cpu_aimd),
		cmocka_unit_test(test_unknown_and_reset),
		cmocka_unit_test(test_softirq_and_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
