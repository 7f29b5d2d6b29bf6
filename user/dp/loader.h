/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data plane from user space: load the XDP object, write a rule set
 * into its maps (atomically, as a whole), attach it to interfaces with
 * bpf_link, read its counters.
 */
#ifndef SLUICE_LOADER_H
#define SLUICE_LOADER_H

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
};

struct sl_iface {
	char name[IF_NAMESIZE];
	int ifindex;
	int link_fd;
	enum sl_xdp_mode mode; /* native or generic, as attached */
	bool adopted;	       /* the link was already there */
	bool egress;	       /* sluice_egress attached (tc clsact egress) */
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
	 * rule starts at its fallback, user/cluster.c) */
	uint64_t (*first_limit)(const struct sl_rule *r, void *arg);
	void *first_limit_arg;
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

int sl_dp_load(struct sl_dataplane *dp, const struct sl_dp_opts *opts);

/*
 * Make rs the rule set in force: compile it, write it beside the active
 * set and flip; every packet from then on is judged by it. Rules whose
 * definition did not change keep their slot, so their counters and
 * windows survive. On failure the rules in force stay as they were and
 * err says why. The old set is cleared by sl_dp_retire(), which the next
 * apply runs first if the caller has not.
 */
int sl_dp_apply(struct sl_dataplane *dp, const struct sl_ruleset *rs,
		char *err, size_t errlen);

/*
 * After a flip: wait until no XDP program still runs with the old set (an
 * RCU grace period), then delete its trie entries and the sources of the
 * rules that left, and zero their slots' state (so that the apply which
 * reuses a slot need not). Does nothing when nothing is pending.
 */
void sl_dp_retire(struct sl_dataplane *dp);

int sl_dp_attach(struct sl_dataplane *dp, const char *ifname,
		 enum sl_xdp_mode mode);

/*
 * The egress program that feeds the breakers: attached (or replaced) on
 * every interface while a rule in force has a breaker, detached when none
 * has, and attached again where it went missing (the agent calls this
 * every second). Like the XDP link it outlives the agent (a tc filter,
 * handle and priority SL_TC_HANDLE / SL_TC_PRIO). 0 or -errno.
 */
#define SL_TC_HANDLE 0x51c
#define SL_TC_PRIO   0x51c
int sl_dp_sync_egress(struct sl_dataplane *dp);
/* Detach ifindex's sluice_egress filter; -ENOENT when there is none. */
int sl_tc_detach(int ifindex);

/* The interface's link still points at it (0 once it went away). */
bool sl_dp_iface_attached(const struct sl_iface *ifc);

/*
 * Change a rule's threshold (per second). With a lease, it holds until
 * lease->expires_ns and lease->fallback after that, switched by the data
 * plane itself (an agent that dies cannot leave a grant in force);
 * without, until changed. Two map writes.
 */
struct sluice_lease;
int sl_dp_set_limit(struct sl_dataplane *dp, const char *rule_name,
		    uint64_t count, const struct sluice_lease *lease);

/* Test builds: the clock the data plane reads. */
void sl_dp_set_test_time(struct sl_dataplane *dp, uint64_t now_ns);

/* The clock the data plane uses (CLOCK_MONOTONIC or the test clock). */
uint64_t sl_dp_now(const struct sl_dataplane *dp);

/*
 * Source entries idle for two intervals are collected in two steps, so
 * that neither the walk of the table nor a long run of deletes holds a
 * lock for long: sl_dp_gc_scan() without the caller's data-plane lock,
 * then sl_dp_gc_collect() with it, once per SL_GC_CHUNK entries until
 * v->next reaches v->n (releasing the lock in between). A rule set
 * applied since the scan ends the collection (a slot may have changed
 * hands; the next scan decides again). The scan returns -errno, collect
 * the number deleted or -errno. sl_dp_gc_sources() does it all.
 */
#define SL_GC_CHUNK 4096

struct sluice_src_key;

struct sl_src_victims {
	struct sluice_src_key *keys;
	size_t n, cap;
	size_t next; /* the first not yet deleted */
	uint64_t rules_gen; /* dp->rules_gen at the scan */
};

int sl_dp_gc_scan(struct sl_dataplane *dp, struct sl_src_victims *v);
int sl_dp_gc_collect(struct sl_dataplane *dp, struct sl_src_victims *v);
void sl_src_victims_free(struct sl_src_victims *v);
/* Returns the number deleted or -errno. */
int sl_dp_gc_sources(struct sl_dataplane *dp);

/* Bytes of kernel memory rule_cpu takes: CPUs x its slots per CPU x
 * the element. */
size_t sl_dp_rule_cpu_bytes(const struct sl_dataplane *dp);

/* Number of rule slots in force (after an adoption, before any apply,
 * this is what the previous agent left). */
size_t sl_dp_slots_in_force(const struct sl_dataplane *dp);

/*
 * Close everything. With a pin directory the data plane stays attached
 * and keeps limiting; without one, closing the links detaches it.
 */
void sl_dp_destroy(struct sl_dataplane *dp);

/*
 * Detach ifname's pinned link and unpin it; when no link is left, remove
 * the pinned maps and the directory (*maps_removed). -ENOENT when no link
 * is pinned for ifname; maps left without any link (a start that failed
 * half-way) are removed then too.
 */
int sl_pins_down(const char *pin_dir, const char *ifname, bool *maps_removed);

/* What a pinned data plane enforces, read from its pins alone. */
struct sl_pins_view {
	int n_ifaces;
	struct {
		char name[IF_NAMESIZE];
		int ifindex; /* 0: the link's interface is gone */
	} ifaces[SL_MAX_IFACES];
	size_t n_rules; /* the rule set in force */
	struct sl_slot_state *rules; /* name and def_hash */
};

/* The links pinned in pin_dir and the rules their maps hold in force,
 * without loading anything (no agent needed). -ENOENT: no link pinned;
 * -ENODATA: links but no rules readable (the interfaces are set). Free
 * with sl_pins_view_free() whatever it returns. */
int sl_pins_view(const char *pin_dir, struct sl_pins_view *v);
void sl_pins_view_free(struct sl_pins_view *v);

/*
 * A start that failed: detach the links this process made and, unless it
 * adopted an earlier agent's data plane, remove the pins, so nothing
 * half-made stays. Then sl_dp_destroy().
 */
void sl_dp_abandon(struct sl_dataplane *dp);

/* The modes by name, in enum order, NULL-terminated (an option's choices). */
extern const char *const sl_xdp_mode_names[];
const char *sl_xdp_mode_str(enum sl_xdp_mode mode);

/* CPU cpu's state of the rule in slot (read without a syscall). */
static inline struct sluice_rule_cpu *
sl_dp_rule_cpu(const struct sl_dataplane *dp, int cpu, uint32_t slot)
{
	return &dp->rule_cpu[sluice_cpu_slot(cpu, slot, dp->rule_cpu_shift)];
}

/* Internal to the library: map fds by role. */
int sl_dp_map_fd(const struct sl_dataplane *dp, const char *name);

/* Internal: wait until no XDP program still runs with what it read
 * before (an RCU grace period). */
void sl_dp_wait_for_readers(void);

#endif
