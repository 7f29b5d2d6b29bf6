/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data plane on interfaces: sluice_xdp (or sluice_xdp_frags, for
 * frames in several buffers) through a (pinned) bpf_link, and
 * sluice_egress as a tc filter on clsact egress while a breaker needs
 * it.
 */
#ifndef SLUICE_ATTACH_H
#define SLUICE_ATTACH_H

#include "dataplane.h"

int sl_dp_attach(struct sl_dataplane *dp, const char *ifname,
		 enum sl_xdp_mode mode);

/*
 * Point an XDP link at skel's program: sluice_xdp, or where the driver
 * refuses it and dp loaded it, sluice_xdp_frags (*frags says which).
 * 0 or -errno (sluice_xdp's).
 */
int sl_dp_link_update(const struct sl_dataplane *dp,
		      const struct sluice_bpf *skel, int link_fd, bool *frags);

/* An MTU above Ethernet's 1500: a driver may then need sluice_xdp_frags
 * (load it: sl_dp_opts.frags). */
bool sl_dp_iface_jumbo(const char *ifname);

/* The interface's link still points at it (0 once it went away). */
bool sl_dp_iface_attached(const struct sl_iface *ifc);

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
/* Our filter on ifc's clsact egress, replacing an earlier agent's. */
int sl_tc_attach(struct sl_dataplane *dp, struct sl_iface *ifc);
/* Detach ifindex's sluice_egress filter; -ENOENT when there is none. */
int sl_tc_detach(int ifindex);

/*
 * Detach ifname's pinned link and unpin it; when no link is left, remove
 * the pinned maps and the directory (*maps_removed). -ENOENT when no link
 * is pinned for ifname; maps left without any link (a start that failed
 * half-way) are removed then too.
 */
int sl_pins_down(const char *pin_dir, const char *ifname, bool *maps_removed);

/* The modes by name, in enum order, NULL-terminated (an option's choices). */
extern const char *const sl_xdp_mode_names[];
const char *sl_xdp_mode_str(enum sl_xdp_mode mode);

#endif
