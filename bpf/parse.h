/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Header parsing: Ethernet, up to two VLAN tags, IPv4 (options, fragments),
 * IPv6 with a bounded walk over extension headers, TCP/UDP/ICMP/ICMPv6.
 * Every read is bounds-checked against data_end; a header cut short or
 * inconsistent yields a PARSE_MALFORMED_* code, a packet the kernel may
 * still deliver but whose headers sluice cannot read in full one of the
 * unclassified codes (PARSE_FRAG_TINY, PARSE_IP6_CHAIN;
 * docs/architecture.md).
 */
#ifndef SLUICE_PARSE_H
#define SLUICE_PARSE_H

#include <stdbool.h>
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

/*
 * What parse_packet() makes of a frame: PARSE_OK (p holds what
 * classification needs), PARSE_NOT_IP, or why the frame cannot be judged
 * as it is. Each reason is its host_stats index (SLUICE_ST_*), so a
 * caller counts it as it is returned: the malformed ones, never judged,
 * come before the unclassified ones, judged when no rule in force needs
 * what they lack (frag.h: rules_need()).
 */
enum parse_rc {
	/* parse_tunnel(): an IP-in-IP or GRE packet whose inner IPv4
	 * (IPv6) header is at p->inner_off, where parse_packet() goes on */
	PARSE_INNER6 = -3,
	PARSE_INNER4 = -2,
	PARSE_NOT_IP = -1,
	PARSE_OK = 0,
	PARSE_MALFORMED_ETH = SLUICE_ST_MALFORMED_ETH,
	PARSE_MALFORMED_VLAN = SLUICE_ST_MALFORMED_VLAN,
	PARSE_MALFORMED_IP4 = SLUICE_ST_MALFORMED_IP4,
	PARSE_MALFORMED_IP6 = SLUICE_ST_MALFORMED_IP6,
	PARSE_MALFORMED_L4 = SLUICE_ST_MALFORMED_L4,
	PARSE_LATER_FRAGMENT = SLUICE_ST_FRAGMENTS, /* no L4 header */
	PARSE_FRAG_TINY = SLUICE_ST_FRAG_TINY,
	PARSE_IP6_CHAIN = SLUICE_ST_IP6_CHAIN,
};

/* A reason not to judge a frame (a host_stats index) that no rule
 * overrides. */
static __always_inline bool reason_malformed(__u32 why)
{
	return why < SLUICE_ST_FRAG_ORPHAN;
}

#ifndef IPPROTO_GRE
#define IPPROTO_GRE 47
#endif
#define GRE_CSUM    0x8000
#define GRE_ROUTING 0x4000
#define GRE_KEY     0x2000
#define GRE_SEQ     0x1000
#define GRE_VERSION 0x0007
/* a tunnel's inner header is parsed below this offset (a power of 2) */
#define SLUICE_TUNNEL_MAX_OFF 1024

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
	__be32 identification;
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
	/* a fragment's datagram: IPv4's id, or IPv6's Fragment header id */
	__u32 frag_id;
	__u8 frag;		/* SLUICE_FRAG_*; 0: not a fragment */
	__u8 frag_proto;	/* IPv4's protocol, a part of the datagram's key */
	__u16 inner_off;	/* PARSE_INNER*: the inner header's offset */
};

struct gre_base {
	__be16 flags;
	__be16 proto;
};

#define SLUICE_FRAG_FIRST 1	/* offset 0, more to come */
#define SLUICE_FRAG_LATER 2	/* offset > 0: no L4 header */

/* A cut L4 header: the port-0 key of its protocol, which a first
 * fragment cut there is classified by where no rule needs the port. */
static __always_inline enum parse_rc l4_short(struct sluice_pkt *p, __u32 slot)
{
	p->port_key = sluice_port_key(p->family, slot, 0);
	return PARSE_MALFORMED_L4;
}

/*
 * The packet inside an IP-in-IP or GRE header at pos: where it starts
 * and which parse_packet() goes on with, or PARSE_OK (judged by the
 * outer header) for a GRE header of another version, with a routing
 * field, or carrying something else (Ethernet, MPLS, ...).
 */
static __always_inline enum parse_rc parse_tunnel(struct sluice_pkt *p, void *data,
					void *pos, void *data_end, __u8 proto)
{
	struct gre_base *gre = pos;
	__u64 off = pos - data;
	__u16 flags;

	p->port_key = sluice_port_key(p->family, SLUICE_SLOT_OTHER, 0);
	if (proto == IPPROTO_IPIP || proto == IPPROTO_IPV6) {
		p->inner_off = off;
		return proto == IPPROTO_IPIP ? PARSE_INNER4 : PARSE_INNER6;
	}
	if ((void *)(gre + 1) > data_end)
		return PARSE_MALFORMED_L4;
	flags = bpf_ntohs(gre->flags);
	if (flags & (GRE_ROUTING | GRE_VERSION))
		return PARSE_OK;
	/* an offset, not a pointer: the packet is read there later */
	off += sizeof(*gre);
	if (flags & GRE_CSUM)
		off += 4;
	if (flags & GRE_KEY)
		off += 4;
	if (flags & GRE_SEQ)
		off += 4;
	p->inner_off = off;
	if (gre->proto == bpf_htons(ETH_P_IP))
		return PARSE_INNER4;
	if (gre->proto == bpf_htons(ETH_P_IPV6))
		return PARSE_INNER6;
	return PARSE_OK;
}

/* L4 header at pos for protocol proto; pos may be past data_end.
 * tunnels: a constant, whether IP-in-IP and GRE are looked into. */
static __always_inline enum parse_rc parse_l4(struct sluice_pkt *p, void *data,
				    void *pos, void *data_end, __u8 proto,
				    bool tunnels)
{
	/* a fragment's inner header is cut: judged by the outer one */
	if (tunnels && !p->frag &&
	    (proto == IPPROTO_IPIP || proto == IPPROTO_IPV6 ||
	     proto == IPPROTO_GRE))
		return parse_tunnel(p, data, pos, data_end, proto);
	switch (proto) {
	case IPPROTO_TCP: {
		struct tcphdr *th = pos;

		if ((void *)(th + 1) > data_end)
			return l4_short(p, SLUICE_SLOT_TCP);
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
			return l4_short(p, SLUICE_SLOT_UDP);
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
			return l4_short(p, proto == IPPROTO_ICMP ?
						   SLUICE_SLOT_ICMP :
						   SLUICE_SLOT_ICMPV6);
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

static __always_inline enum parse_rc parse_ipv4(struct sluice_pkt *p, void *data,
				      void *pos, void *data_end, bool tunnels)
{
	struct iphdr *iph = pos;
	__u32 hlen, vihl;

	if ((void *)(iph + 1) > data_end)
		return PARSE_MALFORMED_IP4;
	/* version 4 and a header length of 5 to 15 words, in one test */
	vihl = *(const __u8 *)iph;
	if ((__u8)(vihl - 0x45) > 0x4f - 0x45)
		return PARSE_MALFORMED_IP4;
	hlen = (vihl & 0xf) * 4;
	if (pos + hlen > data_end)
		return PARSE_MALFORMED_IP4;
	p->family = 4;
	p->saddr = (const __u8 *)&iph->saddr;
	p->daddr = (const __u8 *)&iph->daddr;
	/* one test for an unfragmented datagram */
	if (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
		p->frag_id = iph->id;
		p->frag_proto = iph->protocol;
		p->frag = SLUICE_FRAG_FIRST;
		if (iph->frag_off & bpf_htons(IP_OFFSET)) {
			p->frag = SLUICE_FRAG_LATER;
			p->port_key = sluice_port_key(
				4, fragment_slot(iph->protocol, 4), 0);
			return PARSE_LATER_FRAGMENT;
		}
	}
	return parse_l4(p, data, pos + hlen, data_end, iph->protocol,
			tunnels);
}

/* An IPv6 chain the walk does not finish: no protocol known. */
static __always_inline enum parse_rc ip6_chain(struct sluice_pkt *p)
{
	p->port_key = sluice_port_key(6, SLUICE_SLOT_OTHER, 0);
	return PARSE_IP6_CHAIN;
}

/* A chain cut short: malformed, but in a first fragment the rest of it
 * may come in the next (what RFC 7112 forbids, the kernel reassembles). */
static __always_inline enum parse_rc ip6_cut(struct sluice_pkt *p)
{
	return p->frag ? ip6_chain(p) : PARSE_MALFORMED_IP6;
}

static __always_inline enum parse_rc parse_ipv6(struct sluice_pkt *p, void *data,
				      void *pos, void *data_end, bool tunnels)
{
	struct ipv6hdr *ip6h = pos;
	__u8 nexthdr;
	int i;

	if ((void *)(ip6h + 1) > data_end)
		return PARSE_MALFORMED_IP6;
	if (ip6h->version != 6)
		return PARSE_MALFORMED_IP6;
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
				return ip6_cut(p);
			nexthdr = opt->nexthdr;
			pos += (opt->hdrlen + 1) * 8;
			/* cut inside this header: an IPv6 error, not L4 */
			if (pos > data_end)
				return ip6_cut(p);
			break;
		}
		case IPPROTO_FRAGMENT: {
			struct ipv6_frag *fh = pos;

			if ((void *)(fh + 1) > data_end)
				return ip6_cut(p);
			nexthdr = fh->nexthdr;
			/* offset or M: a fragment (RFC 6946: not both 0) */
			if (fh->frag_off & bpf_htons(0xFFF9)) {
				p->frag_id = fh->identification;
				p->frag = SLUICE_FRAG_FIRST;
			}
			if (fh->frag_off & bpf_htons(0xFFF8)) {
				p->frag = SLUICE_FRAG_LATER;
				p->port_key = sluice_port_key(
					6, fragment_slot(nexthdr, 6), 0);
				return PARSE_LATER_FRAGMENT;
			}
			pos = fh + 1;
			break;
		}
		default:
			return parse_l4(p, data, pos, data_end, nexthdr,
					tunnels);
		}
	}
	/* more extension headers than we walk: the protocol is unknown */
	return ip6_chain(p);
}

/*
 * Parses the frame into p. tunnels (a constant of the caller's, or a
 * global fixed at load): an unfragmented IP-in-IP (IPv4 or IPv6 in IPv4
 * or IPv6) or GRE (version 0, IPv4 or IPv6 inside) packet is parsed by
 * its inner header, one level deep, as the host that decapsulates it
 * delivers it; its length stays the frame's.
 */
static __always_inline enum parse_rc parse_packet(struct sluice_pkt *p, void *data,
					void *data_end, bool tunnels)
{
	struct ethhdr *eth = data;
	void *pos = eth + 1;
	__be16 proto;
	enum parse_rc rc;
	int i;

	p->len = data_end - data;
	/* set on every path, so that no reader sees them uninitialized */
	p->family = 0;
	p->port_key = 0;
	p->vlan = 0;
	p->frag_id = 0;
	p->frag = 0;
	p->frag_proto = 0;
	p->inner_off = 0;
	if (pos > data_end)
		return PARSE_MALFORMED_ETH;
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
			return PARSE_MALFORMED_VLAN;
		/* the inner tag overwrites the outer: it names the VLAN */
		p->vlan = bpf_ntohs(tag->tci) & 0x0fff;
		proto = tag->proto;
		pos = tag + 1;
	}

	if (proto == bpf_htons(ETH_P_IP))
		rc = parse_ipv4(p, data, pos, data_end, tunnels);
	else if (proto == bpf_htons(ETH_P_IPV6))
		rc = parse_ipv6(p, data, pos, data_end, tunnels);
	else if (proto == bpf_htons(ETH_P_8021Q) ||
		 proto == bpf_htons(ETH_P_8021AD))
		return PARSE_MALFORMED_VLAN; /* a third tag */
	else
		return PARSE_NOT_IP;
	/* the inner packet, by the same parse without tunnels */
	if (rc == PARSE_INNER4 || rc == PARSE_INNER6) {
		__u64 off = p->inner_off;

		/* bounded, so that the verifier follows the bounds checks
		 * at the offset (an IPv6 chain reaches 1,024 only with
		 * headers no tunnel needs); the mask in asm, where clang
		 * cannot drop it as implied by the test */
		if (off >= SLUICE_TUNNEL_MAX_OFF)
			return PARSE_MALFORMED_L4;
		asm volatile("%0 &= 1023" : "+r"(off));
		pos = data + off;
		if (rc == PARSE_INNER4)
			rc = parse_ipv4(p, data, pos, data_end, false);
		else
			rc = parse_ipv6(p, data, pos, data_end, false);
	}
	/* a first fragment too short for its L4 header: the rest comes
	 * with the next fragment (RFC 1858, RFC 3128) */
	if (rc == PARSE_MALFORMED_L4 && p->frag)
		return PARSE_FRAG_TINY;
	return rc;
}

#endif
