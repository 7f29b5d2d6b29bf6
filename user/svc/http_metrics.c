// SPDX-License-Identifier: GPL-2.0
/* The /metrics endpoint over libmicrohttpd (http_metrics.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>
#include <netinet/in.h>

#include "http_metrics.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

struct sl_http_metrics {
	struct MHD_Daemon *daemon;
	sl_http_metrics_fill fill;
	void *arg;
};

static int parse_addr(const char *addr, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	if (sl_parse_sockaddr(addr, ss, len))
		return -EINVAL;
	/* both families keep the port at the same offset */
	return ((struct sockaddr_in *)ss)->sin_port ? 0 : -EINVAL;
}

bool sl_http_metrics_addr_valid(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;

	return !parse_addr(addr, &ss, &len);
}

int sl_http_metrics_listen(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, err;

	if (parse_addr(addr, &ss, &len))
		return -EINVAL;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 64)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* The landing page on /: where the metrics are, for a person. */
static const char landing[] =
	"<!DOCTYPE html>\n"
	"<html><head><meta charset=\"utf-8\"><title>sluice</title></head>\n"
	"<body><h1>sluice</h1>\n"
	"<p><a href=\"/metrics\">Metrics</a> (Prometheus' text format)</p>\n"
	"</body></html>\n";

/* A short answer of a static text: the landing page, 404, 405, 500. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status,
			     const char *type, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn,
				  unsigned int status, const char *text)
{
	return reply(conn, status, "text/plain; charset=utf-8", text);
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **req)
{
	struct sl_http_metrics *h = cls;
	struct sl_text t = { 0 };
	struct MHD_Response *r;
	enum MHD_Result ret;
	char msg[128];
	int err;

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "method not allowed: GET or HEAD /metrics\n");
	if (!strcmp(url, "/"))
		return reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8",
			     landing);
	if (strcmp(url, "/metrics"))
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
				  "not found: the metrics are at /metrics\n");
	err = h->fill(h->arg, &t);
	if (!err && t.nomem)
		err = -ENOMEM;
	if (err) {
		free(t.buf);
		snprintf(msg, sizeof(msg), "cannot read the metrics: %s\n",
			 strerror(-err));
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
	}
	/* MHD frees the text once it is sent */
	r = MHD_create_response_from_buffer_with_free_callback(t.len, t.buf,
							       free);
	if (!r) {
		free(t.buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				SL_METRICS_CONTENT_TYPE);
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	if (n && msg[n - 1] == '\n')
		msg[n - 1] = '\0';
	pr_warn("metrics: %s", msg);
}

int sl_http_metrics_start(int fd, sl_http_metrics_fill fill, void *arg,
			  struct sl_http_metrics **out)
{
	struct sl_http_metrics *h = calloc(1, sizeof(*h));

	if (!h) {
		close(fd);
		return -ENOMEM;
	}
	h->fill = fill;
	h->arg = arg;
	/* MHD closes fd when it stops, and when it fails to start */
	h->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, answer, h,
		/* first, so that every message of MHD's goes through it */
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)SL_HTTP_METRICS_MAX_CONNS,
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)SL_HTTP_METRICS_TIMEOUT_S, MHD_OPTION_END);
	if (!h->daemon) {
		free(h);
		return -EIO;
	}
	*out = h;
	return 0;
}

void sl_http_metrics_stop(struct sl_http_metrics *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->daemon);
	free(h);
}
