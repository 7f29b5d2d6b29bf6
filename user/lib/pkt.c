// SPDX-License-Identifier: GPL-2.0
/* The packet builder (pkt.h): header writers and the checksums. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkt.h"

static void pkt_die(const char *what)
{
	fprintf(stderr, "pkt: %s\n", what);
	abort();
}

void pkt_init(struct pkt *p)
{
	memset(p, 0, sizeof(*p));
	p->next_off = -1;
	p->l3_off = -1;
	p->outer_off = -1;
	p->l4_off = -1;
}

uint8_t *pkt_put(struct pkt *p, size_t n)
{
	uint8_t *at;

	if (p->len + n > PKT_MAX)
		pkt_die("frame too long");
	at = p->buf + p->len;
	memset(at, 0, n);
	p->len += n;
	return at;
}

static void put16(uint8_t *at, uint16_t v)
{
	at[0] = v >> 8;
	at[1] = v & 0xff;
}

void pkt_next(struct pkt *p, uint16_t proto)
{
	if (p->next_off < 0)
		return;
	if (p->next_size == 2)
		put16(p->buf + p->next_off, proto);
	else
		p->buf[p->next_off] = proto;
}

void pkt_bytes(struct pkt *p, const void *data, size_t n)
{
	memcpy(pkt_put(p, n), data, n);
}

/* An IP header's next-protocol: its ethertype after Ethernet, VLAN or
 * GRE, its IP protocol inside another IP header; that one becomes the
 * outer header the finish fixes too. */
static void next_ip(struct pkt *p, uint16_t ethertype, uint8_t ipproto)
{
	pkt_next(p, p->next_off >= 0 && p->next_size == 1 ? ipproto
							   : ethertype);
	if (p->l3_off >= 0) {
		if (p->outer_off >= 0)
			pkt_die("more than one tunnel");
		p->outer_off = p->l3_off;
		p->outer_family = p->l3_family;
	}
}

static void set_next(struct pkt *p, const uint8_t *field, int size)
{
	p->next_off = field - p->buf;
	p->next_size = size;
}

void pkt_eth(struct pkt *p, const uint8_t *dst, const uint8_t *src)
{
	static const uint8_t ddst[6] = { 2, 0, 0, 0, 0, 2 };
	static const uint8_t dsrc[6] = { 2, 0, 0, 0, 0, 1 };
	uint8_t *h = pkt_put(p, ETH_HLEN);

	memcpy(h, dst ? dst : ddst, 6);
	memcpy(h + 6, src ? src : dsrc, 6);
	set_next(p, h + 12, 2);
}

void pkt_vlan(struct pkt *p, uint16_t tpid, uint16_t vid)
{
	uint8_t *h;

	pkt_next(p, tpid);
	h = pkt_put(p, 4);
	put16(h, vid & 0x0fff);
	set_next(p, h + 2, 2);
}

static void parse_addr(int af, const char *s, void *out)
{
	if (inet_pton(af, s, out) != 1)
		pkt_die(s);
}

void pkt_ipv4_hdr(struct pkt *p, const struct pkt_ipv4_hdr *f)
{
	uint8_t *h;

	if (f->optlen % 4 || f->optlen > 40)
		pkt_die("bad IPv4 option length");
	next_ip(p, ETH_P_IP, IPPROTO_IPIP);
	h = pkt_put(p, 20 + f->optlen);
	h[0] = 0x40 | (5 + f->optlen / 4);
	put16(h + 4, f->id);
	put16(h + 6, f->frag);
	h[8] = 64;				/* ttl */
	memcpy(h + 12, &f->src, 4);
	memcpy(h + 16, &f->dst, 4);
	if (f->optlen) {
		memset(h + 20, 1, f->optlen - 1); /* NOP ... */
		h[20 + f->optlen - 1] = 0;	  /* ... EOL */
	}
	p->l3_off = h - p->buf;
	p->l3_family = 4;
	set_next(p, h + 9, 1);
}

void pkt_ipv4_ex(struct pkt *p, const char *src, const char *dst,
		 size_t optlen, uint16_t frag, bool mf)
{
	struct pkt_ipv4_hdr h = {
		.id = 0x1234,
		.frag = (mf ? PKT_IP_MF : 0) | (frag & 0x1fff),
		.optlen = optlen,
	};

	if (optlen > 40)
		pkt_die("bad IPv4 option length");
	parse_addr(AF_INET, src, &h.src);
	parse_addr(AF_INET, dst, &h.dst);
	pkt_ipv4_hdr(p, &h);
}

void pkt_ipv4(struct pkt *p, const char *src, const char *dst)
{
	pkt_ipv4_ex(p, src, dst, 0, 0, false);
}

void pkt_ipv6_hdr(struct pkt *p, const struct in6_addr *src,
		  const struct in6_addr *dst)
{
	uint8_t *h;

	next_ip(p, ETH_P_IPV6, IPPROTO_IPV6);
	h = pkt_put(p, 40);
	h[0] = 0x60;
	h[7] = 64;				/* hop limit */
	memcpy(h + 8, src, 16);
	memcpy(h + 24, dst, 16);
	p->l3_off = h - p->buf;
	p->l3_family = 6;
	set_next(p, h + 6, 1);
}

void pkt_ipv6(struct pkt *p, const char *src, const char *dst)
{
	struct in6_addr s, d;

	parse_addr(AF_INET6, src, &s);
	parse_addr(AF_INET6, dst, &d);
	pkt_ipv6_hdr(p, &s, &d);
}

void pkt_ipv6_ext(struct pkt *p, uint8_t type, size_t len)
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
	set_next(p, h, 1);
}

void pkt_ipv6_frag(struct pkt *p, uint16_t frag, bool mf)
{
	uint8_t *h;

	pkt_next(p, IPPROTO_FRAGMENT);
	h = pkt_put(p, 8);
	put16(h + 2, (frag << 3) | (mf ? 1 : 0));
	h[4] = 0xab;				/* identification */
	h[7] = 0xcd;
	set_next(p, h, 1);
}

void pkt_gre(struct pkt *p, uint16_t flags, uint32_t key)
{
	uint8_t *h, *at;

	pkt_next(p, IPPROTO_GRE);
	h = pkt_put(p, 4);
	put16(h, flags);
	if (flags & PKT_GRE_CSUM)
		pkt_put(p, 4);	/* left 0: nothing checks it here */
	if (flags & PKT_GRE_KEY) {
		at = pkt_put(p, 4);
		put16(at, key >> 16);
		put16(at + 2, key & 0xffff);
	}
	if (flags & PKT_GRE_SEQ)
		pkt_put(p, 4);
	set_next(p, h + 2, 2);
}

static uint8_t *put_l4(struct pkt *p, uint8_t proto, size_t len)
{
	pkt_next(p, proto);
	p->l4_off = pkt_put(p, len) - p->buf;
	p->l4_proto = proto;
	p->next_off = -1;
	return p->buf + p->l4_off;
}

void pkt_tcp(struct pkt *p, uint16_t sport, uint16_t dport, uint8_t flags)
{
	uint8_t *h = put_l4(p, IPPROTO_TCP, 20);

	put16(h, sport);
	put16(h + 2, dport);
	h[7] = 1;				/* seq */
	if (flags & PKT_ACK)
		h[11] = 1;			/* ack_seq */
	h[12] = 5 << 4;				/* doff */
	h[13] = flags;
	put16(h + 14, 65535);			/* window */
}

void pkt_udp(struct pkt *p, uint16_t sport, uint16_t dport)
{
	uint8_t *h = put_l4(p, IPPROTO_UDP, 8);

	put16(h, sport);
	put16(h + 2, dport);
}

void pkt_icmp_ex(struct pkt *p, uint8_t type, uint8_t code, uint16_t id,
		 uint16_t seq)
{
	uint8_t *h = put_l4(p, p->l3_family == 6 ? IPPROTO_ICMPV6 :
						   IPPROTO_ICMP, 8);

	h[0] = type;
	h[1] = code;
	put16(h + 4, id);
	put16(h + 6, seq);
}

void pkt_icmp(struct pkt *p, uint8_t type, uint8_t code)
{
	pkt_icmp_ex(p, type, code, 0x4242, 1);
}

/* One's-complement sum of big-endian 16-bit words (RFC 1071). */
static uint32_t sum16(const uint8_t *b, size_t n, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (b[i] << 8) | b[i + 1];
	if (n & 1)
		sum += b[n - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* The sum of b[0..n) with the checksum field at b + skip counted as 0;
 * skip is even, so the words after it keep their alignment. */
static uint32_t sum16_skip(const uint8_t *b, size_t n, size_t skip,
			   uint32_t sum)
{
	sum = sum16(b, skip, sum);
	return sum16(b + skip + 2, n - skip - 2, sum);
}

/* The pseudo header of the L4 checksum; ICMP (v4) has none. */
static uint32_t pseudo_sum(const struct pkt *p, size_t l4len)
{
	const uint8_t *ip = p->buf + p->l3_off;

	if (p->l3_family == 4 && p->l4_proto != IPPROTO_ICMP)
		return sum16(ip + 12, 8, 0) + p->l4_proto + l4len;
	if (p->l3_family == 6)
		return sum16(ip + 8, 32, 0) + (l4len >> 16) +
		       (l4len & 0xffff) + p->l4_proto;
	return 0;
}

int pkt_l4_csum_off(const struct pkt *p)
{
	if (p->l4_off < 0)
		return -1;
	switch (p->l4_proto) {
	case IPPROTO_TCP:
		return p->l4_off + 16;
	case IPPROTO_UDP:
		return p->l4_off + 6;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return p->l4_off + 2;
	}
	return -1;
}

static uint16_t ipv4_sum_at(const struct pkt *p, int off)
{
	const uint8_t *ip = p->buf + off;

	return fold(sum16_skip(ip, (ip[0] & 15) * 4, 10, 0));
}

uint16_t pkt_ipv4_sum(const struct pkt *p)
{
	return ipv4_sum_at(p, p->l3_off);
}

/* An IP header's length fields at off, and IPv4's checksum. */
static void fix_ip(struct pkt *p, int off, int family)
{
	uint8_t *ip = p->buf + off;

	if (family == 4) {
		put16(ip + 2, p->len - off);
		put16(ip + 10, ~ipv4_sum_at(p, off));
	} else {
		put16(ip + 4, p->len - off - 40);
	}
}

uint16_t pkt_l4_sum(const struct pkt *p)
{
	size_t l4len = p->len - p->l4_off;
	size_t skip = pkt_l4_csum_off(p) - p->l4_off;

	return fold(sum16_skip(p->buf + p->l4_off, l4len, skip,
			       pseudo_sum(p, l4len)));
}

size_t pkt_finish(struct pkt *p, size_t frame_size)
{
	int csum_off;

	if (frame_size > p->len)
		pkt_put(p, frame_size - p->len);
	if (p->l3_off < 0)
		return p->len;
	fix_ip(p, p->l3_off, p->l3_family);
	if (p->outer_off >= 0)
		fix_ip(p, p->outer_off, p->outer_family);
	csum_off = pkt_l4_csum_off(p);
	if (csum_off < 0)
		return p->len;
	if (p->l4_proto == IPPROTO_UDP) {
		uint16_t c;

		put16(p->buf + p->l4_off + 4, p->len - p->l4_off);
		c = ~pkt_l4_sum(p);
		/* UDP sends a computed 0 as 0xffff: 0 means "no checksum" */
		put16(p->buf + csum_off, c ? c : 0xffff);
	} else {
		put16(p->buf + csum_off, ~pkt_l4_sum(p));
	}
	return p->len;
}

uint16_t pkt_verify_l4(const struct pkt *p)
{
	size_t l4len = p->len - p->l4_off;

	return ~fold(sum16(p->buf + p->l4_off, l4len, pseudo_sum(p, l4len))) &
	       0xffff;
}
