// SPDX-License-Identifier: GPL-2.0
/* Minimal XDP program for vmtest/smoke.sh: counts the frames it sees and
 * passes them. Uses only what every supported kernel has (array map,
 * atomic add whose result is unused, so no BPF_FETCH). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} smoke_pkts SEC(".maps");

SEC("xdp")
int smoke_xdp(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&smoke_pkts, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
