// SPDX-License-Identifier: GPL-2.0
/*
 * etcd 3.4's JSON gateway (etcd.h). Keys and values are base64 in the
 * JSON, int64 fields are JSON strings. This file: the client, its TLS
 * and user, and a call over the gateway (libcurl); the others:
 * etcd_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "etcd_int.h"
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

void etcd_drop_token(struct sl_etcd *e)
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
	etcd_drop_token(e);
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

size_t etcd_collect(char *p, size_t size, size_t n, void *arg)
{
	struct sl_etcd_buf *a = arg;
	size_t add = size * n;

	if (a->len + add + 1 > (a->fixed ? a->cap : ANSWER_MAX)) {
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
CURL *etcd_new_handle(const struct sl_etcd *e, const char *url,
		      const char *body, struct curl_slist **hdrs, char *detail)
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
const char *etcd_gateway_error(const cJSON *doc)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "message");

	if (!cJSON_IsString(m))
		m = cJSON_GetObjectItemCaseSensitive(doc, "error");
	if (cJSON_IsObject(m))
		m = cJSON_GetObjectItemCaseSensitive(m, "message");
	return cJSON_IsString(m) ? m->valuestring : NULL;
}

/* "where: curl's reason": its details (TLS's words), else rc's text */
void etcd_curl_failed(char *err, size_t errlen, const char *where, CURLcode rc,
		      const char *detail)
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
	c = etcd_new_handle(e, url, body, &hdrs, detail);
	if (!c)
		return -ENOMEM;
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, etcd_collect);
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
			etcd_curl_failed(err, errlen, e->url[i], rc, detail);
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

int sl_etcd_fetch_url(const struct sl_etcd *e, const char *url, size_t size,
		      char **out, size_t *len, char *err, size_t errlen)
{
	/* one buffer of the right size: no copy as it grows, and a server
	 * that sends more is cut off, not read to the end */
	struct sl_etcd_buf a = { .buf = malloc(size + 1), .cap = size + 1,
				 .fixed = true };
	char detail[CURL_ERROR_SIZE];
	struct curl_slist *hdrs;
	long status = 0;
	CURLcode rc;
	CURL *c;

	*out = NULL;
	*len = 0;
	c = a.buf ? etcd_new_handle(e, url, NULL, &hdrs, detail) : NULL;
	if (!c) {
		free(a.buf);
		return -ENOMEM;
	}
	a.buf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, etcd_collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	/* a compressed copy if the server has one; curl inflates it */
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	/* the status first: a 404 page may be longer than the body */
	if (status && status != 200)
		sl_set_err(err, errlen, "%s: HTTP %ld", url, status);
	else if (a.too_big)
		sl_set_err(err, errlen, "%s: more than %zu bytes", url, size);
	else if (rc != CURLE_OK)
		etcd_curl_failed(err, errlen, url, rc, detail);
	if (rc != CURLE_OK || status != 200) {
		free(a.buf);
		return status == 404 ? -ENOENT
		       : status && status != 200 ? -EIO
		       : a.too_big ? -EFBIG
		       : rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	*out = a.buf;
	*len = a.len;
	return 0;
}

/* The user's token from endpoint i; -EACCES when etcd refuses it. */
int etcd_authenticate(struct sl_etcd *e, int i, char *err, size_t errlen)
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
	msg = etcd_gateway_error(doc);
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
		    (ret = etcd_authenticate(e, i, err, errlen)))
			return ret;
		ret = post_to(e, i, path, body, doc, &status, err, errlen);
		if (ret)
			return ret;
		msg = etcd_gateway_error(*doc);
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
		etcd_drop_token(e);
	}
	return -EREMOTEIO;
}

/*
 * POST body to path on each endpoint in turn, from the last that
 * answered, until one answers with JSON; *doc the answer, NULL on error
 * (callers may cJSON_Delete() it either way).
 */
int etcd_post(struct sl_etcd *e, const char *path, const char *body,
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
