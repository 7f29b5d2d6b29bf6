// SPDX-License-Identifier: GPL-2.0
/*
 * The conns grade (bpf/conns.h) on the test clock: SYNs take places of
 * count and the one over it is refused (a RST by XDP_TX, or dropped);
 * a retransmitted SYN takes none; a client's FIN or RST, and a server's
 * FIN on egress, give the place back once; the sweep forgets a handshake
 * the client never finished after 5 s and an established connection
 * after idle_timeout_s, and a server's segments keep it, and one made
 * after the sweep read its clock is not idle; shadow counts
 * the refusal and passes; per_source holds each source to count, sources
 * past max_sources sharing the overflow's; a conns layer refuses after
 * the layer before it; a rule that takes a slot over does not inherit
 * (or uncount) its predecessor's connections; an IPv6 SYN behind an
 * extension header is refused as untracked; a set past the table is
 * refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/pkt_cls.h>

#include "harness.h"
#include "sluice.skel.h"

#define PORT 8080
#define SEC  NSEC_PER_SEC

#define CONNS(name, count, extra)                                           \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"tcp\",\"dport\":"    \
	"8080},\"grade\":\"conns\",\"count\":" #count extra "}"

/* A segment of the connection from client port sport (and src). */
static struct pkt seg(int family, const char *src, uint16_t sport,
		      uint8_t flags)
{
	struct pspec s = { .family = family, .proto = TCP_, .src = src,
			   .sport = sport, .dport = PORT, .flags = flags };
	struct pkt p;

	build(&s, &p);
	return p;
}

static int syn(struct sl_dataplane *d, uint16_t sport)
{
	struct pkt p = seg(4, NULL, sport, PKT_SYN);

	return run(d, &p);
}

static int from_client(struct sl_dataplane *d, uint16_t sport, uint8_t flags)
{
	struct pkt p = seg(4, NULL, sport, flags);

	return run(d, &p);
}

/* The server's segment to client port sport, through sluice_egress. */
static int from_server(struct sl_dataplane *d, uint16_t sport, uint8_t flags)
{
	struct pspec s = { .family = 4, .proto = TCP_, .src = DST4,
			   .dst = SRC4, .sport = PORT, .dport = sport,
			   .flags = flags };
	struct pkt p;
	LIBBPF_OPTS(bpf_test_run_opts, o, .repeat = 1);

	build(&s, &p);
	o.data_in = p.buf;
	o.data_size_in = p.len;
	if (bpf_prog_test_run_opts(
		    bpf_program__fd(d->skel->progs.sluice_egress), &o))
		return -errno;
	return o.retval;
}

static uint64_t open_of(struct sl_dataplane *d, const char *name)
{
	return rule_stats(d, name).conns_open;
}

static void sweep(struct sl_dataplane *d)
{
	if (sl_dp_sweep_conns(d))
		diag("sweep: %s", strerror(errno));
}

/* n SYNs from ports from, from + 1, ...: how many got verdict v */
static int syns(struct sl_dataplane *d, uint16_t from, int n, int v)
{
	int got = 0;

	for (int i = 0; i < n; i++)
		got += syn(d, from + i) == v;
	return got;
}

static void test_count(struct sl_dataplane *d)
{
	struct sl_rule_stats st;

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("api", 3, ""))) == 0,
		 "count: a conns rule applies"))
		return;
	tap(syns(d, 1000, 3, XDP_PASS) == 3, "count: 3 SYNs pass");
	tap(syn(d, 1003) == XDP_TX, "count: the 4th is answered by a RST");
	st = rule_stats(d, "api");
	tap(st.conns_open == 3 && st.blocked_pkts == 1 && st.passed_pkts == 3,
	    "count: 3 open, 1 refused, 3 passed (%llu, %llu, %llu)",
	    (unsigned long long)st.conns_open,
	    (unsigned long long)st.blocked_pkts,
	    (unsigned long long)st.passed_pkts);
	tap(syn(d, 1000) == XDP_PASS && open_of(d, "api") == 3,
	    "count: a retransmitted SYN passes and takes no place");
	tap(from_client(d, 1000, PKT_ACK) == XDP_PASS &&
		    from_client(d, 1000, PKT_ACK | PKT_PSH) == XDP_PASS,
	    "count: the connection's segments pass");
	tap(from_client(d, 1000, PKT_FIN | PKT_ACK) == XDP_PASS &&
		    open_of(d, "api") == 2,
	    "count: the client's FIN gives its place back");
	tap(from_client(d, 1000, PKT_FIN | PKT_ACK) == XDP_PASS &&
		    open_of(d, "api") == 2,
	    "count: a second FIN gives nothing back");
	tap(syn(d, 1004) == XDP_PASS && syn(d, 1005) == XDP_TX,
	    "count: the place is taken again, and then none is left");
	tap(from_client(d, 1001, PKT_RST) == XDP_PASS &&
		    open_of(d, "api") == 2,
	    "count: the client's RST gives its place back");
	tap(from_server(d, 1002, PKT_FIN | PKT_ACK) == TC_ACT_OK &&
		    open_of(d, "api") == 1,
	    "count: the server's FIN on egress gives its place back");
	tap(from_server(d, 1004, PKT_RST) == TC_ACT_OK &&
		    open_of(d, "api") == 0,
	    "count: the server's RST on egress gives its place back");
	tap(syns(d, 1010, 3, XDP_PASS) == 3, "count: 3 new SYNs pass");
}

static void test_refuse_drop_and_shadow(struct sl_dataplane *d)
{
	struct sl_rule_stats st;

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("api", 2,
				      ",\"conns\":{\"refuse\":\"drop\"}"))) ==
			 0,
		 "drop: applies"))
		return;
	tap(syns(d, 2000, 2, XDP_PASS) == 2 && syn(d, 2002) == XDP_DROP,
	    "drop: the SYN over count is dropped");

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("shadow", 2,
				      ",\"mode\":\"shadow\""))) == 0,
		 "shadow: applies"))
		return;
	tap(syns(d, 3000, 4, XDP_PASS) == 4,
	    "shadow: every SYN passes");
	st = rule_stats(d, "shadow");
	tap(st.conns_open == 2 && st.blocked_pkts == 2,
	    "shadow: 2 counted open, 2 would-be refusals (%llu, %llu)",
	    (unsigned long long)st.conns_open,
	    (unsigned long long)st.blocked_pkts);
	tap(from_client(d, 3003, PKT_FIN | PKT_ACK) == XDP_PASS &&
		    open_of(d, "shadow") == 2,
	    "shadow: a refused connection's FIN gives nothing back");
}

/* A new scenario with rule api, count 10, idle_timeout_s 10. */
static bool apply_idle_rule(struct sl_dataplane *d, const char *scenario)
{
	next_scenario();
	return tap(apply(d, RULES(CONNS("api", 10,
					",\"conns\":{\"idle_timeout_s\":10}"))) ==
			   0,
		   "%s: applies", scenario);
}

static void test_idle(struct sl_dataplane *d)
{
	uint64_t t0;

	if (!apply_idle_rule(d, "idle"))
		return;
	t0 = test_time();
	/* 4000: handshake never finished; 4001, 4002 acknowledged */
	syns(d, 4000, 3, XDP_PASS);
	from_client(d, 4001, PKT_ACK);
	from_client(d, 4002, PKT_ACK);
	set_time(t0 + 4 * SEC);
	sweep(d);
	tap(open_of(d, "api") == 3, "idle: at 4 s all 3 are open");
	set_time(t0 + 6 * SEC);
	sweep(d);
	tap(open_of(d, "api") == 2,
	    "idle: at 6 s the unfinished handshake is forgotten (%llu open)",
	    (unsigned long long)open_of(d, "api"));
	/* 4001 hears from its server at 8 s, 4002 from nobody */
	set_time(t0 + 8 * SEC);
	from_server(d, 4001, PKT_ACK | PKT_PSH);
	set_time(t0 + 11 * SEC);
	sweep(d);
	tap(open_of(d, "api") == 1,
	    "idle: at 11 s the one silent for 10 s is forgotten, the one its "
	    "server spoke on stays (%llu open)",
	    (unsigned long long)open_of(d, "api"));
	set_time(t0 + 19 * SEC);
	sweep(d);
	tap(open_of(d, "api") == 0, "idle: at 19 s it too is forgotten");
	tap(from_client(d, 4001, PKT_FIN | PKT_ACK) == XDP_PASS &&
		    open_of(d, "api") == 0,
	    "idle: its late FIN gives nothing back");
}

/* The sweep reads its clock once, then walks the table for ticks: an
 * entry made or touched after that read is fresh, not 2^64 ns idle. */
static void test_sweep_after_stamp(struct sl_dataplane *d)
{
	uint64_t t0;

	if (!apply_idle_rule(d, "sweep clock"))
		return;
	t0 = test_time();
	/* 4100 acknowledged, 4101 still in its handshake, both at t0 + 1 s */
	set_time(t0 + SEC);
	syns(d, 4100, 2, XDP_PASS);
	from_client(d, 4100, PKT_ACK);
	/* a sweep whose clock was read 4 ms (a tick) before them */
	set_time(t0 + SEC - 4000000);
	sweep(d);
	tap(open_of(d, "api") == 2,
	    "sweep clock: connections stamped after the sweep's clock stay "
	    "open (%llu of 2)",
	    (unsigned long long)open_of(d, "api"));
	set_time(t0 + 7 * SEC);
	sweep(d);
	tap(open_of(d, "api") == 1,
	    "sweep clock: 6 s later the unfinished handshake goes (%llu open)",
	    (unsigned long long)open_of(d, "api"));
}

static void test_per_source(struct sl_dataplane *d)
{
	static const char *const src[] = { "192.0.2.1", "192.0.2.2",
					   "192.0.2.3", "192.0.2.4" };
	struct sl_rule_stats st;
	int pass[4] = { 0 };

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("each", 2,
				      ",\"per_source\":{\"max_sources\":2}"))) ==
			 0,
		 "per_source: applies"))
		return;
	for (int s = 0; s < 4; s++)
		for (int i = 0; i < 3; i++) {
			struct pkt p = seg(4, src[s], 5000 + i, PKT_SYN);

			pass[s] += run(d, &p) == XDP_PASS;
		}
	st = rule_stats(d, "each");
	tap(pass[0] == 2 && pass[1] == 2,
	    "per_source: each of two sources opens 2 of 3 (%d, %d)", pass[0],
	    pass[1]);
	tap(pass[2] + pass[3] == 2,
	    "per_source: the sources past max_sources share the overflow's 2 "
	    "(%d + %d)",
	    pass[2], pass[3]);
	tap(st.conns_open == 6 && st.sources == 2,
	    "per_source: 6 open over 2 source entries (%llu, %llu)",
	    (unsigned long long)st.conns_open, (unsigned long long)st.sources);
	{
		struct pkt fin = seg(4, src[0], 5000, PKT_FIN | PKT_ACK);
		struct pkt again = seg(4, src[0], 5010, PKT_SYN);
		struct pkt other = seg(4, src[1], 5010, PKT_SYN);

		run(d, &fin);
		tap(run(d, &other) == XDP_TX && run(d, &again) == XDP_PASS,
		    "per_source: a FIN frees a place of its own source only");
	}
}

static void test_layers(struct sl_dataplane *d)
{
	struct sl_rule_stats a, b;

	next_scenario();
	if (!tap(apply(d, RULES("{\"name\":\"syns\",\"match\":{\"proto\":"
				"\"tcp\",\"dport\":8080},\"grade\":\"cps\","
				"\"count\":1000},"
				CONNS("api", 2, ",\"layer\":1"))) == 0,
		 "layers: a cps layer 0 and a conns layer 1 apply"))
		return;
	tap(syns(d, 6000, 2, XDP_PASS) == 2 && syn(d, 6002) == XDP_TX,
	    "layers: 2 SYNs pass both layers, the third is refused by a RST");
	a = rule_stats(d, "syns");
	b = rule_stats(d, "api");
	tap(a.passed_pkts == 3 && b.passed_pkts == 2 && b.blocked_pkts == 1 &&
		    b.conns_open == 2,
	    "layers: layer 0 passed 3, the conns layer passed 2 and refused 1 "
	    "(%llu, %llu, %llu)",
	    (unsigned long long)a.passed_pkts,
	    (unsigned long long)b.passed_pkts,
	    (unsigned long long)b.blocked_pkts);
	tap(from_client(d, 6000, PKT_FIN | PKT_ACK) == XDP_PASS &&
		    open_of(d, "api") == 1,
	    "layers: a FIN gives the conns layer's place back");
}

/* Two conns layers: each client's places and the service's, one entry
 * per connection holding both. */
static void test_two_conns_layers(struct sl_dataplane *d)
{
	struct pkt a1 = seg(4, "192.0.2.1", 9000, PKT_SYN);
	struct pkt a2 = seg(4, "192.0.2.1", 9001, PKT_SYN);
	struct pkt b1 = seg(4, "192.0.2.2", 9000, PKT_SYN);
	struct pkt b2 = seg(4, "192.0.2.2", 9001, PKT_SYN);
	struct pkt a1_fin = seg(4, "192.0.2.1", 9000, PKT_FIN | PKT_ACK);

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("each", 2,
				      ",\"per_source\":{\"max_sources\":10}") ","
				CONNS("svc", 3, ",\"layer\":1"))) == 0,
		 "two layers: per-client 2 and service 3 apply"))
		return;
	tap(run(d, &a1) == XDP_PASS && run(d, &a2) == XDP_PASS &&
		    run(d, &b1) == XDP_PASS,
	    "two layers: 3 connections from two clients pass both");
	tap(run(d, &b2) == XDP_TX,
	    "two layers: a fourth, within its client's 2, is refused by the "
	    "service's 3");
	tap(open_of(d, "each") == 3 && open_of(d, "svc") == 3,
	    "two layers: the refused one's client place came back (each %llu, "
	    "service %llu)",
	    (unsigned long long)open_of(d, "each"),
	    (unsigned long long)open_of(d, "svc"));
	run(d, &a1_fin);
	tap(open_of(d, "each") == 2 && open_of(d, "svc") == 2,
	    "two layers: one FIN gives both places back (each %llu, service "
	    "%llu)",
	    (unsigned long long)open_of(d, "each"),
	    (unsigned long long)open_of(d, "svc"));
	tap(run(d, &b2) == XDP_PASS && open_of(d, "svc") == 3,
	    "two layers: and the client's next SYN gets in");
}

static void test_new_rule_in_slot(struct sl_dataplane *d)
{
	uint32_t first;

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("api", 3, ""))) == 0,
		 "slot: applies"))
		return;
	first = slot_of(d, "api");
	syns(d, 7000, 3, XDP_PASS);
	/* another identity takes another slot; the one after it the
	 * first slot again, once it has been retired */
	apply(d, RULES(CONNS("api", 4, "")));
	apply(d, RULES(CONNS("api", 5, "")));
	if (!tap(slot_of(d, "api") == first,
		 "slot: a rule with another count takes the first rule's slot "
		 "(%u)",
		 first))
		return;
	tap(open_of(d, "api") == 0,
	    "slot: it starts with none open (%llu)",
	    (unsigned long long)open_of(d, "api"));
	tap(syns(d, 7010, 5, XDP_PASS) == 5 && syn(d, 7015) == XDP_TX,
	    "slot: it takes its own 5");
	from_client(d, 7000, PKT_FIN | PKT_ACK);
	tap(open_of(d, "api") == 5,
	    "slot: the first rule's connection's FIN does not uncount it");
	sweep(d);
	tap(open_of(d, "api") == 5,
	    "slot: nor does the sweep of the first rule's connections");
	tap(syn(d, 7001) == XDP_TX,
	    "slot: a SYN on the first rule's tuple is a new connection, over "
	    "count");
}

static void test_untracked(struct sl_dataplane *d)
{
	uint64_t a[SLUICE_ST_MAX], b[SLUICE_ST_MAX];
	struct pspec s = { .family = 6, .proto = TCP_, .sport = 8000,
			   .dport = PORT, .flags = PKT_SYN, .n_ext = 1,
			   .ext = { IPPROTO_DSTOPTS } };
	struct pkt p, plain = seg(6, NULL, 8001, PKT_SYN);

	next_scenario();
	if (!tap(apply(d, RULES(CONNS("api", 3, ""))) == 0,
		 "untracked: applies"))
		return;
	tap(run(d, &plain) == XDP_PASS && open_of(d, "api") == 1,
	    "untracked: an IPv6 SYN takes a place");
	build(&s, &p);
	host_stats(d, a);
	tap(run(d, &p) != XDP_PASS, "untracked: behind a destination option "
				    "header it is refused, not let past");
	host_stats(d, b);
	tap(b[SLUICE_ST_CONN_UNTRACKED] - a[SLUICE_ST_CONN_UNTRACKED] == 1,
	    "untracked: counted as conns_untracked");
}

static void test_table_bound(struct sl_dataplane *d)
{
	tap(apply(d, RULES(CONNS("huge", 200000, "") ","
			   "{\"name\":\"more\",\"match\":{\"proto\":\"tcp\","
			   "\"dport\":8081},\"grade\":\"conns\",\"count\":"
			   "100000}")) != 0,
	    "bound: conns rules counting past the table's 262144 are refused");
	tap(apply(d, RULES(CONNS("each", 100,
				 ",\"per_source\":{\"max_sources\":3000}"))) !=
		    0,
	    "bound: so is per_source count x (max_sources + 1) past it");
}

int main(void)
{
	struct sl_dataplane dp;

	if (!h_begin(&dp)) {
		test_count(&dp);
		test_refuse_drop_and_shadow(&dp);
		test_idle(&dp);
		test_sweep_after_stamp(&dp);
		test_per_source(&dp);
		test_layers(&dp);
		test_two_conns_layers(&dp);
		test_new_rule_in_slot(&dp);
		test_untracked(&dp);
		test_table_bound(&dp);
		h_unload(&dp);
	}
	return h_end();
}
