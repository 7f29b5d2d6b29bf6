// SPDX-License-Identifier: GPL-2.0
/*
 * Header parsing: which rule each protocol, VLAN/QinQ tagging, IPv4
 * options, IPv6 extension chain and fragment lands in, the malformed
 * frames and their host stats, and every truncation length, with
 * malformed frames dropped and (a second plane) passed.
 */
#include <errno.h>
#include <stddef.h>

#include "harness.h"

static const char *const rules_proto =
	"{\"rules\":["
	OPEN("tcp80", "{\"proto\":\"tcp\",\"dport\":80}") ","
	"{\"name\":\"syn443\",\"match\":{\"proto\":\"tcp\",\"dport\":443},"
	"\"grade\":\"cps\",\"count\":100000000000},"
	OPEN("udp53", "{\"proto\":\"udp\",\"dport\":53}") ","
	OPEN("udp-any", "{\"proto\":\"udp\"}") ","
	OPEN("icmp", "{\"proto\":\"icmp\"}") ","
	OPEN("icmp6", "{\"proto\":\"icmpv6\"}")
	"]}";

static void ip4_version5(struct pkt *p)
{
	p->buf[p->l3_off] = 0x55;
}

static void ip4_ihl4(struct pkt *p)
{
	p->buf[p->l3_off] = 0x44;
}

/* IHL 15 (60 bytes) in a frame with 28 bytes after Ethernet */
static void ip4_ihl_past_end(struct pkt *p)
{
	p->buf[p->l3_off] = 0x4f;
}

static void ip6_version4(struct pkt *p)
{
	p->buf[p->l3_off] = 0x40;
}

/* a non-first fragment whose payload reads as a UDP header to port 53 */
static void payload_port53(struct pkt *p)
{
	p->buf[p->l3_off + 20 + 2] = 0;
	p->buf[p->l3_off + 20 + 3] = 53;
}

/* the first extension header claims 2048 bytes */
static void ip6_ext_past_end(struct pkt *p)
{
	p->buf[p->l3_off + 40 + 1] = 255;
}

#define HBH IPPROTO_HOPOPTS
#define RT  IPPROTO_ROUTING
#define DO  IPPROTO_DSTOPTS
#define FR  IPPROTO_FRAGMENT

_Static_assert(SLUICE_MAX_IPV6_EXT + 1 <= 16, "pspec.ext holds the chain");

static struct fixture fx_proto[] = {
	{ "IPv4 TCP ACK to 80",
	  { .proto = TCP_, .dport = 80, .flags = PKT_ACK },
	  P(XDP_PASS, "tcp80") },
	{ "IPv4 TCP SYN to 80 (a pps rule sees SYNs too)",
	  { .proto = TCP_, .dport = 80, .flags = PKT_SYN },
	  P(XDP_PASS, "tcp80") },
	{ "IPv4 TCP SYN to 443 counts against the cps rule",
	  { .proto = TCP_, .dport = 443, .flags = PKT_SYN },
	  P(XDP_PASS, "syn443") },
	{ "IPv4 TCP SYN-ACK to 443 is not a new connection",
	  { .proto = TCP_, .dport = 443, .flags = PKT_SYN | PKT_ACK },
	  UNMATCHED },
	{ "IPv4 TCP ACK to 443 is unmatched by the cps rule",
	  { .proto = TCP_, .dport = 443, .flags = PKT_ACK }, UNMATCHED },
	{ "IPv4 TCP FIN to 443", { .proto = TCP_, .dport = 443,
				   .flags = PKT_FIN | PKT_ACK }, UNMATCHED },
	{ "IPv4 UDP to 53", { .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv4 UDP to 54 falls to the proto-only rule", { .dport = 54 },
	  P(XDP_PASS, "udp-any") },
	{ "IPv4 ICMP echo", { .proto = IPPROTO_ICMP }, P(XDP_PASS, "icmp") },
	{ "IPv4 GRE: no rule for other protocols",
	  { .proto = IPPROTO_GRE }, UNMATCHED },
	{ "IPv6 TCP ACK to 80", { .family = 6, .proto = TCP_, .dport = 80,
				  .flags = PKT_ACK }, P(XDP_PASS, "tcp80") },
	{ "IPv6 TCP SYN to 443", { .family = 6, .proto = TCP_, .dport = 443,
				   .flags = PKT_SYN }, P(XDP_PASS, "syn443") },
	{ "IPv6 TCP SYN-ACK to 443", { .family = 6, .proto = TCP_,
				       .dport = 443,
				       .flags = PKT_SYN | PKT_ACK },
	  UNMATCHED },
	{ "IPv6 UDP to 53", { .family = 6, .dport = 53 },
	  P(XDP_PASS, "udp53") },
	{ "IPv6 ICMPv6 echo", { .family = 6, .proto = IPPROTO_ICMPV6 },
	  P(XDP_PASS, "icmp6") },
	{ "IPv6 no next header (59)", { .family = 6, .proto = 59 },
	  UNMATCHED },
	{ "IPv6 with ICMP's (v4) number 1 is not ICMP: no icmp rule",
	  { .family = 6, .proto = IPPROTO_ICMP }, UNMATCHED },
	{ "IPv4 with ICMPv6's number 58 is not ICMPv6: no icmpv6 rule",
	  { .proto = IPPROTO_ICMPV6 }, UNMATCHED },
	{ "802.1Q IPv4 UDP to 53", { .tags = 1, .dport = 53 },
	  P(XDP_PASS, "udp53") },
	{ "802.1Q IPv6 TCP to 80", { .tags = 1, .family = 6, .proto = TCP_,
				     .dport = 80, .flags = PKT_ACK },
	  P(XDP_PASS, "tcp80") },
	{ "802.1ad+802.1Q IPv4 UDP to 53", { .tags = 2, .dport = 53 },
	  P(XDP_PASS, "udp53") },
	{ "802.1ad+802.1Q IPv6 ICMPv6", { .tags = 2, .family = 6,
					  .proto = IPPROTO_ICMPV6 },
	  P(XDP_PASS, "icmp6") },
	{ "802.1ad+802.1Q IPv4 TCP SYN to 443",
	  { .tags = 2, .proto = TCP_, .dport = 443, .flags = PKT_SYN },
	  P(XDP_PASS, "syn443") },
	{ "three VLAN tags are malformed", { .tags = 3, .dport = 53 },
	  .verdict = XDP_DROP, .host = HOST(MALFORMED_VLAN) },
	{ "ARP passes unmatched", { .ethertype = ETH_P_ARP }, UNMATCHED },
	{ "802.1Q ARP passes unmatched", { .tags = 1, .ethertype = ETH_P_ARP },
	  UNMATCHED },
	{ "IPv4 with 4 bytes of options, UDP to 53",
	  { .ip4_optlen = 4, .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv4 with 40 bytes of options, TCP to 80",
	  { .ip4_optlen = 40, .proto = TCP_, .dport = 80, .flags = PKT_ACK },
	  P(XDP_PASS, "tcp80") },
	{ "IPv4 first fragment (MF, offset 0) has L4: dport rule",
	  { .mf = true, .dport = 53, .size = 200 }, P(XDP_PASS, "udp53") },
	/* udp53 and tcp80 need the port: a fragment without its first is
	 * unclassified (tests/bpf/test_frag.c has the datagrams) */
	{ "IPv4 non-first UDP fragment without its first: dropped",
	  { .frag_id = 0x101, .frag = 185, .mf = true }, .verdict = XDP_DROP,
	  .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
	{ "IPv4 last UDP fragment (offset, no MF) without its first",
	  { .frag_id = 0x102, .frag = 100 }, .verdict = XDP_DROP,
	  .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
	{ "IPv4 non-first UDP fragment whose payload looks like port 53",
	  { .frag_id = 0x103, .frag = 1, .mf = true, .mangle = payload_port53 },
	  .verdict = XDP_DROP, .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
	{ "IPv4 non-first TCP fragment without its first: dropped",
	  { .frag_id = 0x104, .proto = TCP_, .frag = 3 }, .verdict = XDP_DROP,
	  .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
	{ "IPv4 non-first ICMP fragment: icmp rule",
	  { .frag_id = 0x105, .proto = IPPROTO_ICMP, .frag = 3 }, P(XDP_PASS, "icmp"),
	  .host = HOST(FRAGMENTS) },
	{ "IPv4 version 5 is malformed",
	  { .dport = 53, .mangle = ip4_version5 },
	  .verdict = XDP_DROP, .host = HOST(MALFORMED_IP4) },
	{ "IPv4 IHL 4 is malformed", { .dport = 53, .mangle = ip4_ihl4 },
	  .verdict = XDP_DROP, .host = HOST(MALFORMED_IP4) },
	{ "IPv4 IHL past the end of the frame is malformed",
	  { .dport = 53, .mangle = ip4_ihl_past_end },
	  .verdict = XDP_DROP, .host = HOST(MALFORMED_IP4) },
	{ "IPv6 header with version 4 is malformed",
	  { .family = 6, .dport = 53, .mangle = ip6_version4 },
	  .verdict = XDP_DROP, .host = HOST(MALFORMED_IP6) },
	{ "IPv6 hop-by-hop, UDP to 53",
	  { .family = 6, .n_ext = 1, .ext = { HBH }, .dport = 53 },
	  P(XDP_PASS, "udp53") },
	{ "IPv6 routing, TCP to 80",
	  { .family = 6, .n_ext = 1, .ext = { RT }, .proto = TCP_,
	    .dport = 80 }, P(XDP_PASS, "tcp80") },
	{ "IPv6 destination options, TCP SYN to 443",
	  { .family = 6, .n_ext = 1, .ext = { DO }, .proto = TCP_,
	    .dport = 443, .flags = PKT_SYN }, P(XDP_PASS, "syn443") },
	{ "IPv6 64-byte hop-by-hop, UDP to 53",
	  { .family = 6, .n_ext = 1, .ext = { HBH }, .ext_len = 64,
	    .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv6 first fragment (offset 0, M), UDP to 53",
	  { .family = 6, .n_ext = 1, .ext = { FR }, .mf = true,
	    .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv6 chain HBH, DO, RT, FRAG(first), DO, UDP to 53",
	  { .family = 6, .n_ext = 5, .ext = { HBH, DO, RT, FR, DO },
	    .mf = true, .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv6 chain HBH, DO, RT, DO, ICMPv6",
	  { .family = 6, .n_ext = 4, .ext = { HBH, DO, RT, DO },
	    .proto = IPPROTO_ICMPV6 }, P(XDP_PASS, "icmp6") },
	{ "IPv6 non-first UDP fragment without its first: dropped",
	  { .frag_id = 0x106, .family = 6, .n_ext = 1, .ext = { FR }, .frag = 10, .mf = true },
	  .verdict = XDP_DROP, .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
	{ "IPv6 HBH, RT, non-first TCP fragment without its first",
	  { .frag_id = 0x107, .family = 6, .n_ext = 3, .ext = { HBH, RT, FR }, .frag = 7,
	    .proto = TCP_ }, .verdict = XDP_DROP,
	  .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
	{ "IPv6 non-first ICMPv6 fragment: icmpv6 rule",
	  { .frag_id = 0x108, .family = 6, .n_ext = 1, .ext = { FR }, .frag = 2,
	    .proto = IPPROTO_ICMPV6 }, P(XDP_PASS, "icmp6"),
	  .host = HOST(FRAGMENTS) },
	/* the two below get their chains filled in at run time */
	{ "IPv6 with SLUICE_MAX_IPV6_EXT extension headers parses",
	  { .family = 6, .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv6 with SLUICE_MAX_IPV6_EXT + 1 extension headers: unclassified",
	  { .family = 6, .dport = 53 }, .verdict = XDP_DROP,
	  .host = HOST(IP6_CHAIN) },
	{ "IPv6 extension header longer than the frame is malformed",
	  { .family = 6, .n_ext = 1, .ext = { DO }, .dport = 53,
	    .mangle = ip6_ext_past_end }, .verdict = XDP_DROP,
	  .host = HOST(MALFORMED_IP6) },
};

static void test_protocols(struct sl_dataplane *dp)
{
	size_t n = ARRAY_SIZE(fx_proto);

	/* the chains of SLUICE_MAX_IPV6_EXT and one more headers */
	for (int k = 0; k < 2; k++) {
		struct pspec *s = &fx_proto[n - 3 + k].pkt;

		s->n_ext = SLUICE_MAX_IPV6_EXT + k;
		for (int i = 0; i < s->n_ext; i++)
			s->ext[i] = i == 0 ? HBH : i == 3 ? RT : DO;
	}
	next_scenario();
	if (!tap(apply(dp, rules_proto) == 0, "protocols: rule set applies"))
		return;
	RUN_TABLE(dp, "protocols", fx_proto);
}


/* ---- tunnels: IP-in-IP and GRE by their inner header ---------------- */

#define GRE_ IPPROTO_GRE
#define IPIP IPPROTO_IPIP

/* the GRE header's protocol type: Ethernet (a bridge), not IP */
static void gre_carries_ethernet(struct pkt *p)
{
	p->buf[p->outer_off + 20 + 2] = 0x65;
	p->buf[p->outer_off + 20 + 3] = 0x58;
}

/* the frame ends 8 bytes into the inner IPv4 header */
static void inner_cut(struct pkt *p)
{
	p->len = p->l3_off + 8;
}

static const struct fixture fx_tunnel_inner[] = {
	{ "IPv4 in IPv4, UDP to 53: the inner header's rule",
	  { .tunnel = IPIP, .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv6 in IPv4, UDP to 53",
	  { .tunnel = IPIP, .family = 6, .dport = 53 },
	  P(XDP_PASS, "udp53") },
	{ "IPv4 in IPv6, TCP SYN to 443: the cps rule",
	  { .tunnel = IPIP, .outer_family = 6, .proto = TCP_, .dport = 443,
	    .flags = PKT_SYN }, P(XDP_PASS, "syn443") },
	{ "IPv6 in IPv6, ICMPv6",
	  { .tunnel = IPIP, .outer_family = 6, .family = 6,
	    .proto = IPPROTO_ICMPV6 }, P(XDP_PASS, "icmp6") },
	{ "GRE with a key, IPv4 TCP ACK to 80",
	  { .tunnel = GRE_, .gre_flags = PKT_GRE_KEY, .proto = TCP_,
	    .dport = 80, .flags = PKT_ACK }, P(XDP_PASS, "tcp80") },
	{ "GRE with checksum, key and sequence in IPv6, IPv6 UDP to 53",
	  { .tunnel = GRE_, .outer_family = 6,
	    .gre_flags = PKT_GRE_CSUM | PKT_GRE_KEY | PKT_GRE_SEQ,
	    .family = 6, .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "GRE version 1 (PPTP): the outer header, no rule for GRE",
	  { .tunnel = GRE_, .gre_flags = 1, .dport = 53 }, UNMATCHED },
	{ "GRE with the routing bit: the outer header",
	  { .tunnel = GRE_, .gre_flags = 0x4000, .dport = 53 }, UNMATCHED },
	{ "GRE carrying Ethernet: the outer header",
	  { .tunnel = GRE_, .dport = 53, .mangle = gre_carries_ethernet },
	  UNMATCHED },
	{ "IP in IP, the outer datagram's first fragment: the outer header",
	  { .tunnel = IPIP, .outer_mf = true, .dport = 53 }, UNMATCHED },
	{ "IP in IP, the inner header cut short: malformed, dropped",
	  { .tunnel = IPIP, .dport = 53, .mangle = inner_cut },
	  .verdict = XDP_DROP, .host = HOST(MALFORMED_IP4) },
};

static const struct fixture fx_tunnel_outer[] = {
	{ "IPv4 in IPv4, UDP to 53: the outer header, no rule for IPIP",
	  { .tunnel = IPIP, .dport = 53 }, UNMATCHED },
	{ "GRE with a key, TCP ACK to 80: the outer header",
	  { .tunnel = GRE_, .gre_flags = PKT_GRE_KEY, .proto = TCP_,
	    .dport = 80, .flags = PKT_ACK }, UNMATCHED },
};

static void test_tunnels(struct sl_dataplane *outer, struct sl_dataplane *inner)
{
	next_scenario();
	if (!tap(apply(outer, rules_proto) == 0 &&
		 (!inner || apply(inner, rules_proto) == 0),
		 "tunnels: rule set applies"))
		return;
	RUN_TABLE(outer, "tunnels outer", fx_tunnel_outer);
	if (inner)
		RUN_TABLE(inner, "tunnels inner", fx_tunnel_inner);
}

/* ---- truncation at every byte offset -------------------------------- */

struct region {
	size_t end;		/* frames shorter than this ... */
	int stat;		/* ... are counted here */
};

struct trunc_case {
	const char *desc;
	struct pspec pkt;
	const char *rule;	/* what the whole header matches */
	struct region reg[6];	/* ascending; the last end = header size */
};

#define EINV(e)	 { e, -EINVAL }
#define VLAN(e)	 { e, SLUICE_ST_MALFORMED_VLAN }
#define IP4(e)	 { e, SLUICE_ST_MALFORMED_IP4 }
#define IP6(e)	 { e, SLUICE_ST_MALFORMED_IP6 }
#define L4(e)	 { e, SLUICE_ST_MALFORMED_L4 }

static const struct trunc_case trunc_cases[] = {
	{ "IPv4/UDP", { .dport = 53 }, "udp53",
	  { EINV(14), IP4(34), L4(42) } },
	{ "IPv4/TCP", { .proto = TCP_, .dport = 80, .flags = PKT_ACK }, "tcp80",
	  { EINV(14), IP4(34), L4(54) } },
	{ "IPv4+options/TCP", { .ip4_optlen = 12, .proto = TCP_, .dport = 80,
				.flags = PKT_ACK }, "tcp80",
	  { EINV(14), IP4(46), L4(66) } },
	{ "IPv6/UDP", { .family = 6, .dport = 53 }, "udp53",
	  { EINV(14), IP6(54), L4(62) } },
	{ "IPv6/HBH(16)/FRAG/DO(16)/TCP",
	  { .family = 6, .n_ext = 3, .ext = { HBH, FR, DO }, .ext_len = 16,
	    .proto = TCP_, .dport = 80, .flags = PKT_ACK }, "tcp80",
	  /* a cut anywhere inside an extension header is an IPv6 error */
	  { EINV(14), IP6(54), IP6(70), IP6(78), IP6(94), L4(114) } },
	{ "802.1Q/IPv4/UDP", { .tags = 1, .dport = 53 }, "udp53",
	  { EINV(14), VLAN(18), IP4(38), L4(46) } },
	{ "IPv4/ICMP", { .proto = IPPROTO_ICMP }, "icmp",
	  { EINV(14), IP4(34), L4(42) } },
	{ "802.1ad+802.1Q/IPv6/ICMPv6", { .tags = 2, .family = 6,
					   .proto = IPPROTO_ICMPV6 }, "icmp6",
	  { EINV(14), VLAN(22), IP6(62), L4(70) } },
};

static int expected_stat(const struct trunc_case *c, size_t len)
{
	for (int i = 0; i < 6 && c->reg[i].end; i++)
		if (len < c->reg[i].end)
			return c->reg[i].stat;
	return 0;
}

static size_t header_size(const struct trunc_case *c)
{
	size_t end = 0;

	for (int i = 0; i < 6 && c->reg[i].end; i++)
		end = c->reg[i].end;
	return end;
}

/*
 * Every length from 0 to the full header: shorter than Ethernet the
 * kernel refuses the run; inside the headers the frame is malformed and
 * counted in the stat of the header that is cut; the whole header
 * matches its rule. malformed is the verdict for malformed frames.
 */
static void test_truncation_on(struct sl_dataplane *d, const char *dname,
			       int malformed)
{
	for (size_t i = 0; i < ARRAY_SIZE(trunc_cases); i++) {
		const struct trunc_case *c = &trunc_cases[i];
		size_t hsize = header_size(c);
		struct snap a, b;
		struct pkt p;
		int bad = 0;

		build(&c->pkt, &p);
		if (p.len < hsize) {
			tap(false, "truncation %s (%s): fixture is %zu bytes, "
				   "header table says %zu",
			    c->desc, dname, p.len, hsize);
			continue;
		}
		for (size_t len = 0; len <= hsize; len++) {
			int want = expected_stat(c, len), v;
			int want_v = want ? malformed : XDP_PASS;

			take_snap(d, &a);
			v = run_len(d, p.buf, len);
			take_snap(d, &b);
			if (want == -EINVAL) {
				if (v != -EINVAL) {
					diag("%s len %zu: run returned %s, "
					     "expected the kernel to refuse",
					     c->desc, len, verdict_str(v));
					bad++;
				}
				continue;
			}
			if (v != want_v) {
				diag("%s len %zu: verdict %s, expected %s",
				     c->desc, len, verdict_str(v),
				     verdict_str(want_v));
				bad++;
			}
			if (check_deltas(d, &a, &b, want ? NULL : c->rule,
					 PASSED, want ? 1u << want : 0, 1,
					 len)) {
				diag("%s len %zu: expected %s", c->desc, len,
				     want ? sl_host_stat_name(want)
					  : c->rule);
				bad++;
			}
		}
		tap(!bad,
		    "truncation %s (%s): every length 0..%zu gives the "
		    "documented verdict and stat",
		    c->desc, dname, hsize);
	}
}

/* dp_pass: the pass_unclassified plane, NULL when it did not load */
static void test_truncation(struct sl_dataplane *dp,
			    struct sl_dataplane *dp_pass)
{
	next_scenario();
	if (!tap(apply(dp, rules_proto) == 0, "truncation: rule set applies"))
		return;
	test_truncation_on(dp, "malformed dropped", XDP_DROP);
	if (!dp_pass) {
		tap_skip("second data plane did not load",
			 "truncation with pass_unclassified");
		return;
	}
	if (!tap(apply(dp_pass, rules_proto) == 0,
		 "truncation: rule set applies to the pass_unclassified plane"))
		return;
	test_truncation_on(dp_pass, "pass_unclassified", XDP_PASS);
	{
		static const struct fixture fx[] = {
			{ "ARP still passes", { .ethertype = ETH_P_ARP },
			  UNMATCHED },
			{ "three VLAN tags pass", { .tags = 3 },
			  .verdict = XDP_PASS,
			  .host = HOST(MALFORMED_VLAN) },
			{ "IPv4 IHL 4 passes",
			  { .dport = 53, .mangle = ip4_ihl4 },
			  .verdict = XDP_PASS,
			  .host = HOST(MALFORMED_IP4) },
			{ "a fragment without its first passes, counted",
			  { .frag = 9, .frag_id = 0x109 }, .verdict = XDP_PASS,
			  .host = HOST(FRAGMENTS) | HOST(FRAG_ORPHAN) },
		};

		RUN_TABLE(dp_pass, "pass_unclassified", fx);
	}
}

int main(void)
{
	struct sl_dp_opts od = { .test_clock = true, .pass_unclassified = true };
	struct sl_dp_opts oi = { .test_clock = true, .tunnels_inner = true };
	struct sl_dataplane dp, dp_pass, dp_inner;
	bool pass_loaded, inner_loaded;
	int err;

	if (h_begin(&dp))
		return h_end();
	tap(true, "data plane loads with the test clock (%d CPUs)", dp.n_cpus);
	err = h_load(&dp_pass, &od);
	pass_loaded = !err;
	tap(!err, "a second data plane loads with pass_unclassified (%d)",
	    err);

	err = h_load(&dp_inner, &oi);
	inner_loaded = !err;
	tap(!err, "a third data plane loads with tunnels_inner (%d)", err);

	test_protocols(&dp);
	test_tunnels(&dp, inner_loaded ? &dp_inner : NULL);
	test_truncation(&dp, pass_loaded ? &dp_pass : NULL);

	if (inner_loaded)
		h_unload(&dp_inner);
	if (pass_loaded)
		h_unload(&dp_pass);
	h_unload(&dp);
	return h_end();
}
