/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A rule set in the maps: written beside the active set and flipped in as
 * a whole, the old set retired, a rule's threshold changed; and the slots
 * an earlier agent left, read back.
 */
#ifndef SLUICE_APPLY_H
#define SLUICE_APPLY_H

#include "dataplane.h"

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

/*
 * Change a rule's threshold (per second). With a lease, it holds until
 * lease->expires_ns and lease->fallback after that, switched by the data
 * plane itself (an agent that dies cannot leave a grant in force);
 * without, until changed. Two map writes.
 */
struct sluice_lease;
int sl_dp_set_limit(struct sl_dataplane *dp, const char *rule_name,
		    uint64_t count, const struct sluice_lease *lease);

/* The threshold rule_limit holds for dp->rules.rules[idx]. 0 or -errno. */
int sl_dp_get_limit(const struct sl_dataplane *dp, size_t idx,
		    uint64_t *count);

/* After the load of pinned maps: what they hold in force, rebuilt from
 * rule_meta and the tries. */
int sl_dp_adopt(struct sl_dataplane *dp);

/* Before the load: does an earlier agent's slot state wait at the pin
 * paths (libbpf will reuse it)? Then no slot is known to be clean. */
bool sl_dp_slot_state_pinned(const struct sl_dataplane *dp);

#endif
