/* SPDX-License-Identifier: GPL-2.0 */
/* The canonical form of rules, as text (rules_json.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_json.h"
#include "util.h"

/* A JSON string as cJSON prints it. */
static void text_str(struct sl_text *t, const char *s)
{
	sl_text_put(t, "\"", 1);
	for (;;) {
		const char *q = s;
		char esc[8];

		while (*q && *q != '"' && *q != '\\' &&
		       (unsigned char)*q >= 0x20)
			q++;
		sl_text_put(t, s, q - s);
		if (!*q)
			break;
		switch (*q) {
		case '\b':
			strcpy(esc, "\\b");
			break;
		case '\f':
			strcpy(esc, "\\f");
			break;
		case '\n':
			strcpy(esc, "\\n");
			break;
		case '\r':
			strcpy(esc, "\\r");
			break;
		case '\t':
			strcpy(esc, "\\t");
			break;
		case '"':
		case '\\':
			snprintf(esc, sizeof(esc), "\\%c", *q);
			break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)*q);
		}
		sl_text_put(t, esc, strlen(esc));
		s = q + 1;
	}
	sl_text_put(t, "\"", 1);
}

static void text_key_str(struct sl_text *t, const char *key, const char *v)
{
	sl_text_put(t, key, strlen(key));
	text_str(t, v);
}

/* The "cluster" object, when the rule has one. */
static void cluster_text(struct sl_text *t, const struct sl_cluster *c)
{
	if (!c->enabled)
		return;
	text_key_str(t, ",\"cluster\":{\"namespace\":", c->ns);
	sl_text_u64(t, ",\"flow_id\":", c->flow_id);
	text_key_str(t, ",\"threshold_type\":", sl_threshold_names[c->threshold]);
	if (c->threshold == SL_THRESH_MANUAL) {
		sl_text_put(t, ",\"quotas\":{", 11);
		for (uint32_t i = 0; i < c->n_quotas; i++) {
			if (i)
				sl_text_put(t, ",", 1);
			text_str(t, c->quotas[i].node);
			sl_text_u64(t, ":", c->quotas[i].count);
		}
		sl_text_put(t, "}", 1);
	}
	if (c->fallback == SL_FB_FIXED) {
		sl_text_u64(t, ",\"fallback\":{\"fixed\":", c->fallback_fixed);
		sl_text_put(t, "}", 1);
	} else {
		text_key_str(t, ",\"fallback\":", sl_fallback_names[c->fallback]);
	}
	sl_text_put(t, "}", 1);
}

/* A share or a load kept as a multiple of 1/scale, as a JSON number. */
static void text_fraction(struct sl_text *t, const char *key, uint32_t v,
			  uint32_t scale)
{
	char num[48];
	int n = snprintf(num, sizeof(num), "%s%.6g", key, (double) v / scale);

	sl_text_put(t, num, n);
}

/* The canonical text of r (rules_json.h), with or without its priority;
 * test_rules checks it against a cJSON tree printed by cJSON. */
static void breaker_text(struct sl_text *t, const struct sl_breaker *b)
{
	if (!b->enabled)
		return;
	text_key_str(t, ",\"breaker\":{\"strategy\":",
		     sl_strategy_names[b->strategy]);
	if (b->strategy == SL_BRK_ERROR_COUNT) {
		sl_text_u64(t, ",\"threshold\":", b->threshold);
	} else {
		text_fraction(t, ",\"threshold\":", b->threshold,
			      SL_BRK_RATIO_ONE);
	}
	if (b->strategy == SL_BRK_SLOW_RATIO)
		sl_text_u64(t, ",\"max_rt_ms\":", b->max_rt_ms);
	sl_text_u64(t, ",\"open_ms\":", b->open_ms);
	sl_text_u64(t, ",\"min_request_amount\":", b->min_requests);
	sl_text_u64(t, ",\"stat_interval_ms\":", b->stat_interval_ms);
	sl_text_u64(t, ",\"probes\":", b->probes);
	text_key_str(t, ",\"open_action\":",
		     sl_open_action_names[b->open_action]);
	sl_text_put(t, "}", 1);
}

static void system_text(struct sl_text *t, const struct sl_system *y)
{
	const char *sep = "";

	if (!y->enabled)
		return;
	sl_text_put(t, ",\"system\":{", 11);
	if (y->accept_queue) {
		sl_text_u64(t, "\"accept_queue\":", y->accept_queue);
		sep = ",";
	}
	if (y->cpu_pressure) {
		sl_text_put(t, sep, strlen(sep));
		text_fraction(t, "\"cpu_pressure\":", y->cpu_pressure, SL_PPM);
		sep = ",";
	}
	if (y->softirq) {
		sl_text_put(t, sep, strlen(sep));
		text_fraction(t, "\"softirq\":", y->softirq, SL_PPM);
		sep = ",";
	}
	if (y->load) {
		sl_text_put(t, sep, strlen(sep));
		text_fraction(t, "\"load\":", y->load, SL_SYS_MILLI);
	}
	sl_text_u64(t, ",\"floor\":", y->floor);
	sl_text_put(t, "}", 1);
}

static void rule_text(struct sl_text *t, const struct sl_rule *r,
		      bool with_priority)
{
	char buf[INET6_ADDRSTRLEN + 8];

	text_key_str(t, "{\"name\":", r->name);
	text_key_str(t, ",\"match\":{\"proto\":", sl_proto_str(r->proto));
	if (r->dport_lo && r->dport_lo == r->dport_hi) {
		sl_text_u64(t, ",\"dport\":", r->dport_lo);
	} else if (r->dport_lo) {
		sl_text_u64(t, ",\"dport\":\"", r->dport_lo);
		sl_text_u64(t, "-", r->dport_hi);
		sl_text_put(t, "\"", 1);
	}
	if (r->dst.family) {
		sl_prefix_str(&r->dst, buf, sizeof(buf));
		text_key_str(t, ",\"dst\":", buf);
	}
	if (r->src.family) {
		sl_prefix_str(&r->src, buf, sizeof(buf));
		text_key_str(t, ",\"src\":", buf);
	}
	if (r->has_vlan && r->vlan)
		sl_text_u64(t, ",\"vlan\":", r->vlan);
	else if (r->has_vlan)
		text_key_str(t, ",\"vlan\":", "untagged");
	text_key_str(t, "},\"grade\":", sl_grade_str(r->grade));
	sl_text_u64(t, ",\"count\":", r->count);
	sl_text_u64(t, ",\"window\":{\"interval_ms\":", r->interval_ms);
	sl_text_u64(t, ",\"sample_count\":", r->sample_count);
	sl_text_put(t, "}", 1);
	if (r->per_source) {
		sl_text_u64(t, ",\"per_source\":{\"prefix_v4\":",
			    r->src_prefix_v4);
		sl_text_u64(t, ",\"prefix_v6\":", r->src_prefix_v6);
		sl_text_u64(t, ",\"max_sources\":", r->max_sources);
		sl_text_put(t, "}", 1);
	}
	text_key_str(t, ",\"mode\":", sl_mode_str(r->mode));
	if (with_priority && r->has_priority)
		sl_text_u64(t, ",\"priority\":", r->priority);
	if (r->warm_up) {
		sl_text_u64(t, ",\"behavior\":{\"warm_up\":{\"period_s\":",
			    r->warm_period_s);
		sl_text_u64(t, ",\"cold_factor\":", r->cold_factor);
		sl_text_put(t, "}}", 2);
	} else {
		text_key_str(t, ",\"behavior\":", "reject");
	}
	cluster_text(t, &r->cluster);
	breaker_text(t, &r->breaker);
	system_text(t, &r->system);
	sl_text_put(t, "}", 1);
}

char *sl_rules_text(const struct sl_ruleset *rs)
{
	struct sl_text t = { 0 };

	sl_text_put(&t, "[", 1);
	for (size_t i = 0; i < rs->n; i++) {
		if (i)
			sl_text_put(&t, ",", 1);
		rule_text(&t, &rs->rules[i], true);
	}
	sl_text_put(&t, "]", 1);
	if (t.nomem) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

char *sl_ruleset_to_json(const struct sl_ruleset *rs, bool pretty)
{
	struct sl_text t = { 0 }, out = { 0 };
	char *arr = sl_rules_text(rs);
	struct sl_json j;

	if (arr) {
		sl_text_put(&t, "{\"rules\":", strlen("{\"rules\":"));
		sl_text_put(&t, arr, strlen(arr));
		sl_text_put(&t, "}", 1);
	}
	free(arr);
	if (!arr || t.nomem || !pretty)
		goto out;
	j = (struct sl_json){ .p = t.buf, .end = t.buf + t.len, .out = &out };
	sl_json_object(&j, 0, true, NULL);
	free(t.buf);
	t = out;
out:
	if (!arr || t.nomem) {
		free(t.buf);
		errno = ENOMEM;
		return NULL;
	}
	return t.buf;
}

/* FNV-1a 64 of rule_text() without priority, printed into t (reused). */
static uint64_t def_hash(struct sl_text *t, const struct sl_rule *r)
{
	uint64_t h;

	t->len = 0;
	rule_text(t, r, false);
	if (t->nomem)
		return 0;
	h = sl_fnv1a(SL_FNV1A_INIT, t->buf, t->len);
	return h ? h : 1; /* 0 means "out of memory" */
}

uint64_t sl_rule_def_hash(const struct sl_rule *r)
{
	struct sl_text t = { 0 };
	uint64_t h = def_hash(&t, r);

	free(t.buf);
	return h;
}

void sl_rule_def_hashes(const struct sl_ruleset *rs, uint64_t *out)
{
	struct sl_text t = { 0 };

	for (size_t i = 0; i < rs->n; i++)
		out[i] = def_hash(&t, &rs->rules[i]);
	free(t.buf);
}
