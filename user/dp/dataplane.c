// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dataplane.h"
#include "sluice.skel.h"
#include "util.h"

size_t sl_dp_slots_in_force(const struct sl_dataplane *dp)
{
	size_t n = 0;

	for (uint32_t i = 0; i < SLUICE_MAX_RULE_SLOTS; i++)
		n += dp->slot_state[i].in_force;
	return n;
}

/* BPF_F_XDP_HAS_FRAGS came with bpf_xdp_get_buff_len(), which
 * sluice_xdp_frags calls. */
bool sl_dp_frags_supported(void)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_XDP,
				       BPF_FUNC_xdp_get_buff_len, NULL) == 1;
}

/* A second copy of the judge: verified only when an interface may need
 * it (in a TCG guest it made every load half as long again). */
void sl_dp_autoload(const struct sl_dataplane *dp, struct sluice_bpf *skel)
{
	bpf_program__set_autoload(skel->progs.sluice_xdp_frags, dp->frags);
}

/* XDP runs in an RCU read-side section and MEMBARRIER_CMD_GLOBAL waits
 * for a grace period. */
void sl_dp_wait_for_readers(void)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
		usleep(10000);
}

void sl_dp_set_test_time(struct sl_dataplane *dp, uint64_t now_ns)
{
	dp->skel->bss->test_now_ns = now_ns;
}

uint64_t sl_dp_now(const struct sl_dataplane *dp)
{
	if (dp->skel->rodata->test_clock)
		return dp->skel->bss->test_now_ns;
	return sl_now_ns();
}
