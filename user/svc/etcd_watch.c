// SPDX-License-Identifier: GPL-2.0
/*
 * The etcd gateway's watch: a stream of JSON objects, one per line, cut
 * into frames and parsed into the key's events.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_int.h"
#include "util.h"

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
		ret = etcd_parse_kv(cJSON_GetObjectItemCaseSensitive(ev, "kv"),
				    key, e, &ours);
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
		msg = etcd_gateway_error(doc);
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
	ret = etcd_get_i64(res, "compact_revision", &out->compact_revision);
	if (!ret && cJSON_IsString(reason) &&
	    !(out->cancel_reason = strdup(reason->valuestring)))
		ret = -ENOMEM;
	if (!ret)
		ret = etcd_get_i64(
		    cJSON_GetObjectItemCaseSensitive(res, "header"), "revision",
		    &out->revision);
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

	if (etcd_collect((char *) p, 1, n, b) != n)
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
			etcd_drop_token(w->e);
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
		ret = etcd_authenticate(e, e->cur, err, errlen);
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
	c = etcd_new_handle(e, url, body, &hdrs, detail);
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
		etcd_curl_failed(err, errlen, url, rc, detail);
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
