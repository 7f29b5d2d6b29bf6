// SPDX-License-Identifier: GPL-2.0
/* A receiver that does nothing: passes (or drops) every frame. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u8 drop;
/* --count: one per-CPU increment per frame, the baseline of harnesses
 * that count what they drop */
const volatile __u8 count;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

SEC("xdp")
int xdppass(struct xdp_md *ctx)
{
	if (count) {
		__u32 k = 0;
		__u64 *n = bpf_map_lookup_elem(&seen, &k);

		if (n)
			(*n)++;
	}
	return drop ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
