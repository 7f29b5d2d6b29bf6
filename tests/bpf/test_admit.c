// SPDX-License-Identifier: GPL-2.0
/*
 * Admission over time, on the test clock: the sliding window (exact
 * counts, arrival shapes, refusals that expire, buckets that roll), bps
 * and cps grades, pacing after a burst and under a flood, shadow mode,
 * allow and deny, and thresholds changed in force.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* ---- admission windows ------------------------------------------------ */

/* Tokens a CPU takes at once from a budget of limit (admit.h). */
static uint64_t chunk_of(const struct sl_dataplane *dp, uint64_t limit)
{
	uint64_t c = limit / (SLUICE_CHUNK_DIV * (uint64_t)dp->n_cpus);

	return c ? c : 1;
}

/*
 * A burst at one instant admits exactly the limit, and after a silence of
 * an interval and one admission slot (the ring's resolution) exactly the
 * limit again: no credit lost, none left over, no stale refusal.
 * (Traffic during the interval forfeits credit: test_pacing.)
 */
static void test_window_exact(struct sl_dataplane *dp)
{
	static const uint64_t counts[] = { 1, 7, 100, 1000, 4096 };

	for (size_t i = 0; i < ARRAY_SIZE(counts); i++) {
		uint64_t T = counts[i], N = 3 * T + 40;
		struct sl_rule_stats st;
		struct pkt p = udp_to(7000, NULL, 0);
		uint64_t t0;
		long a1, a2, a3;

		next_scenario();
		t0 = test_time();
		if (!tap(apply_one(dp, "win", 7000, "pps", T, NULL) == 0,
			 "window count %llu: rule applies",
			 (unsigned long long)T))
			continue;
		a1 = burst(dp, &p, N);
		st = rule_stats(dp, "win");
		tap(a1 == (long)T && st.passed_pkts == T &&
			    st.blocked_pkts == N - T &&
			    st.blocked_bytes == (N - T) * p.len,
		    "window count %llu: a burst of %llu at one instant admits "
		    "exactly %llu (admitted %ld, counters %llu/%llu)",
		    (unsigned long long)T, (unsigned long long)N,
		    (unsigned long long)T, a1,
		    (unsigned long long)st.passed_pkts,
		    (unsigned long long)st.blocked_pkts);
		/* silence, then one interval and one admission slot (the
		 * ring's resolution) after the burst */
		set_time(t0 + NSEC_PER_SEC + SLOT_NS);
		a2 = burst(dp, &p, N);
		tap(a2 == (long)T,
		    "window count %llu: an interval (+1 slot) later the same "
		    "burst admits exactly %llu again (admitted %ld)",
		    (unsigned long long)T, (unsigned long long)T, a2);
		/* no traffic at all for a while: nothing is lost either */
		set_time(t0 + 10 * NSEC_PER_SEC / 3);
		a3 = burst(dp, &p, N);
		tap(a3 == (long)T,
		    "window count %llu: after a longer silence again exactly "
		    "%llu (admitted %ld)",
		    (unsigned long long)T, (unsigned long long)T, a3);
	}
}

/*
 * The window holds whatever the arrival shape: one packet early, a burst
 * of the rest of the limit 30 ms later, and one interval after the first
 * packet a burst again. Only the early packet's grant has left the window,
 * so that burst may take it and the documented allowance, no more; a ring
 * that spread the early and late grants over one slot freed most of the
 * late burst here and admitted nearly the limit again.
 */
static void test_window_shape(struct sl_dataplane *dp)
{
	const uint64_t T = 3200, chunk = chunk_of(dp, T);
	/* the error bound of bpf/admit.h beyond what left the window */
	const uint64_t allowance = T / SLUICE_LEDGER_DIV + T / SLUICE_CHUNK_DIV;
	struct pkt p = udp_to(7003, NULL, 0);
	uint64_t t0;
	long early, late, echo, freed;

	next_scenario();
	t0 = test_time();
	if (!tap(apply_one(dp, "shape", 7003, "pps", T, NULL) == 0,
		 "window shape: rule applies"))
		return;
	early = burst(dp, &p, 1);
	set_time(t0 + 30 * NSEC_PER_MSEC);
	late = burst(dp, &p, 2 * T);
	tap(early == 1 && early + late == (long)T,
	    "window shape: 1 packet, 30 ms later a burst: %ld + %ld admitted, "
	    "expected the limit %llu", early, late, (unsigned long long)T);
	set_time(t0 + NSEC_PER_SEC + 29 * NSEC_PER_MSEC);
	echo = burst(dp, &p, 2 * T);
	tap(echo <= (long)(chunk + allowance),
	    "window shape: 1 s + 29 ms later, with only the first grant out "
	    "of the window, a burst admits %ld <= %llu (first grant %llu + "
	    "allowance %llu)", echo,
	    (unsigned long long)(chunk + allowance),
	    (unsigned long long)chunk, (unsigned long long)allowance);
	set_time(t0 + NSEC_PER_SEC + 31 * NSEC_PER_MSEC);
	freed = burst(dp, &p, 2 * T);
	/* less the straddling record's error at most: the echo's first
	 * grants join the late burst's last record, and its grants, taken
	 * as evenly spaced, are not (with chunks of 6, at 8 CPUs: 26) */
	tap(echo + freed <= (long)T &&
		    echo + freed >= (long)(T - T / SLUICE_LEDGER_DIV),
	    "window shape: once the late burst has left the window the limit "
	    "is free again: %ld + %ld admitted, expected %llu less at most "
	    "one record straddling the window's start (%llu)", echo, freed,
	    (unsigned long long)T, (unsigned long long)(T / SLUICE_LEDGER_DIV));
}

/*
 * A refusal must not outlive its moment: one packet over a limit of 1/s,
 * then one packet per interval, each of which fits the limit.
 */
static void test_refusal_expires(struct sl_dataplane *dp)
{
	struct pkt p = udp_to(7001, NULL, 0);
	int passed = 0, v;

	next_scenario();
	if (!tap(apply_one(dp, "once", 7001, "pps", 1, NULL) == 0,
		 "refusal: rule applies"))
		return;
	v = run(dp, &p);
	tap(v == XDP_PASS && run(dp, &p) == XDP_DROP,
	    "refusal: count 1 admits the first packet, drops the second");
	for (int k = 1; k <= 5; k++) {
		set_time(test_time() + NSEC_PER_SEC + SLOT_NS);
		passed += run(dp, &p) == XDP_PASS;
	}
	tap(passed == 5,
	    "refusal: then one packet per interval, 5 intervals: %d of 5 "
	    "admitted, expected 5", passed);
}

/*
 * A flood's refusal batch ends with its admission slot: after a burst far
 * over the limit at one instant, which leaves a batch of blocked packets
 * to come, a packet an interval later is judged afresh (the clock has
 * ticked), not held by the rest of the batch.
 */
static void test_refusal_batch_ends(struct sl_dataplane *dp)
{
	struct pkt p = udp_to(7005, NULL, 0);
	long passed;

	next_scenario();
	if (!tap(apply_one(dp, "batch", 7005, "pps", 10, NULL) == 0,
		 "refusal batch: rule applies"))
		return;
	passed = burst(dp, &p, 3000);
	tap(passed == 10,
	    "refusal batch: 3000 frames at one instant, 10 admitted (%ld)",
	    passed);
	set_time(test_time() + NSEC_PER_SEC + SLOT_NS);
	tap(run(dp, &p) == XDP_PASS,
	    "refusal batch: the next frame, an interval later, passes");
}

/*
 * Statistics move to the bucket of the time when the clock ticks, also
 * while a CPU spends tokens it holds (no refill, which would roll too):
 * 20 frames at the start of a bucket, 30 at the start of the next, all
 * from one chunk; at the start of the third the window holds the 30 alone.
 */
static void test_bucket_rolls_on_tick(struct sl_dataplane *dp)
{
	struct pkt p = udp_to(7006, NULL, 0);
	struct sl_rule_stats st;
	uint64_t t0;

	next_scenario();
	t0 = test_time();
	if (!tap(apply_one(dp, "roll", 7006, "pps", 1000000, NULL) == 0,
		 "bucket roll: rule applies"))
		return;
	burst(dp, &p, 20);
	set_time(t0 + NSEC_PER_SEC / 2);
	burst(dp, &p, 30);
	set_time(t0 + NSEC_PER_SEC);
	st = rule_stats(dp, "roll");
	tap(st.passed_pkts == 50 && st.passed_pps == 60.0,
	    "bucket roll: 50 passed, the window's rate is the second burst's "
	    "30 in its 0.5 s: %llu, %.1f/s (expected 60)",
	    (unsigned long long)st.passed_pkts, st.passed_pps);
}

/* bps: the bytes of frames admitted in a burst never exceed the limit. */
static void test_window_bps(struct sl_dataplane *dp)
{
	const size_t F = 100;
	struct pkt p = udp_to(7002, NULL, F);
	/* a limit whose chunk is a whole number of frames: exact */
	uint64_t T = F * SLUICE_CHUNK_DIV * dp->n_cpus * 3;
	struct sl_rule_stats st;
	long a;

	next_scenario();
	if (!tap(apply_one(dp, "bytes", 7002, "bps", T, NULL) == 0,
		 "bps: rule applies"))
		return;
	a = burst(dp, &p, 2 * T / F + 40);
	st = rule_stats(dp, "bytes");
	tap(a == (long)(T / F) && st.passed_bytes == T &&
		    st.blocked_bytes == (2 * T / F + 40 - a) * F,
	    "bps %llu B/s, %zu-byte frames: a burst admits exactly %llu "
	    "frames = %llu bytes (admitted %ld frames, %llu bytes)",
	    (unsigned long long)T, F, (unsigned long long)(T / F),
	    (unsigned long long)T, a, (unsigned long long)st.passed_bytes);
	set_time(test_time() + NSEC_PER_SEC + SLOT_NS);
	a = burst(dp, &p, 2 * T / F + 40);
	tap(a == (long)(T / F), "bps: an interval later again %llu frames "
				"(admitted %ld)",
	    (unsigned long long)(T / F), a);

	/* a limit that is not a multiple of the frame size */
	T = 10050;
	next_scenario();
	if (!tap(apply_one(dp, "bytes2", 7002, "bps", T, NULL) == 0,
		 "bps: second rule applies"))
		return;
	a = burst(dp, &p, 300);
	st = rule_stats(dp, "bytes2");
	tap(st.passed_bytes <= T && st.passed_bytes + 2 * F > T &&
		    st.passed_bytes == (uint64_t)a * F,
	    "bps %llu B/s: admitted %llu bytes, within (limit - 2 frames, "
	    "limit]", (unsigned long long)T,
	    (unsigned long long)st.passed_bytes);

	/* a frame larger than the whole limit is never admitted */
	next_scenario();
	if (!tap(apply_one(dp, "bytes3", 7002, "bps", F - 1, NULL) == 0,
		 "bps: third rule applies"))
		return;
	a = burst(dp, &p, 10);
	tap(a == 0, "bps %zu B/s: a %zu-byte frame is never admitted "
		    "(admitted %ld)", F - 1, F, a);
}

/* The most that any span of span ms from ms `from` on admitted, per ms
 * counts in adm[0..n); *at: where that span starts. */
static uint64_t busiest_span(const long *adm, int n, int from, int span,
			     int *at)
{
	uint64_t worst = 0;

	*at = from;
	for (int s = from; s + span <= n; s++) {
		uint64_t w = 0;

		for (int ms = s; ms < s + span; ms++)
			w += adm[ms];
		if (w > worst) {
			worst = w;
			*at = s;
		}
	}
	return worst;
}

/*
 * After a burst, traffic at 3x the rate every 1 ms of test time: the
 * following intervals admit the rate, paced, and no sliding interval
 * (1 ms resolution) admits more than 1.05 x count.
 */
static void test_pacing_one(struct sl_dataplane *dp, uint64_t C)
{
	const int ms_total = 3000;
	uint64_t per_ms = 3 * C / 1000, t0, sum = 0, worst;
	static long adm[3000];
	struct pkt p = udp_to(7003, NULL, 0);
	int worst_at, bad = 0;
	char name[32];

	snprintf(name, sizeof(name), "pace-%llu", (unsigned long long)C);
	next_scenario();
	t0 = test_time();
	if (!tap(apply_one(dp, name, 7003, "pps", C, NULL) == 0,
		 "pacing %llu/s: rule applies", (unsigned long long)C))
		return;
	memset(adm, 0, sizeof(adm));
	adm[0] = burst(dp, &p, 3 * C);
	for (int ms = 1; ms < ms_total && !bad; ms++) {
		set_time(t0 + ms * NSEC_PER_MSEC);
		adm[ms] = burst(dp, &p, per_ms);
		bad = adm[ms] < 0;
	}
	if (!tap(!bad && adm[0] == (long)C,
		 "pacing %llu/s: the opening burst admits %llu (got %ld)",
		 (unsigned long long)C, (unsigned long long)C, adm[0]))
		return;
	for (int ms = 1000; ms < 3000; ms++)
		sum += adm[ms];
	tap(sum >= 2 * C * 95 / 100 && sum <= 2 * C * 105 / 100,
	    "pacing %llu/s: intervals 2-3 admit %llu, within 5%% of %llu",
	    (unsigned long long)C, (unsigned long long)sum,
	    (unsigned long long)(2 * C));
	worst = busiest_span(adm, ms_total, 0, 1000, &worst_at);
	tap(worst * 100 <= C * 105,
	    "pacing %llu/s: the busiest sliding interval admits %llu "
	    "(from ms %d), at most 1.05 x %llu",
	    (unsigned long long)C, (unsigned long long)worst, worst_at,
	    (unsigned long long)C);
	{
		uint64_t first = 0;

		for (int ms = 1; ms < 1000; ms++)
			first += adm[ms];
		tap(first * 100 <= C * 5,
		    "pacing %llu/s: the rest of the burst's interval admits "
		    "%llu (<= 5%% of count)", (unsigned long long)C,
		    (unsigned long long)first);
	}
}

static void test_pacing(struct sl_dataplane *dp)
{
	test_pacing_one(dp, 1000);
	test_pacing_one(dp, 10000);
}

/*
 * A flood from idle: the opening burst passes, and after the first
 * interval the flood is paced, not re-admitted as a burst every interval
 * (pace_hold(); with the pacing clock's full credit each interval's first
 * 100 ms took the whole count). Counted per ms of test time.
 */
static void test_flood_smooth(struct sl_dataplane *dp)
{
	const uint64_t C = 6500, per_ms = 40, ms_total = 8000;
	/* one interval / SLUICE_ECHO_DIV of kept credit, 100 ms of pacing,
	 * the window's allowance */
	const uint64_t bound = C / SLUICE_ECHO_DIV + C / 10 +
			       C / SLUICE_LEDGER_DIV + C / SLUICE_CHUNK_DIV;
	static long adm[8000];
	struct pkt p = udp_to(7005, NULL, 0);
	uint64_t t0, sum = 0, worst;
	int worst_at;

	next_scenario();
	t0 = test_time();
	if (!tap(apply_one(dp, "smooth", 7005, "pps", C, NULL) == 0,
		 "flood shape: rule applies"))
		return;
	for (uint64_t ms = 0; ms < ms_total; ms++) {
		set_time(t0 + ms * NSEC_PER_MSEC);
		adm[ms] = burst(dp, &p, per_ms);
		if (adm[ms] < 0) {
			tap(false, "flood shape: test run fails (%ld)",
			    adm[ms]);
			return;
		}
	}
	for (uint64_t ms = 1000; ms < ms_total; ms++)
		sum += adm[ms];
	tap(sum * 100 >= 7 * C * 98 && sum * 100 <= 7 * C * 102,
	    "flood shape: 40 pkt/ms against %llu/s: intervals 2-8 admit "
	    "%llu, within 2%% of %llu", (unsigned long long)C,
	    (unsigned long long)sum, (unsigned long long)(7 * C));
	worst = busiest_span(adm, ms_total, 1000, 100, &worst_at);
	tap(worst <= bound,
	    "flood shape: after the first interval the busiest 100 ms admit "
	    "%llu (from ms %d), at most %llu (kept credit, 100 ms of count, "
	    "allowance)", (unsigned long long)worst, worst_at,
	    (unsigned long long)bound);
}

/*
 * Two bursts just under an interval apart, silence between: together
 * they must not exceed the documented bound in one sliding interval.
 */
static void test_two_bursts(struct sl_dataplane *dp)
{
	const uint64_t C = 1000;
	struct pkt p = udp_to(7004, NULL, 0);
	static const uint64_t gap_ms[] = { 999, 990, 969, 500 };

	for (size_t i = 0; i < ARRAY_SIZE(gap_ms); i++) {
		uint64_t t0;
		long a, b;

		next_scenario();
		t0 = test_time() + SLOT_NS - 1;
		set_time(t0);
		if (!tap(apply_one(dp, "twice", 7004, "pps", C, NULL) == 0,
			 "two bursts: rule applies"))
			return;
		a = burst(dp, &p, 2 * C);
		set_time(t0 + gap_ms[i] * NSEC_PER_MSEC);
		b = burst(dp, &p, 2 * C);
		tap(a == (long)C && (uint64_t)(a + b) * 100 <= C * 105,
		    "two bursts %llu ms apart (first at the end of an "
		    "admission slot): %ld + %ld admitted within one "
		    "interval, at most 1.05 x %llu",
		    (unsigned long long)gap_ms[i], a, b,
		    (unsigned long long)C);
	}
}



/*
 * Sentinel's LeapArray, as a model to run the same arrivals through:
 * n buckets of interval / n aligned on the clock; a bucket counts while
 * now - its start <= interval (isWindowDeprecated), and a request passes
 * while the window's sum stays within limit. Returns what a burst of
 * want at now_ms passes; sums[] and starts[] are its state.
 */
static long leap_array_burst(uint64_t *sums, uint64_t *starts, uint32_t n,
			     uint64_t interval_ms, uint64_t limit,
			     uint64_t now_ms, long want)
{
	uint64_t len = interval_ms / n, start = now_ms - now_ms % len;
	uint32_t cur = start / len % n;
	uint64_t used = 0;
	long passed = 0;

	if (starts[cur] != start) {
		starts[cur] = start;
		sums[cur] = 0;
	}
	for (uint32_t i = 0; i < n; i++)
		if (starts[i] != UINT64_MAX && now_ms - starts[i] <= interval_ms)
			used += sums[i];
	for (; passed < want && used < limit; passed++, used++)
		sums[cur]++;
	return passed;
}

/*
 * The boundary burst: a full burst at the end of a bucket and another
 * just after that bucket leaves a LeapArray's window. A LeapArray of any
 * bucket count passes both (2 x count within interval - bucket + 2 ms);
 * sluice's admission keeps its own ledger, so any interval holds its
 * bound, and sample_count (the statistics' buckets) changes nothing.
 */
static void test_boundary_burst(struct sl_dataplane *dp)
{
	static const uint32_t counts[] = { 1, 2, 4, 8 };
	const uint64_t C = 1000;
	struct pkt p = udp_to(7005, NULL, 0);
	long first_a = -1, first_b = -1;

	for (size_t i = 0; i < ARRAY_SIZE(counts); i++) {
		uint32_t n = counts[i];
		uint64_t sums[8] = { 0 }, starts[8], bucket_ms = 1000 / n;
		uint64_t t0, t0_ms, t1_ms;
		char extra[64];
		long a, b, la, lb;

		memset(starts, 0xff, sizeof(starts));
		next_scenario(); /* a whole second: buckets start on it */
		t0 = test_time();
		t0_ms = t0 / NSEC_PER_MSEC + bucket_ms - 1;
		t1_ms = t0 / NSEC_PER_MSEC + 1000 + 1;
		snprintf(extra, sizeof(extra),
			 "\"window\":{\"interval_ms\":1000,\"sample_count\":%u}",
			 n);
		if (!tap(apply_one(dp, "edge", 7005, "pps", C, extra) == 0,
			 "boundary burst, sample_count %u: rule applies", n))
			continue;
		set_time(t0_ms * NSEC_PER_MSEC);
		a = burst(dp, &p, 2 * C);
		set_time(t1_ms * NSEC_PER_MSEC);
		b = burst(dp, &p, 2 * C);
		la = leap_array_burst(sums, starts, n, 1000, C, t0_ms, 2 * C);
		lb = leap_array_burst(sums, starts, n, 1000, C, t1_ms, 2 * C);
		tap(la + lb == (long)(2 * C),
		    "boundary burst, sample_count %u: a LeapArray passes %ld + "
		    "%ld within %llu ms (the case is its boundary)",
		    n, la, lb, (unsigned long long)(t1_ms - t0_ms + 1));
		tap(a == (long)C && (uint64_t)(a + b) * 100 <= C * 105,
		    "boundary burst, sample_count %u: sluice passes %ld + %ld, "
		    "at most 1.05 x %llu",
		    n, a, b, (unsigned long long)C);
		if (first_a < 0) {
			first_a = a;
			first_b = b;
		}
		tap(a == first_a && b == first_b,
		    "boundary burst, sample_count %u: admission as with 1 "
		    "bucket (%ld + %ld)", n, first_a, first_b);
	}
}

/* ---- shadow mode, cps ------------------------------------------------- */

static void test_shadow(struct sl_dataplane *dp)
{
	struct pkt p = udp_to(7100, NULL, 0);
	struct sl_rule_stats st;
	long passed;

	next_scenario();
	if (!tap(apply_one(dp, "shadow", 7100, "pps", 5,
			   "\"mode\":\"shadow\"") == 0,
		 "shadow: rule applies"))
		return;
	passed = burst(dp, &p, 50);
	st = rule_stats(dp, "shadow");
	tap(passed == 50, "shadow: all 50 frames pass (%ld)", passed);
	tap(st.passed_pkts == 5 && st.blocked_pkts == 45 &&
		    st.blocked_bytes == 45 * p.len,
	    "shadow: 5 counted passed, 45 counted blocked (%llu/%llu)",
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts);
	/* the rates are over the part of the window the buckets cover: at
	 * the start of a bucket, the one before it (0.5 s): 10/s and 90/s */
	tap(st.passed_pps == 10.0 && st.blocked_pps == 90.0 &&
		    st.blocked_Bps == 90.0 * p.len,
	    "shadow: windowed rates %.1f passed/s, %.1f blocked/s",
	    st.passed_pps, st.blocked_pps);
	set_time(test_time() + 2 * NSEC_PER_SEC);
	st = rule_stats(dp, "shadow");
	tap(st.passed_pps == 0 && st.blocked_pps == 0 && st.passed_pkts == 5,
	    "shadow: two intervals later the rates are 0, totals stay "
	    "(%.1f/s, %llu)", st.passed_pps,
	    (unsigned long long)st.passed_pkts);
}

/* ---- allow and deny ---------------------------------------------------- */

#define UDP_RULE(name, port, rest)                                             \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"udp\",\"dport\":" #port \
	"}," rest "}"

static void test_allow_deny(struct sl_dataplane *dp)
{
	static const struct {
		const char *name;
		uint16_t port;
		long pass, passed, blocked;
	} want[] = {
		{ "lim", 7200, 5, 5, 45 },  { "dn", 7201, 0, 0, 50 },
		{ "al", 7202, 50, 50, 0 },  { "sh", 7203, 50, 0, 50 },
	};
	struct pkt p;
	long a;

	next_scenario();
	if (!tap(apply(dp, "{\"rules\":["
			 UDP_RULE("lim", 7200, "\"grade\":\"pps\",\"count\":5") ","
			 UDP_RULE("dn", 7201, "\"action\":\"deny\"") ","
			 UDP_RULE("al", 7202, "\"action\":\"allow\"") ","
			 UDP_RULE("sh", 7203, "\"action\":\"deny\","
					      "\"mode\":\"shadow\"") "]}") == 0,
		 "allow/deny: rules apply"))
		return;
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
		struct sl_rule_stats st;

		p = udp_to(want[i].port, NULL, 0);
		a = burst(dp, &p, 50);
		st = rule_stats(dp, want[i].name);
		tap(a == want[i].pass && (long)st.passed_pkts == want[i].passed &&
			    (long)st.blocked_pkts == want[i].blocked &&
			    st.blocked_bytes == (uint64_t)want[i].blocked * p.len,
		    "allow/deny: %s passes %ld of 50 (%ld), counts %llu "
		    "passed, %llu blocked", want[i].name, want[i].pass, a,
		    (unsigned long long)st.passed_pkts,
		    (unsigned long long)st.blocked_pkts);
	}
	/* ticks later (a new refusal, tokens refilled) the same again */
	set_time(test_time() + 2 * NSEC_PER_SEC);
	for (size_t i = 1; i < 3; i++) {
		struct sl_rule_stats st;

		p = udp_to(want[i].port, NULL, 0);
		a = burst(dp, &p, 50);
		st = rule_stats(dp, want[i].name);
		tap(a == want[i].pass &&
			    (long)st.passed_pkts == 2 * want[i].passed &&
			    (long)st.blocked_pkts == 2 * want[i].blocked,
		    "allow/deny: 2 s later %s passes %ld of 50 (%ld), counts "
		    "%llu passed, %llu blocked in all", want[i].name,
		    want[i].pass, a, (unsigned long long)st.passed_pkts,
		    (unsigned long long)st.blocked_pkts);
	}
	/* a limit with tokens cached on this CPU becomes a deny: its
	 * tokens do not pass a packet */
	p = udp_to(7204, NULL, 0);
	if (!tap(apply_one(dp, "lim2", 7204, "pps", 100000, NULL) == 0,
		 "allow/deny: a limit of 100000 applies"))
		return;
	a = burst(dp, &p, 10);
	tap(a == 10, "allow/deny: the limit passes 10 of 10 (%ld), "
		     "caching tokens", a);
	if (!tap(apply(dp, "{\"rules\":[" UDP_RULE("lim2", 7204,
					    "\"action\":\"deny\"") "]}") == 0,
		 "allow/deny: the same match as a deny applies"))
		return;
	a = burst(dp, &p, 10);
	tap(a == 0, "allow/deny: the deny passes 0 of 10 (%ld)", a);
}

/* n packets from src to port; how many passed. */
static long from(struct sl_dataplane *dp, const char *src, uint16_t port,
		 long n)
{
	struct pkt p = udp_to(port, src, 0);

	return burst(dp, &p, n);
}

static bool counts(struct sl_dataplane *dp, const char *rule, long passed,
		   long blocked)
{
	struct sl_rule_stats st = rule_stats(dp, rule);

	if ((long)st.passed_pkts == passed && (long)st.blocked_pkts == blocked)
		return true;
	fprintf(stderr, "# %s: %llu passed, %llu blocked; want %ld, %ld\n",
		rule, (unsigned long long)st.passed_pkts,
		(unsigned long long)st.blocked_pkts, passed, blocked);
	return false;
}

/*
 * Layers: the winner of each layer judges, lowest layer first; a refusal
 * stops the walk and keeps what earlier layers took; an allow stops it
 * with a pass; a shadow layer's would-be drop goes on.
 */
static void test_layers(struct sl_dataplane *dp)
{
	static const char *const srcs[] = { "10.0.0.1", "10.0.0.2",
					    "10.0.0.3", "10.0.0.4" };
	long got[4];

	next_scenario();
	if (!tap(apply(dp, "{\"rules\":["
		 UDP_RULE("src", 7300, "\"grade\":\"pps\",\"count\":5,"
			  "\"per_source\":{\"max_sources\":100}") ","
		 UDP_RULE("svc", 7300, "\"grade\":\"pps\",\"count\":12,"
			  "\"layer\":1") ","
		 "{\"name\":\"mon\",\"match\":{\"proto\":\"udp\",\"dport\":"
		 "7301,\"src\":\"10.0.9.0/24\"},\"action\":\"allow\"},"
		 UDP_RULE("svc2", 7301, "\"grade\":\"pps\",\"count\":3,"
			  "\"layer\":2") ","
		 UDP_RULE("shd", 7302, "\"action\":\"deny\","
			  "\"mode\":\"shadow\"") ","
		 UDP_RULE("lim3", 7302, "\"grade\":\"pps\",\"count\":4,"
			  "\"layer\":3") ","
		 UDP_RULE("l0", 7303, "\"grade\":\"pps\",\"count\":5") ","
		 "{\"name\":\"dn\",\"match\":{\"proto\":\"udp\",\"dport\":"
		 "7303,\"src\":\"10.0.7.0/24\"},\"action\":\"deny\","
		 "\"layer\":1}]}") == 0,
		 "layers: rules apply"))
		return;

	/* each source its 5, and the service 12 in all */
	sources_round(dp, srcs, 4, 10, 4, 7300, got);
	tap(got[0] + got[1] + got[2] + got[3] == 12 && got[0] <= 5 &&
		    got[1] <= 5 && got[2] <= 5 && got[3] <= 5 &&
		    counts(dp, "src", 20, 20) && counts(dp, "svc", 12, 8),
	    "layers: 4 sources of 10 under 5 a source and 12 in all pass "
	    "%ld %ld %ld %ld", got[0], got[1], got[2], got[3]);

	/* an allow skips the layers after it; the others meet the limit */
	got[0] = from(dp, "10.0.9.1", 7301, 10);
	got[1] = from(dp, "10.0.8.1", 7301, 10);
	tap(got[0] == 10 && got[1] == 3 && counts(dp, "mon", 10, 0) &&
		    counts(dp, "svc2", 3, 7),
	    "layers: an allow at layer 0 passes %ld of 10 past a limit of 3 "
	    "at layer 2, which holds others to 3 (%ld)", got[0], got[1]);

	/* a shadow layer counts and goes on */
	tap(from(dp, "10.0.0.1", 7302, 10) == 4 && counts(dp, "shd", 0, 10) &&
		    counts(dp, "lim3", 4, 6),
	    "layers: a shadow deny counts 10 and the limit after it holds "
	    "to 4");

	/* a later refusal keeps what the earlier layer took */
	tap(from(dp, "10.0.7.1", 7303, 10) == 0 &&
		    from(dp, "10.0.6.1", 7303, 10) == 0 &&
		    counts(dp, "l0", 5, 15) && counts(dp, "dn", 0, 5),
	    "layers: a deny at layer 1 drops the 5 that layer 0 admitted, "
	    "which stay spent");
	set_time(test_time() + 2 * NSEC_PER_SEC);
	tap(from(dp, "10.0.6.1", 7303, 10) == 5 && counts(dp, "l0", 10, 20) &&
		    counts(dp, "dn", 0, 5),
	    "layers: a second later others pass 5 of 10 and the deny sees "
	    "none of them");
}

static void test_cps(struct sl_dataplane *dp)
{
	struct pspec syn = { .proto = TCP_, .dport = 443, .flags = PKT_SYN };
	struct pspec ack = { .proto = TCP_, .dport = 443, .flags = PKT_ACK };
	struct pspec synack = { .proto = TCP_, .dport = 443,
				.flags = PKT_SYN | PKT_ACK };
	struct pkt ps, pa, psa;
	uint64_t h0[SLUICE_ST_MAX], h1[SLUICE_ST_MAX];
	struct sl_rule_stats st;
	int syn_pass = 0, syn_drop = 0, other_pass = 0;

	build(&syn, &ps);
	build(&ack, &pa);
	build(&synack, &psa);
	next_scenario();
	if (!tap(apply(dp, "{\"rules\":[{\"name\":\"syn443\",\"match\":"
		       "{\"proto\":\"tcp\",\"dport\":443},\"grade\":\"cps\","
		       "\"count\":5}]}") == 0,
		 "cps: rule applies"))
		return;
	host_stats(dp, h0);
	for (int i = 0; i < 40; i++) {
		int v = run(dp, &ps);

		syn_pass += v == XDP_PASS;
		syn_drop += v == XDP_DROP;
		other_pass += run(dp, &pa) == XDP_PASS;
		other_pass += run(dp, &psa) == XDP_PASS;
	}
	host_stats(dp, h1);
	st = rule_stats(dp, "syn443");
	tap(syn_pass == 5 && syn_drop == 35,
	    "cps 5/s: a flood of 40 SYNs: 5 pass, 35 dropped (%d/%d)",
	    syn_pass, syn_drop);
	tap(other_pass == 80 &&
		    h1[SLUICE_ST_UNMATCHED] - h0[SLUICE_ST_UNMATCHED] == 80,
	    "cps: 40 ACKs and 40 SYN-ACKs to 443 in the flood all pass, "
	    "unmatched by the cps rule (%d passed, unmatched +%llu)",
	    other_pass,
	    (unsigned long long)(h1[SLUICE_ST_UNMATCHED] -
				 h0[SLUICE_ST_UNMATCHED]));
	tap(st.passed_pkts == 5 && st.blocked_pkts == 35,
	    "cps: rule counters count SYNs only (%llu passed, %llu blocked)",
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts);
}

/* ---- threshold changes ---------------------------------------------- */

static void test_set_limit(struct sl_dataplane *dp)
{
	struct pkt p = udp_to(8100, NULL, 0);
	uint64_t chunk;
	long a;

	next_scenario();
	if (!tap(apply_one(dp, "lim", 8100, "pps", 10, NULL) == 0,
		 "set_limit: rule applies"))
		return;
	a = burst(dp, &p, 60);
	tap(a == 10, "set_limit: count 10 admits 10 (%ld)", a);
	tap(sl_dp_set_limit(dp, "lim", 4, NULL) == 0, "set_limit: lowered to 4");
	set_time(test_time() + 500 * NSEC_PER_MSEC);
	a = burst(dp, &p, 60);
	tap(a == 0, "set_limit: within the same interval nothing more is "
		    "admitted (%ld)", a);
	next_scenario();
	a = burst(dp, &p, 60);
	tap(a == 4, "set_limit: the next interval admits 4 (%ld)", a);
	tap(sl_dp_set_limit(dp, "lim", 25, NULL) == 0, "set_limit: raised to 25");
	a = sl_dp_get_limit(dp, 0, &chunk);
	tap(a == 0 && chunk == 25, "get_limit: rule_limit holds 25 (%ld, %llu)",
	    a, (unsigned long long)chunk);
	tap(sl_dp_get_limit(dp, 1, &chunk) == -ENOENT,
	    "get_limit: past the rules in force is -ENOENT");
	next_scenario();
	a = burst(dp, &p, 60);
	tap(a == 25, "set_limit: the next interval admits 25 (%ld)", a);
	tap(sl_dp_set_limit(dp, "nosuch", 25, NULL) == -ENOENT,
	    "set_limit: an unknown rule is -ENOENT");

	/* a large limit: a chunk of the old limit may still be cached */
	next_scenario();
	if (!tap(apply_one(dp, "lim2", 8101, "pps", 1000, NULL) == 0,
		 "set_limit: second rule applies"))
		return;
	p = udp_to(8101, NULL, 0);
	chunk = chunk_of(dp, 1000);
	a = burst(dp, &p, 500);
	tap(a == 500, "set_limit: 500 of a 1000/s limit pass (%ld)", a);
	sl_dp_set_limit(dp, "lim2", 100, NULL);
	next_scenario();
	a = burst(dp, &p, 500);
	tap(a >= 100 && a <= 100 + (long)chunk,
	    "set_limit: lowered to 100: the next interval admits %ld, in "
	    "[100, 100 + one cached chunk of %llu]",
	    a, (unsigned long long)chunk);
}

/*
 * A lease in the data plane: the grant holds until its expiry, then the
 * program itself enforces the fallback written beside it, with no agent
 * to write it; a limit set without a lease clears it.
 */
static void test_lease_expiry(struct sl_dataplane *dp)
{
	struct pkt p = udp_to(8102, NULL, 0);
	struct sluice_lease lease = { .fallback = 100 };
	uint64_t t0;
	long a;

	next_scenario();
	t0 = test_time();
	if (!tap(apply_one(dp, "leased", 8102, "pps", 1000, NULL) == 0,
		 "lease: rule applies"))
		return;
	lease.expires_ns = t0 + 2500 * NSEC_PER_MSEC;
	tap(sl_dp_set_limit(dp, "leased", 1000, &lease) == 0,
	    "lease: grant 1000 until t0 + 2.5 s, fallback 100");
	a = burst(dp, &p, 2000);
	tap(a == 1000, "lease: at t0 the grant admits 1000 (%ld)", a);
	set_time(t0 + NSEC_PER_SEC + SLOT_NS);
	a = burst(dp, &p, 2000);
	tap(a == 1000, "lease: at t0 + 1 s, before the expiry, 1000 (%ld)", a);
	set_time(t0 + 3 * NSEC_PER_SEC);
	a = burst(dp, &p, 2000);
	tap(a == 100, "lease: at t0 + 3 s, expired with no agent to say so, "
	    "the fallback admits 100 (%ld)", a);
	tap(sl_dp_set_limit(dp, "leased", 1000, NULL) == 0,
	    "lease: limit 1000 set without a lease");
	set_time(t0 + 4 * NSEC_PER_SEC + SLOT_NS);
	a = burst(dp, &p, 2000);
	tap(a == 1000, "lease: cleared, 1000 again (%ld)", a);
}

/*
 * A jumbo frame in several buffers: sluice_xdp_frags, which a driver
 * takes where it refuses sluice_xdp (its MTU), charges the whole frame,
 * although data_end reaches only the first buffer (BPF_PROG_TEST_RUN
 * puts what passes about a page in fragments, as such a driver does).
 */
static void test_multi_buffer(void)
{
	static uint8_t frame[9000];
	struct sl_dp_opts o = { .test_clock = true, .frags = true };
	struct pkt p = udp_to(7003, NULL, 0);
	struct sl_rule_stats st;
	struct sl_dataplane d;
	int v[3];

	if (!tap(h_load(&d, &o) == 0, "multi-buffer: a data plane with "
				      "sluice_xdp_frags loads"))
		return;
	if (!d.frags) {
		tap_skip("the kernel has no multi-buffer XDP (5.18)",
			 "multi-buffer: a 9000-byte frame is charged whole");
		h_unload(&d);
		return;
	}
	next_scenario();
	if (tap(apply_one(&d, "jumbo", 7003, "bps", 20000, NULL) == 0,
		"multi-buffer: a bps rule of 20000 applies")) {
		memcpy(frame, p.buf, p.len);
		for (int i = 0; i < 3; i++)
			v[i] = run_frags_len(&d, frame, sizeof(frame));
		st = rule_stats(&d, "jumbo");
		tap(v[0] == XDP_PASS && v[1] == XDP_PASS && v[2] == XDP_DROP &&
			    st.passed_bytes == 2 * sizeof(frame) &&
			    st.blocked_bytes == sizeof(frame),
		    "multi-buffer: 9000-byte frames are charged whole: 2 "
		    "pass (%s, %s; %llu bytes), the third is over 20000 (%s, "
		    "%llu bytes blocked)", verdict_str(v[0]),
		    verdict_str(v[1]), (unsigned long long)st.passed_bytes,
		    verdict_str(v[2]), (unsigned long long)st.blocked_bytes);
	}
	h_unload(&d);
}

int main(void)
{
	struct sl_dataplane dp;

	if (h_begin(&dp))
		return h_end();
	test_window_exact(&dp);
	test_window_shape(&dp);
	test_refusal_expires(&dp);
	test_refusal_batch_ends(&dp);
	test_bucket_rolls_on_tick(&dp);
	test_window_bps(&dp);
	test_pacing(&dp);
	test_flood_smooth(&dp);
	test_two_bursts(&dp);
	test_boundary_burst(&dp);
	test_shadow(&dp);
	test_allow_deny(&dp);
	test_layers(&dp);
	test_cps(&dp);
	test_set_limit(&dp);
	test_lease_expiry(&dp);
	test_multi_buffer();
	h_unload(&dp);
	return h_end();
}
