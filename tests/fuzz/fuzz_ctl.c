/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for the control socket (ctl.h): each input is sent
 * as one request through a real connection to the server, whose handler
 * reads it as the agent does (the request, then every field a command
 * may take); the answer must come back whole, a JSON object saying ok or
 * why not. The input as an answer goes through the client's reading too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"

static struct sl_ctl_server *srv;
static char sock_path[108];
static char dir[] = "/tmp/sluice-fuzz-ctl-XXXXXX";

static void fail_if(int bad, const char *what)
{
	if (bad) {
		fprintf(stderr, "fuzz_ctl: %s\n", what);
		abort();
	}
}

/* Every reading an agent may do; refusals must say why. */
static char *handle(void *arg, const char *text, size_t len)
{
	const char **names = NULL;
	struct sl_ruleset rs = { 0 };
	struct sl_ctl_req req;
	char err[8192] = "";
	uint64_t ifv;
	bool given;
	size_t n;
	cJSON *r;
	char *out;
	int ret;

	fail_if(text[len] != '\0', "the request is not NUL-terminated");
	ret = sl_ctl_req_parse(text, len, &req, err, sizeof(err));
	if (!ret) {
		fail_if(!req.cmd, "no cmd");
		if (sl_ctl_req_if_version(&req, &given, &ifv, err,
					  sizeof(err)) == 0)
			fail_if(given && ifv >= 1ULL << 53, "if_version");
		if (sl_ctl_req_names(&req, &names, &n, err, sizeof(err)) == 0)
			for (size_t i = 0; i < n; i++)
				fail_if(!names[i], "a name is NULL");
		free(names);
		ret = sl_ctl_req_rules(&req, &rs, err, sizeof(err));
		sl_ruleset_free(&rs);
		sl_ctl_req_free(&req);
	}
	fail_if(ret && !err[0], "refused without saying why");
	r = cJSON_CreateObject();
	cJSON_AddBoolToObject(r, "ok", !ret);
	if (ret)
		cJSON_AddStringToObject(r, "error", err);
	out = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	return out;
}

static void remove_dir(void)
{
	sl_ctl_server_free(srv);
	unlink(sock_path);
	rmdir(dir);
}

static void setup(void)
{
	int lfd;

	fail_if(!mkdtemp(dir), "mkdtemp");
	sl_ctl_path(dir, sock_path, sizeof(sock_path));
	lfd = sl_ctl_listen(sock_path);
	fail_if(lfd < 0, "listen");
	fail_if(sl_ctl_server_new(lfd, 4, SL_CTL_TIMEOUT_MS, handle, NULL,
				  &srv), "server");
	atexit(remove_dir);
}

/* data as one request; the answer as the client reads it. */
static void exchange(const uint8_t *data, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sl_ctl_server_stats before, after;
	size_t len = 0, cap = 1 << 16;
	char *ans = malloc(cap);
	cJSON *msg;
	int fd, i;

	fail_if(!ans, "out of memory");
	sl_ctl_server_get_stats(srv, &before);
	strcpy(sa.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	fail_if(fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)),
		"connect");
	/* the socket buffer takes an input of -max_len at once */
	fail_if(size && send(fd, data, size, MSG_NOSIGNAL) != (ssize_t)size,
		"send");
	fail_if(shutdown(fd, SHUT_WR), "shutdown");
	/* the server's turn only when there is nothing to read: a poll
	 * with nothing to do waits its whole timeout */
	for (i = 0; i < 1000; i++) {
		ssize_t got = recv(fd, ans + len, cap - len - 1, 0);

		if (got == 0)
			break;
		if (got < 0 && errno == EAGAIN) {
			fail_if(sl_ctl_server_poll(srv, 10), "poll");
			continue;
		}
		fail_if(got < 0 || len + got + 1 >= cap, "recv");
		len += got;
	}
	close(fd);
	fail_if(i == 1000, "no answer");
	sl_ctl_server_get_stats(srv, &after);
	fail_if(after.answered != before.answered + 1 || after.clients,
		"the answer was not all sent, or the connection stays");
	fail_if(sl_ctl_parse(ans, len, &msg) ||
		!cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(msg, "ok")),
		"the answer is not an object with ok");
	cJSON_Delete(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);
	cJSON *msg;

	if (!srv)
		setup();
	exchange(data, size);
	/* the input as an answer the client reads */
	fail_if(!copy, "out of memory");
	memcpy(copy, data, size);
	if (sl_ctl_parse(copy, size, &msg) == 0)
		fail_if(!cJSON_IsObject(msg), "an answer that is no object");
	cJSON_Delete(msg);
	return 0;
}
