/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Header parsing: Ethernet, up to two VLAN tags, IPv4 (options, fragments),
 * IPv6 with a bounded walk over extension headers, TCP/UDP/ICMP/ICMPv6.
 * Every read is bounds-checked against data_end; a header cut short or
 * inconsistent yields a SLUICE_ST_MALFORMED_* code (docs/architecture.md).
 */
#ifndef SLUICE_PARSE_H
#define SLUICE_PARSE_H

#include <stddef.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include "sluice_abi.h"

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

#define IP_MF	  0x2000
#define IP_OFFSET 0x1FFF

#define PARSE_OK     0
#define PARSE_NOT_IP (-1)

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

struct ipv6_opt {
	__u8 nexthdr;
	__u8 hdrlen;
};

struct ipv6_frag {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off;
	__be32 id;
};

/* Words, not bytes: the fast path then needs no zero-extensions. */
struct sluice_pkt {
	__u32 len;		/* frame length, what bps counts */
	__u32 family;		/* 4 or 6 */
	/* sluice_port_key(): family, protocol slot and dport (0 when
	 * there is no L4 header) in one word, computed where the parse
	 * knows them as constants */
	__u32 port_key;
	__u32 vlan;		/* innermost VID; 0: untagged, priority tag */
	const __u8 *saddr;	/* into the packet, bounds already checked */
	const __u8 *daddr;
};

/* L4 header at pos for protocol proto; pos may be past data_end. */
static __always_inline int parse_l4(struct sluice_pkt *p, void *pos,
				    void *data_end, __u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP: {
		struct tcphdr *th = pos;

		if ((void *)(th + 1) > data_end)
			return SLUICE_ST_MALFORMED_L4;
		p->port_key = sluice_port_key(p->family,
					      th->syn && !th->ack ?
						      SLUICE_SLOT_TCP_SYN :
						      SLUICE_SLOT_TCP,
					      bpf_ntohs(th->dest));
		return PARSE_OK;
	}
	case IPPROTO_UDP: {
		struct udphdr *uh = pos;

		if ((void *)(uh + 1) > data_end)
			return SLUICE_ST_MALFORMED_L4;
		p->port_key = sluice_port_key(p->family, SLUICE_SLOT_UDP,
					      bpf_ntohs(uh->dest));
		return PARSE_OK;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		/* ICMP's number in IPv6 (or ICMPv6's in IPv4) is some
		 * other protocol: not what an icmp (icmpv6) rule means */
		if ((proto == IPPROTO_ICMP) != (p->family == 4)) {
			p->port_key = sluice_port_key(p->family,
						      SLUICE_SLOT_OTHER, 0);
			return PARSE_OK;
		}
		/* type, code, checksum and the 4-byte rest of header */
		if (pos + 8 > data_end)
			return SLUICE_ST_MALFORMED_L4;
		p->port_key = sluice_port_key(p->family,
					      proto == IPPROTO_ICMP ?
						      SLUICE_SLOT_ICMP :
						      SLUICE_SLOT_ICMPV6,
					      0);
		return PARSE_OK;
	default:
		p->port_key = sluice_port_key(p->family, SLUICE_SLOT_OTHER, 0);
		return PARSE_OK;
	}
}

/* Slot of a non-first fragment: its protocol, but no port (dport 0). */
static __always_inline __u8 fragment_slot(__u8 proto, __u8 family)
{
	switch (proto) {
	case IPPROTO_TCP:
		return SLUICE_SLOT_TCP;
	case IPPROTO_UDP:
		return SLUICE_SLOT_UDP;
	case IPPROTO_ICMP:
		return family == 4 ? SLUICE_SLOT_ICMP : SLUICE_SLOT_OTHER;
	case IPPROTO_ICMPV6:
		return family == 6 ? SLUICE_SLOT_ICMPV6 : SLUICE_SLOT_OTHER;
	default:
		return SLUICE_SLOT_OTHER;
	}
}

static __always_inline int parse_ipv4(struct sluice_pkt *p, void *pos,
				      void *data_end)
{
	struct iphdr *iph = pos;
	__u32 hlen, vihl;

	if ((void *)(iph + 1) > data_end)
		return SLUICE_ST_MALFORMED_IP4;
	/* version 4 and a header length of 5 to 15 words, in one test */
	vihl = *(const __u8 *)iph;
	if ((__u8)(vihl - 0x45) > 0x4f - 0x45)
		return SLUICE_ST_MALFORMED_IP4;
	hlen = (vihl & 0xf) * 4;
	if (pos + hlen > data_end)
		return SLUICE_ST_MALFORMED_IP4;
	p->family = 4;
	p->saddr = (const __u8 *)&iph->saddr;
	p->daddr = (const __u8 *)&iph->daddr;
	if (iph->frag_off & bpf_htons(IP_OFFSET)) {
		p->port_key = sluice_port_key(4, fragment_slot(iph->protocol, 4),
					      0);
		return SLUICE_ST_FRAGMENTS;
	}
	return parse_l4(p, pos + hlen, data_end, iph->protocol);
}

static __always_inline int parse_ipv6(struct sluice_pkt *p, void *pos,
				      void *data_end)
{
	struct ipv6hdr *ip6h = pos;
	__u8 nexthdr;
	int i;

	if ((void *)(ip6h + 1) > data_end)
		return SLUICE_ST_MALFORMED_IP6;
	if (ip6h->version != 6)
		return SLUICE_ST_MALFORMED_IP6;
	p->family = 6;
	p->saddr = ip6h->saddr.in6_u.u6_addr8;
	p->daddr = ip6h->daddr.in6_u.u6_addr8;
	nexthdr = ip6h->nexthdr;
	pos = ip6h + 1;

	/* one pass per extension header, plus one to reach the L4 header */
	for (i = 0; i <= SLUICE_MAX_IPV6_EXT; i++) {
		switch (nexthdr) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS: {
			struct ipv6_opt *opt = pos;

			if ((void *)(opt + 1) > data_end)
				return SLUICE_ST_MALFORMED_IP6;
			nexthdr = opt->nexthdr;
			pos += (opt->hdrlen + 1) * 8;
			/* cut inside this header: an IPv6 error, not L4 */
			if (pos > data_end)
				return SLUICE_ST_MALFORMED_IP6;
			break;
		}
		case IPPROTO_FRAGMENT: {
			struct ipv6_frag *fh = pos;

			if ((void *)(fh + 1) > data_end)
				return SLUICE_ST_MALFORMED_IP6;
			nexthdr = fh->nexthdr;
			if (fh->frag_off & bpf_htons(0xFFF8)) {
				p->port_key = sluice_port_key(
					6, fragment_slot(nexthdr, 6), 0);
				return SLUICE_ST_FRAGMENTS;
			}
			pos = fh + 1;
			break;
		}
		default:
			return parse_l4(p, pos, data_end, nexthdr);
		}
	}
	/* more extension headers than we walk: judged as malformed */
	return SLUICE_ST_MALFORMED_IP6;
}

static __always_inline int parse_packet(struct sluice_pkt *p, void *data,
					void *data_end)
{
	struct ethhdr *eth = data;
	void *pos = eth + 1;
	__be16 proto;
	int i;

	p->len = data_end - data;
	/* set on every path, so that no reader sees them uninitialized */
	p->family = 0;
	p->port_key = 0;
	p->vlan = 0;
	if (pos > data_end)
		return SLUICE_ST_MALFORMED_ETH;
	/* one 16-bit load: struct ethhdr is packed, so its field is read
	 * a byte at a time */
	proto = ((const __be16 *)data)[offsetof(struct ethhdr, h_proto) / 2];

#pragma unroll
	for (i = 0; i < 2; i++) {
		struct vlan_tag *tag = pos;

		if (proto != bpf_htons(ETH_P_8021Q) &&
		    proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(tag + 1) > data_end)
			return SLUICE_ST_MALFORMED_VLAN;
		/* the inner tag overwrites the outer: it names the VLAN */
		p->vlan = bpf_ntohs(tag->tci) & 0x0fff;
		proto = tag->proto;
		pos = tag + 1;
	}

	if (proto == bpf_htons(ETH_P_IP))
		return parse_ipv4(p, pos, data_end);
	if (proto == bpf_htons(ETH_P_IPV6))
		return parse_ipv6(p, pos, data_end);
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD))
		return SLUICE_ST_MALFORMED_VLAN; /* a third tag */
	return PARSE_NOT_IP;
}

#endif
