// SPDX-License-Identifier: GPL-2.0
/* The traffic tools' frame from their command line (xdpflood, pktsend,
 * admit_shape): one Ethernet frame, optionally 802.1Q tagged or
 * 802.1ad+802.1Q (QinQ) tagged, carrying IPv4 or IPv6 with UDP, TCP, ICMP
 * echo or ICMPv6 echo, written by the tests' packet builder
 * (user/lib/pkt.h) with all checksums filled in, and the struct frame_rw
 * that lets a sender vary the source address per packet.
 */
#ifndef SLUICE_GEN_FRAME_H
#define SLUICE_GEN_FRAME_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#include "frame_rw.h"

#define FRAME_MAX_TAGS	  2
#define FRAME_MTU	  1500
#define FRAME_MAX_L2_LEN  (14 + 4 * FRAME_MAX_TAGS)
#define FRAME_MAX_LEN	  (FRAME_MAX_L2_LEN + FRAME_MTU)
#define FRAME_DEFAULT_LEN 64
#define FRAME_MAX_SOURCES (1u << 24)

enum frame_opt {
	FRAME_OPT_DST_MAC = 0x100,
	FRAME_OPT_SRC_MAC,
	FRAME_OPT_SRC,
	FRAME_OPT_DST,
	FRAME_OPT_PROTO,
	FRAME_OPT_SPORT,
	FRAME_OPT_DPORT,
	FRAME_OPT_TCP_FLAGS,
	FRAME_OPT_SIZE,
	FRAME_OPT_SOURCES,
	FRAME_OPT_VLAN,
	FRAME_OPT_QINQ,
};

/* Entries for a getopt_long table; the values are enum frame_opt. */
/* clang-format off */
#define FRAME_LONG_OPTIONS						\
	{ "dst-mac", required_argument, NULL, FRAME_OPT_DST_MAC },	\
	{ "src-mac", required_argument, NULL, FRAME_OPT_SRC_MAC },	\
	{ "src", required_argument, NULL, FRAME_OPT_SRC },		\
	{ "dst", required_argument, NULL, FRAME_OPT_DST },		\
	{ "proto", required_argument, NULL, FRAME_OPT_PROTO },		\
	{ "sport", required_argument, NULL, FRAME_OPT_SPORT },		\
	{ "dport", required_argument, NULL, FRAME_OPT_DPORT },		\
	{ "tcp-flags", required_argument, NULL, FRAME_OPT_TCP_FLAGS },	\
	{ "size", required_argument, NULL, FRAME_OPT_SIZE },		\
	{ "sources", required_argument, NULL, FRAME_OPT_SOURCES },	\
	{ "vlan", required_argument, NULL, FRAME_OPT_VLAN },		\
	{ "qinq", required_argument, NULL, FRAME_OPT_QINQ }
/* clang-format on */

#define FRAME_USAGE                                                            \
	"packet options:\n"                                                    \
	"  --dst-mac MAC          destination MAC, the peer's (required)\n"    \
	"  --src-mac MAC          source MAC (default: --dev's)\n"             \
	"  --src ADDR, --dst ADDR IPv4 or IPv6, same family (default\n"        \
	"                         198.18.0.1 -> 198.18.0.2, or 2001:db8::1\n"  \
	"                         -> 2001:db8::2 if one of them is IPv6)\n"    \
	"  --proto P              udp (default), tcp, icmp, icmpv6\n"          \
	"  --sport N, --dport N   ports (default 10000, 9); ICMP echo id =\n"  \
	"                         sport\n"                                     \
	"  --tcp-flags F          syn (default), ack, synack\n"                \
	"  --size BYTES           frame size without FCS (default 64 or the\n" \
	"                         headers if longer; max 1514 + tags)\n"       \
	"  --sources N            cycle the source over N consecutive\n"       \
	"                         addresses starting at --src (default 1)\n"   \
	"  --vlan ID              one 802.1Q tag (0: a priority tag)\n"        \
	"  --qinq OUTER,INNER     802.1ad outer tag + 802.1Q inner tag\n"

struct frame_spec {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	bool have_dst_mac;
	bool have_src_mac;
	int src_family; /* 0: not given */
	int dst_family;
	struct in6_addr src; /* IPv4 in the first 4 bytes */
	struct in6_addr dst;
	uint8_t proto;
	uint8_t tcp_flags;
	uint16_t sport;
	uint16_t dport;
	uint16_t tpid[FRAME_MAX_TAGS];
	uint16_t vid[FRAME_MAX_TAGS];
	int nr_tags;
	uint32_t size; /* 0: default */
	uint32_t sources;
};

struct frame {
	uint8_t data[FRAME_MAX_LEN];
	uint32_t len;
	uint32_t l2_len; /* Ethernet header with its tags */
	struct frame_rw rw;
};

void frame_spec_init(struct frame_spec *s);
int frame_spec_opt(struct frame_spec *s, int opt, const char *arg);
int frame_build(const struct frame_spec *s, const char *dev, struct frame *f);
void frame_set_source(const struct frame *f, uint8_t *buf, uint32_t n);

#endif
