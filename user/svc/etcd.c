// SPDX-License-Identifier: GPL-2.0
/*
 * etcd 3.4's JSON gateway (etcd.h). Keys and values are base64 in the
 * JSON, int64 fields are JSON strings. The watch answer is a stream of
 * JSON objects, one per line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "etcd.h"
#include "util.h"

#define CONNECT_TIMEOUT_MS   2000
#define ANSWER_MAX	     SL_ETCD_FRAME_MAX
#define PASSWORD_MAX	     4096
#define GRPC_UNAUTHENTICATED 16 /* the gateway's "code" of a token unknown */

char *sl_etcd_b64_encode(const char *data, size_t len)
{
	char *out;

	/* EVP_EncodeBlock() takes an int */
	if (len > INT32_MAX / 4 * 3)
		return NULL;
	out = malloc(4 * ((len + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock((unsigned char *)out,
				(const unsigned char *)data, len);
	return out;
}

int sl_etcd_b64_decode(const char *text, char **out, size_t *len)
{
	size_t n = strlen(text);
	int got;
	char *buf;

	/* EVP_DecodeBlock takes whole quads; etcd pads */
	if (n % 4 || n > INT32_MAX)
		return -EINVAL;
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return -ENOMEM;
	got = n ? EVP_DecodeBlock((unsigned char *)buf,
				  (const unsigned char *)text, n)
		: 0;
	if (got < 0) {
		free(buf);
		return -EINVAL;
	}
	/* it counts the padding's zero bytes in */
	if (n && text[n - 1] == '=')
		got--;
	if (n > 1 && text[n - 2] == '=')
		got--;
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

/* A file an option names, readable now: a typo shows at the start. */
static int check_file(const char *opt, const char *path, char *err,
		      size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -errno;

	if (fd < 0) {
		sl_set_err(err, errlen, "--%s %s: %s", opt, path,
			strerror(-ret));
		return ret;
	}
	close(fd);
	return 0;
}

/* The password of the user: the file's, or the environment's. */
static int read_password(struct sl_etcd *e, const char *file, char *err,
			 size_t errlen)
{
	const char *env = getenv(SL_ETCD_PASSWORD_ENV);
	size_t len;
	int fd, ret;

	if (!file) {
		if (!env || !*env) {
			sl_set_err(err, errlen, "--etcd-user %s needs "
				"--etcd-password-file FILE (or %s in the "
				"environment)", e->user, SL_ETCD_PASSWORD_ENV);
			return -EINVAL;
		}
		e->password = strdup(env);
		return e->password ? 0 : -ENOMEM;
	}
	fd = open(file, O_RDONLY | O_CLOEXEC);
	ret = fd < 0 ? -errno
		     : sl_read_fd(fd, PASSWORD_MAX, &e->password, &len);
	if (fd >= 0)
		close(fd);
	if (ret) {
		sl_set_err(err, errlen, "--etcd-password-file %s: %s", file,
			ret == -EFBIG ? "larger than 4 KiB" : strerror(-ret));
		return ret;
	}
	/* the newline an editor or echo ends the file with is no part of it */
	while (len && (e->password[len - 1] == '\n' ||
		       e->password[len - 1] == '\r'))
		e->password[--len] = '\0';
	if (!len) {
		sl_set_err(err, errlen, "--etcd-password-file %s: empty", file);
		return -EINVAL;
	}
	return 0;
}

static int dup_opt(char **to, const char *from)
{
	*to = from ? strdup(from) : NULL;
	return from && !*to ? -ENOMEM : 0;
}

static int init_auth(struct sl_etcd *e, const struct sl_etcd_auth *auth,
		     char *err, size_t errlen)
{
	int ret;

	if (auth->cert_key && !auth->cert) {
		sl_set_err(err, errlen, "--etcd-cert-key needs --etcd-cert");
		return -EINVAL;
	}
	if (auth->password_file && !auth->user) {
		sl_set_err(err, errlen, "--etcd-password-file needs --etcd-user");
		return -EINVAL;
	}
	for (int i = 0; (auth->cacert || auth->cert) && i < e->n_urls; i++)
		if (strncmp(e->url[i], "https://", 8)) {
			sl_set_err(err, errlen, "--etcd-cacert and --etcd-cert "
				"need https:// URLs, not %s", e->url[i]);
			return -EINVAL;
		}
	if ((auth->cacert &&
	     (ret = check_file("etcd-cacert", auth->cacert, err, errlen))) ||
	    (auth->cert &&
	     (ret = check_file("etcd-cert", auth->cert, err, errlen))) ||
	    (auth->cert_key && (ret = check_file("etcd-cert-key",
						 auth->cert_key, err, errlen))))
		return ret;
	if ((ret = dup_opt(&e->cacert, auth->cacert)) ||
	    (ret = dup_opt(&e->cert, auth->cert)) ||
	    (ret = dup_opt(&e->cert_key, auth->cert_key)) ||
	    (ret = dup_opt(&e->user, auth->user)))
		return ret;
	return e->user ? read_password(e, auth->password_file, err, errlen)
		       : 0;
}

int sl_etcd_init(struct sl_etcd *e, const char *endpoints,
		 const struct sl_etcd_auth *auth, const char *key, char *err,
		 size_t errlen)
{
	int ret;

	const char *cur = endpoints, *item;
	size_t len;

	memset(e, 0, sizeof(*e));
	if (!key || !*key) {
		sl_set_err(err, errlen, "--etcd-key: an empty key");
		return -EINVAL;
	}
	while (sl_list_next(&cur, &item, &len)) {
		if (!len) {
			sl_set_err(err, errlen, "--etcd '%s': an empty URL",
				endpoints);
			return -EINVAL;
		}
		if (e->n_urls == SL_ETCD_MAX_ENDPOINTS) {
			sl_set_err(err, errlen, "--etcd '%s': more than %d URLs",
				endpoints, SL_ETCD_MAX_ENDPOINTS);
			return -EINVAL;
		}
		while (len && item[len - 1] == '/')
			len--;
		if (len >= SL_ETCD_URL_MAX ||
		    (strncmp(item, "http://", 7) &&
		     strncmp(item, "https://", 8)) ||
		    len <= (size_t)(item[4] == 's' ? 8 : 7)) {
			sl_set_err(err, errlen,
				"--etcd '%.*s': not a URL http://HOST:PORT or "
				"https://HOST:PORT",
				(int)(len > 200 ? 200 : len), item);
			return -EINVAL;
		}
		memcpy(e->url[e->n_urls++], item, len);
	}
	if (!e->n_urls) {
		sl_set_err(err, errlen, "--etcd: no URL");
		return -EINVAL;
	}
	e->key = strdup(key);
	if (!e->key)
		return -ENOMEM;
	ret = auth ? init_auth(e, auth, err, errlen) : 0;
	if (ret) {
		sl_etcd_free(e);
		return ret;
	}
	e->timeout_ms = SL_ETCD_TIMEOUT_MS;
	/* thread-safe in the libcurl of Debian 12 (7.88) */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	return 0;
}

static void drop_token(struct sl_etcd *e)
{
	free(e->token);
	e->token = NULL;
}

void sl_etcd_free(struct sl_etcd *e)
{
	free(e->key);
	free(e->cacert);
	free(e->cert);
	free(e->cert_key);
	free(e->user);
	if (e->password)
		OPENSSL_cleanse(e->password, strlen(e->password));
	free(e->password);
	drop_token(e);
	memset(e, 0, sizeof(*e));
}

const char *sl_etcd_endpoint(const struct sl_etcd *e)
{
	return e->url[e->cur];
}

void sl_etcd_kv_free(struct sl_etcd_kv *kv)
{
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct sl_etcd_buf *a = arg;
	size_t add = size * n;

	if (a->len + add + 1 > ANSWER_MAX) {
		a->too_big = true;
		return 0;
	}
	if (a->len + add + 1 > a->cap) {
		size_t cap = (a->len + add + 1) * 2;
		char *nb = realloc(a->buf, cap);

		if (!nb)
			return 0;
		a->buf = nb;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, p, add);
	a->len += add;
	a->buf[a->len] = '\0';
	return add;
}

/* A request to url with the TLS and the token of e; curl's reason for a
 * failure goes to detail (CURL_ERROR_SIZE). */
static CURL *new_handle(const struct sl_etcd *e, const char *url,
			const char *body, struct curl_slist **hdrs,
			char *detail)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char *token;

	*hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	/* a body server (body NULL) is not etcd: it never sees the token */
	if (*hdrs && e->token && body) {
		if (asprintf(&token, "Authorization: %s", e->token) >= 0) {
			h = curl_slist_append(*hdrs, token);
			free(token);
		}
		if (!h) {
			curl_slist_free_all(*hdrs);
			*hdrs = NULL;
		}
	}
	if (!c || !*hdrs) {
		curl_easy_cleanup(c);
		curl_slist_free_all(*hdrs);
		return NULL;
	}
	detail[0] = '\0';
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
	if (e->cacert)
		curl_easy_setopt(c, CURLOPT_CAINFO, e->cacert);
	if (e->cert)
		curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert);
	if (e->cert_key)
		curl_easy_setopt(c, CURLOPT_SSLKEY, e->cert_key);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	else
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	/* a watch is idle for as long as nobody publishes: a peer gone
	 * silent (no RST) shows in about 5 + 9 x 2 s */
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 5L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 2L);
	/* etcd's endpoints are named by the operator: no proxy between */
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	return c;
}

/* The message of a gateway error answer {"error", "message", "code"}. */
static const char *gateway_error(const cJSON *doc)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "message");

	if (!cJSON_IsString(m))
		m = cJSON_GetObjectItemCaseSensitive(doc, "error");
	if (cJSON_IsObject(m))
		m = cJSON_GetObjectItemCaseSensitive(m, "message");
	return cJSON_IsString(m) ? m->valuestring : NULL;
}

/* "where: curl's reason": its details (TLS's words), else rc's text */
static void curl_failed(char *err, size_t errlen, const char *where,
			CURLcode rc, const char *detail)
{
	sl_set_err(err, errlen, "%s: %s", where,
		*detail ? detail : curl_easy_strerror(rc));
}

/*
 * POST body to path on endpoint i: 0 with *doc and *status when it
 * answers with a JSON object, -EIO (it did not answer) or -EPROTO.
 */
static int post_to(struct sl_etcd *e, int i, const char *path,
		   const char *body, cJSON **doc, long *status, char *err,
		   size_t errlen)
{
	char url[SL_ETCD_URL_MAX + 32], detail[CURL_ERROR_SIZE];
	struct sl_etcd_buf a = { 0 };
	struct curl_slist *hdrs;
	const char *text;
	CURLcode rc;
	CURL *c;

	*status = 0;
	snprintf(url, sizeof(url), "%s%s", e->url[i], path);
	c = new_handle(e, url, body, &hdrs, detail);
	if (!c)
		return -ENOMEM;
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK) {
		if (a.too_big)
			sl_set_err(err, errlen, "%s: the answer is larger "
				"than 96 MiB", e->url[i]);
		else
			curl_failed(err, errlen, e->url[i], rc, detail);
		free(a.buf);
		return rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	*doc = a.buf ? cJSON_ParseWithLength(a.buf, a.len) : NULL;
	if (!cJSON_IsObject(*doc)) {
		cJSON_Delete(*doc);
		*doc = NULL; /* callers free it on every path */
		/* the gateway's own refusals are a line of text */
		text = a.buf ? a.buf : "";
		sl_set_err(err, errlen,
			"%s%s: HTTP %ld, not an etcd gateway answer%s%.*s",
			e->url[i], path, *status, *text ? ": " : "",
			(int)(strcspn(text, "\n") > 200 ? 200
							: strcspn(text, "\n")),
			text);
		free(a.buf);
		return -EPROTO;
	}
	free(a.buf);
	e->cur = i;
	return 0;
}

int sl_etcd_fetch_url(const struct sl_etcd *e, const char *url, size_t max,
		      char **out, size_t *len, char *err, size_t errlen)
{
	char detail[CURL_ERROR_SIZE];
	struct sl_etcd_buf a = { 0 };
	struct curl_slist *hdrs;
	long status = 0;
	CURLcode rc;
	CURL *c;

	*out = NULL;
	*len = 0;
	c = new_handle(e, url, NULL, &hdrs, detail);
	if (!c)
		return -ENOMEM;
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	/* a compressed copy if the server has one; curl inflates it */
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	if (rc == CURLE_OK && status != 200)
		sl_set_err(err, errlen, "%s: HTTP %ld", url, status);
	else if (rc == CURLE_OK && a.len > max)
		sl_set_err(err, errlen, "%s: larger than %zu bytes", url, max);
	else if (rc != CURLE_OK && a.too_big)
		sl_set_err(err, errlen, "%s: larger than 96 MiB", url);
	else if (rc != CURLE_OK)
		curl_failed(err, errlen, url, rc, detail);
	if (rc != CURLE_OK || status != 200 || a.len > max) {
		free(a.buf);
		return status == 404 ? -ENOENT
		       : rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	if (!a.buf && !(a.buf = strdup("")))
		return -ENOMEM;
	*out = a.buf;
	*len = a.len;
	return 0;
}

/* The user's token from endpoint i; -EACCES when etcd refuses it. */
static int authenticate(struct sl_etcd *e, int i, char *err, size_t errlen)
{
	cJSON *req = cJSON_CreateObject(), *doc = NULL;
	const cJSON *token;
	char *body = NULL;
	const char *msg;
	long status;
	int ret = -ENOMEM;

	/* cJSON escapes what a name or a password may hold */
	if (cJSON_AddStringToObject(req, "name", e->user) &&
	    cJSON_AddStringToObject(req, "password", e->password))
		body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (body) {
		ret = post_to(e, i, "/v3/auth/authenticate", body, &doc,
			      &status, err, errlen);
		OPENSSL_cleanse(body, strlen(body));
		free(body);
	}
	if (ret)
		return ret;
	token = cJSON_GetObjectItemCaseSensitive(doc, "token");
	msg = gateway_error(doc);
	if (status != 200 || msg || !cJSON_IsString(token) ||
	    !*token->valuestring) {
		sl_set_err(err, errlen, "etcd: authentication failed for user "
			"%s at %s: %s", e->user, e->url[i],
			msg ? msg : "no token in the answer");
		ret = -EACCES;
	} else if (!(e->token = strdup(token->valuestring))) {
		ret = -ENOMEM;
	}
	cJSON_Delete(doc);
	return ret;
}

/*
 * post_to() as the user, if any: a token etcd no longer knows (expired,
 * or etcd restarted) is replaced once. -EREMOTEIO: etcd's error answer.
 */
static int post_as_user(struct sl_etcd *e, int i, const char *path,
			const char *body, cJSON **doc, char *err,
			size_t errlen)
{
	const cJSON *code;
	const char *msg;
	long status;
	int ret;

	for (int n = 0; n < 2; n++) {
		if (e->user && !e->token &&
		    (ret = authenticate(e, i, err, errlen)))
			return ret;
		ret = post_to(e, i, path, body, doc, &status, err, errlen);
		if (ret)
			return ret;
		msg = gateway_error(*doc);
		if (status == 200 && !msg)
			return 0;
		sl_set_err(err, errlen, "%s%s: HTTP %ld: etcd says: %s",
			e->url[i], path, status, msg ? msg : "?");
		code = cJSON_GetObjectItemCaseSensitive(*doc, "code");
		ret = e->token && cJSON_IsNumber(code) &&
		      code->valueint == GRPC_UNAUTHENTICATED;
		cJSON_Delete(*doc);
		*doc = NULL;
		if (!ret)
			break;
		drop_token(e);
	}
	return -EREMOTEIO;
}

/*
 * POST body to path on each endpoint in turn, from the last that
 * answered, until one answers with JSON; *doc the answer, NULL on error
 * (callers may cJSON_Delete() it either way).
 */
static int post(struct sl_etcd *e, const char *path, const char *body,
		cJSON **doc, char *err, size_t errlen)
{
	int ret = -EIO;

	*doc = NULL;
	for (int k = 0; k < e->n_urls; k++) {
		ret = post_as_user(e, (e->cur + k) % e->n_urls, path, body, doc,
				   err, errlen);
		if (ret != -EIO && ret != -EPROTO)
			return ret;
	}
	return ret;
}

/* An int64 the gateway sends as a string (absent means 0). */
static int get_i64(const cJSON *o, const char *name, int64_t *out)
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
static int parse_kv(const cJSON *kv, const char *key,
		    struct sl_etcd_event *out, bool *ours)
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
	if (get_i64(kv, "mod_revision", &out->mod_revision))
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
	ret = get_i64(cJSON_GetObjectItemCaseSensitive(doc, "header"),
		      "revision", &out->revision);
	cJSON_ArrayForEach(kv, kvs) {
		struct sl_etcd_event ev = { 0 };
		bool ours = false;

		if (ret)
			break;
		ret = parse_kv(kv, key, &ev, &ours);
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
	ret = post(e, "/v3/kv/range", body, &doc, err, errlen);
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
		return get_i64(cJSON_GetObjectItemCaseSensitive(doc, "header"),
			       "revision", revision);
	kv = txn_failure_kv(doc);
	ret = kv ? get_i64(kv, "mod_revision", revision) : 0;
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
		ret = post(e, "/v3/kv/txn", body, &doc, err, errlen);
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
	ret = post(e, path, body, doc, err, errlen);
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
	ret = get_i64(doc, "ID", id);
	if (!ret)
		ret = get_i64(doc, "TTL", &ttl);
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
	ret = get_i64(cJSON_GetObjectItemCaseSensitive(doc, "result"), "TTL",
		      &ttl);
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
		ret = get_i64(cJSON_GetObjectItemCaseSensitive(doc, "header"),
			      "revision", rev);
	} else {
		kv = txn_failure_kv(doc);
		ret = kv ? get_i64(kv, "create_revision", rev) : -EPROTO;
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
		ret = get_i64(kv, "create_revision", &out->rev);
		if (!ret)
			ret = get_i64(kv, "lease", &out->lease);
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

void sl_etcd_frame_free(struct sl_etcd_frame *f)
{
	for (size_t i = 0; i < f->n_events; i++)
		free(f->events[i].value);
	free(f->events);
	free(f->cancel_reason);
	memset(f, 0, sizeof(*f));
}

static int parse_events(const cJSON *evs, const char *key,
			struct sl_etcd_frame *out)
{
	const cJSON *ev;
	int ret = 0;

	if (!evs)
		return 0;
	if (!cJSON_IsArray(evs))
		return -EPROTO;
	out->events = calloc(cJSON_GetArraySize(evs) + 1,
			     sizeof(*out->events));
	if (!out->events)
		return -ENOMEM;
	cJSON_ArrayForEach(ev, evs) {
		const cJSON *type =
			cJSON_GetObjectItemCaseSensitive(ev, "type");
		struct sl_etcd_event *e = &out->events[out->n_events];
		bool ours = false;

		/* PUT, the zero value, is left out */
		if (type && (!cJSON_IsString(type) ||
			     (strcmp(type->valuestring, "PUT") &&
			      strcmp(type->valuestring, "DELETE"))))
			return -EPROTO;
		ret = parse_kv(cJSON_GetObjectItemCaseSensitive(ev, "kv"), key,
			       e, &ours);
		if (ret)
			return ret;
		if (!ours)
			continue;
		if (type && !strcmp(type->valuestring, "DELETE")) {
			e->type = SL_ETCD_DELETE;
			free(e->value);
			e->value = NULL;
			e->len = 0;
		}
		out->n_events++;
	}
	/* a burst of puts comes in one frame: only its last one counts */
	for (size_t i = 0; i + 1 < out->n_events; i++)
		out->events[i].superseded = true;
	return 0;
}

int sl_etcd_parse_frame(const char *text, size_t len, const char *key,
			struct sl_etcd_frame *out, char *err, size_t errlen)
{
	cJSON *doc = cJSON_ParseWithLength(text, len);
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(doc, "result");
	const cJSON *reason;
	const char *msg;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		sl_set_err(err, errlen, "a watch frame that is not a JSON object "
				     "(%zu bytes)", len);
		return -EPROTO;
	}
	if (!res) {
		msg = gateway_error(doc);
		sl_set_err(err, errlen, "the watch ended: etcd says: %s",
			msg ? msg : "(no result, no error message)");
		cJSON_Delete(doc);
		return -EREMOTEIO;
	}
	out->created = cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(res, "created"));
	out->canceled = cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(res, "canceled"));
	reason = cJSON_GetObjectItemCaseSensitive(res, "cancel_reason");
	ret = get_i64(res, "compact_revision", &out->compact_revision);
	if (!ret && cJSON_IsString(reason) &&
	    !(out->cancel_reason = strdup(reason->valuestring)))
		ret = -ENOMEM;
	if (!ret)
		ret = get_i64(cJSON_GetObjectItemCaseSensitive(res, "header"),
			      "revision", &out->revision);
	if (!ret)
		ret = parse_events(
			cJSON_GetObjectItemCaseSensitive(res, "events"), key,
			out);
	cJSON_Delete(doc);
	if (ret) {
		sl_etcd_frame_free(out);
		sl_set_err(err, errlen, "%s", ret == -ENOMEM
						   ? "out of memory"
						   : "a watch frame of an "
						     "unknown shape");
	}
	return ret;
}

int sl_etcd_stream_feed(struct sl_etcd_stream *s, const char *p, size_t n,
			int (*frame)(void *arg, const char *text, size_t len),
			void *arg)
{
	struct sl_etcd_buf *b = &s->pending;
	size_t start = 0;
	char *nl;
	int ret;

	if (collect((char *)p, 1, n, b) != n)
		return b->too_big ? -EMSGSIZE : -ENOMEM;
	/* what earlier chunks brought holds no newline: search the rest */
	while ((nl = memchr(b->buf + s->scanned, '\n',
			    b->len - s->scanned))) {
		size_t len = nl - (b->buf + start);

		s->searched += nl + 1 - (b->buf + s->scanned);
		s->scanned = nl + 1 - b->buf;
		ret = len ? frame(arg, b->buf + start, len) : 0;
		start += len + 1;
		if (ret)
			return ret;
	}
	s->searched += b->len - s->scanned;
	memmove(b->buf, b->buf + start, b->len - start);
	b->len -= start;
	s->scanned = b->len;
	return 0;
}

void sl_etcd_stream_free(struct sl_etcd_stream *s)
{
	free(s->pending.buf);
	memset(s, 0, sizeof(*s));
}

struct watch {
	struct sl_etcd *e;
	const struct sl_etcd_watch_cb *cb;
	struct sl_etcd_stream stream;
	int ret; /* why the stream was cut by us */
	int64_t compact_revision;
	char *err;
	size_t errlen;
};

/* One complete frame. */
static int on_frame(void *arg, const char *text, size_t len)
{
	struct watch *w = arg;
	struct sl_etcd_frame f;
	int ret;

	ret = sl_etcd_parse_frame(text, len, w->e->key, &f, w->err,
				  w->errlen);
	if (ret)
		return ret;
	if (f.compact_revision) {
		w->compact_revision = f.compact_revision;
		ret = -ESTALE;
	} else if (f.canceled) {
		sl_set_err(w->err, w->errlen, "etcd canceled the watch%s%s",
			f.cancel_reason ? ": " : "",
			f.cancel_reason ? f.cancel_reason : "");
		ret = -ECONNRESET;
		/* a token it no longer knows: the gateway says so in words */
		if (w->e->token && f.cancel_reason &&
		    strstr(f.cancel_reason, "code = Unauthenticated")) {
			drop_token(w->e);
			ret = -EKEYEXPIRED;
		}
	}
	if (!ret && f.created && w->cb->created)
		w->cb->created(w->cb->arg);
	for (size_t i = 0; !ret && i < f.n_events; i++)
		ret = w->cb->event(w->cb->arg, &f.events[i]);
	sl_etcd_frame_free(&f);
	return ret;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct watch *w = arg;

	w->ret = sl_etcd_stream_feed(&w->stream, p, size * n, on_frame, w);
	if (w->ret == -EMSGSIZE) {
		sl_set_err(w->err, w->errlen,
			"a watch frame larger than 96 MiB");
		w->ret = -EPROTO;
	} else if (w->ret == -ENOMEM) {
		sl_set_err(w->err, w->errlen, "out of memory");
	}
	return w->ret ? 0 : size * n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn,
		       curl_off_t ut, curl_off_t un)
{
	struct watch *w = arg;

	return w->cb->stop && w->cb->stop(w->cb->arg);
}

static int watch_once(struct sl_etcd *e, int64_t start_revision,
		      const struct sl_etcd_watch_cb *cb,
		      int64_t *compact_revision, char *err, size_t errlen)
{
	struct watch w = { .e = e, .cb = cb, .err = err, .errlen = errlen };
	char url[SL_ETCD_URL_MAX + 16], detail[CURL_ERROR_SIZE];
	char *k64, *body = NULL;
	struct curl_slist *hdrs;
	CURLcode rc;
	CURL *c;
	int ret;

	if (e->user && !e->token) {
		ret = authenticate(e, e->cur, err, errlen);
		if (ret == -EIO || ret == -EPROTO)
			e->cur = (e->cur + 1) % e->n_urls;
		if (ret)
			return ret;
	}
	k64 = sl_etcd_b64_encode(e->key, strlen(e->key));
	if (!k64 || asprintf(&body,
			     "{\"create_request\":{\"key\":\"%s\","
			     "\"start_revision\":\"%lld\"}}",
			     k64, (long long)start_revision) < 0) {
		free(k64);
		return -ENOMEM;
	}
	free(k64);
	snprintf(url, sizeof(url), "%s/v3/watch", e->url[e->cur]);
	c = new_handle(e, url, body, &hdrs, detail);
	if (!c) {
		free(body);
		return -ENOMEM;
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, &w);
	rc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	free(body);
	/* an error answer that ends without a newline: its message */
	if (!w.ret && rc == CURLE_OK && w.stream.pending.len)
		w.ret = on_frame(&w, w.stream.pending.buf,
				 w.stream.pending.len);
	sl_etcd_stream_free(&w.stream);
	if (w.ret == -ESTALE)
		*compact_revision = w.compact_revision;
	if (w.ret)
		return w.ret;
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return 0;
	if (rc == CURLE_OK)
		sl_set_err(err, errlen, "%s: the stream ended", url);
	else
		curl_failed(err, errlen, url, rc, detail);
	/* the next watch tries the next endpoint */
	e->cur = (e->cur + 1) % e->n_urls;
	return -ECONNRESET;
}

int sl_etcd_watch(struct sl_etcd *e, int64_t start_revision,
		  const struct sl_etcd_watch_cb *cb, int64_t *compact_revision,
		  char *err, size_t errlen)
{
	int ret = watch_once(e, start_revision, cb, compact_revision, err,
			     errlen);

	/* a token etcd no longer knows: once more with a new one */
	if (ret == -EKEYEXPIRED)
		ret = watch_once(e, start_revision, cb, compact_revision, err,
				 errlen);
	return ret == -EKEYEXPIRED ? -ECONNRESET : ret;
}
