/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent's control socket: a Unix stream socket, one request per
 * connection. The client writes one JSON object and shuts down its
 * writing side; the agent answers with one JSON object and closes.
 * docs/cli.md describes the requests and answers.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "rules.h"

#define SL_CTL_MAX_MSG	  (64u << 20)
#define SL_CTL_TIMEOUT_MS 5000
#ifndef SL_CTL_MAX_CLIENTS
#define SL_CTL_MAX_CLIENTS 64 /* connections the agent holds at once */
#endif
#define SL_CTL_BACKLOG 256

/* "DIR/sluice.sock" */
void sl_ctl_path(const char *state_dir, char *buf, size_t len);

/* Bind and listen (non-blocking), mode 0600. -EADDRINUSE when an agent
 * answers there. */
int sl_ctl_listen(const char *path);

/*
 * Client: send req to the agent at path and wait for the answer, all of
 * it (connect included) within timeout_ms: -ETIMEDOUT past it.
 */
int sl_ctl_call(const char *path, const cJSON *req, cJSON **resp,
		int timeout_ms);

/* As sl_ctl_call, the answer as it came: *text (NUL-terminated, len
 * bytes, free() it) is not checked to be JSON. */
int sl_ctl_call_text(const char *path, const cJSON *req, char **text,
		     size_t *len, int timeout_ms);

/* The message in buf (len bytes, freed) as a JSON object, or -EBADMSG. */
int sl_ctl_parse(char *buf, size_t len, cJSON **msg);

/*
 * The agent's reading of a request (docs/cli.md, "Requests"): one JSON
 * object with a string "cmd", then the fields that cmd takes, each
 * checked when it is asked for. Each returns 0, or -EINVAL with the
 * reason in err naming the field ("request: 'names' must be ..."), or
 * -ENOMEM.
 */
struct sl_ctl_req {
	cJSON *json;	 /* the request; owns cmd */
	const char *cmd;
};

/* text (len bytes, a NUL at text[len] or not) as a request. */
int sl_ctl_req_parse(const char *text, size_t len, struct sl_ctl_req *req,
		     char *err, size_t errlen);

/* "if_version", an integer 0..2^53-1; *given is false without one. */
int sl_ctl_req_if_version(const struct sl_ctl_req *req, bool *given,
			  uint64_t *v, char *err, size_t errlen);

/* A flag such as "dry_run": true or false, absent false. */
int sl_ctl_req_bool(const struct sl_ctl_req *req, const char *name,
		    bool *v, char *err, size_t errlen);

/* "names", a non-empty array of strings: *names (free() it) borrows them
 * from req. */
int sl_ctl_req_names(const struct sl_ctl_req *req, const char ***names,
		     size_t *n, char *err, size_t errlen);

/* A packet to explain (`sluice explain`; built by user/dp/explain.c). */
struct sl_explain_query {
	int family;		/* 4 or 6 */
	uint8_t proto;		/* IPPROTO_TCP, _UDP, _ICMP or _ICMPV6 */
	struct in6_addr src, dst; /* IPv4: the first 4 bytes */
	uint16_t sport, dport;	/* TCP and UDP */
	bool syn;		/* TCP: a SYN (else an ACK) */
	int vlan;		/* -1: untagged, else the VID of one tag */
	uint32_t size;		/* frame bytes; 0: the headers alone */
};

/* The largest frame explain builds. */
#define SL_EXPLAIN_MAX_SIZE 1514

/*
 * An explain request's packet: "proto" (tcp, udp, icmp; icmp is ICMPv6
 * between IPv6 addresses), "src" and "dst" (addresses of one family),
 * "dport" (tcp and udp), "sport" (default 40000), "syn", "vlan" (a VID,
 * absent: untagged) and "size" (frame bytes).
 */
int sl_ctl_req_explain(const struct sl_ctl_req *req,
		       struct sl_explain_query *q, char *err, size_t errlen);

/* "rules", an array of rules as in a rule file, through the rule parser
 * (its errors in err). */
int sl_ctl_req_rules(const struct sl_ctl_req *req, struct sl_ruleset *out,
		     char *err, size_t errlen);

void sl_ctl_req_free(struct sl_ctl_req *req);

/* Answers: {"ok": true}, to add to; {"ok": false, "error", "code"}
 * (docs/cli.md's codes), the message at most SL_CTL_ERR_MAX bytes; and an
 * answer printed on one line, then freed (NULL when out of memory). */
#define SL_CTL_ERR_MAX 8192
cJSON *sl_ctl_ok(void);
cJSON *sl_ctl_error(const char *code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
char *sl_ctl_answer_text(cJSON *r);

/*
 * Server: every connection non-blocking with its own deadline (the
 * request within timeout_ms of the connect, the answer within timeout_ms
 * of being ready), at most max_clients at once. A connection past the
 * limit takes the place of the oldest one still sending its request,
 * which is told why; if every one is being answered, the new one is
 * refused with a "busy" answer. Requests are handled one at a time, in
 * the order they complete, so changes are serialised.
 */
struct sl_ctl_server;

/* The answer to one request (len bytes, not NUL-terminated): a malloc'd
 * JSON object text, or NULL when out of memory. */
typedef char *(*sl_ctl_handler)(void *arg, const char *req, size_t len);

struct sl_ctl_server_stats {
	uint64_t accepted;
	uint64_t answered;
	uint64_t timed_out;  /* request or answer not done in time */
	uint64_t displaced;  /* an idle one closed to make room */
	uint64_t refused;    /* no room: every client being answered */
	uint32_t clients;    /* connected now */
};

/* Serve on listen_fd (which the server then owns). -errno. */
int sl_ctl_server_new(int listen_fd, int max_clients, int timeout_ms,
		      sl_ctl_handler handle, void *arg,
		      struct sl_ctl_server **out);

/*
 * Wait at most timeout_ms for the sockets, then do what is ready: accept,
 * read, answer, write, close, and drop the clients past their deadline.
 * Never waits on one client. 0, or -errno when epoll fails.
 */
int sl_ctl_server_poll(struct sl_ctl_server *s, int timeout_ms);

/* End the current or next sl_ctl_server_poll() now; from any thread. */
void sl_ctl_server_wake(struct sl_ctl_server *s);

void sl_ctl_server_get_stats(const struct sl_ctl_server *s,
			     struct sl_ctl_server_stats *st);

/* Close every connection and the listening socket. */
void sl_ctl_server_free(struct sl_ctl_server *s);

#endif
