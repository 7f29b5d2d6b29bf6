// SPDX-License-Identifier: GPL-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "json_text.h"
#include "rules_parse.h"
#include "util.h"

void sl_ctl_path(const char *state_dir, char *buf, size_t len)
{
	snprintf(buf, len, "%s/sluice.sock", state_dir);
}

static int fill_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

int sl_ctl_listen(const char *path)
{
	struct sockaddr_un sa;
	int fd, probe, err;

	err = fill_addr(path, &sa);
	if (err)
		return err;
	/* a socket file that nobody answers on is left over by a crash */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0) {
		err = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
		close(probe);
		if (!err)
			return -EADDRINUSE;
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* the socket is created 0600: only root may change the rules */
	umask(0177);
	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(0022);
	if (err || chmod(path, 0600) || listen(fd, SL_CTL_BACKLOG)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* ---- the client ---- */

/* ms left until deadline (ms), 0 when past it */
static int left_ms(uint64_t deadline)
{
	uint64_t now = sl_now_ms();

	return now < deadline ? (int)(deadline - now) : 0;
}

/*
 * A non-blocking connect to a Unix socket whose listen queue is full
 * fails with EAGAIN, and there is nothing to poll for: try again until
 * the deadline, so that the caller's timeout covers the connect too.
 */
static int connect_by(int fd, const struct sockaddr_un *sa, uint64_t deadline)
{
	for (;;) {
		if (!connect(fd, (const struct sockaddr *)sa, sizeof(*sa)))
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		if (!left_ms(deadline))
			return -ETIMEDOUT;
		usleep(5000);
	}
}

static int send_by(int fd, const char *buf, size_t len, uint64_t deadline)
{
	while (len) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		if (!left_ms(deadline))
			return -ETIMEDOUT;
		if (poll(&p, 1, left_ms(deadline)) < 0 && errno != EINTR)
			return -errno;
		n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* Read until EOF, within the deadline and the size limit. */
static int recv_by(int fd, char **out, size_t *outlen, uint64_t deadline)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (!left_ms(deadline)) {
			free(buf);
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, left_ms(deadline)) < 0 && errno != EINTR) {
			free(buf);
			return -errno;
		}
		if (len + 1 == cap) {
			char *nb;

			if (cap >= SL_CTL_MAX_MSG) {
				free(buf);
				return -EMSGSIZE;
			}
			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = recv(fd, buf + len, cap - len - 1, MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		len += n;
	}
	buf[len] = 0;
	*out = buf;
	*outlen = len;
	return 0;
}

int sl_ctl_parse(char *buf, size_t len, cJSON **msg)
{
	*msg = cJSON_ParseWithLength(buf, len);
	free(buf);
	if (!*msg || !cJSON_IsObject(*msg)) {
		cJSON_Delete(*msg);
		*msg = NULL;
		return -EBADMSG;
	}
	return 0;
}

/* ---- requests, as the agent reads them ---- */

int sl_ctl_req_parse(const char *text, size_t len, struct sl_ctl_req *req,
		     char *err, size_t errlen)
{
	const cJSON *cmd;

	req->cmd = NULL;
	req->json = cJSON_ParseWithLength(text, len);
	if (!cJSON_IsObject(req->json)) {
		sl_ctl_req_free(req);
		snprintf(err, errlen, "request: not a JSON object");
		return -EINVAL;
	}
	cmd = cJSON_GetObjectItemCaseSensitive(req->json, "cmd");
	if (!cJSON_IsString(cmd)) {
		sl_ctl_req_free(req);
		snprintf(err, errlen, "request: 'cmd' is missing");
		return -EINVAL;
	}
	req->cmd = cmd->valuestring;
	return 0;
}

int sl_ctl_req_if_version(const struct sl_ctl_req *req, bool *given,
			  uint64_t *v, char *err, size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(req->json,
							   "if_version");

	*given = it != NULL;
	if (it && !sl_json_uint(it, 0, (1ULL << 53) - 1, v)) {
		snprintf(err, errlen, "request: 'if_version' must be an "
				      "integer from 0 to 2^53-1");
		return -EINVAL;
	}
	return 0;
}

/* A member of an explain request that is an integer in [min, max]:
 * 1 if given, 0 if absent, -EINVAL (the error written) if neither. */
static int explain_uint(const struct sl_ctl_req *req, const char *name,
			uint64_t min, uint64_t max, uint64_t *v, char *err,
			size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(req->json, name);

	if (!it)
		return 0;
	if (!sl_json_uint(it, min, max, v)) {
		snprintf(err, errlen, "request: '%s' must be an integer from "
				      "%llu to %llu", name,
			 (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	return 1;
}

static int explain_addr(const struct sl_ctl_req *req, const char *name,
			struct in6_addr *a, int *family, char *err,
			size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(req->json, name);
	const char *s = cJSON_GetStringValue(it);

	memset(a, 0, sizeof(*a));
	if (s && inet_pton(AF_INET, s, a) == 1)
		*family = 4;
	else if (s && inet_pton(AF_INET6, s, a) == 1)
		*family = 6;
	else {
		snprintf(err, errlen, "request: '%s' must be an IPv4 or IPv6 "
				      "address%s%s", name, s ? ", not " : "",
			 s ? s : "");
		return -EINVAL;
	}
	return 0;
}

int sl_ctl_req_explain(const struct sl_ctl_req *req,
		       struct sl_explain_query *q, char *err, size_t errlen)
{
	const char *proto = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(req->json, "proto"));
	uint64_t v;
	int fam_dst, got, err_;

	memset(q, 0, sizeof(*q));
	q->vlan = -1;
	q->sport = 40000;
	err_ = explain_addr(req, "src", &q->src, &q->family, err, errlen) ?:
	       explain_addr(req, "dst", &q->dst, &fam_dst, err, errlen);
	if (err_)
		return err_;
	if (fam_dst != q->family) {
		snprintf(err, errlen, "request: 'src' and 'dst' must be of one "
				      "family (IPv4 or IPv6)");
		return -EINVAL;
	}
	if (proto && !strcmp(proto, "tcp"))
		q->proto = IPPROTO_TCP;
	else if (proto && !strcmp(proto, "udp"))
		q->proto = IPPROTO_UDP;
	else if (proto && !strcmp(proto, "icmp"))
		q->proto = q->family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	else {
		snprintf(err, errlen, "request: 'proto' must be tcp, udp or "
				      "icmp");
		return -EINVAL;
	}
	got = explain_uint(req, "dport", 0, 65535, &v, err, errlen);
	if (got < 0)
		return got;
	if (got)
		q->dport = v;
	else if (q->proto == IPPROTO_TCP || q->proto == IPPROTO_UDP) {
		snprintf(err, errlen, "request: %s needs 'dport'", proto);
		return -EINVAL;
	}
	got = explain_uint(req, "sport", 0, 65535, &v, err, errlen);
	if (got < 0)
		return got;
	if (got)
		q->sport = v;
	got = explain_uint(req, "vlan", 0, 4094, &v, err, errlen);
	if (got < 0)
		return got;
	if (got)
		q->vlan = v;
	got = explain_uint(req, "size", 0, SL_EXPLAIN_MAX_SIZE, &v, err,
			   errlen);
	if (got < 0)
		return got;
	if (got)
		q->size = v;
	return sl_ctl_req_bool(req, "syn", &q->syn, err, errlen);
}

int sl_ctl_req_bool(const struct sl_ctl_req *req, const char *name,
		    bool *v, char *err, size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(req->json, name);

	if (it && !cJSON_IsBool(it)) {
		snprintf(err, errlen, "request: '%s' must be true or false",
			 name);
		return -EINVAL;
	}
	*v = cJSON_IsTrue(it);
	return 0;
}

int sl_ctl_req_names(const struct sl_ctl_req *req, const char ***names,
		     size_t *n, char *err, size_t errlen)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(req->json,
							     "names");
	const cJSON *name;

	*n = 0;
	if (!cJSON_IsArray(list) || !cJSON_GetArraySize(list)) {
		snprintf(err, errlen, "request: 'names' must be a non-empty "
				      "array");
		return -EINVAL;
	}
	*names = calloc(cJSON_GetArraySize(list), sizeof(**names));
	if (!*names) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	cJSON_ArrayForEach(name, list) {
		if (!cJSON_IsString(name)) {
			free(*names);
			*names = NULL;
			*n = 0;
			snprintf(err, errlen, "request: 'names' must be an "
					      "array of strings");
			return -EINVAL;
		}
		(*names)[(*n)++] = name->valuestring;
	}
	return 0;
}

int sl_ctl_req_rules(const struct sl_ctl_req *req, struct sl_ruleset *out,
		     char *err, size_t errlen)
{
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(req->json,
							      "rules");

	if (!cJSON_IsArray(rules)) {
		snprintf(err, errlen, "request: 'rules' must be an array");
		return -EINVAL;
	}
	return sl_rules_from_array(rules, out, err, errlen);
}

void sl_ctl_req_free(struct sl_ctl_req *req)
{
	cJSON_Delete(req->json);
	req->json = NULL;
	req->cmd = NULL;
}

cJSON *sl_ctl_error(const char *code, const char *fmt, ...)
{
	cJSON *r = cJSON_CreateObject();
	char msg[SL_CTL_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddBoolToObject(r, "ok", false);
	cJSON_AddStringToObject(r, "error", msg);
	cJSON_AddStringToObject(r, "code", code);
	return r;
}

/* r printed on one line, then freed; NULL when out of memory. */
char *sl_ctl_answer_text(cJSON *r)
{
	char *text = r ? cJSON_PrintUnformatted(r) : NULL;

	cJSON_Delete(r);
	return text;
}

cJSON *sl_ctl_ok(void)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddBoolToObject(r, "ok", true);
	return r;
}

int sl_ctl_call_text(const char *path, const cJSON *req, char **text,
		     size_t *len, int timeout_ms)
{
	uint64_t deadline = sl_now_ms() + timeout_ms;
	char *msg = cJSON_PrintUnformatted(req);
	struct sockaddr_un sa;
	int fd, err;

	if (!msg)
		return -ENOMEM;
	err = fill_addr(path, &sa);
	fd = err ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
					       SOCK_NONBLOCK, 0);
	if (!err && fd < 0)
		err = -errno;
	if (!err)
		err = connect_by(fd, &sa, deadline);
	if (!err)
		err = send_by(fd, msg, strlen(msg), deadline);
	if (!err && shutdown(fd, SHUT_WR))
		err = -errno;
	if (!err)
		err = recv_by(fd, text, len, deadline);
	if (fd >= 0)
		close(fd);
	free(msg);
	return err;
}

int sl_ctl_call(const char *path, const cJSON *req, cJSON **resp,
		int timeout_ms)
{
	size_t len;
	char *buf;
	int err = sl_ctl_call_text(path, req, &buf, &len, timeout_ms);

	return err ? err : sl_ctl_parse(buf, len, resp);
}

/* ---- the server ---- */

#define MAX_EVENTS 32

struct conn {
	int fd;		/* -1 once dropped */
	int slot;	/* in conns[] */
	struct conn *next_dead;
	bool answering; /* the request is in; buf holds the answer */
	uint64_t since;	/* accepted, ms: the oldest idle one goes first */
	uint64_t deadline;
	char *buf;
	size_t len, cap, off; /* off: answer bytes sent */
};

struct sl_ctl_server {
	int lfd, epfd;
	int wake_fd; /* an eventfd: sl_ctl_server_wake() from other threads */
	int max, timeout_ms;
	sl_ctl_handler handle;
	void *arg;
	struct conn **conns;
	int n;
	/* dropped during an event batch, freed after it: a later event of
	 * the batch may still point at one */
	struct conn *dead;
	struct sl_ctl_server_stats st;
};

#define ANSWER(code, why) \
	"{\"ok\":false,\"code\":\"" code "\",\"error\":\"" why "\"}"

/* A last word to a client being dropped, if its socket takes it now. */
static void __attribute__((format(printf, 3, 4)))
tell(int fd, const char *code, const char *fmt, ...)
{
	char why[256], text[320];
	va_list ap;
	int len;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	len = snprintf(text, sizeof(text),
		       "{\"ok\":false,\"code\":\"%s\",\"error\":\"%s\"}\n",
		       code, why);
	if (send(fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return; /* it would not have read it either */
}

static void drop(struct sl_ctl_server *s, struct conn *c)
{
	close(c->fd); /* leaves the epoll set with it */
	c->fd = -1;
	s->conns[c->slot] = s->conns[--s->n];
	s->conns[c->slot]->slot = c->slot;
	c->next_dead = s->dead;
	s->dead = c;
}

static void free_dead(struct sl_ctl_server *s)
{
	while (s->dead) {
		struct conn *c = s->dead;

		s->dead = c->next_dead;
		free(c->buf);
		free(c);
	}
}

/* Send what the socket takes; the connection ends with the answer. */
static void send_some(struct sl_ctl_server *s, struct conn *c)
{
	while (c->off < c->len) {
		ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0)
			break; /* the client went away */
		c->off += n;
	}
	if (c->off == c->len)
		s->st.answered++;
	drop(s, c);
}

static void answer(struct sl_ctl_server *s, struct conn *c, char *text)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
	static const char nomem[] = ANSWER("internal", "out of memory");
	size_t len = text ? strlen(text) : 0;

	free(c->buf);
	c->buf = text ? realloc(text, len + 2) : NULL;
	if (!c->buf) {
		free(text);
		c->buf = malloc(sizeof(nomem) + 1);
		if (c->buf)
			memcpy(c->buf, nomem, sizeof(nomem));
		len = sizeof(nomem) - 1;
	}
	if (c->buf) {
		c->buf[len] = '\n';
		c->buf[len + 1] = '\0';
	}
	c->len = c->buf ? len + 1 : 0;
	c->off = 0;
	c->answering = true;
	c->deadline = sl_now_ms() + s->timeout_ms;
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	send_some(s, c);
}

static void recv_some(struct sl_ctl_server *s, struct conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->len + 1 >= c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 4096;
			char *nb;

			if (c->cap >= SL_CTL_MAX_MSG) {
				answer(s, c, strdup(ANSWER("invalid",
					"request: larger than 64 MiB")));
				return;
			}
			nb = realloc(c->buf, cap);
			if (!nb) {
				answer(s, c, NULL);
				return;
			}
			c->buf = nb;
			c->cap = cap;
		}
		n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1,
			 MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			drop(s, c);
			return;
		}
		if (n == 0) {
			/* the client shut down its side: the request is in */
			c->buf[c->len] = '\0';
			answer(s, c, s->handle(s->arg, c->buf, c->len));
			return;
		}
		c->len += n;
	}
}

/* Room for one more: the oldest client still sending its request goes. */
static bool make_room(struct sl_ctl_server *s)
{
	int oldest = -1;

	for (int i = 0; i < s->n; i++)
		if (!s->conns[i]->answering &&
		    (oldest < 0 || s->conns[i]->since < s->conns[oldest]->since))
			oldest = i;
	if (oldest < 0)
		return false;
	tell(s->conns[oldest]->fd, "busy",
	     "closed to make room: the agent holds %d connections at most "
	     "and this one was the oldest still sending its request", s->max);
	drop(s, s->conns[oldest]);
	s->st.displaced++;
	return true;
}

static void accept_all(struct sl_ctl_server *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		struct conn *c;

		if (fd < 0 && errno == EINTR)
			continue;
		if (fd < 0)
			return; /* EAGAIN: all taken; or out of fds, for now */
		s->st.accepted++;
		if (s->n == s->max && !make_room(s)) {
			tell(fd, "busy",
			     "the agent's %d connections are all being "
			     "answered; retry", s->max);
			close(fd);
			s->st.refused++;
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->slot = s->n;
		c->since = sl_now_ms();
		c->deadline = c->since + s->timeout_ms;
		ev.data.ptr = c;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(c);
			continue;
		}
		s->conns[s->n++] = c;
	}
}

static void expire(struct sl_ctl_server *s)
{
	uint64_t now = sl_now_ms();

	for (int i = 0; i < s->n;) {
		if (s->conns[i]->deadline > now) {
			i++;
			continue;
		}
		if (!s->conns[i]->answering)
			tell(s->conns[i]->fd, "invalid",
			     "request: not received within %d ms",
			     s->timeout_ms);
		s->st.timed_out++;
		drop(s, s->conns[i]); /* moves the last one to i */
	}
}

int sl_ctl_server_new(int listen_fd, int max_clients, int timeout_ms,
		      sl_ctl_handler handle, void *arg,
		      struct sl_ctl_server **out)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct sl_ctl_server *s = calloc(1, sizeof(*s));
	struct epoll_event wake = { .events = EPOLLIN };
	int err;

	if (!s)
		return -ENOMEM;
	wake.data.ptr = &s->wake_fd;
	s->lfd = listen_fd;
	s->max = max_clients;
	s->timeout_ms = timeout_ms;
	s->handle = handle;
	s->arg = arg;
	s->conns = calloc(max_clients, sizeof(*s->conns));
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!s->conns || s->epfd < 0 || s->wake_fd < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, listen_fd, &ev) ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake_fd, &wake)) {
		err = s->conns ? -errno : -ENOMEM;
		if (s->epfd >= 0)
			close(s->epfd);
		if (s->wake_fd >= 0)
			close(s->wake_fd);
		free(s->conns);
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

int sl_ctl_server_poll(struct sl_ctl_server *s, int timeout_ms)
{
	struct epoll_event ev[MAX_EVENTS];
	uint64_t now = sl_now_ms();
	int n;

	/* wake for the nearest deadline too */
	for (int i = 0; i < s->n; i++) {
		uint64_t d = s->conns[i]->deadline;
		int left = d > now ? (int)(d - now) : 0;

		if (left < timeout_ms)
			timeout_ms = left;
	}
	n = epoll_wait(s->epfd, ev, MAX_EVENTS, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct conn *c = ev[i].data.ptr;

		if (!c) {
			accept_all(s);
			continue;
		}
		if ((void *)c == &s->wake_fd) {
			uint64_t count;
			ssize_t got = read(s->wake_fd, &count, sizeof(count));

			(void)got; /* the wake-up is all there is to it */
			continue;
		}
		/* dropped earlier in this batch (room made, an answer done) */
		if (c->fd < 0)
			continue;
		if (c->answering)
			send_some(s, c);
		else
			recv_some(s, c);
	}
	expire(s);
	free_dead(s);
	return 0;
}

void sl_ctl_server_wake(struct sl_ctl_server *s)
{
	uint64_t one = 1;
	ssize_t put = write(s->wake_fd, &one, sizeof(one));

	(void)put; /* EAGAIN: the counter is full, a wake-up is pending */
}

void sl_ctl_server_get_stats(const struct sl_ctl_server *s,
			     struct sl_ctl_server_stats *st)
{
	*st = s->st;
	st->clients = s->n;
}

void sl_ctl_server_free(struct sl_ctl_server *s)
{
	if (!s)
		return;
	while (s->n)
		drop(s, s->conns[0]);
	free_dead(s);
	close(s->epfd);
	close(s->wake_fd);
	close(s->lfd);
	free(s->conns);
	free(s);
}
