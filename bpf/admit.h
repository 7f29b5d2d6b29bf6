/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Admission: a host-wide sliding window with pacing, shared by all CPUs
 * through atomics, and per-CPU token caches in front of it.
 *
 * A rule admits at most L = count * interval_ms / 1000 tokens (packets,
 * bytes or SYNs) in any window of interval_ms. The shared state is:
 *  - a ledger of grant records, each holding at most L / SLUICE_LEDGER_DIV
 *    tokens with the times of its first and last grant; the record that
 *    straddles the window's start is counted by interpolation;
 *  - a pacing clock (GCRA): credit accrues at count per second up to one
 *    interval's worth, or 1/SLUICE_ECHO_DIV of it through a long refusal
 *    by the window (pace_hold()), so a flood is paced rather than
 *    re-admitted as a burst every interval.
 * A CPU takes tokens in chunks of L / (SLUICE_CHUNK_DIV * nr_cpus) and
 * spends them without reading the clock; after refused requests it
 * blocks an adaptive batch of up to SLUICE_DENY_BATCH packets before
 * asking again.
 *
 * Bound (derivation in docs/architecture.md): any interval_ms admits at
 * most L * (1 + 1/SLUICE_LEDGER_DIV + 1/SLUICE_CHUNK_DIV) = 1.047 L with
 * the defaults, whatever the arrival shape, plus what contended CPUs'
 * shares leave unspent beyond their chunks (about two ticks' credit); the
 * long-run rate is count.
 * A per_source rule's sources are admitted in source.h.
 */
#ifndef SLUICE_ADMIT_H
#define SLUICE_ADMIT_H

#include <linux/errno.h>
#include "maps.h"

_Static_assert((SLUICE_MAX_SAMPLES & (SLUICE_MAX_SAMPLES - 1)) == 0,
	       "SLUICE_MAX_SAMPLES must be a power of two");
_Static_assert(SLUICE_CHUNK_DIV >= 2 * SLUICE_LEDGER_DIV,
	       "a chunk must fit twice in a grant record");
_Static_assert(SLUICE_DENY_BATCH <= 0x7fff, "a refusal's batch is 16 bits");
_Static_assert(SLUICE_LEDGER_RECORDS >= 2 * SLUICE_LEDGER_DIV + 2,
	       "the ledger must hold an interval's records");

static __always_inline __u64 sluice_now(void)
{
	if (test_clock)
		return test_now_ns;
	return bpf_ktime_get_ns();
}

/* The jiffy-resolution clock: a third of the cost, for statistics
 * buckets and per-source budgets (slots of interval / 4 or more). */
static __always_inline __u64 sluice_now_coarse(void)
{
	if (test_clock)
		return test_now_ns;
	return bpf_ktime_get_coarse_ns();
}

/*
 * A stamp that changes whenever sluice_now_coarse() may have: the low
 * bits of jiffies, which the verifier inlines as one load, so that a
 * packet can tell without a helper call that the coarse clock has not
 * moved. Jiffies move just before the coarse clock in a tick: a packet in
 * that gap makes the next check wait one tick more.
 */
static __always_inline __u32 sluice_tick(void)
{
	if (test_clock)
		return test_tick_ns ? (__u32)(test_now_ns / test_tick_ns)
				    : (__u32)(test_now_ns ^ test_now_ns >> 32);
	return (__u32)bpf_jiffies64();
}

#define USEC_PER_SEC 1000000ULL
#define NSEC_PER_USEC 1000ULL

/*
 * Tokens a rule granted in the window (now - interval, now]: the sum of
 * its grant records whose last grant lies in the window; of a record that
 * straddles the window's start, the grants after it, taken as evenly
 * spaced between its first and last (exact for one burst and for a steady
 * flood's chunks). A record holds at most L / SLUICE_LEDGER_DIV tokens, so
 * whatever the arrival shape, that errs by less.
 */
static __always_inline __u64 ledger_used(struct sluice_budget *bud,
					 __u64 start_ns)
{
	__u64 used = 0;
	__u32 i;

	for (i = 0; i < SLUICE_LEDGER_RECORDS; i++) {
		struct sluice_grant_rec *r = &bud->rec[i];
		__u64 last = READ_ONCE(r->last_ns);
		__u64 first, taken, grants;

		if (last < start_ns)
			continue;
		first = READ_ONCE(r->first_ns);
		taken = READ_ONCE(r->taken);
		grants = READ_ONCE(r->grants);
		if (first < start_ns && last > first && grants > 1) {
			/* of grants evenly spaced from first to last, those
			 * at or after the window's start */
			__u64 later = (grants - 1) * ((last - start_ns) >> 12) /
				      (((last - first) >> 12) + 1) + 1;

			taken = taken * later / grants;
		}
		used += taken;
	}
	return used;
}

static __always_inline struct sluice_grant_rec *
ledger_rec(struct sluice_budget *bud, __u64 seq)
{
	__u32 idx = seq % SLUICE_LEDGER_RECORDS;

	/* hide the modulo from clang so the bounds check that the
	 * verifier needs survives */
	asm volatile("" : "+r"(idx));
	if (idx >= SLUICE_LEDGER_RECORDS)
		return NULL;
	return &bud->rec[idx];
}

/*
 * Record a grant of n tokens. The record being filled takes it unless that
 * would carry it past cap or the record has left the window; then the next
 * record starts, if it has left the window too (else the ledger is full,
 * and the current record takes the grant: still counted, only less
 * precisely placed in time).
 */
static __always_inline void ledger_add(struct sluice_budget *bud, __u64 n,
				       __u64 cap, __u64 now_ns,
				       __u64 start_ns)
{
	__u64 head = READ_ONCE(bud->head);
	struct sluice_grant_rec *r = ledger_rec(bud, head), *next;

	if (!r)
		return;
	if (READ_ONCE(r->last_ns) < start_ns ||
	    READ_ONCE(r->taken) + n > cap) {
		next = ledger_rec(bud, head + 1);
		if (next && READ_ONCE(next->last_ns) < start_ns &&
		    __sync_val_compare_and_swap(&bud->head, head, head + 1) ==
			    head) {
			/* in this order a reader sees the old tokens rather
			 * than none; an add racing with these stores is lost
			 * (at most one chunk, rare) */
			WRITE_ONCE(next->first_ns, now_ns);
			WRITE_ONCE(next->last_ns, now_ns);
			WRITE_ONCE(next->taken, n);
			WRITE_ONCE(next->grants, 1);
			return;
		}
		r = ledger_rec(bud, READ_ONCE(bud->head));
		if (!r)
			return;
	}
	__sync_fetch_and_add(&r->taken, n);
	__sync_fetch_and_add(&r->grants, 1);
	if (now_ns > READ_ONCE(r->last_ns))
		WRITE_ONCE(r->last_ns, now_ns);
}

/*
 * The window refuses while the clock may have credit. Credit that accrues
 * through a long refusal would pass as a burst when the window frees, and
 * as a burst again one interval later, for as long as the flood lasts
 * (the echo). So once an episode of refusals (less than gap_us apart) has
 * lasted keep_us, the clock keeps at most keep_us of credit until it ends.
 * Shorter episodes, from arrival jitter, and the little credit of a flood
 * paced at count lose nothing. The episode is a hint shared without
 * atomics; the clock moves by compare-and-swap.
 */
static __always_inline void pace_hold(struct sluice_pacer *pacer,
				      __u64 now_us, __u32 gap_us,
				      __u32 keep_us)
{
	__u64 ep = READ_ONCE(pacer->refusing), old;
	__u32 now32 = now_us, start = ep >> 32, last = ep;

	if (now32 - last > gap_us)
		start = now32;
	WRITE_ONCE(pacer->refusing, (__u64)start << 32 | now32);
	if (now32 - start <= keep_us)
		return;
	old = READ_ONCE(pacer->tat_us);
	if (old + keep_us < now_us)
		__sync_val_compare_and_swap(&pacer->tat_us, old,
					    now_us - keep_us);
}

/* The pacing clock's credit in tokens at now_us, and its base: the
 * clock's time, at most one interval back (credit builds up to one
 * interval: from idle a burst of a whole window passes at once). */
static __always_inline __u64 pace_credit(__u64 tat_us, __u64 count,
					 __u32 interval_ms, __u64 now_us,
					 __u64 *base)
{
	__u64 cap_us = (__u64)interval_ms * 1000;

	*base = tat_us + cap_us < now_us ? now_us - cap_us : tat_us;
	return *base < now_us ? (now_us - *base) * count / USEC_PER_SEC : 0;
}

/*
 * Spend pacing credit: up to `want` tokens, at least `cost`, at most
 * `free` (what the window allows). Returns the number granted, 0 when
 * refused.
 */
static __always_inline __u64 pace_take(struct sluice_pacer *pacer,
				       __u64 count, __u32 interval_ms,
				       __u64 now_ns, __u64 free, __u64 want,
				       __u64 cost)
{
	__u64 now_us = now_ns / NSEC_PER_USEC;
	__u64 old, base, credit, grant, next;
	int tries;

	if (free < cost) {
		/* a CPU under a refusal asks again within a slot and a
		 * tick: refusals two slots apart are one episode */
		pace_hold(pacer, now_us,
			  interval_ms * 1000 * 2 / SLUICE_ADMIT_SLOTS,
			  interval_ms * 1000 / SLUICE_ECHO_DIV);
		return 0;
	}
	for (tries = 0; tries < 3; tries++) {
		old = READ_ONCE(pacer->tat_us);
		credit = pace_credit(old, count, interval_ms, now_us, &base);
		grant = want;
		if (grant > free)
			grant = free;
		if (grant > credit)
			grant = credit;
		if (grant < cost)
			return 0;
		/* rounded down: rounding up charged up to 1 us per grant
		 * and lost tokens (6 of 7 at count 7); the window bounds
		 * every interval whatever the pacing clock says */
		next = base + grant * USEC_PER_SEC / count;
		if (__sync_val_compare_and_swap(&pacer->tat_us, old, next) ==
		    old)
			return grant;
	}
	return 0;
}

/* Whether the pacing clock has credit for cost tokens: cheap, so a
 * refusal need not scan the window first. */
static __always_inline bool pace_has(struct sluice_pacer *pacer, __u64 count,
				     __u32 interval_ms, __u64 now_ns,
				     __u64 cost)
{
	__u64 now_us = now_ns / NSEC_PER_USEC;
	__u64 base = READ_ONCE(pacer->tat_us);

	if (base + (__u64)interval_ms * 1000 < now_us)
		return true;
	return base < now_us && (now_us - base) * count >= cost * USEC_PER_SEC;
}

static __always_inline __u64 interval_ns_of(__u32 interval_ms)
{
	return (__u64)interval_ms * (USEC_PER_SEC * NSEC_PER_USEC / 1000);
}

/* Take tokens from a rule's host-wide budget (see pace_take). */
static __always_inline __u64 rule_budget_take(struct sluice_budget *bud,
					      __u64 count, __u32 interval_ms,
					      __u64 now_ns, __u64 want,
					      __u64 cost)
{
	__u64 limit = count * interval_ms / 1000;
	__u64 interval_ns = interval_ns_of(interval_ms);
	__u64 start_ns = now_ns > interval_ns ? now_ns - interval_ns : 0;
	__u64 used, grant;

	if (!count || !limit)
		return 0;
	if (!pace_has(&bud->pacer, count, interval_ms, now_ns, cost))
		return 0;
	used = ledger_used(bud, start_ns);
	grant = pace_take(&bud->pacer, count, interval_ms, now_ns,
			  limit > used ? limit - used : 0, want, cost);
	if (grant)
		ledger_add(bud, grant, limit / SLUICE_LEDGER_DIV, now_ns,
			   start_ns);
	return grant;
}

/* Move this CPU's statistics to the bucket of now. */
static __always_inline void roll_bucket(struct sluice_rule_cpu *rc,
					const struct sluice_rule_cfg *cfg,
					__u64 now_ns)
{
	__u64 id = now_ns / cfg->bucket_ns;
	__u32 idx = (id % cfg->sample_count) & (SLUICE_MAX_SAMPLES - 1);
	struct sluice_bucket *b = &rc->bucket[idx];

	if (b->id != id) {
		b->id = id;
		b->passed_pkts = 0;
		b->passed_bytes = 0;
		b->blocked_pkts = 0;
		b->blocked_bytes = 0;
	}
	rc->bucket_idx = idx;
	rc->roll_tick = sluice_tick();
}

/* Move the packets a refusal held into the current bucket and totals. */
static __always_inline void flush_held(struct sluice_rule_cpu *rc)
{
	struct sluice_bucket *b =
		&rc->bucket[rc->bucket_idx & (SLUICE_MAX_SAMPLES - 1)];

	b->blocked_pkts += rc->held_pkts;
	b->blocked_bytes += rc->held_bytes;
	rc->blocked_pkts += rc->held_pkts;
	rc->blocked_bytes += rc->held_bytes;
	rc->held_pkts = 0;
	rc->held_bytes = 0;
}

static __always_inline void count_packet(struct sluice_rule_cpu *rc,
					 __u32 len, bool passed)
{
	struct sluice_bucket *b =
		&rc->bucket[rc->bucket_idx & (SLUICE_MAX_SAMPLES - 1)];

	if (passed) {
		b->passed_pkts++;
		b->passed_bytes += len;
		rc->passed_pkts++;
		rc->passed_bytes += len;
	} else {
		b->blocked_pkts++;
		b->blocked_bytes += len;
		rc->blocked_pkts++;
		rc->blocked_bytes += len;
	}
}

static __always_inline void account(struct sluice_rule_cpu *rc,
				    const struct sluice_rule_cfg *cfg, __u32 len,
				    bool passed)
{
	if (rc->held_pkts)
		flush_held(rc);
	/* refills roll the bucket too; a quiet rule needs this so its
	 * packets do not land in a bucket that has left the window */
	if (rc->roll_tick != sluice_tick())
		roll_bucket(rc, cfg, sluice_now_coarse());
	count_packet(rc, len, passed);
}

/*
 * A refusal blocks a batch of packets before the next request, but only
 * within the tick it was made in: every CPU under a refusal asks again in
 * each tick, so CPUs share the credit a tick accrues by their arrivals.
 * (A refusal held for a whole admission slot let a CPU that asks on every
 * packet take all of it: one of two equal senders got 82 % of a rule.)
 * A blocked packet compares the tick with the refusal's, one inlined load:
 * a flood pays for the clock once per tick or batch, not per packet.
 */
static __always_inline bool refusal_check_due(const struct sluice_refusal *r,
					      __u32 tick)
{
	return r->tick != tick;
}

/* What a per_source admission did with a packet. */
enum admit_result {
	ADMIT_BLOCKED = 0,
	ADMIT_PASSED,
	ADMIT_HELD,	/* blocked, and already counted (hold_refused()) */
};

/* Block a packet under refusal r, counted in bulk (flush_held()). */
static __always_inline void hold_packet(struct sluice_rule_cpu *rc,
					struct sluice_refusal *r, __u32 len)
{
	r->left--;
	rc->held_pkts++;
	rc->held_bytes += len;
}

/*
 * Whether refusal r still blocks this packet. A blocked packet is counted
 * in bulk: held in rc, and moved to the bucket of the time whenever the
 * clock is read (flush_held()).
 */
static __always_inline bool hold_refused(struct sluice_rule_cpu *rc,
					 const struct sluice_rule_cfg *cfg,
					 struct sluice_refusal *r, __u32 len)
{
	__u32 tick;

	if (!r->left)
		return false;
	tick = sluice_tick();
	if (refusal_check_due(r, tick)) {
		__u64 now = sluice_now_coarse();

		r->tick = tick;
		roll_bucket(rc, cfg, now);
		flush_held(rc);
		r->left = 0;
		return false;
	}
	hold_packet(rc, r, len);
	return true;
}

/*
 * The common cases, decided from this CPU's state of the rule alone so
 * that most packets need not read the rule's configuration: a token in
 * the cache (unless the bucket is due to roll), or a refusal in force
 * with no clock check due and no token left. Returns the verdict, or -1
 * for the full path.
 */
static __always_inline int judge_fast(struct sluice_rule_cpu *rc, __u32 len)
{
	struct sluice_refusal *r = &rc->refusal;
	__u32 tick = sluice_tick();
	__u64 cost;

	/* a flood's drops first: they need not know what a packet costs;
	 * one in SLUICE_DROP_SAMPLE_EVERY takes the full path, to be
	 * sampled */
	if (!rc->tokens) {
		if (!r->left || refusal_check_due(r, tick) ||
		    !--rc->drop_countdown)
			return -1;
		hold_packet(rc, r, len);
		return rc->refused_verdict;
	}
	cost = rc->cost_is_len ? len : 1;
	if (rc->tokens < cost || rc->held_pkts || rc->roll_tick != tick)
		return -1;
	rc->tokens -= cost;
	count_packet(rc, len, true);
	return XDP_PASS;
}

/*
 * Refusals that come fast (a flood: the last batch passed within one
 * admission slot) block a growing batch without reading the clock; slow
 * ones (a trickle, where a batch would span slots and block packets that
 * could pass) shrink it to zero, so each packet asks again.
 */
static __always_inline void refusal_note(struct sluice_refusal *r, __u64 now,
					 __u64 slot_ns)
{
	if (now - r->at_ns < slot_ns)
		r->batch = r->batch ? r->batch * 2 : 1;
	else
		r->batch /= 2;
	if (r->batch > SLUICE_DENY_BATCH)
		r->batch = SLUICE_DENY_BATCH;
	r->left = r->batch;
	r->at_ns = now;
	r->tick = sluice_tick();
}

/*
 * Fair shares under overload. Credit goes to whichever CPU asks first
 * after it accrues, and a CPU under a refusal asks once a tick whatever
 * its rate: with chunk-sized requests a slow sender's asks weigh more than
 * its packets, and senders' phases against the tick decide their shares.
 * So each request reports the tokens this CPU's packets asked for since
 * its last request (its demand) into the rule's demand of the period. A
 * period is contended when a CPU refused in the last two periods asks
 * after another CPU did. While it is (or the one before was), and the
 * rule's demand in a period exceeds its supply (what a period accrues,
 * and a 32nd of the pacing clock's credit now, so that shares claim what
 * they leave), a CPU asks for its demand times supply / demand (its
 * share, owed across requests up to a chunk) instead of a chunk. One CPU
 * alone, a burst from idle (until its first refusal) and light load ask
 * for chunks; the pacing clock and the window bound what the CPUs take
 * together. It costs a compare-and-swap a request, on the line the
 * request writes anyway.
 *
 * bud->demand, from the top: the period's number mod 64 (6 bits), the
 * last CPU to ask mod 256 (8), whether the period before and this one are
 * contended (1 + 1), and the demand of the period before and of this one
 * (24 bits each, in tokens >> unit).
 */
#define DEMAND_BITS 24
#define DEMAND_MAX ((1ULL << DEMAND_BITS) - 1)
#define DEMAND_CUR_CONTENDED (1ULL << 48)
#define DEMAND_PREV_CONTENDED (1ULL << 49)
#define DEMAND_CPU_SHIFT 50
#define DEMAND_ID_SHIFT 58
#define DEMAND_BPS_UNIT 6	/* bps demand in 64-byte units: 256 Gbps fits */
#define OWED_FRAC 8		/* rc->owed is in 1/256 of a token */
#define OWED_MIN_CAP 4

static __always_inline __u64 demand_of(__u64 w, __u64 period, __u32 cpu,
				       bool refused, __u64 mine)
{
	__u64 prev = w >> DEMAND_BITS & DEMAND_MAX, cur = w & DEMAND_MAX;
	__u64 id = w >> DEMAND_ID_SHIFT, flags = w & DEMAND_CUR_CONTENDED;

	if (id != (period & 0x3f)) {
		bool last = id == ((period - 1) & 0x3f);

		prev = last ? cur : 0;
		flags = last && flags ? DEMAND_PREV_CONTENDED : 0;
		cur = 0;
	} else {
		flags |= w & DEMAND_PREV_CONTENDED;
	}
	if (refused && (w >> DEMAND_CPU_SHIFT & 0xff) != (cpu & 0xff))
		flags |= DEMAND_CUR_CONTENDED;
	cur += mine;
	if (cur > DEMAND_MAX)
		cur = DEMAND_MAX;
	return (period & 0x3f) << DEMAND_ID_SHIFT |
	       (__u64)(cpu & 0xff) << DEMAND_CPU_SHIFT | flags |
	       prev << DEMAND_BITS | cur;
}

/* a * 2^32 / b for a < b, both scaled down first so that a * 2^32 fits */
static __always_inline __u64 ratio32(__u64 a, __u64 b)
{
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (a >> 32) {
			a >>= 8;
			b >>= 8;
		}
	}
	return b ? (a << 32) / b : 0;
}

/* What this CPU (its state rc) may ask the rule's budget bud for now: a
 * chunk, or under contention its share. */
static __always_inline __u64 fair_want(struct sluice_budget *bud,
				       struct sluice_rule_cpu *rc,
				       const struct sluice_rule_cfg *cfg,
				       __u64 count, __u64 now_ns, __u64 chunk,
				       __u64 cost)
{
	const __u64 frac_mask = (1ULL << (32 - OWED_FRAC)) - 1;
	bool bps = cfg->grade == SLUICE_GRADE_BPS;
	__u32 unit = bps ? DEMAND_BPS_UNIT : 0;
	__u32 arrived = bps ? rc->passed_bytes + rc->blocked_bytes +
				      rc->held_bytes
			    : rc->passed_pkts + rc->blocked_pkts +
				      rc->held_pkts;
	__u64 mine = (__u32)(arrived - rc->asked) + cost;
	bool refused = rc->refusal.at_ns &&
		       now_ns - rc->refusal.at_ns < 2ULL << SLUICE_DEMAND_SHIFT;
	__u64 w, next, base, total, stock, supply, share, owed, cap, want;

	rc->asked = arrived + cost;
	w = READ_ONCE(bud->demand);
	next = demand_of(w, now_ns >> SLUICE_DEMAND_SHIFT,
			 bpf_get_smp_processor_id(), refused, mine >> unit);
	/* a report lost to another CPU's is a little demand unseen */
	__sync_val_compare_and_swap(&bud->demand, w, next);
	total = next >> DEMAND_BITS & DEMAND_MAX;
	if (total < (next & DEMAND_MAX))
		total = next & DEMAND_MAX;
	stock = pace_credit(READ_ONCE(bud->pacer.tat_us), count,
			    cfg->interval_ms, now_ns / NSEC_PER_USEC, &base);
	/* in millionths of a token, so that a count of 1 has a supply */
	supply = count * (1ULL << SLUICE_DEMAND_SHIFT) / 1000 +
		 stock * (1000000 / 32);
	total = (total << unit) * 1000000;
	/* a full interval's credit in stock: shares are not claiming it */
	if (!(next & (DEMAND_CUR_CONTENDED | DEMAND_PREV_CONTENDED)) ||
	    total <= supply || stock >= count * cfg->interval_ms / 1000) {
		rc->owed = 0;
		return chunk;
	}
	if (mine > 0xffffffffULL)
		mine = 0xffffffffULL;
	/* in 2^-32 of a token; what a 256th of a token leaves is rounded
	 * at random, so that tiny shares add up to what they are worth */
	share = mine * ratio32(supply, total);
	owed = rc->owed + (share >> (32 - OWED_FRAC)) +
	       ((bpf_get_prandom_u32() & frac_mask) < (share & frac_mask));
	/* it asks for what it is owed, up to twice its share now (a share
	 * another CPU's request beat is asked for again) or a chunk: not a
	 * chunk alone, which is count / (64 x nr_cpus) and under a tick's
	 * share where few of many CPUs carry the load; the rest carries,
	 * a few tokens at least where that is one or two */
	cap = share >> 31;
	if (cap < chunk)
		cap = chunk;
	want = owed >> OWED_FRAC < cap ? owed >> OWED_FRAC : cap;
	if (cap < OWED_MIN_CAP)
		cap = OWED_MIN_CAP;
	if (owed > cap << OWED_FRAC)
		owed = cap << OWED_FRAC;
	if (owed > 0xffffffffULL)
		owed = 0xffffffffULL;
	rc->owed = owed;
	return want;
}

/*
 * Tokens for this CPU from the rule's budget: a chunk, or its fair share,
 * at least cost; 0 when refused. A global function of scalars that finds
 * the rule's state itself: inlined at each of admit_rule()'s places, the
 * ledger's walk and the shares' branches took sluice_xdp's verification
 * to 424,933 instructions (237,319 with the call).
 */
__noinline __u64 rule_take(__u32 slot, __u64 count, __u64 now_ns,
			   __u64 chunk, __u64 cost)
{
	__u32 cpu_slot = sluice_cpu_slot(bpf_get_smp_processor_id(), slot,
					 rule_cpu_shift);
	struct sluice_rule_cpu *rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	struct sluice_rule_cfg *cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	struct sluice_budget *bud = bpf_map_lookup_elem(&rule_budget, &slot);
	__u64 want, grant;

	if (!rc || !cfg || !bud)
		return 0;
	want = fair_want(bud, rc, cfg, count, now_ns, chunk, cost);
	if (want < cost)
		return 0;
	grant = rule_budget_take(bud, count, cfg->interval_ms, now_ns, want,
				 cost);
	rc->owed = rc->owed > grant << OWED_FRAC
			   ? rc->owed - (grant << OWED_FRAC)
			   : 0;
	return grant;
}

/* Aggregate admission through this CPU's token cache. */
static __always_inline bool admit_rule(__u32 slot, struct sluice_rule_cpu *rc,
				       const struct sluice_rule_cfg *cfg,
				       __u64 cost)
{
	__u64 *limit, now, count, chunk, grant;

	if (rc->tokens >= cost) {
		rc->tokens -= cost;
		return true;
	}

	limit = bpf_map_lookup_elem(&rule_limit, &slot);
	if (!limit)
		return false;
	now = sluice_now();
	roll_bucket(rc, cfg, now);
	count = sluice_effective_limit(
		cfg,
		sluice_leased_limit(*limit,
				    bpf_map_lookup_elem(&rule_lease, &slot),
				    now),
		now);
	chunk = count * cfg->interval_ms / 1000 /
		(SLUICE_CHUNK_DIV * (__u64)nr_cpus);
	if (chunk < cost)
		chunk = cost;
	grant = rule_take(slot, count, now, chunk, cost);
	if (!grant) {
		refusal_note(&rc->refusal, now, cfg->slot_ns);
		rc->refused_verdict = cfg->flags & SLUICE_RULE_SHADOW ?
					      XDP_PASS : XDP_DROP;
		return false;
	}
	rc->tokens += grant - cost;
	rc->cost_is_len = cfg->grade == SLUICE_GRADE_BPS;
	return true;
}

/*
 * allow and deny take the fast path as a limit's packets do: an allow
 * rule's CPU holds tokens without end (SLUICE_ALLOW_TOKENS, refilled here
 * at each tick's first packet), a deny's a refusal of a whole batch,
 * renewed here when its tick has passed, so judge_fast() blocks the rest
 * and holds their counts as it does a flood's. Whether the packet passes.
 */
static __always_inline bool admit_action(struct sluice_rule_cpu *rc,
					 const struct sluice_rule_cfg *cfg)
{
	if (cfg->flags & SLUICE_RULE_ALLOW) {
		rc->tokens = SLUICE_ALLOW_TOKENS;
		return true;
	}
	rc->refusal.left = SLUICE_DENY_BATCH;
	rc->refusal.tick = sluice_tick();
	rc->refused_verdict = cfg->flags & SLUICE_RULE_SHADOW ? XDP_PASS
							     : XDP_DROP;
	return false;
}

static __always_inline void host_stat(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&host_stats, &idx);

	if (v)
		*v += 1;
}

#endif
