// SPDX-License-Identifier: GPL-2.0
/* A receiver that does nothing: passes (or drops) every frame. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u8 drop;

SEC("xdp")
int xdppass(struct xdp_md *ctx)
{
	return drop ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
