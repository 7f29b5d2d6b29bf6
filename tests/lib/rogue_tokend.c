// SPDX-License-Identifier: GPL-2.0
/*
 * A token server that holds the namespace secret and lies, for
 * tests/integration/test_cluster_trust.sh: what a member of a namespace
 * (an agent serving tokens, a follower) could send. One connection at a
 * time, blocking; it exits after --seconds.
 *
 *   rogue_tokend MODE LISTEN NAMESPACE SECRET SECONDS [ADDR]
 *
 *   extra             GRANTS with as many entries as a frame holds (2727),
 *                     more than a SYNC has flows or can carry (2338)
 *   unsealed-grants   GRANTS without a seal
 *   unsealed-auth-ok  AUTH_OK without a seal
 *   redirect          a sealed REDIRECT of term 2^63 to ADDR after AUTH
 *   high-term         AUTH_OK and GRANTS at term 2^63, then it closes
 *
 * Grants are of 300 per second for every flow asked. "ready" on stderr
 * once it listens; one line per frame it sends.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "util.h"

#define HIGH_TERM (1ULL << 63)

static uint8_t in[SL_PROTO_MAX_FRAME], out[SL_PROTO_MAX_FRAME];
static uint64_t end_ns;
/* as many as a frame holds: more than a SYNC can carry reports */
#define MAX_GRANTS                                                          \
	((SL_PROTO_MAX_FRAME - SL_PROTO_HDR_LEN - SL_PROTO_GRANTS_FIXED -   \
	  SL_PROTO_SEAL_LEN) / SL_PROTO_GRANT_LEN)
static struct sl_flow_grant grants[MAX_GRANTS];

/* One frame into in[]; its length, 0 when the peer is gone. */
static size_t recv_frame(int fd, struct sl_msg *m)
{
	uint32_t len = 0;
	size_t got = 0;

	while (got < 4 || sl_proto_frame_len(in, got, &len) || got < len) {
		ssize_t r = recv(fd, in + got, sizeof(in) - got, 0);

		if (r <= 0)
			return 0;
		got += r;
	}
	return sl_proto_decode(in, len, m) ? 0 : len;
}

static int send_frame(int fd, struct sl_proto_session *keys, size_t len,
		      const char *what)
{
	if (keys && sl_proto_seal(keys, out, sizeof(out), &len))
		return -1;
	fprintf(stderr, "rogue: %s sent\n", what);
	return send(fd, out, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static void serve(int fd, const char *mode, const char *ns,
		  const char *secret, const char *addr)
{
	bool high = !strcmp(mode, "high-term");
	uint64_t term = high ? HIGH_TERM : 1;
	uint8_t nonce[SL_PROTO_NONCE_LEN];
	struct sl_proto_session keys;
	const uint8_t *client_nonce;
	struct sl_msg m;
	size_t len, flen;
	char node[SL_PROTO_NAME_MAX + 1];

	if (!recv_frame(fd, &m) || m.type != SL_MSG_HELLO)
		return;
	client_nonce = m.hello.nonce;
	memcpy(node, m.hello.node, m.hello.node_len);
	node[m.hello.node_len] = 0;
	if (sl_proto_nonce(nonce) ||
	    sl_proto_session_init(&keys, false, secret, strlen(secret),
				  client_nonce, nonce, ns, strlen(ns), node,
				  strlen(node)))
		return;
	sl_proto_put_challenge(out, sizeof(out), m.req_id, nonce, &len);
	if (send_frame(fd, NULL, len, "CHALLENGE"))
		return;
	flen = recv_frame(fd, &m);
	if (!flen || m.type != SL_MSG_AUTH || sl_proto_open(&keys, in, flen, &m))
		return;
	if (!strcmp(mode, "redirect")) {
		sl_proto_put_redirect(out, sizeof(out), m.req_id, HIGH_TERM,
				      addr, &len);
		send_frame(fd, &keys, len, "REDIRECT of term 2^63");
		return;
	}
	sl_proto_put_auth_ok(out, sizeof(out), m.req_id, 1000, 100, term, &len);
	if (!strcmp(mode, "unsealed-auth-ok")) {
		send_frame(fd, NULL, len, "AUTH_OK unsealed");
		return;
	}
	if (send_frame(fd, &keys, len, "AUTH_OK"))
		return;
	for (int syncs = 0; (!high || syncs < 3) && sl_now_ns() < end_ns;
	     syncs++) {
		uint32_t n;

		flen = recv_frame(fd, &m);
		if (!flen || m.type != SL_MSG_SYNC ||
		    sl_proto_open(&keys, in, flen, &m))
			return;
		for (n = 0; n < m.sync.n; n++) {
			struct sl_flow_report r;

			sl_proto_report(&m, n, &r);
			grants[n] = (struct sl_flow_grant){
				.flow_id = r.flow_id, .ttl_ms = 1000,
				.grant = 300, .holders = 1 };
		}
		for (; !strcmp(mode, "extra") && n && n < MAX_GRANTS; n++)
			grants[n] = grants[n - 1];
		sl_proto_put_grants(out, sizeof(out), m.req_id, 0, 1000, term,
				    grants, n, &len);
		if (!strcmp(mode, "unsealed-grants")) {
			if (send_frame(fd, NULL, len, "GRANTS unsealed"))
				return;
			continue;
		}
		if (send_frame(fd, &keys, len, "GRANTS"))
			return;
	}
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "extra", "unsealed-grants",
		"unsealed-auth-ok", "redirect", "high-term" };
	struct sockaddr_storage ss;
	socklen_t sslen;
	uint32_t secs;
	struct timeval tv = { .tv_sec = 1 };
	bool known = false;
	int one = 1, lfd;

	for (size_t i = 0; argc >= 6 && i < ARRAY_SIZE(modes); i++)
		known |= !strcmp(argv[1], modes[i]);
	if (!known || sl_parse_sockaddr(argv[2], &ss, &sslen) ||
	    sl_parse_u32(argv[5], 1, 600, &secs) ||
	    (!strcmp(argv[1], "redirect") && argc < 7)) {
		fprintf(stderr, "usage: rogue_tokend MODE LISTEN NAMESPACE "
				"SECRET SECONDS [ADDR]\n");
		return 2;
	}
	lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&ss, sslen) ||
	    listen(lfd, 16)) {
		perror("rogue_tokend: listen");
		return 1;
	}
	fprintf(stderr, "ready\n");
	end_ns = sl_now_ns() + secs * NSEC_PER_SEC;
	while (sl_now_ns() < end_ns) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 100) <= 0)
			continue;
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		serve(fd, argv[1], argv[3], argv[4], argc > 6 ? argv[6] : "");
		close(fd);
	}
	return 0;
}
