/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rule model: what a rule is (docs/rules.md), the enums as rule files
 * spell them, and prefix helpers. rules_parse.h reads rule files,
 * rules_json.h writes the canonical form.
 */
#ifndef SLUICE_RULES_H
#define SLUICE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_NAME_MAX	     63
#define SL_MAX_RULES	     4096
#define SL_MAX_SAMPLE_COUNT  8
#define SL_MAX_INTERVAL_MS   60000
#define SL_MAX_COUNT	     100000000000ULL /* 1e11/s: 800 Gbit/s for bps */
#define SL_MAX_PRIORITY	     65535
#define SL_MAX_WARM_PERIOD_S 3600
#define SL_MAX_CONN_IDLE_S   604800 /* conns.idle_timeout_s: a week */
#define SL_DEF_CONN_IDLE_S   300
#define SL_MIN_COLD_FACTOR   2
#define SL_MAX_COLD_FACTOR   100
#define SL_DEF_COLD_FACTOR   3 /* Sentinel's coldFactor default */
#define SL_NODE_MAX	     63 /* node ids in cluster.quotas */
#define SL_MAX_QUOTAS	     32 /* nodes in one manual cluster flow */
#define SL_BRK_RATIO_ONE     1000000 /* an error_ratio threshold of 1.0 */
#define SL_BRK_MAX_COUNT     1000000000
#define SL_BRK_MAX_OPEN_MS   3600000
#define SL_BRK_MIN_STAT_MS   10
#define SL_BRK_MAX_STAT_MS   SL_MAX_INTERVAL_MS
#define SL_BRK_MAX_PROBES    1000
#define SL_BRK_MAX_RT_MS     SL_MAX_INTERVAL_MS
#define SL_BRK_DEF_MIN_REQ   5	  /* Sentinel's minRequestAmount default */
#define SL_BRK_DEF_STAT_MS   1000 /* Sentinel's statIntervalMs default */
#define SL_BRK_DEF_PROBES    1
#define SL_MAX_VLAN	     4094 /* 802.1Q VIDs 1..4094; 0 and 4095 are reserved */
#define SL_PPM		     1000000 /* a share of 1.0, in parts per million */
#define SL_SYS_MAX_QUEUE     1000000 /* system.accept_queue */
#define SL_SYS_MAX_LOAD	     1000 /* system.load, per CPU */
#define SL_SYS_MILLI	     1000 /* system.load is kept in thousandths */
#define SL_SYS_FLOOR_DIV     100 /* the default floor: count / 100 */

enum sl_proto {
	SL_PROTO_ANY = 0,
	SL_PROTO_TCP,
	SL_PROTO_UDP,
	SL_PROTO_ICMP,
	SL_PROTO_ICMPV6,
};

enum sl_grade {
	SL_GRADE_PPS = 0,
	SL_GRADE_BPS,
	SL_GRADE_CPS,
	SL_GRADE_CONNS, /* TCP connections open at once, not a rate */
};

enum sl_mode {
	SL_MODE_ENFORCE = 0,
	SL_MODE_SHADOW,
};

/* What a rule does with the packets it judges: limit them to count, or
 * pass (allow) or drop (deny) them all, counted. */
enum sl_action {
	SL_ACTION_LIMIT = 0,
	SL_ACTION_ALLOW,
	SL_ACTION_DENY,
};

/* breaker.strategy: what threshold is compared with. */
enum sl_breaker_strategy {
	SL_BRK_ERROR_RATIO = 0, /* errors / answers, threshold in ppm */
	SL_BRK_ERROR_COUNT,	/* errors */
	SL_BRK_SLOW_RATIO,	/* slow / responses, threshold in ppm */
};

/* breaker.open_action: how a SYN is failed while the breaker is open. */
enum sl_open_action {
	SL_OPEN_RST = 0,
	SL_OPEN_DROP,
};

/* A rule's "breaker" (tcp and udp rules); enabled is false when it has
 * none. */
struct sl_breaker {
	bool enabled;
	enum sl_breaker_strategy strategy;
	uint32_t threshold; /* ratio: parts per million; count: errors */
	uint32_t max_rt_ms; /* slow_request_ratio: slower is slow; else 0 */
	uint32_t open_ms;
	uint32_t min_requests;
	uint32_t stat_interval_ms;
	uint32_t probes;
	enum sl_open_action open_action;
};

/*
 * A rule's "system" (adaptive protection, docs/rules.md): while one of its
 * signals is past its threshold, the agent lowers the rule's threshold to
 * what the host serves, between floor and count. A signal of 0 is not
 * watched; enabled is false when the rule has none.
 */
struct sl_system {
	bool enabled;
	uint32_t accept_queue; /* target of the listeners' accept queues */
	uint32_t cpu_pressure; /* PSI cpu "some", ppm of the time */
	uint32_t softirq;      /* ppm of the CPUs' time in softirq */
	uint32_t load;	       /* 1-minute load average per CPU, x 1000 */
	uint64_t floor;	       /* per second, never shed below */
};

/* cluster.threshold_type: what count means for a cluster flow. */
enum sl_threshold {
	SL_THRESH_GLOBAL = 0, /* count for the whole cluster, split by demand */
	SL_THRESH_AVG_LOCAL,  /* count for each live lease holder */
	SL_THRESH_MANUAL,     /* quotas per node; count bounds their sum */
};

/* cluster.fallback: what a node enforces without a valid lease. */
enum sl_fallback {
	SL_FB_SHARE = 0,  /* count / last known number of holders */
	SL_FB_LAST_LEASE, /* the last grant */
	SL_FB_FULL,	  /* count on every node: N x count in the cluster */
	SL_FB_BLOCK,	  /* 0 */
	SL_FB_PASS,	  /* no limit */
	SL_FB_FIXED,	  /* fallback_fixed */
};

struct sl_quota {
	char node[SL_NODE_MAX + 1];
	uint64_t count;
};

/* A rule's "cluster" object; enabled is false when the rule has none. */
struct sl_cluster {
	bool enabled;
	char ns[SL_NAME_MAX + 1];
	uint32_t flow_id;
	enum sl_threshold threshold;
	enum sl_fallback fallback;
	uint64_t fallback_fixed;
	uint32_t n_quotas; /* manual only; sorted by node */
	/* n_quotas of them, owned by the rule (sl_rule_copy/release):
	 * inline they made every rule 2.4 KB larger */
	struct sl_quota *quotas;
};

/* family 0 means "any address" (field absent); addr is masked to len. */
struct sl_prefix {
	uint8_t family; /* 0, AF_INET or AF_INET6 */
	uint8_t len;
	uint8_t addr[16]; /* network byte order; IPv4 in the first 4 bytes */
};

struct sl_rule {
	char name[SL_NAME_MAX + 1];
	enum sl_proto proto;
	uint16_t dport_lo; /* 0/0: any port */
	uint16_t dport_hi;
	struct sl_prefix dst;
	struct sl_prefix src;
	/* match.vlan: has_vlan false = any; vlan 0 = "untagged" (or a
	 * priority tag), else the innermost 802.1Q VID */
	bool has_vlan;
	uint16_t vlan;
	enum sl_action action;
	enum sl_grade grade; /* grade to system: action limit only */
	uint64_t count; /* per second */
	uint32_t interval_ms;
	uint32_t sample_count;
	bool per_source;
	uint8_t src_prefix_v4;
	uint8_t src_prefix_v6;
	uint32_t max_sources;
	enum sl_mode mode;
	uint32_t layer; /* judged in order: docs/rules.md "layer" */
	bool has_priority;
	uint32_t priority;
	/* behavior: "reject" (warm_up false, both 0) or a warm-up ramp of the
	 * threshold from count / cold_factor to count over warm_period_s */
	bool warm_up;
	uint32_t warm_period_s;
	uint32_t cold_factor;
	struct sl_cluster cluster;
	struct sl_breaker breaker;
	struct sl_system system;
	/* grade conns: forget a connection silent this long; refuse a SYN
	 * over count by a RST or by dropping it (conns: the section given) */
	bool conns;
	uint32_t conn_idle_s;
	enum sl_open_action conn_refuse;
	uint32_t file_index; /* position in the file, the last tie-break */
};

/* The rule's priority; absent counts as 0 (docs/rules.md, "Precedence"). */
static inline uint32_t sl_rule_priority(const struct sl_rule *r)
{
	return r->has_priority ? r->priority : 0;
}

/* A node's manual quota (quotas are sorted by node); 0 when not listed. */
uint64_t sl_cluster_quota(const struct sl_cluster *c, const char *node);

/* Copy src into dst, its quotas too; -ENOMEM. */
int sl_rule_copy(struct sl_rule *dst, const struct sl_rule *src);

/* Free what a rule owns (not the rule itself). */
void sl_rule_release(struct sl_rule *r);

struct sl_ruleset {
	struct sl_rule *rules;
	size_t n;
	/* the document says "allow_empty": true: no rules is intended */
	bool allow_empty;
};

/* A deep copy of src (the one copy of a rule set), its array with room
 * for more rules after the copied ones; 0 or -ENOMEM, *out untouched. */
int sl_ruleset_copy(const struct sl_ruleset *src, size_t room,
		    struct sl_ruleset *out);

void sl_ruleset_free(struct sl_ruleset *set);

/* The enums as rule files spell them, indexed by value. */
#define SL_PROTO_COUNT	   (SL_PROTO_ICMPV6 + 1)
#define SL_GRADE_COUNT	   (SL_GRADE_CONNS + 1)
#define SL_MODE_COUNT	   (SL_MODE_SHADOW + 1)
#define SL_ACTION_COUNT	   (SL_ACTION_DENY + 1)
#define SL_THRESHOLD_COUNT (SL_THRESH_MANUAL + 1)
#define SL_FALLBACK_COUNT  (SL_FB_FIXED + 1)
#define SL_STRATEGY_COUNT  (SL_BRK_SLOW_RATIO + 1)
#define SL_OPEN_ACTION_COUNT (SL_OPEN_DROP + 1)
extern const char *const sl_proto_names[SL_PROTO_COUNT];
extern const char *const sl_grade_names[SL_GRADE_COUNT];
extern const char *const sl_mode_names[SL_MODE_COUNT];
extern const char *const sl_action_names[SL_ACTION_COUNT];
extern const char *const sl_threshold_names[SL_THRESHOLD_COUNT];
extern const char *const sl_fallback_names[SL_FALLBACK_COUNT];
extern const char *const sl_strategy_names[SL_STRATEGY_COUNT];
extern const char *const sl_open_action_names[SL_OPEN_ACTION_COUNT];

/* The same, "?" for a value out of range. */
const char *sl_proto_str(enum sl_proto p);
const char *sl_grade_str(enum sl_grade g);
const char *sl_mode_str(enum sl_mode m);
const char *sl_action_str(enum sl_action a);
const char *sl_threshold_str(enum sl_threshold t);
const char *sl_fallback_str(enum sl_fallback f); /* "fixed" for SL_FB_FIXED */

/* "198.18.0.0/15", "2001:db8::/32" or "any". */
void sl_prefix_str(const struct sl_prefix *p, char *buf, size_t len);

/* True when prefix a contains prefix b (a's family is 0, or same family,
 * a->len <= b->len and the first a->len bits agree). */
bool sl_prefix_contains(const struct sl_prefix *a, const struct sl_prefix *b);

#endif
