// SPDX-License-Identifier: GPL-2.0
/*
 * Rule set swaps: which rules keep their slot (counters, window) and which
 * start at zero, slots zeroed after the grace period (sl_dp_retire) and
 * taken again, and an agent that adopts pinned maps with a slot an earlier
 * agent left unzeroed.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "harness.h"
#include "sluice.skel.h"

/* ---- rule set swaps ---------------------------------------------------- */

#define LIM(name, port, count)                                             \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"udp\",\"dport\":"    \
	#port "},\"grade\":\"pps\",\"count\":" #count "}"

static void test_swap(struct sl_dataplane *dp)
{
	struct pkt pk = udp_to(7200, NULL, 0), pc = udp_to(7201, NULL, 0);
	struct pkt pn = udp_to(7202, NULL, 0);
	struct sl_rule_stats k, c, n;
	long a;

	next_scenario();
	if (!tap(apply(dp, RULES(LIM("keep", 7200, 5) ","
				 LIM("chg", 7201, 5))) == 0,
		 "swap: set A applies"))
		return;
	burst(dp, &pk, 3);
	burst(dp, &pc, 3);
	if (!tap(apply(dp, RULES(LIM("new", 7202, 5) ","
				 LIM("keep", 7200, 5) ","
				 LIM("chg", 7201, 6))) == 0,
		 "swap: A plus a rule, one rule changed, applies"))
		return;
	k = rule_stats(dp, "keep");
	c = rule_stats(dp, "chg");
	n = rule_stats(dp, "new");
	tap(k.passed_pkts == 3 && k.passed_bytes == 3 * pk.len,
	    "swap: the unchanged rule keeps its counters (%llu passed)",
	    (unsigned long long)k.passed_pkts);
	tap(c.passed_pkts == 0 && n.passed_pkts == 0,
	    "swap: the changed and the new rule start at zero (%llu, %llu)",
	    (unsigned long long)c.passed_pkts,
	    (unsigned long long)n.passed_pkts);
	a = burst(dp, &pk, 3);
	k = rule_stats(dp, "keep");
	tap(a == 2 && k.passed_pkts == 5 && k.blocked_pkts == 1,
	    "swap: the unchanged rule's window continues: 2 of 3 more "
	    "admitted (%ld; %llu/%llu)", a, (unsigned long long)k.passed_pkts,
	    (unsigned long long)k.blocked_pkts);
	a = burst(dp, &pc, 8);
	tap(a == 6, "swap: the changed rule has a fresh window of 6 (%ld)", a);
	a = burst(dp, &pn, 8);
	tap(a == 5, "swap: the new rule admits 5 (%ld)", a);

	/* a new position and a priority are not a new definition */
	if (!tap(apply(dp, RULES(LIM("chg", 7201, 6) ","
			     "{\"name\":\"keep\",\"match\":{\"proto\":\"udp\","
			     "\"dport\":7200},\"grade\":\"pps\",\"count\":5,"
			     "\"priority\":9}")) == 0,
		 "swap: reorder, add a priority, drop a rule"))
		return;
	k = rule_stats(dp, "keep");
	c = rule_stats(dp, "chg");
	tap(k.passed_pkts == 5 && k.blocked_pkts == 1 && c.passed_pkts == 6,
	    "swap: counters survive reordering and a priority (%llu/%llu, "
	    "%llu)", (unsigned long long)k.passed_pkts,
	    (unsigned long long)k.blocked_pkts,
	    (unsigned long long)c.passed_pkts);
	a = burst(dp, &pn, 1);
	tap(a == 1 && rule_index(dp, "new") < 0,
	    "swap: the dropped rule's port is unmatched and passes");
	if (!tap(apply(dp, RULES(LIM("keep", 7200, 5) ","
				 LIM("new", 7202, 5))) == 0,
		 "swap: re-adding a dropped rule applies"))
		return;
	n = rule_stats(dp, "new");
	a = burst(dp, &pn, 8);
	tap(n.passed_pkts == 0 && a == 5,
	    "swap: a re-added rule starts fresh (%llu before, %ld admitted)",
	    (unsigned long long)n.passed_pkts, a);
}

/* ---- slot reuse ------------------------------------------------------- */

static bool value_zero(struct bpf_map *map, uint32_t key, size_t size)
{
	unsigned char *v = malloc(size);
	bool zero = v && !bpf_map_lookup_elem(bpf_map__fd(map), &key, v);

	for (size_t i = 0; zero && i < size; i++)
		zero = !v[i];
	free(v);
	return zero;
}

/* Every byte of a slot's state that packets or the source collector write
 * (budget, every CPU's counters, source counts) is zero, read with the
 * syscall rather than the loader's mmap. */
static bool slot_state_zero(const struct sl_dataplane *d, uint32_t slot)
{
	bool zero =
		value_zero(d->skel->maps.rule_budget, slot,
			   sizeof(struct sluice_budget)) &&
		value_zero(d->skel->maps.rule_src_added, slot,
			   sizeof(uint64_t)) &&
		value_zero(d->skel->maps.rule_src_freed, slot,
			   sizeof(uint64_t));

	for (int c = 0; c < d->n_cpus && zero; c++)
		zero = value_zero(d->skel->maps.rule_cpu,
				  sluice_cpu_slot(c, slot, d->rule_cpu_shift),
				  sizeof(struct sluice_rule_cpu));
	return zero;
}

/*
 * A slot that leaves the set is zeroed after the grace period
 * (sl_dp_retire), not when it is next used: the rule that reuses it must
 * still start at zero, with a whole budget.
 */
static void test_slot_reuse(struct sl_dataplane *dp)
{
	static const char *const three[] = { "10.0.0.1", "10.0.0.2",
					     "10.0.0.3" };
	struct pkt p = udp_to(7300, NULL, 0);
	struct sl_rule_stats st;
	uint32_t slot;
	long got[3], a;
	int err;

	/* no slot in force: each new rule takes the lowest free one */
	next_scenario();
	apply(dp, "{\"rules\":[]}");
	if (!tap(apply_one(dp, "old", 7300, "pps", 5, NULL) == 0,
		 "slot reuse: a rule applies"))
		return;
	slot = slot_of(dp, "old");
	a = burst(dp, &p, 8);
	tap(a == 5 && !slot_state_zero(dp, slot),
	    "slot reuse: the rule admits 5 of 8 (%ld) and its slot %u holds "
	    "state", a, slot);
	if (!tap(apply_one(dp, "other", 7301, "pps", 5, NULL) == 0,
		 "slot reuse: a set without the rule applies"))
		return;
	sl_dp_retire(dp);
	tap(slot_state_zero(dp, slot),
	    "slot reuse: after the grace period the left slot is zero");
	/* same interval: a budget left over would admit nothing */
	err = apply_one(dp, "new", 7300, "pps", 5, NULL);
	if (!tap(!err && slot_of(dp, "new") == slot,
		 "slot reuse: a new rule takes the left slot %u (%u)", slot,
		 slot_of(dp, "new")))
		return;
	st = rule_stats(dp, "new");
	a = burst(dp, &p, 8);
	tap(st.passed_pkts == 0 && st.blocked_pkts == 0 && a == 5,
	    "slot reuse: the new rule starts at 0/0 (%llu/%llu) and admits 5 "
	    "of 8 in the same interval (%ld)",
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts, a);

	/* per_source: the source counts start at zero too */
	next_scenario();
	apply(dp, "{\"rules\":[]}");
	if (!tap(apply_one(dp, "old-ps", 7302, "pps", 3,
			   "\"per_source\":{\"max_sources\":10}") == 0,
		 "slot reuse: a per_source rule applies"))
		return;
	slot = slot_of(dp, "old-ps");
	sources_round(dp, three, 3, 5, 4, 7302, got);
	st = rule_stats(dp, "old-ps");
	tap(all_equal(got, 3, 3) && st.sources == 3,
	    "slot reuse: 3 sources admitted 3 each (%ld %ld %ld), 3 live "
	    "(%llu)", got[0], got[1], got[2], (unsigned long long)st.sources);
	if (!tap(apply_one(dp, "other", 7301, "pps", 5, NULL) == 0,
		 "slot reuse: a set without the per_source rule applies"))
		return;
	sl_dp_retire(dp);
	tap(slot_state_zero(dp, slot),
	    "slot reuse: after the grace period the per_source slot is zero "
	    "(source counts included)");
	err = apply_one(dp, "new-ps", 7302, "pps", 3,
			"\"per_source\":{\"max_sources\":10}");
	if (!tap(!err && slot_of(dp, "new-ps") == slot,
		 "slot reuse: a new per_source rule takes the left slot %u "
		 "(%u)", slot, slot_of(dp, "new-ps")))
		return;
	st = rule_stats(dp, "new-ps");
	tap(st.sources == 0 && st.passed_pkts == 0,
	    "slot reuse: the new per_source rule starts with 0 sources "
	    "(%llu) and 0 passed (%llu)", (unsigned long long)st.sources,
	    (unsigned long long)st.passed_pkts);
	sources_round(dp, three, 3, 5, 4, 7302, got);
	tap(all_equal(got, 3, 3),
	    "slot reuse: its sources are admitted 3 each (%ld %ld %ld)",
	    got[0], got[1], got[2]);
}

/*
 * An agent that adopts pinned maps does not know which slots an earlier
 * one left unzeroed (it may have died between a flip and sl_dp_retire):
 * a rule that takes such a slot must still start at zero.
 */
static void test_adopt_dirty_slot(void)
{
	struct sl_dp_opts o = { .test_clock = true };
	struct pkt p = udp_to(7400, NULL, 0);
	struct sl_dataplane d;
	char dir[64], pins[96];
	struct sl_rule_stats st;
	int err, status;
	uint32_t slot;
	pid_t pid;
	long a;

	err = h_private_bpffs(dir, sizeof(dir));
	if (err) {
		tap_skip(strerror(-err), "adopt: a private bpffs for the pins");
		return;
	}
	snprintf(pins, sizeof(pins), "%s/pins", dir);
	o.pin_dir = pins;
	next_scenario();
	pid = fork();
	if (pid == 0) {
		/* the earlier agent: its rule takes traffic and leaves the
		 * set, and it dies before the grace period is over */
		if (sl_dp_load(&d, &o))
			_exit(1);
		sl_dp_set_test_time(&d, test_time());
		if (apply(&d, RULES(LIM("gone", 7400, 5))) ||
		    burst(&d, &p, 8) != 5 ||
		    apply(&d, RULES(LIM("stays", 7401, 5))))
			_exit(1);
		_exit(0);
	}
	if (!tap(pid > 0 && waitpid(pid, &status, 0) == pid &&
			 WIFEXITED(status) && !WEXITSTATUS(status),
		 "adopt: an agent pins its maps, runs a rule, drops it and "
		 "dies"))
		goto out;
	err = sl_dp_load(&d, &o);
	if (!tap(!err && d.adopted && sl_dp_slots_in_force(&d) == 1,
		 "adopt: the next agent adopts the pins, 1 slot in force (%d)",
		 err))
		goto out;
	sl_dp_set_test_time(&d, test_time());
	/* the left slot is the lowest free one: the new rule takes it */
	for (slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++)
		if (!d.slot_state[slot].in_force)
			break;
	tap(!slot_state_zero(&d, slot),
	    "adopt: the left slot %u still holds the dead agent's state", slot);
	err = apply(&d, RULES(LIM("fresh", 7400, 5)));
	if (tap(!err && slot_of(&d, "fresh") == slot,
		"adopt: a new rule takes that slot (%u)",
		slot_of(&d, "fresh"))) {
		st = rule_stats(&d, "fresh");
		a = burst(&d, &p, 8);
		tap(st.passed_pkts == 0 && st.blocked_pkts == 0 && a == 5,
		    "adopt: the new rule starts at 0/0 (%llu/%llu) and admits "
		    "5 of 8 in the same interval (%ld)",
		    (unsigned long long)st.passed_pkts,
		    (unsigned long long)st.blocked_pkts, a);
	}
	sl_dp_destroy(&d);
out:
	umount2(dir, MNT_DETACH);
	rmdir(dir);
}

int main(void)
{
	struct sl_dataplane dp;

	if (h_begin(&dp))
		return h_end();
	test_swap(&dp);
	test_slot_reuse(&dp);
	test_adopt_dirty_slot();
	h_unload(&dp);
	return h_end();
}
