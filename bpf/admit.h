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
 * the defaults, whatever the arrival shape; the long-run rate is count.
 * per_source budgets keep a ring of time slots instead (a ledger per
 * source would cost too much memory): their bound is one slot's grants.
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
 * A per_source ring slot in one word (struct sluice_src_state): tokens
 * taken, saturating at 2^44 - 1 (L for a count of 1e11 over 60 s is
 * 6e12); the slot's number mod 256, which a source idle for 128 intervals
 * and not collected (no agent) can mistake for a recent one, counting old
 * grants (it admits less, never more); its first and last grant in 64ths
 * of the slot.
 */
#define SRC_TAKEN_BITS 44
#define SRC_TAKEN_MAX ((1ULL << SRC_TAKEN_BITS) - 1)
#define SRC_ID_SHIFT SRC_TAKEN_BITS
#define SRC_FIRST_SHIFT (SRC_ID_SHIFT + 8)
#define SRC_LAST_SHIFT (SRC_FIRST_SHIFT + 6)
#define SRC_OFF_STEPS 64ULL
/* compare-and-swap attempts to record a grant; a grant that loses them
 * all to other CPUs' is not recorded (one chunk, in the bound) */
#define SRC_RECORD_TRIES 4

_Static_assert(SRC_LAST_SHIFT + 6 == 64, "a ring slot is one word");

static __always_inline __u64 src_slot_taken(__u64 w)
{
	return w & SRC_TAKEN_MAX;
}

static __always_inline __u32 src_slot_id(__u64 w)
{
	return (w >> SRC_ID_SHIFT) & 0xff;
}

static __always_inline __u64 src_slot_first(__u64 w)
{
	return (w >> SRC_FIRST_SHIFT) & (SRC_OFF_STEPS - 1);
}

static __always_inline __u64 src_slot_last(__u64 w)
{
	return w >> SRC_LAST_SHIFT;
}

/*
 * Tokens granted in the window (now - interval, now] by a per_source
 * ring. Slots after the oldest lie wholly inside it; of the oldest, the
 * part granted after the window's start counts, interpolated between the
 * slot's first and last grant: exact for a burst (one instant) and for an
 * even stream, to 1/64 of a slot.
 */
static __always_inline __u64 window_used(__u64 *ring, const __u32 nslots,
					 __u64 cur, __u64 slot_ns,
					 __u64 start_ns)
{
	__u64 used = 0;
	__u32 i;

	for (i = 0; i <= nslots; i++) {
		__u64 w = READ_ONCE(ring[i]);
		__u64 taken = src_slot_taken(w);
		__u32 age = ((__u32)cur - src_slot_id(w)) & 0xff;

		if (!w || age > nslots)
			continue;
		if (age == nslots) {
			__u64 base = (cur - nslots) * slot_ns;
			__u64 first = base + src_slot_first(w) * slot_ns /
						     SRC_OFF_STEPS;
			__u64 last = base + src_slot_last(w) * slot_ns /
						    SRC_OFF_STEPS;

			if (last < start_ns)
				continue;
			if (first < start_ns && last > first)
				taken = taken * ((last - start_ns) >> 12) /
					(((last - first) >> 12) + 1);
		}
		used += taken;
	}
	return used;
}

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

/* n tokens taken from a source's budget now, in its window's ring: one
 * compare-and-swap of the slot's word, which starts the slot afresh
 * when it holds an older one. */
static __always_inline void source_record(struct sluice_src_state *st,
					  __u32 interval_ms, __u64 now_ns,
					  __u64 n)
{
	__u64 slot_ns = interval_ns_of(interval_ms) / SLUICE_SRC_SLOTS;
	__u64 cur = now_ns / slot_ns;
	__u64 off = (now_ns - cur * slot_ns) * SRC_OFF_STEPS / slot_ns;
	__u32 idx = cur % (SLUICE_SRC_SLOTS + 1), i;
	__u64 *s, old, w, taken;

	/* as in ledger_rec */
	asm volatile("" : "+r"(idx));
	if (idx > SLUICE_SRC_SLOTS)
		return;
	s = &st->slots[idx];
	if (n > SRC_TAKEN_MAX)
		n = SRC_TAKEN_MAX;
	off &= SRC_OFF_STEPS - 1;
	for (i = 0; i < SRC_RECORD_TRIES; i++) {
		old = READ_ONCE(*s);
		if (!old || src_slot_id(old) != (cur & 0xff)) {
			w = n | (cur & 0xff) << SRC_ID_SHIFT |
			    off << SRC_FIRST_SHIFT | off << SRC_LAST_SHIFT;
		} else {
			taken = src_slot_taken(old) + n;
			if (taken > SRC_TAKEN_MAX)
				taken = SRC_TAKEN_MAX;
			w = (old & ~(SRC_TAKEN_MAX | 63ULL << SRC_LAST_SHIFT)) |
			    taken;
			w |= (off > src_slot_last(old) ? off
						       : src_slot_last(old))
			     << SRC_LAST_SHIFT;
		}
		if (__sync_val_compare_and_swap(s, old, w) == old)
			return;
	}
}

/* Take tokens from a source's budget (see pace_take). */
/* Tokens a source's budget granted in the window (now - interval, now]. */
static __always_inline __u64 source_used(struct sluice_src_state *st,
					 __u32 interval_ms, __u64 now_ns)
{
	__u64 interval_ns = interval_ns_of(interval_ms);
	__u64 slot_ns = interval_ns / SLUICE_SRC_SLOTS;

	return window_used(st->slots, SLUICE_SRC_SLOTS, now_ns / slot_ns,
			   slot_ns,
			   now_ns > interval_ns ? now_ns - interval_ns : 0);
}

static __always_inline __u64 source_budget_take(struct sluice_src_state *st,
						__u64 count,
						__u32 interval_ms,
						__u64 now_ns, __u64 want,
						__u64 cost)
{
	__u64 limit = count * interval_ms / 1000;
	__u64 used, grant;

	if (!count || !limit)
		return 0;
	used = source_used(st, interval_ms, now_ns);
	grant = pace_take(&st->pacer, count, interval_ms, now_ns,
			  limit > used ? limit - used : 0, want, cost);
	if (grant)
		source_record(st, interval_ms, now_ns, grant);
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
	__u64 w, next, base, total, stock, supply, share, owed, cap;

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
	/* what a CPU is owed carries up to a chunk, or a few tokens where
	 * a chunk is one or two; it asks for a chunk at most (the bound) */
	cap = chunk > OWED_MIN_CAP ? chunk : OWED_MIN_CAP;
	if (owed > cap << OWED_FRAC)
		owed = cap << OWED_FRAC;
	if (owed > 0xffffffffULL)
		owed = 0xffffffffULL;
	rc->owed = owed;
	return owed >> OWED_FRAC < chunk ? owed >> OWED_FRAC : chunk;
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

/* The first plen bits of a 32-bit word of an address, in network order;
 * plen may be out of 0..32 (the prefix ends before or after the word). */
static __always_inline __u32 prefix_mask(__s32 plen)
{
	if (plen <= 0)
		return 0;
	if (plen >= 32)
		return ~0u;
	return bpf_htonl(~0u << (32 - plen));
}

static __always_inline void host_stat(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&host_stats, &idx);

	if (v)
		*v += 1;
}

/* The source key of an address a (words; IPv4 in a[0]) under a rule. */
static __always_inline void source_key_of(struct sluice_src_key *key,
					  __u32 slot, __u32 family,
					  const __u32 *a,
					  const struct sluice_rule_cfg *cfg)
{
	__u32 w[4] = {};

	if (family == 4) {
		w[0] = a[0] & prefix_mask(cfg->src_prefix_v4);
	} else {
		__s32 plen = cfg->src_prefix_v6;

		w[0] = a[0] & prefix_mask(plen);
		w[1] = a[1] & prefix_mask(plen - 32);
		w[2] = a[2] & prefix_mask(plen - 64);
		w[3] = a[3] & prefix_mask(plen - 96);
	}
	__builtin_memset(key, 0, sizeof(*key));
	key->rule = slot;
	key->family = family;
	__builtin_memcpy(key->addr, w, sizeof(w));
}

static __always_inline void source_key(struct sluice_src_key *key,
				       __u32 slot, const struct sluice_pkt *p,
				       const struct sluice_rule_cfg *cfg)
{
	source_key_of(key, slot, p->family, (const __u32 *)p->saddr, cfg);
}

_Static_assert(sizeof(struct sluice_src_key) == 24, "source key layout");

static __always_inline bool same_source(const struct sluice_src_key *a,
					const struct sluice_src_key *b)
{
	__u64 x[3], y[3];

	__builtin_memcpy(x, a, sizeof(x));
	__builtin_memcpy(y, b, sizeof(y));
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2];
}

/* Index of a source in the per-CPU caches (multiplicative hashing). */
static __always_inline __u32 source_cache_index(const struct sluice_src_key *k)
{
	__u32 w[4], h = k->rule * 0x9e3779b1u;

	__builtin_memcpy(w, k->addr, 16);
	h ^= w[0] ^ w[1] ^ w[2] ^ w[3];
	h *= 0x9e3779b1u;
	return h >> (32 - SLUICE_SRC_CACHE_BITS);
}

/* This CPU's line idx of src_cache. */
static __always_inline struct sluice_src_cached *source_cache(__u32 idx)
{
	__u32 key = bpf_get_smp_processor_id() << SLUICE_SRC_CACHE_BITS | idx;

	return bpf_map_lookup_elem(&src_cache, &key);
}

#define SKETCH_FIELD_MAX ((1ULL << 24) - 1)
/* sketch_level()'s counters: the rows hashed as by another rule */
#define SKETCH_PROBE_SEED 0x5bd1e995u

/* Row row's counter of key (murmur3's finalizer over the key's words). */
static __always_inline __u32 sketch_index(const struct sluice_src_key *k,
					  __u32 seed, __u32 row)
{
	__u32 w[4], h = (k->rule + 1) * 0x9e3779b1u + row * 0x85ebca6bu + seed;

	__builtin_memcpy(w, k->addr, 16);
	for (int i = 0; i < 4; i++) {
		h ^= w[i] + row;
		h ^= h >> 16;
		h *= 0x85ebca6bu;
		h ^= h >> 13;
		h *= 0xc2b2ae35u;
		h ^= h >> 16;
	}
	return row << SLUICE_SKETCH_BITS | h >> (32 - SLUICE_SKETCH_BITS);
}

/* A counter's counts in epoch: this second's (cur) and the previous
 * second's (prev); a counter of an older second holds neither. */
static __always_inline __u64 sketch_cur(__u64 v, __u64 epoch)
{
	return v >> 48 == epoch ? v & SKETCH_FIELD_MAX : 0;
}

static __always_inline __u64 sketch_prev(__u64 v, __u64 epoch)
{
	if (v >> 48 == epoch)
		return v >> 24 & SKETCH_FIELD_MAX;
	return v >> 48 == ((epoch - 1) & 0xffff) ? v & SKETCH_FIELD_MAX : 0;
}

static __always_inline __u64 sketch_sum(__u64 prev, __u64 cur, __u64 left)
{
	return cur == SKETCH_FIELD_MAX
		       ? ~0ULL
		       : cur + prev * left / SLUICE_SKETCH_WINDOW_NS;
}

/*
 * Adds cost to key and returns its estimate of the last second: the
 * smallest row's count of this second plus the part of the previous
 * second still in the sliding second. Conservative update: a row's
 * counter is raised only to the smallest one + cost, so the noise of
 * other sources' packets is about a quarter of count-min's and nearly
 * the same in every counter (sketch_level() reads it), and only the
 * counters at the minimum are written. Collisions only ever raise the
 * estimate; a saturated counter reads as unbounded.
 */
static __always_inline __u64 sketch_count(const struct sluice_src_key *key,
					  __u32 seed, __u64 cost,
					  __u64 now_ns)
{
	__u64 epoch = (now_ns / SLUICE_SKETCH_WINDOW_NS) & 0xffff;
	__u64 left = SLUICE_SKETCH_WINDOW_NS - now_ns % SLUICE_SKETCH_WINDOW_NS;
	__u64 est = ~0ULL, least = SKETCH_FIELD_MAX, to;

	/* the rows' indices are hashed again below: an array of them
	 * would take stack that sluice_xdp and its calls share */
	for (__u32 row = 0; row < SLUICE_SKETCH_ROWS; row++) {
		__u32 idx = sketch_index(key, seed, row);
		__u64 *c = bpf_map_lookup_elem(&src_sketch, &idx);
		__u64 cur;

		if (!c)
			continue;
		cur = sketch_cur(READ_ONCE(*c), epoch);
		if (cur < least)
			least = cur;
	}
	to = least + cost < SKETCH_FIELD_MAX ? least + cost : SKETCH_FIELD_MAX;
	for (__u32 row = 0; row < SLUICE_SKETCH_ROWS; row++) {
		__u32 idx = sketch_index(key, seed, row);
		__u64 *c = bpf_map_lookup_elem(&src_sketch, &idx);
		__u64 old, prev = 0, cur = 0, r;

		if (!c)
			continue;
		/* a lost race leaves the count one short: a hint */
		for (int try = 0; try < 3; try++) {
			old = READ_ONCE(*c);
			prev = sketch_prev(old, epoch);
			cur = sketch_cur(old, epoch);
			if (cur >= to)
				break;
			if (__sync_val_compare_and_swap(
				    c, old, epoch << 48 | prev << 24 | to) ==
			    old) {
				cur = to;
				break;
			}
		}
		r = sketch_sum(prev, cur, left);
		if (r < est)
			est = r;
	}
	return est;
}

/*
 * The sketch's level: what it would estimate, unwritten, for a source
 * that sent nothing (four counters of other rows' hashing, a different
 * seed). Under a churn of R light packets a second its counters all
 * carry about R / (4 x 2^bits); a source's estimate less the level is
 * then close to what that source sent, whatever R.
 */
static __always_inline __u64 sketch_level(const struct sluice_src_key *key,
					  __u32 seed, __u64 now_ns)
{
	__u64 epoch = (now_ns / SLUICE_SKETCH_WINDOW_NS) & 0xffff;
	__u64 left = SLUICE_SKETCH_WINDOW_NS - now_ns % SLUICE_SKETCH_WINDOW_NS;
	__u64 level = ~0ULL;

	for (__u32 row = 0; row < SLUICE_SKETCH_ROWS; row++) {
		__u32 idx = sketch_index(key, seed ^ SKETCH_PROBE_SEED,
					 row);
		__u64 *c = bpf_map_lookup_elem(&src_sketch, &idx);
		__u64 v, r;

		if (!c)
			continue;
		v = READ_ONCE(*c);
		r = sketch_sum(sketch_prev(v, epoch), sketch_cur(v, epoch),
			       left);
		if (r < level)
			level = r;
	}
	return level;
}

/* A new source entry's value: from here rather than the stack, whose
 * 512 bytes sluice_xdp and its calls share. */
static struct sluice_src_state src_zero;

enum source_tier {
	SOURCE_EXACT,	 /* its own entry in src_table */
	SOURCE_LIGHT,	 /* under half its count: the sketch's estimate */
	SOURCE_OVERFLOW, /* the rule's table is full: the shared entry */
};

/*
 * Cache entry idx of this CPU is about to hold another source: what it
 * let pass light since it last asked goes to the sketch first, so that
 * evictions cannot hide a source's packets from it. Rare (a light source
 * evicted between two asks); a global function, so that the verifier
 * walks the sketch's rows once more rather than on every path after it.
 */
__noinline int cache_settle(__u32 idx)
{
	struct sluice_src_cached *c = source_cache(idx);
	struct sluice_rule_cfg *cfg;
	__u32 slot;

	if (!c || !c->light_owed)
		return 0;
	slot = c->key.rule;
	cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	if (cfg && cfg->flags & SLUICE_RULE_PER_SOURCE)
		sketch_count(&c->key, cfg->sketch_seed, c->light_owed,
			     sluice_now_coarse());
	c->light_owed = 0;
	return 0;
}

/* What a source's line owes the sketch: saturated, as the sketch's
 * counters are (a saturated estimate reads as unbounded). */
static __always_inline void owe(struct sluice_src_cached *c, __u64 cost)
{
	if (c->light_owed < SKETCH_FIELD_MAX)
		c->light_owed += cost;
}

/* A cached source's passes, which need neither the rule's state nor its
 * configuration: its tokens, or its light credit of this tick. */
static __always_inline bool source_cached_pass(struct sluice_src_cached *c,
					       __u64 cost)
{
	if (c->tokens >= cost) {
		c->tokens -= cost;
		return true;
	}
	if (c->tick != sluice_tick() || c->light_left < cost)
		return false;
	c->light_left -= cost;
	owe(c, cost);
	return true;
}

static __always_inline void cache_reset(struct sluice_src_cached *c)
{
	c->tokens = 0;
	c->refusal = (struct sluice_refusal){};
	c->light_left = 0;
	c->light_owed = 0;
	c->overflow = 0;
}

/* This CPU's cache entry of a rule's overflow budget: where
 * source_cache_index() puts its key (rule, overflow family, no address). */
static __always_inline struct sluice_src_cached *overflow_cache(__u32 slot)
{
	return source_cache(slot * 0x9e3779b1u * 0x9e3779b1u >>
			    (32 - SLUICE_SRC_CACHE_BITS));
}

static __always_inline bool is_overflow_of(const struct sluice_src_cached *c,
					   __u32 slot)
{
	return c->key.rule == slot &&
	       c->key.family == SLUICE_SRC_OVERFLOW_FAMILY;
}

/*
 * The source entry for key. A source without one takes an entry only
 * once the sketch says it sent half its count in the last second, so a
 * churn of forged one-packet sources fills no entries and established
 * ones stay; the new entry starts with what the sketch counted before
 * it. Under that the source is light: admitted without an entry, and
 * this CPU may let up to a light chunk more of it pass within the tick
 * before it asks again (c->light_left), counting them in c->light_owed,
 * which goes to the sketch when it asks. When the rule's table is full,
 * the rule's shared overflow entry (c->overflow: within the tick, the
 * source's packets go to it without asking); NULL when the table cannot
 * hold even that.
 */
static __always_inline struct sluice_src_state *
source_state(const struct sluice_src_key *key,
	     const struct sluice_rule_cfg *cfg, struct sluice_rule_cpu *rc,
	     struct sluice_src_cached *c, __u64 count, __u64 cost,
	     __u64 now_ns, enum source_tier *tier)
{
	struct sluice_src_key okey = { .rule = key->rule,
				       .family = SLUICE_SRC_OVERFLOW_FAMILY };
	struct sluice_src_state *st;
	__u32 slot = key->rule;
	__u64 *added, *freed, n, est, level, owed = c->light_owed;

	*tier = SOURCE_EXACT;
	c->light_left = 0;
	c->light_owed = 0;
	c->overflow = 0;
	st = bpf_map_lookup_elem(&src_table, key);
	if (st) {
		/* another CPU gave it its entry since this one asked */
		if (owed)
			source_record(st, cfg->interval_ms, now_ns, owed);
		return st;
	}
	est = sketch_count(key, cfg->sketch_seed, owed + cost, now_ns);
	/* heavy by the estimate: less the level that a churn of other
	 * sources put in every counter, is it still? */
	if (est >= count / 2 && est != ~0ULL) {
		level = sketch_level(key, cfg->sketch_seed, now_ns);
		est = est > level ? est - level : 0;
	}
	if (est < count / 2) {
		*tier = SOURCE_LIGHT;
		/* what it may send light before the sketch says heavy, in
		 * chunks of at most count / (2 SRC_CHUNK_DIV nr_cpus) */
		n = count / (2 * SLUICE_SRC_CHUNK_DIV * (__u64)nr_cpus);
		if (n > SLUICE_LIGHT_MAX)
			n = SLUICE_LIGHT_MAX;
		if (n > count / 2 - est - 1)
			n = count / 2 - est - 1;
		c->light_left = n;
		c->tick = sluice_tick();
		return NULL;
	}

	added = bpf_map_lookup_elem(&rule_src_added, &slot);
	freed = bpf_map_lookup_elem(&rule_src_freed, &slot);
	/* a plain read first: a full table costs no write to the rule's
	 * shared counter */
	if (added && freed &&
	    READ_ONCE(*added) - READ_ONCE(*freed) < cfg->max_sources) {
		long err = -E2BIG;

		n = __sync_fetch_and_add(added, 1) - READ_ONCE(*freed);
		if (n < cfg->max_sources)
			err = bpf_map_update_elem(&src_table, key, &src_zero,
						  BPF_NOEXIST);
		if (!err) {
			st = bpf_map_lookup_elem(&src_table, key);
			/* what it sent before (est counts this packet) */
			if (st && est > cost && est != ~0ULL)
				source_record(st, cfg->interval_ms, now_ns,
					      est - cost);
			return st;
		}
		__sync_fetch_and_add(added, -1);
		/* another CPU created it first */
		if (err == -EEXIST) {
			st = bpf_map_lookup_elem(&src_table, key);
			if (st)
				return st;
		}
	}

	/* table full for this rule: new sources share one allowance */
	*tier = SOURCE_OVERFLOW;
	c->overflow = 1;
	c->tick = sluice_tick();
	st = bpf_map_lookup_elem(&src_table, &okey);
	if (st)
		return st;
	bpf_map_update_elem(&src_table, &okey, &src_zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&src_table, &okey);
}

/*
 * This CPU's cache of the overflow budget of slot, for a source judged
 * on it (cache entry c): NULL when the source's own entry is that line,
 * or another source's that owes the sketch.
 */
static __always_inline struct sluice_src_cached *
overflow_entry(__u32 slot, struct sluice_src_cached *c)
{
	struct sluice_src_cached *oc = overflow_cache(slot);

	if (!oc || oc == c)
		return NULL;
	if (!is_overflow_of(oc, slot)) {
		/* a source that owes the sketch keeps its line */
		if (oc->light_owed)
			return NULL;
		__builtin_memset(&oc->key, 0, sizeof(oc->key));
		oc->key.rule = slot;
		oc->key.family = SLUICE_SRC_OVERFLOW_FAMILY;
		cache_reset(oc);
	}
	return oc;
}

/* What a packet past its CPU's cache reads once, for src_deny and then
 * src_table: the coarse clock, the rule's effective count, and its
 * source's set and tag under them. */
struct source_probe {
	__u64 now;
	__u64 count;
	__u32 set;
	__u32 tag;
};

/*
 * A source refused on its own entry cannot be granted before its pacing
 * clock has a token: tat + 1/count s (pace_credit(); the clock only
 * moves on, by grants and pace_hold()). Until then, at most an interval
 * ahead (the collector keeps an idle entry two), src_deny answers for it:
 * a line read per packet instead of src_table's bucket and entry, which
 * a flood of many sources, each slower than a packet a tick on a CPU,
 * would otherwise look up at every packet. A way counts only for the
 * rule set and the count it was made under (its tag). A source's hash
 * picks a set of eight one-word ways, one line: a ninth source there
 * takes the way free soonest, which costs its owner a lookup, never a
 * pass (direct-mapped, a fifth of 65,536 sources shared a place and
 * looked up at every packet); a word a way keeps a flood's lines few.
 */
static __always_inline __u32 source_deny_set(const struct sluice_src_key *k,
					     const struct sluice_rule_cfg *cfg,
					     __u64 count, __u32 *tag)
{
	__u32 w[4], h = (k->rule + 1) * 0x9e3779b1u + cfg->sketch_seed,
		    t = (set_gen * 0x85ebca6bu ^ cfg->sketch_seed ^ k->family) +
			(__u32)count * 0x9e3779b1u + (__u32)(count >> 32);

	__builtin_memcpy(w, k->addr, 16);
	for (int i = 0; i < 4; i++) {
		h = (h ^ w[i]) * 0x85ebca6bu;
		h ^= h >> 15;
		t = (t ^ w[i] ^ h) * 0xc2b2ae35u;
		t ^= t >> 16;
	}
	*tag = t | 1;
	return h >> (32 - SLUICE_SRC_DENY_BITS + 3);
}

_Static_assert(sizeof(struct sluice_src_deny_set) == 64,
	       "a src_deny set is one cache line");

static __always_inline __u32 deny_time(__u64 ns)
{
	return ns >> SLUICE_SRC_DENY_UNIT;
}

/* Whether a way's time is still ahead of now (times mod 2^32 units: a
 * hold is at most an interval, far less than 2^31 units, 26 days). */
static __always_inline bool deny_ahead(__u32 until, __u32 now)
{
	return (__s32)(until - now) > 0;
}

static __always_inline void source_deny_note(const struct source_probe *pr,
					     const struct sluice_rule_cfg *cfg,
					     const struct sluice_src_state *st)
{
	__u64 until_ns, last = pr->now + cfg->interval_ns, count = pr->count;
	__u32 set_idx = pr->set, tag = pr->tag, now = deny_time(pr->now);
	__u32 soonest = 0, until;
	struct sluice_src_deny_set *set;
	__u64 *d = NULL;

	if (!count)
		return;
	until_ns = (READ_ONCE(st->pacer.tat_us) +
		    (USEC_PER_SEC + count - 1) / count) * NSEC_PER_USEC;
	if (until_ns > last)
		until_ns = last;
	/* rounded down: a hold never outlasts the clock's token */
	until = deny_time(until_ns);
	if (!deny_ahead(until, now))
		return;
	set = bpf_map_lookup_elem(&src_deny, &set_idx);
	if (!set)
		return;
	/* the source's own way, else the one free soonest (an expired or
	 * empty one is) */
	for (int i = 0; i < SLUICE_SRC_DENY_WAYS; i++) {
		__u64 way = READ_ONCE(set->way[i]);
		__u32 left = deny_ahead(way >> 32, now) ? (way >> 32) - now : 0;

		if ((__u32)way == tag) {
			d = &set->way[i];
			break;
		}
		if (!d || left < soonest) {
			soonest = left;
			d = &set->way[i];
		}
	}
	if (d)
		WRITE_ONCE(*d, (__u64)until << 32 | tag);
}

/* Whether src_deny refuses key's packet now (pr: its clock and count;
 * its set and tag are filled in): then it is held here, and the source's
 * line in this CPU's cache (c) holds the rest of the tick's as a refusal
 * in the table would. */
static __always_inline bool source_denied(const struct sluice_src_key *key,
					  const struct sluice_rule_cfg *cfg,
					  struct sluice_rule_cpu *rc,
					  struct sluice_src_cached *c, __u32 len,
					  struct source_probe *pr)
{
	struct sluice_src_deny_set *set;
	__u64 now = pr->now;
	bool held = false;

	pr->set = source_deny_set(key, cfg, pr->count, &pr->tag);
	set = bpf_map_lookup_elem(&src_deny, &pr->set);
	if (!set)
		return false;
	for (int i = 0; i < SLUICE_SRC_DENY_WAYS; i++) {
		__u64 way = READ_ONCE(set->way[i]);

		if ((__u32)way == pr->tag) {
			held = deny_ahead(way >> 32, deny_time(now));
			break;
		}
	}
	if (!held)
		return false;
	if (rc->roll_tick != sluice_tick()) {
		roll_bucket(rc, cfg, now);
		flush_held(rc);
	}
	rc->held_pkts++;
	rc->held_bytes += len;
	if (same_source(&c->key, key) && !c->overflow)
		refusal_note(&c->refusal, now,
			     cfg->interval_ns / SLUICE_SRC_SLOTS);
	return true;
}

/*
 * Per-source admission: every source has its own budget of count in
 * src_table. Each CPU keeps a direct-mapped cache of recent sources with
 * tokens taken from their budgets, or what the sketch said of a source
 * without one, so most packets cost one per-CPU array lookup, without
 * the hash lookup, an atomic or a clock read, and write no line that
 * another CPU writes: a source light in the sketch, or judged on the
 * overflow budget, asks the shared state once per light chunk, refill,
 * refusal batch or tick, not per packet.
 */
static __always_inline enum admit_result
admit_source_key(const struct sluice_src_key *pkey, __u32 len,
		 struct sluice_src_cached *c, __u32 idx,
		 struct sluice_rule_cpu *rc, const struct sluice_rule_cfg *cfg,
		 __u64 cost, const struct source_probe *pr)
{
	__u64 slot_ns = cfg->interval_ns / SLUICE_SRC_SLOTS;
	struct sluice_src_cached *oc = NULL;
	struct sluice_src_state *st;
	struct sluice_refusal *refusal;
	struct sluice_src_key key;
	__u64 now = pr->now, count = pr->count, chunk, grant;
	enum source_tier tier;
	bool overflow;

	__u32 slot = pkey->rule;

	key = *pkey;
	if (same_source(&c->key, &key)) {
		refusal = &c->refusal;
		if (c->tick == sluice_tick()) {
			oc = c->overflow ? overflow_entry(slot, c) : NULL;
			if (oc && oc->tokens >= cost) {
				oc->tokens -= cost;
				owe(c, cost);
				rc->source_overflow++;
				return ADMIT_PASSED;
			}
			/* an overflowed source's refusal is the budget's */
			if (oc)
				refusal = &oc->refusal;
		}
		if (hold_refused(rc, cfg, refusal, len)) {
			if (oc) {
				owe(c, cost);
				rc->source_overflow++;
			}
			return ADMIT_HELD;
		}
	} else {
		/* the entry now caches this source; the evicted one's
		 * tokens are dropped, which only ever admits less */
		if (c->light_owed)
			cache_settle(idx);
		c->key = key;
		cache_reset(c);
	}

	roll_bucket(rc, cfg, now);
	st = source_state(&key, cfg, rc, c, count, cost, now, &tier);
	if (tier == SOURCE_LIGHT)
		return ADMIT_PASSED;
	if (tier == SOURCE_OVERFLOW)
		rc->source_overflow++;
	if (!st) {
		host_stat(SLUICE_ST_SRC_TABLE_FULL);
		return ADMIT_BLOCKED;
	}
	overflow = tier == SOURCE_OVERFLOW;
	refusal = &c->refusal;
	if (overflow) {
		/* the overflow budget cached per CPU as a source's; this
		 * CPU's refusal of the rule's budget when the lines collide */
		oc = overflow_entry(slot, c);
		refusal = oc ? &oc->refusal : &rc->source_refusal;
		if (hold_refused(rc, cfg, refusal, len))
			return ADMIT_HELD;
	}
	WRITE_ONCE(st->last_seen_ns, now);
	chunk = count * cfg->interval_ms / 1000 /
		(SLUICE_SRC_CHUNK_DIV * (__u64)nr_cpus);
	if ((overflow && !oc) || chunk < cost)
		chunk = cost;
	grant = source_budget_take(st, count, cfg->interval_ms, now, chunk,
				   cost);
	if (!grant) {
		refusal_note(refusal, now, slot_ns);
		if (!overflow)
			source_deny_note(pr, cfg, st);
		return ADMIT_BLOCKED;
	}
	if (!overflow)
		c->tokens += grant - cost;
	else if (oc)
		oc->tokens += grant - cost;
	return ADMIT_PASSED;
}

/*
 * A global function: the verifier checks its many paths once, not on
 * every path of sluice_xdp that reaches it (as a BPF call or inlined, it
 * took sluice_xdp past 940,000 instructions of the 1,000,000 allowed).
 * Its arguments are scalars (what 6.1 accepts): the key's three words,
 * the packet's length and cost; it finds the rule's state itself.
 */
__noinline int admit_source_global(__u64 k0, __u64 k1, __u64 k2, __u32 len,
				   __u64 cost)
{
	struct sluice_src_cached *c;
	struct sluice_src_key key;
	struct sluice_rule_cpu *rc;
	struct sluice_rule_cfg *cfg;
	struct source_probe pr;
	__u64 w[3] = { k0, k1, k2 }, *limit;
	__u32 slot, cpu_slot, idx;

	__builtin_memcpy(&key, w, sizeof(key));
	idx = source_cache_index(&key);
	c = source_cache(idx);
	if (!c)
		return ADMIT_BLOCKED;
	/* a layer's per_source rule comes here first; a packet judged
	 * alone came through admit_source_fast(), and finds nothing here */
	if (same_source(&c->key, &key) && source_cached_pass(c, cost))
		return ADMIT_PASSED;
	slot = key.rule;
	cpu_slot = sluice_cpu_slot(bpf_get_smp_processor_id(), slot,
					 rule_cpu_shift);
	rc = bpf_map_lookup_elem(&rule_cpu, &cpu_slot);
	cfg = bpf_map_lookup_elem(&rule_cfg, &slot);
	limit = bpf_map_lookup_elem(&rule_limit, &slot);
	if (!rc || !cfg || !limit)
		return ADMIT_BLOCKED;
	pr.now = sluice_now_coarse();
	/* no lease: cluster rules are never per_source (rules.md) */
	pr.count = sluice_effective_limit(cfg, *limit, pr.now);
	if (source_denied(&key, cfg, rc, c, len, &pr))
		return ADMIT_HELD;
	return admit_source_key(&key, len, c, idx, rc, cfg, cost, &pr);
}

/*
 * A per_source rule's common cases, decided inline as judge_fast()
 * decides a rule's, without a call: a cached source with tokens or light
 * credit passes, one under its own refusal is held. ADMIT_PASSED,
 * ADMIT_HELD, or -1 for admit_source_global().
 */
static __always_inline int admit_source_fast(struct sluice_rule_cpu *rc,
					     const struct sluice_rule_cfg *cfg,
					     const struct sluice_src_key *key,
					     __u32 len, __u64 cost)
{
	struct sluice_src_cached *c = source_cache(source_cache_index(key));

	if (!c || !same_source(&c->key, key))
		return -1;
	if (source_cached_pass(c, cost))
		return ADMIT_PASSED;
	/* an overflowed source's refusal is the budget's */
	if (!c->overflow && hold_refused(rc, cfg, &c->refusal, len))
		return ADMIT_HELD;
	return -1;
}

/* The key is made here, in the caller's frame. */
static __always_inline enum admit_result
admit_source(__u32 slot, const struct sluice_pkt *p, struct sluice_rule_cpu *rc,
	     const struct sluice_rule_cfg *cfg, __u64 cost)
{
	struct sluice_src_key key;
	__u64 w[3];
	int fast;

	source_key(&key, slot, p, cfg);
	fast = admit_source_fast(rc, cfg, &key, p->len, cost);
	if (fast >= 0)
		return fast;
	__builtin_memcpy(w, &key, sizeof(w));
	return admit_source_global(w[0], w[1], w[2], p->len, cost);
}

#endif
