// SPDX-License-Identifier: GPL-2.0
/*
 * Every combination of two layers' rules (docs/rules.md "layer"): each
 * layer's rule one of the grades pps, bps, cps and conns, with and
 * without per_source, enforcing or shadow, or an allow, a deny or a
 * shadow deny; 19 x 19 rule sets. Each judges 6 SYNs of new
 * connections from one source at one instant (count 3, bps's the bytes
 * of 3), and every frame's verdict, each rule's passed and blocked
 * counters and a conns rule's open connections are checked against a
 * model of the walk: a refusal ends it (a conns rule's by a RST), a
 * shadow refusal and an allow do not count against the packet (an
 * allow ends the walk), an earlier layer keeps what it took, but a
 * conns place taken for a SYN that a later layer refuses comes back.
 * The qemu guests run every fourth combination.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define PORT  8080
#define COUNT 3
#define SYNS  6

enum kind { K_PPS, K_BPS, K_CPS, K_CONNS, K_ALLOW, K_DENY };

struct rule_kind {
	enum kind kind;
	bool per_source, shadow;
};

/* the model's state of one rule */
struct model {
	struct rule_kind k;
	uint64_t passed, blocked, used;
};

static const char *const grade_of[] = { "pps", "bps", "cps", "conns" };

static int kinds(struct rule_kind *out)
{
	int n = 0;

	for (int g = K_PPS; g <= K_CONNS; g++)
		for (int ps = 0; ps < 2; ps++)
			for (int sh = 0; sh < 2; sh++)
				out[n++] = (struct rule_kind){ g, ps, sh };
	out[n++] = (struct rule_kind){ K_ALLOW, false, false };
	out[n++] = (struct rule_kind){ K_DENY, false, false };
	out[n++] = (struct rule_kind){ K_DENY, false, true };
	return n;
}

static void describe(const struct rule_kind *k, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s",
		 k->kind == K_ALLOW  ? "allow"
		 : k->kind == K_DENY ? "deny"
				     : grade_of[k->kind],
		 k->per_source ? "/ps" : "", k->shadow ? "/shadow" : "");
}

static int rule_json(char *buf, size_t len, const char *name, int layer,
		     const struct rule_kind *k, uint32_t frame_len)
{
	int n = snprintf(buf, len,
			 "{\"name\":\"%s\",\"match\":{\"proto\":\"tcp\","
			 "\"dport\":%d},\"layer\":%d",
			 name, PORT, layer);

	if (k->kind == K_ALLOW || k->kind == K_DENY)
		n += snprintf(buf + n, len - n, ",\"action\":\"%s\"",
			      k->kind == K_ALLOW ? "allow" : "deny");
	else
		n += snprintf(buf + n, len - n,
			      ",\"grade\":\"%s\",\"count\":%u",
			      grade_of[k->kind],
			      k->kind == K_BPS ? COUNT * frame_len : COUNT);
	if (k->per_source)
		n += snprintf(buf + n, len - n,
			      ",\"per_source\":{\"max_sources\":10}");
	if (k->shadow)
		n += snprintf(buf + n, len - n, ",\"mode\":\"shadow\"");
	return n + snprintf(buf + n, len - n, "}");
}

/* One SYN through the model's two layers: the expected verdict. */
static int model_syn(struct model *m)
{
	bool took = false;

	for (int l = 0; l < 2; l++) {
		struct model *r = &m[l];

		if (r->k.kind == K_ALLOW) {
			r->passed++;
			return XDP_PASS;
		}
		if (r->k.kind != K_DENY && r->used < COUNT) {
			r->used++;
			r->passed++;
			took |= r->k.kind == K_CONNS;
			continue;
		}
		r->blocked++;
		if (r->k.shadow)
			continue;
		/* the SYN will not open: an earlier conns place comes back */
		if (took)
			m[0].used--;
		return r->k.kind == K_CONNS ? XDP_TX : XDP_DROP;
	}
	return XDP_PASS;
}

static bool check_rule(struct sl_dataplane *d, const char *name,
		       const struct model *m, char *why, size_t len)
{
	struct sl_rule_stats st = rule_stats(d, name);
	uint64_t open = m->k.kind == K_CONNS ? m->used : 0;

	if (st.passed_pkts == m->passed && st.blocked_pkts == m->blocked &&
	    st.conns_open == open)
		return true;
	snprintf(why, len,
		 "%s passed %llu blocked %llu open %llu, model %llu %llu %llu",
		 name, (unsigned long long)st.passed_pkts,
		 (unsigned long long)st.blocked_pkts,
		 (unsigned long long)st.conns_open,
		 (unsigned long long)m->passed,
		 (unsigned long long)m->blocked, (unsigned long long)open);
	return false;
}

static void test_matrix(struct sl_dataplane *d)
{
	struct rule_kind k[32];
	int n = kinds(k), every = getenv("SLUICE_VM") ? 4 : 1;
	uint16_t sport = 20000;
	int combos = 0, wrong = 0;

	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			struct model m[2] = { { .k = k[a] }, { .k = k[b] } };
			char json[1024], da[32], db[32], why[256] = "";
			char na[16], nb[16];
			struct pspec s = { .proto = TCP_, .dport = PORT,
					   .flags = PKT_SYN };
			struct pkt p;
			uint32_t len;
			int o, ok = 1;

			if ((a * n + b) % every)
				continue;
			/* names of their own: a rule kept by name and
			 * identity would keep its counters */
			snprintf(na, sizeof(na), "a%d", a * n + b);
			snprintf(nb, sizeof(nb), "b%d", a * n + b);
			len = build(&s, &p);
			o = snprintf(json, sizeof(json), "{\"rules\":[");
			o += rule_json(json + o, sizeof(json) - o, na, 0,
				       &k[a], len);
			o += snprintf(json + o, sizeof(json) - o, ",");
			o += rule_json(json + o, sizeof(json) - o, nb, 1,
				       &k[b], len);
			snprintf(json + o, sizeof(json) - o, "]}");
			describe(&k[a], da, sizeof(da));
			describe(&k[b], db, sizeof(db));
			next_scenario();
			if (apply(d, json)) {
				tap(false, "matrix: %s, %s: applies", da, db);
				wrong++;
				continue;
			}
			for (int i = 0; i < SYNS && ok; i++) {
				int want = model_syn(m), got;

				s.sport = sport++;
				build(&s, &p);
				got = run(d, &p);
				if (got != want) {
					snprintf(why, sizeof(why),
						 "SYN %d: %s, model %s", i + 1,
						 verdict_str(got),
						 verdict_str(want));
					ok = 0;
				}
			}
			ok = ok && check_rule(d, na, &m[0], why, sizeof(why)) &&
			     check_rule(d, nb, &m[1], why, sizeof(why));
			combos++;
			if (!ok) {
				tap(false, "matrix: layer 0 %s, layer 1 %s: %s",
				    da, db, why);
				wrong++;
			}
		}
	tap(!wrong && combos == (n * n + every - 1) / every,
	    "matrix: %d combinations of two layers' rules (%d kinds each) "
	    "judge as the model walks, %d wrong",
	    combos, n, wrong);
}

int main(void)
{
	struct sl_dataplane dp;

	if (!h_begin(&dp)) {
		test_matrix(&dp);
		h_unload(&dp);
	}
	return h_end();
}
