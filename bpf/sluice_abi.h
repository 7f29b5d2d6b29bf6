/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Map keys and values shared by the XDP program and user space.
 * Layout is ABI between the two; change both sides together.
 */
#ifndef SLUICE_ABI_H
#define SLUICE_ABI_H

#include <linux/types.h>
#include "consts.h"

/* Protocol slots of the port table; the first three are indexed by port. */
enum sluice_slot {
	SLUICE_SLOT_TCP = 0,	/* TCP other than a bare SYN */
	SLUICE_SLOT_TCP_SYN,	/* SYN without ACK: the only packets cps rules see */
	SLUICE_SLOT_UDP,
	SLUICE_SLOT_ICMP,
	SLUICE_SLOT_ICMPV6,
	SLUICE_SLOT_OTHER,
	SLUICE_SLOT_MAX,
};

#define SLUICE_PORTED_SLOTS 3
/* Entries per family: 65536 ports for each ported slot, one for the rest. */
#define SLUICE_FAM_SPACE                                                      \
	(SLUICE_PORTED_SLOTS * 65536 + (SLUICE_SLOT_MAX - SLUICE_PORTED_SLOTS))
/* Entries per rule set: IPv4's, then IPv6's. */
#define SLUICE_SET_SPACE (2 * SLUICE_FAM_SPACE)
/* Two sets: the fast path reads one while user space writes the other. */
#define SLUICE_NUM_SETS 2

/* A packet's entry in the port table of a set: family (4 or 6), protocol
 * slot and destination port (0 for the slots without ports). */
static inline __attribute__((always_inline)) __u32
sluice_port_key(__u32 family, __u32 slot, __u32 dport)
{
	__u32 base = family == 6 ? SLUICE_FAM_SPACE : 0;

	if (slot < SLUICE_PORTED_SLOTS)
		return base + slot * 65536 + dport;
	return base + SLUICE_PORTED_SLOTS * 65536 + (slot - SLUICE_PORTED_SLOTS);
}

/* A CPU's element of rule_cpu for a rule slot: a CPU's 2^shift slots side
 * by side, so that the address is arithmetic on the slot (bpf/maps.h);
 * shift is rule_cpu_shift, the class of rule slots the map is sized for. */
static inline __attribute__((always_inline)) __u32
sluice_cpu_slot(__u32 cpu, __u32 slot, __u32 shift)
{
	return (cpu << shift) + slot;
}

/*
 * A classification reference: 0 = no rule (pass), SLUICE_REF_LPM | id =
 * look the packet up again in the LPM trie of its family with class id,
 * otherwise rule slot + 1.
 */
#define SLUICE_REF_NONE 0u
#define SLUICE_REF_LPM	0x80000000u
/* Only in the port table, with SLUICE_REF_LPM: the class is a VLAN stage,
 * looked up in lpm_v4 with the packet's VID (0 untagged) in the first two
 * bytes of the address. (Bit 30 tells the sets' class ids apart.) */
#define SLUICE_REF_VLAN 0x20000000u
/* Only in the port table's TCP slot, on a class (SLUICE_REF_LPM; a port
 * that would hold a rule or none gets a class whose /0 holds it): a
 * slow_request_ratio breaker times the connections to this port, so
 * sluice_xdp() hands a client's segment to it (bpf/breaker.h). A set's
 * class ids stay below this bit. */
#define SLUICE_REF_WATCH 0x10000000u
/* Never with SLUICE_REF_LPM: the answer is a chain, chains[id], the
 * winners of two or more layers (docs/rules.md "layer"). Answers that
 * name one rule stay its slot + 1, so a set without layers compiles to
 * the tables it had before layers. */
#define SLUICE_REF_CHAIN 0x40000000u

/* A chain: each layer's rule slot + 1, 0 where no rule of it matches. */
struct sluice_chain {
	__u32 ref[SLUICE_LAYERS];
};


/* prefixlen counts the 32 bits of class_id plus the address bits. */
struct sluice_lpm4_key {
	__u32 prefixlen;
	__u32 class_id;
	__u8 addr[4];
};

struct sluice_lpm6_key {
	__u32 prefixlen;
	__u32 class_id;
	__u8 addr[16];
};

enum sluice_grade {
	SLUICE_GRADE_PPS = 0,
	SLUICE_GRADE_BPS,
	SLUICE_GRADE_CPS,
	SLUICE_GRADE_CONNS,	/* TCP connections open at once (bpf/conns.h) */
};

#define SLUICE_RULE_SHADOW     (1u << 0)
#define SLUICE_RULE_PER_SOURCE (1u << 1)
/* the rule passes (allow) or refuses (deny) every packet it judges,
 * counted; it has no limit (bpf/admit.h: admit_action()) */
#define SLUICE_RULE_ALLOW      (1u << 2)
#define SLUICE_RULE_DENY       (1u << 3)
/* conns: a SYN over count is dropped, not answered by a RST */
#define SLUICE_RULE_CONNS_DROP (1u << 4)

/* Configuration of one rule slot; written only by user space. */
struct sluice_rule_cfg {
	__u64 interval_ns;
	__u64 bucket_ns;	/* interval_ns / sample_count: stats buckets */
	__u64 slot_ns;		/* admission ring slot width */
	__u32 interval_ms;
	__u32 sample_count;
	__u32 flags;
	__u32 grade;
	__u32 max_sources;
	__u8 src_prefix_v4;
	__u8 src_prefix_v6;
	/* per_source: seeds the rule's sketch counters, so that a rule new
	 * in a reused slot does not inherit another's counts */
	__u16 sketch_seed;
	/* warm-up: the threshold ramps from count / cold_factor to count
	 * over warm_period_ms from warm_start_ns; 0 = none */
	__u64 warm_start_ns;
	__u32 warm_period_ms;
	__u32 cold_factor;
	/* conns: a connection silent either way this long is forgotten */
	__u32 conn_idle_s;
	/* conns: new with the rule in its slot, so that a connection the
	 * slot's previous rule counted is not uncounted from this one */
	__u32 conn_epoch;
};

/* A cluster lease as the data plane enforces it, beside rule_limit's
 * grant: from expires_ns on, the fallback is in force, whether or not an
 * agent is left to write it. Written only by user space. */
struct sluice_lease {
	__u64 fallback;	  /* per second, the rule's unit */
	__u64 expires_ns; /* CLOCK_MONOTONIC; 0: no lease, limit stands */
};

/* rule_limit's value, or the fallback once the lease has expired. */
static inline __attribute__((always_inline)) __u64
sluice_leased_limit(__u64 limit, const struct sluice_lease *l, __u64 now_ns)
{
	if (l && l->expires_ns && now_ns >= l->expires_ns)
		return l->fallback;
	return limit;
}

/* The threshold in force: count, or its warm-up ramp (linear from
 * count / cold_factor to count over warm_period_ms). User space reads it
 * the same way (sl_dp_rule_threshold()). */
static inline __attribute__((always_inline)) __u64
sluice_effective_limit(const struct sluice_rule_cfg *cfg, __u64 count,
		       __u64 now_ns)
{
	__u64 elapsed_ms, cold;

	if (!cfg->warm_period_ms || !cfg->cold_factor ||
	    now_ns < cfg->warm_start_ns)
		return count;
	elapsed_ms = (now_ns - cfg->warm_start_ns) / 1000000;
	if (elapsed_ms >= cfg->warm_period_ms)
		return count;
	cold = count / cfg->cold_factor;
	return cold + (count - cold) * elapsed_ms / cfg->warm_period_ms;
}

/* What a slot holds, for an agent that adopts a running data plane.
 * Written and read by user space only. */
struct sluice_rule_meta {
	char name[64];
	__u64 def_hash;		/* hash of the rule's definition */
	__u32 set_mask;		/* bit n: the slot is in rule set n */
	__u32 pad;
};

/* The pacing clock of a budget: GCRA's theoretical arrival time. */
struct sluice_pacer {
	__u64 tat_us;
	/* the window's current refusal episode (pace_hold()): its start
	 * in the high half, its last refusal in the low, both in us mod 2^32 */
	__u64 refusing;
};

/* Tokens granted between first_ns and last_ns, in `grants` grants. */
struct sluice_grant_rec {
	__u64 taken;
	__u64 grants;
	__u64 first_ns;
	__u64 last_ns;
};

/*
 * Host-wide admission state of a rule (shared by all CPUs, atomics only):
 * a pacing clock (tat_us, GCRA's theoretical arrival time) and a ledger of
 * grant records, filled in turn; `head` counts the records started;
 * `demand` the tokens the CPUs' packets asked for in this demand period
 * and the last (admit.h: fair_want()).
 */
struct sluice_budget {
	struct sluice_pacer pacer;
	__u64 head;
	__u64 demand;
	struct sluice_grant_rec rec[SLUICE_LEDGER_RECORDS];
};

/* Per-CPU statistics bucket; `blocked` is over the limit (dropped, or
 * passed and counted in shadow mode). */
struct sluice_bucket {
	__u64 id;		/* time / bucket_ns */
	__u64 passed_pkts;
	__u64 passed_bytes;
	__u64 blocked_pkts;
	__u64 blocked_bytes;
};

/* After a refused request: packets to block before asking again. */
struct sluice_refusal {
	__u64 at_ns;		/* time of the last refused request */
	__u32 tick;		/* sluice_tick() when last checked */
	__u16 batch;		/* packets that refusal blocked */
	__u16 left;		/* of them, still to block */
};

/* Per-CPU state of a rule: the token cache and the counters. Whole cache
 * lines (448 bytes): every element, at a multiple of its size in a
 * page-aligned map, starts a line, so the bytes that judge_fast() reads
 * (the first 51) never straddle two. */
struct sluice_rule_cpu {
	__u64 tokens;		/* granted to this CPU, not yet spent */
	struct sluice_refusal refusal;
	__u32 bucket_idx;
	__u32 roll_tick;	/* sluice_tick() at the last roll_bucket() */
	/* blocked by the refusal in force and not yet in bucket_idx's
	 * bucket and the totals: a flood's drops are counted in bulk, so
	 * they touch only this cache line (readers add them) */
	__u64 held_pkts;
	__u64 held_bytes;
	/* of the rule's configuration, what judge_fast() needs: */
	/* 8 bits: the fast path's verdict is then known to be >= 0 */
	__u8 refused_verdict;	/* XDP_DROP, or XDP_PASS in shadow mode */
	__u8 cost_is_len;	/* bps: a packet costs its length in tokens */
	/* the rule has a breaker: SLUICE_BRK_ON_SYN or _ON_UDP, which of
	 * its packets ask rule_breaker first */
	__u8 has_breaker;
	/* refused packets until the next one is sampled for `sluice drops`
	 * (sluice.bpf.c: count_drop()) */
	__u8 drop_countdown;
	/* a udp breaker's requests on this CPU not yet in rule_breaker's
	 * count, and the low bits of sluice_tick() when it last added them
	 * (breaker.h: brk_request()) */
	__u16 brk_requests;
	__u16 brk_tick;
	struct sluice_bucket bucket[SLUICE_MAX_SAMPLES];
	__u64 passed_pkts;
	__u64 passed_bytes;
	__u64 blocked_pkts;
	__u64 blocked_bytes;
	__u64 source_overflow;	/* packets judged on the overflow allowance */
	/* this CPU's refusal by the rule's overflow budget (per_source) */
	struct sluice_refusal source_refusal;
	/* under overload (admit.h: fair_want()): the CPU's packets (bytes
	 * for bps) counted when it last asked, mod 2^32, and the share of
	 * credit it is owed, in 1/256 of a token */
	__u32 asked;
	__u32 owed;
} __attribute__((aligned(64)));

#define SLUICE_SRC_OVERFLOW_FAMILY 0xff

struct sluice_src_key {
	__u32 rule;
	__u8 family;		/* 4, 6, or SLUICE_SRC_OVERFLOW_FAMILY */
	__u8 pad[3];
	__u8 addr[16];		/* masked to the rule's source prefix */
};

/* A layer's view of the packet, which sluice_xdp writes off the stack for
 * judge_layer() (sluice.bpf.c), a global function of scalar arguments;
 * judge_layer() leaves a per_source rule's key and cost for sluice_xdp
 * to admit (its frame has no room for admit_source_global()'s). */
struct sluice_layer_in {
	__u32 len;
	__u32 port_key;
	__u32 family;
	__u32 later;		/* a later fragment: only bps rules charge it */
	__u32 saddr[4];		/* IPv4: saddr[0] */
	struct sluice_src_key key;
	__u64 cost;
};

/*
 * A source's budget, shared by the CPUs: 48 bytes, so that an element of
 * src_table (htab header 48 + key 24 + value, + the allocator's 8) takes
 * a 128-byte object (docs/architecture.md, "Per-source budgets").
 */
struct sluice_src_state {
	struct sluice_pacer pacer;
	__u64 last_seen_ns;	/* at the last refill */
	/* the window's ring, one slot of interval / SLUICE_SRC_SLOTS a
	 * word, so that one compare-and-swap records a grant: tokens taken
	 * (44 bits), the slot's number mod 256 (8), its first and its last
	 * grant in 64ths of the slot (6 + 6); bpf/admit.h */
	__u64 slots[SLUICE_SRC_SLOTS + 1];
};

/* Per_source sources refused until a time (src_deny, source.h), those of
 * one hash in one cache line. A way is one word, written and read whole:
 * the low 32 bits a tag of the source, the rule set and the count (0:
 * none), the high 32 the time, sluice_now_coarse() >> SLUICE_SRC_DENY_UNIT
 * mod 2^32. */
struct sluice_src_deny_set {
	__u64 way[SLUICE_SRC_DENY_WAYS];
};

/*
 * A CPU's token cache for one source (direct-mapped by a hash of key):
 * tokens of its entry, or what the sketch last said of it, so that a
 * source's packets on a CPU write only this CPU's line (source.h).
 */
struct sluice_src_cached {
	struct sluice_src_key key;
	__u64 tokens;
	struct sluice_refusal refusal;
	/* light: what it may still send without asking the sketch again,
	 * within tick; what it sent since it last asked (owed to the
	 * sketch, or to its entry) */
	__u32 light_left;
	__u32 light_owed;
	__u32 tick;		/* sluice_tick() of light_left, overflow */
	/* the rule's table was full: the rule's overflow budget judges it,
	 * through this CPU's cache entry of the overflow key */
	__u8 overflow;
	__u8 pad[3];
};

/* A CPU's memory of one destination-trie answer (direct-mapped by a
 * hash of class and address). Valid only while the rule-set generation
 * it was found under is in force. */
struct sluice_dst_cached {
	__u64 gen_tag;		/* generation + 1; 0 = empty */
	__u32 class_fam;	/* class id, | SLUICE_DST_V6 for IPv6 */
	__u32 ref;		/* the trie's answer */
	__u32 addr[4];		/* destination (IPv4: addr[0], the rest 0) */
};

#define SLUICE_DST_V6 0x80000000u
/* a VLAN-stage answer (class ids stay below SLUICE_REF_VLAN, the same bit) */
#define SLUICE_DST_VLAN SLUICE_REF_VLAN

/* A breaker's states (Sentinel 1.8's CircuitBreaker.State). */
enum sluice_breaker_state {
	SLUICE_BRK_CLOSED = 0,
	SLUICE_BRK_OPEN,
	SLUICE_BRK_HALF_OPEN,
	SLUICE_BRK_STATES,
};

enum sluice_breaker_strategy {
	SLUICE_BRK_ERROR_RATIO = 0, /* threshold in parts per million */
	SLUICE_BRK_ERROR_COUNT,
	SLUICE_BRK_SLOW_RATIO,	    /* slow / responses, in ppm */
};

#define SLUICE_BRK_RATIO_ONE 1000000u

/* What a breaker counts as the answer to a request. */
enum sluice_breaker_answer {
	SLUICE_ANS_OK = 0,	  /* a SYN-ACK, a reply, a fast response */
	SLUICE_ANS_RST,		  /* a RST to a SYN: nothing listens */
	SLUICE_ANS_ICMP_UNREACH,  /* ICMP port unreachable for a datagram */
	SLUICE_ANS_TIMEOUT,	  /* a SYN retransmitted: none came */
	SLUICE_ANS_SLOW,	  /* a response later than max_rt */
	SLUICE_BRK_ANSWERS,
};

/* rule_cpu.has_breaker: which packets of the rule ask its breaker. */
#define SLUICE_BRK_ON_SYN 1	/* tcp: SYNs without ACK */
#define SLUICE_BRK_ON_UDP 2	/* udp: every datagram */

/* A breaker's configuration; written only by user space. */
struct sluice_breaker_cfg {
	__u64 open_ns;
	__u64 stat_ns;		/* the statistic's window */
	__u64 max_rt_ns;	/* slow_request_ratio: a slower response */
	__u32 strategy;
	__u32 threshold;
	__u32 min_requests;
	__u32 probes;		/* requests let through in half-open */
	__u32 open_drop;	/* while open: drop a SYN, not answer RST */
	/* udp: requests are datagrams, counted in the window, and
	 * replies count as successes up to them */
	__u32 udp;
};

/*
 * A breaker's state, shared by the CPUs (atomics only). `state` holds the
 * state in its low 2 bits and the number of transitions above them, so a
 * CAS on it makes exactly one CPU the author of each transition.
 */
struct sluice_breaker {
	__u64 state;
	__u64 since_ns;		/* when the state was entered */
	__u64 win_id;		/* now / stat_ns of the counters below */
	__u64 answers;		/* answers counted in window win_id */
	__u64 errors;		/* ... of them errors */
	__u64 requests;		/* udp: datagrams passed in win_id */
	__s64 probes_left;	/* half-open: probes still to let pass */
	__u64 probe_ok;		/* half-open: probes answered well */
	/* totals, for stats */
	__u64 to_state[SLUICE_BRK_STATES]; /* transitions into each state */
	__u64 probes_passed;
	__u64 probe_success;
	__u64 probe_failure;
	__u64 failed_fast;	/* requests failed (RST or drop) while open */
	__u64 answered[SLUICE_BRK_ANSWERS]; /* answers seen, by kind */
};

#define SLUICE_BRK_STATE_MASK 3ull

/* A TCP connection of a rule with a breaker: breaker_conns' key. */
struct sluice_conn_key {
	__u32 client[4];	/* IPv4: client[0], the rest 0 */
	__u32 server[4];
	__u16 client_port;	/* network order */
	__u16 server_port;
	__u32 family;		/* 4 or 6 */
};

#define SLUICE_CONN_TIMED_OUT (1u << 0) /* its retransmission counted */
#define SLUICE_CONN_SYN_ACKED (1u << 1) /* a slow ratio's, kept after it */

/* What the breaker remembers of it, from its SYN on (small: the XDP
 * functions that build one have a stack of 96 bytes beside the
 * program's, within 6.1's 512). */
struct sluice_conn {
	/* slow_request_ratio: its first request byte; 0 before */
	__u64 req_ns;
	/* the breaker's state word when its SYN passed, low 32 bits: the
	 * state and 2^30 transitions */
	__u32 epoch;
	__u32 slot;
	__u32 isn;		/* the SYN's sequence number */
	__u32 flags;		/* SLUICE_CONN_* */
};

/*
 * A connection conns rules count (conn_table's value, keyed by struct
 * sluice_conn_key), from its SYN to its FIN or RST or its idle timeout:
 * the place it holds in each rule of a chain's layers that counts it.
 */
struct sluice_conn_open {
	__u64 last_ns;		/* the last segment either way, coarse */
	__u32 slot[SLUICE_LAYERS]; /* slot + 1 of a rule counting it; 0 none */
	__u32 epoch[SLUICE_LAYERS]; /* the rule's conn_epoch at its SYN */
	__u8 overflow[SLUICE_LAYERS]; /* per_source: on the overflow count */
	__u32 acked;		/* the client acknowledged: handshake done */
};

/* A conns rule's count of open connections (conn_rule, per slot), or a
 * source's (conn_sources): a line of its own, written per SYN and per
 * close, never per packet. */
struct sluice_conn_count {
	__u64 open;
	__u64 sources;		/* conn_rule: entries in conn_sources */
	__u64 last_ns;		/* conn_sources: its last SYN */
	__u32 epoch;		/* conn_sources: the rule's conn_epoch */
	__u32 pad;
	__u64 pad2[4];
};

/*
 * needs_l4[set]: what the rules of a set need to classify a packet, per
 * family (IPv6's bits shifted by SLUICE_NEED_V6_SHIFT). A packet that
 * lacks what no rule needs is classified without it.
 */
#define SLUICE_NEED_TCP_PORT  (1u << 0) /* a TCP port or SYN flag */
#define SLUICE_NEED_UDP_PORT  (1u << 1)
#define SLUICE_NEED_PROTO     (1u << 2) /* the IP protocol */
#define SLUICE_NEED_CONNS     (1u << 3) /* a conns rule: egress closes */
#define SLUICE_NEED_V6_SHIFT  4

/* A fragmented datagram: frag_table's key, as the kernel reassembles
 * (RFC 791, RFC 8200), with the VLAN that classification reads. */
struct sluice_frag_key {
	__u32 saddr[4];		/* IPv4: saddr[0], the rest 0 */
	__u32 daddr[4];
	__u32 id;		/* IPv4's 16-bit id; IPv6's Fragment header id */
	__u8 family;		/* 4 or 6 */
	/* IPv4's protocol; 0 for IPv6, whose first fragment alone says */
	__u8 proto;
	__u16 vlan;
};

/* The rule that judged the first fragment of a datagram. */
struct sluice_frag {
	__u64 first_ns;		/* when; older than SLUICE_FRAG_TTL_NS: gone */
	__u32 ref;		/* its slot + 1 or chain; 0: no rule */
	__u32 pad;
};

/* frag_key_buf's value: a key and a value built off the stack. */
struct sluice_frag_buf {
	struct sluice_frag_key key;
	struct sluice_frag val;
};

/* A dropped packet's source, sampled for `sluice drops` (bpf/sluice.bpf.c):
 * on each CPU every SLUICE_DROP_SAMPLE_EVERY-th refused packet of a rule,
 * at most one per tick, standing for the `weight` packets that CPU
 * refused under the rule since its last sample. */
struct sluice_drop_sample {
	__u32 slot;
	__u32 weight;
	__u8 family;		/* 4 or 6 */
	__u8 pad[7];
	__u8 saddr[16];		/* IPv4: the first 4 bytes */
};

/* drop_sample_state's value: where a CPU's samples of a rule stand. */
struct sluice_drop_sampler {
	__u64 sampled;		/* refused packets its samples stood for */
	__u32 tick;		/* the tick of its last sample */
	__u32 pad;
};

/* What sluice_explain made of a frame (bpf/explain_xdp.h). */
enum sluice_explain_outcome {
	SLUICE_EXPLAIN_NOT_IP = 1,	/* not IP: passes, no rule judges it */
	SLUICE_EXPLAIN_UNCLASSIFIED,	/* reason: an enum sluice_stat */
	SLUICE_EXPLAIN_NO_RULE,		/* no rule matches: passes */
	SLUICE_EXPLAIN_RULE,		/* ref names the rule's slot + 1 */
};

/* A per_source rule's view of the frame's source. */
enum sluice_explain_source {
	SLUICE_EXPLAIN_SRC_NONE = 0,	/* not a per_source rule */
	SLUICE_EXPLAIN_SRC_TRACKED,	/* its entry's window and credit */
	SLUICE_EXPLAIN_SRC_UNTRACKED,	/* no entry: light until the sketch
					 * counts half the count a second */
};

struct sluice_explain {
	__u32 outcome;		/* enum sluice_explain_outcome */
	__u32 reason;		/* unclassified: why (enum sluice_stat) */
	__u32 verdict;		/* unclassified: the XDP verdict it gets */
	__u32 ref;		/* rule: its slot + 1 */
	__u32 source;		/* enum sluice_explain_source */
	__u32 pad;
	__u64 cost;		/* tokens the frame costs (bytes for bps) */
	__u64 count;		/* the threshold per second now */
	__u64 window;		/* tokens an interval admits */
	__u64 used;		/* tokens granted in the window now */
	__u64 credit;		/* the pacing clock's credit now, in tokens */
};

/* Host-wide per-CPU counters, indexed by enum sluice_stat. */
enum sluice_stat {
	SLUICE_ST_UNMATCHED = 0,
	SLUICE_ST_MALFORMED_ETH,
	SLUICE_ST_MALFORMED_VLAN,
	SLUICE_ST_MALFORMED_IP4,
	SLUICE_ST_MALFORMED_IP6,
	SLUICE_ST_MALFORMED_L4,
	SLUICE_ST_FRAGMENTS,	/* non-first fragments (no L4 header) */
	SLUICE_ST_NO_RULE_CFG,	/* a class pointed at an unknown slot */
	SLUICE_ST_SRC_TABLE_FULL, /* source table exhausted: blocked */
	/* unclassified, where a rule in force needs what is missing: */
	SLUICE_ST_FRAG_ORPHAN,	/* a later fragment, its first not seen */
	SLUICE_ST_FRAG_TINY,	/* a first fragment without its L4 header */
	SLUICE_ST_IP6_CHAIN,	/* more IPv6 extension headers than walked */
	/* a SYN of a conns rule refused for want of a place to count it: */
	SLUICE_ST_CONN_UNTRACKED, /* not TCP over IPv4 or plain IPv6 */
	SLUICE_ST_CONN_TABLE_FULL, /* conn_table full */
	SLUICE_ST_MAX,
};

#endif
