// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/if_ether.h>
#include <linux/icmp.h>
#include <linux/icmpv6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>

#include "frame.h"
#include "genutil.h"

#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10

void frame_spec_init(struct frame_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->proto = IPPROTO_UDP;
	s->sport = 10000;
	s->dport = 9;
	s->sources = 1;
}

static int parse_mac(const char *arg, uint8_t mac[6])
{
	int n = 0;

	if (sscanf(arg, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx%n", &mac[0], &mac[1],
		   &mac[2], &mac[3], &mac[4], &mac[5], &n) != 6 ||
	    arg[n])
		return -EINVAL;
	return 0;
}

static int parse_addr(const char *arg, struct in6_addr *a, int *family)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, arg, a) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, arg, a) == 1)
		*family = AF_INET6;
	else
		return -EINVAL;
	return 0;
}

static int parse_proto(const char *arg, uint8_t *proto)
{
	if (!strcmp(arg, "udp"))
		*proto = IPPROTO_UDP;
	else if (!strcmp(arg, "tcp"))
		*proto = IPPROTO_TCP;
	else if (!strcmp(arg, "icmp"))
		*proto = IPPROTO_ICMP;
	else if (!strcmp(arg, "icmpv6"))
		*proto = IPPROTO_ICMPV6;
	else
		return -EINVAL;
	return 0;
}

static int parse_tcp_flags(const char *arg, uint8_t *flags)
{
	if (!strcmp(arg, "syn"))
		*flags = TCP_FLAG_SYN;
	else if (!strcmp(arg, "ack"))
		*flags = TCP_FLAG_ACK;
	else if (!strcmp(arg, "synack"))
		*flags = TCP_FLAG_SYN | TCP_FLAG_ACK;
	else
		return -EINVAL;
	return 0;
}

static int parse_vid(const char *arg, uint16_t *vid)
{
	uint32_t v;
	int err;

	err = gen_parse_u32(arg, 1, 4094, &v);
	if (!err)
		*vid = v;
	return err;
}

static int parse_qinq(struct frame_spec *s, const char *arg)
{
	char outer[16];
	const char *comma = strchr(arg, ',');

	if (!comma || comma - arg >= (long) sizeof(outer))
		return -EINVAL;
	memcpy(outer, arg, comma - arg);
	outer[comma - arg] = '\0';
	s->nr_tags = 2;
	s->tpid[0] = ETH_P_8021AD;
	s->tpid[1] = ETH_P_8021Q;
	if (parse_vid(outer, &s->vid[0]) || parse_vid(comma + 1, &s->vid[1]))
		return -EINVAL;
	return 0;
}

static int parse_port(const char *arg, uint16_t *port)
{
	uint32_t v;
	int err;

	err = gen_parse_u32(arg, 0, 65535, &v);
	if (!err)
		*port = v;
	return err;
}

/* Returns -ENOENT when opt is not a packet option. */
int frame_spec_opt(struct frame_spec *s, int opt, const char *arg)
{
	switch (opt) {
	case FRAME_OPT_DST_MAC:
		s->have_dst_mac = true;
		return parse_mac(arg, s->dst_mac);
	case FRAME_OPT_SRC_MAC:
		s->have_src_mac = true;
		return parse_mac(arg, s->src_mac);
	case FRAME_OPT_SRC:
		return parse_addr(arg, &s->src, &s->src_family);
	case FRAME_OPT_DST:
		return parse_addr(arg, &s->dst, &s->dst_family);
	case FRAME_OPT_PROTO:
		return parse_proto(arg, &s->proto);
	case FRAME_OPT_SPORT:
		return parse_port(arg, &s->sport);
	case FRAME_OPT_DPORT:
		return parse_port(arg, &s->dport);
	case FRAME_OPT_TCP_FLAGS:
		return parse_tcp_flags(arg, &s->tcp_flags);
	case FRAME_OPT_SIZE:
		return gen_parse_u32(arg, 1, FRAME_MAX_LEN, &s->size);
	case FRAME_OPT_SOURCES:
		return gen_parse_u32(arg, 1, FRAME_MAX_SOURCES, &s->sources);
	case FRAME_OPT_VLAN:
		s->nr_tags = 1;
		s->tpid[0] = ETH_P_8021Q;
		return parse_vid(arg, &s->vid[0]);
	case FRAME_OPT_QINQ:
		return parse_qinq(s, arg);
	}
	return -ENOENT;
}

static int dev_mac(const char *dev, uint8_t mac[6])
{
	struct ifreq ifr = {0};
	int fd, err = 0;

	if (strlen(dev) >= sizeof(ifr.ifr_name))
		return -ENAMETOOLONG;
	strcpy(ifr.ifr_name, dev);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr))
		err = -errno;
	else
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
	return err;
}

/* One's-complement sum of native 16-bit loads; byte order comes out right
 * when the folded result is stored back natively (RFC 1071).
 */
static uint32_t csum_add(uint32_t sum, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint16_t w;

	for (; len > 1; len -= 2, p += 2) {
		memcpy(&w, p, 2);
		sum += w;
	}
	if (len) {
		uint8_t last[2] = {*p, 0};

		memcpy(&w, last, 2);
		sum += w;
	}
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* Fills the spec's defaults that depend on the family; checks the rest. */
static int resolve_addrs(const struct frame_spec *s, int *family,
			 struct in6_addr *src, struct in6_addr *dst)
{
	const char *def_src = "198.18.0.1", *def_dst = "198.18.0.2";
	int f = s->src_family ? s->src_family : s->dst_family;
	int unused;

	if (s->src_family && s->dst_family && s->src_family != s->dst_family) {
		gen_log("--src and --dst are of different families");
		return -EINVAL;
	}
	if (f == AF_INET6) {
		def_src = "2001:db8::1";
		def_dst = "2001:db8::2";
	}
	*src = s->src;
	*dst = s->dst;
	if (!s->src_family)
		parse_addr(def_src, src, &unused);
	if (!s->dst_family)
		parse_addr(def_dst, dst, &unused);
	*family = f ? f : AF_INET;
	if ((s->proto == IPPROTO_ICMP && *family != AF_INET) ||
	    (s->proto == IPPROTO_ICMPV6 && *family != AF_INET6)) {
		gen_log("icmp needs IPv4 addresses, icmpv6 IPv6 ones");
		return -EINVAL;
	}
	return 0;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	v = htons(v);
	memcpy(p, &v, 2);
}

static size_t l4_hdr_len(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return sizeof(struct tcphdr);
	case IPPROTO_UDP:
		return sizeof(struct udphdr);
	default: /* ICMP and ICMPv6 echo headers are 8 bytes */
		return 8;
	}
}

static void put_l4(const struct frame_spec *s, uint8_t *l4, size_t l4_len,
		   uint16_t *csum_off)
{
	if (s->proto == IPPROTO_UDP) {
		struct udphdr *udp = (struct udphdr *) l4;

		udp->source = htons(s->sport);
		udp->dest = htons(s->dport);
		udp->len = htons(l4_len);
		*csum_off = offsetof(struct udphdr, check);
	} else if (s->proto == IPPROTO_TCP) {
		struct tcphdr *tcp = (struct tcphdr *) l4;
		uint8_t flags = s->tcp_flags ? s->tcp_flags : TCP_FLAG_SYN;

		tcp->source = htons(s->sport);
		tcp->dest = htons(s->dport);
		tcp->seq = htonl(1);
		tcp->ack_seq = htonl(flags & TCP_FLAG_ACK ? 1 : 0);
		tcp->doff = sizeof(*tcp) / 4;
		l4[13] = flags; /* the flags byte of the TCP header */
		tcp->window = htons(65535);
		*csum_off = offsetof(struct tcphdr, check);
	} else {
		struct icmphdr *icmp = (struct icmphdr *) l4;

		icmp->type =
		    s->proto == IPPROTO_ICMP ? ICMP_ECHO : ICMPV6_ECHO_REQUEST;
		icmp->un.echo.id = htons(s->sport);
		*csum_off = offsetof(struct icmphdr, checksum);
	}
}

/* The source's last 4 bytes are zero while the bases are summed, so the
 * bases cover everything except them.
 */
int frame_build(const struct frame_spec *s, const char *dev, struct frame *f)
{
	size_t l2_len = 14 + 4 * s->nr_tags, l3_len, l4_len, len, off;
	struct in6_addr src, dst;
	uint16_t l4_csum_off;
	uint32_t sum, last;
	uint8_t *p, *l4;
	int family, err, i;

	if (!s->have_dst_mac) {
		gen_log("--dst-mac is required");
		return -EINVAL;
	}
	err = resolve_addrs(s, &family, &src, &dst);
	if (err)
		return err;
	memset(f, 0, sizeof(*f));
	if (s->have_src_mac)
		memcpy(f->data + 6, s->src_mac, 6);
	else if ((err = dev_mac(dev, f->data + 6))) {
		gen_log("cannot read the MAC of %s: %s", dev, strerror(-err));
		return err;
	}
	l3_len =
	    family == AF_INET ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);
	len = s->size ? s->size : FRAME_DEFAULT_LEN;
	if (!s->size && len < l2_len + l3_len + l4_hdr_len(s->proto))
		len = l2_len + l3_len + l4_hdr_len(s->proto);
	if (len < l2_len + l3_len + l4_hdr_len(s->proto) ||
	    len > l2_len + FRAME_MTU) {
		gen_log("--size must be %zu..%zu for these headers",
			l2_len + l3_len + l4_hdr_len(s->proto),
			l2_len + FRAME_MTU);
		return -EINVAL;
	}
	l4_len = len - l2_len - l3_len;

	p = f->data;
	memcpy(p, s->dst_mac, 6);
	off = 12;
	for (i = 0; i < s->nr_tags; i++, off += 4) {
		put_be16(p + off, s->tpid[i]);
		put_be16(p + off + 2, s->vid[i]);
	}
	put_be16(p + off, family == AF_INET ? ETH_P_IP : ETH_P_IPV6);
	off += 2;

	f->rw.sources = s->sources;
	f->rw.l4_udp = s->proto == IPPROTO_UDP;
	if (family == AF_INET) {
		struct iphdr *ip = (struct iphdr *) (p + off);

		ip->version = 4;
		ip->ihl = 5;
		ip->tot_len = htons(l3_len + l4_len);
		ip->frag_off = htons(0x4000); /* DF */
		ip->ttl = 64;
		ip->protocol = s->proto;
		memcpy(&ip->daddr, &dst, 4);
		f->rw.src_off = off + offsetof(struct iphdr, saddr);
		f->rw.ip_csum_off = off + offsetof(struct iphdr, check);
		f->rw.ip_csum_base = csum_fold(csum_add(0, ip, sizeof(*ip)));
		/* IPv4 pseudo header without the source */
		sum = csum_add(0, &dst, 4);
	} else {
		struct ipv6hdr *ip6 = (struct ipv6hdr *) (p + off);

		ip6->version = 6;
		ip6->payload_len = htons(l4_len);
		ip6->nexthdr = s->proto;
		ip6->hop_limit = 64;
		memcpy(&ip6->saddr, &src, 12);
		ip6->daddr = dst;
		f->rw.src_off = off + offsetof(struct ipv6hdr, saddr) + 12;
		/* IPv6 pseudo header without the source's last 4 bytes */
		sum = csum_add(0, &ip6->saddr, 12);
		sum = csum_add(sum, &dst, 16);
	}
	sum += htons(s->proto) + htons(l4_len);
	l4 = p + off + l3_len;
	put_l4(s, l4, l4_len, &l4_csum_off);
	if (s->proto == IPPROTO_ICMP) {
		/* ICMPv4 has no pseudo header: its checksum never changes */
		uint16_t c = ~csum_fold(csum_add(0, l4, l4_len));

		memcpy(l4 + l4_csum_off, &c, 2);
	} else {
		f->rw.l4_csum_off = l4 + l4_csum_off - p;
		f->rw.l4_csum_base = csum_fold(csum_add(sum, l4, l4_len));
	}

	memcpy(&last, (uint8_t *) &src + (family == AF_INET ? 0 : 12), 4);
	f->rw.src_first = ntohl(last);
	if (f->rw.src_first + (uint64_t) s->sources - 1 > UINT32_MAX) {
		gen_log("--sources runs past the end of the address space");
		return -EINVAL;
	}
	f->len = len;
	f->l2_len = l2_len;
	frame_set_source(f, f->data, 0);
	return 0;
}

/* Writes source n (0 <= n < rw.sources) and the checksums covering it. */
void frame_set_source(const struct frame *f, uint8_t *buf, uint32_t n)
{
	uint32_t addr = htonl(f->rw.src_first + n);
	uint16_t w[2], c;

	memcpy(w, &addr, 4);
	memcpy(buf + f->rw.src_off, w, 4);
	if (f->rw.ip_csum_off) {
		c = frame_rw_csum(f->rw.ip_csum_base, w);
		memcpy(buf + f->rw.ip_csum_off, &c, 2);
	}
	if (f->rw.l4_csum_off) {
		c = frame_rw_csum(f->rw.l4_csum_base, w);
		if (f->rw.l4_udp && !c)
			c = 0xffff;
		memcpy(buf + f->rw.l4_csum_off, &c, 2);
	}
}
