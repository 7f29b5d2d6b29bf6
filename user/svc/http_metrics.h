/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GET /metrics over HTTP, from libmicrohttpd's own thread. The body comes
 * from a callback that fills a text (metrics.h writes it), so this module
 * knows nothing of what is exported. / is a small HTML page that links
 * to /metrics; another path is 404, a method other than GET or HEAD 405,
 * each with a short text body.
 */
#ifndef SLUICE_HTTP_METRICS_H
#define SLUICE_HTTP_METRICS_H

#include <stdbool.h>

#include "json_text.h"

/* Idle HTTP connections are closed after this many seconds. */
#ifndef SL_HTTP_METRICS_TIMEOUT_S
#define SL_HTTP_METRICS_TIMEOUT_S 10
#endif
#ifndef SL_HTTP_METRICS_MAX_CONNS
#define SL_HTTP_METRICS_MAX_CONNS 64
#endif

/* The exposition text into out; 0 or -errno (the answer is then 500). */
typedef int (*sl_http_metrics_fill)(void *arg, struct sl_text *out);

struct sl_http_metrics;

/* ADDR:PORT as --metrics takes it, and what an error says it must be. */
bool sl_http_metrics_addr_valid(const char *addr);
#define SL_HTTP_METRICS_ADDR_FORM                                           \
	"ADDR:PORT (a numeric address, [ADDR6]:PORT for IPv6, port 1-65535)"

/*
 * Bind and listen on addr, serving nothing yet, so that a program fails
 * on a taken address before it has done anything else: the socket, or
 * -errno.
 */
int sl_http_metrics_listen(const char *addr);

/*
 * Serve on fd, which the module owns from here on (failure included),
 * calling fill for each GET /metrics, one call at a time, from its own
 * thread. 0, or -errno.
 */
int sl_http_metrics_start(int fd, sl_http_metrics_fill fill, void *arg,
			  struct sl_http_metrics **out);

/* Stop the thread and close the socket; NULL does nothing. */
void sl_http_metrics_stop(struct sl_http_metrics *h);

#endif
