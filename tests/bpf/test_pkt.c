// SPDX-License-Identifier: GPL-2.0
/*
 * The packet builder (user/lib/pkt.h) against golden frames: every other
 * data plane suite trusts its bytes and checksums. Needs no BPF.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

static void frame_ipv4_udp(struct pkt *p)
{
	pkt_eth(p, NULL, NULL);
	pkt_ipv4(p, "192.0.2.1", "198.51.100.1");
	pkt_udp(p, 40000, 53);
	pkt_finish(p, 60);
}

static void frame_vlan_ipv4opt_syn(struct pkt *p)
{
	pkt_eth(p, NULL, NULL);
	pkt_vlan(p, ETH_P_8021Q, 100);
	pkt_ipv4_ex(p, "192.0.2.1", "198.51.100.1", 8, 0, true);
	pkt_tcp(p, 40000, 80, PKT_SYN);
	pkt_finish(p, 0);
}

static void frame_ipv6_hbh_synack(struct pkt *p)
{
	pkt_eth(p, NULL, NULL);
	pkt_ipv6(p, "2001:db8::1", "2001:db8:1::1");
	pkt_ipv6_ext(p, IPPROTO_HOPOPTS, 8);
	pkt_tcp(p, 40000, 443, PKT_SYN | PKT_ACK);
	pkt_finish(p, 100);
}

static void frame_icmpv6(struct pkt *p)
{
	pkt_eth(p, NULL, NULL);
	pkt_ipv6(p, "2001:db8::1", "2001:db8:1::1");
	pkt_icmp(p, 128, 0);
	pkt_finish(p, 0);
}

static void frame_icmp_odd(struct pkt *p)
{
	pkt_eth(p, NULL, NULL);
	pkt_ipv4(p, "192.0.2.1", "198.51.100.1");
	pkt_icmp(p, 8, 0);
	pkt_finish(p, 71);
}

/*
 * Golden frames, their checksums computed by an independent
 * implementation (Python) when the fixtures were written.
 */
static const struct {
	const char *desc;
	void (*make)(struct pkt *p);
	const char *hex;
} golden[] = {
	{ "IPv4/UDP padded to 60", frame_ipv4_udp,
		  "02000000000202000000000108004500002e1234000040117c55c000"
		  "0201c63364019c400035001a770e0000000000000000000000000000"
		  "00000000" },
	{ "802.1Q/IPv4+options (MF)/TCP SYN", frame_vlan_ipv4opt_syn,
		  "02000000000202000000000181000064080047000030123420004006"
		  "565bc0000201c633640101010101010101009c400050000000010000"
		  "00005002ffff271b0000" },
	{ "IPv6/hop-by-hop/TCP SYN-ACK padded to 100", frame_ipv6_hbh_synack,
		  "02000000000202000000000186dd60000000002e004020010db80000"
		  "0000000000000000000120010db80001000000000000000000010600"
		  "0104000000009c4001bb00000001000000015012ffffb64e00000000"
		  "00000000000000000000000000000000" },
	{ "IPv6/ICMPv6 echo", frame_icmpv6,
		  "02000000000202000000000186dd6000000000083a4020010db80000"
		  "0000000000000000000120010db80001000000000000000000018000"
		  "e20442420001" },
	{ "IPv4/ICMP echo, odd length 71", frame_icmp_odd,
		  "0200000000020200000000010800450000391234000040017c5ac000"
		  "0201c63364010800b5bc424200010000000000000000000000000000"
		  "000000000000000000000000000000" },
};

static void test_builder(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(golden); i++) {
		const char *h = golden[i].hex;
		size_t n = strlen(h) / 2, k;
		struct pkt p;

		pkt_init(&p);
		golden[i].make(&p);
		for (k = 0; k < n && k < p.len; k++) {
			unsigned int b;

			sscanf(h + 2 * k, "%2x", &b);
			if (p.buf[k] != b)
				break;
		}
		if (k != n || p.len != n)
			diag("frame differs at byte %zu (length %zu, golden "
			     "%zu)", k, p.len, n);
		tap(k == n && p.len == n && pkt_verify_l4(&p) == 0,
		    "builder: %s is byte-exact with valid checksums",
		    golden[i].desc);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_builder();
	return h_end();
}
