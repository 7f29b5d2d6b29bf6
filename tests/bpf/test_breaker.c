// SPDX-License-Identifier: GPL-2.0
/*
 * Breakers on the test clock: requests (SYNs, datagrams) through
 * sluice_xdp, their answers (SYN-ACK, RST, UDP replies, ICMP port
 * unreachable) through sluice_egress. Every transition (closed -> open
 * by ratio and by count, open -> half-open after open_ms, half-open ->
 * closed when every probe succeeds, -> open on a failed probe or no
 * verdict), exactly `probes` requests passing in half-open, the RST
 * frame's bytes and checksums (IPv4, IPv6, VLAN), open_action drop,
 * retransmitted SYNs as timeouts (once, in the state their first copy
 * passed in; not a new ISN, not after a SYN-ACK) and breaker_conns when
 * full, slow_request_ratio (responses on both sides of max_rt_ms, a
 * client's FIN or RST, a server's greeting or FIN, the probes' responses
 * alone deciding half-open, watched ports still judged by their rules in
 * both rule sets), udp replies counted up to the requests, ICMP errors
 * that are not a datagram's port unreachable ignored, non-SYNs
 * untouched, and rules without a breaker left alone.
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
#define MS   1000000ULL
#define SYN_SEQ 0x11223344u

/* A breaker rule on tcp PORT that never limits by count. */
#define BRK(name, breaker)                                                  \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"tcp\",\"dport\":"    \
	"8080},\"grade\":\"cps\",\"count\":100000000000,\"breaker\":"        \
	breaker "}"
#define RATIO                                                               \
	"{\"strategy\":\"error_ratio\",\"threshold\":0.5,\"open_ms\":100,"  \
	"\"min_request_amount\":5,\"stat_interval_ms\":1000,\"probes\":2}"

static void set_seq(struct pkt *p)
{
	uint32_t seq = htonl(SYN_SEQ);

	memcpy(p->buf + p->l4_off + 4, &seq, 4);
}

static void zero_seq(struct pkt *p)
{
	memset(p->buf + p->l4_off + 4, 0, 4);
}

/* the client port of the last SYN: each new SYN is a new connection */
static uint16_t client_port = 40000;

static struct pkt syn_from(int family, uint8_t tags, uint16_t sport)
{
	struct pspec s = { .family = family, .proto = TCP_, .sport = sport,
			   .dport = PORT, .flags = PKT_SYN, .tags = tags,
			   .mangle = set_seq };
	struct pkt p;

	build(&s, &p);
	return p;
}

/* A SYN of a new connection. */
static struct pkt syn_v(int family, uint8_t tags)
{
	return syn_from(family, tags, ++client_port);
}

static int run_syn(struct sl_dataplane *d, int family)
{
	struct pkt p = syn_v(family, 0);

	return run(d, &p);
}

/* The service's answer to the last SYN: SYN-ACK, or RST|ACK seq 0. */
static struct pkt answer_v(int family, bool rst)
{
	struct pspec s = { .family = family, .proto = TCP_, .sport = PORT,
			   .dport = client_port,
			   .src = family == 6 ? DST6 : DST4,
			   .dst = family == 6 ? SRC6 : SRC4,
			   .flags = rst ? PKT_RST | PKT_ACK : PKT_SYN | PKT_ACK,
			   .mangle = rst ? zero_seq : NULL };
	struct pkt p;

	build(&s, &p);
	return p;
}

static int egress(struct sl_dataplane *d, const struct pkt *p)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = p->buf,
		    .data_size_in = p->len, .repeat = 1);
	int fd = bpf_program__fd(d->skel->progs.sluice_egress);

	if (bpf_prog_test_run_opts(fd, &o))
		return -errno;
	return o.retval;
}

/* n answers; false when one was not TC_ACT_OK */
static bool answers(struct sl_dataplane *d, int family, bool rst, int n)
{
	struct pkt p = answer_v(family, rst);

	for (int i = 0; i < n; i++)
		if (egress(d, &p) != TC_ACT_OK)
			return false;
	return true;
}

static struct sluice_breaker brk_state(struct sl_dataplane *d,
				       const char *name)
{
	struct sluice_breaker st = { 0 };
	uint32_t slot = slot_of(d, name);

	if (bpf_map_lookup_elem(bpf_map__fd(d->skel->maps.rule_breaker), &slot,
				&st))
		diag("no breaker state for %s", name);
	/* with the udp requests the CPUs have not added yet */
	for (int c = 0; c < d->n_cpus; c++)
		st.requests += sl_dp_rule_cpu(d, c, slot)->brk_requests;
	return st;
}

/* every answer the breaker saw, of any kind */
static uint64_t answered(const struct sluice_breaker *st)
{
	uint64_t n = 0;

	for (int k = 0; k < SLUICE_BRK_ANSWERS; k++)
		n += st->answered[k];
	return n;
}

static uint64_t brk_answers(struct sl_dataplane *d, const char *name)
{
	struct sluice_breaker st = brk_state(d, name);

	return answered(&st);
}

static unsigned int state_of(struct sl_dataplane *d, const char *name)
{
	return brk_state(d, name).state & SLUICE_BRK_STATE_MASK;
}

static const char *const state_names[] = { "closed", "open", "half-open" };

static bool is_state(struct sl_dataplane *d, const char *name,
		     unsigned int want, const char *what)
{
	unsigned int s = state_of(d, name);

	return tap(s == want, "%s: %s (state %s)", what, state_names[want],
		   s < 3 ? state_names[s] : "?");
}

/* ---- transitions ------------------------------------------------------- */

static void test_ratio(struct sl_dataplane *dp)
{
	struct sluice_breaker st;
	uint64_t t0;
	long n;

	next_scenario();
	t0 = test_time();
	if (!tap(apply(dp, RULES(BRK("web", RATIO))) == 0,
		 "ratio: rule with a breaker applies"))
		return;
	tap(run_syn(dp, 4) == XDP_PASS, "ratio: closed, a SYN passes");
	/* 4 errors: below min_request_amount 5 */
	answers(dp, 4, true, 4);
	is_state(dp, "web", SLUICE_BRK_CLOSED,
		 "ratio: 4 RSTs, fewer than min_request_amount 5");
	answers(dp, 4, true, 1);
	st = brk_state(dp, "web");
	is_state(dp, "web", SLUICE_BRK_OPEN, "ratio: the 5th RST opens it");
	tap(st.to_state[SLUICE_BRK_OPEN] == 1 && answered(&st) == 5 &&
		    st.answered[SLUICE_ANS_RST] == 5,
	    "ratio: one transition to open, 5 answers, 5 RSTs (%llu, %llu, "
	    "%llu)",
	    (unsigned long long)st.to_state[SLUICE_BRK_OPEN],
	    (unsigned long long)answered(&st),
	    (unsigned long long)st.answered[SLUICE_ANS_RST]);

	n = 0;
	for (int i = 0; i < 10; i++)
		n += run_syn(dp, 4) == XDP_TX;
	tap(n == 10, "ratio: open, 10 SYNs answered by XDP_TX (%ld)", n);
	{
		struct pspec s = { .proto = TCP_, .dport = PORT,
				   .flags = PKT_ACK };
		struct pkt ack;

		build(&s, &ack);
		tap(run(dp, &ack) == XDP_PASS,
		    "ratio: open, a non-SYN (ACK) of a connection passes");
	}
	tap(brk_state(dp, "web").failed_fast == 10,
	    "ratio: failed_fast counts the 10");

	/* 99 ms after opening: still open */
	set_time(t0 + 99 * MS);
	tap(run_syn(dp, 4) == XDP_TX, "ratio: 99 ms of open_ms 100: RST");
	set_time(t0 + 100 * MS);
	tap(run_syn(dp, 4) == XDP_PASS,
	    "ratio: after open_ms the next SYN is probe 1 and passes");
	is_state(dp, "web", SLUICE_BRK_HALF_OPEN, "ratio: then");
	tap(run_syn(dp, 4) == XDP_PASS, "ratio: probe 2 passes");
	n = 0;
	for (int i = 0; i < 5; i++)
		n += run_syn(dp, 4) == XDP_TX;
	tap(n == 5, "ratio: half-open with 2 probes out, 5 more SYNs get "
		    "RSTs (%ld)", n);
	tap(brk_state(dp, "web").probes_passed == 2,
	    "ratio: exactly 2 probes passed");
	answers(dp, 4, false, 1);
	is_state(dp, "web", SLUICE_BRK_HALF_OPEN,
		 "ratio: one probe's SYN-ACK of 2");
	answers(dp, 4, false, 1);
	st = brk_state(dp, "web");
	is_state(dp, "web", SLUICE_BRK_CLOSED, "ratio: both probes succeed");
	tap(st.probe_success == 2 && st.probe_failure == 0 &&
		    st.to_state[SLUICE_BRK_HALF_OPEN] == 1 &&
		    st.to_state[SLUICE_BRK_CLOSED] == 1,
	    "ratio: 2 probe successes, one each of half-open and closed");
	tap(run_syn(dp, 4) == XDP_PASS, "ratio: closed again, a SYN passes");

	/* below the ratio: 3 errors of 6 is 0.5, not over it */
	set_time(t0 + 2000 * MS);
	answers(dp, 4, false, 3);
	answers(dp, 4, true, 3);
	is_state(dp, "web", SLUICE_BRK_CLOSED,
		 "ratio: 3 errors of 6 answers is not over 0.5");
	answers(dp, 4, true, 1);
	is_state(dp, "web", SLUICE_BRK_OPEN, "ratio: 4 of 7 is");

	/* a failed probe opens it again */
	set_time(t0 + 2100 * MS);
	tap(run_syn(dp, 4) == XDP_PASS, "ratio: reopen: probe 1 passes");
	answers(dp, 4, true, 1);
	st = brk_state(dp, "web");
	is_state(dp, "web", SLUICE_BRK_OPEN,
		 "ratio: a probe answered by RST opens it again");
	tap(st.probe_failure == 1 && st.to_state[SLUICE_BRK_OPEN] == 3,
	    "ratio: 1 probe failure, 3 openings (%llu)",
	    (unsigned long long)st.to_state[SLUICE_BRK_OPEN]);
	tap(run_syn(dp, 4) == XDP_TX, "ratio: and the next SYN gets a RST");

	/* probes never answered: open again after open_ms */
	set_time(t0 + 2200 * MS);
	tap(run_syn(dp, 4) == XDP_PASS, "timeout: probe 1 passes");
	set_time(t0 + 2300 * MS);
	tap(run_syn(dp, 4) == XDP_TX,
	    "timeout: no verdict within open_ms: open again, RST");
	is_state(dp, "web", SLUICE_BRK_OPEN, "timeout: then");
}

static void test_count_window(struct sl_dataplane *dp)
{
	uint64_t t0;

	next_scenario();
	t0 = test_time();
	if (!tap(apply(dp, RULES(BRK("cnt",
				     "{\"strategy\":\"error_count\","
				     "\"threshold\":3,\"open_ms\":50,"
				     "\"min_request_amount\":1,"
				     "\"stat_interval_ms\":100}"))) == 0,
		 "count: rule applies"))
		return;
	answers(dp, 6, true, 3);
	is_state(dp, "cnt", SLUICE_BRK_CLOSED,
		 "count: 3 errors, threshold 3 (more than 3 opens)");
	/* the window rolls: the next error starts at 1 */
	set_time(t0 + 150 * MS);
	answers(dp, 6, true, 3);
	is_state(dp, "cnt", SLUICE_BRK_CLOSED,
		 "count: next stat_interval, 3 errors again");
	answers(dp, 6, true, 1);
	is_state(dp, "cnt", SLUICE_BRK_OPEN, "count: the 4th opens it");
	/* the default probes is 1 */
	set_time(t0 + 200 * MS);
	tap(run_syn(dp, 6) == XDP_PASS, "count: IPv6 probe passes");
	tap(run_syn(dp, 6) == XDP_TX,
	    "count: 1 probe (default): the next gets a RST");
	/* the probe's answer; the SYN failed fast is not remembered */
	client_port--;
	answers(dp, 6, false, 1);
	is_state(dp, "cnt", SLUICE_BRK_CLOSED,
		 "count: the probe's SYN-ACK closes it");
}

/* A breaker in layer 1 behind a limit in layer 0: the answers reach it
 * through the chain, and while open its RST answers the SYN that layer 0
 * passed. */
static void test_layered(struct sl_dataplane *dp)
{
	next_scenario();
	if (!tap(apply(dp, RULES("{\"name\":\"lim\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"cps\","
				 "\"count\":100000000000},"
				 "{\"name\":\"brk\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"cps\","
				 "\"count\":100000000000,\"layer\":1,"
				 "\"breaker\":{\"strategy\":\"error_count\","
				 "\"threshold\":3,\"open_ms\":50,"
				 "\"min_request_amount\":1}}")) == 0,
		 "layered: rules apply"))
		return;
	tap(run_syn(dp, 4) == XDP_PASS, "layered: a SYN passes both layers");
	answers(dp, 4, true, 4);
	tap(brk_answers(dp, "brk") == 4,
	    "layered: the breaker in layer 1 hears the 4 RSTs (%llu)",
	    (unsigned long long)brk_answers(dp, "brk"));
	is_state(dp, "brk", SLUICE_BRK_OPEN, "layered: 4 errors open it");
	tap(run_syn(dp, 4) == XDP_TX,
	    "layered: open, the next SYN gets a RST from layer 1");
	tap(rule_stats(dp, "lim").passed_pkts == 2,
	    "layered: layer 0 passed both SYNs (%llu)",
	    (unsigned long long)rule_stats(dp, "lim").passed_pkts);
}

/* A conns rule in layer 0 and a breaker in layer 1: while the breaker
 * is open, its RST answers a SYN that layer 0 counted, and the place
 * comes back at once, not at the handshake's timeout. */
static void test_layered_conns(struct sl_dataplane *dp)
{
	next_scenario();
	if (!tap(apply(dp, RULES("{\"name\":\"cap\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"conns\","
				 "\"count\":10},"
				 "{\"name\":\"brk2\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"cps\","
				 "\"count\":100000000000,\"layer\":1,"
				 "\"breaker\":{\"strategy\":\"error_count\","
				 "\"threshold\":1,\"open_ms\":50,"
				 "\"min_request_amount\":1}}")) == 0,
		 "layered conns: rules apply"))
		return;
	tap(run_syn(dp, 4) == XDP_PASS && rule_stats(dp, "cap").conns_open == 1,
	    "layered conns: a SYN passes both layers, one place taken");
	answers(dp, 4, true, 2);
	is_state(dp, "brk2", SLUICE_BRK_OPEN,
		 "layered conns: the service's RSTs open the breaker");
	tap(rule_stats(dp, "cap").conns_open == 0,
	    "layered conns: and the service's RST gave the place back");
	for (int i = 0; i < 3; i++)
		tap(run_syn(dp, 4) == XDP_TX,
		    "layered conns: open, SYN %d gets layer 1's RST", i + 1);
	tap(rule_stats(dp, "cap").conns_open == 0,
	    "layered conns: the SYNs answered by the breaker hold no place "
	    "(%llu open)",
	    (unsigned long long)rule_stats(dp, "cap").conns_open);
}

static void test_drop_and_others(struct sl_dataplane *dp)
{
	struct pspec ps = { .proto = TCP_, .sport = PORT, .dport = 40000,
			    .src = DST4, .dst = SRC4,
			    .flags = PKT_RST | PKT_ACK };
	struct pkt rst_est;

	next_scenario();
	if (!tap(apply(dp, RULES(BRK("drp",
				     "{\"strategy\":\"error_count\","
				     "\"threshold\":1,\"open_ms\":50,"
				     "\"min_request_amount\":1,"
				     "\"open_action\":\"drop\"}"))) == 0,
		 "drop: rule applies"))
		return;
	/* a connection's RST has a sequence number: not a SYN's answer */
	build(&ps, &rst_est);
	egress(dp, &rst_est);
	egress(dp, &rst_est);
	tap(brk_answers(dp, "drp") == 0,
	    "drop: RSTs with seq != 0 (connections) are not counted");
	answers(dp, 4, true, 2);
	is_state(dp, "drp", SLUICE_BRK_OPEN, "drop: 2 errors open it");
	tap(run_syn(dp, 4) == XDP_DROP,
	    "drop: open_action drop: an open breaker drops the SYN");

	next_scenario();
	if (!tap(apply(dp, RULES("{\"name\":\"shadow\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"cps\","
				 "\"count\":100000000000,\"mode\":\"shadow\","
				 "\"breaker\":{\"strategy\":\"error_count\","
				 "\"threshold\":1,\"open_ms\":50,"
				 "\"min_request_amount\":1}}")) == 0,
		 "shadow: rule applies"))
		return;
	answers(dp, 4, true, 2);
	is_state(dp, "shadow", SLUICE_BRK_OPEN, "shadow: 2 errors open it");
	tap(run_syn(dp, 4) == XDP_PASS &&
		    brk_state(dp, "shadow").failed_fast == 1,
	    "shadow: an open breaker of a shadow rule passes the SYN and "
	    "counts it in failed_fast");

	next_scenario();
	if (!tap(apply(dp, RULES("{\"name\":\"plain\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"cps\","
				 "\"count\":100000000000}")) == 0,
		 "plain: the same rule without a breaker applies"))
		return;
	answers(dp, 4, true, 20);
	{
		struct sluice_breaker st = brk_state(dp, "plain");

		tap(answered(&st) == 0 && st.state == 0,
		    "plain: answers to its SYNs leave no breaker state");
	}
	tap(run_syn(dp, 4) == XDP_PASS, "plain: its SYNs pass");
	tap(dp->rule_cpu[slot_of(dp, "plain")].has_breaker == 0,
	    "plain: has_breaker is 0 (the fast path is unchanged)");
}

/* ---- tcp: SYNs not answered ------------------------------------------ */

static struct pkt syn_seq(int family, uint16_t sport, uint32_t seq)
{
	struct pkt p = syn_from(family, 0, sport);

	seq = htonl(seq);
	memcpy(p.buf + p.l4_off + 4, &seq, 4);
	return p;
}

/* The SYN-ACK or RST to the SYN from sport. */
static struct pkt answer_to(int family, uint16_t sport, bool rst)
{
	uint16_t last = client_port;
	struct pkt p;

	client_port = sport;
	p = answer_v(family, rst);
	client_port = last;
	return p;
}

static uint64_t timeouts(struct sl_dataplane *d, const char *name)
{
	return brk_state(d, name).answered[SLUICE_ANS_TIMEOUT];
}

static long conns_held(struct sl_dataplane *d)
{
	int fd = bpf_map__fd(d->skel->maps.breaker_conns);
	struct sluice_conn_key k, next;
	long n = 0;

	for (void *cur = NULL; !bpf_map_get_next_key(fd, cur, &next);
	     cur = &k, n++)
		k = next;
	return n;
}

static void test_timeout(struct sl_dataplane *dp)
{
	struct pkt a = syn_seq(4, 41000, 1000), a2 = syn_seq(4, 41000, 2000);
	struct pkt b = syn_seq(4, 41001, 1000), c = syn_seq(6, 41002, 1000);
	struct pkt d = syn_seq(4, 41003, 1000), e = syn_seq(4, 41004, 1000);
	struct pkt ack_b = answer_to(4, 41001, false);
	struct pkt ack_d = answer_to(4, 41003, false);
	struct sluice_breaker st;
	uint64_t t0, n;
	long held;
	int v;

	next_scenario();
	t0 = test_time();
	if (!tap(apply(dp, RULES(BRK("to",
				     "{\"strategy\":\"error_count\","
				     "\"threshold\":2,\"open_ms\":100,"
				     "\"min_request_amount\":1}"))) == 0,
		 "timeout: rule applies"))
		return;
	held = conns_held(dp);
	v = run(dp, &a);
	held = conns_held(dp) - held;
	tap(v == XDP_PASS && held == 1,
	    "timeout: a SYN passes and is remembered (%ld more held)", held);
	run(dp, &a2);
	tap(timeouts(dp, "to") == 0,
	    "timeout: a new SYN on the same ports with another ISN is none");
	v = run(dp, &a2);
	n = timeouts(dp, "to");
	tap(v == XDP_PASS && n == 1,
	    "timeout: its retransmission (same ports, same ISN) passes and "
	    "is a timeout (%llu)", (unsigned long long)n);
	run(dp, &a2);
	tap(timeouts(dp, "to") == 1,
	    "timeout: a third copy counts no more (%llu)",
	    (unsigned long long)timeouts(dp, "to"));
	run(dp, &a);
	run(dp, &a);
	tap(timeouts(dp, "to") == 2,
	    "timeout: the first ISN again, sent twice: one more (%llu)",
	    (unsigned long long)timeouts(dp, "to"));

	/* answered, then sent again (the SYN-ACK was lost on the way) */
	run(dp, &b);
	egress(dp, &ack_b);
	st = brk_state(dp, "to");
	tap(run(dp, &b) == XDP_PASS && st.answered[SLUICE_ANS_OK] == 1 &&
		    timeouts(dp, "to") == 2,
	    "timeout: a SYN answered by SYN-ACK and sent again is no "
	    "timeout (%llu ok)",
	    (unsigned long long)st.answered[SLUICE_ANS_OK]);
	egress(dp, &ack_b);
	tap(brk_state(dp, "to").answered[SLUICE_ANS_OK] == 2,
	    "timeout: (the answer to its second copy is one more)");
	/* answered late: its retransmission was the verdict */
	run(dp, &d);
	run(dp, &d);
	egress(dp, &ack_d);
	st = brk_state(dp, "to");
	tap(st.answered[SLUICE_ANS_OK] == 2 && timeouts(dp, "to") == 3,
	    "timeout: a SYN-ACK after the retransmission counted adds no "
	    "ok (%llu ok, %llu timeouts)",
	    (unsigned long long)st.answered[SLUICE_ANS_OK],
	    (unsigned long long)timeouts(dp, "to"));
	is_state(dp, "to", SLUICE_BRK_OPEN,
		 "timeout: 3 timeouts, over threshold 2");

	set_time(t0 + 100 * MS);
	run(dp, &c);
	v = run(dp, &c);
	n = timeouts(dp, "to");
	tap(v == XDP_TX && n == 4,
	    "timeout: half-open, an IPv6 probe's retransmission is a timeout "
	    "(%llu) and fails fast", (unsigned long long)n);
	is_state(dp, "to", SLUICE_BRK_OPEN, "timeout: it opens again");
	tap(brk_state(dp, "to").probe_failure == 1,
	    "timeout: one probe failure");

	next_scenario();
	t0 = test_time();
	apply(dp, RULES(BRK("to2", "{\"strategy\":\"error_count\","
				   "\"threshold\":1,\"open_ms\":100,"
				   "\"min_request_amount\":1}")));
	/* e passes while closed; its retransmission after open_ms is a
	 * probe of its own, not a timeout */
	run(dp, &e);
	answers(dp, 4, true, 2);
	is_state(dp, "to2", SLUICE_BRK_OPEN, "timeout: 2 RSTs open it");
	set_time(t0 + 100 * MS);
	tap(run(dp, &e) == XDP_PASS && timeouts(dp, "to2") == 0,
	    "timeout: a SYN that passed while closed, sent again in "
	    "half-open, is a probe, not a timeout");
	{
		struct pkt ack_e = answer_to(4, 41004, false);

		egress(dp, &ack_e);
	}
	is_state(dp, "to2", SLUICE_BRK_CLOSED,
		 "timeout: its SYN-ACK closes it");

	/* answers to SYNs of the closed state do not decide half-open */
	next_scenario();
	t0 = test_time();
	apply(dp, RULES(BRK("to3", "{\"strategy\":\"error_count\","
				   "\"threshold\":1,\"open_ms\":100,"
				   "\"min_request_amount\":1}")));
	run(dp, &b);
	answers(dp, 4, true, 2);
	set_time(t0 + 100 * MS);
	run_syn(dp, 4);
	egress(dp, &ack_b);
	is_state(dp, "to3", SLUICE_BRK_HALF_OPEN,
		 "timeout: half-open, the SYN-ACK to a SYN that passed while "
		 "closed is not a probe's");
	answers(dp, 4, false, 1);
	is_state(dp, "to3", SLUICE_BRK_CLOSED, "timeout: the probe's is");
}

/* SLUICE_BRK_CONNS SYNs wait at once, and then more. */
static void test_conns_full(struct sl_dataplane *dp)
{
	const int extra = 4096, n = SLUICE_BRK_CONNS + extra, probe = 1000;
	long passed = 0, old_to, new_to, held, plain;
	uint64_t t;

	next_scenario();
	if (!tap(apply(dp, RULES(BRK("full", "{\"strategy\":\"error_count\","
					     "\"threshold\":1000000000,"
					     "\"open_ms\":100}"))) == 0,
		 "full: rule applies"))
		return;
	for (int i = 0; i < n; i++) {
		struct pkt p = syn_seq(i & 1 ? 6 : 4, 1024 + i / 2, 7);

		passed += run(dp, &p) == XDP_PASS;
	}
	held = conns_held(dp);
	tap(passed == n && held <= SLUICE_BRK_CONNS,
	    "full: %d SYNs waiting pass; the map holds %ld of at most %d",
	    n, held, SLUICE_BRK_CONNS);
	t = timeouts(dp, "full");
	for (int i = 0; i < probe; i++) {
		struct pkt p = syn_seq(i & 1 ? 6 : 4, 1024 + i / 2, 7);

		run(dp, &p);
	}
	old_to = timeouts(dp, "full") - t;
	t = timeouts(dp, "full");
	for (int i = n - probe; i < n; i++) {
		struct pkt p = syn_seq(i & 1 ? 6 : 4, 1024 + i / 2, 7);

		run(dp, &p);
	}
	new_to = timeouts(dp, "full") - t;
	diag("full: retransmissions counted: %ld of the %d oldest, %ld of "
	     "the %d newest", old_to, probe, new_to, probe);
	tap(old_to == 0,
	    "full: the oldest SYNs are forgotten: their retransmissions are "
	    "no timeouts (%ld of %d)", old_to, probe);
	tap(new_to == probe,
	    "full: the newest are remembered: every retransmission is a "
	    "timeout (%ld of %d)", new_to, probe);

	/* a rule without a breaker leaves the map alone */
	next_scenario();
	apply(dp, RULES("{\"name\":\"plain\",\"match\":{\"proto\":\"tcp\","
			"\"dport\":8080},\"grade\":\"cps\","
			"\"count\":100000000000}"));
	held = conns_held(dp);
	for (int i = 0; i < 100; i++)
		run_syn(dp, 4);
	plain = conns_held(dp) - held;
	tap(plain == 0, "full: SYNs of a rule without a breaker: %ld "
			"entries", plain);
}

/* ---- slow_request_ratio: response times --------------------------------- */

#define SLOW(name, breaker)                                                 \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"tcp\",\"dport\":"    \
	"8080},\"grade\":\"cps\",\"count\":100000000000,\"breaker\":"        \
	"{\"strategy\":\"slow_request_ratio\",\"threshold\":0.5,"             \
	"\"max_rt_ms\":100," breaker "}}"

/* A client's segment on its connection from sport (size: pad the frame,
 * its data), or the server's back to it (from_server). */
static struct pkt seg(int family, uint16_t sport, uint8_t flags, size_t size,
		      bool from_server)
{
	const char *c = family == 6 ? SRC6 : SRC4;
	const char *v = family == 6 ? DST6 : DST4;
	struct pspec s = { .family = family, .proto = TCP_, .flags = flags,
			   .size = size,
			   .sport = from_server ? PORT : sport,
			   .dport = from_server ? sport : PORT,
			   .src = from_server ? v : c,
			   .dst = from_server ? c : v };
	struct pkt p;

	build(&s, &p);
	return p;
}

#define DATA (PKT_ACK | PKT_PSH)

/* A connection up to its request: SYN, SYN-ACK, ACK, the request's
 * first data at the present time. */
static void request(struct sl_dataplane *dp, int family, uint16_t sport)
{
	struct pkt syn = syn_seq(family, sport, 7);
	struct pkt synack = answer_to(family, sport, false);
	struct pkt ack = seg(family, sport, PKT_ACK, 0, false);
	struct pkt req = seg(family, sport, DATA, 120, false);

	run(dp, &syn);
	egress(dp, &synack);
	run(dp, &ack);
	run(dp, &req);
}

static void respond(struct sl_dataplane *dp, int family, uint16_t sport)
{
	struct pkt rsp = seg(family, sport, DATA, 200, true);

	egress(dp, &rsp);
}

static uint64_t kind_n(struct sl_dataplane *d, const char *name, int kind)
{
	return brk_state(d, name).answered[kind];
}

static void test_slow(struct sl_dataplane *dp)
{
	struct sluice_breaker st;
	uint64_t t;

	next_scenario();
	t = test_time();
	if (!tap(apply(dp, RULES(SLOW("api", "\"open_ms\":200,"
					  "\"min_request_amount\":3"))) == 0,
		 "slow: rule applies"))
		return;
	/* exactly max_rt_ms is not slow, 1 ns more is */
	request(dp, 4, 42000);
	set_time(t += 100 * MS);
	respond(dp, 4, 42000);
	st = brk_state(dp, "api");
	tap(st.answered[SLUICE_ANS_OK] == 1 &&
		    st.answered[SLUICE_ANS_SLOW] == 0,
	    "slow: a response 100 ms after the request (max_rt_ms 100) is "
	    "fast; the SYN-ACK is no answer (%llu ok)",
	    (unsigned long long)st.answered[SLUICE_ANS_OK]);
	request(dp, 4, 42001);
	set_time(t += 100 * MS + 1);
	respond(dp, 4, 42001);
	tap(kind_n(dp, "api", SLUICE_ANS_SLOW) == 1,
	    "slow: 100 ms + 1 ns is slow");
	is_state(dp, "api", SLUICE_BRK_CLOSED,
		 "slow: 1 of 2, fewer than min_request_amount 3");
	/* only a connection's first request is timed */
	set_time(t += 10 * MS);
	{
		struct pkt req = seg(4, 42001, DATA, 120, false);

		run(dp, &req);
		set_time(t += 200 * MS);
		respond(dp, 4, 42001);
	}
	tap(kind_n(dp, "api", SLUICE_ANS_SLOW) == 1,
	    "slow: a second request on a connection is not timed");
	request(dp, 6, 42002);
	/* a request of the closed state, answered in half-open below */
	request(dp, 4, 42010);
	set_time(t += 300 * MS);
	respond(dp, 6, 42002);
	st = brk_state(dp, "api");
	is_state(dp, "api", SLUICE_BRK_OPEN,
		 "slow: a slow IPv6 response: 2 slow of 3 opens it");
	tap(st.answered[SLUICE_ANS_OK] == 1 &&
		    st.answered[SLUICE_ANS_SLOW] == 2,
	    "slow: answered 1 ok, 2 slow (%llu, %llu)",
	    (unsigned long long)st.answered[SLUICE_ANS_OK],
	    (unsigned long long)st.answered[SLUICE_ANS_SLOW]);
	tap(run_syn(dp, 4) == XDP_TX, "slow: open, a SYN gets a RST");

	/* half-open: the probe's response decides, not an older one's */
	set_time(t += 200 * MS);
	{
		struct pkt syn = syn_seq(4, 42004, 7);

		tap(run(dp, &syn) == XDP_PASS, "slow: half-open, probe passes");
	}
	is_state(dp, "api", SLUICE_BRK_HALF_OPEN, "slow: then");
	{
		struct pkt synack = answer_to(4, 42004, false);
		struct pkt req = seg(4, 42004, DATA, 120, false);

		egress(dp, &synack);
		is_state(dp, "api", SLUICE_BRK_HALF_OPEN,
			 "slow: the probe's SYN-ACK decides nothing");
		run(dp, &req);
	}
	set_time(t += 20 * MS);
	respond(dp, 4, 42010);
	st = brk_state(dp, "api");
	is_state(dp, "api", SLUICE_BRK_HALF_OPEN,
		 "slow: a response to a connection of the closed state is no "
		 "probe's");
	tap(st.answered[SLUICE_ANS_SLOW] == 3,
	    "slow: (it is counted: 3 slow)");
	respond(dp, 4, 42004);
	is_state(dp, "api", SLUICE_BRK_CLOSED,
		 "slow: the probe's fast response closes it");

	/* a slow probe opens it again */
	next_scenario();
	t = test_time();
	apply(dp, RULES(SLOW("api2", "\"open_ms\":200,"
				     "\"min_request_amount\":1")));
	request(dp, 4, 42020);
	set_time(t += 150 * MS);
	respond(dp, 4, 42020);
	is_state(dp, "api2", SLUICE_BRK_OPEN, "slow: one slow response");
	set_time(t += 200 * MS);
	request(dp, 4, 42021);
	set_time(t += 150 * MS);
	respond(dp, 4, 42021);
	st = brk_state(dp, "api2");
	is_state(dp, "api2", SLUICE_BRK_OPEN, "slow: a slow probe reopens it");
	tap(st.probe_failure == 1, "slow: one probe failure");
	/* a probe answered by RST fails too */
	set_time(t += 200 * MS);
	{
		struct pkt syn = syn_seq(4, 42022, 7);
		struct pkt rst = answer_to(4, 42022, true);

		run(dp, &syn);
		egress(dp, &rst);
	}
	is_state(dp, "api2", SLUICE_BRK_OPEN,
		 "slow: a probe refused by RST reopens it");
}

/* What a client's end does to a request waiting for its response. */
static void test_slow_ends(struct sl_dataplane *dp)
{
	struct pkt fin, rst;
	uint64_t t;

	next_scenario();
	t = test_time();
	if (!tap(apply(dp, RULES(SLOW("ends",
				      "\"open_ms\":200,"
				      "\"min_request_amount\":100"))) == 0,
		 "ends: rule applies"))
		return;
	/* gives up after max_rt_ms: slow */
	request(dp, 4, 43000);
	set_time(t += 150 * MS);
	fin = seg(4, 43000, PKT_FIN | PKT_ACK, 0, false);
	run(dp, &fin);
	respond(dp, 4, 43000);
	tap(kind_n(dp, "ends", SLUICE_ANS_SLOW) == 1 &&
		    kind_n(dp, "ends", SLUICE_ANS_OK) == 0,
	    "ends: a client's FIN 150 ms after its request, no response: "
	    "slow, once");
	/* a FIN right after the request: the response still counts */
	request(dp, 4, 43001);
	fin = seg(4, 43001, PKT_FIN | PKT_ACK, 0, false);
	run(dp, &fin);
	set_time(t += 50 * MS);
	respond(dp, 4, 43001);
	tap(kind_n(dp, "ends", SLUICE_ANS_OK) == 1,
	    "ends: a FIN after the request, then a response in 50 ms: ok");
	/* aborted early: nothing */
	request(dp, 4, 43002);
	set_time(t += 10 * MS);
	rst = seg(4, 43002, PKT_RST | PKT_ACK, 0, false);
	run(dp, &rst);
	set_time(t += 300 * MS);
	respond(dp, 4, 43002);
	tap(kind_n(dp, "ends", SLUICE_ANS_OK) == 1 &&
		    kind_n(dp, "ends", SLUICE_ANS_SLOW) == 1,
	    "ends: a RST 10 ms after the request counts nothing, nor does "
	    "a response after it");
	/* RST after max_rt_ms: slow */
	request(dp, 4, 43003);
	set_time(t += 120 * MS);
	rst = seg(4, 43003, PKT_RST | PKT_ACK, 0, false);
	run(dp, &rst);
	tap(kind_n(dp, "ends", SLUICE_ANS_SLOW) == 2,
	    "ends: a RST 120 ms after the request: slow");
	/* the server's greeting is no response; its FIN ends the wait */
	{
		struct pkt syn = syn_seq(4, 43004, 7);
		struct pkt synack = answer_to(4, 43004, false);
		struct pkt hello = seg(4, 43004, DATA, 100, true);
		struct pkt req = seg(4, 43004, DATA, 120, false);
		struct pkt sfin = seg(4, 43004, PKT_FIN | PKT_ACK, 0, true);

		run(dp, &syn);
		egress(dp, &synack);
		egress(dp, &hello);
		run(dp, &req);
		set_time(t += 20 * MS);
		respond(dp, 4, 43004);
		tap(kind_n(dp, "ends", SLUICE_ANS_OK) == 2,
		    "ends: a greeting before the request is not its "
		    "response; the response 20 ms after it is");
		request(dp, 4, 43005);
		sfin = seg(4, 43005, PKT_FIN | PKT_ACK, 0, true);
		egress(dp, &sfin);
		set_time(t += 300 * MS);
		respond(dp, 4, 43005);
		tap(kind_n(dp, "ends", SLUICE_ANS_OK) == 2 &&
			    kind_n(dp, "ends", SLUICE_ANS_SLOW) == 2,
		    "ends: a server's FIN without a response counts nothing");
	}
	/* answered SYN sent again: no timeout */
	{
		struct pkt syn = syn_seq(4, 43006, 7);
		struct pkt synack = answer_to(4, 43006, false);

		run(dp, &syn);
		egress(dp, &synack);
		run(dp, &syn);
		tap(kind_n(dp, "ends", SLUICE_ANS_TIMEOUT) == 0,
		    "ends: a SYN sent again after its SYN-ACK is no timeout");
	}
}

/* A watched port's packets are still judged by their own rule. */
static void test_watched_rules(struct sl_dataplane *dp)
{
	struct pkt d4 = seg(4, 44000, DATA, 120, false);
	struct pkt d6 = seg(6, 44000, DATA, 120, false);
	struct sl_rule_stats a, b;

	next_scenario();
	if (!tap(apply(dp, RULES(SLOW("w", "\"open_ms\":200") ","
				 "{\"name\":\"data4\",\"match\":{\"proto\":"
				 "\"tcp\",\"dport\":8080},\"grade\":\"pps\","
				 "\"count\":100000000000,\"priority\":1},"
				 OPEN("data6", "{\"proto\":\"tcp\",\"dport\":"
					       "8080,\"dst\":"
					       "\"2001:db8::/32\"}"))) == 0,
		 "watched: rules apply"))
		return;
	a = rule_stats(dp, "data4");
	b = rule_stats(dp, "data6");
	tap(run(dp, &d4) == XDP_PASS && run(dp, &d6) == XDP_PASS,
	    "watched: data to the watched port passes");
	tap(rule_stats(dp, "data4").passed_pkts == a.passed_pkts + 2 &&
		    rule_stats(dp, "data6").passed_pkts == b.passed_pkts,
	    "watched: and is counted by its rule (a direct answer with the "
	    "watch bit)");
	/* both rule sets: their class ids differ in a high bit */
	for (int set = 0; set < 2; set++) {
		apply(dp, RULES(SLOW("w", "\"open_ms\":200") ","
				OPEN("data6", "{\"proto\":\"tcp\",\"dport\":"
					      "8080,\"dst\":"
					      "\"2001:db8::/32\"}")));
		b = rule_stats(dp, "data6");
		tap(run(dp, &d6) == XDP_PASS &&
			    rule_stats(dp, "data6").passed_pkts ==
				    b.passed_pkts + 1,
		    "watched: a trie class with the watch bit finds its rule "
		    "(set_gen %u)", dp->skel->bss->set_gen);
	}
	{
		uint64_t h[SLUICE_ST_MAX], h2[SLUICE_ST_MAX];

		host_stats(dp, h);
		run(dp, &d4);
		host_stats(dp, h2);
		tap(h2[SLUICE_ST_UNMATCHED] == h[SLUICE_ST_UNMATCHED] + 1 &&
			    h2[SLUICE_ST_NO_RULE_CFG] ==
				    h[SLUICE_ST_NO_RULE_CFG],
		    "watched: data no rule judges is unmatched");
	}
}

/* ---- udp: datagrams, replies, ICMP port unreachable --------------------- */

#define UPORT 5353
#define UBRK(name, breaker)                                                 \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"udp\",\"dport\":"    \
	"5353},\"grade\":\"pps\",\"count\":100000000000,\"breaker\":"        \
	breaker "}"

static struct pkt dgram_v(int family)
{
	struct pspec s = { .family = family, .dport = UPORT };
	struct pkt p;

	build(&s, &p);
	return p;
}

/* The service's reply to dgram_v(family), from sport. */
static struct pkt reply_v(int family, uint16_t sport)
{
	struct pspec s = { .family = family, .sport = sport, .dport = 40000,
			   .src = family == 6 ? DST6 : DST4,
			   .dst = family == 6 ? SRC6 : SRC4 };
	struct pkt p;

	build(&s, &p);
	return p;
}

/*
 * The kernel's ICMP error (ICMP type/code, or ICMPv6's) quoting the
 * first 8 bytes past the IP header of q, as sent back to q's source.
 */
static struct pkt icmp_err_v(int family, uint8_t type, uint8_t code,
			     const struct pkt *q)
{
	size_t ip = q->l4_off - q->l3_off;
	struct pkt p;

	pkt_init(&p);
	pkt_eth(&p, NULL, NULL);
	if (family == 4)
		pkt_ipv4(&p, DST4, SRC4);
	else
		pkt_ipv6(&p, DST6, SRC6);
	pkt_icmp_ex(&p, type, code, 0, 0);
	pkt_bytes(&p, q->buf + q->l3_off, ip + 8);
	pkt_finish(&p, 0);
	return p;
}

static struct pkt unreach_v(int family, const struct pkt *q)
{
	return family == 4 ? icmp_err_v(4, 3, 3, q) : icmp_err_v(6, 1, 4, q);
}

static bool egress_n(struct sl_dataplane *d, const struct pkt *p, int n)
{
	for (int i = 0; i < n; i++)
		if (egress(d, p) != TC_ACT_OK)
			return false;
	return true;
}

static void test_udp(struct sl_dataplane *dp)
{
	struct pkt req = dgram_v(4), rep = reply_v(4, UPORT);
	struct pkt unr = unreach_v(4, &req);
	struct sluice_breaker st;
	uint64_t t0;
	long n;

	next_scenario();
	t0 = test_time();
	if (!tap(apply(dp, RULES(UBRK("dns",
				      "{\"strategy\":\"error_ratio\","
				      "\"threshold\":0.5,\"open_ms\":100,"
				      "\"min_request_amount\":3,"
				      "\"probes\":2}"))) == 0,
		 "udp: rule with a breaker applies"))
		return;
	tap(dp->rule_cpu[slot_of(dp, "dns")].has_breaker == SLUICE_BRK_ON_UDP,
	    "udp: every datagram of the rule asks its breaker");
	n = burst(dp, &req, 4);
	{
		struct sluice_breaker raw = { 0 };
		uint32_t slot = slot_of(dp, "dns");

		bpf_map_lookup_elem(bpf_map__fd(dp->skel->maps.rule_breaker),
				    &slot, &raw);
		tap(raw.requests == 1,
		    "udp: the shared count took the first of 4 datagrams in "
		    "one tick (%llu), the CPU's line holds the rest",
		    (unsigned long long)raw.requests);
	}
	st = brk_state(dp, "dns");
	tap(n == 4 && st.requests == 4,
	    "udp: closed, 4 datagrams pass and are 4 requests (%ld, %llu)", n,
	    (unsigned long long)st.requests);
	/* a chatty service: 10 replies to 4 requests count as 4 */
	egress_n(dp, &rep, 10);
	egress_n(dp, &unr, 2);
	is_state(dp, "dns", SLUICE_BRK_CLOSED,
		 "udp: 10 replies, 2 ICMP port unreachable: 2 of 4 is not "
		 "over 0.5");
	egress_n(dp, &unr, 1);
	st = brk_state(dp, "dns");
	is_state(dp, "dns", SLUICE_BRK_OPEN,
		 "udp: a 3rd opens it: replies count up to the 4 requests, "
		 "3 of 4 (3 of 13 without the cap)");
	tap(st.answered[SLUICE_ANS_OK] == 10 &&
		    st.answered[SLUICE_ANS_ICMP_UNREACH] == 3,
	    "udp: answered: 10 ok, 3 icmp_unreach (%llu, %llu)",
	    (unsigned long long)st.answered[SLUICE_ANS_OK],
	    (unsigned long long)st.answered[SLUICE_ANS_ICMP_UNREACH]);

	n = burst(dp, &req, 5);
	tap(n == 0 && brk_state(dp, "dns").failed_fast == 5,
	    "udp: open, 5 datagrams dropped and failed fast (%ld passed)", n);
	tap(run(dp, &req) == XDP_DROP, "udp: open: XDP_DROP, no RST");

	set_time(t0 + 100 * MS);
	n = burst(dp, &req, 5);
	st = brk_state(dp, "dns");
	tap(n == 2 && st.probes_passed == 2,
	    "udp: half-open, 2 probes of 5 datagrams pass (%ld)", n);
	egress_n(dp, &rep, 1);
	is_state(dp, "dns", SLUICE_BRK_HALF_OPEN, "udp: one reply of 2 probes");
	egress_n(dp, &rep, 1);
	is_state(dp, "dns", SLUICE_BRK_CLOSED, "udp: a second reply closes it");
	tap(run(dp, &req) == XDP_PASS, "udp: closed again, a datagram passes");

	/* replies alone never open it */
	set_time(t0 + 1000 * MS);
	burst(dp, &req, 10);
	egress_n(dp, &rep, 50);
	is_state(dp, "dns", SLUICE_BRK_CLOSED,
		 "udp: 50 replies to 10 requests");

	/* IPv6, and a failed probe */
	set_time(t0 + 2000 * MS);
	{
		struct pkt req6 = dgram_v(6), unr6 = unreach_v(6, &req6);

		burst(dp, &req6, 3);
		egress_n(dp, &unr6, 3);
		is_state(dp, "dns", SLUICE_BRK_OPEN,
			 "udp: 3 ICMPv6 port unreachable of 3 requests "
			 "open it");
		set_time(t0 + 2100 * MS);
		tap(run(dp, &req6) == XDP_PASS, "udp: IPv6 probe passes");
		egress_n(dp, &unr6, 1);
		st = brk_state(dp, "dns");
		is_state(dp, "dns", SLUICE_BRK_OPEN,
			 "udp: the probe's port unreachable opens it again");
		tap(st.probe_failure == 1,
		    "udp: one probe failure (%llu)",
		    (unsigned long long)st.probe_failure);
	}
}

/* What is not an answer to a udp rule's datagram. */
static void test_udp_not_answers(struct sl_dataplane *dp)
{
	struct pkt req = dgram_v(4), req6 = dgram_v(6);
	struct pkt other = udp_to(5354, NULL, 0);
	struct pspec ts = { .proto = TCP_, .dport = UPORT, .flags = PKT_SYN };
	struct pkt syn, unr[5];
	struct sluice_breaker st;

	build(&ts, &syn);
	unr[0] = icmp_err_v(4, 3, 1, &req);	/* host unreachable */
	unr[1] = icmp_err_v(4, 3, 3, &other);	/* another port */
	unr[2] = icmp_err_v(4, 3, 3, &syn);	/* a TCP segment */
	unr[3] = icmp_err_v(6, 1, 3, &req6);	/* address unreachable */
	unr[4] = icmp_err_v(6, 1, 1, &req6);	/* administratively */
	next_scenario();
	if (!tap(apply(dp, RULES(UBRK("dns",
				      "{\"strategy\":\"error_count\","
				      "\"threshold\":1,\"open_ms\":100,"
				      "\"min_request_amount\":1}"))) == 0,
		 "udp others: rule applies"))
		return;
	burst(dp, &req, 10);
	burst(dp, &req6, 10);
	for (int i = 0; i < 5; i++)
		egress_n(dp, &unr[i], 3);
	{
		struct pkt rep = reply_v(4, 5354);

		egress_n(dp, &rep, 3);
	}
	st = brk_state(dp, "dns");
	tap(answered(&st) == 0 && state_of(dp, "dns") == SLUICE_BRK_CLOSED,
	    "udp others: ICMP host unreachable, port unreachable for another "
	    "port or for TCP, ICMPv6 unreachable codes other than 4, a "
	    "reply from another port: no answer (%llu)",
	    (unsigned long long)answered(&st));
}

/* ---- the RST frame ----------------------------------------------------- */

static uint16_t csum16(const uint8_t *p, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		sum += p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

static int run_out(struct sl_dataplane *d, const struct pkt *in,
		   struct pkt *out)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in->buf,
		    .data_size_in = in->len, .data_out = out->buf,
		    .data_size_out = sizeof(out->buf), .repeat = 1);
	int fd = bpf_program__fd(d->skel->progs.sluice_xdp);

	*out = *in;
	if (bpf_prog_test_run_opts(fd, &o))
		return -errno;
	out->len = o.data_size_out;
	return o.retval;
}

static void check_rst(struct sl_dataplane *dp, int family, uint8_t tags)
{
	struct pkt in = syn_v(family, tags), out;
	const uint8_t *i = in.buf, *o;
	int l3 = in.l3_off, l4 = l3 + (family == 4 ? 20 : 40);
	int alen = family == 4 ? 4 : 16, sa = family == 4 ? 12 : 8;
	uint32_t ack, seq;
	char what[32];
	bool ok;

	snprintf(what, sizeof(what), "rst IPv%d%s", family,
		 tags ? " VLAN" : "");
	if (!tap(run_out(dp, &in, &out) == XDP_TX, "%s: XDP_TX", what))
		return;
	o = out.buf;
	tap(out.len == (size_t)l4 + 20, "%s: cut to its headers (%zu bytes)",
	    what, out.len);
	tap(!memcmp(o, i + 6, 6) && !memcmp(o + 6, i, 6) &&
		    !memcmp(o + 12, i + 12, l3 - 12),
	    "%s: MACs swapped, VLAN tags and ethertype kept", what);
	tap(!memcmp(o + l3 + sa, i + l3 + sa + alen, alen) &&
		    !memcmp(o + l3 + sa + alen, i + l3 + sa, alen),
	    "%s: addresses swapped", what);
	tap(!memcmp(o + l4, i + l4 + 2, 2) && !memcmp(o + l4 + 2, i + l4, 2),
	    "%s: ports swapped", what);
	memcpy(&seq, o + l4 + 4, 4);
	memcpy(&ack, o + l4 + 8, 4);
	tap(seq == 0 && ntohl(ack) == SYN_SEQ + 1,
	    "%s: seq 0, ack the SYN's seq + 1 (%#x)", what, ntohl(ack));
	tap(o[l4 + 12] == 0x50 && o[l4 + 13] == (PKT_RST | PKT_ACK) &&
		    !o[l4 + 14] && !o[l4 + 15],
	    "%s: 20-byte header, RST|ACK, window 0", what);
	if (family == 4) {
		ok = o[l3] == 0x45 && (o[l3 + 2] << 8 | o[l3 + 3]) == 40 &&
		     o[l3 + 8] == 64 && o[l3 + 9] == IPPROTO_TCP &&
		     csum16(o + l3, 20) == 0;
		tap(ok, "%s: IPv4 length 40, TTL 64, header checksum valid",
		    what);
	} else {
		ok = o[l3] == 0x60 && (o[l3 + 4] << 8 | o[l3 + 5]) == 20 &&
		     o[l3 + 6] == IPPROTO_TCP && o[l3 + 7] == 64;
		tap(ok, "%s: IPv6 payload 20, hop limit 64", what);
	}
	out.l4_off = l4;
	out.l4_proto = IPPROTO_TCP;
	tap(pkt_verify_l4(&out) == 0, "%s: TCP checksum valid", what);
}

static void test_rst_frames(struct sl_dataplane *dp)
{
	next_scenario();
	if (!tap(apply(dp, RULES(BRK("fr",
				     "{\"strategy\":\"error_count\","
				     "\"threshold\":1,\"open_ms\":100000,"
				     "\"min_request_amount\":1}"))) == 0,
		 "rst: rule applies"))
		return;
	answers(dp, 4, true, 2);
	if (!is_state(dp, "fr", SLUICE_BRK_OPEN, "rst: open"))
		return;
	check_rst(dp, 4, 0);
	check_rst(dp, 6, 0);
	check_rst(dp, 4, 1);
	check_rst(dp, 6, 2);
}

int main(void)
{
	struct sl_dataplane dp;

	if (!h_begin(&dp)) {
		test_ratio(&dp);
		test_count_window(&dp);
		test_layered(&dp);
		test_layered_conns(&dp);
		test_drop_and_others(&dp);
		test_timeout(&dp);
		test_conns_full(&dp);
		test_slow(&dp);
		test_slow_ends(&dp);
		test_watched_rules(&dp);
		test_udp(&dp);
		test_udp_not_answers(&dp);
		test_rst_frames(&dp);
		h_unload(&dp);
	}
	return h_end();
}
