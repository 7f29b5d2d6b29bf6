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

#include "frame.h"
#include "genutil.h"
#include "pkt.h"


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
		*flags = PKT_SYN;
	else if (!strcmp(arg, "ack"))
		*flags = PKT_ACK;
	else if (!strcmp(arg, "synack"))
		*flags = PKT_SYN | PKT_ACK;
	else
		return -EINVAL;
	return 0;
}

static int parse_vid(const char *arg, uint16_t *vid)
{
	uint32_t v;
	int err;

	/* 0: a priority tag, which receivers take as untagged */
	err = sl_parse_u32(arg, 0, 4094, &v);
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

	err = sl_parse_u32(arg, 0, 65535, &v);
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
		return sl_parse_u32(arg, 1, FRAME_MAX_LEN, &s->size);
	case FRAME_OPT_SOURCES:
		return sl_parse_u32(arg, 1, FRAME_MAX_SOURCES, &s->sources);
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

/* The headers of the spec, source left zero where frame_set_source()
 * writes it (its last 4 bytes), so the checksum bases exclude it. */
static void build_headers(const struct frame_spec *s, int family,
			  const struct in6_addr *src,
			  const struct in6_addr *dst, const uint8_t src_mac[6],
			  struct pkt *p)
{
	uint8_t tcp_flags = s->tcp_flags ? s->tcp_flags : PKT_SYN;
	int i;

	pkt_init(p);
	pkt_eth(p, s->dst_mac, src_mac);
	for (i = 0; i < s->nr_tags; i++)
		pkt_vlan(p, s->tpid[i], s->vid[i]);
	if (family == AF_INET) {
		struct pkt_ipv4_hdr h = { .frag = PKT_IP_DF };

		memcpy(&h.dst, dst, 4);
		pkt_ipv4_hdr(p, &h);
	} else {
		struct in6_addr a = *src;

		memset(a.s6_addr + 12, 0, 4);
		pkt_ipv6_hdr(p, &a, dst);
	}
	switch (s->proto) {
	case IPPROTO_UDP:
		pkt_udp(p, s->sport, s->dport);
		break;
	case IPPROTO_TCP:
		pkt_tcp(p, s->sport, s->dport, tcp_flags);
		break;
	case IPPROTO_ICMP:
		pkt_icmp_ex(p, ICMP_ECHO, 0, s->sport, 0);
		break;
	default:
		pkt_icmp_ex(p, ICMPV6_ECHO_REQUEST, 0, s->sport, 0);
		break;
	}
}

int frame_build(const struct frame_spec *s, const char *dev, struct frame *f)
{
	struct in6_addr src, dst;
	uint8_t src_mac[6];
	size_t len, hdr_len, l2_len;
	uint32_t last;
	struct pkt p;
	int family, err;

	if (!s->have_dst_mac) {
		gen_log("--dst-mac is required");
		return -EINVAL;
	}
	err = resolve_addrs(s, &family, &src, &dst);
	if (err)
		return err;
	memset(f, 0, sizeof(*f));
	if (s->have_src_mac)
		memcpy(src_mac, s->src_mac, 6);
	else if ((err = dev_mac(dev, src_mac))) {
		gen_log("cannot read the MAC of %s: %s", dev, strerror(-err));
		return err;
	}
	build_headers(s, family, &src, &dst, src_mac, &p);
	hdr_len = p.len;
	l2_len = p.l3_off;
	len = s->size ? s->size : FRAME_DEFAULT_LEN;
	if (!s->size && len < hdr_len)
		len = hdr_len;
	if (len < hdr_len || len > l2_len + FRAME_MTU) {
		gen_log("--size must be %zu..%zu for these headers", hdr_len,
			l2_len + FRAME_MTU);
		return -EINVAL;
	}
	pkt_finish(&p, len);
	memcpy(f->data, p.buf, len);

	/* The bases are the builder's sums (big-endian values) as the
	 * native-order sums frame_rw_csum() adds to (RFC 1071: the same
	 * bytes). ICMP (v4) has no pseudo header: its checksum is final. */
	f->rw.sources = s->sources;
	f->rw.l4_udp = s->proto == IPPROTO_UDP;
	if (family == AF_INET) {
		f->rw.src_off = p.l3_off + offsetof(struct iphdr, saddr);
		f->rw.ip_csum_off = p.l3_off + offsetof(struct iphdr, check);
		f->rw.ip_csum_base = htons(pkt_ipv4_sum(&p));
	} else {
		f->rw.src_off = p.l3_off + offsetof(struct ipv6hdr, saddr) + 12;
	}
	if (s->proto != IPPROTO_ICMP) {
		f->rw.l4_csum_off = pkt_l4_csum_off(&p);
		f->rw.l4_csum_base = htons(pkt_l4_sum(&p));
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
