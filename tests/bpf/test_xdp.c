// SPDX-License-Identifier: GPL-2.0
/*
 * Data plane tests: the XDP program loaded through the library, rule sets
 * applied from JSON, packets built by tests/lib/pkt.h run through
 * BPF_PROG_TEST_RUN on the test clock, and the verdict and every counter
 * checked against a table of expectations. Output is TAP. Needs root (BPF).
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "loader.h"
#include "log.h"
#include "rules.h"
#include "stats.h"
#include "sluice.skel.h"
#include "pkt.h"

#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_SEC  1000000000ULL
/* admission ring slot width for a 1 s interval */
#define SLOT_NS	      (NSEC_PER_SEC / SLUICE_ADMIT_SLOTS)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- TAP ---------------------------------------------------------- */

static int tap_n, tap_failed;

static void __attribute__((format(printf, 1, 2))) diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static bool __attribute__((format(printf, 2, 3)))
tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		tap_failed++;
	return ok;
}

static void __attribute__((format(printf, 2, 3)))
tap_skip(const char *reason, const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP %s\n", reason);
	fflush(stdout);
}

/* ---- data plane helpers ------------------------------------------- */

static struct sl_dataplane dp;	 /* malformed frames pass */
static struct sl_dataplane dp_drop; /* .drop_malformed = true */
static bool dp_drop_loaded;

/* Test time: every scenario starts on a fresh whole second, 10 s after
 * the previous one, so windows and pacing credit start full and exact. */
static uint64_t t_ns = 1000 * NSEC_PER_SEC;

static void set_time(uint64_t ns)
{
	t_ns = ns;
	sl_dp_set_test_time(&dp, ns);
	if (dp_drop_loaded)
		sl_dp_set_test_time(&dp_drop, ns);
}

static void next_scenario(void)
{
	set_time((t_ns / NSEC_PER_SEC + 10) * NSEC_PER_SEC);
}

static char errbuf[65536];

static int apply_to(struct sl_dataplane *d, const char *json)
{
	struct sl_ruleset rs = { 0 };
	int ret;

	ret = sl_rules_parse(json, strlen(json), &rs, errbuf, sizeof(errbuf));
	if (ret) {
		diag("rules do not parse (%d): %s", ret, errbuf);
		return ret;
	}
	ret = sl_dp_apply(d, &rs, errbuf, sizeof(errbuf));
	if (ret)
		diag("sl_dp_apply: %d: %s", ret, errbuf);
	sl_ruleset_free(&rs);
	return ret;
}

static int apply(const char *json)
{
	return apply_to(&dp, json);
}

static int rule_index(const struct sl_dataplane *d, const char *name)
{
	for (size_t i = 0; i < d->rules.n; i++)
		if (!strcmp(d->rules.rules[i].name, name))
			return i;
	return -1;
}

static struct sl_rule_stats rstats(const struct sl_dataplane *d,
				   const char *name)
{
	struct sl_rule_stats st = { 0 };
	int i = rule_index(d, name);

	if (i < 0 || sl_dp_rule_stats(d, i, &st))
		diag("no stats for rule '%s'", name);
	return st;
}

static void hstats(const struct sl_dataplane *d, uint64_t out[SLUICE_ST_MAX])
{
	if (sl_dp_host_stats(d, out))
		diag("sl_dp_host_stats failed");
}

/* One frame through the program: its XDP verdict or -errno. */
static int run_len(struct sl_dataplane *d, const void *buf, size_t len)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = buf,
		    .data_size_in = len, .repeat = 1);
	int fd = bpf_program__fd(d->skel->progs.sluice_xdp);

	if (bpf_prog_test_run_opts(fd, &o))
		return -errno;
	return o.retval;
}

static int run(struct sl_dataplane *d, const struct pkt *p)
{
	return run_len(d, p->buf, p->len);
}

/* n copies of a frame; returns how many got XDP_PASS (-errno on error). */
static long burst(struct sl_dataplane *d, const struct pkt *p, long n)
{
	long passed = 0;

	for (long i = 0; i < n; i++) {
		int v = run(d, p);

		if (v < 0)
			return v;
		passed += v == XDP_PASS;
	}
	return passed;
}

static const char *verdict_str(int v)
{
	switch (v) {
	case XDP_PASS:
		return "XDP_PASS";
	case XDP_DROP:
		return "XDP_DROP";
	case XDP_ABORTED:
		return "XDP_ABORTED";
	default:
		return v < 0 ? strerror(-v) : "?";
	}
}

/* ---- packet specs --------------------------------------------------- */

/* What a fixture's frame carries; zero fields take the defaults. */
struct pspec {
	uint8_t tags;		/* VLAN tags: 1 = 802.1Q, 2 = 802.1ad + .1Q */
	uint16_t ethertype;	/* a non-IP frame of this ethertype */
	uint8_t family;		/* 4 (default) or 6 */
	const char *src, *dst;
	uint8_t proto;		/* IPPROTO_*, default UDP */
	uint16_t sport, dport;
	uint8_t flags;		/* TCP flags */
	uint8_t ip4_optlen;
	uint16_t frag;		/* fragment offset, 8-byte units */
	bool mf;
	uint8_t n_ext;		/* IPv6 extension headers, in order */
	uint8_t ext[16];	/* IPPROTO_FRAGMENT takes frag/mf */
	uint16_t ext_len;	/* bytes of each option header, default 8 */
	uint16_t size;		/* pad the frame to this size */
	void (*mangle)(struct pkt *p);
};

#define SRC4 "192.0.2.1"
#define DST4 "198.51.100.1"
#define SRC6 "2001:db8::1"
#define DST6 "2001:db8:1::1"

static size_t build(const struct pspec *s, struct pkt *p)
{
	int family = s->family ? s->family : 4;
	uint8_t proto = s->proto ? s->proto : IPPROTO_UDP;
	uint16_t sport = s->sport ? s->sport : 40000;
	bool no_l4 = s->frag != 0;

	pkt_init(p);
	pkt_eth(p, NULL, NULL);
	if (s->tags >= 2)
		pkt_vlan(p, ETH_P_8021AD, 10);
	for (int i = s->tags >= 2 ? 1 : 0; i < s->tags; i++)
		pkt_vlan(p, ETH_P_8021Q, 100 + i);
	if (s->ethertype) {
		static const uint8_t arp[28] = { 0, 1, 8, 0, 6, 4, 0, 1 };

		pkt_next(p, s->ethertype);
		pkt_bytes(p, arp, sizeof(arp));
		return pkt_finish(p, s->size);
	}
	if (family == 4) {
		pkt_ipv4_ex(p, s->src ? s->src : SRC4, s->dst ? s->dst : DST4,
			    s->ip4_optlen, s->frag, s->mf);
	} else {
		pkt_ipv6(p, s->src ? s->src : SRC6, s->dst ? s->dst : DST6);
		for (int i = 0; i < s->n_ext; i++) {
			if (s->ext[i] == IPPROTO_FRAGMENT)
				pkt_ipv6_frag(p, s->frag, s->mf);
			else
				pkt_ipv6_ext(p, s->ext[i],
					     s->ext_len ? s->ext_len : 8);
		}
	}
	if (no_l4) {
		/* a non-first fragment: payload of proto, no L4 header */
		static const uint8_t payload[24] = { 0xde, 0xad };

		pkt_next(p, proto);
		pkt_bytes(p, payload, sizeof(payload));
	} else if (proto == IPPROTO_TCP) {
		pkt_tcp(p, sport, s->dport, s->flags);
	} else if (proto == IPPROTO_UDP) {
		pkt_udp(p, sport, s->dport);
	} else if (proto == (family == 6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP)) {
		pkt_icmp(p, family == 6 ? 128 : 8, 0);
	} else {
		/* any other protocol, ICMP's number in IPv6 among them */
		static const uint8_t gre[4] = { 0, 0, 0x08, 0x00 };

		pkt_next(p, proto);
		pkt_bytes(p, gre, sizeof(gre));
	}
	pkt_finish(p, s->size);
	if (s->mangle)
		s->mangle(p);
	return p->len;
}


/* ---- the builder itself ------------------------------------------------ */

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


/* ---- fixtures: one frame, its verdict and counter deltas ------------ */

enum which { NONE = 0, PASSED, BLOCKED };

struct fixture {
	const char *desc;
	struct pspec pkt;
	int verdict;
	const char *rule;	/* the rule whose counter moves, or NULL */
	enum which ctr;		/* PASSED or BLOCKED by one frame */
	int host;		/* 1 + the host stat that moves by one, 0: none */
	int host2;		/* 1 + a second one (0: none) */
};

#define MAX_SNAP_RULES 64

struct snap {
	uint64_t host[SLUICE_ST_MAX];
	struct sl_rule_stats rule[MAX_SNAP_RULES];
	size_t n;
};

static void take_snap(const struct sl_dataplane *d, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	hstats(d, s->host);
	s->n = d->rules.n < MAX_SNAP_RULES ? d->rules.n : MAX_SNAP_RULES;
	for (size_t i = 0; i < s->n; i++)
		if (sl_dp_rule_stats(d, i, &s->rule[i]))
			diag("rule stats %zu failed", i);
}

/*
 * Compare every counter's delta with what one frame of len bytes should
 * move; returns the number of mismatches (each one diagnosed).
 */
static int check_deltas(const struct sl_dataplane *d, const struct snap *a,
			const struct snap *b, const char *rule,
			enum which ctr, int host, int host2, uint64_t npkts,
			uint64_t len)
{
	int bad = 0;

	for (int k = 0; k < SLUICE_ST_MAX; k++) {
		uint64_t want = 0, got = b->host[k] - a->host[k];

		if (k == host)
			want += npkts;
		if (k == host2)
			want += npkts;
		if (got != want) {
			diag("host stat %s moved by %llu, expected %llu",
			     sl_host_stat_name(k), (unsigned long long)got,
			     (unsigned long long)want);
			bad++;
		}
	}
	for (size_t i = 0; i < b->n; i++) {
		const struct sl_rule_stats *x = &a->rule[i], *y = &b->rule[i];
		bool mine = rule && !strcmp(d->rules.rules[i].name, rule);
		uint64_t wp = mine && ctr == PASSED ? npkts : 0;
		uint64_t wb = mine && ctr == BLOCKED ? npkts : 0;
		uint64_t dpp = y->passed_pkts - x->passed_pkts;
		uint64_t dpb = y->passed_bytes - x->passed_bytes;
		uint64_t dbp = y->blocked_pkts - x->blocked_pkts;
		uint64_t dbb = y->blocked_bytes - x->blocked_bytes;

		if (dpp != wp || dpb != wp * len || dbp != wb ||
		    dbb != wb * len) {
			diag("rule '%s': passed +%llu pkts +%llu B, blocked "
			     "+%llu pkts +%llu B; expected passed +%llu "
			     "(+%llu B), blocked +%llu (+%llu B)",
			     d->rules.rules[i].name, (unsigned long long)dpp,
			     (unsigned long long)dpb, (unsigned long long)dbp,
			     (unsigned long long)dbb, (unsigned long long)wp,
			     (unsigned long long)(wp * len),
			     (unsigned long long)wb,
			     (unsigned long long)(wb * len));
			bad++;
		}
	}
	if (rule && rule_index(d, rule) < 0) {
		diag("fixture names unknown rule '%s'", rule);
		bad++;
	}
	return bad;
}

static bool run_fixture(struct sl_dataplane *d, const struct fixture *f,
			const char *group)
{
	struct snap a, b;
	struct pkt p;
	int v, bad = 0;

	build(&f->pkt, &p);
	take_snap(d, &a);
	v = run(d, &p);
	take_snap(d, &b);
	if (v != f->verdict) {
		diag("verdict %s, expected %s", verdict_str(v),
		     verdict_str(f->verdict));
		bad++;
	}
	bad += check_deltas(d, &a, &b, f->rule, f->ctr, f->host - 1, f->host2 - 1, 1,
			    p.len);
	return tap(!bad, "%s: %s", group, f->desc);
}

static void run_table(struct sl_dataplane *d, const char *group,
		      const struct fixture *fx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_fixture(d, &fx[i], group);
}

#define RUN_TABLE(d, group, fx) run_table(d, group, fx, ARRAY_SIZE(fx))

#define P(verdict_, rule_) .verdict = verdict_, .rule = rule_, .ctr = PASSED
#define UNMATCHED .verdict = XDP_PASS, .host = 1 + SLUICE_ST_UNMATCHED


/* A rule with a huge count: never blocks; shows where a frame lands. */
#define OPEN(name, match)                                                   \
	"{\"name\":\"" name "\",\"match\":" match                           \
	",\"grade\":\"pps\",\"count\":100000000000}"

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

#define TCP_ IPPROTO_TCP
#define UDP_ IPPROTO_UDP
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
	  .verdict = XDP_PASS, .host = 1 + SLUICE_ST_MALFORMED_VLAN },
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
	{ "IPv4 non-first UDP fragment: proto-only rule, counted",
	  { .frag = 185, .mf = true }, P(XDP_PASS, "udp-any"),
	  .host = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv4 last UDP fragment (offset, no MF)", { .frag = 100 },
	  P(XDP_PASS, "udp-any"), .host = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv4 non-first UDP fragment whose payload looks like port 53",
	  { .frag = 1, .mf = true, .mangle = payload_port53 },
	  P(XDP_PASS, "udp-any"),
	  .host = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv4 non-first TCP fragment never matches a dport rule",
	  { .proto = TCP_, .frag = 3 }, UNMATCHED,
	  .host2 = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv4 non-first ICMP fragment: icmp rule",
	  { .proto = IPPROTO_ICMP, .frag = 3 }, P(XDP_PASS, "icmp"),
	  .host = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv4 version 5 is malformed",
	  { .dport = 53, .mangle = ip4_version5 },
	  .verdict = XDP_PASS, .host = 1 + SLUICE_ST_MALFORMED_IP4 },
	{ "IPv4 IHL 4 is malformed", { .dport = 53, .mangle = ip4_ihl4 },
	  .verdict = XDP_PASS, .host = 1 + SLUICE_ST_MALFORMED_IP4 },
	{ "IPv4 IHL past the end of the frame is malformed",
	  { .dport = 53, .mangle = ip4_ihl_past_end },
	  .verdict = XDP_PASS, .host = 1 + SLUICE_ST_MALFORMED_IP4 },
	{ "IPv6 header with version 4 is malformed",
	  { .family = 6, .dport = 53, .mangle = ip6_version4 },
	  .verdict = XDP_PASS, .host = 1 + SLUICE_ST_MALFORMED_IP6 },
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
	{ "IPv6 non-first UDP fragment: proto-only rule, counted",
	  { .family = 6, .n_ext = 1, .ext = { FR }, .frag = 10, .mf = true },
	  P(XDP_PASS, "udp-any"), .host = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv6 HBH, RT, non-first TCP fragment: no dport rule",
	  { .family = 6, .n_ext = 3, .ext = { HBH, RT, FR }, .frag = 7,
	    .proto = TCP_ }, UNMATCHED, .host2 = 1 + SLUICE_ST_FRAGMENTS },
	{ "IPv6 non-first ICMPv6 fragment: icmpv6 rule",
	  { .family = 6, .n_ext = 1, .ext = { FR }, .frag = 2,
	    .proto = IPPROTO_ICMPV6 }, P(XDP_PASS, "icmp6"),
	  .host = 1 + SLUICE_ST_FRAGMENTS },
	/* the two below get their chains filled in at run time */
	{ "IPv6 with SLUICE_MAX_IPV6_EXT extension headers parses",
	  { .family = 6, .dport = 53 }, P(XDP_PASS, "udp53") },
	{ "IPv6 with SLUICE_MAX_IPV6_EXT + 1 extension headers is malformed",
	  { .family = 6, .dport = 53 }, .verdict = XDP_PASS,
	  .host = 1 + SLUICE_ST_MALFORMED_IP6 },
	{ "IPv6 extension header longer than the frame is malformed",
	  { .family = 6, .n_ext = 1, .ext = { DO }, .dport = 53,
	    .mangle = ip6_ext_past_end }, .verdict = XDP_PASS,
	  .host = 1 + SLUICE_ST_MALFORMED_IP6 },
};

static void test_protocols(void)
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
	if (!tap(apply(rules_proto) == 0, "protocols: rule set applies"))
		return;
	RUN_TABLE(&dp, "protocols", fx_proto);
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
					 PASSED, want ? want : -1, -1, 1, len)) {
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

static void test_truncation(void)
{
	next_scenario();
	if (!tap(apply(rules_proto) == 0, "truncation: rule set applies"))
		return;
	test_truncation_on(&dp, "malformed passes", XDP_PASS);
	if (!dp_drop_loaded) {
		tap_skip("second data plane did not load",
			 "truncation with drop_malformed");
		return;
	}
	if (!tap(apply_to(&dp_drop, rules_proto) == 0,
		 "truncation: rule set applies to the drop_malformed plane"))
		return;
	test_truncation_on(&dp_drop, "drop_malformed", XDP_DROP);
	{
		static const struct fixture fx[] = {
			{ "ARP still passes", { .ethertype = ETH_P_ARP },
			  UNMATCHED },
			{ "three VLAN tags are dropped", { .tags = 3 },
			  .verdict = XDP_DROP,
			  .host = 1 + SLUICE_ST_MALFORMED_VLAN },
			{ "IPv4 IHL 4 is dropped",
			  { .dport = 53, .mangle = ip4_ihl4 },
			  .verdict = XDP_DROP,
			  .host = 1 + SLUICE_ST_MALFORMED_IP4 },
			{ "non-first fragments are not malformed",
			  { .frag = 9 }, P(XDP_PASS, "udp-any"),
			  .host = 1 + SLUICE_ST_FRAGMENTS },
		};

		RUN_TABLE(&dp_drop, "drop_malformed", fx);
	}
}


/* ---- precedence between overlapping rules ---------------------------- */

struct prec_case {
	const char *group;
	const char *json;
	struct fixture fx[12];	/* up to the first without desc */
};

#define RULES(...) "{\"rules\":[" __VA_ARGS__ "]}"
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
	{ "unmatched packets pass",
	  RULES(OPEN("only", "{\"proto\":\"udp\",\"dport\":1,"
			     "\"dst\":\"10.0.0.0/8\"}")),
	  { { "UDP 1 elsewhere", { .dport = 1 }, UNMATCHED },
	    { "UDP 2 inside", { .dport = 2, .dst = "10.0.0.1" }, UNMATCHED },
	    { "UDP 1 inside", { .dport = 1, .dst = "10.0.0.1" },
	      P(XDP_PASS, "only") } } },
};

static void test_precedence(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(prec_cases); i++) {
		const struct prec_case *c = &prec_cases[i];
		size_t n = 0;

		next_scenario();
		if (!tap(apply(c->json) == 0, "%s: rule set applies", c->group))
			continue;
		while (n < ARRAY_SIZE(c->fx) && c->fx[n].desc)
			n++;
		run_table(&dp, c->group, c->fx, n);
	}
}


/* ---- admission windows ------------------------------------------------ */

static char json_buf[1 << 20];

/* A one-rule set: udp to dport, grade, count, extra JSON members. */
static int apply_one(const char *name, uint16_t dport, const char *grade,
		     uint64_t count, const char *extra)
{
	snprintf(json_buf, sizeof(json_buf),
		 "{\"rules\":[{\"name\":\"%s\",\"match\":{\"proto\":\"udp\","
		 "\"dport\":%u},\"grade\":\"%s\",\"count\":%llu%s%s}]}",
		 name, dport, grade, (unsigned long long)count,
		 extra ? "," : "", extra ? extra : "");
	return apply(json_buf);
}

static struct pkt udp_to(uint16_t dport, const char *src, size_t size)
{
	struct pspec s = { .dport = dport, .src = src, .size = size };
	struct pkt p;

	build(&s, &p);
	return p;
}

/* Tokens a CPU takes at once from a budget of limit (admit.h). */
static uint64_t chunk_of(uint64_t limit)
{
	uint64_t c = limit / (SLUICE_CHUNK_DIV * (uint64_t)dp.n_cpus);

	return c ? c : 1;
}

/*
 * A burst at one instant admits exactly the limit, and after a silence of
 * an interval and one admission slot (the ring's resolution) exactly the
 * limit again: no credit lost, none left over, no stale refusal.
 * (Traffic during the interval forfeits credit: test_pacing.)
 */
static void test_window_exact(void)
{
	static const uint64_t counts[] = { 1, 7, 100, 1000, 4096 };

	for (size_t i = 0; i < ARRAY_SIZE(counts); i++) {
		uint64_t T = counts[i], N = 3 * T + 40;
		struct sl_rule_stats st;
		struct pkt p = udp_to(7000, NULL, 0);
		uint64_t t0;
		long a1, a2, a3;

		next_scenario();
		t0 = t_ns;
		if (!tap(apply_one("win", 7000, "pps", T, NULL) == 0,
			 "window count %llu: rule applies",
			 (unsigned long long)T))
			continue;
		a1 = burst(&dp, &p, N);
		st = rstats(&dp, "win");
		tap(a1 == (long)T && st.passed_pkts == T &&
			    st.blocked_pkts == N - T &&
			    st.blocked_bytes == (N - T) * p.len,
		    "window count %llu: a burst of %llu at one instant admits "
		    "exactly %llu (admitted %ld, counters %llu/%llu)",
		    (unsigned long long)T, (unsigned long long)N,
		    (unsigned long long)T, a1,
		    (unsigned long long)st.passed_pkts,
		    (unsigned long long)st.blocked_pkts);
		/* silence, then one interval and one admission slot (the
		 * ring's resolution) after the burst */
		set_time(t0 + NSEC_PER_SEC + SLOT_NS);
		a2 = burst(&dp, &p, N);
		tap(a2 == (long)T,
		    "window count %llu: an interval (+1 slot) later the same "
		    "burst admits exactly %llu again (admitted %ld)",
		    (unsigned long long)T, (unsigned long long)T, a2);
		/* no traffic at all for a while: nothing is lost either */
		set_time(t0 + 10 * NSEC_PER_SEC / 3);
		a3 = burst(&dp, &p, N);
		tap(a3 == (long)T,
		    "window count %llu: after a longer silence again exactly "
		    "%llu (admitted %ld)",
		    (unsigned long long)T, (unsigned long long)T, a3);
	}
}

/*
 * The window holds whatever the arrival shape: one packet early, a burst
 * of the rest of the limit 30 ms later, and one interval after the first
 * packet a burst again. Only the early packet's grant has left the window,
 * so that burst may take it and the documented allowance, no more; a ring
 * that spread the early and late grants over one slot freed most of the
 * late burst here and admitted nearly the limit again.
 */
static void test_window_shape(void)
{
	const uint64_t T = 3200, chunk = chunk_of(T);
	/* the error bound of bpf/admit.h beyond what left the window */
	const uint64_t allowance = T / SLUICE_LEDGER_DIV + T / SLUICE_CHUNK_DIV;
	struct pkt p = udp_to(7003, NULL, 0);
	uint64_t t0;
	long early, late, echo, freed;

	next_scenario();
	t0 = t_ns;
	if (!tap(apply_one("shape", 7003, "pps", T, NULL) == 0,
		 "window shape: rule applies"))
		return;
	early = burst(&dp, &p, 1);
	set_time(t0 + 30 * NSEC_PER_MSEC);
	late = burst(&dp, &p, 2 * T);
	tap(early == 1 && early + late == (long)T,
	    "window shape: 1 packet, 30 ms later a burst: %ld + %ld admitted, "
	    "expected the limit %llu", early, late, (unsigned long long)T);
	set_time(t0 + NSEC_PER_SEC + 29 * NSEC_PER_MSEC);
	echo = burst(&dp, &p, 2 * T);
	tap(echo <= (long)(chunk + allowance),
	    "window shape: 1 s + 29 ms later, with only the first grant out "
	    "of the window, a burst admits %ld <= %llu (first grant %llu + "
	    "allowance %llu)", echo,
	    (unsigned long long)(chunk + allowance),
	    (unsigned long long)chunk, (unsigned long long)allowance);
	set_time(t0 + NSEC_PER_SEC + 31 * NSEC_PER_MSEC);
	freed = burst(&dp, &p, 2 * T);
	tap(echo + freed == (long)T,
	    "window shape: once the late burst has left the window the limit "
	    "is free again: %ld + %ld admitted, expected %llu", echo, freed,
	    (unsigned long long)T);
}

/*
 * A refusal must not outlive its moment: one packet over a limit of 1/s,
 * then one packet per interval, each of which fits the limit.
 */
static void test_refusal_expires(void)
{
	struct pkt p = udp_to(7001, NULL, 0);
	int passed = 0, v;

	next_scenario();
	if (!tap(apply_one("once", 7001, "pps", 1, NULL) == 0,
		 "refusal: rule applies"))
		return;
	v = run(&dp, &p);
	tap(v == XDP_PASS && run(&dp, &p) == XDP_DROP,
	    "refusal: count 1 admits the first packet, drops the second");
	for (int k = 1; k <= 5; k++) {
		set_time(t_ns + NSEC_PER_SEC + SLOT_NS);
		passed += run(&dp, &p) == XDP_PASS;
	}
	tap(passed == 5,
	    "refusal: then one packet per interval, 5 intervals: %d of 5 "
	    "admitted, expected 5", passed);
}

/*
 * A flood's refusal batch ends with its admission slot: after a burst far
 * over the limit at one instant, which leaves a batch of blocked packets
 * to come, a packet an interval later is judged afresh (the clock has
 * ticked), not held by the rest of the batch.
 */
static void test_refusal_batch_ends(void)
{
	struct pkt p = udp_to(7005, NULL, 0);
	long passed;

	next_scenario();
	if (!tap(apply_one("batch", 7005, "pps", 10, NULL) == 0,
		 "refusal batch: rule applies"))
		return;
	passed = burst(&dp, &p, 3000);
	tap(passed == 10,
	    "refusal batch: 3000 frames at one instant, 10 admitted (%ld)",
	    passed);
	set_time(t_ns + NSEC_PER_SEC + SLOT_NS);
	tap(run(&dp, &p) == XDP_PASS,
	    "refusal batch: the next frame, an interval later, passes");
}

/*
 * Statistics move to the bucket of the time when the clock ticks, also
 * while a CPU spends tokens it holds (no refill, which would roll too):
 * 20 frames at the start of a bucket, 30 at the start of the next, all
 * from one chunk; at the start of the third the window holds the 30 alone.
 */
static void test_bucket_rolls_on_tick(void)
{
	struct pkt p = udp_to(7006, NULL, 0);
	struct sl_rule_stats st;
	uint64_t t0;

	next_scenario();
	t0 = t_ns;
	if (!tap(apply_one("roll", 7006, "pps", 1000000, NULL) == 0,
		 "bucket roll: rule applies"))
		return;
	burst(&dp, &p, 20);
	set_time(t0 + NSEC_PER_SEC / 2);
	burst(&dp, &p, 30);
	set_time(t0 + NSEC_PER_SEC);
	st = rstats(&dp, "roll");
	tap(st.passed_pkts == 50 && st.passed_pps == 60.0,
	    "bucket roll: 50 passed, the window's rate is the second burst's "
	    "30 in its 0.5 s: %llu, %.1f/s (expected 60)",
	    (unsigned long long)st.passed_pkts, st.passed_pps);
}

/* bps: the bytes of frames admitted in a burst never exceed the limit. */
static void test_window_bps(void)
{
	const size_t F = 100;
	struct pkt p = udp_to(7002, NULL, F);
	/* a limit whose chunk is a whole number of frames: exact */
	uint64_t T = F * SLUICE_CHUNK_DIV * dp.n_cpus * 3;
	struct sl_rule_stats st;
	long a;

	next_scenario();
	if (!tap(apply_one("bytes", 7002, "bps", T, NULL) == 0,
		 "bps: rule applies"))
		return;
	a = burst(&dp, &p, 2 * T / F + 40);
	st = rstats(&dp, "bytes");
	tap(a == (long)(T / F) && st.passed_bytes == T &&
		    st.blocked_bytes == (2 * T / F + 40 - a) * F,
	    "bps %llu B/s, %zu-byte frames: a burst admits exactly %llu "
	    "frames = %llu bytes (admitted %ld frames, %llu bytes)",
	    (unsigned long long)T, F, (unsigned long long)(T / F),
	    (unsigned long long)T, a, (unsigned long long)st.passed_bytes);
	set_time(t_ns + NSEC_PER_SEC + SLOT_NS);
	a = burst(&dp, &p, 2 * T / F + 40);
	tap(a == (long)(T / F), "bps: an interval later again %llu frames "
				"(admitted %ld)",
	    (unsigned long long)(T / F), a);

	/* a limit that is not a multiple of the frame size */
	T = 10050;
	next_scenario();
	if (!tap(apply_one("bytes2", 7002, "bps", T, NULL) == 0,
		 "bps: second rule applies"))
		return;
	a = burst(&dp, &p, 300);
	st = rstats(&dp, "bytes2");
	tap(st.passed_bytes <= T && st.passed_bytes + 2 * F > T &&
		    st.passed_bytes == (uint64_t)a * F,
	    "bps %llu B/s: admitted %llu bytes, within (limit - 2 frames, "
	    "limit]", (unsigned long long)T,
	    (unsigned long long)st.passed_bytes);

	/* a frame larger than the whole limit is never admitted */
	next_scenario();
	if (!tap(apply_one("bytes3", 7002, "bps", F - 1, NULL) == 0,
		 "bps: third rule applies"))
		return;
	a = burst(&dp, &p, 10);
	tap(a == 0, "bps %zu B/s: a %zu-byte frame is never admitted "
		    "(admitted %ld)", F - 1, F, a);
}

/* The most that any span of span ms from ms `from` on admitted, per ms
 * counts in adm[0..n); *at: where that span starts. */
static uint64_t busiest_span(const long *adm, int n, int from, int span,
			     int *at)
{
	uint64_t worst = 0;

	*at = from;
	for (int s = from; s + span <= n; s++) {
		uint64_t w = 0;

		for (int ms = s; ms < s + span; ms++)
			w += adm[ms];
		if (w > worst) {
			worst = w;
			*at = s;
		}
	}
	return worst;
}

/*
 * After a burst, traffic at 3x the rate every 1 ms of test time: the
 * following intervals admit the rate, paced, and no sliding interval
 * (1 ms resolution) admits more than 1.05 x count.
 */
static void test_pacing_one(uint64_t C)
{
	const int ms_total = 3000;
	uint64_t per_ms = 3 * C / 1000, t0, sum = 0, worst;
	static long adm[3000];
	struct pkt p = udp_to(7003, NULL, 0);
	int worst_at, bad = 0;
	char name[32];

	snprintf(name, sizeof(name), "pace-%llu", (unsigned long long)C);
	next_scenario();
	t0 = t_ns;
	if (!tap(apply_one(name, 7003, "pps", C, NULL) == 0,
		 "pacing %llu/s: rule applies", (unsigned long long)C))
		return;
	memset(adm, 0, sizeof(adm));
	adm[0] = burst(&dp, &p, 3 * C);
	for (int ms = 1; ms < ms_total && !bad; ms++) {
		set_time(t0 + ms * NSEC_PER_MSEC);
		adm[ms] = burst(&dp, &p, per_ms);
		bad = adm[ms] < 0;
	}
	if (!tap(!bad && adm[0] == (long)C,
		 "pacing %llu/s: the opening burst admits %llu (got %ld)",
		 (unsigned long long)C, (unsigned long long)C, adm[0]))
		return;
	for (int ms = 1000; ms < 3000; ms++)
		sum += adm[ms];
	tap(sum >= 2 * C * 95 / 100 && sum <= 2 * C * 105 / 100,
	    "pacing %llu/s: intervals 2-3 admit %llu, within 5%% of %llu",
	    (unsigned long long)C, (unsigned long long)sum,
	    (unsigned long long)(2 * C));
	worst = busiest_span(adm, ms_total, 0, 1000, &worst_at);
	tap(worst * 100 <= C * 105,
	    "pacing %llu/s: the busiest sliding interval admits %llu "
	    "(from ms %d), at most 1.05 x %llu",
	    (unsigned long long)C, (unsigned long long)worst, worst_at,
	    (unsigned long long)C);
	{
		uint64_t first = 0;

		for (int ms = 1; ms < 1000; ms++)
			first += adm[ms];
		tap(first * 100 <= C * 5,
		    "pacing %llu/s: the rest of the burst's interval admits "
		    "%llu (<= 5%% of count)", (unsigned long long)C,
		    (unsigned long long)first);
	}
}

static void test_pacing(void)
{
	test_pacing_one(1000);
	test_pacing_one(10000);
}

/*
 * Two bursts just under an interval apart, silence between: together
 * they must not exceed the documented bound in one sliding interval.
 */
/*
 * A flood from idle: the opening burst passes, and after the first
 * interval the flood is paced, not re-admitted as a burst every interval
 * (pace_hold(); with the pacing clock's full credit each interval's first
 * 100 ms took the whole count). Counted per ms of test time.
 */
static void test_flood_smooth(void)
{
	const uint64_t C = 6500, per_ms = 40, ms_total = 8000;
	/* one interval / SLUICE_ECHO_DIV of kept credit, 100 ms of pacing,
	 * the window's allowance */
	const uint64_t bound = C / SLUICE_ECHO_DIV + C / 10 +
			       C / SLUICE_LEDGER_DIV + C / SLUICE_CHUNK_DIV;
	static long adm[8000];
	struct pkt p = udp_to(7005, NULL, 0);
	uint64_t t0, sum = 0, worst;
	int worst_at;

	next_scenario();
	t0 = t_ns;
	if (!tap(apply_one("smooth", 7005, "pps", C, NULL) == 0,
		 "flood shape: rule applies"))
		return;
	for (uint64_t ms = 0; ms < ms_total; ms++) {
		set_time(t0 + ms * NSEC_PER_MSEC);
		adm[ms] = burst(&dp, &p, per_ms);
		if (adm[ms] < 0) {
			tap(false, "flood shape: test run fails (%ld)", adm[ms]);
			return;
		}
	}
	for (uint64_t ms = 1000; ms < ms_total; ms++)
		sum += adm[ms];
	tap(sum * 100 >= 7 * C * 98 && sum * 100 <= 7 * C * 102,
	    "flood shape: 40 pkt/ms against %llu/s: intervals 2-8 admit "
	    "%llu, within 2%% of %llu", (unsigned long long)C,
	    (unsigned long long)sum, (unsigned long long)(7 * C));
	worst = busiest_span(adm, ms_total, 1000, 100, &worst_at);
	tap(worst <= bound,
	    "flood shape: after the first interval the busiest 100 ms admit "
	    "%llu (from ms %d), at most %llu (kept credit, 100 ms of count, "
	    "allowance)", (unsigned long long)worst, worst_at,
	    (unsigned long long)bound);
}

static void test_two_bursts(void)
{
	const uint64_t C = 1000;
	struct pkt p = udp_to(7004, NULL, 0);
	static const uint64_t gap_ms[] = { 999, 990, 969, 500 };

	for (size_t i = 0; i < ARRAY_SIZE(gap_ms); i++) {
		uint64_t t0;
		long a, b;

		next_scenario();
		t0 = t_ns + SLOT_NS - 1;
		set_time(t0);
		if (!tap(apply_one("twice", 7004, "pps", C, NULL) == 0,
			 "two bursts: rule applies"))
			return;
		a = burst(&dp, &p, 2 * C);
		set_time(t0 + gap_ms[i] * NSEC_PER_MSEC);
		b = burst(&dp, &p, 2 * C);
		tap(a == (long)C && (uint64_t)(a + b) * 100 <= C * 105,
		    "two bursts %llu ms apart (first at the end of an "
		    "admission slot): %ld + %ld admitted within one "
		    "interval, at most 1.05 x %llu",
		    (unsigned long long)gap_ms[i], a, b,
		    (unsigned long long)C);
	}
}


/* ---- shadow mode, cps ------------------------------------------------- */

static void test_shadow(void)
{
	struct pkt p = udp_to(7100, NULL, 0);
	struct sl_rule_stats st;
	long passed;

	next_scenario();
	if (!tap(apply_one("shadow", 7100, "pps", 5, "\"mode\":\"shadow\"") ==
			 0,
		 "shadow: rule applies"))
		return;
	passed = burst(&dp, &p, 50);
	st = rstats(&dp, "shadow");
	tap(passed == 50, "shadow: all 50 frames pass (%ld)", passed);
	tap(st.passed_pkts == 5 && st.blocked_pkts == 45 &&
		    st.blocked_bytes == 45 * p.len,
	    "shadow: 5 counted passed, 45 counted blocked (%llu/%llu)",
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts);
	/* the rates are over the part of the window the buckets cover: at
	 * the start of a bucket, the one before it (0.5 s): 10/s and 90/s */
	tap(st.passed_pps == 10.0 && st.blocked_pps == 90.0 &&
		    st.blocked_Bps == 90.0 * p.len,
	    "shadow: windowed rates %.1f passed/s, %.1f blocked/s",
	    st.passed_pps, st.blocked_pps);
	set_time(t_ns + 2 * NSEC_PER_SEC);
	st = rstats(&dp, "shadow");
	tap(st.passed_pps == 0 && st.blocked_pps == 0 && st.passed_pkts == 5,
	    "shadow: two intervals later the rates are 0, totals stay "
	    "(%.1f/s, %llu)", st.passed_pps,
	    (unsigned long long)st.passed_pkts);
}

static void test_cps(void)
{
	struct pspec syn = { .proto = TCP_, .dport = 443, .flags = PKT_SYN };
	struct pspec ack = { .proto = TCP_, .dport = 443, .flags = PKT_ACK };
	struct pspec synack = { .proto = TCP_, .dport = 443,
				.flags = PKT_SYN | PKT_ACK };
	struct pkt ps, pa, psa;
	uint64_t h0[SLUICE_ST_MAX], h1[SLUICE_ST_MAX];
	struct sl_rule_stats st;
	int syn_pass = 0, syn_drop = 0, other_pass = 0;

	build(&syn, &ps);
	build(&ack, &pa);
	build(&synack, &psa);
	next_scenario();
	if (!tap(apply("{\"rules\":[{\"name\":\"syn443\",\"match\":"
		       "{\"proto\":\"tcp\",\"dport\":443},\"grade\":\"cps\","
		       "\"count\":5}]}") == 0,
		 "cps: rule applies"))
		return;
	hstats(&dp, h0);
	for (int i = 0; i < 40; i++) {
		int v = run(&dp, &ps);

		syn_pass += v == XDP_PASS;
		syn_drop += v == XDP_DROP;
		other_pass += run(&dp, &pa) == XDP_PASS;
		other_pass += run(&dp, &psa) == XDP_PASS;
	}
	hstats(&dp, h1);
	st = rstats(&dp, "syn443");
	tap(syn_pass == 5 && syn_drop == 35,
	    "cps 5/s: a flood of 40 SYNs: 5 pass, 35 dropped (%d/%d)",
	    syn_pass, syn_drop);
	tap(other_pass == 80 &&
		    h1[SLUICE_ST_UNMATCHED] - h0[SLUICE_ST_UNMATCHED] == 80,
	    "cps: 40 ACKs and 40 SYN-ACKs to 443 in the flood all pass, "
	    "unmatched by the cps rule (%d passed, unmatched +%llu)",
	    other_pass,
	    (unsigned long long)(h1[SLUICE_ST_UNMATCHED] -
				 h0[SLUICE_ST_UNMATCHED]));
	tap(st.passed_pkts == 5 && st.blocked_pkts == 35,
	    "cps: rule counters count SYNs only (%llu passed, %llu blocked)",
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts);
}

/* ---- per_source --------------------------------------------------------- */

/*
 * Round-robin n frames from each source; got[i] = admitted from src[i].
 * Returns 0 or -1 on a run error.
 */
static int sources_round(const char *const *src, int nsrc, int n, int family,
			 uint16_t dport, long *got)
{
	struct pkt p[16];

	for (int i = 0; i < nsrc; i++) {
		struct pspec s = { .family = family, .src = src[i],
				   .dport = dport };

		build(&s, &p[i]);
		got[i] = 0;
	}
	for (int k = 0; k < n; k++) {
		for (int i = 0; i < nsrc; i++) {
			int v = run(&dp, &p[i]);

			if (v < 0)
				return -1;
			got[i] += v == XDP_PASS;
		}
	}
	return 0;
}

static bool all_equal(const long *got, int n, long want)
{
	for (int i = 0; i < n; i++)
		if (got[i] != want)
			return false;
	return true;
}

static void test_per_source(void)
{
	static const char *const five[] = { "10.0.0.1", "10.0.0.2", "10.0.0.3",
					    "10.0.0.4", "10.0.0.5" };
	static const char *const net24[] = { "10.0.1.1", "10.0.1.2", "10.0.1.3",
					     "10.0.1.250", "10.0.2.1" };
	static const char *const v6[] = { "2001:db8::1", "2001:db8::2",
					  "2001:db8:0:1::1" };
	struct sl_rule_stats st;
	long got[16];
	int deleted;

	/* each source its own count */
	next_scenario();
	if (!tap(apply_one("ps", 8000, "pps", 3,
			   "\"per_source\":{\"max_sources\":100}") == 0,
		 "per_source: rule applies"))
		return;
	sources_round(five, 5, 10, 4, 8000, got);
	st = rstats(&dp, "ps");
	tap(all_equal(got, 5, 3),
	    "per_source: each of 5 sources gets count 3 on its own "
	    "(%ld %ld %ld %ld %ld)", got[0], got[1], got[2], got[3], got[4]);
	tap(st.passed_pkts == 15 && st.blocked_pkts == 35 && st.sources == 5 &&
		    st.source_overflow == 0,
	    "per_source: counters 15 passed, 35 blocked, 5 live sources "
	    "(%llu, %llu, %llu)", (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts,
	    (unsigned long long)st.sources);

	/* a source idle for two intervals is collected; it comes back fresh */
	set_time(t_ns + 3 * NSEC_PER_SEC);
	deleted = sl_dp_gc_sources(&dp);
	st = rstats(&dp, "ps");
	tap(deleted == 5 && st.sources == 0,
	    "per_source: gc after 3 idle intervals deletes 5 entries "
	    "(%d), 0 live (%llu)", deleted, (unsigned long long)st.sources);
	sources_round(five, 1, 5, 4, 8000, got);
	st = rstats(&dp, "ps");
	tap(got[0] == 3 && st.sources == 1,
	    "per_source: a collected source starts again with count 3 "
	    "(%ld), 1 live", got[0]);
	set_time(t_ns + NSEC_PER_SEC);
	deleted = sl_dp_gc_sources(&dp);
	tap(deleted == 0, "per_source: gc keeps a source seen within two "
			  "intervals (deleted %d)", deleted);

	/* aggregated by /24 */
	next_scenario();
	if (!tap(apply_one("ps24", 8001, "pps", 3,
			   "\"per_source\":{\"max_sources\":100,"
			   "\"prefix_v4\":24}") == 0,
		 "per_source /24: rule applies"))
		return;
	sources_round(net24, 5, 10, 4, 8001, got);
	st = rstats(&dp, "ps24");
	tap(got[0] + got[1] + got[2] + got[3] == 3 && got[4] == 3 &&
		    st.sources == 2,
	    "per_source prefix_v4 24: 4 sources of one /24 share 3 "
	    "(%ld+%ld+%ld+%ld), another /24 gets 3 (%ld); %llu live, "
	    "expected 2",
	    got[0], got[1], got[2], got[3], got[4],
	    (unsigned long long)st.sources);

	/* IPv6 aggregated by the default /64 */
	next_scenario();
	if (!tap(apply_one("ps6", 8002, "pps", 4,
			   "\"per_source\":{\"max_sources\":100}") == 0,
		 "per_source IPv6: rule applies"))
		return;
	sources_round(v6, 3, 10, 6, 8002, got);
	st = rstats(&dp, "ps6");
	tap(got[0] + got[1] == 4 && got[2] == 4 && st.sources == 2,
	    "per_source IPv6 default /64: two sources of one /64 share 4 "
	    "(%ld+%ld), another /64 gets 4 (%ld); %llu live",
	    got[0], got[1], got[2], (unsigned long long)st.sources);

	/* bounded: max_sources 2, the rest share one overflow allowance */
	next_scenario();
	if (!tap(apply_one("ps2", 8003, "pps", 3,
			   "\"per_source\":{\"max_sources\":2}") == 0,
		 "per_source max 2: rule applies"))
		return;
	sources_round(five, 5, 10, 4, 8003, got);
	st = rstats(&dp, "ps2");
	tap(got[0] == 3 && got[1] == 3 && got[2] + got[3] + got[4] == 3,
	    "per_source max_sources 2: two sources get 3 each (%ld, %ld), "
	    "the other three share 3 (%ld+%ld+%ld)",
	    got[0], got[1], got[2], got[3], got[4]);
	tap(st.sources == 2 && st.source_overflow == 30 &&
		    st.passed_pkts == 9 && st.blocked_pkts == 41,
	    "per_source max_sources 2: 2 live, source_overflow counts the "
	    "30 overflow frames (%llu live, overflow %llu, %llu/%llu)",
	    (unsigned long long)st.sources,
	    (unsigned long long)st.source_overflow,
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts);
}

/* ---- threshold changes ---------------------------------------------- */

static void test_set_limit(void)
{
	struct pkt p = udp_to(8100, NULL, 0);
	uint64_t chunk;
	long a;

	next_scenario();
	if (!tap(apply_one("lim", 8100, "pps", 10, NULL) == 0,
		 "set_limit: rule applies"))
		return;
	a = burst(&dp, &p, 60);
	tap(a == 10, "set_limit: count 10 admits 10 (%ld)", a);
	tap(sl_dp_set_limit(&dp, "lim", 4) == 0, "set_limit: lowered to 4");
	set_time(t_ns + 500 * NSEC_PER_MSEC);
	a = burst(&dp, &p, 60);
	tap(a == 0, "set_limit: within the same interval nothing more is "
		    "admitted (%ld)", a);
	next_scenario();
	a = burst(&dp, &p, 60);
	tap(a == 4, "set_limit: the next interval admits 4 (%ld)", a);
	tap(sl_dp_set_limit(&dp, "lim", 25) == 0, "set_limit: raised to 25");
	next_scenario();
	a = burst(&dp, &p, 60);
	tap(a == 25, "set_limit: the next interval admits 25 (%ld)", a);
	tap(sl_dp_set_limit(&dp, "nosuch", 25) == -ENOENT,
	    "set_limit: an unknown rule is -ENOENT");

	/* a large limit: a chunk of the old limit may still be cached */
	next_scenario();
	if (!tap(apply_one("lim2", 8101, "pps", 1000, NULL) == 0,
		 "set_limit: second rule applies"))
		return;
	p = udp_to(8101, NULL, 0);
	chunk = chunk_of(1000);
	a = burst(&dp, &p, 500);
	tap(a == 500, "set_limit: 500 of a 1000/s limit pass (%ld)", a);
	sl_dp_set_limit(&dp, "lim2", 100);
	next_scenario();
	a = burst(&dp, &p, 500);
	tap(a >= 100 && a <= 100 + (long)chunk,
	    "set_limit: lowered to 100: the next interval admits %ld, in "
	    "[100, 100 + one cached chunk of %llu]",
	    a, (unsigned long long)chunk);
}


/* ---- a large rule set ------------------------------------------------- */

struct big_rule {
	bool tcp;
	uint16_t port;
	int dst4, src4, dst6; /* 0 or the prefix's third/second byte + 1 */
};

static struct big_rule big[SL_MAX_RULES];

static void test_big_ruleset(void)
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
	if (!tap(apply(json_buf) == 0 && dp.rules.n == SL_MAX_RULES,
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
		a = rstats(&dp, name);
		hstats(&dp, h0);
		if (run(&dp, &p) != XDP_PASS)
			bad++;
		b = rstats(&dp, name);
		hstats(&dp, h1);
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
		hstats(&dp, h0);
		run(&dp, &p);
		a = rstats(&dp, name);
		hstats(&dp, h1);
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
		hstats(&dp, h0);
		run(&dp, &p);
		hstats(&dp, h1);
		tap(h1[SLUICE_ST_UNMATCHED] == h0[SLUICE_ST_UNMATCHED] + 1,
		    "%d rules: the port after the last rule is unmatched",
		    SL_MAX_RULES);
	}
	/* leave a small set behind: the next apply compiles quickly */
	apply("{\"rules\":[]}");
}

/* ---- rule set swaps ---------------------------------------------------- */

#define LIM(name, port, count)                                             \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"udp\",\"dport\":"    \
	#port "},\"grade\":\"pps\",\"count\":" #count "}"

static void test_swap(void)
{
	struct pkt pk = udp_to(7200, NULL, 0), pc = udp_to(7201, NULL, 0);
	struct pkt pn = udp_to(7202, NULL, 0);
	struct sl_rule_stats k, c, n;
	long a;

	next_scenario();
	if (!tap(apply(RULES(LIM("keep", 7200, 5) "," LIM("chg", 7201, 5))) ==
			 0,
		 "swap: set A applies"))
		return;
	burst(&dp, &pk, 3);
	burst(&dp, &pc, 3);
	if (!tap(apply(RULES(LIM("new", 7202, 5) "," LIM("keep", 7200, 5) ","
			     LIM("chg", 7201, 6))) == 0,
		 "swap: A plus a rule, one rule changed, applies"))
		return;
	k = rstats(&dp, "keep");
	c = rstats(&dp, "chg");
	n = rstats(&dp, "new");
	tap(k.passed_pkts == 3 && k.passed_bytes == 3 * pk.len,
	    "swap: the unchanged rule keeps its counters (%llu passed)",
	    (unsigned long long)k.passed_pkts);
	tap(c.passed_pkts == 0 && n.passed_pkts == 0,
	    "swap: the changed and the new rule start at zero (%llu, %llu)",
	    (unsigned long long)c.passed_pkts,
	    (unsigned long long)n.passed_pkts);
	a = burst(&dp, &pk, 3);
	k = rstats(&dp, "keep");
	tap(a == 2 && k.passed_pkts == 5 && k.blocked_pkts == 1,
	    "swap: the unchanged rule's window continues: 2 of 3 more "
	    "admitted (%ld; %llu/%llu)", a, (unsigned long long)k.passed_pkts,
	    (unsigned long long)k.blocked_pkts);
	a = burst(&dp, &pc, 8);
	tap(a == 6, "swap: the changed rule has a fresh window of 6 (%ld)", a);
	a = burst(&dp, &pn, 8);
	tap(a == 5, "swap: the new rule admits 5 (%ld)", a);

	/* a new position and a priority are not a new definition */
	if (!tap(apply(RULES(LIM("chg", 7201, 6) ","
			     "{\"name\":\"keep\",\"match\":{\"proto\":\"udp\","
			     "\"dport\":7200},\"grade\":\"pps\",\"count\":5,"
			     "\"priority\":9}")) == 0,
		 "swap: reorder, add a priority, drop a rule"))
		return;
	k = rstats(&dp, "keep");
	c = rstats(&dp, "chg");
	tap(k.passed_pkts == 5 && k.blocked_pkts == 1 && c.passed_pkts == 6,
	    "swap: counters survive reordering and a priority (%llu/%llu, "
	    "%llu)", (unsigned long long)k.passed_pkts,
	    (unsigned long long)k.blocked_pkts,
	    (unsigned long long)c.passed_pkts);
	a = burst(&dp, &pn, 1);
	tap(a == 1 && rule_index(&dp, "new") < 0,
	    "swap: the dropped rule's port is unmatched and passes");
	if (!tap(apply(RULES(LIM("keep", 7200, 5) "," LIM("new", 7202, 5))) ==
			 0,
		 "swap: re-adding a dropped rule applies"))
		return;
	n = rstats(&dp, "new");
	a = burst(&dp, &pn, 8);
	tap(n.passed_pkts == 0 && a == 5,
	    "swap: a re-added rule starts fresh (%llu before, %ld admitted)",
	    (unsigned long long)n.passed_pkts, a);
}

#define DST(name, port, dst)                                               \
	"{\"name\":\"" name "\",\"match\":{\"proto\":\"udp\",\"dport\":"    \
	#port ",\"dst\":\"" dst "\"},\"grade\":\"pps\",\"count\":100000000000}"

/*
 * Each CPU remembers recent destination-trie answers (classify.h). They
 * must not outlive the rule set they were found in, not even into the set
 * two swaps on, which is written into the same half of the tables.
 */
static void test_dst_cache(void)
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

		if (!tap(apply(sets[i].rules) == 0,
			 "dst cache: set %zu applies", i + 1))
			return;
		/* twice each: the second is answered from the cache */
		a4 = burst(&dp, &p4, 2);
		a6 = burst(&dp, &p6, 2);
		n4 = rstats(&dp, sets[i].judge4).passed_pkts;
		n6 = rstats(&dp, sets[i].judge6).passed_pkts;
		tap(a4 == 2 && a6 == 2 && n4 == 2 && n6 == 2,
		    "dst cache: set %zu judges 10.9.1.1 by %s and "
		    "2001:db8:9:1::1 by %s (%llu, %llu of 2)",
		    i + 1, sets[i].judge4, sets[i].judge6,
		    (unsigned long long)n4, (unsigned long long)n6);
	}
}

/* ---- slot reuse ------------------------------------------------------- */

static bool value_zero(struct bpf_map *map, uint32_t key, size_t size)
{
	unsigned char *v = malloc(size);
	bool zero = v && !bpf_map_lookup_elem(bpf_map__fd(map), &key, v);

	for (size_t i = 0; zero && i < size; i++)
		zero = !v[i];
	free(v);
	return zero;
}

/* Every byte of a slot's state that packets or the source collector write
 * (budget, every CPU's counters, source counts) is zero, read with the
 * syscall rather than the loader's mmap. */
static bool slot_state_zero(const struct sl_dataplane *d, uint32_t slot)
{
	bool zero =
		value_zero(d->skel->maps.rule_budget, slot,
			   sizeof(struct sluice_budget)) &&
		value_zero(d->skel->maps.rule_src_added, slot, sizeof(uint64_t)) &&
		value_zero(d->skel->maps.rule_src_freed, slot, sizeof(uint64_t));

	for (int c = 0; c < d->n_cpus && zero; c++)
		zero = value_zero(d->skel->maps.rule_cpu,
				  c * SLUICE_MAX_RULE_SLOTS + slot,
				  sizeof(struct sluice_rule_cpu));
	return zero;
}

static uint32_t slot_of(const struct sl_dataplane *d, const char *name)
{
	int i = rule_index(d, name);

	return i < 0 ? UINT32_MAX : d->slots[i];
}

/*
 * A slot that leaves the set is zeroed after the grace period
 * (sl_dp_retire), not when it is next used: the rule that reuses it must
 * still start at zero, with a whole budget.
 */
static void test_slot_reuse(void)
{
	static const char *const three[] = { "10.0.0.1", "10.0.0.2",
					     "10.0.0.3" };
	struct pkt p = udp_to(7300, NULL, 0);
	struct sl_rule_stats st;
	uint32_t slot;
	long got[3], a;
	int err;

	/* no slot in force: each new rule takes the lowest free one */
	next_scenario();
	apply("{\"rules\":[]}");
	if (!tap(apply_one("old", 7300, "pps", 5, NULL) == 0,
		 "slot reuse: a rule applies"))
		return;
	slot = slot_of(&dp, "old");
	a = burst(&dp, &p, 8);
	tap(a == 5 && !slot_state_zero(&dp, slot),
	    "slot reuse: the rule admits 5 of 8 (%ld) and its slot %u holds "
	    "state", a, slot);
	if (!tap(apply_one("other", 7301, "pps", 5, NULL) == 0,
		 "slot reuse: a set without the rule applies"))
		return;
	sl_dp_retire(&dp);
	tap(slot_state_zero(&dp, slot),
	    "slot reuse: after the grace period the left slot is zero");
	/* same interval: a budget left over would admit nothing */
	err = apply_one("new", 7300, "pps", 5, NULL);
	if (!tap(!err && slot_of(&dp, "new") == slot,
		 "slot reuse: a new rule takes the left slot %u (%u)", slot,
		 slot_of(&dp, "new")))
		return;
	st = rstats(&dp, "new");
	a = burst(&dp, &p, 8);
	tap(st.passed_pkts == 0 && st.blocked_pkts == 0 && a == 5,
	    "slot reuse: the new rule starts at 0/0 (%llu/%llu) and admits 5 "
	    "of 8 in the same interval (%ld)",
	    (unsigned long long)st.passed_pkts,
	    (unsigned long long)st.blocked_pkts, a);

	/* per_source: the source counts start at zero too */
	next_scenario();
	apply("{\"rules\":[]}");
	if (!tap(apply_one("old-ps", 7302, "pps", 3,
			   "\"per_source\":{\"max_sources\":10}") == 0,
		 "slot reuse: a per_source rule applies"))
		return;
	slot = slot_of(&dp, "old-ps");
	sources_round(three, 3, 5, 4, 7302, got);
	st = rstats(&dp, "old-ps");
	tap(all_equal(got, 3, 3) && st.sources == 3,
	    "slot reuse: 3 sources admitted 3 each (%ld %ld %ld), 3 live "
	    "(%llu)", got[0], got[1], got[2], (unsigned long long)st.sources);
	if (!tap(apply_one("other", 7301, "pps", 5, NULL) == 0,
		 "slot reuse: a set without the per_source rule applies"))
		return;
	sl_dp_retire(&dp);
	tap(slot_state_zero(&dp, slot),
	    "slot reuse: after the grace period the per_source slot is zero "
	    "(source counts included)");
	err = apply_one("new-ps", 7302, "pps", 3,
			"\"per_source\":{\"max_sources\":10}");
	if (!tap(!err && slot_of(&dp, "new-ps") == slot,
		 "slot reuse: a new per_source rule takes the left slot %u (%u)",
		 slot, slot_of(&dp, "new-ps")))
		return;
	st = rstats(&dp, "new-ps");
	tap(st.sources == 0 && st.passed_pkts == 0,
	    "slot reuse: the new per_source rule starts with 0 sources "
	    "(%llu) and 0 passed (%llu)", (unsigned long long)st.sources,
	    (unsigned long long)st.passed_pkts);
	sources_round(three, 3, 5, 4, 7302, got);
	tap(all_equal(got, 3, 3),
	    "slot reuse: its sources are admitted 3 each (%ld %ld %ld)",
	    got[0], got[1], got[2]);
}

/* A private bpffs in a mount namespace of our own, for pinned maps. */
static int private_bpffs(char *dir, size_t len)
{
	if (unshare(CLONE_NEWNS) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -errno;
	snprintf(dir, len, "/tmp/sluice-test-bpffs.XXXXXX");
	if (!mkdtemp(dir))
		return -errno;
	if (mount("bpf", dir, "bpf", 0, NULL)) {
		int err = -errno;

		rmdir(dir);
		return err;
	}
	return 0;
}

/*
 * An agent that adopts pinned maps does not know which slots an earlier
 * one left unzeroed (it may have died between a flip and sl_dp_retire):
 * a rule that takes such a slot must still start at zero.
 */
static void test_adopt_dirty_slot(void)
{
	struct sl_dp_opts o = { .test_clock = true };
	struct pkt p = udp_to(7400, NULL, 0);
	struct sl_dataplane d;
	char dir[64], pins[96];
	struct sl_rule_stats st;
	int err, status;
	uint32_t slot;
	pid_t pid;
	long a;

	err = private_bpffs(dir, sizeof(dir));
	if (err) {
		tap_skip(strerror(-err), "adopt: a private bpffs for the pins");
		return;
	}
	snprintf(pins, sizeof(pins), "%s/pins", dir);
	o.pin_dir = pins;
	next_scenario();
	pid = fork();
	if (pid == 0) {
		/* the earlier agent: its rule takes traffic and leaves the
		 * set, and it dies before the grace period is over */
		if (sl_dp_load(&d, &o))
			_exit(1);
		sl_dp_set_test_time(&d, t_ns);
		if (apply_to(&d, RULES(LIM("gone", 7400, 5))) ||
		    burst(&d, &p, 8) != 5 ||
		    apply_to(&d, RULES(LIM("stays", 7401, 5))))
			_exit(1);
		_exit(0);
	}
	if (!tap(pid > 0 && waitpid(pid, &status, 0) == pid &&
			 WIFEXITED(status) && !WEXITSTATUS(status),
		 "adopt: an agent pins its maps, runs a rule, drops it and "
		 "dies"))
		goto out;
	err = sl_dp_load(&d, &o);
	if (!tap(!err && d.adopted && sl_dp_slots_in_force(&d) == 1,
		 "adopt: the next agent adopts the pins, 1 slot in force (%d)",
		 err))
		goto out;
	sl_dp_set_test_time(&d, t_ns);
	/* the left slot is the lowest free one: the new rule takes it */
	for (slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++)
		if (!d.slot_state[slot].in_force)
			break;
	tap(!slot_state_zero(&d, slot),
	    "adopt: the left slot %u still holds the dead agent's state", slot);
	err = apply_to(&d, RULES(LIM("fresh", 7400, 5)));
	if (tap(!err && slot_of(&d, "fresh") == slot,
		"adopt: a new rule takes that slot (%u)",
		slot_of(&d, "fresh"))) {
		st = rstats(&d, "fresh");
		a = burst(&d, &p, 8);
		tap(st.passed_pkts == 0 && st.blocked_pkts == 0 && a == 5,
		    "adopt: the new rule starts at 0/0 (%llu/%llu) and admits "
		    "5 of 8 in the same interval (%ld)",
		    (unsigned long long)st.passed_pkts,
		    (unsigned long long)st.blocked_pkts, a);
	}
	sl_dp_destroy(&d);
out:
	umount2(dir, MNT_DETACH);
	rmdir(dir);
}

/* ---- each CPU's rule state ------------------------------------------- */

static bool run_on_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return !sched_setaffinity(0, sizeof(set), &set) && sched_getcpu() == cpu;
}

/* What CPU cpu passed for slot, read with the syscall at the element the
 * program should use (bpf/maps.h); UINT64_MAX when the read fails. */
static uint64_t cpu_passed(const struct sl_dataplane *d, int cpu,
			   uint32_t slot)
{
	uint32_t key = cpu * SLUICE_MAX_RULE_SLOTS + slot;
	struct sluice_rule_cpu rc;

	if (bpf_map_lookup_elem(bpf_map__fd(d->skel->maps.rule_cpu), &key, &rc))
		return UINT64_MAX;
	return rc.passed_pkts;
}

/* Packets judged on a CPU are counted in that CPU's element of rule_cpu,
 * cpu x 8192 + slot, and the stats add the CPUs up. */
static void test_cpu_elements(void)
{
	int home = sched_getcpu();
	struct pkt p = udp_to(7100, NULL, 0);
	struct sl_rule_stats st;
	uint64_t n0, n1;
	uint32_t slot;
	long a0, a1;

	next_scenario();
	if (dp.n_cpus < 2 || !run_on_cpu(1)) {
		tap_skip("needs CPUs 0 and 1", "each CPU's rule state");
		return;
	}
	if (!tap(apply_one("cpus", 7100, "pps", 1000000, NULL) == 0,
		 "cpu elements: rule applies"))
		goto out;
	slot = slot_of(&dp, "cpus");
	a1 = burst(&dp, &p, 5);
	a0 = run_on_cpu(0) ? burst(&dp, &p, 3) : -1;
	n0 = cpu_passed(&dp, 0, slot);
	n1 = cpu_passed(&dp, 1, slot);
	st = rstats(&dp, "cpus");
	tap(a0 == 3 && a1 == 5 && n0 == 3 && n1 == 5 && st.passed_pkts == 8,
	    "cpu elements: 3 packets on CPU 0 and 5 on CPU 1 land in elements "
	    "0 x 8192 + slot and 1 x 8192 + slot (%llu, %llu; passed %ld, %ld) "
	    "and the stats add them (%llu)",
	    (unsigned long long)n0, (unsigned long long)n1, a0, a1,
	    (unsigned long long)st.passed_pkts);
out:
	run_on_cpu(home >= 0 ? home : 0);
}

/* ---- main ---------------------------------------------------------------- */

static void pin_cpu(void)
{
	cpu_set_t set;

	/* per-CPU token caches: one CPU makes every count exact */
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		diag("sched_setaffinity: %s", strerror(errno));
}

int main(void)
{
	struct sl_dp_opts o = { .test_clock = true };
	struct sl_dp_opts od = { .test_clock = true, .drop_malformed = true };
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sl_log_set_level(SL_LOG_WARN);
	pin_cpu();
	err = sl_dp_load(&dp, &o);
	if (err) {
		tap_skip(strerror(-err), "load the data plane (needs root, "
					 "BPF and a 5.x+ kernel)");
		printf("1..%d\n", tap_n);
		return 0;
	}
	tap(true, "data plane loads with the test clock (%d CPUs)", dp.n_cpus);
	err = sl_dp_load(&dp_drop, &od);
	dp_drop_loaded = !err;
	tap(!err, "a second data plane loads with drop_malformed (%d)", err);
	set_time(t_ns);

	test_builder();
	test_protocols();
	test_truncation();
	test_precedence();
	test_window_exact();
	test_window_shape();
	test_refusal_expires();
	test_refusal_batch_ends();
	test_bucket_rolls_on_tick();
	test_window_bps();
	test_pacing();
	test_flood_smooth();
	test_two_bursts();
	test_shadow();
	test_cps();
	test_per_source();
	test_set_limit();
	test_big_ruleset();
	test_swap();
	test_dst_cache();
	test_slot_reuse();
	test_adopt_dirty_slot();
	test_cpu_elements();

	if (dp_drop_loaded)
		sl_dp_destroy(&dp_drop);
	sl_dp_destroy(&dp);
	printf("1..%d\n", tap_n);
	if (tap_failed)
		diag("%d of %d failed", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}
