// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
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
	if (err || chmod(path, 0600) || listen(fd, 64)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Read until EOF, within the deadline and the size limit. */
static int read_all(int fd, char **out, size_t *outlen, int timeout_ms)
{
	long long deadline = (long long)sl_now_ms() + timeout_ms;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long long left = deadline - (long long)sl_now_ms();
		ssize_t n;

		if (left <= 0) {
			free(buf);
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
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

int sl_ctl_recv(int fd, cJSON **msg)
{
	size_t len;
	char *buf;
	int err = read_all(fd, &buf, &len, SL_CTL_TIMEOUT_MS);

	return err ? err : sl_ctl_parse(buf, len, msg);
}

static int write_all(int fd, const char *buf, size_t len, int timeout_ms)
{
	long long deadline = (long long)sl_now_ms() + timeout_ms;

	while (len) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		long long left = deadline - (long long)sl_now_ms();
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
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

int sl_ctl_send_text(int fd, const char *text, size_t len)
{
	int err = write_all(fd, text, len, SL_CTL_TIMEOUT_MS);

	return err ? err : write_all(fd, "\n", 1, SL_CTL_TIMEOUT_MS);
}

int sl_ctl_send(int fd, const cJSON *msg)
{
	char *text = cJSON_PrintUnformatted(msg);
	int err;

	if (!text)
		return -ENOMEM;
	err = sl_ctl_send_text(fd, text, strlen(text));
	free(text);
	return err;
}

int sl_ctl_call_text(const char *path, const cJSON *req, char **text,
		     size_t *len, int timeout_ms)
{
	struct sockaddr_un sa;
	int fd, err;

	err = fill_addr(path, &sa);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(fd);
		return err;
	}
	err = sl_ctl_send(fd, req);
	if (!err && shutdown(fd, SHUT_WR))
		err = -errno;
	if (!err)
		err = read_all(fd, text, len, timeout_ms);
	close(fd);
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
