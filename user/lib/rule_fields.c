/* SPDX-License-Identifier: GPL-2.0 */
/* The rule fields, declared once (rule_fields.h). */
#include <string.h>

#include "consts.h"
#include "rule_fields.h"
#include "util.h"

/* the source table, less one rule's overflow entry (compile.c checks a
 * whole set) */
#define SL_MAX_SOURCES (SLUICE_MAX_SOURCES - 1)

#define OFF(m)	offsetof(struct sl_rule, m)
#define SZ(m)	sizeof(((struct sl_rule *)0)->m)
#define NAMES(a) .names = (a), .n_names = ARRAY_SIZE(a)
#define UINT(m, l, h) .type = SL_FT_UINT, .off = OFF(m), .size = SZ(m), \
		      .lo = (l), .hi = (h)
#define ENUM(m, a) .type = SL_FT_ENUM, .off = OFF(m), NAMES(a)
#define RATIO(m) .type = SL_FT_FRACTION, .off = OFF(m), .size = SZ(m), \
		 .hi = 1, .scale = SL_PPM
#define TCP_UDP (SL_P(SL_PROTO_TCP) | SL_P(SL_PROTO_UDP))

static const char *const reject_form[] = { "reject" };

/* In the canonical order: the canonical text prints them so. */
const struct sl_field sl_rule_fields[] = {
	{ .path = "name", .type = SL_FT_NAME, .off = OFF(name),
	  .flags = SL_FF_REQUIRED, .hint = "",
	  .doc = "Unique in the file; appears in stats and logs." },
	{ .path = "match", .type = SL_FT_SECTION, .flags = SL_FF_REQUIRED,
	  .hint = " (use {} to match all traffic)",
	  .doc = "What the rule matches; an absent key matches anything, {} "
		 "all traffic.",
	  .schema = "{\"dependentSchemas\": {\"dport\": {\"required\": "
		    "[\"proto\"], \"properties\": {\"proto\": {\"enum\": "
		    "[\"tcp\", \"udp\"]}}}}, \"allOf\": [{\"if\": "
		    "{\"properties\": {\"proto\": {\"const\": \"icmp\"}}, "
		    "\"required\": [\"proto\"]}, \"then\": {\"properties\": "
		    "{\"dst\": {\"$ref\": \"#/$defs/prefix_v4\"}, \"src\": "
		    "{\"$ref\": \"#/$defs/prefix_v4\"}}}}, {\"if\": "
		    "{\"properties\": {\"proto\": {\"const\": \"icmpv6\"}}, "
		    "\"required\": [\"proto\"]}, \"then\": {\"properties\": "
		    "{\"dst\": {\"$ref\": \"#/$defs/prefix_v6\"}, \"src\": "
		    "{\"$ref\": \"#/$defs/prefix_v6\"}}}}]}" },
	{ .path = "match.proto", .depth = 1, ENUM(proto, sl_proto_names),
	  .def = SL_PROTO_ANY, .doc = "The IP protocol." },
	{ .path = "match.dport", .depth = 1, .type = SL_FT_PORTS,
	  .off = OFF(dport_lo), .flags = SL_FF_OMIT, .protos = TCP_UDP,
	  .lo = 1, .hi = 65535,
	  .doc = "A destination port, or a range \"lo-hi\"." },
	{ .path = "match.dst", .depth = 1, .type = SL_FT_PREFIX,
	  .off = OFF(dst), .flags = SL_FF_OMIT,
	  .doc = "A destination prefix (CIDR, host bits clear)." },
	{ .path = "match.src", .depth = 1, .type = SL_FT_PREFIX,
	  .off = OFF(src), .flags = SL_FF_OMIT,
	  .doc = "A source prefix (CIDR, host bits clear)." },
	{ .path = "match.vlan", .depth = 1, .type = SL_FT_VLAN,
	  .off = OFF(vlan), .flags = SL_FF_OMIT, .lo = 1, .hi = SL_MAX_VLAN,
	  .doc = "The innermost 802.1Q VLAN id, or \"untagged\" (no tag, or "
		 "a priority tag with VID 0)." },
	{ .path = "action", ENUM(action, sl_action_names),
	  .def = SL_ACTION_LIMIT, .flags = SL_FF_OMIT,
	  .doc = "limit: admit up to count; allow: pass every packet the "
		 "rule judges; deny: drop them. Both counted." },
	{ .path = "grade", ENUM(grade, sl_grade_names),
	  .flags = SL_FF_REQUIRED | SL_FF_LIMIT,
	  .hint = " (pps, bps, cps or conns)",
	  .doc = "pps: packets/s; bps: bytes/s of the Ethernet frame as XDP "
		 "sees it (no FCS); cps: TCP SYNs without ACK per second; "
		 "conns: TCP connections open at once." },
	{ .path = "count", UINT(count, 1, SL_MAX_COUNT),
	  .flags = SL_FF_REQUIRED | SL_FF_LIMIT, .hint = " (the limit per second)",
	  .doc = "The limit per second, in the unit of grade; for conns, "
		 "the connections open at once." },
	{ .path = "window", .type = SL_FT_SECTION,
	  .doc = "The window the limit holds over, and the statistics' "
		 "buckets." },
	{ .path = "window.interval_ms", .depth = 1,
	  UINT(interval_ms, 10, SL_MAX_INTERVAL_MS), .def = 1000,
	  .doc = "The limit holds over any interval this long, exactly." },
	{ .path = "window.sample_count", .depth = 1,
	  UINT(sample_count, 1, SL_MAX_SAMPLE_COUNT), .def = 2,
	  .doc = "Buckets of the statistics (at least 5 ms each); admission "
		 "does not use them." },
	{ .path = "per_source", .type = SL_FT_SECTION,
	  .flags = SL_FF_OPTIONAL | SL_FF_LIMIT, .present = OFF(per_source),
	  .doc = "Each source address, aggregated to its prefix, gets count "
		 "on its own." },
	{ .path = "per_source.prefix_v4", .depth = 1,
	  UINT(src_prefix_v4, 1, 32), .def = 32,
	  .doc = "The prefix an IPv4 source is aggregated to." },
	{ .path = "per_source.prefix_v6", .depth = 1,
	  UINT(src_prefix_v6, 1, 128), .def = 64,
	  .doc = "The prefix an IPv6 source is aggregated to." },
	{ .path = "per_source.max_sources", .depth = 1,
	  UINT(max_sources, 1, SL_MAX_SOURCES), .flags = SL_FF_REQUIRED,
	  .hint = " (it bounds the memory of the source table)",
	  .doc = "The sources tracked at once; it bounds the table's "
		 "memory." },
	{ .path = "mode", ENUM(mode, sl_mode_names), .def = SL_MODE_ENFORCE,
	  .doc = "enforce drops over the limit (deny: every packet); shadow "
		 "only counts what it would drop." },
	{ .path = "layer", UINT(layer, 0, SLUICE_LAYERS - 1),
	  .flags = SL_FF_OMIT | SL_FF_NO_ID,
	  .doc = "The layer the rule competes in; a packet must pass the "
		 "winner of every layer, lowest first." },
	{ .path = "priority", UINT(priority, 1, SL_MAX_PRIORITY),
	  .flags = SL_FF_OMIT | SL_FF_NO_ID, .present = OFF(has_priority),
	  .doc = "Higher wins among matching rules; absent counts as 0." },
	{ .path = "behavior", .type = SL_FT_SECTION, NAMES(reject_form),
	  .flags = SL_FF_LIMIT,
	  .doc = "\"reject\" (default): drop over count from the start; or "
		 "a warm_up ramp." },
	{ .path = "behavior.warm_up", .depth = 1, .type = SL_FT_SECTION,
	  .flags = SL_FF_OPTIONAL | SL_FF_REQUIRED, .present = OFF(warm_up),
	  .hint = " in a behavior object (or write \"behavior\": "
		  "\"reject\")",
	  .doc = "The threshold rises linearly from count/cold_factor to "
		 "count over period_s after the rule starts." },
	{ .path = "behavior.warm_up.period_s", .depth = 2,
	  UINT(warm_period_s, 1, SL_MAX_WARM_PERIOD_S),
	  .flags = SL_FF_REQUIRED, .hint = " (seconds to ramp up to count)",
	  .doc = "Seconds to ramp from count/cold_factor up to count." },
	{ .path = "behavior.warm_up.cold_factor", .depth = 2,
	  UINT(cold_factor, SL_MIN_COLD_FACTOR, SL_MAX_COLD_FACTOR),
	  .def = SL_DEF_COLD_FACTOR,
	  .doc = "The ramp starts at count/cold_factor; not above count." },
	{ .path = "cluster", .type = SL_FT_SECTION,
	  .flags = SL_FF_OPTIONAL | SL_FF_LIMIT,
	  .present = OFF(cluster.enabled),
	  .doc = "Cluster flow control (docs/cluster.md): the threshold is "
		 "leased from a token server.",
	  .schema = "{\"if\": {\"properties\": {\"threshold_type\": "
		    "{\"const\": \"manual\"}}, \"required\": "
		    "[\"threshold_type\"]}, \"then\": {\"required\": "
		    "[\"quotas\"]}, \"else\": {\"not\": {\"required\": "
		    "[\"quotas\"]}}}" },
	{ .path = "cluster.namespace", .depth = 1, .type = SL_FT_NAME,
	  .off = OFF(cluster.ns), .flags = SL_FF_REQUIRED,
	  .hint = " (flow ids are scoped by namespace)",
	  .doc = "Scopes flow_id on the token server; clients authenticate "
		 "per namespace." },
	{ .path = "cluster.flow_id", .depth = 1,
	  UINT(cluster.flow_id, 1, UINT32_MAX), .flags = SL_FF_REQUIRED,
	  .hint = "", .doc = "The flow's id within its namespace." },
	{ .path = "cluster.threshold_type", .depth = 1,
	  ENUM(cluster.threshold, sl_threshold_names),
	  .flags = SL_FF_REQUIRED,
	  .hint = " (global, avg_local or manual: count means different "
		  "totals)",
	  .doc = "global: count for the whole cluster, shared by demand; "
		 "avg_local: count per lease holder; manual: quotas." },
	{ .path = "cluster.quotas", .depth = 1, .type = SL_FT_QUOTAS,
	  .off = OFF(cluster.quotas), .flags = SL_FF_OMIT,
	  .hi = SL_MAX_COUNT,
	  .doc = "manual only: node id -> threshold per second; a node not "
		 "listed gets 0." },
	{ .path = "cluster.fallback", .depth = 1, .type = SL_FT_FALLBACK,
	  .off = OFF(cluster.fallback), NAMES(sl_fallback_names),
	  .def = SL_FB_SHARE, .lo = 1, .hi = SL_MAX_COUNT,
	  .doc = "What a node enforces without a valid lease: share, "
		 "last_lease, full, block, pass or {\"fixed\": N}." },
	{ .path = "breaker", .type = SL_FT_SECTION,
	  .flags = SL_FF_OPTIONAL | SL_FF_LIMIT,
	  .present = OFF(breaker.enabled), .protos = TCP_UDP,
	  .doc = "Circuit breaking: errors or slow responses among the "
		 "answers open it; requests then fail fast for open_ms.",
	  .schema = "{\"allOf\": [{\"if\": {\"properties\": "
		    "{\"strategy\": {\"const\": \"error_count\"}}}, "
		    "\"then\": {\"properties\": {\"threshold\": {\"type\": "
		    "\"integer\"}}}, \"else\": {\"properties\": "
		    "{\"threshold\": {\"maximum\": 1}}}}, {\"if\": "
		    "{\"properties\": {\"strategy\": {\"const\": "
		    "\"slow_request_ratio\"}}}, \"then\": {\"required\": "
		    "[\"max_rt_ms\"]}, \"else\": {\"not\": {\"required\": "
		    "[\"max_rt_ms\"]}}}]}" },
	{ .path = "breaker.strategy", .depth = 1,
	  ENUM(breaker.strategy, sl_strategy_names), .flags = SL_FF_REQUIRED,
	  .hint = " (error_ratio, error_count or slow_request_ratio)",
	  .doc = "error_ratio, error_count: the errors among the answers; "
		 "slow_request_ratio (tcp): the slow responses." },
	{ .path = "breaker.threshold", .depth = 1, .type = SL_FT_THRESHOLD,
	  .off = OFF(breaker.threshold), .size = SZ(breaker.threshold),
	  .flags = SL_FF_REQUIRED, .lo = 1, .hi = SL_BRK_MAX_COUNT,
	  .scale = SL_BRK_RATIO_ONE,
	  .hint = " (a ratio in (0, 1] for error_ratio and "
		  "slow_request_ratio, a number of errors for error_count)",
	  .doc = "A ratio in (0, 1], or for error_count a number of errors "
		 "1 to 1e9; past it the breaker opens." },
	{ .path = "breaker.max_rt_ms", .depth = 1,
	  UINT(breaker.max_rt_ms, 1, SL_BRK_MAX_RT_MS), .flags = SL_FF_OMIT,
	  .protos = SL_P(SL_PROTO_TCP),
	  .doc = "slow_request_ratio only: a response later than this after "
		 "its request is slow." },
	{ .path = "breaker.open_ms", .depth = 1,
	  UINT(breaker.open_ms, 1, SL_BRK_MAX_OPEN_MS),
	  .flags = SL_FF_REQUIRED,
	  .hint = " (how long the breaker stays open)",
	  .doc = "How long the breaker stays open." },
	{ .path = "breaker.min_request_amount", .depth = 1,
	  UINT(breaker.min_requests, 1, SL_BRK_MAX_COUNT),
	  .def = SL_BRK_DEF_MIN_REQ,
	  .doc = "Fewer answers in a statistics interval never open it." },
	{ .path = "breaker.stat_interval_ms", .depth = 1,
	  UINT(breaker.stat_interval_ms, SL_BRK_MIN_STAT_MS,
	       SL_BRK_MAX_STAT_MS),
	  .def = SL_BRK_DEF_STAT_MS,
	  .doc = "The interval the errors are counted over." },
	{ .path = "breaker.probes", .depth = 1,
	  UINT(breaker.probes, 1, SL_BRK_MAX_PROBES), .def = SL_BRK_DEF_PROBES,
	  .doc = "Requests let through half-open that decide whether it "
		 "closes." },
	{ .path = "breaker.open_action", .depth = 1,
	  ENUM(breaker.open_action, sl_open_action_names),
	  .def = SL_OPEN_RST, .flags = SL_FF_DEF_VARIES,
	  .doc = "rst (tcp's default) or drop (udp's, always)." },
	{ .path = "conns", .type = SL_FT_SECTION,
	  .flags = SL_FF_OPTIONAL | SL_FF_LIMIT, .present = OFF(conns),
	  .protos = SL_P(SL_PROTO_TCP), .grades = SL_G(SL_GRADE_CONNS),
	  .doc = "How a conns rule forgets a connection and refuses a SYN "
		 "over count." },
	{ .path = "conns.idle_timeout_s", .depth = 1,
	  UINT(conn_idle_s, 1, SL_MAX_CONN_IDLE_S), .def = SL_DEF_CONN_IDLE_S,
	  .doc = "A connection with no segment either way this long is "
		 "forgotten (as if it had closed)." },
	{ .path = "conns.refuse", .depth = 1,
	  ENUM(conn_refuse, sl_open_action_names), .def = SL_OPEN_RST,
	  .doc = "rst: answer a SYN over count by a RST from XDP; drop: "
		 "drop it (the client retries)." },
	{ .path = "system", .type = SL_FT_SECTION,
	  .flags = SL_FF_OPTIONAL | SL_FF_LIMIT,
	  .present = OFF(system.enabled),
	  .doc = "Adaptive protection: while a signal is past its threshold, "
		 "the threshold follows what the host serves; not with "
		 "cluster, per_source or warm_up.",
	  .schema = "{\"anyOf\": [{\"required\": [\"accept_queue\"]}, "
		    "{\"required\": [\"cpu_pressure\"]}, {\"required\": "
		    "[\"softirq\"]}, {\"required\": [\"load\"]}]}" },
	{ .path = "system.accept_queue", .depth = 1,
	  UINT(system.accept_queue, 2, SL_SYS_MAX_QUEUE), .flags = SL_FF_OMIT,
	  .protos = SL_P(SL_PROTO_TCP), .grades = SL_G(SL_GRADE_CPS),
	  .doc = "The listeners' accept queues on the rule's ports, summed, "
		 "stay below this." },
	{ .path = "system.cpu_pressure", .depth = 1,
	  RATIO(system.cpu_pressure), .flags = SL_FF_OMIT,
	  .hint = "a share of time",
	  .doc = "PSI cpu some: the share of time a task waited for a CPU." },
	{ .path = "system.softirq", .depth = 1, RATIO(system.softirq),
	  .flags = SL_FF_OMIT, .hint = "a share of time",
	  .doc = "The share of all CPUs' time spent in softirq." },
	{ .path = "system.load", .depth = 1, .type = SL_FT_FRACTION,
	  .off = OFF(system.load), .size = SZ(system.load),
	  .hi = SL_SYS_MAX_LOAD, .scale = SL_SYS_MILLI, .flags = SL_FF_OMIT,
	  .hint = "a load average per CPU",
	  .doc = "The 1-minute load average per CPU." },
	{ .path = "system.floor", .depth = 1,
	  UINT(system.floor, 1, SL_MAX_COUNT), .flags = SL_FF_DEF_VARIES,
	  .doc = "Never shed below this (per second); default count / 100, "
		 "at least 1." },
};
const size_t sl_n_rule_fields = ARRAY_SIZE(sl_rule_fields);

const char sl_rule_schema_extra[] =
	"{\"allOf\": [{\"description\": \"shadow counts what a rule would "
	"drop, and an allow rule drops nothing.\", \"if\": {\"required\": "
	"[\"action\"], \"properties\": {\"action\": {\"const\": "
	"\"allow\"}}}, \"then\": {\"properties\": {\"mode\": {\"const\": "
	"\"enforce\"}}}}], \"dependentSchemas\": {\"breaker\": {\"description\": \"A "
	"breaker watches the answers to TCP SYNs or UDP datagrams; a datagram "
	"has no RST.\", \"properties\": {\"match\": {\"required\": "
	"[\"proto\"], \"properties\": {\"proto\": {\"enum\": [\"tcp\", "
	"\"udp\"]}}}}, \"if\": {\"properties\": {\"match\": "
	"{\"properties\": {\"proto\": {\"const\": \"udp\"}}}}}, "
	"\"then\": {\"properties\": {\"breaker\": {\"properties\": "
	"{\"open_action\": {\"const\": \"drop\"}, \"strategy\": "
	"{\"enum\": [\"error_ratio\", \"error_count\"]}}}}}}}, "
	"\"not\": {\"description\": \"A cluster grant is one budget, not "
	"one per source.\", \"required\": [\"per_source\", "
	"\"cluster\"]}, \"if\": {\"properties\": {\"grade\": "
	"{\"enum\": [\"cps\", \"conns\"]}}, \"required\": [\"grade\"]}, "
	"\"then\": "
	"{\"properties\": {\"match\": {\"required\": [\"proto\"], "
	"\"properties\": {\"proto\": {\"const\": \"tcp\"}}}}}}";

const struct sl_doc_key sl_doc_keys[SL_DOC_N] = {
	[SL_DOC_RULES] = { "rules",
		"{\"type\": \"array\", \"items\": {\"$ref\": "
		"\"#/$defs/rule\"}}",
		"The rules (required), at most 4096." },
	[SL_DOC_ALLOW_EMPTY] = { "allow_empty", "{\"type\": \"boolean\"}",
		"true: an empty rules array is intended, and an agent puts it "
		"in force." },
	[SL_DOC_SCHEMA] = { "$schema", "{\"type\": \"string\"}",
		"The URI of this schema, for editors (ignored by sluice)." },
};

const char *sl_field_key(const struct sl_field *f)
{
	const char *dot = strrchr(f->path, '.');

	return dot ? dot + 1 : f->path;
}

size_t sl_field_next(const struct sl_field *tab, size_t n, size_t i)
{
	uint8_t d = tab[i].depth;

	for (i++; i < n && tab[i].depth > d; i++)
		;
	return i;
}

uint64_t sl_field_uint(const struct sl_field *f, const struct sl_rule *r)
{
	const char *p = (const char *)r + f->off;

	if (f->type == SL_FT_ENUM)
		return *(const int *)p;
	switch (f->size) {
	case 1:
		return *(const uint8_t *)p;
	case 2:
		return *(const uint16_t *)p;
	case 4:
		return *(const uint32_t *)p;
	default:
		return *(const uint64_t *)p;
	}
}

void sl_field_set_uint(const struct sl_field *f, struct sl_rule *r,
		       uint64_t v)
{
	char *p = (char *)r + f->off;

	if (f->type == SL_FT_ENUM)
		*(int *)p = v;
	else if (f->size == 1)
		*(uint8_t *)p = v;
	else if (f->size == 2)
		*(uint16_t *)p = v;
	else if (f->size == 4)
		*(uint32_t *)p = v;
	else
		*(uint64_t *)p = v;
}

bool sl_field_present(const struct sl_field *f, const struct sl_rule *r)
{
	return f->present && *(const bool *)((const char *)r + f->present);
}

/* One field of the identity: its path, then len bytes of value. */
static uint64_t id_put(uint64_t h, const struct sl_field *f, const void *v,
		       size_t len)
{
	h = sl_fnv1a(h, f->path, strlen(f->path) + 1);
	return sl_fnv1a(h, v, len);
}

/* v little-endian in 8 bytes: the same identity on every host. */
static uint64_t id_u64(uint64_t h, const struct sl_field *f, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = v >> (8 * i);
	return id_put(h, f, b, sizeof(b));
}

static uint64_t id_field(uint64_t h, const struct sl_field *f,
			 const struct sl_rule *r)
{
	const void *p = (const char *)r + f->off;
	const struct sl_prefix *pfx = p;
	const struct sl_cluster *c = &r->cluster;
	uint64_t v;

	switch (f->type) {
	case SL_FT_SECTION:
		return f->flags & SL_FF_OPTIONAL ? id_put(h, f, "", 0) : h;
	case SL_FT_NAME:
		return *(const char *)p ? id_put(h, f, p, strlen(p) + 1) : h;
	case SL_FT_ENUM:
	case SL_FT_UINT:
	case SL_FT_FRACTION:
	case SL_FT_THRESHOLD:
		v = sl_field_uint(f, r);
		return v == f->def ? h : id_u64(h, f, v);
	case SL_FT_PORTS:
		if (!r->dport_lo)
			return h;
		return id_u64(h, f, (uint64_t)r->dport_lo << 16 | r->dport_hi);
	case SL_FT_PREFIX:
		if (!pfx->family)
			return h;
		h = id_u64(h, f, (uint64_t)pfx->family << 8 | pfx->len);
		return sl_fnv1a(h, pfx->addr, sizeof(pfx->addr));
	case SL_FT_VLAN:
		return r->has_vlan ? id_u64(h, f, r->vlan) : h;
	case SL_FT_QUOTAS:
		for (uint32_t i = 0; i < c->n_quotas; i++) {
			h = id_put(h, f, c->quotas[i].node,
				   strlen(c->quotas[i].node) + 1);
			h = id_u64(h, f, c->quotas[i].count);
		}
		return h;
	case SL_FT_FALLBACK:
		if (c->fallback == (enum sl_fallback)f->def)
			return h;
		return id_u64(id_u64(h, f, c->fallback), f, c->fallback_fixed);
	}
	return h;
}

uint64_t sl_rule_identity(const struct sl_field *tab, size_t n,
			  const struct sl_rule *r)
{
	uint64_t h = SL_FNV1A_INIT;

	for (size_t i = 0; i < n;) {
		const struct sl_field *f = &tab[i];

		if ((f->flags & SL_FF_NO_ID) ||
		    ((f->flags & SL_FF_OPTIONAL) && !sl_field_present(f, r))) {
			i = sl_field_next(tab, n, i);
			continue;
		}
		h = id_field(h, f, r);
		i++;
	}
	return h ? h : 1;
}
