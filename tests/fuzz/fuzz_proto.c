/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for the token protocol decoder: any input either
 * fails to decode or decodes to a message that encodes back to the very
 * same bytes, seal included, with every entry readable; and a seal that
 * opens under a session's keys is the one that session would write.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static uint8_t out[SL_PROTO_MAX_FRAME];
static struct sl_flow_report reports[SL_PROTO_MAX_REPORTS];
static struct sl_flow_grant grants[SL_PROTO_MAX_REPORTS + 1];

static int reencode(const struct sl_msg *m, size_t *len)
{
	char ns[SL_PROTO_NAME_MAX + 1], node[SL_PROTO_NAME_MAX + 1];
	char addr[SL_PROTO_ADDR_MAX + 1];
	uint32_t i;

	switch (m->type) {
	case SL_MSG_HELLO:
		memcpy(ns, m->hello.ns, m->hello.ns_len);
		ns[m->hello.ns_len] = '\0';
		memcpy(node, m->hello.node, m->hello.node_len);
		node[m->hello.node_len] = '\0';
		return sl_proto_put_hello(out, sizeof(out), m->req_id, ns, node,
					  m->hello.nonce, len);
	case SL_MSG_CHALLENGE:
		return sl_proto_put_challenge(out, sizeof(out), m->req_id,
					      m->challenge.nonce, len);
	case SL_MSG_AUTH:
		return sl_proto_put_auth(out, sizeof(out), m->req_id, len);
	case SL_MSG_AUTH_OK:
		return sl_proto_put_auth_ok(out, sizeof(out), m->req_id,
					    m->auth_ok.ttl_ms,
					    m->auth_ok.sync_ms, m->auth_ok.term,
					    len);
	case SL_MSG_SYNC:
		for (i = 0; i < m->sync.n; i++)
			sl_proto_report(m, i, &reports[i]);
		return sl_proto_put_sync(out, sizeof(out), m->req_id, reports,
					 m->sync.n, len);
	case SL_MSG_GRANTS:
		for (i = 0; i < m->grants.n; i++)
			sl_proto_grant(m, i, &grants[i]);
		return sl_proto_put_grants(out, sizeof(out), m->req_id,
					   m->grants.flags, m->grants.ttl_ms,
					   m->grants.term, grants, m->grants.n,
					   len);
	case SL_MSG_REDIRECT:
		memcpy(addr, m->redirect.addr, m->redirect.addr_len);
		addr[m->redirect.addr_len] = '\0';
		return sl_proto_put_redirect(out, sizeof(out), m->req_id,
					     m->redirect.term, addr, len);
	case SL_MSG_ERROR:
		return sl_proto_put_error(out, sizeof(out), m->req_id,
					  m->error.code, len);
	}
	abort(); /* decode accepted a type it does not know */
}

/* The body again, then the seal as decoded: flag, length, seq, MAC. */
static int reencode_frame(const struct sl_msg *m, size_t *len)
{
	int ret = reencode(m, len);

	if (ret || !m->sealed)
		return ret;
	if (*len + SL_PROTO_SEAL_LEN > sizeof(out))
		return -EMSGSIZE;
	out[7] |= SL_FRAME_SEALED;
	for (int i = 0; i < 8; i++)
		out[*len + i] = m->seq >> (56 - 8 * i);
	memcpy(out + *len + 8, m->mac, SL_PROTO_MAC_LEN);
	*len += SL_PROTO_SEAL_LEN;
	out[0] = *len >> 24;
	out[1] = *len >> 16;
	out[2] = *len >> 8;
	out[3] = *len;
	return 0;
}

static void check(const uint8_t *data, size_t size)
{
	static struct sl_proto_session keys;
	static const uint8_t nonce[SL_PROTO_NONCE_LEN];
	struct sl_msg m;
	size_t len;

	if (sl_proto_decode(data, size, &m))
		return;
	if (reencode_frame(&m, &len) || len != size || memcmp(out, data, len))
		abort();
	if (!m.sealed)
		return;
	/* The client's keys for a fixed session, reset to the frame's
	 * number: a seal opens only as the same session would write it. */
	if (sl_proto_session_init(&keys, false, "k", 1, nonce, nonce, "n", 1,
				  "n", 1))
		abort();
	keys.rx_seq = m.seq;
	if (sl_proto_open(&keys, data, size, &m) == 0) {
		struct sl_proto_session tx;

		if (sl_proto_session_init(&tx, true, "k", 1, nonce, nonce, "n",
					  1, "n", 1) ||
		    reencode(&m, &len))
			abort();
		tx.tx_seq = m.seq;
		if (sl_proto_seal(&tx, out, sizeof(out), &len) || len != size ||
		    memcmp(out, data, size))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t flen;

	/* As a stream reader sees it: the length first, then the frame. */
	if (sl_proto_frame_len(data, size, &flen) == 0 && flen <= size)
		check(data, flen);
	/* And the whole input as one frame. */
	check(data, size);
	return 0;
}
