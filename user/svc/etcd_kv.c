// SPDX-License-Identifier: GPL-2.0
/*
 * The etcd key's value (range, and put with compare-and-swap over txn),
 * leases and the election's keys, over etcd 3.4's JSON gateway.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_int.h"
#include "util.h"

/* An int64 the gateway sends as a string (absent means 0). */
int etcd_get_i64(const cJSON *o, const char *name, int64_t *out)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
	uint64_t v;

	*out = 0;
	if (!it)
		return 0;
	if (!cJSON_IsString(it) ||
	    sl_parse_u64(it->valuestring, 0, INT64_MAX, &v))
		return -EPROTO;
	*out = v;
	return 0;
}

/* A kv object {"key", "mod_revision", "value"} of the key, decoded. */
int etcd_parse_kv(const cJSON *kv, const char *key, struct sl_etcd_event *out,
		  bool *ours)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
	size_t klen;
	char *name;
	int ret;

	if (!cJSON_IsObject(kv) || !cJSON_IsString(k) ||
	    (v && !cJSON_IsString(v)))
		return -EPROTO;
	if (sl_etcd_b64_decode(k->valuestring, &name, &klen))
		return -EPROTO;
	*ours = klen == strlen(key) && !memcmp(name, key, klen);
	free(name);
	if (!*ours)
		return 0;
	if (etcd_get_i64(kv, "mod_revision", &out->mod_revision))
		return -EPROTO;
	/* an empty value is left out */
	ret = sl_etcd_b64_decode(v ? v->valuestring : "", &out->value,
				 &out->len);
	return ret == -EINVAL ? -EPROTO : ret;
}

int sl_etcd_range_answer(const cJSON *doc, const char *key,
			 struct sl_etcd_kv *out)
{
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(doc, "kvs"), *kv;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = etcd_get_i64(cJSON_GetObjectItemCaseSensitive(doc, "header"),
			   "revision", &out->revision);
	cJSON_ArrayForEach(kv, kvs) {
		struct sl_etcd_event ev = { 0 };
		bool ours = false;

		if (ret)
			break;
		ret = etcd_parse_kv(kv, key, &ev, &ours);
		if (!ret && ours) {
			free(out->value);
			out->exists = true;
			out->mod_revision = ev.mod_revision;
			out->value = ev.value;
			out->len = ev.len;
		}
	}
	if (!ret && kvs && !cJSON_IsArray(kvs))
		ret = -EPROTO;
	if (ret)
		sl_etcd_kv_free(out);
	return ret;
}

int sl_etcd_get(struct sl_etcd *e, struct sl_etcd_kv *out, char *err,
		size_t errlen)
{
	char *k64 = sl_etcd_b64_encode(e->key, strlen(e->key)), *body = NULL;
	cJSON *doc = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!k64 || asprintf(&body, "{\"key\":\"%s\"}", k64) < 0) {
		free(k64);
		return -ENOMEM;
	}
	free(k64);
	ret = etcd_post(e, "/v3/kv/range", body, &doc, err, errlen);
	free(body);
	if (ret)
		return ret;
	ret = sl_etcd_range_answer(doc, e->key, out);
	cJSON_Delete(doc);
	if (ret == -EPROTO)
		sl_set_err(err, errlen, "%s/v3/kv/range: not a range answer",
			sl_etcd_endpoint(e));
	return ret;
}

/* The key a failed txn's range read: responses[0].response_range.kvs[0],
 * NULL when there is none. */
static const cJSON *txn_failure_kv(const cJSON *doc)
{
	const cJSON *r = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(doc, "responses"), 0);

	r = cJSON_GetObjectItemCaseSensitive(r, "response_range");
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "kvs"), 0);
}

int sl_etcd_txn_answer(const cJSON *doc, int64_t *revision)
{
	const cJSON *kv;
	int ret;

	*revision = 0;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "succeeded")))
		return etcd_get_i64(
		    cJSON_GetObjectItemCaseSensitive(doc, "header"), "revision",
		    revision);
	kv = txn_failure_kv(doc);
	ret = kv ? etcd_get_i64(kv, "mod_revision", revision) : 0;
	return ret ? ret : -ECANCELED;
}

int sl_etcd_put(struct sl_etcd *e, const char *value, size_t len, bool cas,
		int64_t if_revision, int64_t *revision, char *err,
		size_t errlen)
{
	char *k64 = sl_etcd_b64_encode(e->key, strlen(e->key));
	char *v64 = sl_etcd_b64_encode(value, len), *body = NULL;
	cJSON *doc = NULL;
	int ret = -ENOMEM;

	*revision = 0;
	/* the failure branch reads the key: the current revision, atomically */
	if (k64 && v64 &&
	    (cas ? asprintf(&body,
			    "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\","
			    "\"result\":\"EQUAL\",\"mod_revision\":\"%lld\"}],"
			    "\"success\":[{\"requestPut\":{\"key\":\"%s\","
			    "\"value\":\"%s\"}}],\"failure\":[{"
			    "\"requestRange\":{\"key\":\"%s\"}}]}",
			    k64, (long long)if_revision, k64, v64, k64)
		 : asprintf(&body,
			    "{\"success\":[{\"requestPut\":{\"key\":\"%s\","
			    "\"value\":\"%s\"}}]}",
			    k64, v64)) >= 0)
		ret = etcd_post(e, "/v3/kv/txn", body, &doc, err, errlen);
	free(k64);
	free(v64);
	free(body);
	if (ret)
		return ret;
	ret = sl_etcd_txn_answer(doc, revision);
	cJSON_Delete(doc);
	if (ret == -EPROTO)
		sl_set_err(err, errlen, "%s/v3/kv/txn: not a txn answer",
			sl_etcd_endpoint(e));
	return ret;
}

/* POST a body built from fmt; the answer's document in *doc. */
static int postf(struct sl_etcd *e, const char *path, cJSON **doc, char *err,
		 size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static int postf(struct sl_etcd *e, const char *path, cJSON **doc, char *err,
		 size_t errlen, const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (ret < 0)
		return -ENOMEM;
	ret = etcd_post(e, path, body, doc, err, errlen);
	free(body);
	return ret;
}

int sl_etcd_lease_grant(struct sl_etcd *e, unsigned int *ttl_s, int64_t *id,
			char *err, size_t errlen)
{
	cJSON *doc = NULL;
	int64_t ttl = 0;
	int ret;

	ret = postf(e, "/v3/lease/grant", &doc, err, errlen, "{\"TTL\":%u}",
		    *ttl_s);
	if (ret)
		return ret;
	ret = etcd_get_i64(doc, "ID", id);
	if (!ret)
		ret = etcd_get_i64(doc, "TTL", &ttl);
	cJSON_Delete(doc);
	if (!ret && (!*id || ttl <= 0 || ttl > UINT32_MAX))
		ret = -EPROTO;
	if (ret) {
		sl_set_err(err, errlen, "%s/v3/lease/grant: not a lease",
			sl_etcd_endpoint(e));
		return ret;
	}
	*ttl_s = ttl;
	return 0;
}

int sl_etcd_lease_keepalive(struct sl_etcd *e, int64_t id, char *err,
			    size_t errlen)
{
	cJSON *doc = NULL;
	int64_t ttl = 0;
	int ret;

	/* one request on the stream, one answer: {"result": {"TTL"}} */
	ret = postf(e, "/v3/lease/keepalive", &doc, err, errlen,
		    "{\"ID\":\"%lld\"}", (long long)id);
	if (ret)
		return ret;
	ret = etcd_get_i64(cJSON_GetObjectItemCaseSensitive(doc, "result"),
			   "TTL", &ttl);
	cJSON_Delete(doc);
	if (ret) {
		sl_set_err(err, errlen, "%s/v3/lease/keepalive: not a lease",
			sl_etcd_endpoint(e));
		return ret;
	}
	if (ttl <= 0) {
		sl_set_err(err, errlen, "lease %llx ran out", (long long)id);
		return -ENOENT;
	}
	return 0;
}

int sl_etcd_lease_revoke(struct sl_etcd *e, int64_t id, char *err,
			 size_t errlen)
{
	cJSON *doc = NULL;
	int ret;

	ret = postf(e, "/v3/lease/revoke", &doc, err, errlen,
		    "{\"ID\":\"%lld\"}", (long long)id);
	cJSON_Delete(doc);
	return ret;
}

/* key + "/" + the lease in hex, as etcd's election API names candidates */
static char *candidate_key(const struct sl_etcd *e, int64_t lease)
{
	char *key = NULL, *k64;

	if (asprintf(&key, "%s/%llx", e->key, (long long)lease) < 0)
		return NULL;
	k64 = sl_etcd_b64_encode(key, strlen(key));
	free(key);
	return k64;
}

int sl_etcd_campaign(struct sl_etcd *e, int64_t lease, const char *value,
		     int64_t *rev, char *err, size_t errlen)
{
	char *k64 = candidate_key(e, lease);
	char *v64 = sl_etcd_b64_encode(value, strlen(value));
	const cJSON *kv;
	cJSON *doc = NULL;
	int ret = -ENOMEM;

	*rev = 0;
	/* created once: a retry after a lost answer finds its own key */
	if (k64 && v64)
		ret = postf(e, "/v3/kv/txn", &doc, err, errlen,
			    "{\"compare\":[{\"key\":\"%s\",\"target\":"
			    "\"CREATE\",\"result\":\"EQUAL\","
			    "\"create_revision\":\"0\"}],"
			    "\"success\":[{\"requestPut\":{\"key\":\"%s\","
			    "\"value\":\"%s\",\"lease\":\"%lld\"}}],"
			    "\"failure\":[{\"requestRange\":{\"key\":\"%s\"}}]}",
			    k64, k64, v64, (long long)lease, k64);
	free(k64);
	free(v64);
	if (ret)
		return ret;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "succeeded"))) {
		ret = etcd_get_i64(
		    cJSON_GetObjectItemCaseSensitive(doc, "header"), "revision",
		    rev);
	} else {
		kv = txn_failure_kv(doc);
		ret = kv ? etcd_get_i64(kv, "create_revision", rev) : -EPROTO;
	}
	cJSON_Delete(doc);
	if (!ret && *rev <= 0)
		ret = -EPROTO;
	if (ret == -EPROTO)
		sl_set_err(err, errlen, "%s/v3/kv/txn: not a txn answer",
			sl_etcd_endpoint(e));
	return ret;
}

void sl_etcd_leader_free(struct sl_etcd_leader *l)
{
	free(l->value);
	memset(l, 0, sizeof(*l));
}

int sl_etcd_leader(struct sl_etcd *e, struct sl_etcd_leader *out, char *err,
		   size_t errlen)
{
	char *from = NULL, *to = NULL, *f64, *t64;
	const cJSON *kv, *v;
	cJSON *doc = NULL;
	int ret = -ENOMEM;

	memset(out, 0, sizeof(*out));
	/* every key under KEY/: from KEY/ to KEY0 ('/' + 1) */
	if (asprintf(&from, "%s/", e->key) < 0 ||
	    asprintf(&to, "%s0", e->key) < 0) {
		free(from);
		return -ENOMEM;
	}
	f64 = sl_etcd_b64_encode(from, strlen(from));
	t64 = sl_etcd_b64_encode(to, strlen(to));
	if (f64 && t64)
		ret = postf(e, "/v3/kv/range", &doc, err, errlen,
			    "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":1,"
			    "\"sort_order\":\"ASCEND\",\"sort_target\":"
			    "\"CREATE\"}", f64, t64);
	free(from);
	free(to);
	free(f64);
	free(t64);
	if (ret)
		return ret;
	kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "kvs"),
				0);
	if (kv) {
		v = cJSON_GetObjectItemCaseSensitive(kv, "value");
		ret = etcd_get_i64(kv, "create_revision", &out->rev);
		if (!ret)
			ret = etcd_get_i64(kv, "lease", &out->lease);
		if (!ret)
			ret = sl_etcd_b64_decode(cJSON_IsString(v) ? v->valuestring
								  : "",
						 &out->value, &out->len);
		out->exists = !ret;
		if (ret)
			ret = -EPROTO;
	}
	cJSON_Delete(doc);
	if (ret == -EPROTO)
		sl_set_err(err, errlen, "%s/v3/kv/range: not a range answer",
			sl_etcd_endpoint(e));
	if (ret)
		sl_etcd_leader_free(out);
	return ret;
}
