/* SPDX-License-Identifier: GPL-2.0 */
/*
 * per_source admission: a budget for each source of a rule (its address
 * under the rule's prefix). Sources that stay light in a sketch of the
 * last second take no entry; a heavy one has an entry in src_table whose
 * budget keeps a ring of time slots (a ledger per source would cost too
 * much memory: its bound is one slot's grants); when the table is full,
 * the rule's overflow budget judges the rest. A CPU keeps its sources'
 * state in its lines of src_cache, and src_deny answers a refused source
 * from one line (docs/architecture.md, "Per-source budgets").
 */
#ifndef SLUICE_SOURCE_H
#define SLUICE_SOURCE_H

#include "admit.h"

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

/* Take tokens from a source's budget (see pace_take). */
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
