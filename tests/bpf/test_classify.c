// SPDX-License-Identifier: GPL-2.0
/*
 * Classification: which of overlapping rules a frame lands in (priority,
 * prefix lengths of dst and src, port ranges, protocol, family), a set of
 * SL_MAX_RULES rules sampled, and the destination cache across swaps.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* ---- precedence between overlapping rules ---------------------------- */

struct prec_case {
	const char *group;
	const char *json;
	struct fixture fx[12];	/* up to the first without desc */
};

#define PRIO(name, match, prio)                                             \
	"{\"name\":\"" name "\",\"match\":" match                           \
	",\"grade\":\"pps\",\"count\":100000000000,\"priority\":" #prio "}"

static const struct prec_case prec_cases[] = {
	{ "priority beats specificity",
	  RULES(OPEN("specific", "{\"proto\":\"udp\",\"dport\":53,"
				 "\"dst\":\"198.51.100.1/32\","
				 "\"src\":\"192.0.2.0/24\"}") ","
		PRIO("prio5", "{\"proto\":\"udp\"}", 5) ","
		PRIO("prio10", "{}", 10) ","
		PRIO("prio20-v6", "{\"dst\":\"2001::/16\"}", 20)),
	  { { "UDP 53 to the specific rule's /32 goes to priority 10",
	      { .dport = 53 }, P(XDP_PASS, "prio10") },
	    { "TCP goes to priority 10 (5 is udp only)",
	      { .proto = TCP_, .dport = 53 }, P(XDP_PASS, "prio10") },
	    { "IPv6 UDP 53 goes to priority 20 (its dst matches)",
	      { .family = 6, .dport = 53 }, P(XDP_PASS, "prio20-v6") },
	    { "IPv6 outside priority 20's dst goes to priority 10",
	      { .family = 6, .dst = "2002::1", .dport = 53 },
	      P(XDP_PASS, "prio10") } } },
	{ "priority order",
	  RULES(PRIO("p3", "{\"proto\":\"udp\",\"dport\":53}", 3) ","
		PRIO("p7", "{\"proto\":\"udp\",\"dport\":\"1-1000\"}", 7) ","
		OPEN("p0", "{\"proto\":\"udp\",\"dport\":53,"
			   "\"dst\":\"198.51.100.1/32\"}")),
	  { { "priority 7 beats priority 3 and no priority", { .dport = 53 },
	      P(XDP_PASS, "p7") },
	    { "priority 7 only where it matches", { .dport = 1001 },
	      UNMATCHED } } },
	{ "longer dst prefix beats shorter",
	  RULES(OPEN("d8", "{\"dst\":\"10.0.0.0/8\"}") ","
		OPEN("d16", "{\"dst\":\"10.1.0.0/16\"}") ","
		OPEN("d32", "{\"dst\":\"10.1.2.3/32\"}") ","
		OPEN("d6-32", "{\"dst\":\"2001:db8::/32\"}") ","
		OPEN("d6-48", "{\"dst\":\"2001:db8:1::/48\"}")),
	  { { "10.1.2.3 -> /32", { .dst = "10.1.2.3" }, P(XDP_PASS, "d32") },
	    { "10.1.2.4 -> /16", { .dst = "10.1.2.4" }, P(XDP_PASS, "d16") },
	    { "10.2.0.1 -> /8", { .dst = "10.2.0.1" }, P(XDP_PASS, "d8") },
	    { "11.0.0.1 -> none", { .dst = "11.0.0.1" }, UNMATCHED },
	    { "2001:db8:1::1 -> /48", { .family = 6, .dst = "2001:db8:1::1" },
	      P(XDP_PASS, "d6-48") },
	    { "2001:db8:2::1 -> /32", { .family = 6, .dst = "2001:db8:2::1" },
	      P(XDP_PASS, "d6-32") },
	    { "2001:db9::1 -> none", { .family = 6, .dst = "2001:db9::1" },
	      UNMATCHED } } },
	{ "dst beats src",
	  RULES(OPEN("src32", "{\"src\":\"192.0.2.1/32\"}") ","
		OPEN("dst16", "{\"dst\":\"10.1.0.0/16\"}") ","
		OPEN("dst16-src24", "{\"dst\":\"10.1.0.0/16\","
				    "\"src\":\"192.0.3.0/24\"}") ","
		OPEN("dst24", "{\"dst\":\"10.1.1.0/24\"}")),
	  { { "dst /16 beats src /32",
	      { .src = "192.0.2.1", .dst = "10.1.9.9" },
	      P(XDP_PASS, "dst16") },
	    { "src /32 where no dst rule matches",
	      { .src = "192.0.2.1", .dst = "10.9.9.9" }, P(XDP_PASS, "src32") },
	    { "same dst: the one with a src wins",
	      { .src = "192.0.3.5", .dst = "10.1.9.9" },
	      P(XDP_PASS, "dst16-src24") },
	    { "dst /24 beats dst /16 + src /24",
	      { .src = "192.0.3.5", .dst = "10.1.1.1" }, P(XDP_PASS, "dst24") },
	    { "neither", { .src = "192.0.9.9", .dst = "10.9.9.9" },
	      UNMATCHED } } },
	{ "longer src prefix beats shorter",
	  RULES(OPEN("s16", "{\"src\":\"192.0.0.0/16\"}") ","
		OPEN("s24", "{\"src\":\"192.0.2.0/24\"}") ","
		OPEN("s32", "{\"src\":\"192.0.2.7/32\"}") ","
		OPEN("s6-64", "{\"src\":\"2001:db8::/64\"}")),
	  { { "192.0.2.7 -> /32", { .src = "192.0.2.7" }, P(XDP_PASS, "s32") },
	    { "192.0.2.8 -> /24", { .src = "192.0.2.8" }, P(XDP_PASS, "s24") },
	    { "192.0.3.1 -> /16", { .src = "192.0.3.1" }, P(XDP_PASS, "s16") },
	    { "192.1.0.1 -> none", { .src = "192.1.0.1" }, UNMATCHED },
	    { "2001:db8::5 -> v6 /64", { .family = 6, .src = "2001:db8::5" },
	      P(XDP_PASS, "s6-64") },
	    { "2001:db8:0:1::5 -> none",
	      { .family = 6, .src = "2001:db8:0:1::5" }, UNMATCHED } } },
	{ "narrower port range beats wider",
	  RULES(OPEN("wide", "{\"proto\":\"udp\",\"dport\":\"5000-5999\"}") ","
		OPEN("narrow",
		     "{\"proto\":\"udp\",\"dport\":\"5500-5510\"}") ","
		OPEN("single", "{\"proto\":\"udp\",\"dport\":5505}")),
	  { { "5505 -> single", { .dport = 5505 }, P(XDP_PASS, "single") },
	    { "5506 -> narrow", { .dport = 5506 }, P(XDP_PASS, "narrow") },
	    { "5500 -> narrow", { .dport = 5500 }, P(XDP_PASS, "narrow") },
	    { "5510 -> narrow", { .dport = 5510 }, P(XDP_PASS, "narrow") },
	    { "5511 -> wide", { .dport = 5511 }, P(XDP_PASS, "wide") },
	    { "5000 -> wide", { .dport = 5000 }, P(XDP_PASS, "wide") },
	    { "5999 -> wide", { .dport = 5999 }, P(XDP_PASS, "wide") },
	    { "4999 -> none", { .dport = 4999 }, UNMATCHED },
	    { "6000 -> none", { .dport = 6000 }, UNMATCHED },
	    { "TCP 5505 -> none", { .proto = TCP_, .dport = 5505 },
	      UNMATCHED } } },
	{ "specific proto beats any",
	  RULES(OPEN("any-dst32", "{\"dst\":\"198.51.100.1/32\"}") ","
		OPEN("udp", "{\"proto\":\"udp\"}")),
	  { { "UDP -> udp rule, though the any rule has a /32",
	      { .dport = 9 }, P(XDP_PASS, "udp") },
	    { "TCP -> any rule", { .proto = TCP_, .dport = 9 },
	      P(XDP_PASS, "any-dst32") },
	    { "ICMP -> any rule", { .proto = IPPROTO_ICMP },
	      P(XDP_PASS, "any-dst32") },
	    { "GRE -> any rule", { .proto = IPPROTO_GRE },
	      P(XDP_PASS, "any-dst32") },
	    { "TCP elsewhere -> none", { .proto = TCP_, .dst = "198.51.100.2" },
	      UNMATCHED } } },
	{ "equal specificity: earlier in file wins",
	  RULES(OPEN("first", "{\"proto\":\"udp\",\"dport\":53}") ","
		OPEN("second", "{\"proto\":\"udp\",\"dport\":53}") ","
		PRIO("third", "{\"proto\":\"tcp\",\"dport\":80}", 4) ","
		PRIO("fourth", "{\"proto\":\"tcp\",\"dport\":80}", 4)),
	  { { "UDP 53 -> first", { .dport = 53 }, P(XDP_PASS, "first") },
	    { "TCP 80, equal priorities -> third",
	      { .proto = TCP_, .dport = 80 }, P(XDP_PASS, "third") } } },
	{ "address families",
	  RULES(OPEN("v4-src", "{\"proto\":\"udp\",\"src\":\"0.0.0.0/0\"}") ","
		OPEN("v6-dst", "{\"proto\":\"tcp\",\"dst\":\"::/0\"}") ","
		OPEN("any", "{\"proto\":\"icmpv6\"}") ","
		OPEN("any2", "{\"proto\":\"icmp\"}")),
	  { { "IPv4 UDP -> IPv4 rule", { .dport = 1 }, P(XDP_PASS, "v4-src") },
	    { "IPv6 UDP: the IPv4 rule does not match",
	      { .family = 6, .dport = 1 }, UNMATCHED },
	    { "IPv6 TCP -> IPv6 rule", { .family = 6, .proto = TCP_ },
	      P(XDP_PASS, "v6-dst") },
	    { "IPv4 TCP: the IPv6 rule does not match", { .proto = TCP_ },
	      UNMATCHED },
	    { "IPv6 ICMPv6 -> address-less rule",
	      { .family = 6, .proto = IPPROTO_ICMPV6 }, P(XDP_PASS, "any") },
	    { "IPv4 ICMP -> address-less rule", { .proto = IPPROTO_ICMP },
	      P(XDP_PASS, "any2") } } },
	{ "an any rule matches both families",
	  RULES(OPEN("all", "{}")),
	  { { "IPv4 UDP", { .dport = 1 }, P(XDP_PASS, "all") },
	    { "IPv6 TCP", { .family = 6, .proto = TCP_ }, P(XDP_PASS, "all") },
	    { "IPv6 GRE", { .family = 6, .proto = IPPROTO_GRE },
	      P(XDP_PASS, "all") },
	    { "ARP is not IP", { .ethertype = ETH_P_ARP }, UNMATCHED } } },
	{ "match.vlan: the innermost tag, a priority tag is untagged",
	  RULES(OPEN("v100", "{\"proto\":\"udp\",\"vlan\":100}") ","
		OPEN("v10", "{\"proto\":\"udp\",\"vlan\":10}") ","
		OPEN("bare53", "{\"proto\":\"udp\",\"dport\":53,"
			       "\"vlan\":\"untagged\"}") ","
		OPEN("v6-v100", "{\"proto\":\"udp\",\"vlan\":100,"
				"\"dst\":\"2001:db8:1::/48\"}") ","
		OPEN("v200", "{\"vlan\":200}") ","
		OPEN("all-udp", "{\"proto\":\"udp\"}")),
	  { { "untagged UDP 9 -> no VLAN rule", { .dport = 9 },
	      P(XDP_PASS, "all-udp") },
	    { "untagged UDP 53 -> untagged", { .dport = 53 },
	      P(XDP_PASS, "bare53") },
	    { "priority tag (PCP 5, VID 0) UDP 53 -> untagged",
	      { .tags = 1, .tci = 0xa000, .dport = 53 },
	      P(XDP_PASS, "bare53") },
	    { "VLAN 100 UDP 53 -> VLAN 100 (a VLAN beats a port)",
	      { .tags = 1, .dport = 53 }, P(XDP_PASS, "v100") },
	    { "VLAN 100 with PCP 3 -> VLAN 100",
	      { .tags = 1, .tci = 0x6064, .dport = 9 }, P(XDP_PASS, "v100") },
	    { "VLAN 101 UDP 53 -> no VLAN rule (not untagged)",
	      { .tags = 1, .tci = 101, .dport = 53 },
	      P(XDP_PASS, "all-udp") },
	    { "QinQ 10/100 -> inner VLAN 100",
	      { .tags = 2, .tci = 100, .dport = 9 }, P(XDP_PASS, "v100") },
	    { "QinQ 10/101: the outer VID 10 does not count",
	      { .tags = 2, .dport = 9 }, P(XDP_PASS, "all-udp") },
	    { "VLAN 200 TCP -> VLAN 200", { .tags = 1, .tci = 200,
	      .proto = TCP_, .dport = 80 }, P(XDP_PASS, "v200") },
	    { "VLAN 200 UDP -> udp (a protocol beats a VLAN)",
	      { .tags = 1, .tci = 200, .dport = 9 }, P(XDP_PASS, "all-udp") },
	    { "untagged ICMP -> none", { .proto = IPPROTO_ICMP }, UNMATCHED },
	    { "VLAN 200 ICMP -> VLAN 200",
	      { .tags = 1, .tci = 200, .proto = IPPROTO_ICMP },
	      P(XDP_PASS, "v200") } } },
	{ "match.vlan over IPv6",
	  RULES(OPEN("v100", "{\"proto\":\"udp\",\"vlan\":100}") ","
		OPEN("bare53", "{\"proto\":\"udp\",\"dport\":53,"
			       "\"vlan\":\"untagged\"}") ","
		OPEN("v6-v100", "{\"proto\":\"udp\",\"vlan\":100,"
				"\"dst\":\"2001:db8:1::/48\"}") ","
		OPEN("all-udp", "{\"proto\":\"udp\"}")),
	  { { "VLAN 100 to the /48 -> its rule",
	      { .family = 6, .tags = 1, .dport = 9 }, P(XDP_PASS, "v6-v100") },
	    { "VLAN 100 elsewhere -> VLAN 100",
	      { .family = 6, .tags = 1, .dst = "2001:db8:2::1", .dport = 9 },
	      P(XDP_PASS, "v100") },
	    { "QinQ 10/100 to the /48 -> its rule",
	      { .family = 6, .tags = 2, .tci = 100, .dport = 9 },
	      P(XDP_PASS, "v6-v100") },
	    { "untagged UDP 53 -> untagged",
	      { .family = 6, .dport = 53 }, P(XDP_PASS, "bare53") },
	    { "priority tag UDP 53 -> untagged",
	      { .family = 6, .tags = 1, .tci = 0x2000, .dport = 53 },
	      P(XDP_PASS, "bare53") },
	    { "VLAN 7 UDP 53 -> no VLAN rule",
	      { .family = 6, .tags = 1, .tci = 7, .dport = 53 },
	      P(XDP_PASS, "all-udp") },
	    { "untagged UDP 9 to the /48 -> no VLAN rule",
	      { .family = 6, .dport = 9 }, P(XDP_PASS, "all-udp") } } },
	{ "unmatched packets pass",
	  RULES(OPEN("only", "{\"proto\":\"udp\",\"dport\":1,"
			     "\"dst\":\"10.0.0.0/8\"}")),
	  { { "UDP 1 elsewhere", { .dport = 1 }, UNMATCHED },
	    { "UDP 2 inside", { .dport = 2, .dst = "10.0.0.1" }, UNMATCHED },
	    { "UDP 1 inside", { .dport = 1, .dst = "10.0.0.1" },
	      P(XDP_PASS, "only") } } },
};

static void test_precedence(struct sl_dataplane *dp)
{
	for (size_t i = 0; i < ARRAY_SIZE(prec_cases); i++) {
		const struct prec_case *c = &prec_cases[i];
		size_t n = 0;

		next_scenario();
		if (!tap(apply(dp, c->json) == 0, "%s: rule set applies",
			 c->group))
			continue;
		while (n < ARRAY_SIZE(c->fx) && c->fx[n].desc)
			n++;
		run_table(dp, c->group, c->fx, n);
	}
}


/* ---- a large rule set ------------------------------------------------- */

static char json_buf[1 << 20];

struct big_rule {
	bool tcp;
	uint16_t port;
	int dst4, src4, dst6; /* 0 or the prefix's third/second byte + 1 */
};

static struct big_rule big[SL_MAX_RULES];

static void test_big_ruleset(struct sl_dataplane *dp)
{
	size_t off = 0;
	int bad = 0, sampled = 0, negatives = 0;
	uint64_t h0[SLUICE_ST_MAX], h1[SLUICE_ST_MAX];

	off += snprintf(json_buf + off, sizeof(json_buf) - off, "{\"rules\":[");
	for (int i = 0; i < SL_MAX_RULES; i++) {
		struct big_rule *r = &big[i];
		char match[200];
		int m;

		memset(r, 0, sizeof(*r));
		r->tcp = i % 2;
		r->port = 1024 + i;
		m = snprintf(match, sizeof(match), "{\"proto\":\"%s\","
			     "\"dport\":%u", r->tcp ? "tcp" : "udp", r->port);
		if (i % 7 == 3) {
			r->dst4 = i % 256 + 1;
			m += snprintf(match + m, sizeof(match) - m,
				      ",\"dst\":\"10.%d.0.0/16\"", i % 256);
		}
		if (i % 11 == 5) {
			r->src4 = i % 256 + 1;
			m += snprintf(match + m, sizeof(match) - m,
				      ",\"src\":\"192.168.%d.0/24\"", i % 256);
		}
		if (i % 13 == 6 && !r->dst4 && !r->src4) {
			r->dst6 = i + 1;
			m += snprintf(match + m, sizeof(match) - m,
				      ",\"dst\":\"2001:db8:%x::/48\"", i);
		}
		snprintf(match + m, sizeof(match) - m, "}");
		off += snprintf(json_buf + off, sizeof(json_buf) - off,
				"%s{\"name\":\"r%d\",\"match\":%s,\"grade\":"
				"\"pps\",\"count\":100000000000}",
				i ? "," : "", i, match);
	}
	snprintf(json_buf + off, sizeof(json_buf) - off, "]}");
	next_scenario();
	if (!tap(apply(dp, json_buf) == 0 && dp->rules.n == SL_MAX_RULES,
		 "%d rules: the set loads and applies", SL_MAX_RULES))
		return;

	for (int i = 0; i < SL_MAX_RULES; i += 17) {
		const struct big_rule *r = &big[i];
		char dst[64] = DST4, src[64] = SRC4, name[16];
		struct pspec s = { .proto = r->tcp ? TCP_ : UDP_,
				   .dport = r->port, .flags = PKT_ACK };
		struct sl_rule_stats a, b;
		struct pkt p;

		snprintf(name, sizeof(name), "r%d", i);
		if (r->dst4)
			snprintf(dst, sizeof(dst), "10.%d.7.7", r->dst4 - 1);
		if (r->src4)
			snprintf(src, sizeof(src), "192.168.%d.9", r->src4 - 1);
		if (r->dst6) {
			snprintf(dst, sizeof(dst), "2001:db8:%x::5",
				 r->dst6 - 1);
			snprintf(src, sizeof(src), SRC6);
			s.family = 6;
		}
		s.dst = dst;
		s.src = src;
		build(&s, &p);
		a = rule_stats(dp, name);
		host_stats(dp, h0);
		if (run(dp, &p) != XDP_PASS)
			bad++;
		b = rule_stats(dp, name);
		host_stats(dp, h1);
		if (b.passed_pkts != a.passed_pkts + 1 ||
		    h1[SLUICE_ST_UNMATCHED] != h0[SLUICE_ST_UNMATCHED]) {
			diag("port %u did not classify to rule %s", r->port,
			     name);
			bad++;
		}
		sampled++;
		if (!r->dst4 && !r->src4 && !r->dst6)
			continue;
		/* the same port outside the rule's prefix: no rule */
		if (r->dst6)
			s.dst = "2001:db9::5";
		else if (r->dst4)
			s.dst = "11.0.0.1";
		else
			s.src = "192.169.0.1";
		build(&s, &p);
		host_stats(dp, h0);
		run(dp, &p);
		a = rule_stats(dp, name);
		host_stats(dp, h1);
		if (a.passed_pkts != b.passed_pkts ||
		    h1[SLUICE_ST_UNMATCHED] != h0[SLUICE_ST_UNMATCHED] + 1) {
			diag("port %u outside rule %s's prefix was not "
			     "unmatched", r->port, name);
			bad++;
		}
		negatives++;
	}
	tap(!bad && sampled > 200,
	    "%d rules: %d sampled ports classify to their rule, %d outside "
	    "their prefixes are unmatched", SL_MAX_RULES, sampled, negatives);
	{
		struct pspec s = { .dport = 1024 + SL_MAX_RULES };
		struct pkt p;

		build(&s, &p);
		host_stats(dp, h0);
		run(dp, &p);
		host_stats(dp, h1);
		tap(h1[SLUICE_ST_UNMATCHED] == h0[SLUICE_ST_UNMATCHED] + 1,
		    "%d rules: the port after the last rule is unmatched",
		    SL_MAX_RULES);
	}
	/* leave a small set behind: the next apply compiles quickly */
	apply(dp, "{\"rules\":[]}");
}

/* ---- the destination cache --------------------------------------------- */

#define DST(name, port, dst)                                               \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"udp\",\"dport\":"    \
	#port ",\"dst\":\"" dst "\"},\"grade\":\"pps\",\"count\":100000000000}"

/*
 * Each CPU remembers recent destination-trie answers (classify.h). They
 * must not outlive the rule set they were found in, not even into the set
 * two swaps on, which is written into the same half of the tables.
 */
static void test_dst_cache(struct sl_dataplane *dp)
{
	static const struct {
		const char *rules, *judge4, *judge6;
	} sets[] = {
		{ RULES(DST("wide-a", 7300, "10.9.0.0/16") ","
			DST("wide6-a", 7300, "2001:db8:9::/48")),
		  "wide-a", "wide6-a" },
		{ RULES(DST("wide-b", 7300, "10.9.0.0/16") ","
			DST("wide6-b", 7300, "2001:db8:9::/48")),
		  "wide-b", "wide6-b" },
		{ RULES(DST("wide-a", 7300, "10.9.0.0/16") ","
			DST("wide6-a", 7300, "2001:db8:9::/48") ","
			DST("narrow", 7300, "10.9.1.0/24") ","
			DST("narrow6", 7300, "2001:db8:9:1::/64")),
		  "narrow", "narrow6" },
	};
	struct pspec s4 = { .dport = 7300, .dst = "10.9.1.1" };
	struct pspec s6 = { .family = 6, .dport = 7300,
			    .dst = "2001:db8:9:1::1" };
	struct pkt p4, p6;

	build(&s4, &p4);
	build(&s6, &p6);
	next_scenario();
	for (size_t i = 0; i < ARRAY_SIZE(sets); i++) {
		long a4, a6;
		uint64_t n4, n6;

		if (!tap(apply(dp, sets[i].rules) == 0,
			 "dst cache: set %zu applies", i + 1))
			return;
		/* twice each: the second is answered from the cache */
		a4 = burst(dp, &p4, 2);
		a6 = burst(dp, &p6, 2);
		n4 = rule_stats(dp, sets[i].judge4).passed_pkts;
		n6 = rule_stats(dp, sets[i].judge6).passed_pkts;
		tap(a4 == 2 && a6 == 2 && n4 == 2 && n6 == 2,
		    "dst cache: set %zu judges 10.9.1.1 by %s and "
		    "2001:db8:9:1::1 by %s (%llu, %llu of 2)",
		    i + 1, sets[i].judge4, sets[i].judge6,
		    (unsigned long long)n4, (unsigned long long)n6);
	}
}

/* VLAN-stage answers share the per-CPU cache: after a swap, a VID's
 * cached answer of the old set must not judge a packet, and VLAN and
 * destination entries of one set must not answer for each other. */
static void test_vlan_cache(struct sl_dataplane *dp)
{
#define VL(name, vlan) OPEN(name, "{\"proto\":\"udp\",\"dport\":7400," \
				   "\"vlan\":" vlan "}")
	static const struct {
		const char *rules, *judge100, *judge_bare;
	} sets[] = {
		{ RULES(VL("v100-a", "100") "," VL("bare-a", "\"untagged\"")),
		  "v100-a", "bare-a" },
		{ RULES(VL("v100-b", "100") "," VL("bare-b", "\"untagged\"")),
		  "v100-b", "bare-b" },
		{ RULES(VL("bare-c", "\"untagged\"") ","
			OPEN("dst-c", "{\"proto\":\"udp\",\"dport\":7400,"
				      "\"dst\":\"198.51.100.0/24\"}")),
		  "dst-c", "bare-c" },
	};
	struct pspec sv = { .tags = 1, .dport = 7400 };
	struct pspec sb = { .dport = 7400 };
	struct pkt pv, pb;

	build(&sv, &pv);
	build(&sb, &pb);
	next_scenario();
	for (size_t i = 0; i < ARRAY_SIZE(sets); i++) {
		long av, ab;
		uint64_t nv, nb;

		if (!tap(apply(dp, sets[i].rules) == 0,
			 "vlan cache: set %zu applies", i + 1))
			return;
		/* twice each: the second is answered from the cache */
		av = burst(dp, &pv, 2);
		ab = burst(dp, &pb, 2);
		nv = rule_stats(dp, sets[i].judge100).passed_pkts;
		nb = rule_stats(dp, sets[i].judge_bare).passed_pkts;
		tap(av == 2 && ab == 2 && nv == 2 && nb == 2,
		    "vlan cache: set %zu judges VLAN 100 by %s and untagged "
		    "by %s (%llu, %llu of 2)",
		    i + 1, sets[i].judge100, sets[i].judge_bare,
		    (unsigned long long)nv, (unsigned long long)nb);
	}
#undef VL
}

int main(void)
{
	struct sl_dataplane dp;

	if (h_begin(&dp))
		return h_end();
	test_precedence(&dp);
	test_big_ruleset(&dp);
	test_dst_cache(&dp);
	test_vlan_cache(&dp);
	h_unload(&dp);
	return h_end();
}
