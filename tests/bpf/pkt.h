/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small packet builder for data plane tests (after katran's
 * PacketBuilder): append headers outermost first, then pkt_finish()
 * pads to a frame size and fixes every length and checksum.
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
 * Errors (bad address, overflow) abort: a broken fixture is a test bug.
 */
#ifndef SLUICE_TEST_PKT_H
#define SLUICE_TEST_PKT_H

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PKT_MAX 2048

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

#define PKT_FIN 0x01
#define PKT_SYN 0x02
#define PKT_RST 0x04
#define PKT_PSH 0x08
#define PKT_ACK 0x10

struct pkt {
	uint8_t buf[PKT_MAX];
	size_t len;
	/* the pending "next protocol" field: 2 bytes (ethertype) or 1 */
	int next_off;
	int next_size;
	int l3_off;		/* -1 when none */
	int l3_family;		/* 4 or 6 */
	int l4_off;		/* -1 when none: no checksum to fix */
	uint8_t l4_proto;
};

static inline void pkt_die(const char *what)
{
	fprintf(stderr, "pkt: %s\n", what);
	abort();
}

static inline void pkt_init(struct pkt *p)
{
	memset(p, 0, sizeof(*p));
	p->next_off = -1;
	p->l3_off = -1;
	p->l4_off = -1;
}

static inline uint8_t *pkt_put(struct pkt *p, size_t n)
{
	uint8_t *at;

	if (p->len + n > PKT_MAX)
		pkt_die("frame too long");
	at = p->buf + p->len;
	memset(at, 0, n);
	p->len += n;
	return at;
}

static inline void pkt_put16(uint8_t *at, uint16_t v)
{
	at[0] = v >> 8;
	at[1] = v & 0xff;
}

/* Set the pending next-protocol field (ethertype or IP protocol). */
static inline void pkt_next(struct pkt *p, uint16_t proto)
{
	if (p->next_off < 0)
		return;
	if (p->next_size == 2)
		pkt_put16(p->buf + p->next_off, proto);
	else
		p->buf[p->next_off] = proto;
}

static inline void pkt_bytes(struct pkt *p, const void *data, size_t n)
{
	memcpy(pkt_put(p, n), data, n);
}

/* NULL MACs mean 02:00:00:00:00:02 (dst) and 02:00:00:00:00:01 (src). */
static inline void pkt_eth(struct pkt *p, const uint8_t *dst,
			   const uint8_t *src)
{
	static const uint8_t ddst[6] = { 2, 0, 0, 0, 0, 2 };
	static const uint8_t dsrc[6] = { 2, 0, 0, 0, 0, 1 };
	uint8_t *h = pkt_put(p, ETH_HLEN);

	memcpy(h, dst ? dst : ddst, 6);
	memcpy(h + 6, src ? src : dsrc, 6);
	p->next_off = h + 12 - p->buf;
	p->next_size = 2;
}

/* A tag of type tpid (0x8100, 0x88a8) with VLAN id vid. */
static inline void pkt_vlan(struct pkt *p, uint16_t tpid, uint16_t vid)
{
	uint8_t *h;

	pkt_next(p, tpid);
	h = pkt_put(p, 4);
	pkt_put16(h, vid & 0x0fff);
	p->next_off = h + 2 - p->buf;
	p->next_size = 2;
}

static inline void pkt_addr(int af, const char *s, void *out)
{
	if (inet_pton(af, s, out) != 1)
		pkt_die(s);
}

/*
 * IPv4 with optlen bytes of options (a multiple of 4, NOPs ending in
 * EOL), fragment offset frag (units of 8 bytes) and the MF flag.
 */
static inline void pkt_ipv4_ex(struct pkt *p, const char *src,
			       const char *dst, size_t optlen, uint16_t frag,
			       bool mf)
{
	uint8_t *h;

	if (optlen % 4 || optlen > 40)
		pkt_die("bad IPv4 option length");
	pkt_next(p, ETH_P_IP);
	h = pkt_put(p, 20 + optlen);
	h[0] = 0x40 | (5 + optlen / 4);
	pkt_put16(h + 4, 0x1234);		/* id */
	pkt_put16(h + 6, (mf ? 0x2000 : 0) | (frag & 0x1fff));
	h[8] = 64;				/* ttl */
	pkt_addr(AF_INET, src, h + 12);
	pkt_addr(AF_INET, dst, h + 16);
	if (optlen) {
		memset(h + 20, 1, optlen - 1);	/* NOP ... */
		h[20 + optlen - 1] = 0;		/* ... EOL */
	}
	p->l3_off = h - p->buf;
	p->l3_family = 4;
	p->next_off = h + 9 - p->buf;
	p->next_size = 1;
}

static inline void pkt_ipv4(struct pkt *p, const char *src, const char *dst)
{
	pkt_ipv4_ex(p, src, dst, 0, 0, false);
}

static inline void pkt_ipv6(struct pkt *p, const char *src, const char *dst)
{
	uint8_t *h;

	pkt_next(p, ETH_P_IPV6);
	h = pkt_put(p, 40);
	h[0] = 0x60;
	h[7] = 64;				/* hop limit */
	pkt_addr(AF_INET6, src, h + 8);
	pkt_addr(AF_INET6, dst, h + 24);
	p->l3_off = h - p->buf;
	p->l3_family = 6;
	p->next_off = h + 6 - p->buf;
	p->next_size = 1;
}

/*
 * An IPv6 extension header of type (hop-by-hop 0, routing 43, destination
 * options 60) and len bytes (a multiple of 8, at least 8), padded with
 * PadN. A routing header is type 0 with segments left 0, so it is inert.
 */
static inline void pkt_ipv6_ext(struct pkt *p, uint8_t type, size_t len)
{
	uint8_t *h;

	if (len < 8 || len % 8 || len > 2048)
		pkt_die("bad extension header length");
	pkt_next(p, type);
	h = pkt_put(p, len);
	h[1] = len / 8 - 1;
	if (type != IPPROTO_ROUTING) {
		h[2] = 1;			/* PadN */
		h[3] = len - 4;
	}
	p->next_off = h - p->buf;
	p->next_size = 1;
}

/* IPv6 fragment header: offset in units of 8 bytes, M flag. */
static inline void pkt_ipv6_frag(struct pkt *p, uint16_t frag, bool mf)
{
	uint8_t *h;

	pkt_next(p, IPPROTO_FRAGMENT);
	h = pkt_put(p, 8);
	pkt_put16(h + 2, (frag << 3) | (mf ? 1 : 0));
	h[4] = 0xab;				/* identification */
	h[7] = 0xcd;
	p->next_off = h - p->buf;
	p->next_size = 1;
}

static inline void pkt_l4(struct pkt *p, uint8_t proto, size_t len)
{
	pkt_next(p, proto);
	p->l4_off = pkt_put(p, len) - p->buf;
	p->l4_proto = proto;
	p->next_off = -1;
}

static inline void pkt_tcp(struct pkt *p, uint16_t sport, uint16_t dport,
			   uint8_t flags)
{
	uint8_t *h;

	pkt_l4(p, IPPROTO_TCP, 20);
	h = p->buf + p->l4_off;
	pkt_put16(h, sport);
	pkt_put16(h + 2, dport);
	h[7] = 1;				/* seq */
	if (flags & PKT_ACK)
		h[11] = 1;			/* ack_seq */
	h[12] = 5 << 4;				/* doff */
	h[13] = flags;
	pkt_put16(h + 14, 65535);		/* window */
}

static inline void pkt_udp(struct pkt *p, uint16_t sport, uint16_t dport)
{
	uint8_t *h;

	pkt_l4(p, IPPROTO_UDP, 8);
	h = p->buf + p->l4_off;
	pkt_put16(h, sport);
	pkt_put16(h + 2, dport);
}

/* ICMP or ICMPv6 (by the L3 family) type/code with id and sequence. */
static inline void pkt_icmp(struct pkt *p, uint8_t type, uint8_t code)
{
	uint8_t *h;

	pkt_l4(p, p->l3_family == 6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP, 8);
	h = p->buf + p->l4_off;
	h[0] = type;
	h[1] = code;
	pkt_put16(h + 4, 0x4242);		/* id */
	pkt_put16(h + 6, 1);			/* sequence */
}

static inline uint32_t pkt_sum(const uint8_t *b, size_t n, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (b[i] << 8) | b[i + 1];
	if (n & 1)
		sum += b[n - 1] << 8;
	return sum;
}

static inline uint16_t pkt_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

/*
 * Pad with zeros to frame_size (0: no padding), then fix the lengths and
 * checksums of IP and L4. Returns the frame length.
 */
static inline size_t pkt_finish(struct pkt *p, size_t frame_size)
{
	uint32_t sum = 0;
	size_t l4len;
	uint8_t *ip, *l4;

	if (frame_size > p->len)
		pkt_put(p, frame_size - p->len);
	if (p->l3_off < 0)
		return p->len;
	ip = p->buf + p->l3_off;
	if (p->l3_family == 4) {
		pkt_put16(ip + 2, p->len - p->l3_off);
		pkt_put16(ip + 10, 0);
		pkt_put16(ip + 10, pkt_fold(pkt_sum(ip, (ip[0] & 15) * 4, 0)));
	} else {
		pkt_put16(ip + 4, p->len - p->l3_off - 40);
	}
	if (p->l4_off < 0)
		return p->len;
	l4 = p->buf + p->l4_off;
	l4len = p->len - p->l4_off;

	if (p->l4_proto == IPPROTO_UDP)
		pkt_put16(l4 + 4, l4len);
	if (p->l3_family == 4 && p->l4_proto != IPPROTO_ICMP) {
		sum = pkt_sum(ip + 12, 8, 0);
		sum += p->l4_proto + l4len;
	} else if (p->l3_family == 6) {
		sum = pkt_sum(ip + 8, 32, 0);
		sum += (l4len >> 16) + (l4len & 0xffff) + p->l4_proto;
	}
	switch (p->l4_proto) {
	case IPPROTO_TCP:
		pkt_put16(l4 + 16, pkt_fold(pkt_sum(l4, l4len, sum)));
		break;
	case IPPROTO_UDP: {
		uint16_t c = pkt_fold(pkt_sum(l4, l4len, sum));

		pkt_put16(l4 + 6, c ? c : 0xffff);
		break;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		pkt_put16(l4 + 2, pkt_fold(pkt_sum(l4, l4len, sum)));
		break;
	}
	return p->len;
}

/* Checksum of a finished frame's IPv4 header / L4 segment: 0 when valid. */
static inline uint16_t pkt_verify_l4(const struct pkt *p)
{
	const uint8_t *ip = p->buf + p->l3_off;
	size_t l4len = p->len - p->l4_off;
	uint32_t sum = 0;

	if (p->l3_family == 4 && p->l4_proto != IPPROTO_ICMP)
		sum = pkt_sum(ip + 12, 8, 0) + p->l4_proto + l4len;
	else if (p->l3_family == 6)
		sum = pkt_sum(ip + 8, 32, 0) + (l4len >> 16) +
		      (l4len & 0xffff) + p->l4_proto;
	return pkt_fold(pkt_sum(p->buf + p->l4_off, l4len, sum));
}

#endif
