/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every map and global of the data plane. Configuration (written by user
 * space) and counters (written by the fast path) live in different maps.
 * Globals are maps too: .rodata (const volatile, fixed at load time, so
 * the verifier prunes what they turn off) and .bss (written at run time
 * through the skeleton's mmap).
 */
#ifndef SLUICE_MAPS_H
#define SLUICE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sluice_abi.h"

/* Classification, stages 2 and 3: (class, address) -> reference. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SLUICE_MAX_LPM);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_lpm4_key);
	__type(value, __u32);
} lpm_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SLUICE_MAX_LPM);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_lpm6_key);
	__type(value, __u32);
} lpm_v6 SEC(".maps");

/* Per-CPU memory of recent destination-trie answers, in front of the
 * tries (classify.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << SLUICE_DST_CACHE_BITS);
	__type(key, __u32);
	__type(value, struct sluice_dst_cached);
} dst_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_rule_cfg);
} rule_cfg SEC(".maps");

/* The threshold per second of each rule slot, apart from its configuration
 * so that one 8-byte map write changes it (cluster grants, warm-up). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} rule_limit SEC(".maps");

/* The expiry of each slot's cluster lease and the fallback after it, read
 * with rule_limit on the refill path only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_lease);
} rule_lease SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_budget);
} rule_budget SEC(".maps");

/*
 * Each CPU's state of each rule, at (cpu << rule_cpu_shift) + slot; user
 * space sets max_entries to nr_cpus << rule_cpu_shift, a class of the
 * slots in force rather than all SLUICE_MAX_RULE_SLOTS, and reads it
 * through mmap. A plain array, not a per-CPU one: a per-CPU lookup
 * loads the element's pointer, and a flood's packets wait on that load
 * (docs/benchmarks.md); here the address is arithmetic on the slot.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_rule_cpu);
} rule_cpu SEC(".maps");

/* Entries of each per_source rule in src_table: live = added - freed.
 * The fast path owns `added`, the garbage collector in user space owns
 * `freed`, so neither read-modify-writes the other's counter. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} rule_src_added SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} rule_src_freed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_rule_meta);
} rule_meta SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SLUICE_MAX_SOURCES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_src_key);
	__type(value, struct sluice_src_state);
} src_table SEC(".maps");

/* Counters of the sketch tier (source.h): epoch:16, prev:24, cur:24. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_SKETCH_ROWS << SLUICE_SKETCH_BITS);
	__type(key, __u32);
	__type(value, __u64);
} src_sketch SEC(".maps");

/* Sources refused until a time, read before src_table (source.h): sets
 * of ways, each a cache line of a page-aligned (mmapable) array. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, (1 << SLUICE_SRC_DENY_BITS) / SLUICE_SRC_DENY_WAYS);
	__type(key, __u32);
	__type(value, struct sluice_src_deny_set);
} src_deny SEC(".maps");

/* Per-CPU token caches of recently seen sources, in front of src_table:
 * CPU c's 2^SLUICE_SRC_CACHE_BITS lines from c << SLUICE_SRC_CACHE_BITS
 * (sized by the loader). A plain array, as rule_cpu: the address is
 * arithmetic, and each 64-byte element is one cache line. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << SLUICE_SRC_CACHE_BITS);
	__type(key, __u32);
	__type(value, struct sluice_src_cached);
} src_cache SEC(".maps");

/* Breakers (rules with a "breaker"): configuration, then state. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_breaker_cfg);
} breaker_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_breaker);
} rule_breaker SEC(".maps");

/* The TCP connections of breaker rules whose SYN waits for its answer. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SLUICE_BRK_CONNS);
	__type(key, struct sluice_conn_key);
	__type(value, struct sluice_conn);
} breaker_conns SEC(".maps");

/* The connections conns rules count (bpf/conns.h): no LRU, so that a
 * SYN flood evicts none; each rule holds at most count of them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SLUICE_MAX_CONNS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_conn_key);
	__type(value, struct sluice_conn_open);
} conn_table SEC(".maps");

/* A per-CPU place for a new conn_table value, off the stack that
 * judge_conns() shares with sluice_xdp under 6.1's 512 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_conn_open);
} conn_new SEC(".maps");

/* Each conns rule's open connections; per_source: its sources' entries. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_conn_count);
} conn_rule SEC(".maps");

/* Each source's open connections under a per_source conns rule. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SLUICE_MAX_CONN_SOURCES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_src_key);
	__type(value, struct sluice_conn_count);
} conn_sources SEC(".maps");

/* The first fragment's verdict of each fragmented datagram, for its
 * later fragments (sluice.bpf.c); written once per datagram. One LRU
 * for all CPUs: a datagram's fragments reach the CPU of its L3 hash, and
 * a CPU's own list would hold 1/nr_cpus (docs/architecture.md). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SLUICE_FRAG_DATAGRAMS);
	__type(key, struct sluice_frag_key);
	__type(value, struct sluice_frag);
} frag_table SEC(".maps");

/* A per-CPU place for a frag_table key and value, off the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_frag_buf);
} frag_key_buf SEC(".maps");

/* Both sets' chains of layer winners (SLUICE_REF_CHAIN), written by
 * user space with the set's tables. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_NUM_SETS * SLUICE_MAX_CHAINS);
	__type(key, __u32);
	__type(value, struct sluice_chain);
} chains SEC(".maps");

/* The chain a SLUICE_REF_CHAIN answer names, or NULL. */
static __always_inline struct sluice_chain *chain_of(__u32 ref)
{
	__u32 idx = ref & ~SLUICE_REF_CHAIN;

	return bpf_map_lookup_elem(&chains, &idx);
}

/* A per-CPU place for what judge_layer() needs of the packet. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_layer_in);
} layer_in SEC(".maps");

/* Sampled sources of dropped packets, read by the agent (`sluice drops`),
 * and each CPU's sampling state per rule slot. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SLUICE_DROP_RING_BYTES);
} drop_samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MAX_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_drop_sampler);
} drop_sample_state SEC(".maps");

/* sluice_explain's answer, read by the agent after each run (a map, not
 * a global: the skeleton's users need not know its type): entry 0 the
 * frame's, then for a chain each layer's winner and budget. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 + SLUICE_LAYERS);
	__type(key, __u32);
	__type(value, struct sluice_explain);
} explain_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} host_stats SEC(".maps");

/* ---- globals ---- */

/*
 * Generation of the rule set in force; its low bit names the set the fast
 * path reads. User space fills the other set, then increments this with
 * one store. A cached trie answer is valid only under the generation it
 * was found in: a set's tries are rewritten only two generations later.
 */
volatile __u32 set_gen;

/* Stage 1 of both sets, at set * SLUICE_SET_SPACE + sluice_port_key(): a
 * global (.bss) rather than an array map, so that a lookup is a bounds
 * check and a load, with no key on the stack; user space writes it
 * through the skeleton's mmap. */
__u32 port_table[SLUICE_NUM_SETS * SLUICE_SET_SPACE];

/* What each set's rules need to classify a packet (SLUICE_NEED_*),
 * written with its port table. */
__u32 needs_l4[SLUICE_NUM_SETS];

/* Fixed at load time: the CPUs rule_cpu is sized for, its slots per CPU
 * (log2: no slot in force reaches 2^rule_cpu_shift), the test clock. */
const volatile __u32 nr_cpus = 1;
const volatile __u32 rule_cpu_shift = 13;
const volatile __u8 test_clock = 0;

/* The clock of test builds: written by the test through the .bss map. */
volatile __u64 test_now_ns;
/* Its tick (a jiffy) if set, else the tick moves with every change. */
volatile __u64 test_tick_ns;

/* Verdict for packets sluice cannot classify: headers cut short or
 * inconsistent, or missing what a rule in force needs. */
const volatile __u32 unclassified_verdict = XDP_DROP;

/* IP-in-IP and GRE packets judged by their inner header (parse.h) */
const volatile __u8 tunnels_inner = 0;

#endif
