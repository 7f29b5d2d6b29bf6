// SPDX-License-Identifier: GPL-2.0
/* The data plane tests' harness (harness.h). */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "harness.h"
#include "log.h"
#include "rules.h"
#include "rules_parse.h"
#include "sluice.skel.h"

/* ---- TAP ---------------------------------------------------------- */

static int tap_n, tap_failed;

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

bool tap(bool ok, const char *fmt, ...)
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

void tap_skip(const char *reason, const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP %s\n", reason);
	fflush(stdout);
}

/* ---- the suite, its data planes and the clock --------------------------- */

#define MAX_PLANES 4

/* the loaded planes, which set_time() moves together */
static struct sl_dataplane *planes[MAX_PLANES];
static int n_planes;

static uint64_t t_ns = 1000 * NSEC_PER_SEC;

uint64_t test_time(void)
{
	return t_ns;
}

void set_time(uint64_t ns)
{
	t_ns = ns;
	for (int i = 0; i < n_planes; i++)
		sl_dp_set_test_time(planes[i], ns);
}

void next_scenario(void)
{
	set_time((t_ns / NSEC_PER_SEC + 10) * NSEC_PER_SEC);
}

int h_load(struct sl_dataplane *d, const struct sl_dp_opts *o)
{
	int err;

	if (n_planes == MAX_PLANES)
		return -ENOSPC;
	err = sl_dp_load(d, o);
	if (err)
		return err;
	planes[n_planes++] = d;
	sl_dp_set_test_time(d, t_ns);
	return 0;
}

void h_unload(struct sl_dataplane *d)
{
	for (int i = 0; i < n_planes; i++) {
		if (planes[i] == d) {
			planes[i] = planes[--n_planes];
			break;
		}
	}
	sl_dp_destroy(d);
}

static void pin_cpu(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		diag("sched_setaffinity: %s", strerror(errno));
}

int h_begin(struct sl_dataplane *d)
{
	struct sl_dp_opts o = { .test_clock = true };
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sl_log_daemon(&(struct sl_log_opts){ .level = SL_LOG_WARN }, NULL);
	pin_cpu();
	err = h_load(d, &o);
	/* only a missing privilege skips: a verifier's refusal fails */
	if (err == -EPERM)
		tap_skip(strerror(-err), "load the data plane (needs root)");
	else if (err)
		tap(false, "load the data plane: %s (the verifier's reason "
			   "above)", strerror(-err));
	return err;
}

int h_end(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		diag("%d of %d failed", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

/* ---- rules and counters ------------------------------------------------ */

static char errbuf[65536];

int apply(struct sl_dataplane *d, const char *json)
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

int apply_one(struct sl_dataplane *d, const char *name, uint16_t dport,
	      const char *grade, uint64_t count, const char *extra)
{
	char json[1024];

	snprintf(json, sizeof(json),
		 "{\"rules\":[{\"name\":\"%s\",\"match\":{\"proto\":\"udp\","
		 "\"dport\":%u},\"grade\":\"%s\",\"count\":%llu%s%s}]}",
		 name, dport, grade, (unsigned long long)count,
		 extra ? "," : "", extra ? extra : "");
	return apply(d, json);
}

int rule_index(const struct sl_dataplane *d, const char *name)
{
	for (size_t i = 0; i < d->rules.n; i++)
		if (!strcmp(d->rules.rules[i].name, name))
			return i;
	return -1;
}

uint32_t slot_of(const struct sl_dataplane *d, const char *name)
{
	int i = rule_index(d, name);

	return i < 0 ? UINT32_MAX : d->slots[i];
}

struct sl_rule_stats rule_stats(const struct sl_dataplane *d,
				const char *name)
{
	struct sl_rule_stats st = { 0 };
	int i = rule_index(d, name);

	if (i < 0 || sl_dp_rule_stats(d, i, &st))
		diag("no stats for rule '%s'", name);
	return st;
}

void host_stats(const struct sl_dataplane *d, uint64_t out[SLUICE_ST_MAX])
{
	if (sl_dp_host_stats(d, out))
		diag("sl_dp_host_stats failed");
}

/* ---- frames through the program ---------------------------------------- */

static int run_prog(const struct bpf_program *prog, const void *buf,
		    size_t len)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = buf,
		    .data_size_in = len, .repeat = 1);

	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &o))
		return -errno;
	return o.retval;
}

int run_len(struct sl_dataplane *d, const void *buf, size_t len)
{
	return run_prog(d->skel->progs.sluice_xdp, buf, len);
}

int run_frags_len(struct sl_dataplane *d, const void *buf, size_t len)
{
	return run_prog(d->skel->progs.sluice_xdp_frags, buf, len);
}

int run(struct sl_dataplane *d, const struct pkt *p)
{
	return run_len(d, p->buf, p->len);
}

long burst(struct sl_dataplane *d, const struct pkt *p, long n)
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

const char *verdict_str(int v)
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

/* ---- fixture frames ---------------------------------------------------- */

/* n bytes of v, big-endian, at b */
static void put_be(uint8_t *b, uint32_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		b[i] = v & 0xff;
}

size_t build(const struct pspec *s, struct pkt *p)
{
	int family = s->family ? s->family : 4;
	uint8_t proto = s->proto ? s->proto : IPPROTO_UDP;
	uint16_t sport = s->sport ? s->sport : 40000;
	bool no_l4 = s->frag != 0;

	pkt_init(p);
	pkt_eth(p, NULL, NULL);
	if (s->tags >= 2)
		pkt_vlan(p, ETH_P_8021AD, 10);
	for (int i = s->tags >= 2 ? 1 : 0; i < s->tags; i++) {
		pkt_vlan(p, ETH_P_8021Q, 100 + i);
		/* PCP and DEI too, which pkt_vlan() leaves 0 */
		if (s->tci && i == s->tags - 1) {
			p->buf[p->len - 4] = s->tci >> 8;
			p->buf[p->len - 3] = s->tci & 0xff;
		}
	}
	if (s->ethertype) {
		static const uint8_t arp[28] = { 0, 1, 8, 0, 6, 4, 0, 1 };

		pkt_next(p, s->ethertype);
		pkt_bytes(p, arp, sizeof(arp));
		return pkt_finish(p, s->size);
	}
	if (s->tunnel && s->outer_family == 6) {
		pkt_ipv6(p, OUTER_SRC6, OUTER_DST6);
		if (s->outer_mf)
			pkt_ipv6_frag(p, 0, true);
	} else if (s->tunnel) {
		pkt_ipv4_ex(p, OUTER_SRC4, OUTER_DST4, 0, 0, s->outer_mf);
	}
	if (s->tunnel == IPPROTO_GRE)
		pkt_gre(p, s->gre_flags, 0x4242);
	if (family == 4) {
		pkt_ipv4_ex(p, s->src ? s->src : SRC4, s->dst ? s->dst : DST4,
			    s->ip4_optlen, s->frag, s->mf);
		if (s->frag_id)
			put_be(p->buf + p->l3_off + 4, s->frag_id, 2);
	} else {
		pkt_ipv6(p, s->src ? s->src : SRC6, s->dst ? s->dst : DST6);
		for (int i = 0; i < s->n_ext; i++) {
			if (s->ext[i] == IPPROTO_FRAGMENT) {
				pkt_ipv6_frag(p, s->frag, s->mf);
				if (s->frag_id)
					put_be(p->buf + p->len - 4,
					       s->frag_id, 4);
			} else
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

struct pkt udp_to(uint16_t dport, const char *src, size_t size)
{
	struct pspec s = { .dport = dport, .src = src, .size = size };
	struct pkt p;

	build(&s, &p);
	return p;
}

/* ---- fixture tables ---------------------------------------------------- */

void take_snap(const struct sl_dataplane *d, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	host_stats(d, s->host);
	s->n = d->rules.n < MAX_SNAP_RULES ? d->rules.n : MAX_SNAP_RULES;
	for (size_t i = 0; i < s->n; i++)
		if (sl_dp_rule_stats(d, i, &s->rule[i]))
			diag("rule stats %zu failed", i);
}

int check_deltas(const struct sl_dataplane *d, const struct snap *a,
		 const struct snap *b, const char *rule, enum which ctr,
		 unsigned int host, uint64_t npkts, uint64_t len)
{
	int bad = 0;

	for (int k = 0; k < SLUICE_ST_MAX; k++) {
		uint64_t want = host >> k & 1 ? npkts : 0;
		uint64_t got = b->host[k] - a->host[k];

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
	bad += check_deltas(d, &a, &b, f->rule, f->ctr, f->host, 1, p.len);
	return tap(!bad, "%s: %s", group, f->desc);
}

void run_table(struct sl_dataplane *d, const char *group,
	       const struct fixture *fx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_fixture(d, &fx[i], group);
}

/* ---- several sources --------------------------------------------------- */

int sources_round(struct sl_dataplane *d, const char *const *src, int nsrc,
		  int n, int family, uint16_t dport, long *got)
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
			int v = run(d, &p[i]);

			if (v < 0)
				return -1;
			got[i] += v == XDP_PASS;
		}
	}
	return 0;
}

bool all_equal(const long *got, int n, long want)
{
	for (int i = 0; i < n; i++)
		if (got[i] != want)
			return false;
	return true;
}

/* A private bpffs in a mount namespace of our own, for pinned maps. */
int h_private_bpffs(char *dir, size_t len)
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
