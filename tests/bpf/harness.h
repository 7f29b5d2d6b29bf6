/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data plane tests' harness: TAP output, the data plane loaded through
 * the library on the injected test clock, rule sets applied from JSON,
 * frames from the packet builder (user/lib/pkt.h) run through
 * BPF_PROG_TEST_RUN, and the rule and host counters read back. Fixture
 * tables (one frame, its verdict, its counter deltas) run through
 * run_table(). Each tests/bpf/test_<feature>.c is one TAP suite:
 *
 *	int main(void)
 *	{
 *		struct sl_dataplane dp;
 *
 *		if (!h_begin(&dp)) {
 *			test_a(&dp);
 *			h_unload(&dp);
 *		}
 *		return h_end();
 *	}
 */
#ifndef SLUICE_TEST_HARNESS_H
#define SLUICE_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/bpf.h>

#include "loader.h"
#include "stats.h"
#include "sluice_abi.h"
#include "pkt.h"
#include "util.h"

/* admission ring slot width for a 1 s interval */
#define SLOT_NS	      (NSEC_PER_SEC / SLUICE_ADMIT_SLOTS)

/* ---- TAP ---------------------------------------------------------- */

void __attribute__((format(printf, 1, 2))) diag(const char *fmt, ...);
/* One result; returns ok so that a failed step can end its test. */
bool __attribute__((format(printf, 2, 3))) tap(bool ok, const char *fmt, ...);
void __attribute__((format(printf, 2, 3)))
tap_skip(const char *reason, const char *fmt, ...);

/* ---- the suite and its data planes ----------------------------------- */

/*
 * Start a suite: line-buffered output, this process on one CPU (per-CPU
 * token caches: one CPU makes every count exact) and d loaded with the
 * test clock. 0, or -errno after reporting the load as a skip.
 */
int h_begin(struct sl_dataplane *d);
/* Another data plane on the same clock; 0 or -errno. */
int h_load(struct sl_dataplane *d, const struct sl_dp_opts *o);
/* A private bpffs at a new directory (dir, len >= 32) in a mount
 * namespace of our own, for pinned maps; 0 or -errno. */
int h_private_bpffs(char *dir, size_t len);
void h_unload(struct sl_dataplane *d);
/* Print the plan; returns the exit status (1 when a result failed). */
int h_end(void);

/* ---- the test clock --------------------------------------------------- */

/* Every loaded data plane reads this clock. */
uint64_t test_time(void);
void set_time(uint64_t ns);
/* A fresh whole second, 10 s after the previous scenario's, so windows
 * and pacing credit start full and exact. */
void next_scenario(void);

/* ---- rules and counters ------------------------------------------------ */

/* Parse json and make it the rule set in force; 0 or the error, shown. */
int apply(struct sl_dataplane *d, const char *json);
/* A one-rule set: udp to dport, grade, count, extra JSON members. */
int apply_one(struct sl_dataplane *d, const char *name, uint16_t dport,
	      const char *grade, uint64_t count, const char *extra);

int rule_index(const struct sl_dataplane *d, const char *name);
/* The slot of the rule in force called name; UINT32_MAX: none. */
uint32_t slot_of(const struct sl_dataplane *d, const char *name);
/* A rule's counters (zero and a diagnosis when it has none). */
struct sl_rule_stats rule_stats(const struct sl_dataplane *d,
				const char *name);
void host_stats(const struct sl_dataplane *d, uint64_t out[SLUICE_ST_MAX]);

/* A rule that never blocks (a huge count): shows where a frame lands. */
#define OPEN(name, match)                                                   \
	"{\"name\":\"" name "\",\"match\":" match                           \
	",\"grade\":\"pps\",\"count\":100000000000}"
#define RULES(...) "{\"rules\":[" __VA_ARGS__ "]}"

/* ---- frames through the program ---------------------------------------- */

/* One frame through the program: its XDP verdict or -errno. */
int run_len(struct sl_dataplane *d, const void *buf, size_t len);
/* The same through sluice_xdp_frags (loaded with sl_dp_opts.frags): a
 * frame past about a page comes in several buffers. */
int run_frags_len(struct sl_dataplane *d, const void *buf, size_t len);
int run(struct sl_dataplane *d, const struct pkt *p);
/* n copies of a frame; returns how many got XDP_PASS (-errno on error). */
long burst(struct sl_dataplane *d, const struct pkt *p, long n);
const char *verdict_str(int v);

/* ---- fixture frames ---------------------------------------------------- */

#define SRC4 "192.0.2.1"
#define DST4 "198.51.100.1"
#define SRC6 "2001:db8::1"
#define DST6 "2001:db8:1::1"

#define TCP_ IPPROTO_TCP
#define UDP_ IPPROTO_UDP

/* What a fixture's frame carries; zero fields take the defaults. */
struct pspec {
	uint8_t tags;		/* VLAN tags (2+: the outer 802.1ad, VID 10) */
	uint16_t tci;		/* innermost TCI if set, else VID 100 + i */
	uint16_t ethertype;	/* a non-IP frame of this ethertype */
	uint8_t family;		/* 4 (default) or 6 */
	const char *src, *dst;	/* default SRC4/DST4 or SRC6/DST6 */
	uint8_t proto;		/* IPPROTO_*, default UDP */
	uint16_t sport, dport;	/* default source port 40000 */
	uint8_t flags;		/* TCP flags */
	uint8_t ip4_optlen;
	uint16_t frag;		/* fragment offset, 8-byte units */
	bool mf;
	uint32_t frag_id;	/* the datagram's id (IPv4: 16 bits); 0: the
				 * builder's */
	uint8_t n_ext;		/* IPv6 extension headers, in order */
	uint8_t ext[16];	/* IPPROTO_FRAGMENT takes frag/mf */
	uint16_t ext_len;	/* bytes of each option header, default 8 */
	uint16_t size;		/* pad the frame to this size */
	void (*mangle)(struct pkt *p);	/* after the checksums */
	/* a tunnel around the packet above: IPPROTO_IPIP (IP in IP) or
	 * IPPROTO_GRE, in an outer header of outer_family (default 4)
	 * from OUTER_SRC to OUTER_DST, a first fragment when outer_mf */
	uint8_t tunnel;
	uint8_t outer_family;
	bool outer_mf;
	uint16_t gre_flags;	/* PKT_GRE_*, and the version bits */
};

#define OUTER_SRC4 "198.18.77.1"
#define OUTER_DST4 "198.18.77.2"
#define OUTER_SRC6 "2001:db8:77::1"
#define OUTER_DST6 "2001:db8:77::2"

/* Build the frame of s into p; returns its length. */
size_t build(const struct pspec *s, struct pkt *p);
/* UDP from src (NULL: SRC4) to dport, padded to size (0: none). */
struct pkt udp_to(uint16_t dport, const char *src, size_t size);

/* ---- fixture tables: one frame, its verdict and counter deltas ---------- */

enum which { NONE = 0, PASSED, BLOCKED };

/* The bit of host stat SLUICE_ST_<st> in struct fixture's host. */
#define HOST(st) (1u << SLUICE_ST_##st)
_Static_assert(SLUICE_ST_MAX <= 32, "fixture.host holds every host stat");

struct fixture {
	const char *desc;
	struct pspec pkt;
	int verdict;
	const char *rule;	/* the rule whose counter moves, or NULL */
	enum which ctr;		/* PASSED or BLOCKED by one frame */
	unsigned int host;	/* HOST() of each host stat moved by one */
};

/* The verdict, and the frame counts as passed by rule */
#define P(verdict_, rule_) .verdict = verdict_, .rule = rule_, .ctr = PASSED
#define UNMATCHED .verdict = XDP_PASS, .host = HOST(UNMATCHED)

#define MAX_SNAP_RULES 64

/* Every counter of a data plane at one moment. */
struct snap {
	uint64_t host[SLUICE_ST_MAX];
	struct sl_rule_stats rule[MAX_SNAP_RULES];
	size_t n;
};

void take_snap(const struct sl_dataplane *d, struct snap *s);
/*
 * Compare every counter's delta from a to b with what npkts frames of
 * len bytes should move: rule's ctr counter, each host stat in the host
 * mask, nothing else. Returns the number of mismatches (each diagnosed).
 */
int check_deltas(const struct sl_dataplane *d, const struct snap *a,
		 const struct snap *b, const char *rule, enum which ctr,
		 unsigned int host, uint64_t npkts, uint64_t len);
/* One TAP result per row: "group: desc". */
void run_table(struct sl_dataplane *d, const char *group,
	       const struct fixture *fx, size_t n);

#define RUN_TABLE(d, group, fx) run_table(d, group, fx, ARRAY_SIZE(fx))

/* ---- several sources --------------------------------------------------- */

/*
 * Round-robin n UDP frames to dport from each of nsrc (at most 16)
 * sources of family; got[i] = admitted from src[i]. 0, or -1 on a run
 * error.
 */
int sources_round(struct sl_dataplane *d, const char *const *src, int nsrc,
		  int n, int family, uint16_t dport, long *got);
bool all_equal(const long *got, int n, long want);

#endif
