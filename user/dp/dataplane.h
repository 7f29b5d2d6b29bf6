/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data plane from user space, as every part of user/dp sees it: the
 * state of one loaded program instance (struct sl_dataplane) and the few
 * helpers all of them use. The parts over it: pins (the pin directory),
 * attach (XDP links, the egress filter), rule_cpu (the per-CPU slots),
 * sources (per-source entries), upgrade (carrying pinned state), apply
 * (a rule set into the maps) and loader (load, destroy); loader.h
 * gathers them for the programs.
 */
#ifndef SLUICE_DATAPLANE_H
#define SLUICE_DATAPLANE_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "compile.h"
#include "rules.h"
#include "util.h"

enum sl_xdp_mode {
	SL_XDP_AUTO = 0,
	SL_XDP_NATIVE,
	SL_XDP_GENERIC,
};

struct sl_dp_opts {
	bool test_clock;	/* time comes from sl_dp_set_test_time() */
	/* pass what sluice cannot classify (malformed, or lacking what a
	 * rule needs) rather than drop it */
	bool pass_unclassified;
	/* judge IP-in-IP and GRE packets by their inner header */
	bool tunnels_inner;
	/* bpffs directory for the maps and links; NULL: nothing pinned,
	 * the data plane ends with the process */
	const char *pin_dir;
	/* size rule_cpu for this many CPUs when more than the possible
	 * ones (a test of a big host's memory); 0: the possible CPUs */
	int sized_cpus;
	/* load sluice_xdp_frags too (if the kernel has multi-buffer XDP),
	 * for an interface whose driver may refuse sluice_xdp: frames in
	 * several buffers (sl_dp_iface_jumbo()) */
	bool frags;
};

struct sl_iface {
	char name[IF_NAMESIZE];
	int ifindex;
	int link_fd;
	enum sl_xdp_mode mode; /* native or generic, as attached */
	bool adopted;	       /* the link was already there */
	bool egress;	       /* sluice_egress attached (tc clsact egress) */
	bool frags;	       /* it runs sluice_xdp_frags */
};

/* A rule slot in force, as the maps know it. */
struct sl_slot_state {
	bool in_force;
	bool per_source;
	/* budget, counters and source counts are zero and no program writes
	 * them: a fresh slot that needs no zeroing before use */
	bool clean;
	uint64_t def_hash;
	char name[SL_NAME_MAX + 1];
};

struct sluice_bpf;

struct sl_dataplane {
	struct sluice_bpf *skel;
	char pin_dir[256];
	char maps_dir[PATH_MAX]; /* pin_dir/layout-ID: this build's maps */
	uint64_t layout;	 /* the id of this build's pinned layout */
	bool adopted;		 /* maps were pinned by an earlier agent */
	bool upgraded;		 /* ... of another layout, carried over */
	bool frags;		 /* sluice_xdp_frags is loaded */
	struct sl_iface ifaces[SL_MAX_IFACES];
	int n_ifaces;
	int n_cpus;
	/* the rule_cpu map, mmapped: n_cpus x 2^rule_cpu_shift, the class
	 * of the slots in force (grown by sl_dp_apply) */
	struct sluice_rule_cpu *rule_cpu;
	uint32_t rule_cpu_shift;
	struct sl_ruleset rules; /* in force, file order (after an apply) */
	uint32_t *slots;	 /* slot of rules.rules[i] */
	struct sl_slot_state *slot_state; /* SLUICE_MAX_RULE_SLOTS */
	struct sl_lpm_entry *lpm; /* trie entries of the active set */
	size_t n_lpm;
	/* a fresh slot's first threshold; NULL: the rule's count (a cluster
	 * rule starts at its fallback, agent/cluster.c) */
	uint64_t (*first_limit)(const struct sl_rule *r, void *arg);
	void *first_limit_arg;
	uint32_t conn_epoch; /* the last rule_cfg.conn_epoch given */
	bool conns_swept; /* conns rules were in force at the last sweep */
	/* what the set before the last flip leaves to clear once no
	 * program runs with it (sl_dp_retire) */
	struct sl_lpm_entry *retired_lpm;
	size_t n_retired_lpm;
	uint8_t *retired_sources; /* slots whose sources go; NULL: none */
	uint32_t *retired_slots;  /* slots that left the set, to zero */
	size_t n_retired_slots;
	bool retire_pending;
	uint64_t rules_gen; /* applies so far: slots may have changed hands */
};

/* Whether the kernel takes multi-buffer XDP programs (5.18). */
bool sl_dp_frags_supported(void);

/* Which programs skel loads: sluice_xdp_frags only where dp has it. */
void sl_dp_autoload(const struct sl_dataplane *dp, struct sluice_bpf *skel);

/* Test builds: the clock the data plane reads. */
void sl_dp_set_test_time(struct sl_dataplane *dp, uint64_t now_ns);

/* The clock the data plane uses (CLOCK_MONOTONIC or the test clock). */
uint64_t sl_dp_now(const struct sl_dataplane *dp);

/* Number of rule slots in force (after an adoption, before any apply,
 * this is what the previous agent left). */
size_t sl_dp_slots_in_force(const struct sl_dataplane *dp);

/* CPU cpu's state of the rule in slot (read without a syscall). */
static inline struct sluice_rule_cpu *
sl_dp_rule_cpu(const struct sl_dataplane *dp, int cpu, uint32_t slot)
{
	return &dp->rule_cpu[sluice_cpu_slot(cpu, slot, dp->rule_cpu_shift)];
}

/* Wait until no XDP program still runs with what it read before (an RCU
 * grace period). */
void sl_dp_wait_for_readers(void);

#endif
