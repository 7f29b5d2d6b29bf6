/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent's control socket: a Unix stream socket, one request per
 * connection. The client writes one JSON object and shuts down its
 * writing side; the agent answers with one JSON object and closes.
 * docs/cli.md describes the requests and answers.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stddef.h>
#include <cjson/cJSON.h>

#define SL_CTL_MAX_MSG	  (64u << 20)
#define SL_CTL_TIMEOUT_MS 5000

/* "DIR/sluice.sock" */
void sl_ctl_path(const char *state_dir, char *buf, size_t len);

/* Bind and listen, mode 0600. -EADDRINUSE when an agent answers there. */
int sl_ctl_listen(const char *path);

/* Read one request from an accepted connection (bounded in size and
 * time). */
int sl_ctl_recv(int fd, cJSON **msg);

int sl_ctl_send(int fd, const cJSON *msg);

/* Send a message already printed: text (len bytes) is one JSON object. */
int sl_ctl_send_text(int fd, const char *text, size_t len);

/* Client: send req to the agent at path and wait for the answer. */
int sl_ctl_call(const char *path, const cJSON *req, cJSON **resp,
		int timeout_ms);

/* As sl_ctl_call, the answer as it came: *text (NUL-terminated, len
 * bytes, free() it) is not checked to be JSON. */
int sl_ctl_call_text(const char *path, const cJSON *req, char **text,
		     size_t *len, int timeout_ms);

/* The message in buf (len bytes, freed) as a JSON object, or -EBADMSG. */
int sl_ctl_parse(char *buf, size_t len, cJSON **msg);

#endif
