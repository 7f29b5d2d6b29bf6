// SPDX-License-Identifier: GPL-2.0
/* Layout shared by rxcount.bpf.c and rxcount.c. */
#ifndef SLUICE_GEN_RXCOUNT_H
#define SLUICE_GEN_RXCOUNT_H

#include <linux/types.h>

/* Distinct sources remembered with --distinct-src; an LRU beyond that. */
#define RXCOUNT_MAX_SOURCES 65536
/* Millisecond bins of packet arrival times: 65 s, past the 60 s cap. */
#define RXCOUNT_MAX_MS 65536

struct rx_count {
	__u64 packets;
	__u64 bytes;
};

/* An IPv6 address, or an IPv4 one as ::ffff:a.b.c.d. */
struct rx_addr {
	__u8 b[16];
};

#endif
