/* SPDX-License-Identifier: GPL-2.0 */
/* The connections of conns rules (conn_table, bpf/conns.h): the sweep
 * that forgets the silent ones, and each rule's count. */
#ifndef SLUICE_CONNS_DP_H
#define SLUICE_CONNS_DP_H

#include <stdint.h>

#include "dataplane.h"

/* Forget the connections idle past their rule's timeout (or a
 * handshake's), and those of rules no longer in force: the agent calls
 * it every second while a conns rule is in force, and once after.
 * 0 or -errno. */
int sl_dp_sweep_conns(struct sl_dataplane *dp);

/* The count of slot's conns rule: its connections open now and, per
 * source, its sources' entries. 0 or -errno. */
int sl_dp_conns_count(const struct sl_dataplane *dp, uint32_t slot,
		      struct sluice_conn_count *n);

#endif
