/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The packet builder of `sluice explain`, the tests and the traffic tools
 * (after katran's PacketBuilder): append headers outermost first, then pkt_finish() pads
 * to a frame size and fixes every length and checksum.
 *
 *	struct pkt p;
 *
 *	pkt_init(&p);
 *	pkt_eth(&p, NULL, NULL);
 *	pkt_vlan(&p, ETH_P_8021Q, 100);
 *	pkt_ipv4(&p, "10.0.0.1", "10.0.0.2");
 *	pkt_udp(&p, 1234, 53);
 *	len = pkt_finish(&p, 64);
 *
 * Each header sets the "next protocol" field of the one before it
 * (ethertype, VLAN inner type, IPv4 protocol, IPv6 next header), so a
 * chain needs no bookkeeping by the caller; pkt_next() sets that field by
 * hand (ARP, or the protocol of a fragment that carries no L4 header).
 * Errors (bad address, overflow) abort: a broken fixture is a test bug,
 * and the traffic tools and explain check their input before they build
 * (binary addresses, at most PKT_MAX bytes).
 */
#ifndef SLUICE_PKT_H
#define SLUICE_PKT_H

#include <netinet/in.h>
#include <linux/if_ether.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PKT_MAX 2048

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

#define PKT_FIN 0x01
#define PKT_SYN 0x02
#define PKT_RST 0x04
#define PKT_PSH 0x08
#define PKT_ACK 0x10

/* IPv4 flags, in the 16 bits they share with the fragment offset */
#define PKT_IP_DF 0x4000
#define PKT_IP_MF 0x2000

struct pkt {
	uint8_t buf[PKT_MAX];
	size_t len;
	/* the pending "next protocol" field: 2 bytes (ethertype) or 1 */
	int next_off;
	int next_size;
	int l3_off;		/* -1 when none */
	int l3_family;		/* 4 or 6 */
	int outer_off;		/* a tunnel's outer IP header; -1 when none */
	int outer_family;
	int l4_off;		/* -1 when none: no checksum to fix */
	uint8_t l4_proto;
};

/* The IPv4 header fields a caller chooses; the TTL is 64, TOS 0. */
struct pkt_ipv4_hdr {
	struct in_addr src, dst;
	uint16_t id;
	uint16_t frag;	/* PKT_IP_DF | PKT_IP_MF | offset (8 bytes) */
	uint8_t optlen;	/* options: a multiple of 4, NOPs then EOL */
};

void pkt_init(struct pkt *p);
/* n zero bytes at the end of the frame */
uint8_t *pkt_put(struct pkt *p, size_t n);
void pkt_bytes(struct pkt *p, const void *data, size_t n);
/* Set the pending next-protocol field (ethertype or IP protocol). */
void pkt_next(struct pkt *p, uint16_t proto);

/* NULL MACs mean 02:00:00:00:00:02 (dst) and 02:00:00:00:00:01 (src). */
void pkt_eth(struct pkt *p, const uint8_t *dst, const uint8_t *src);
/* A tag of type tpid (0x8100, 0x88a8) with VLAN id vid. */
void pkt_vlan(struct pkt *p, uint16_t tpid, uint16_t vid);

void pkt_ipv4_hdr(struct pkt *p, const struct pkt_ipv4_hdr *h);
/* IPv4 with identification 0x1234, optlen bytes of options, fragment
 * offset frag (units of 8 bytes) and the MF flag. */
void pkt_ipv4_ex(struct pkt *p, const char *src, const char *dst,
		 size_t optlen, uint16_t frag, bool mf);
void pkt_ipv4(struct pkt *p, const char *src, const char *dst);

void pkt_ipv6_hdr(struct pkt *p, const struct in6_addr *src,
		  const struct in6_addr *dst);
void pkt_ipv6(struct pkt *p, const char *src, const char *dst);
/*
 * An IPv6 extension header of type (hop-by-hop 0, routing 43, destination
 * options 60) and len bytes (a multiple of 8, at least 8), padded with
 * PadN. A routing header is type 0 with segments left 0, so it is inert.
 */
void pkt_ipv6_ext(struct pkt *p, uint8_t type, size_t len);
/* IPv6 fragment header: offset in units of 8 bytes, M flag. */
void pkt_ipv6_frag(struct pkt *p, uint16_t frag, bool mf);

/*
 * A GRE header (RFC 2890): flags of PKT_GRE_*, key when PKT_GRE_KEY, a
 * zero checksum or sequence number when asked for. The IP header after
 * it sets its protocol type; one after an IP header makes IP-in-IP.
 * Either way the outer IP header's lengths are fixed too.
 */
#define PKT_GRE_CSUM 0x8000
#define PKT_GRE_KEY  0x2000
#define PKT_GRE_SEQ  0x1000
void pkt_gre(struct pkt *p, uint16_t flags, uint32_t key);

/* Sequence 1; acknowledgement 1 when flags has PKT_ACK; window 65535. */
void pkt_tcp(struct pkt *p, uint16_t sport, uint16_t dport, uint8_t flags);
void pkt_udp(struct pkt *p, uint16_t sport, uint16_t dport);
/* ICMP or ICMPv6 (by the L3 family) type/code with echo id and sequence */
void pkt_icmp_ex(struct pkt *p, uint8_t type, uint8_t code, uint16_t id,
		 uint16_t seq);
/* ... with id 0x4242, sequence 1 */
void pkt_icmp(struct pkt *p, uint8_t type, uint8_t code);

/*
 * Pad with zeros to frame_size (0: no padding), then fix the lengths and
 * checksums of IP and L4. Returns the frame length.
 */
size_t pkt_finish(struct pkt *p, size_t frame_size);

/* Checksum over a finished frame's L4 segment: 0 when it is valid. */
uint16_t pkt_verify_l4(const struct pkt *p);

/*
 * For senders that rewrite fields after building: the offset of the L4
 * checksum (-1: none), and the folded sums (not inverted, in host order)
 * that the IPv4 header and L4 checksums cover, their own field as zero.
 */
int pkt_l4_csum_off(const struct pkt *p);
uint16_t pkt_ipv4_sum(const struct pkt *p);
uint16_t pkt_l4_sum(const struct pkt *p);

#endif
