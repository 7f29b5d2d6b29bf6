/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rule_cpu, each CPU's state of each rule slot, mmapped: its class (2^shift
 * slots per CPU), and growing it under a running data plane.
 */
#ifndef SLUICE_RULE_CPU_H
#define SLUICE_RULE_CPU_H

#include "dataplane.h"
#include "pins.h"

/* Bytes of kernel memory rule_cpu takes: CPUs x its slots per CPU x
 * the element. */
size_t sl_dp_rule_cpu_bytes(const struct sl_dataplane *dp);

/* Before the load: skel's rule_cpu holds 2^shift slots per CPU. */
int sl_rule_cpu_size(struct sl_dataplane *dp, struct sluice_bpf *skel,
		     uint32_t shift);
/* The class the running data plane (pins) needs. */
uint32_t sl_rule_cpu_pinned_shift(const struct sl_dataplane *dp,
				  const struct sl_pins *pins, bool upgrading);
int sl_rule_cpu_map(struct sl_dataplane *dp);
void sl_rule_cpu_unmap(struct sl_dataplane *dp);

/*
 * Give rule_cpu the smallest class that holds slots 0 .. slots - 1: a new
 * program beside the running one takes the links over (0 or -errno; the
 * running one stays on failure).
 */
int sl_rule_cpu_grow(struct sl_dataplane *dp, size_t slots);

/* The counters an old element of rule_cpu gained from a to b, added to
 * rc with atomic adds (made on rc's CPU: see catch_up_counters() in
 * upgrade.c). */
struct sluice_rule_cpu;
void sl_rule_cpu_add_since(struct sluice_rule_cpu *rc,
			   const struct sluice_rule_cpu *a,
			   const struct sluice_rule_cpu *b);

#endif
