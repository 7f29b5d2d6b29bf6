/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for the token protocol decoder: any input either
 * fails to decode or decodes to a message that encodes back to the very
 * same bytes, with every entry readable.
 */
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
	uint32_t i;

	switch (m->type) {
	case SL_MSG_HELLO:
		memcpy(ns, m->hello.ns, m->hello.ns_len);
		ns[m->hello.ns_len] = '\0';
		memcpy(node, m->hello.node, m->hello.node_len);
		node[m->hello.node_len] = '\0';
		return sl_proto_put_hello(out, sizeof(out), m->req_id, ns, node,
					  len);
	case SL_MSG_CHALLENGE:
		return sl_proto_put_challenge(out, sizeof(out), m->req_id,
					      m->challenge.nonce, len);
	case SL_MSG_AUTH:
		return sl_proto_put_auth(out, sizeof(out), m->req_id,
					 m->auth.mac, len);
	case SL_MSG_AUTH_OK:
		return sl_proto_put_auth_ok(out, sizeof(out), m->req_id,
					    m->auth_ok.ttl_ms,
					    m->auth_ok.sync_ms, len);
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
					   grants, m->grants.n, len);
	case SL_MSG_ERROR:
		return sl_proto_put_error(out, sizeof(out), m->req_id,
					  m->error.code, len);
	}
	abort(); /* decode accepted a type it does not know */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_msg m;
	uint32_t flen;
	size_t len;

	/* As a stream reader sees it: the length first, then the frame. */
	if (sl_proto_frame_len(data, size, &flen) == 0 && flen <= size &&
	    sl_proto_decode(data, flen, &m) == 0) {
		if (reencode(&m, &len) || len != flen ||
		    memcmp(out, data, len))
			abort();
	}
	/* And the whole input as one frame. */
	if (sl_proto_decode(data, size, &m) == 0) {
		if (reencode(&m, &len) || len != size ||
		    memcmp(out, data, len))
			abort();
	}
	return 0;
}
