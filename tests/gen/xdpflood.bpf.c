// SPDX-License-Identifier: GPL-2.0
/* Run by BPF_PROG_TEST_RUN in live-frames mode: every run sends the test
 * frame out of target_ifindex. With rw.sources > 1 it first writes the
 * next source address and the checksums that cover it.
 *
 * Live frames are pages recycled without being copied again, so what a
 * receiver writes into one shows up in later frames. The stack does that
 * when it pops a VLAN tag (it moves the MAC addresses over the tag), so
 * tagged frames get their Ethernet header written back on every run.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "frame_rw.h"

const volatile __u32 target_ifindex;
const volatile struct frame_rw rw = {.sources = 1};
const volatile __u8 l2_len; /* 0: untagged, nothing to restore */
const volatile __u8 l2_hdr[FRAME_MAX_L2_LEN];

/* Only our own test_run calls run this program, one at a time in this
 * process, so a plain global is a race-free counter.
 */
__u32 next_source;

static __always_inline int put_csum(void *data, void *end, __u16 off,
				    __u16 csum)
{
	__u16 *p = data + off;

	if ((void *) (p + 1) > end)
		return -1;
	*p = csum;
	return 0;
}

static __always_inline int restore_l2(struct xdp_md *ctx)
{
	__u8 *p = (void *) (long) ctx->data;
	int i;

	if ((void *) (p + FRAME_MAX_L2_LEN) > (void *) (long) ctx->data_end)
		return -1;
#pragma unroll
	for (i = 0; i < FRAME_MAX_L2_LEN; i++)
		if (i < l2_len)
			p[i] = l2_hdr[i];
	return 0;
}

static __always_inline int rewrite_source(struct xdp_md *ctx)
{
	void *data = (void *) (long) ctx->data;
	void *end = (void *) (long) ctx->data_end;
	__u16 *src = data + rw.src_off;
	__u32 addr;
	__u16 w[2], c;

	if ((void *) (src + 2) > end)
		return -1;
	addr = bpf_htonl(rw.src_first + next_source);
	if (++next_source == rw.sources)
		next_source = 0;
	__builtin_memcpy(w, &addr, 4);
	src[0] = w[0];
	src[1] = w[1];
	if (rw.ip_csum_off && put_csum(data, end, rw.ip_csum_off,
				       frame_rw_csum(rw.ip_csum_base, w)))
		return -1;
	if (rw.l4_csum_off) {
		c = frame_rw_csum(rw.l4_csum_base, w);
		if (rw.l4_udp && !c)
			c = 0xffff;
		if (put_csum(data, end, rw.l4_csum_off, c))
			return -1;
	}
	return 0;
}

SEC("xdp")
int xdpflood(struct xdp_md *ctx)
{
	if (l2_len && restore_l2(ctx))
		return XDP_ABORTED;
	if (rw.sources > 1 && rewrite_source(ctx))
		return XDP_ABORTED;
	return bpf_redirect(target_ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
