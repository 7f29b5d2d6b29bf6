/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit tests for the /metrics endpoint (user/svc/http_metrics.c) on a
 * loopback port the kernel picks, with a callback standing in for a
 * program's metrics.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http_metrics.h"

/* A listening loopback socket on a free port. */
static int listen_any(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* The whole answer to request (HTTP/1.0: the server closes after it). */
static char *ask(uint16_t port, const char *request)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 5 };
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	assert_non_null(buf);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(send(fd, request, strlen(request), 0),
			 (ssize_t)strlen(request));
	while ((n = recv(fd, buf + len, cap - len - 1, 0)) > 0)
		len += n;
	assert_true(n == 0); /* closed, not timed out */
	buf[len] = '\0';
	close(fd);
	return buf;
}

static int fills;

static int fill_ok(void *arg, struct sl_text *out)
{
	fills++;
	sl_text_printf(out, "# TYPE %s gauge\n%s 1\n", (const char *)arg,
		       (const char *)arg);
	return 0;
}

static int fill_fails(void *arg, struct sl_text *out)
{
	sl_text_printf(out, "half");
	return -EIO;
}

static void test_addr(void **state)
{
	static const char *const good[] = { "127.0.0.1:9100", "0.0.0.0:1",
					    "[::1]:65535", "[::]:9100" };
	static const char *const bad[] = { "", "127.0.0.1", "127.0.0.1:0",
					   "127.0.0.1:65536", "localhost:9100",
					   "::1:9100", "1.2.3.4.5:80",
					   "127.0.0.1:9100x", ":9100" };

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		if (!sl_http_metrics_addr_valid(good[i]))
			fail_msg("'%s' was refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (sl_http_metrics_addr_valid(bad[i]))
			fail_msg("'%s' was taken", bad[i]);
}

static void test_listen_in_use(void **state)
{
	uint16_t port;
	int fd = listen_any(&port);
	char addr[32];

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	assert_int_equal(sl_http_metrics_listen(addr), -EADDRINUSE);
	assert_int_equal(sl_http_metrics_listen("localhost:80"), -EINVAL);
	close(fd);
}

static void test_answers(void **state)
{
	struct sl_http_metrics *h;
	uint16_t port;
	char *r;

	(void)state;
	assert_int_equal(sl_http_metrics_start(listen_any(&port), fill_ok,
					       "t_up", &h),
			 0);
	fills = 0;
	r = ask(port, "GET /metrics HTTP/1.0\r\n\r\n");
	assert_true(!strncmp(r, "HTTP/1.0 200", 12) ||
		    !strncmp(r, "HTTP/1.1 200", 12));
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(r, "\r\n\r\n# TYPE t_up gauge\nt_up 1\n"));
	free(r);
	/* a query string is not part of the path */
	r = ask(port, "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 200 "));
	free(r);
	/* HEAD: the headers, no body */
	r = ask(port, "HEAD /metrics HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 200 "));
	assert_null(strstr(r, "t_up 1"));
	free(r);
	assert_int_equal(fills, 3);

	/* a landing page for a person, which links to the metrics */
	r = ask(port, "GET / HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 200 "));
	assert_non_null(strstr(r, "Content-Type: text/html; charset=utf-8"));
	assert_non_null(strstr(r, "<a href=\"/metrics\">"));
	assert_null(strstr(r, "t_up"));
	free(r);
	r = ask(port, "HEAD / HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 200 "));
	assert_null(strstr(r, "<a href"));
	free(r);
	r = ask(port, "GET /metricsx HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 404 "));
	free(r);
	r = ask(port, "GET /index.html HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 404 "));
	assert_non_null(strstr(r, "\r\n\r\nnot found: the metrics are at "
				  "/metrics\n"));
	free(r);
	r = ask(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
	assert_non_null(strstr(r, " 405 "));
	assert_non_null(strstr(r, "Allow: GET, HEAD\r\n"));
	assert_non_null(strstr(r, "method not allowed"));
	free(r);
	r = ask(port, "DELETE /metrics HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 405 "));
	free(r);
	assert_int_equal(fills, 3); /* neither /, 404 nor 405 asked for them */
	sl_http_metrics_stop(h);
}

static void test_fill_fails(void **state)
{
	struct sl_http_metrics *h;
	uint16_t port;
	char *r;

	(void)state;
	assert_int_equal(sl_http_metrics_start(listen_any(&port), fill_fails,
					       NULL, &h),
			 0);
	r = ask(port, "GET /metrics HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 500 "));
	assert_non_null(strstr(r, "cannot read the metrics: Input/output "
				  "error\n"));
	assert_null(strstr(r, "half"));
	free(r);
	sl_http_metrics_stop(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addr),
		cmocka_unit_test(test_listen_in_use),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_fill_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
