// SPDX-License-Identifier: GPL-2.0
/* Per-packet source rewrite, shared by the frame builder (user space) and
 * the xdpflood program (BPF), so both produce the same bytes.
 *
 * Source N of a frame is src_first + N in its last four address bytes.
 * Each checksum that covers the source is kept as a folded one's-complement
 * base sum over everything else (checksum field zero), so the new checksum
 * is ~(base + the two new 16-bit words): no read of the old frame bytes,
 * which matters because live frames are recycled with whatever a receiver
 * left in them.
 */
#ifndef SLUICE_GEN_FRAME_RW_H
#define SLUICE_GEN_FRAME_RW_H

#include <linux/types.h>

#define FRAME_MAX_TAGS	 2
#define FRAME_MAX_L2_LEN (14 + 4 * FRAME_MAX_TAGS)

struct frame_rw {
	__u32 src_first;   /* last 4 source bytes of source 0, host order */
	__u32 sources;	   /* number of consecutive sources, >= 1 */
	__u16 src_off;	   /* offset of those 4 bytes in the frame */
	__u16 ip_csum_off; /* IPv4 header checksum; 0: none (IPv6) */
	__u16 l4_csum_off; /* L4 checksum if it covers the source; 0: none */
	__u16 ip_csum_base;
	__u16 l4_csum_base;
	__u8 l4_udp; /* UDP sends a computed 0 as 0xffff */
	__u8 pad;
};

static inline __u16 frame_rw_csum(__u16 base, const __u16 w[2])
{
	__u32 sum = (__u32) base + w[0] + w[1];

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16) ~sum;
}

#endif
