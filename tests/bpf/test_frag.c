// SPDX-License-Identifier: GPL-2.0
/*
 * Fragmented datagrams and packets sluice cannot classify: a datagram's
 * later fragments judged by its first fragment's rule (bps charged, pps
 * and cps one packet a datagram), in order and out of it, IPv4 and the
 * IPv6 Fragment header; a first fragment too small for its L4 header, an
 * IPv6 chain longer than the walk; and each of those classified as usual
 * where no rule in force needs what it lacks.
 */
#include <inttypes.h>

#include "harness.h"

#define DO IPPROTO_DSTOPTS
#define FR IPPROTO_FRAGMENT

static const char *const rules_ports =
	RULES("{\"name\":\"udp9000\",\"match\":{\"proto\":\"udp\","
	      "\"dport\":9000},\"grade\":\"pps\",\"count\":10},"
	      "{\"name\":\"bps9100\",\"match\":{\"proto\":\"udp\","
	      "\"dport\":9100},\"grade\":\"bps\",\"count\":3000},"
	      "{\"name\":\"syn8080\",\"match\":{\"proto\":\"tcp\","
	      "\"dport\":8080},\"grade\":\"cps\",\"count\":10}");

/* A frame of s cut to cut bytes (0: whole); its verdict. */
static int run_spec(struct sl_dataplane *d, const struct pspec *s, size_t cut)
{
	struct pkt p;

	build(s, &p);
	return run_len(d, p.buf, cut && cut < p.len ? cut : p.len);
}

/* The first fragment of datagram id to dport (IPv4 or 6) and, after it,
 * n later ones; how many of the later ones passed (-1: the first did
 * not). */
static int datagram(struct sl_dataplane *d, int family, uint32_t id,
		    uint16_t dport, int n, uint16_t size)
{
	struct pspec first = { .family = family, .dport = dport, .mf = true,
			       .frag_id = id, .size = size };
	int passed = 0;

	if (family == 6) {
		first.n_ext = 1;
		first.ext[0] = FR;
	}
	if (run_spec(d, &first, 0) != XDP_PASS)
		passed = -1;
	for (int i = 1; i <= n; i++) {
		struct pspec later = first;

		later.frag = i * 128;
		later.mf = i < n;
		if (run_spec(d, &later, 0) == XDP_PASS && passed >= 0)
			passed++;
	}
	return passed;
}

static uint64_t host_delta(const struct snap *a, const struct snap *b,
			   int st)
{
	return b->host[st] - a->host[st];
}

/* pps: 20 datagrams of 4 fragments against a count of 10 take 10 of the
 * rule's packets; each admitted datagram arrives whole, both families. */
static void test_pps_datagrams(struct sl_dataplane *d, int family)
{
	struct sl_rule_stats st0, st;
	int whole = 0, firsts = 0;

	next_scenario();
	if (!tap(apply(d, rules_ports) == 0, "pps IPv%d: rules apply", family))
		return;
	st0 = rule_stats(d, "udp9000");
	for (uint32_t id = 1; id <= 20; id++) {
		int got = datagram(d, family, 0x100 + id, 9000, 3, 0);

		firsts += got >= 0;
		whole += got == 3;
	}
	st = rule_stats(d, "udp9000");
	st.passed_pkts -= st0.passed_pkts;
	st.blocked_pkts -= st0.blocked_pkts;
	tap(firsts == 10 && whole == 10 && st.passed_pkts == 10 &&
		    st.blocked_pkts == 10,
	    "pps IPv%d: 20 datagrams of 4 fragments, count 10: %d first "
	    "fragments pass, %d datagrams whole; the rule counts %" PRIu64
	    " passed, %" PRIu64 " blocked (10 and 10: one packet a "
	    "datagram)",
	    family, firsts, whole, st.passed_pkts, st.blocked_pkts);
}

/* bps: the later fragments' bytes are charged; a count of 3000 B/s
 * passes at most 3000 bytes of 1000-byte fragments in the window. */
static void test_bps_charged(struct sl_dataplane *d)
{
	struct sl_rule_stats st;
	long passed = 0;

	next_scenario();
	if (!tap(apply(d, rules_ports) == 0, "bps: rules apply"))
		return;
	for (uint32_t id = 1; id <= 4; id++) {
		int got = datagram(d, 4, 0x200 + id, 9100, 3, 1000);

		passed += (got >= 0) + (got > 0 ? got : 0);
	}
	st = rule_stats(d, "bps9100");
	tap(passed == 3 && st.passed_bytes == 3000 &&
		    st.blocked_pkts == 16 - 3,
	    "bps: 4 datagrams of 4 fragments of 1000 bytes, count 3000 B/s: "
	    "%ld fragments pass (3), the rule passed %" PRIu64
	    " bytes (3000), blocked %" PRIu64 " fragments (13)",
	    passed, st.passed_bytes, st.blocked_pkts);
}

/* Layers: a datagram's later fragments are charged to its bps layers
 * only; a pps layer counts the datagram once, at its first fragment. */
static void test_layers_charged(struct sl_dataplane *d)
{
	struct sl_rule_stats dg, bytes;
	long passed = 0;

	next_scenario();
	if (!tap(apply(d, RULES("{\"name\":\"dg\",\"match\":{\"proto\":"
				"\"udp\",\"dport\":9200},\"grade\":\"pps\","
				"\"count\":100},"
				"{\"name\":\"bytes\",\"match\":{\"proto\":"
				"\"udp\",\"dport\":9200},\"grade\":\"bps\","
				"\"count\":3000,\"layer\":1}")) == 0,
		 "layers: rules apply"))
		return;
	for (uint32_t id = 1; id <= 4; id++) {
		int got = datagram(d, 4, 0x300 + id, 9200, 3, 1000);

		passed += (got >= 0) + (got > 0 ? got : 0);
	}
	dg = rule_stats(d, "dg");
	bytes = rule_stats(d, "bytes");
	tap(passed == 3 && dg.passed_pkts == 4 && dg.blocked_pkts == 0 &&
		    bytes.passed_bytes == 3000 && bytes.blocked_pkts == 13,
	    "layers: 4 datagrams of 4 fragments of 1000 bytes under pps 100 "
	    "then bps 3000: %ld fragments pass (3); the pps layer passed %"
	    PRIu64 " (4 datagrams), blocked %" PRIu64 "; the bps layer "
	    "passed %" PRIu64 " bytes (3000), blocked %" PRIu64
	    " fragments (13)",
	    passed, dg.passed_pkts, dg.blocked_pkts, bytes.passed_bytes,
	    bytes.blocked_pkts);
}

/* A later fragment before its first is unclassified: dropped and
 * counted; the first, when it comes, is judged as usual. */
static void test_out_of_order(struct sl_dataplane *d)
{
	struct pspec later = { .frag = 100, .frag_id = 0x300, .dport = 9000 };
	struct pspec first = { .mf = true, .frag_id = 0x300, .dport = 9000 };
	struct snap a, b;
	int v1, v2, v3;

	next_scenario();
	if (!tap(apply(d, rules_ports) == 0, "out of order: rules apply"))
		return;
	take_snap(d, &a);
	v1 = run_spec(d, &later, 0);
	v2 = run_spec(d, &first, 0);
	v3 = run_spec(d, &later, 0);
	take_snap(d, &b);
	tap(v1 == XDP_DROP && v2 == XDP_PASS && v3 == XDP_PASS &&
		    host_delta(&a, &b, SLUICE_ST_FRAG_ORPHAN) == 1,
	    "out of order: a later fragment before its first %s (orphans "
	    "+%" PRIu64 "), the first %s, the later one again %s",
	    verdict_str(v1), host_delta(&a, &b, SLUICE_ST_FRAG_ORPHAN),
	    verdict_str(v2), verdict_str(v3));

	/* past the kernel's reassembly timeout the entry is gone */
	set_time(test_time() + SLUICE_FRAG_TTL_NS + NSEC_PER_SEC);
	v1 = run_spec(d, &later, 0);
	tap(v1 == XDP_DROP, "out of order: %llu s after its first, a later "
			    "fragment is an orphan again: %s",
	    (unsigned long long)(SLUICE_FRAG_TTL_NS / NSEC_PER_SEC + 1),
	    verdict_str(v1));
}

/* A SYN whose first fragment holds 8 bytes of TCP header: dropped, and
 * its second fragment (no entry) too; the evasion. */
static void test_tiny_first(struct sl_dataplane *d)
{
	struct pspec syn = { .proto = TCP_, .dport = 8080, .flags = PKT_SYN,
			     .mf = true, .frag_id = 0x400 };
	struct pspec rest = { .proto = TCP_, .frag = 1, .frag_id = 0x400 };
	struct pspec syn6 = syn;
	struct snap a, b;
	struct pkt p;
	int v1, v2, v3;

	syn6.family = 6;
	syn6.n_ext = 1;
	syn6.ext[0] = FR;
	next_scenario();
	if (!tap(apply(d, rules_ports) == 0, "tiny first: rules apply"))
		return;
	build(&syn, &p);
	take_snap(d, &a);
	v1 = run_len(d, p.buf, p.l4_off + 8);
	v2 = run_spec(d, &rest, 0);
	build(&syn6, &p);
	v3 = run_len(d, p.buf, p.l4_off + 8);
	take_snap(d, &b);
	tap(v1 == XDP_DROP && v2 == XDP_DROP && v3 == XDP_DROP &&
		    host_delta(&a, &b, SLUICE_ST_FRAG_TINY) == 2 &&
		    host_delta(&a, &b, SLUICE_ST_FRAG_ORPHAN) == 1 &&
		    host_delta(&a, &b, SLUICE_ST_MALFORMED_L4) == 0,
	    "tiny first: an IPv4 SYN's first fragment with 8 bytes of TCP %s, "
	    "its second %s, an IPv6 one %s (tiny +%" PRIu64 ", orphans +%"
	    PRIu64 ")",
	    verdict_str(v1), verdict_str(v2), verdict_str(v3),
	    host_delta(&a, &b, SLUICE_ST_FRAG_TINY),
	    host_delta(&a, &b, SLUICE_ST_FRAG_ORPHAN));
}

/* UDP behind 9 destination-options headers, one more than the walk. */
static void test_ipv6_chain(struct sl_dataplane *d)
{
	struct pspec s = { .family = 6, .dport = 9000,
			   .n_ext = SLUICE_MAX_IPV6_EXT + 1 };
	struct snap a, b;
	int v;

	for (int i = 0; i < s.n_ext; i++)
		s.ext[i] = DO;
	next_scenario();
	if (!tap(apply(d, rules_ports) == 0, "IPv6 chain: rules apply"))
		return;
	take_snap(d, &a);
	v = run_spec(d, &s, 0);
	take_snap(d, &b);
	tap(v == XDP_DROP && host_delta(&a, &b, SLUICE_ST_IP6_CHAIN) == 1,
	    "IPv6 chain: UDP to 9000 behind %d destination options %s "
	    "(ipv6_chain +%" PRIu64 ")",
	    s.n_ext, verdict_str(v), host_delta(&a, &b, SLUICE_ST_IP6_CHAIN));
}

/* What no rule needs is not missed: such packets are classified. */
static void test_not_needed(struct sl_dataplane *d)
{
	static const char *const tcp_only = RULES(
		OPEN("tcp8080", "{\"proto\":\"tcp\",\"dport\":8080}") ","
		OPEN("all6", "{\"dst\":\"2001:db8::/32\"}"));
	static const char *const any_only = RULES(
		OPEN("all6", "{\"dst\":\"2001:db8::/32\"}"));
	struct pspec orphan = { .frag = 100, .frag_id = 0x500 };
	struct pspec chain = { .family = 6, .dport = 9000,
			       .n_ext = SLUICE_MAX_IPV6_EXT + 1 };
	struct pspec tiny_udp = { .dport = 53, .mf = true, .frag_id = 0x501 };
	struct pkt p;
	int v1, v2, v3, v4;

	for (int i = 0; i < chain.n_ext; i++)
		chain.ext[i] = DO;
	next_scenario();
	if (!tap(apply(d, tcp_only) == 0, "not needed: tcp rule applies"))
		return;
	v1 = run_spec(d, &orphan, 0);
	build(&tiny_udp, &p);
	v2 = run_len(d, p.buf, p.l4_off + 4);
	v3 = run_spec(d, &chain, 0);
	if (!tap(apply(d, any_only) == 0, "not needed: any rule applies"))
		return;
	{
		struct snap a, b;

		build(&chain, &p);
		take_snap(d, &a);
		v4 = run(d, &p);
		take_snap(d, &b);
		tap(v1 == XDP_PASS && v2 == XDP_PASS && v3 == XDP_DROP &&
			    v4 == XDP_PASS &&
			    !check_deltas(d, &a, &b, "all6", PASSED, 0, 1,
					  p.len),
		    "not needed: with only a TCP port rule, a UDP orphan %s and "
		    "a tiny UDP first fragment %s, an unfinished IPv6 chain %s "
		    "(the protocol is needed); with only an address rule the "
		    "chain %s, judged by it",
		    verdict_str(v1), verdict_str(v2), verdict_str(v3),
		    verdict_str(v4));
	}
}

int main(void)
{
	struct sl_dataplane dp;

	if (h_begin(&dp))
		return h_end();
	test_pps_datagrams(&dp, 4);
	test_pps_datagrams(&dp, 6);
	test_bps_charged(&dp);
	test_layers_charged(&dp);
	test_out_of_order(&dp);
	test_tiny_first(&dp);
	test_ipv6_chain(&dp);
	test_not_needed(&dp);
	h_unload(&dp);
	return h_end();
}
