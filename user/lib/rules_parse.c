/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Rule files: parse with cJSON, validate every field, collect every error.
 * Each field is read as the rule field table (rule_fields.h) declares it;
 * the hooks below hold only the rules between fields. The format is
 * documented in docs/rules.md and rules/schema.json.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* the strerror_r that returns a string */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "json_text.h"
#include "rule_fields.h"
#include "rules_parse.h"
#include "rules_read.h"
#include "util.h"

#define SL_RULES_FILE_MAX   (64u << 20) /* larger is surely a mistake */
#define SL_MIN_BUCKET_MS    5

/*
 * The rule fields (rule_fields.h) as one document reads them: each
 * section's keys for get_fields(), each field's hook, the fields the
 * hooks look at. Made once per document from the table.
 */
enum {
	AT_PROTO, AT_DPORT, AT_DST, AT_SRC, AT_ACTION, AT_PERIOD, AT_COLD,
	AT_THRESH, AT_STRATEGY, AT_QUEUE, AT_PSI, AT_SOFTIRQ, AT_LOAD, AT_GRADE,
	AT_N
};
static const char *const at_paths[AT_N] = {
	[AT_ACTION] = "action",
	[AT_PROTO] = "match.proto",	[AT_DPORT] = "match.dport",
	[AT_DST] = "match.dst",		[AT_SRC] = "match.src",
	[AT_PERIOD] = "behavior.warm_up.period_s",
	[AT_COLD] = "behavior.warm_up.cold_factor",
	[AT_THRESH] = "cluster.threshold_type",
	[AT_STRATEGY] = "breaker.strategy",
	[AT_QUEUE] = "system.accept_queue", [AT_PSI] = "system.cpu_pressure",
	[AT_SOFTIRQ] = "system.softirq",	[AT_LOAD] = "system.load",
	[AT_GRADE] = "grade",
};

struct field_hook;

struct plan {
	/* each section's keys, NULL-terminated, from keys + start[s] (the
	 * rule's own: s = sl_n_rule_fields); idx[k]: the field of keys[k] */
	const char *keys[2 * SL_RULE_FIELDS_MAX + 1];
	uint8_t idx[2 * SL_RULE_FIELDS_MAX + 1];
	uint16_t start[SL_RULE_FIELDS_MAX + 1];
	const struct field_hook *hook[SL_RULE_FIELDS_MAX];
	uint8_t at[AT_N];
};

/* One rule being read: which fields were given, which are valid (given
 * and good, or absent and at their default). */
struct pctx {
	struct rule_ctx *rc;
	const struct plan *pl;
	bool given[SL_RULE_FIELDS_MAX];
	bool ok[SL_RULE_FIELDS_MAX];
};

/*
 * What a field needs beyond its type: parse replaces the reading of the
 * value (it is called absent or given, it NULL when absent); begin and
 * check run before and after a section's fields (check after a plain
 * field), for the rules between fields, in the order the errors are
 * reported.
 */
struct field_hook {
	const char *path;
	void (*parse)(struct pctx *p, size_t i, const cJSON *it,
		      struct sl_rule *r);
	/* a section's, given as an object, before its fields are read */
	void (*begin)(struct pctx *p, const cJSON *obj);
	void (*check)(struct pctx *p, struct sl_rule *r);
};

static bool at_ok(const struct pctx *p, int at)
{
	return p->ok[p->pl->at[at]];
}

static bool at_given(const struct pctx *p, int at)
{
	return p->given[p->pl->at[at]];
}

/* The enum of field at when it is valid, else -1. */
static int at_enum(const struct pctx *p, const struct sl_rule *r, int at)
{
	size_t i = p->pl->at[at];

	return p->ok[i] ? (int)sl_field_uint(&sl_rule_fields[i], r) : -1;
}

static void parse_field(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r);

/* The fields of section s (the rule's own: s = sl_n_rule_fields) in
 * obj, an object. */
static void parse_section(struct pctx *p, size_t s, const cJSON *obj,
			  struct sl_rule *r)
{
	const char *const *known = p->pl->keys + p->pl->start[s];
	const uint8_t *idx = p->pl->idx + p->pl->start[s];
	const cJSON *got[SL_MAX_FIELDS];

	get_fields(p->rc, obj, s < sl_n_rule_fields ? sl_rule_fields[s].path
						    : NULL,
		   known, got);
	if (s < sl_n_rule_fields && p->pl->hook[s] && p->pl->hook[s]->begin)
		p->pl->hook[s]->begin(p, obj);
	for (size_t k = 0; known[k]; k++)
		parse_field(p, idx[k], got[k], r);
}

/* Field i absent: its default, or "required". */
static void field_absent(struct pctx *p, size_t i, struct sl_rule *r)
{
	const struct sl_field *f = &sl_rule_fields[i];

	if (f->flags & SL_FF_REQUIRED) {
		rule_err(p->rc, f->path, "required%s", f->hint);
		return;
	}
	p->ok[i] = true;
	/* an absent optional section leaves its members zero */
	if (f->type == SL_FT_SECTION && !(f->flags & SL_FF_OPTIONAL)) {
		for (size_t k = p->pl->start[i]; p->pl->keys[k]; k++)
			parse_field(p, p->pl->idx[k], NULL, r);
	} else if (f->type == SL_FT_UINT || f->type == SL_FT_ENUM ||
		   f->type == SL_FT_FRACTION) {
		sl_field_set_uint(f, r, f->def);
	}
}

/* breaker.threshold: a ratio or a number of errors, by strategy. */
static bool parse_threshold(struct pctx *p, const struct sl_field *f,
			    const cJSON *it, struct sl_rule *r)
{
	int e = at_enum(p, r, AT_STRATEGY);
	uint64_t v;

	if (e == SL_BRK_ERROR_RATIO)
		return !get_ratio(p->rc, it, f->path, "an error ratio",
				  &r->breaker.threshold);
	if (e == SL_BRK_SLOW_RATIO)
		return !get_ratio(p->rc, it, f->path, "a slow ratio",
				  &r->breaker.threshold);
	if (e != SL_BRK_ERROR_COUNT || get_uint(p->rc, it, f->path, f->lo,
						f->hi, &v))
		return false;
	r->breaker.threshold = v;
	return true;
}

/* Field i given as it: read by its type. */
static bool field_given(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r)
{
	const struct sl_field *f = &sl_rule_fields[i];
	struct rule_ctx *rc = p->rc;
	char *at = (char *)r + f->off;
	uint32_t frac;
	uint64_t v;
	int e;

	switch (f->type) {
	case SL_FT_SECTION:
		if (!get_object(rc, it, f->path))
			return false;
		if (f->present)
			*(bool *)((char *)r + f->present) = true;
		parse_section(p, i, it, r);
		return true;
	case SL_FT_NAME:
		get_name(rc, it, f->path, at);
		return *at;
	case SL_FT_ENUM:
		e = get_enum(rc, it, f->path, f->names, f->n_names);
		if (e >= 0)
			sl_field_set_uint(f, r, e);
		return e >= 0;
	case SL_FT_UINT:
		if (get_uint(rc, it, f->path, f->lo, f->hi, &v))
			return false;
		sl_field_set_uint(f, r, v);
		if (f->present)
			*(bool *)((char *)r + f->present) = true;
		return true;
	case SL_FT_FRACTION:
		if (get_fraction(rc, it, f->path, f->hint, f->hi, f->scale,
				 &frac))
			return false;
		sl_field_set_uint(f, r, frac);
		return true;
	case SL_FT_PORTS:
		return !parse_dport(rc, it, r);
	case SL_FT_PREFIX:
		return !parse_prefix(rc, it, f->path, (struct sl_prefix *)at);
	case SL_FT_VLAN:
		return !parse_vlan(rc, it, r);
	case SL_FT_THRESHOLD:
		return parse_threshold(p, f, it, r);
	case SL_FT_QUOTAS:
		return !parse_quotas(rc, f, it, &r->cluster);
	case SL_FT_FALLBACK:
		return !parse_fallback(rc, f, it, &r->cluster);
	}
	return false;
}

/*
 * An allow or deny rule has no limit: a field of one (SL_FF_LIMIT) is
 * refused, and left zero. With an invalid action they are not read.
 */
static bool limit_field_skipped(struct pctx *p, size_t i, const cJSON *it,
				const struct sl_rule *r)
{
	const struct sl_field *f = &sl_rule_fields[i];
	bool action_ok = at_ok(p, AT_ACTION);

	if (!(f->flags & SL_FF_LIMIT) ||
	    (action_ok && r->action == SL_ACTION_LIMIT))
		return false;
	if (it && action_ok)
		rule_err(p->rc, f->path,
			 "only with action \"limit\" (this rule's action is "
			 "\"%s\": it %s every packet it judges)",
			 sl_action_str(r->action),
			 r->action == SL_ACTION_ALLOW ? "passes" : "drops");
	p->ok[i] = !it;
	return true;
}

static void parse_field(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r)
{
	const struct field_hook *h = p->pl->hook[i];

	p->given[i] = it;
	if (limit_field_skipped(p, i, it, r))
		return;
	if (h && h->parse)
		h->parse(p, i, it, r);
	else if (!it)
		field_absent(p, i, r);
	else
		p->ok[i] = field_given(p, i, it, r);
	if (h && h->check)
		h->check(p, r);
}

static const char *family_str(uint8_t family)
{
	return family == AF_INET ? "IPv4" : "IPv6";
}

static void check_dport(struct pctx *p, struct sl_rule *r)
{
	if (at_given(p, AT_DPORT) && at_ok(p, AT_DPORT) && at_ok(p, AT_PROTO) &&
	    r->proto != SL_PROTO_TCP && r->proto != SL_PROTO_UDP)
		rule_err(p->rc, "match.dport",
			 "only allowed with proto tcp or udp (proto is '%s')",
			 sl_proto_str(r->proto));
}

/* One prefix against the family that match.proto implies. */
static void check_icmp_family(struct pctx *p, int at, const char *field,
			      const struct sl_prefix *pfx,
			      const struct sl_rule *r)
{
	if (!at_given(p, at) || !at_ok(p, at))
		return;
	if (r->proto == SL_PROTO_ICMP && pfx->family == AF_INET6)
		rule_err(p->rc, field,
			 "proto icmp is IPv4 only; use icmpv6 for an IPv6 "
			 "prefix");
	else if (r->proto == SL_PROTO_ICMPV6 && pfx->family == AF_INET)
		rule_err(p->rc, field,
			 "proto icmpv6 is IPv6 only; use icmp for an IPv4 "
			 "prefix");
}

static void check_match(struct pctx *p, struct sl_rule *r)
{
	if (at_given(p, AT_DST) && at_ok(p, AT_DST) && at_given(p, AT_SRC) &&
	    at_ok(p, AT_SRC) && r->dst.family != r->src.family)
		rule_err(p->rc, "match.src",
			 "is %s but match.dst is %s; no packet can match both",
			 family_str(r->src.family), family_str(r->dst.family));
	if (!at_ok(p, AT_PROTO))
		return;
	check_icmp_family(p, AT_DST, "match.dst", &r->dst, r);
	check_icmp_family(p, AT_SRC, "match.src", &r->src, r);
}

static void check_grade(struct pctx *p, struct sl_rule *r)
{
	if ((r->grade == SL_GRADE_CPS || r->grade == SL_GRADE_CONNS) &&
	    at_ok(p, AT_PROTO) && r->proto != SL_PROTO_TCP)
		rule_err(p->rc, "grade",
			 "%s counts TCP %s and needs match.proto \"tcp\" "
			 "(proto is '%s')",
			 sl_grade_str(r->grade),
			 r->grade == SL_GRADE_CPS ? "SYNs" : "connections",
			 sl_proto_str(r->proto));
}

/*
 * A conns rule counts connections open at once: no ramp, no lease of a
 * rate, no breaker or controller on its threshold (its window only
 * buckets its statistics). Its conns section is its own, at its
 * defaults when absent.
 */
static void check_conns(struct pctx *p, struct sl_rule *r)
{
	struct rule_ctx *rc = p->rc;
	static const struct {
		const char *what;
		size_t off;
	} not_with[] = {
		{ "behavior.warm_up", offsetof(struct sl_rule, warm_up) },
		{ "cluster", offsetof(struct sl_rule, cluster.enabled) },
		{ "breaker", offsetof(struct sl_rule, breaker.enabled) },
		{ "system", offsetof(struct sl_rule, system.enabled) },
	};

	if (!at_ok(p, AT_GRADE) || r->action != SL_ACTION_LIMIT)
		return;
	if (r->grade != SL_GRADE_CONNS) {
		if (r->conns)
			rule_err(rc, "conns",
				 "only with grade \"conns\" (this rule's "
				 "grade is \"%s\")",
				 sl_grade_str(r->grade));
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(not_with); i++)
		if (*(bool *)((char *)r + not_with[i].off))
			rule_err(rc, not_with[i].what,
				 "cannot be combined with grade \"conns\" "
				 "(it counts connections open at once, not a "
				 "rate)");
	if (!r->conns) {
		r->conn_idle_s = SL_DEF_CONN_IDLE_S;
		r->conn_refuse = SL_OPEN_RST;
	}
}

/* shadow counts what a rule would drop */
static void check_mode(struct pctx *p, struct sl_rule *r)
{
	if (r->mode == SL_MODE_SHADOW && r->action == SL_ACTION_ALLOW &&
	    at_ok(p, AT_ACTION))
		rule_err(p->rc, "mode",
			 "shadow counts what a rule would drop, and an allow "
			 "rule drops nothing");
}

static void check_window(struct pctx *p, struct sl_rule *r)
{
	if (!r->interval_ms || !r->sample_count)
		return; /* one of them is wrong, and said so */
	if (r->interval_ms % r->sample_count) {
		rule_err(p->rc, "window",
			 "interval_ms %u does not divide evenly into "
			 "sample_count %u buckets",
			 r->interval_ms, r->sample_count);
		return;
	}
	if (r->interval_ms / r->sample_count < SL_MIN_BUCKET_MS)
		rule_err(p->rc, "window",
			 "buckets of interval_ms/sample_count = %u ms are "
			 "shorter than the minimum %u ms",
			 r->interval_ms / r->sample_count, SL_MIN_BUCKET_MS);
}

/*
 * "reject", or {"warm_up": {"period_s": P, "cold_factor": F}}. The ramp
 * itself (count / F up to count over P seconds) is the data plane's.
 */
static void parse_behavior(struct pctx *p, size_t i, const cJSON *b,
			   struct sl_rule *r)
{
	struct rule_ctx *rc = p->rc;
	char shown[SL_KEY_SHOW_MAX * 4 + 8];

	if (!b || (cJSON_IsString(b) && b->valuestring &&
		   !strcmp(b->valuestring, "reject"))) {
		p->ok[i] = true;
	} else if (cJSON_IsString(b) && b->valuestring) {
		show(b->valuestring, shown, sizeof(shown));
		if (!strcmp(b->valuestring, "warm_up"))
			rule_err(rc, "behavior",
				 "warm_up needs its parameters: "
				 "{\"warm_up\": {\"period_s\": 10}}");
		else
			rule_err(rc, "behavior",
				 "must be \"reject\" or {\"warm_up\": "
				 "{...}}; got '%s'",
				 shown);
	} else if (!cJSON_IsObject(b)) {
		rule_err(rc, "behavior",
			 "must be \"reject\" or an object {\"warm_up\": "
			 "{...}}, got %s",
			 json_type(b));
	} else {
		parse_section(p, i, b, r);
	}
	/* a ramp is all of it or none */
	if (r->warm_up && (!at_ok(p, AT_PERIOD) || !at_ok(p, AT_COLD))) {
		r->warm_up = false;
		r->warm_period_s = 0;
		r->cold_factor = 0;
	}
	/* A ramp starting at count / cold_factor = 0 would drop everything. */
	if (r->warm_up && r->count && r->count < r->cold_factor)
		rule_err(rc, "behavior.warm_up.cold_factor",
			 "%u is larger than count %llu: the ramp would start "
			 "at a threshold of 0; lower cold_factor or raise "
			 "count",
			 r->cold_factor, (unsigned long long) r->count);
}

/* cluster.quotas: required with threshold_type manual, else refused. */
static void parse_quotas_field(struct pctx *p, size_t i, const cJSON *it,
			       struct sl_rule *r)
{
	int e = at_enum(p, r, AT_THRESH);

	if (e == SL_THRESH_MANUAL && !it)
		rule_err(p->rc, "cluster.quotas",
			 "required with threshold_type manual");
	else if (e >= 0 && e != SL_THRESH_MANUAL && it)
		rule_err(p->rc, "cluster.quotas",
			 "only with threshold_type manual (this rule is %s)",
			 sl_threshold_names[e]);
	else
		p->ok[i] = !it || field_given(p, i, it, r);
}

static void check_strategy(struct pctx *p, struct sl_rule *r)
{
	if (at_enum(p, r, AT_STRATEGY) == SL_BRK_SLOW_RATIO &&
	    r->proto == SL_PROTO_UDP)
		rule_err(p->rc, "breaker.strategy",
			 "slow_request_ratio times TCP responses and needs "
			 "match.proto \"tcp\" (proto is 'udp')");
}

/* breaker.max_rt_ms: required with slow_request_ratio, else refused. */
static void parse_max_rt(struct pctx *p, size_t i, const cJSON *it,
			 struct sl_rule *r)
{
	int e = at_enum(p, r, AT_STRATEGY);

	if (!it && e == SL_BRK_SLOW_RATIO)
		rule_err(p->rc, "breaker.max_rt_ms",
			 "required with slow_request_ratio (the response "
			 "time in ms above which a response is slow)");
	else if (it && e >= 0 && e != SL_BRK_SLOW_RATIO)
		rule_err(p->rc, "breaker.max_rt_ms",
			 "only with strategy slow_request_ratio (strategy "
			 "is '%s')", sl_strategy_names[e]);
	else
		p->ok[i] = !it || field_given(p, i, it, r);
}

/* breaker.open_action: a datagram has no RST, so udp's is drop. */
static void parse_open_action(struct pctx *p, size_t i, const cJSON *it,
			      struct sl_rule *r)
{
	struct sl_breaker *b = &r->breaker;
	int e;

	b->open_action = r->proto == SL_PROTO_UDP ? SL_OPEN_DROP : SL_OPEN_RST;
	p->ok[i] = true;
	if (!it)
		return;
	e = get_enum(p->rc, it, "breaker.open_action", sl_open_action_names,
		     ARRAY_SIZE(sl_open_action_names));
	if (e == SL_OPEN_RST && r->proto == SL_PROTO_UDP)
		rule_err(p->rc, "breaker.open_action",
			 "'rst' answers TCP SYNs; a udp rule's breaker drops "
			 "datagrams while open (\"drop\", the default for "
			 "udp)");
	else if (e >= 0)
		b->open_action = e;
	p->ok[i] = e >= 0;
}

/* its signals are the answers to SYNs or datagrams */
static void check_breaker(struct pctx *p, struct sl_rule *r)
{
	if (r->breaker.enabled && at_ok(p, AT_PROTO) &&
	    r->proto != SL_PROTO_TCP && r->proto != SL_PROTO_UDP)
		rule_err(p->rc, "breaker",
			 "watches the answers to TCP SYNs or UDP datagrams "
			 "and needs match.proto \"tcp\" or \"udp\" (proto "
			 "is '%s')",
			 sl_proto_str(r->proto));
}

/* system.floor: count / 100 (at least 1) when absent. */
static void parse_floor(struct pctx *p, size_t i, const cJSON *it,
			struct sl_rule *r)
{
	if (it)
		p->ok[i] = field_given(p, i, it, r);
	else
		r->system.floor = r->count / SL_SYS_FLOOR_DIV ?: 1;
}

/* A system object names at least one signal. */
static void system_signals(struct pctx *p, const cJSON *obj)
{
	static const int sig[] = { AT_QUEUE, AT_PSI, AT_SOFTIRQ, AT_LOAD };

	for (size_t k = 0; k < ARRAY_SIZE(sig); k++) {
		const struct sl_field *f = &sl_rule_fields[p->pl->at[sig[k]]];

		if (cJSON_GetObjectItemCaseSensitive(obj, sl_field_key(f)))
			return;
	}
	rule_err(p->rc, "system",
		 "needs a signal: accept_queue, cpu_pressure, softirq or "
		 "load");
}

/* What a system rule cannot be combined with, once its fields are
 * read. */
static void check_system(struct pctx *p, struct sl_rule *r)
{
	const struct sl_system *y = &r->system;
	struct rule_ctx *rc = p->rc;

	if (!y->enabled)
		return;
	if (y->accept_queue && at_ok(p, AT_PROTO) &&
	    (r->proto != SL_PROTO_TCP || r->grade != SL_GRADE_CPS))
		rule_err(rc, "system.accept_queue",
			 "watches the listeners the rule's SYNs go to and "
			 "needs match.proto \"tcp\" and grade \"cps\"");
	if (y->accept_queue && !r->dport_lo)
		rule_err(rc, "system.accept_queue",
			 "needs match.dport (the listeners' ports)");
	if (y->floor && r->count && y->floor > r->count)
		rule_err(rc, "system.floor",
			 "%llu is above count %llu (the threshold moves "
			 "between floor and count)",
			 (unsigned long long) y->floor,
			 (unsigned long long) r->count);
	/* each of these writes the threshold too */
	if (r->cluster.enabled)
		rule_err(rc, "system",
			 "cannot be combined with cluster (the threshold "
			 "is the cluster's grant)");
	if (r->warm_up)
		rule_err(rc, "system",
			 "cannot be combined with behavior.warm_up");
	if (r->per_source)
		rule_err(rc, "system",
			 "cannot be combined with per_source (the "
			 "controller sheds the rule's whole traffic)");
}

static const struct field_hook hooks[] = {
	{ "match.dport", .check = check_dport },
	{ "match", .check = check_match },
	{ "grade", .check = check_grade },
	{ "window", .check = check_window },
	{ "mode", .check = check_mode },
	{ "behavior", .parse = parse_behavior },
	{ "cluster.quotas", .parse = parse_quotas_field },
	{ "breaker.strategy", .check = check_strategy },
	{ "breaker.max_rt_ms", .parse = parse_max_rt },
	{ "breaker.open_action", .parse = parse_open_action },
	{ "breaker", .check = check_breaker },
	{ "system.floor", .parse = parse_floor },
	{ "system", .begin = system_signals, .check = check_system },
};

/* The plan of sl_rule_fields (struct plan). */
static void make_plan(struct plan *pl)
{
	const struct sl_field *tab = sl_rule_fields;
	size_t n = sl_n_rule_fields, k = 0;

	memset(pl, 0, sizeof(*pl));
	for (size_t s = 0; s <= n; s++) {
		size_t i = s == n ? 0 : s + 1;
		size_t end = s == n ? n : sl_field_next(tab, n, s);

		if (s < n && tab[s].type != SL_FT_SECTION)
			continue;
		pl->start[s] = k;
		for (; i < end; i = sl_field_next(tab, n, i)) {
			pl->idx[k] = i;
			pl->keys[k++] = sl_field_key(&tab[i]);
		}
		pl->keys[k++] = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t h = 0; h < ARRAY_SIZE(hooks); h++)
			if (!strcmp(hooks[h].path, tab[i].path))
				pl->hook[i] = &hooks[h];
		for (int a = 0; a < AT_N; a++)
			if (!strcmp(at_paths[a], tab[i].path))
				pl->at[a] = i;
	}
}

static void parse_rule(struct rule_ctx *rc, const struct plan *pl,
		       const cJSON *obj, struct sl_rule *r)
{
	struct pctx p = { .rc = rc, .pl = pl };

	if (!cJSON_IsObject(obj)) {
		rule_err(rc, NULL, "must be an object, got %s", json_type(obj));
		return;
	}
	parse_section(&p, sl_n_rule_fields, obj, r);
	check_conns(&p, r);
	if (r->cluster.enabled && r->per_source)
		rule_err(rc, "cluster",
			 "cannot be combined with per_source (a cluster "
			 "grant is one budget, not one per source)");
	if (r->cluster.threshold == SL_THRESH_MANUAL && r->count) {
		uint64_t sum = 0;

		for (uint32_t i = 0; i < r->cluster.n_quotas; i++)
			sum += r->cluster.quotas[i].count;
		if (sum > r->count)
			rule_err(rc, "cluster.quotas",
				 "sum to %llu, more than count %llu (the "
				 "cluster bound)",
				 (unsigned long long) sum,
				 (unsigned long long) r->count);
	}
}

/*
 * names[i] = the valid name of the n rules' rule i or NULL; first_of[i] =
 * index of the first rule named like rule i, or i itself. A hash table
 * keeps this O(n) for SL_MAX_RULES rules.
 */
static int find_duplicates(const cJSON *rules, size_t n, const char **names,
			   size_t *first_of)
{
	struct sl_index ix;
	const cJSON *it;
	size_t i = 0;

	if (sl_index_init(&ix, n))
		return -ENOMEM;
	cJSON_ArrayForEach(it, rules)
	{
		const char *name = rule_name(it);
		size_t cursor = 0;
		uint64_t h;
		int64_t j;

		names[i] = name;
		first_of[i] = i;
		if (name) {
			h = sl_fnv1a_str(name);
			while ((j = sl_index_next(&ix, h, &cursor)) >= 0 &&
			       strcmp(names[j], name))
				;
			if (j >= 0)
				first_of[i] = j;
			else if (sl_index_add(&ix, h, i)) {
				sl_index_free(&ix);
				return -ENOMEM;
			}
		}
		i++;
	}
	sl_index_free(&ix);
	return 0;
}

static void syntax_error(struct errbuf *eb, const char *json, size_t len,
			 const char *at)
{
	char shown[SL_KEY_SHOW_MAX * 4 + 8];
	struct sl_json_error e;

	sl_json_locate(json, len, at, &e);
	show(e.near, shown, sizeof(shown));
	if (e.off >= len)
		eb_add(eb, "document: JSON syntax error at line %u, column %u: "
			   "unexpected end of input; the text is cut off "
			   "after %zu bytes",
		       e.line, e.col, len);
	else if (e.fault == SL_JSON_CUT)
		eb_add(eb, "document: JSON syntax error at line %u, column %u "
			   "near '%s': the text ends inside the document, "
			   "cut off after %zu bytes",
		       e.line, e.col, shown, len);
	else if (e.fault == SL_JSON_DEEP)
		eb_add(eb, "document: JSON syntax error at line %u, column %u: "
			   "arrays and objects nested deeper than %d, the "
			   "parser's limit",
		       e.line, e.col, CJSON_NESTING_LIMIT);
	else if (e.fault == SL_JSON_TRAILING)
		eb_add(eb, "document: JSON syntax error at line %u, column %u "
			   "near '%s': data after the end of the document",
		       e.line, e.col, shown);
	else
		eb_add(eb, "document: JSON syntax error at line %u, column %u "
			   "near '%s'",
		       e.line, e.col, shown);
}

static int parse_doc(const cJSON *doc, struct sl_rule **rules_out,
		     size_t *n_out, bool *allow_empty, struct errbuf *eb)
{
	/* "$schema": editors find rules/schema.json by it; not kept */
	const char *const known[] = {
		[SL_DOC_RULES] = sl_doc_keys[SL_DOC_RULES].key,
		[SL_DOC_ALLOW_EMPTY] = sl_doc_keys[SL_DOC_ALLOW_EMPTY].key,
		[SL_DOC_SCHEMA] = sl_doc_keys[SL_DOC_SCHEMA].key,
		[SL_DOC_N] = NULL };
	struct rule_ctx rc = {.eb = eb, .label = "document"};
	struct sl_rule *rules = NULL;
	struct plan plan;
	const char **names = NULL;
	size_t *first_of = NULL;
	const cJSON *got[SL_DOC_N], *arr, *it;
	size_t n, i;

	if (!cJSON_IsObject(doc)) {
		eb_add(eb,
		       "document: must be an object {\"rules\": [...]}, got %s",
		       json_type(doc));
		return -EINVAL;
	}
	get_fields(&rc, doc, NULL, known, got);
	arr = got[SL_DOC_RULES];
	if (got[SL_DOC_ALLOW_EMPTY] && !cJSON_IsBool(got[SL_DOC_ALLOW_EMPTY]))
		rule_err(&rc, "allow_empty", "must be true or false, got %s",
			 json_type(got[SL_DOC_ALLOW_EMPTY]));
	*allow_empty = cJSON_IsTrue(got[SL_DOC_ALLOW_EMPTY]);
	if (got[SL_DOC_SCHEMA] && !cJSON_IsString(got[SL_DOC_SCHEMA]))
		rule_err(&rc, "$schema", "must be a string (the schema's URI), "
			 "got %s", json_type(got[SL_DOC_SCHEMA]));
	if (!arr) {
		rule_err(&rc, "rules", "required");
		return -EINVAL;
	}
	if (!cJSON_IsArray(arr)) {
		rule_err(&rc, "rules", "must be an array, got %s",
			 json_type(arr));
		return -EINVAL;
	}
	n = cJSON_GetArraySize(arr);
	if (n > SL_MAX_RULES) {
		rule_err(&rc, "rules", "%zu rules, at most %d are allowed", n,
			 SL_MAX_RULES);
		return -EINVAL;
	}
	if (n) {
		rules = calloc(n, sizeof(*rules));
		names = calloc(n, sizeof(*names));
		first_of = calloc(n, sizeof(*first_of));
		if (!rules || !names || !first_of ||
		    find_duplicates(arr, n, names, first_of)) {
			free(rules);
			free(names);
			free(first_of);
			return -ENOMEM;
		}
	}
	make_plan(&plan);
	i = 0;
	cJSON_ArrayForEach(it, arr)
	{
		struct rule_ctx r = {.eb = eb, .name = names[i], .num = i + 1};

		rules[i].file_index = i;
		parse_rule(&r, &plan, it, &rules[i]);
		if (first_of[i] != i)
			rule_err(&r, "name",
				 "duplicate name: rules #%zu and #%zu are both "
				 "named '%s'",
				 first_of[i] + 1, i + 1, names[i]);
		i++;
	}
	free(names);
	free(first_of);
	if (eb_total(eb)) {
		for (i = 0; i < n; i++)
			sl_rule_release(&rules[i]);
		free(rules);
		return -EINVAL;
	}
	*rules_out = rules;
	*n_out = n;
	return 0;
}

int sl_rules_parse(const char *json, size_t len, struct sl_ruleset *out,
		   char *err, size_t errlen)
{
	struct errbuf eb = {.buf = err, .len = errlen};
	const char *end = NULL;
	cJSON *doc;
	char *copy;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!json || !out)
		return -EINVAL;
	if (memchr(json, '\0', len)) {
		eb_add(&eb, "document: contains a NUL byte; not a JSON text");
		return -EINVAL;
	}
	/* cJSON rejects trailing garbage only when it sees the terminator. */
	copy = malloc(len + 1);
	if (!copy) {
		eb_add(&eb, "document: out of memory");
		return -ENOMEM;
	}
	memcpy(copy, json, len);
	copy[len] = '\0';
	doc = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
	if (!doc) {
		syntax_error(&eb, copy, len, end);
		free(copy);
		return -EINVAL;
	}
	free(copy);
	ret = sl_rules_from_cjson(doc, out, err, errlen);
	cJSON_Delete(doc);
	return ret;
}

int sl_rules_from_cjson(const cJSON *doc, struct sl_ruleset *out, char *err,
			size_t errlen)
{
	struct errbuf eb = {.buf = err, .len = errlen};
	struct sl_rule *rules = NULL;
	bool allow_empty = false;
	size_t n = 0;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!out)
		return -EINVAL;
	if (!doc) {
		eb_add(&eb, "document: missing");
		return -EINVAL;
	}
	ret = parse_doc(doc, &rules, &n, &allow_empty, &eb);
	if (ret == -ENOMEM)
		eb_add(&eb, "document: out of memory");
	eb_finish(&eb);
	if (ret)
		return ret;
	out->rules = rules;
	out->n = n;
	out->allow_empty = allow_empty;
	return 0;
}

int sl_rules_from_array(const cJSON *arr, struct sl_ruleset *out, char *err,
			size_t errlen)
{
	cJSON *wrap = cJSON_CreateObject();
	int ret;

	/* A reference: the wrapper borrows arr's items, never frees them. */
	if (!wrap ||
	    !cJSON_AddItemReferenceToObject(wrap, "rules", (cJSON *)arr)) {
		cJSON_Delete(wrap);
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = sl_rules_from_cjson(wrap, out, err, errlen);
	cJSON_Delete(wrap);
	return ret;
}

static void path_err(char *err, size_t errlen, const char *path,
		     const char *what, int e)
{
	char buf[128];

	if (!err || !errlen)
		return;
	if (e)
		snprintf(err, errlen, "%s: %s: %s", path, what,
			 strerror_r(e, buf, sizeof(buf)));
	else
		snprintf(err, errlen, "%s: %s", path, what);
}

int sl_rules_read_file(const char *path, char **text, size_t *len,
		       char *err, size_t errlen)
{
	int fd, ret;

	if (err && errlen)
		err[0] = '\0';
	if (!strcmp(path, "-"))
		path = "<stdin>";
	fd = strcmp(path, "<stdin>") ? open(path, O_RDONLY | O_CLOEXEC)
				     : dup(STDIN_FILENO);
	if (fd < 0) {
		ret = -errno;
		path_err(err, errlen, path, "cannot open", -ret);
		return ret;
	}
	ret = sl_read_fd(fd, SL_RULES_FILE_MAX, text, len);
	close(fd);
	if (ret == -EFBIG)
		path_err(err, errlen, path,
			 "larger than 64 MiB; refusing to parse", 0);
	else if (ret)
		path_err(err, errlen, path, "cannot read", -ret);
	return ret;
}

int sl_rules_load_file(const char *path, struct sl_ruleset *out, char *err,
		       size_t errlen)
{
	char *buf = NULL;
	size_t used = 0;
	int ret;

	ret = sl_rules_read_file(path, &buf, &used, err, errlen);
	if (ret)
		return ret;
	ret = sl_rules_parse(buf, used, out, err, errlen);
	free(buf);
	return ret;
}
