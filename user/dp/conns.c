// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "conns.h"
#include "sluice.skel.h"

static bool any_conns(const struct sl_ruleset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->rules[i].grade == SL_GRADE_CONNS)
			return true;
	return false;
}

int sl_dp_sweep_conns(struct sl_dataplane *dp)
{
	/* a frame for the program's context: it reads only the maps */
	unsigned char frame[64] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame,
		    .data_size_in = sizeof(frame), .repeat = 1);
	bool now = any_conns(&dp->rules);

	/* once more after the last conns rule left: its entries go */
	if (!now && !dp->conns_swept)
		return 0;
	dp->conns_swept = now;
	if (bpf_prog_test_run_opts(
		    bpf_program__fd(dp->skel->progs.sluice_conns_sweep), &o))
		return -errno;
	return 0;
}

int sl_dp_conns_count(const struct sl_dataplane *dp, uint32_t slot,
		      struct sluice_conn_count *n)
{
	if (bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.conn_rule), &slot,
				n))
		return -errno;
	/* a close that raced the sweep may sit below 0 for an instant */
	if ((int64_t)n->open < 0)
		n->open = 0;
	return 0;
}
