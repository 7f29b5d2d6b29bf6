/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data plane from user space, as the programs see it: load the XDP
 * object, write a rule set into its maps (atomically, as a whole, apply.h),
 * attach it to interfaces with bpf_link (attach.h), collect idle sources
 * (sources.h), read what is pinned (pins.h). This header gathers them; the
 * parts of user/dp include only the ones they use.
 */
#ifndef SLUICE_LOADER_H
#define SLUICE_LOADER_H

#include "apply.h"
#include "attach.h"
#include "conns.h"
#include "dataplane.h"
#include "pins.h"
#include "rule_cpu.h"
#include "sources.h"

int sl_dp_load(struct sl_dataplane *dp, const struct sl_dp_opts *opts);

/*
 * Close everything. With a pin directory the data plane stays attached
 * and keeps limiting; without one, closing the links detaches it.
 */
void sl_dp_destroy(struct sl_dataplane *dp);

/*
 * A start that failed: detach the links this process made and, unless it
 * adopted an earlier agent's data plane, remove the pins, so nothing
 * half-made stays. Then sl_dp_destroy().
 */
void sl_dp_abandon(struct sl_dataplane *dp);

#endif
