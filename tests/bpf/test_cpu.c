// SPDX-License-Identifier: GPL-2.0
/*
 * Each CPU's rule state: packets judged on a CPU are counted in that CPU's
 * element of rule_cpu (cpu x SLUICE_MAX_RULE_SLOTS + slot), and the stats
 * add the CPUs up. Needs CPUs 0 and 1.
 */
#include <sched.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "harness.h"
#include "sluice.skel.h"

static bool run_on_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return !sched_setaffinity(0, sizeof(set), &set) &&
	       sched_getcpu() == cpu;
}

/* What CPU cpu passed for slot, read with the syscall at the element the
 * program should use (bpf/maps.h); UINT64_MAX when the read fails. */
static uint64_t cpu_passed(const struct sl_dataplane *d, int cpu,
			   uint32_t slot)
{
	uint32_t key = cpu * SLUICE_MAX_RULE_SLOTS + slot;
	struct sluice_rule_cpu rc;

	if (bpf_map_lookup_elem(bpf_map__fd(d->skel->maps.rule_cpu), &key, &rc))
		return UINT64_MAX;
	return rc.passed_pkts;
}

/* Packets judged on a CPU are counted in that CPU's element of rule_cpu,
 * cpu x 8192 + slot, and the stats add the CPUs up. */
static void test_cpu_elements(struct sl_dataplane *dp)
{
	int home = sched_getcpu();
	struct pkt p = udp_to(7100, NULL, 0);
	struct sl_rule_stats st;
	uint64_t n0, n1;
	uint32_t slot;
	long a0, a1;

	next_scenario();
	if (dp->n_cpus < 2 || !run_on_cpu(1)) {
		tap_skip("needs CPUs 0 and 1", "each CPU's rule state");
		return;
	}
	if (!tap(apply_one(dp, "cpus", 7100, "pps", 1000000, NULL) == 0,
		 "cpu elements: rule applies"))
		goto out;
	slot = slot_of(dp, "cpus");
	a1 = burst(dp, &p, 5);
	a0 = run_on_cpu(0) ? burst(dp, &p, 3) : -1;
	n0 = cpu_passed(dp, 0, slot);
	n1 = cpu_passed(dp, 1, slot);
	st = rule_stats(dp, "cpus");
	tap(a0 == 3 && a1 == 5 && n0 == 3 && n1 == 5 && st.passed_pkts == 8,
	    "cpu elements: 3 packets on CPU 0 and 5 on CPU 1 land in elements "
	    "0 x 8192 + slot and 1 x 8192 + slot (%llu, %llu; passed %ld, %ld) "
	    "and the stats add them (%llu)",
	    (unsigned long long)n0, (unsigned long long)n1, a0, a1,
	    (unsigned long long)st.passed_pkts);
out:
	run_on_cpu(home >= 0 ? home : 0);
}

int main(void)
{
	struct sl_dataplane dp;

	if (h_begin(&dp))
		return h_end();
	test_cpu_elements(&dp);
	h_unload(&dp);
	return h_end();
}
