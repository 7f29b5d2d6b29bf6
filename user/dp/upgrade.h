/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to the data plane: an upgrade across a change of the pinned
 * layout (docs/operations.md, "Upgrading"). The new program is loaded
 * beside the old one with maps of its own where a map's shape changed and
 * the old map where it did not; the changed maps' state is carried, every
 * pinned link is switched to the new program at once (BPF_LINK_UPDATE),
 * and the old pins go. Flat layouts (pins.h) are upgraded the same way.
 */
#ifndef SLUICE_UPGRADE_H
#define SLUICE_UPGRADE_H

#include "dataplane.h"
#include "layout.h"
#include "pins.h"

/* Before the load: the maps of next whose shape did not change are the
 * running ones. */
int sl_upgrade_prepare(const struct sl_layout *next, struct sl_pins *p);

/*
 * After the load: carry the changed maps' state, switch every link to the
 * new program, and once the old one has stopped, add what it counted
 * meanwhile and remove its pins. Nothing has changed for the running data
 * plane when this fails.
 */
int sl_upgrade_finish(struct sl_dataplane *dp, const struct sl_layout *next,
		      struct sl_pins *p);

#endif
