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
