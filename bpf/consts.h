/* SPDX-License-Identifier: GPL-2.0 */
/* Tunables of the data plane; each may be overridden with -D at build time. */
#ifndef SLUICE_CONSTS_H
#define SLUICE_CONSTS_H

/* Rule slots: twice the rules per set, so a whole new set fits beside the
 * old one during a swap. */
#ifndef SLUICE_MAX_RULE_SLOTS
#define SLUICE_MAX_RULE_SLOTS 8192
#endif

/* rule_cpu holds 2^shift slots per CPU, the smallest power of two over
 * the slots in force (both sets during a swap), at least 2^MIN_SHIFT:
 * user space reloads the program with a larger map when a set needs more
 * (docs/architecture.md, "Memory"). */
#ifndef SLUICE_RULE_CPU_MIN_SHIFT
#define SLUICE_RULE_CPU_MIN_SHIFT 6
#endif

/* Layers of a rule set: the winner of each is judged, in order
 * (docs/rules.md "layer"). */
#define SLUICE_LAYERS 4

/* Chains of layer winners per set (SLUICE_REF_CHAIN): distinct answers
 * that name two layers or more. */
#ifndef SLUICE_MAX_CHAINS
#define SLUICE_MAX_CHAINS 16384
#endif

/* Per-CPU statistics buckets per rule (a rule's sample_count <= this). */
#ifndef SLUICE_MAX_SAMPLES
#define SLUICE_MAX_SAMPLES 8
#endif

/* Admission slots per interval: a CPU that was refused asks again within
 * one slot (interval_ms / SLUICE_ADMIT_SLOTS). */
#ifndef SLUICE_ADMIT_SLOTS
#define SLUICE_ADMIT_SLOTS 32
#endif

/* A rule's grant record holds at most limit / SLUICE_LEDGER_DIV tokens:
 * that bounds the window's error (docs/architecture.md). */
#ifndef SLUICE_LEDGER_DIV
#define SLUICE_LEDGER_DIV 32
#endif

/* Grant records per rule: enough for one interval's worth of records
 * (each closed one holds more than limit / (2 * SLUICE_LEDGER_DIV) while
 * chunks are at most half a record), with room to spare. */
#ifndef SLUICE_LEDGER_RECORDS
#define SLUICE_LEDGER_RECORDS (2 * SLUICE_LEDGER_DIV + 16)
#endif

/* Once the window has refused for interval / SLUICE_ECHO_DIV (refusals
 * less than two admission slots apart), the pacing clock keeps at most that
 * much credit until the refusals stop (pace_hold() in admit.h). */
#ifndef SLUICE_ECHO_DIV
#define SLUICE_ECHO_DIV 16
#endif

/* Admission ring slots per interval for each per_source entry (the ring
 * holds one more; 2 keeps a source's state within 48 bytes). */
#ifndef SLUICE_SRC_SLOTS
#define SLUICE_SRC_SLOTS 2
#endif

/* Refused per_source sources noted in src_deny: 2^18 x 8 bytes, 2 MiB,
 * in sets of SLUICE_SRC_DENY_WAYS, a cache line each; their times in
 * units of 2^SLUICE_SRC_DENY_UNIT ns (1.05 ms). */
#ifndef SLUICE_SRC_DENY_BITS
#define SLUICE_SRC_DENY_BITS 18
#endif
#define SLUICE_SRC_DENY_WAYS 8
#define SLUICE_SRC_DENY_UNIT 20

/* A CPU takes at most limit / (SLUICE_CHUNK_DIV * nr_cpus) tokens at once. */
#ifndef SLUICE_CHUNK_DIV
#define SLUICE_CHUNK_DIV 64
#endif

/* A rule's demand (admit.h: fair_want()) is counted in periods of
 * 2^SLUICE_DEMAND_SHIFT ns (33.6 ms): several ticks at any CONFIG_HZ, so
 * that every CPU under a refusal reports in each period. */
#ifndef SLUICE_DEMAND_SHIFT
#define SLUICE_DEMAND_SHIFT 25
#endif

/* A CPU takes at most limit / (SLUICE_SRC_CHUNK_DIV * nr_cpus) tokens of a
 * source's budget at once into its token cache for that source. */
#ifndef SLUICE_SRC_CHUNK_DIV
#define SLUICE_SRC_CHUNK_DIV 16
#endif

/* A CPU lets at most this much of a light source pass (count / (2 *
 * SLUICE_SRC_CHUNK_DIV * nr_cpus) below it) before it asks the sketch
 * again; it asks at every tick anyway. */
#ifndef SLUICE_LIGHT_MAX
#define SLUICE_LIGHT_MAX (1u << 24)
#endif

/* Per-CPU source token caches: 2^bits direct-mapped entries. */
#ifndef SLUICE_SRC_CACHE_BITS
#define SLUICE_SRC_CACHE_BITS 12
#endif

/* After refused refills in quick succession a CPU blocks up to this many
 * packets before asking again (the batch adapts to the packet rate). */
#ifndef SLUICE_DENY_BATCH
#define SLUICE_DENY_BATCH 1024
#endif

/* An allow rule's tokens on a CPU, refilled at each tick: more than any
 * CPU passes in one (2^40 bytes, 1 TB). */
#define SLUICE_ALLOW_TOKENS (1ULL << 40)

/* Per-CPU caches of destination-trie answers: 2^bits direct-mapped
 * entries (a host's services sit on few addresses). */
#ifndef SLUICE_DST_CACHE_BITS
#define SLUICE_DST_CACHE_BITS 8
#endif

/*
 * The sketch in front of the source table (docs/architecture.md): rows
 * of 2^bits counters, each of the last second's cost of the sources
 * that hash to it. A source takes an exact entry only once its estimate
 * reaches half its rule's count per second.
 */
#ifndef SLUICE_SKETCH_ROWS
#define SLUICE_SKETCH_ROWS 4
#endif
#ifndef SLUICE_SKETCH_BITS
#define SLUICE_SKETCH_BITS 18
#endif
#define SLUICE_SKETCH_WINDOW_NS 1000000000ULL

/* Source entries over all per_source rules (plus one overflow per rule). */
#ifndef SLUICE_MAX_SOURCES
#define SLUICE_MAX_SOURCES 262144
#endif

/* Entries of each LPM trie (IPv4, IPv6), over both rule sets. */
#ifndef SLUICE_MAX_LPM
#define SLUICE_MAX_LPM 131072
#endif

/* TCP connections of breaker rules remembered at once, from the SYN to
 * its answer (an LRU: the least recently touched go first; bounds and
 * memory in bpf/breaker.h). */
#ifndef SLUICE_BRK_CONNS
#define SLUICE_BRK_CONNS 16384
#endif

/* Connections that conns rules count at once, all rules together
 * (conn_table: allocated as used), and sources of per_source conns
 * rules (conn_sources); the rule check holds a set within both. */
#ifndef SLUICE_MAX_CONNS
#define SLUICE_MAX_CONNS 262144
#endif
#ifndef SLUICE_MAX_CONN_SOURCES
#define SLUICE_MAX_CONN_SOURCES 65536
#endif

/* A conns rule's connection whose client has not acknowledged the
 * handshake is forgotten this long after its last SYN: a forged SYN
 * holds a place of count no longer (docs/rules.md "conns"). */
#define SLUICE_CONN_SYN_TIMEOUT_NS 5000000000ULL

/* A connection's idle clock is written at most this often (the sweep's
 * resolution), not on every segment. */
#define SLUICE_CONN_TOUCH_NS 500000000ULL

/* Of a rule's refused packets on a CPU, every this many is a candidate
 * for `sluice drops` (at most one a tick is sampled): a prime, so that
 * the sources of a periodic flood are not picked in step with it. */
#ifndef SLUICE_DROP_SAMPLE_EVERY
#define SLUICE_DROP_SAMPLE_EVERY 61
#endif

/* The ring of sampled drops (`sluice drops`): 13107 samples of 40 bytes
 * with their headers, which the agent empties every 100 ms. */
#ifndef SLUICE_DROP_RING_BYTES
#define SLUICE_DROP_RING_BYTES (512 * 1024)
#endif

/* A CPU adds its udp breaker requests to the shared count once per this
 * many, or per tick (breaker.h); SLUICE_BRK_SUM_CPUS: the most CPUs whose
 * unsettled requests the egress program adds (the rest lag a tick). */
#ifndef SLUICE_BRK_BATCH
#define SLUICE_BRK_BATCH 256
#endif
#ifndef SLUICE_BRK_SUM_CPUS
#define SLUICE_BRK_SUM_CPUS 1024
#endif

/* Fragmented datagrams whose first fragment's verdict is kept for the
 * later ones (an LRU; bound and memory in docs/architecture.md). */
#ifndef SLUICE_FRAG_DATAGRAMS
#define SLUICE_FRAG_DATAGRAMS 32768
#endif

/* A datagram's verdict outlives its first fragment by this much: the
 * kernel's own reassembly timeout (net.ipv4.ipfrag_time, 30 s). */
#ifndef SLUICE_FRAG_TTL_NS
#define SLUICE_FRAG_TTL_NS 30000000000ULL
#endif

/* IPv6 extension headers walked before giving up (unclassified). */
#ifndef SLUICE_MAX_IPV6_EXT
#define SLUICE_MAX_IPV6_EXT 8
#endif

#endif
