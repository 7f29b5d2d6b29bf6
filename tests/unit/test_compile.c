/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit tests for the rule compiler (user/compile.c): precedence, the port
 * table and LPM entries it emits, and a randomized differential test that
 * walks the compiled tables the way the XDP program does and compares the
 * answer with a brute-force reference matcher.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "compile.h"
#include "rules.h"
#include "rules_parse.h"

static char err[4096];

/* ---- helpers ------------------------------------------------------------ */

static struct sl_ruleset parse_ok(const char *json)
{
	struct sl_ruleset rs = { 0 };
	int ret = sl_rules_parse(json, strlen(json), &rs, err, sizeof(err));

	if (ret)
		fail_msg("rules do not parse (%d): %s\n%s", ret, err, json);
	return rs;
}

static int rule_idx(const struct sl_ruleset *rs, const char *name)
{
	for (size_t i = 0; i < rs->n; i++)
		if (!strcmp(rs->rules[i].name, name))
			return i;
	fail_msg("no rule '%s'", name);
	return -1;
}

/* Slot of rule i: deliberately not i, so refs must go through slots[]. */
static uint32_t *make_slots(size_t n)
{
	uint32_t *s = calloc(n ? n : 1, sizeof(*s));

	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = 3 * i + 5;
	return s;
}

static void addr_of(int fam, const char *s, uint8_t out[16])
{
	memset(out, 0, 16);
	if (inet_pton(fam == 4 ? AF_INET : AF_INET6, s, out) != 1)
		fail_msg("bad address %s", s);
}

static bool bits_match(const uint8_t *a, const uint8_t *b, unsigned int len)
{
	unsigned int full = len / 8, rem = len % 8;

	if (memcmp(a, b, full))
		return false;
	return !rem || !((a[full] ^ b[full]) & (uint8_t)(0xff << (8 - rem)));
}

/* Port table index, computed independently of sluice_port_key(). */
static uint32_t port_idx(int fam, int slot, uint16_t port)
{
	uint32_t base = fam == 6 ? 3 * 65536u + 3 : 0;

	return base + (slot < 3 ? slot * 65536u + port : 3 * 65536u + (slot - 3));
}

/* The port table's references of (slot, port) for both families. */
struct port_refs {
	uint32_t v4;
	uint32_t v6;
};

static struct port_refs port_at(const struct sl_compiled *c, int slot,
				uint16_t port)
{
	return (struct port_refs){ c->port[port_idx(4, slot, port)],
				   c->port[port_idx(6, slot, port)] };
}

/* The longest entry of (family, class) containing addr: its ref. */
static uint32_t lpm_find(const struct sl_compiled *c, int fam,
			 uint32_t class_id, const uint8_t *addr)
{
	int best = -1, best_len = -1;

	for (size_t i = 0; i < c->n_lpm; i++) {
		const struct sl_lpm_entry *e = &c->lpm[i];

		if (e->family != fam || e->class_id != class_id)
			continue;
		if (e->plen > best_len && bits_match(e->addr, addr, e->plen)) {
			best = i;
			best_len = e->plen;
		}
	}
	return best < 0 ? SLUICE_REF_NONE : c->lpm[best].ref;
}

/* What the XDP program's classify() answers for a packet of VLAN vid
 * (0: untagged): rule slot + 1, or 0. */
static uint32_t walk_vlan(const struct sl_compiled *c, int slot,
			  uint16_t dport, int fam, const uint8_t *saddr,
			  const uint8_t *daddr, uint16_t vid)
{
	uint32_t ref = c->port[port_idx(fam, slot, dport)];
	uint8_t vkey[16] = { vid >> 8, vid & 0xff };

	if (!(ref & SLUICE_REF_LPM))
		return ref;
	if (ref & SLUICE_REF_VLAN) {
		/* VLAN stages live in the IPv4 trie for both families */
		ref = lpm_find(c, 4, ref & ~(SLUICE_REF_LPM | SLUICE_REF_VLAN),
			       vkey);
		if (!(ref & SLUICE_REF_LPM))
			return ref;
	}
	ref = lpm_find(c, fam, ref & ~SLUICE_REF_LPM, daddr);
	if (!(ref & SLUICE_REF_LPM))
		return ref;
	ref = lpm_find(c, fam, ref & ~SLUICE_REF_LPM, saddr);
	return ref & SLUICE_REF_LPM ? SLUICE_REF_NONE : ref;
}

static uint32_t walk(const struct sl_compiled *c, int slot, uint16_t dport,
		     int fam, const uint8_t *saddr, const uint8_t *daddr)
{
	return walk_vlan(c, slot, dport, fam, saddr, daddr, 0);
}

/* ---- the reference matcher ---------------------------------------------- */

static bool ref_prefix(const struct sl_prefix *p, int fam, const uint8_t *a)
{
	if (!p->family)
		return true;
	if (p->family != (fam == 4 ? AF_INET : AF_INET6))
		return false;
	return bits_match(p->addr, a, p->len);
}

/* Does r judge a packet of (slot, dport, family, addresses)? */
static bool ref_matches(const struct sl_rule *r, int slot, uint16_t dport,
			int fam, const uint8_t *saddr, const uint8_t *daddr,
			uint16_t vid)
{
	bool proto;

	if (r->has_vlan && r->vlan != vid)
		return false;

	switch (slot) {
	case SLUICE_SLOT_TCP:	/* cps rules see only bare SYNs */
		proto = r->proto == SL_PROTO_TCP && r->grade != SL_GRADE_CPS;
		break;
	case SLUICE_SLOT_TCP_SYN:
		proto = r->proto == SL_PROTO_TCP;
		break;
	case SLUICE_SLOT_UDP:
		proto = r->proto == SL_PROTO_UDP;
		break;
	case SLUICE_SLOT_ICMP:
		proto = r->proto == SL_PROTO_ICMP;
		break;
	case SLUICE_SLOT_ICMPV6:
		proto = r->proto == SL_PROTO_ICMPV6;
		break;
	default:
		proto = false;
	}
	if (!proto && r->proto != SL_PROTO_ANY)
		return false;
	/* dport 0: a fragment without L4, or no ports: no dport rule */
	if (r->dport_lo &&
	    (!dport || dport < r->dport_lo || dport > r->dport_hi))
		return false;
	return ref_prefix(&r->dst, fam, daddr) &&
	       ref_prefix(&r->src, fam, saddr);
}

static uint32_t ref_best_vlan(const struct sl_ruleset *rs,
			      const uint32_t *slots, int slot, uint16_t dport,
			      int fam, const uint8_t *saddr,
			      const uint8_t *daddr, uint16_t vid)
{
	int best = -1;

	for (size_t i = 0; i < rs->n; i++) {
		if (!ref_matches(&rs->rules[i], slot, dport, fam, saddr, daddr,
				 vid))
			continue;
		if (best < 0 ||
		    sl_rule_cmp(&rs->rules[i], &rs->rules[best]) < 0)
			best = i;
	}
	return best < 0 ? SLUICE_REF_NONE : slots[best] + 1;
}

/* With layers: each layer's best rule, as the tables' answer is (a rule
 * when one layer has a winner, else the chain). */
static void ref_layers(const struct sl_ruleset *rs, const uint32_t *slots,
		       int slot, uint16_t dport, int fam, const uint8_t *saddr,
		       const uint8_t *daddr, uint16_t vid,
		       struct sluice_chain *want)
{
	int best[SLUICE_LAYERS] = { -1, -1, -1, -1 };

	for (size_t i = 0; i < rs->n; i++) {
		const struct sl_rule *r = &rs->rules[i];

		if (!ref_matches(r, slot, dport, fam, saddr, daddr, vid))
			continue;
		if (best[r->layer] < 0 ||
		    sl_rule_cmp(r, &rs->rules[best[r->layer]]) < 0)
			best[r->layer] = i;
	}
	for (int l = 0; l < SLUICE_LAYERS; l++)
		want->ref[l] = best[l] < 0 ? 0 : slots[best[l]] + 1;
}

static uint32_t ref_best(const struct sl_ruleset *rs, const uint32_t *slots,
			 int slot, uint16_t dport, int fam,
			 const uint8_t *saddr, const uint8_t *daddr)
{
	return ref_best_vlan(rs, slots, slot, dport, fam, saddr, daddr, 0);
}

/* ---- sl_rule_cmp --------------------------------------------------------- */

static struct sl_rule mk(uint32_t idx)
{
	struct sl_rule r;

	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "r%u", idx);
	r.file_index = idx;
	r.interval_ms = 1000;
	r.sample_count = 2;
	r.count = 100;
	return r;
}

static void set_prefix(struct sl_prefix *p, int fam, const char *addr,
		       unsigned int len)
{
	memset(p, 0, sizeof(*p));
	p->family = fam == 4 ? AF_INET : AF_INET6;
	p->len = len;
	addr_of(fam, addr, p->addr);
}

static int sign(int x)
{
	return (x > 0) - (x < 0);
}

/* a judges before b, both ways round. */
#define before(a, b)                                                        \
	do {                                                                \
		assert_true(sl_rule_cmp(a, b) < 0);                         \
		assert_true(sl_rule_cmp(b, a) > 0);                         \
	} while (0)

static void test_cmp_precedence(void **state)
{
	struct sl_rule a, b;

	/* priority beats every kind of specificity */
	a = mk(5);
	a.has_priority = true;
	a.priority = 1;
	b = mk(0);
	b.proto = SL_PROTO_TCP;
	b.dport_lo = b.dport_hi = 80;
	set_prefix(&b.dst, 4, "10.0.0.1", 32);
	set_prefix(&b.src, 4, "10.0.0.2", 32);
	before(&a, &b);
	/* higher priority first */
	b = a;
	b.priority = 9;
	b.file_index = 9;
	before(&b, &a);

	/* specific protocol beats any, even with a longer dst prefix */
	a = mk(3);
	a.proto = SL_PROTO_UDP;
	b = mk(1);
	set_prefix(&b.dst, 4, "10.0.0.1", 32);
	before(&a, &b);

	/* longer dst prefix beats shorter */
	a = mk(4);
	set_prefix(&a.dst, 4, "10.1.0.0", 16);
	b = mk(1);
	set_prefix(&b.dst, 4, "10.0.0.0", 8);
	before(&a, &b);

	/* dst beats src: /8 dst over /32 src */
	b = mk(0);
	set_prefix(&b.src, 4, "192.0.2.1", 32);
	a = mk(1);
	set_prefix(&a.dst, 4, "10.0.0.0", 8);
	before(&a, &b);

	/* then the longer src prefix */
	a = mk(2);
	set_prefix(&a.src, 4, "192.0.2.0", 24);
	b = mk(1);
	set_prefix(&b.src, 4, "192.0.0.0", 16);
	before(&a, &b);

	/* src beats ports: a src /24 with any port over a src /16 on 80 */
	b.proto = a.proto = SL_PROTO_TCP;
	b.dport_lo = b.dport_hi = 80;
	before(&a, &b);

	/* narrower port range beats wider, any port is widest */
	a = mk(7);
	a.proto = SL_PROTO_TCP;
	a.dport_lo = a.dport_hi = 80;
	b = a;
	b.file_index = 1;
	b.dport_lo = 1;
	b.dport_hi = 1000;
	before(&a, &b);
	a = b;
	a.file_index = 8;
	b.file_index = 2;
	b.dport_lo = b.dport_hi = 0;
	before(&a, &b);
	/* 1-65535 still leaves out port 0 (fragments): narrower than any */
	a.dport_lo = 1;
	a.dport_hi = 65535;
	before(&a, &b);

	/* equal: earlier in the file */
	a = mk(1);
	b = mk(2);
	a.proto = b.proto = SL_PROTO_UDP;
	before(&a, &b);
	assert_int_equal(sl_rule_cmp(&a, &a), 0);

	/* a VLAN (or "untagged") beats none, even with a longer dst... */
	a = mk(6);
	a.has_vlan = true;
	a.vlan = 100;
	b = mk(1);
	set_prefix(&b.dst, 4, "10.0.0.1", 32);
	before(&a, &b);
	a.vlan = 0;
	before(&a, &b);
	/* ...but comes after the protocol */
	b = mk(0);
	b.proto = SL_PROTO_UDP;
	before(&b, &a);

	/* IPv6 prefixes compare by length like IPv4 ones */
	a = mk(9);
	set_prefix(&a.dst, 6, "2001:db8:1::", 48);
	b = mk(0);
	set_prefix(&b.dst, 6, "2001:db8::", 32);
	before(&a, &b);
}

/* A random rule over a small universe, so rules overlap a lot. */
static uint32_t rng_state;

static uint32_t rnd(void)
{
	/* xorshift32: fixed seed, reproducible everywhere */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

static uint32_t rnd_n(uint32_t n)
{
	return rnd() % n;
}

static void rnd_addr(int fam, uint8_t a[16])
{
	memset(a, 0, 16);
	if (fam == 4) {
		a[0] = rnd_n(8) ? 10 : 11;
		a[1] = rnd_n(3);
		a[2] = rnd_n(3);
		a[3] = rnd_n(4) * 64 + rnd_n(2);
	} else {
		a[0] = 0x20;
		a[1] = 0x01;
		a[2] = 0x0d;
		a[3] = rnd_n(8) ? 0xb8 : 0xb9;
		a[5] = rnd_n(3);
		a[7] = rnd_n(3);
		a[15] = rnd_n(4) * 64 + rnd_n(2);
	}
}

static void rnd_prefix(struct sl_prefix *p, int fam)
{
	static const uint8_t len4[] = { 0, 8, 12, 16, 24, 26, 31, 32 };
	static const uint8_t len6[] = { 0, 16, 32, 40, 48, 64, 122, 128 };
	unsigned int len = fam == 4 ? len4[rnd_n(8)] : len6[rnd_n(8)];
	unsigned int bytes = fam == 4 ? 4 : 16;

	memset(p, 0, sizeof(*p));
	p->family = fam == 4 ? AF_INET : AF_INET6;
	p->len = len;
	rnd_addr(fam, p->addr);
	for (unsigned int i = 0; i < bytes; i++) {
		if (i * 8 >= len)
			p->addr[i] = 0;
		else if (i * 8 + 8 > len)
			p->addr[i] &= (uint8_t)(0xff << (8 - (len - i * 8)));
	}
}

/* rules with match.vlan too (the differential test's second half) */
static bool rnd_vlans;
/* rules in layers 0-3 */
static bool rnd_layers;

static struct sl_rule rnd_rule(uint32_t idx)
{
	struct sl_rule r = mk(idx);
	uint32_t x = rnd_n(10);
	int fam;

	r.proto = x < 2 ? SL_PROTO_ANY : x < 5 ? SL_PROTO_TCP :
		  x < 8 ? SL_PROTO_UDP : x < 9 ? SL_PROTO_ICMP :
		  SL_PROTO_ICMPV6;
	r.grade = r.proto == SL_PROTO_TCP && !rnd_n(3) ? SL_GRADE_CPS :
		  rnd_n(2) ? SL_GRADE_PPS : SL_GRADE_BPS;
	if ((r.proto == SL_PROTO_TCP || r.proto == SL_PROTO_UDP) &&
	    rnd_n(3)) {
		if (!rnd_n(8)) {
			r.dport_lo = 65530 + rnd_n(6);
			r.dport_hi = 65535;
		} else {
			r.dport_lo = 1 + rnd_n(20);
			r.dport_hi = r.dport_lo + rnd_n(6);
		}
	}
	fam = r.proto == SL_PROTO_ICMP ? 4 : r.proto == SL_PROTO_ICMPV6 ? 6 :
	      rnd_n(3) ? 4 : 6;
	if (rnd_n(2))
		rnd_prefix(&r.dst, fam);
	if (rnd_n(2))
		rnd_prefix(&r.src, fam);
	if (!rnd_n(6)) {
		r.has_priority = true;
		r.priority = 1 + rnd_n(3);
	}
	if (rnd_vlans && !rnd_n(3)) {
		r.has_vlan = true;
		r.vlan = rnd_n(3) ? 1 + rnd_n(3) : 0; /* 0: untagged */
	}
	if (rnd_layers)
		r.layer = rnd_n(2) ? 0 : rnd_n(SLUICE_LAYERS);
	return r;
}

static void test_cmp_order(void **state)
{
	struct sl_rule r[40];

	rng_state = 0x5eed1234;
	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < 40; i++)
			r[i] = rnd_rule(i);
		for (int i = 0; i < 40; i++) {
			for (int j = 0; j < 40; j++) {
				int ij = sign(sl_rule_cmp(&r[i], &r[j]));
				int ji = sign(sl_rule_cmp(&r[j], &r[i]));

				/* antisymmetric, total (file order) */
				assert_int_equal(ij, -ji);
				assert_true(ij != 0 || i == j);
				for (int k = 0; k < 40; k += 7)
					if (ij < 0 &&
					    sl_rule_cmp(&r[j], &r[k]) < 0)
						assert_true(sl_rule_cmp(&r[i],
									&r[k]) <
							    0);
			}
		}
	}
}

/* ---- compiled tables ---------------------------------------------------- */

static void test_port_index(void **state)
{
	const uint32_t v6 = 3 * 65536 + 3;

	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_TCP, 0), 0);
	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_TCP, 80), 80);
	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_TCP_SYN, 443),
			 65536 + 443);
	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_UDP, 65535),
			 3 * 65536 - 1);
	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_ICMP, 0), 3 * 65536);
	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_ICMPV6, 0),
			 3 * 65536 + 1);
	assert_int_equal(sluice_port_key(4, SLUICE_SLOT_OTHER, 0),
			 3 * 65536 + 2);
	assert_int_equal(sluice_port_key(6, SLUICE_SLOT_TCP, 0), v6);
	assert_int_equal(sluice_port_key(6, SLUICE_SLOT_UDP, 53),
			 v6 + 2 * 65536 + 53);
	assert_int_equal(sluice_port_key(6, SLUICE_SLOT_ICMPV6, 0),
			 v6 + 3 * 65536 + 1);
	assert_int_equal(sluice_port_key(6, SLUICE_SLOT_OTHER, 0),
			 SLUICE_SET_SPACE - 1);
}

static void test_empty(void **state)
{
	struct sl_ruleset rs = parse_ok("{\"rules\":[]}");
	struct sl_compiled c;

	assert_int_equal(sl_compile(&rs, NULL, 1, 0, 100, &c, err, sizeof(err)),
			 0);
	for (uint32_t i = 0; i < SLUICE_SET_SPACE; i++)
		assert_int_equal(c.port[i], 0);
	assert_int_equal(c.n_lpm, 0);
	assert_int_equal(c.n_classes, 0);
	sl_compiled_free(&c);
	sl_ruleset_free(&rs);
}

#define OPEN(name, match)                                                   \
	"{\"name\":\"" name "\",\"match\":" match                           \
	",\"grade\":\"pps\",\"count\":100}"

static void test_port_refs(void **state)
{
	struct sl_ruleset rs = parse_ok(
		"{\"rules\":["
		OPEN("tcp80", "{\"proto\":\"tcp\",\"dport\":80}") ","
		OPEN("tcp-10", "{\"proto\":\"tcp\",\"dst\":\"10.0.0.0/8\"}") ","
		OPEN("dns", "{\"proto\":\"udp\",\"dport\":\"53-60\"}") ","
		"{\"name\":\"syn443\",\"match\":{\"proto\":\"tcp\","
		"\"dport\":443},\"grade\":\"cps\",\"count\":5},"
		OPEN("icmp", "{\"proto\":\"icmp\"}")
		"]}");
	uint32_t *slots = make_slots(rs.n);
	uint32_t tcp80 = slots[rule_idx(&rs, "tcp80")] + 1;
	uint32_t tcp10 = slots[rule_idx(&rs, "tcp-10")] + 1;
	uint32_t dns = slots[rule_idx(&rs, "dns")] + 1;
	uint32_t syn = slots[rule_idx(&rs, "syn443")] + 1;
	uint32_t icmp = slots[rule_idx(&rs, "icmp")] + 1;
	uint8_t in[16], out[16], v6[16];
	struct sl_compiled c;
	struct port_refs p;

	assert_int_equal(sl_compile(&rs, slots, 1, 0, 1000, &c, err, sizeof(err)),
			 0);
	addr_of(4, "10.1.2.3", in);
	addr_of(4, "11.1.2.3", out);
	addr_of(6, "2001:db8::1", v6);

	/* a port only a dport rule covers: direct reference, both families */
	p = port_at(&c, SLUICE_SLOT_UDP, 53);
	assert_int_equal(p.v4, dns);
	assert_int_equal(p.v6, dns);
	p = port_at(&c, SLUICE_SLOT_UDP, 60);
	assert_int_equal(p.v4, dns);
	p = port_at(&c, SLUICE_SLOT_UDP, 61);
	assert_int_equal(p.v4, 0);
	assert_int_equal(p.v6, 0);
	p = port_at(&c, SLUICE_SLOT_UDP, 52);
	assert_int_equal(p.v4, 0);

	/* TCP 80: the /8 rule ranks first for IPv4 -> a trie class; IPv6
	 * has only the port rule -> direct */
	p = port_at(&c, SLUICE_SLOT_TCP, 80);
	assert_true(p.v4 & SLUICE_REF_LPM);
	assert_int_equal(p.v6, tcp80);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP, 80, 4, out, in), tcp10);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP, 80, 4, in, out), tcp80);

	/* TCP 443 other than a SYN: the cps rule is not there */
	p = port_at(&c, SLUICE_SLOT_TCP, 443);
	assert_true(p.v4 & SLUICE_REF_LPM);
	assert_int_equal(p.v6, 0);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP, 443, 4, out, in), tcp10);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP, 443, 4, in, out), 0);
	/* a SYN to 443: cps rule, after the /8 rule for IPv4 */
	p = port_at(&c, SLUICE_SLOT_TCP_SYN, 443);
	assert_int_equal(p.v6, syn);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP_SYN, 443, 4, out, in),
			 tcp10);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP_SYN, 443, 4, in, out), syn);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP_SYN, 443, 6, v6, v6), syn);

	/* port 0 (fragments) never refers to a dport rule */
	for (int s = 0; s < SLUICE_PORTED_SLOTS; s++) {
		p = port_at(&c, s, 0);
		assert_int_equal(p.v6, 0);
		assert_int_not_equal(walk(&c, s, 0, 4, in, out), tcp80);
		assert_int_not_equal(walk(&c, s, 0, 4, in, out), syn);
		assert_int_not_equal(walk(&c, s, 0, 4, in, out), dns);
	}
	assert_int_equal(c.port[port_idx(4, SLUICE_SLOT_UDP, 0)], 0);
	assert_int_equal(walk(&c, SLUICE_SLOT_TCP, 0, 4, out, in), tcp10);

	/* slots without ports */
	p = port_at(&c, SLUICE_SLOT_ICMP, 0);
	assert_int_equal(p.v4, icmp);
	assert_int_equal(p.v6, icmp);
	assert_int_equal(c.port[port_idx(4, SLUICE_SLOT_ICMPV6, 0)], 0);
	assert_int_equal(c.port[port_idx(4, SLUICE_SLOT_OTHER, 0)], 0);

	/* class ids from the base up, never with the LPM bit */
	for (size_t i = 0; i < c.n_lpm; i++) {
		assert_true(c.lpm[i].class_id >= 1);
		assert_true(c.lpm[i].class_id < 1 + c.n_classes);
	}
	sl_compiled_free(&c);
	free(slots);
	sl_ruleset_free(&rs);
}

static const struct sl_lpm_entry *
find_entry(const struct sl_compiled *c, int fam, uint32_t class_id,
	   const char *addr, unsigned int plen)
{
	uint8_t a[16];

	addr_of(fam, addr, a);
	for (size_t i = 0; i < c->n_lpm; i++) {
		const struct sl_lpm_entry *e = &c->lpm[i];

		if (e->family == fam && e->class_id == class_id &&
		    e->plen == plen && bits_match(e->addr, a, plen))
			return e;
	}
	fail_msg("no entry %s/%u in class %u", addr, plen, class_id);
	return NULL;
}

static const char *nested_json =
	"{\"rules\":["
	OPEN("a", "{\"dst\":\"10.0.0.0/8\",\"src\":\"192.168.0.0/16\"}") ","
	OPEN("b", "{\"dst\":\"10.1.0.0/16\",\"src\":\"192.168.1.0/24\"}") ","
	OPEN("c", "{\"dst\":\"10.0.0.0/8\"}") ","
	OPEN("d", "{\"dst\":\"10.1.0.0/16\",\"src\":\"172.16.0.0/12\"}")
	"]}";

static void test_lpm_nested(void **state)
{
	static const struct {
		const char *dst, *src, *rule;
	} cases[] = {
		{ "10.1.2.3", "192.168.1.5", "b" },
		{ "10.1.2.3", "172.16.5.5", "d" },
		{ "10.1.2.3", "172.31.255.255", "d" },
		{ "10.1.2.3", "172.32.0.1", "c" },
		{ "10.1.2.3", "192.168.2.5", "a" },
		{ "10.1.2.3", "8.8.8.8", "c" },
		{ "10.1.255.255", "192.168.1.0", "b" },
		{ "10.2.0.1", "192.168.1.5", "a" },
		{ "10.2.0.1", "172.16.0.1", "c" },
		{ "10.255.0.1", "192.168.255.1", "a" },
		{ "11.0.0.1", "192.168.1.5", NULL },
		{ "9.255.255.255", "192.168.1.5", NULL },
	};
	struct sl_ruleset rs = parse_ok(nested_json);
	uint32_t *slots = make_slots(rs.n);
	const uint32_t base = 0x40000000;
	const struct sl_lpm_entry *e8, *e16;
	struct sl_compiled c;
	uint32_t cls;

	assert_int_equal(sl_compile(&rs, slots, base, 0, 1000, &c, err,
				    sizeof(err)),
			 0);
	/* every port of every slot holds the same class; IPv6 none */
	cls = c.port[0];
	assert_true(cls & SLUICE_REF_LPM);
	for (uint32_t i = 0; i < SLUICE_SET_SPACE; i++)
		assert_int_equal(c.port[i], i < SLUICE_FAM_SPACE ? cls : 0);
	cls &= ~SLUICE_REF_LPM;

	/* dst stage: /8 and /16, each pointing at a src class */
	assert_int_equal(c.n_classes, 3);
	assert_int_equal(c.n_lpm6, 0);
	assert_int_equal(c.n_lpm4, c.n_lpm);
	/* 2 dst nodes, src nodes {b, d, a, any} under /16, {a, any} /8 */
	assert_int_equal(c.n_lpm4, 8);
	e8 = find_entry(&c, 4, cls, "10.0.0.0", 8);
	e16 = find_entry(&c, 4, cls, "10.1.0.0", 16);
	assert_true(e8->ref & SLUICE_REF_LPM);
	assert_true(e16->ref & SLUICE_REF_LPM);
	assert_int_not_equal(e8->ref, e16->ref);
	assert_int_equal(find_entry(&c, 4, e16->ref & ~SLUICE_REF_LPM,
				    "192.168.1.0", 24)->ref,
			 slots[rule_idx(&rs, "b")] + 1);
	assert_int_equal(find_entry(&c, 4, e16->ref & ~SLUICE_REF_LPM,
				    "172.16.0.0", 12)->ref,
			 slots[rule_idx(&rs, "d")] + 1);
	assert_int_equal(find_entry(&c, 4, e16->ref & ~SLUICE_REF_LPM,
				    "192.168.0.0", 16)->ref,
			 slots[rule_idx(&rs, "a")] + 1);
	assert_int_equal(find_entry(&c, 4, e16->ref & ~SLUICE_REF_LPM,
				    "0.0.0.0", 0)->ref,
			 slots[rule_idx(&rs, "c")] + 1);
	assert_int_equal(find_entry(&c, 4, e8->ref & ~SLUICE_REF_LPM,
				    "192.168.0.0", 16)->ref,
			 slots[rule_idx(&rs, "a")] + 1);
	assert_int_equal(find_entry(&c, 4, e8->ref & ~SLUICE_REF_LPM,
				    "0.0.0.0", 0)->ref,
			 slots[rule_idx(&rs, "c")] + 1);
	for (size_t i = 0; i < c.n_lpm; i++) {
		assert_true(c.lpm[i].class_id >= base);
		assert_true(c.lpm[i].class_id < base + c.n_classes);
	}

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t d[16], s[16];
		uint32_t want = 0;

		if (cases[i].rule)
			want = slots[rule_idx(&rs, cases[i].rule)] + 1;

		addr_of(4, cases[i].dst, d);
		addr_of(4, cases[i].src, s);
		if (walk(&c, SLUICE_SLOT_UDP, 9, 4, s, d) != want)
			fail_msg("%s -> %s: got ref %u, expected rule %s",
				 cases[i].src, cases[i].dst,
				 walk(&c, SLUICE_SLOT_UDP, 9, 4, s, d),
				 cases[i].rule ? cases[i].rule : "none");
		assert_int_equal(ref_best(&rs, slots, SLUICE_SLOT_UDP, 9, 4, s,
					  d),
				 want);
	}
	sl_compiled_free(&c);
	free(slots);
	sl_ruleset_free(&rs);
}

static void test_e2big(void **state)
{
	struct sl_ruleset rs = parse_ok(nested_json);
	uint32_t *slots = make_slots(rs.n);
	struct sl_compiled c;

	/* the set needs exactly 8 IPv4 entries */
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 8, &c, err, sizeof(err)),
			 0);
	sl_compiled_free(&c);
	err[0] = 0;
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 7, &c, err, sizeof(err)),
			 -E2BIG);
	assert_non_null(strstr(err, "7 IPv4 trie entries"));
	assert_null(c.port);
	assert_null(c.lpm);
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 1, &c, err, sizeof(err)),
			 -E2BIG);
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 0, &c, err, sizeof(err)),
			 -E2BIG);
	free(slots);
	sl_ruleset_free(&rs);

	/* IPv6 entries are limited on their own */
	rs = parse_ok("{\"rules\":["
		      OPEN("x", "{\"dst\":\"2001:db8::/32\"}") ","
		      OPEN("y", "{\"dst\":\"2001:db8:1::/48\"}") ","
		      OPEN("z", "{\"dst\":\"10.0.0.0/8\"}") "]}");
	slots = make_slots(rs.n);
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 2, &c, err, sizeof(err)),
			 0);
	assert_int_equal(c.n_lpm6, 2);
	assert_int_equal(c.n_lpm4, 1);
	sl_compiled_free(&c);
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 1, &c, err, sizeof(err)),
			 -E2BIG);
	assert_non_null(strstr(err, "IPv6"));
	free(slots);
	sl_ruleset_free(&rs);
}

/* The per_source rules of a set must fit the one source table, each
 * with its overflow entry; the rule that crosses it is named. */
static void test_sources_fit(void **state)
{
	char err[256], json[512];
	struct sl_compiled c;
	struct sl_ruleset rs;
	uint32_t *slots;
	/* two rules filling the table exactly, then one source more */
	uint32_t half = SLUICE_MAX_SOURCES / 2 - 1;

	(void)state;
	for (int over = 0; over < 2; over++) {
		snprintf(json, sizeof(json),
			 "{\"rules\":["
			 "{\"name\":\"a\",\"match\":{\"proto\":\"udp\",\"dport\":1},"
			 "\"grade\":\"pps\",\"count\":9,"
			 "\"per_source\":{\"max_sources\":%u}},"
			 "{\"name\":\"b\",\"match\":{\"proto\":\"udp\",\"dport\":2},"
			 "\"grade\":\"pps\",\"count\":9,"
			 "\"per_source\":{\"max_sources\":%u}},"
			 "{\"name\":\"c\",\"match\":{\"proto\":\"udp\",\"dport\":3},"
			 "\"grade\":\"pps\",\"count\":9}]}",
			 half, half + over);
		rs = parse_ok(json);
		slots = make_slots(rs.n);
		err[0] = 0;
		if (!over) {
			assert_int_equal(sl_compile(&rs, slots, 1, 0, 8, &c, err,
						    sizeof(err)),
					 0);
			sl_compiled_free(&c);
		} else {
			assert_int_equal(sl_compile(&rs, slots, 1, 0, 8, &c, err,
						    sizeof(err)),
					 -E2BIG);
			assert_non_null(strstr(err, "rule 'b'"));
			assert_non_null(strstr(err, "262145 source entries"));
			assert_null(c.port);
		}
		free(slots);
		sl_ruleset_free(&rs);
	}
}

static void test_rule_cfg(void **state)
{
	struct sl_ruleset rs = parse_ok(
		"{\"rules\":["
		"{\"name\":\"a\",\"match\":{},\"grade\":\"bps\",\"count\":9,"
		"\"window\":{\"interval_ms\":2000,\"sample_count\":4},"
		"\"mode\":\"shadow\",\"per_source\":{\"max_sources\":100,"
		"\"prefix_v4\":24,\"prefix_v6\":48}},"
		"{\"name\":\"b\",\"match\":{\"proto\":\"tcp\"},"
		"\"grade\":\"cps\","
		"\"count\":5,\"window\":{\"interval_ms\":100,"
		"\"sample_count\":1}},"
		"{\"name\":\"c\",\"match\":{},\"grade\":\"pps\",\"count\":5}"
		"]}");
	struct sluice_rule_cfg cfg;

	memset(&cfg, 0xab, sizeof(cfg));
	sl_rule_cfg(&rs.rules[0], &cfg);
	assert_int_equal(cfg.interval_ms, 2000);
	assert_int_equal(cfg.sample_count, 4);
	assert_int_equal(cfg.interval_ns, 2000000000ULL);
	assert_int_equal(cfg.bucket_ns, 500000000ULL);
	assert_int_equal(cfg.slot_ns, 2000000000ULL / SLUICE_ADMIT_SLOTS);
	assert_int_equal(cfg.grade, SLUICE_GRADE_BPS);
	assert_int_equal(cfg.flags,
			 SLUICE_RULE_SHADOW | SLUICE_RULE_PER_SOURCE);
	assert_int_equal(cfg.max_sources, 100);
	assert_int_equal(cfg.src_prefix_v4, 24);
	assert_int_equal(cfg.src_prefix_v6, 48);

	memset(&cfg, 0xab, sizeof(cfg));
	sl_rule_cfg(&rs.rules[1], &cfg);
	assert_int_equal(cfg.interval_ns, 100000000ULL);
	assert_int_equal(cfg.bucket_ns, 100000000ULL);
	assert_int_equal(cfg.slot_ns, 100000000ULL / SLUICE_ADMIT_SLOTS);
	assert_int_equal(cfg.grade, SLUICE_GRADE_CPS);
	assert_int_equal(cfg.flags, 0);
	assert_int_equal(cfg.max_sources, 0);
	assert_int_equal(cfg.src_prefix_v4, 0);
	assert_int_equal(cfg.src_prefix_v6, 0);

	/* defaults: 1000 ms in 2 buckets */
	sl_rule_cfg(&rs.rules[2], &cfg);
	assert_int_equal(cfg.grade, SLUICE_GRADE_PPS);
	assert_int_equal(cfg.interval_ms, 1000);
	assert_int_equal(cfg.sample_count, 2);
	assert_int_equal(cfg.bucket_ns, 500000000ULL);
	assert_int_equal(cfg.flags, 0);
	sl_ruleset_free(&rs);
}

/* ---- randomized differential test ---------------------------------------- */

/* No two entries may share a trie key: the later would overwrite. */
static void check_unique_keys(const struct sl_compiled *c)
{
	for (size_t i = 0; i < c->n_lpm; i++) {
		for (size_t j = i + 1; j < c->n_lpm; j++) {
			const struct sl_lpm_entry *a = &c->lpm[i];
			const struct sl_lpm_entry *b = &c->lpm[j];

			if (a->family == b->family &&
			    a->class_id == b->class_id && a->plen == b->plen &&
			    bits_match(a->addr, b->addr, a->plen))
				fail_msg("duplicate trie key: class %u /%u",
					 a->class_id, a->plen);
		}
	}
}

static uint16_t rnd_port(void)
{
	switch (rnd_n(6)) {
	case 0:
		return 0;
	case 1:
		return 65529 + rnd_n(7);
	case 2:
		return rnd();
	default:
		return rnd_n(28);
	}
}

/*
 * A walk's answer got against each layer's best: a rule where one layer
 * has a winner, a chain holding them all where two or more do. Sets
 * *want to got when they agree, so that the caller's check passes.
 */
static void layers_match(const struct sl_compiled *c,
			 const struct sl_ruleset *rs, const uint32_t *slots,
			 int slot, uint16_t port, int fam, const uint8_t *s,
			 const uint8_t *d, uint16_t vid, uint32_t got,
			 uint32_t *want)
{
	struct sluice_chain exp, has = { 0 };
	int winners = 0;

	ref_layers(rs, slots, slot, port, fam, s, d, vid, &exp);
	for (int l = 0; l < SLUICE_LAYERS; l++)
		winners += exp.ref[l] != 0;
	if (got & SLUICE_REF_CHAIN) {
		uint32_t i = (got & ~SLUICE_REF_CHAIN) - c->chain_base;

		assert_true(i < c->n_chains);
		has = c->chains[i];
	} else {
		for (size_t i = 0; got && i < rs->n; i++)
			if (slots[i] + 1 == got)
				has.ref[rs->rules[i].layer] = got;
	}
	if (!memcmp(&has, &exp, sizeof(exp)) &&
	    (winners >= 2) == !!(got & SLUICE_REF_CHAIN))
		*want = got;
	else
		fail_msg("layers: slot %d port %u: tables say %u/%u/%u/%u "
			 "(ref %#x), reference says %u/%u/%u/%u", slot, port,
			 has.ref[0], has.ref[1], has.ref[2], has.ref[3], got,
			 exp.ref[0], exp.ref[1], exp.ref[2], exp.ref[3]);
}

static void differential(int rounds, int max_rules, int packets,
			 uint32_t seed)
{
	long checked = 0, matched = 0;

	rng_state = seed;
	for (int round = 0; round < rounds; round++) {
		struct sl_ruleset rs;
		struct sl_compiled c;
		uint32_t *slots, base = rnd_n(2) ? 1 : 0x40000000;
		uint32_t chain_base = base == 1 ? 0 : SLUICE_MAX_CHAINS;

		rs.n = 1 + rnd_n(max_rules);
		rs.rules = calloc(rs.n, sizeof(*rs.rules));
		assert_non_null(rs.rules);
		for (size_t i = 0; i < rs.n; i++)
			rs.rules[i] = rnd_rule(i);
		slots = make_slots(rs.n);
		if (sl_compile(&rs, slots, base, chain_base, 1 << 20, &c, err,
			       sizeof(err)))
			fail_msg("round %d: sl_compile: %s", round, err);
		if (!rnd_layers)
			assert_int_equal(c.n_chains, 0);
		assert_int_equal(c.n_lpm, c.n_lpm4 + c.n_lpm6);
		check_unique_keys(&c);
		for (size_t i = 0; i < c.n_lpm; i++) {
			assert_true(c.lpm[i].class_id >= base);
			assert_true(c.lpm[i].class_id < base + c.n_classes);
		}
		for (int k = 0; k < packets; k++) {
			int slot = rnd_n(SLUICE_SLOT_MAX);
			int fam = rnd_n(3) ? 4 : 6;
			uint16_t port = slot < SLUICE_PORTED_SLOTS ? rnd_port()
								   : 0;
			uint8_t s[16], d[16];
			uint16_t vid = rnd_vlans ? rnd_n(5) : 0;
			uint32_t want, got;

			rnd_addr(fam, s);
			rnd_addr(fam, d);
			want = ref_best_vlan(&rs, slots, slot, port, fam, s, d,
					     vid);
			got = walk_vlan(&c, slot, port, fam, s, d, vid);
			if (rnd_layers)
				layers_match(&c, &rs, slots, slot, port, fam, s,
					     d, vid, got, &want);
			if (want != got) {
				char sb[64], db[64];

				inet_ntop(fam == 4 ? AF_INET : AF_INET6, s, sb,
					  sizeof(sb));
				inet_ntop(fam == 4 ? AF_INET : AF_INET6, d, db,
					  sizeof(db));
				fail_msg("seed %#x round %d (%zu rules): slot "
					 "%d port %u %s -> %s vlan %u: tables "
					 "say ref %u, reference says %u",
					 seed, round, rs.n, slot, port, sb, db,
					 vid, got, want);
			}
			checked++;
			matched += want != 0;
		}
		sl_compiled_free(&c);
		free(slots);
		free(rs.rules);
	}
	/* the mix must exercise both outcomes */
	assert_true(matched > checked / 10);
	assert_true(matched < checked - checked / 100);
	print_message("# differential: %ld packets, %ld matched a rule\n",
		      checked, matched);
}

static void test_differential_small(void **state)
{
	differential(400, 12, 1500, 0xc0ffee01);
}

static void test_differential_large(void **state)
{
	differential(40, 200, 5000, 0xbadc0de5);
}

/* The same with rules on VLANs 1-3 or untagged, packets on VLANs 0-4. */
static void test_differential_vlan(void **state)
{
	rnd_vlans = true;
	differential(400, 12, 1500, 0x7ad10001);
	differential(40, 200, 5000, 0x7ad10002);
	rnd_vlans = false;
}

/* The same with rules in layers: each layer's winner, in a chain. */
static void test_differential_layers(void **state)
{
	rnd_layers = true;
	differential(400, 12, 1500, 0x1a7e0001);
	differential(40, 200, 5000, 0x1a7e0002);
	rnd_vlans = true;
	differential(200, 12, 1500, 0x1a7e0003);
	rnd_vlans = false;
	rnd_layers = false;
}

/* A chain of layers: a port's answer names both layers' rules; a set
 * whose chain would hold two breakers is refused, naming them; one
 * breaker in a chain is fine. */
static void test_chains(void **state)
{
#define BRK "\"breaker\":{\"strategy\":\"error_count\",\"threshold\":1,\"open_ms\":10}"
	struct sl_ruleset rs = parse_ok(
		"{\"rules\":["
		"{\"name\":\"a\",\"match\":{\"proto\":\"tcp\",\"dport\":80},"
		"\"grade\":\"cps\",\"count\":5," BRK "},"
		"{\"name\":\"b\",\"match\":{\"proto\":\"tcp\",\"dport\":80},"
		"\"grade\":\"cps\",\"count\":50,\"layer\":2}]}");
	struct sl_ruleset two = parse_ok(
		"{\"rules\":["
		"{\"name\":\"a\",\"match\":{\"proto\":\"tcp\",\"dport\":80},"
		"\"grade\":\"cps\",\"count\":5," BRK "},"
		"{\"name\":\"b\",\"match\":{\"proto\":\"tcp\"},"
		"\"grade\":\"cps\",\"count\":50,\"layer\":1," BRK "}]}");
	uint32_t *slots = make_slots(rs.n);
	struct sl_compiled c;
	uint32_t ref, i;

	assert_int_equal(sl_compile(&rs, slots, 1, SLUICE_MAX_CHAINS, 1000, &c,
				    err, sizeof(err)),
			 0);
	ref = port_at(&c, SLUICE_SLOT_TCP_SYN, 80).v4;
	assert_true(ref & SLUICE_REF_CHAIN);
	i = (ref & ~SLUICE_REF_CHAIN) - SLUICE_MAX_CHAINS;
	assert_int_equal(c.n_chains, 1);
	assert_int_equal(i, 0);
	assert_int_equal(c.chains[0].ref[0], slots[0] + 1);
	assert_int_equal(c.chains[0].ref[1], 0);
	assert_int_equal(c.chains[0].ref[2], slots[1] + 1);
	/* another port: layer 2's rule alone, a rule's ref */
	assert_int_equal(port_at(&c, SLUICE_SLOT_TCP_SYN, 81).v4, 0);
	sl_compiled_free(&c);
	assert_int_equal(sl_compile(&two, slots, 1, 0, 1000, &c, err,
				    sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "rules 'a' (layer 0) and 'b' (layer 1) both "
				 "have a breaker and judge the same packets: "
				 "one breaker a packet");
	free(slots);
	sl_ruleset_free(&rs);
	sl_ruleset_free(&two);
#undef BRK
}

/* One VLAN rule: only its packets (innermost VID) see it; untagged and
 * other VLANs keep the rules without a VLAN; no VLAN rule, no stage. */
/* slow_request_ratio breakers watch their ports' TCP data; the other
 * entries and slots stay as they were. */
static void test_watch(void **state)
{
	struct sl_ruleset rs = parse_ok(
		"{\"rules\":["
		"{\"name\":\"slow\",\"match\":{\"proto\":\"tcp\","
		"\"dport\":\"8080-8081\"},\"grade\":\"cps\",\"count\":5,"
		"\"breaker\":{\"strategy\":\"slow_request_ratio\","
		"\"threshold\":0.5,\"max_rt_ms\":100,\"open_ms\":10}},"
		"{\"name\":\"slow6\",\"match\":{\"proto\":\"tcp\","
		"\"dport\":9000,\"dst\":\"2001:db8::/32\"},\"grade\":\"pps\","
		"\"count\":5,\"breaker\":{\"strategy\":"
		"\"slow_request_ratio\",\"threshold\":0.5,\"max_rt_ms\":100,"
		"\"open_ms\":10}},"
		"{\"name\":\"err\",\"match\":{\"proto\":\"tcp\","
		"\"dport\":9001},\"grade\":\"cps\",\"count\":5,"
		"\"breaker\":{\"strategy\":\"error_count\",\"threshold\":1,"
		"\"open_ms\":10}}"
		"]}");
	uint32_t *slots = make_slots(rs.n);
	uint32_t slow6 = slots[rule_idx(&rs, "slow6")] + 1;
	struct sluice_breaker_cfg bc;
	struct sl_compiled c;
	struct port_refs p;
	uint8_t dst[16];

	assert_int_equal(sl_compile(&rs, slots, 1, 0, 1000, &c, err, sizeof(err)),
			 0);
	/* a cps rule's port: no rule for its data, but watched: a class of
	 * its own without entries, one for both ports */
	p = port_at(&c, SLUICE_SLOT_TCP, 8080);
	assert_true(p.v4 & SLUICE_REF_WATCH);
	assert_true(p.v4 & SLUICE_REF_LPM);
	assert_true(p.v6 & SLUICE_REF_WATCH);
	assert_int_equal(port_at(&c, SLUICE_SLOT_TCP, 8081).v4, p.v4);
	addr_of(4, "10.1.2.3", dst);
	assert_int_equal(lpm_find(&c, 4, p.v4 & ~(SLUICE_REF_WATCH |
						  SLUICE_REF_LPM), dst),
			 SLUICE_REF_NONE);
	p = port_at(&c, SLUICE_SLOT_TCP, 8082);
	assert_int_equal(p.v4, 0);
	/* its SYNs are judged by the rule, unwatched */
	p = port_at(&c, SLUICE_SLOT_TCP_SYN, 8080);
	assert_int_equal(p.v4, slots[rule_idx(&rs, "slow")] + 1);
	/* a pps rule's own data: a class whose /0 is the rule */
	p = port_at(&c, SLUICE_SLOT_TCP, 9000);
	assert_int_equal(p.v4, 0);
	assert_true(p.v6 & SLUICE_REF_WATCH);
	assert_true(p.v6 & SLUICE_REF_LPM);
	addr_of(6, "2001:db8::1", dst);
	assert_int_equal(lpm_find(&c, 6, p.v6 & ~(SLUICE_REF_WATCH |
						  SLUICE_REF_LPM), dst),
			 slow6);
	/* another strategy watches nothing */
	p = port_at(&c, SLUICE_SLOT_TCP, 9001);
	assert_int_equal(p.v4, 0);
	assert_int_equal(p.v6, 0);
	p = port_at(&c, SLUICE_SLOT_UDP, 8080);
	assert_int_equal(p.v4, 0);
	/* a direct answer's class: /0 holds the rule, whatever address */
	{
		struct sl_ruleset rs2 = parse_ok(
		    "{\"rules\":["
		    "{\"name\":\"s\",\"match\":{\"proto\":\"tcp\","
		    "\"dport\":80},\"grade\":\"cps\",\"count\":5,"
		    "\"breaker\":{\"strategy\":\"slow_request_ratio\","
		    "\"threshold\":0.5,\"max_rt_ms\":100,\"open_ms\":10}},"
		    OPEN("d", "{\"proto\":\"tcp\",\"dport\":80}") "]}");
		uint32_t *s2 = make_slots(rs2.n);
		struct sl_compiled c2;
		struct port_refs q;

		assert_int_equal(sl_compile(&rs2, s2, 1, 0, 1000, &c2, err,
					    sizeof(err)), 0);
		q = port_at(&c2, SLUICE_SLOT_TCP, 80);
		assert_true(q.v4 & SLUICE_REF_WATCH);
		addr_of(4, "192.0.2.9", dst);
		assert_int_equal(lpm_find(&c2, 4, q.v4 & ~(SLUICE_REF_WATCH |
							   SLUICE_REF_LPM),
					  dst),
				 s2[rule_idx(&rs2, "d")] + 1);
		addr_of(6, "2001:db8:9::9", dst);
		assert_int_equal(lpm_find(&c2, 6, q.v6 & ~(SLUICE_REF_WATCH |
							   SLUICE_REF_LPM),
					  dst),
				 s2[rule_idx(&rs2, "d")] + 1);
		sl_compiled_free(&c2);
		free(s2);
		sl_ruleset_free(&rs2);
	}

	sl_breaker_cfg(&rs.rules[rule_idx(&rs, "slow")], &bc);
	assert_int_equal(bc.strategy, SLUICE_BRK_SLOW_RATIO);
	assert_int_equal(bc.threshold, 500000);
	assert_int_equal(bc.max_rt_ns, 100000000ULL);
	assert_int_equal(bc.udp, 0);
	sl_compiled_free(&c);
	free(slots);
	sl_ruleset_free(&rs);
}

static void test_vlan_stage(void **state)
{
	struct sl_ruleset rs = parse_ok(
		"{\"rules\":["
		"{\"name\":\"all-udp\",\"match\":{\"proto\":\"udp\"},"
		"\"grade\":\"pps\",\"count\":9},"
		"{\"name\":\"v100\",\"match\":{\"proto\":\"udp\","
		"\"vlan\":100},\"grade\":\"pps\",\"count\":1},"
		"{\"name\":\"bare\",\"match\":{\"proto\":\"udp\","
		"\"vlan\":\"untagged\",\"dst\":\"2001:db8::/32\"},"
		"\"grade\":\"pps\",\"count\":2}]}");
	uint32_t *slots = make_slots(rs.n);
	uint32_t all = slots[rule_idx(&rs, "all-udp")] + 1;
	uint32_t v100 = slots[rule_idx(&rs, "v100")] + 1;
	uint32_t bare = slots[rule_idx(&rs, "bare")] + 1;
	struct sl_compiled c;
	uint8_t s4[16], d4[16], s6[16], d6[16], o6[16];

	addr_of(4, "198.18.0.1", s4);
	addr_of(4, "198.18.0.2", d4);
	addr_of(6, "2001:db8::1", s6);
	addr_of(6, "2001:db8::2", d6);
	addr_of(6, "2001:db9::2", o6);
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 1 << 20, &c, err,
				    sizeof(err)), 0);
	assert_true(port_at(&c, SLUICE_SLOT_UDP, 53).v4 & SLUICE_REF_VLAN);
	assert_true(port_at(&c, SLUICE_SLOT_UDP, 53).v6 & SLUICE_REF_VLAN);
	/* TCP has no VLAN rule: no stage, no lookup */
	assert_int_equal(port_at(&c, SLUICE_SLOT_TCP, 53).v4, 0);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 4, s4, d4, 100),
			 v100);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 6, s6, d6, 100),
			 v100);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 4, s4, d4, 0),
			 all);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 4, s4, d4, 101),
			 all);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 6, s6, d6, 0),
			 bare);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 6, s6, o6, 0),
			 all);
	assert_int_equal(walk_vlan(&c, SLUICE_SLOT_UDP, 53, 6, s6, d6, 7),
			 all);
	sl_compiled_free(&c);
	free(slots);
	sl_ruleset_free(&rs);

	/* without VLAN rules the tables are as before: no VLAN flag */
	rs = parse_ok("{\"rules\":[{\"name\":\"a\",\"match\":{\"dst\":"
		      "\"198.18.0.0/15\"},\"grade\":\"pps\",\"count\":1}]}");
	slots = make_slots(rs.n);
	assert_int_equal(sl_compile(&rs, slots, 1, 0, 1 << 20, &c, err,
				    sizeof(err)), 0);
	for (int slot = 0; slot < SLUICE_SLOT_MAX; slot++)
		assert_false(port_at(&c, slot, 1).v4 & SLUICE_REF_VLAN);
	sl_compiled_free(&c);
	free(slots);
	sl_ruleset_free(&rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmp_precedence),
		cmocka_unit_test(test_cmp_order),
		cmocka_unit_test(test_port_index),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_port_refs),
		cmocka_unit_test(test_lpm_nested),
		cmocka_unit_test(test_e2big),
		cmocka_unit_test(test_sources_fit),
		cmocka_unit_test(test_rule_cfg),
		cmocka_unit_test(test_differential_small),
		cmocka_unit_test(test_differential_large),
		cmocka_unit_test(test_differential_vlan),
		cmocka_unit_test(test_differential_layers),
		cmocka_unit_test(test_chains),
		cmocka_unit_test(test_vlan_stage),
		cmocka_unit_test(test_watch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
