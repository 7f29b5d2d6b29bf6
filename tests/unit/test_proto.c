/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the token protocol frames and MAC (user/proto.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"

static uint8_t buf[SL_PROTO_MAX_FRAME + 64];

/* A raw frame: header with the given fields, then body bytes. */
static size_t raw(uint32_t len, uint8_t ver, uint8_t type, uint16_t rsvd,
		  uint32_t req, const void *body, size_t body_len)
{
	buf[0] = len >> 24;
	buf[1] = len >> 16;
	buf[2] = len >> 8;
	buf[3] = len;
	buf[4] = ver;
	buf[5] = type;
	buf[6] = rsvd >> 8;
	buf[7] = rsvd;
	buf[8] = req >> 24;
	buf[9] = req >> 16;
	buf[10] = req >> 8;
	buf[11] = req;
	memcpy(buf + SL_PROTO_HDR_LEN, body, body_len);
	return SL_PROTO_HDR_LEN + body_len;
}

/* A well-formed frame of type with body: length field matches. */
static size_t frame(uint8_t type, const void *body, size_t body_len)
{
	return raw(SL_PROTO_HDR_LEN + body_len, SL_PROTO_VERSION, type, 0, 9,
		   body, body_len);
}

static int decode(size_t len)
{
	struct sl_msg m;

	return sl_proto_decode(buf, len, &m);
}

static void test_roundtrip_handshake(void **state)
{
	uint8_t nonce[SL_PROTO_NONCE_LEN], mac[SL_PROTO_MAC_LEN];
	struct sl_msg m;
	size_t len;

	(void)state;
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "web",
					    "node-A.example:1", &len), 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_HELLO);
	assert_int_equal(m.req_id, 1);
	assert_int_equal(m.hello.ns_len, 3);
	assert_memory_equal(m.hello.ns, "web", 3);
	assert_int_equal(m.hello.node_len, 16);
	assert_memory_equal(m.hello.node, "node-A.example:1", 16);

	for (int i = 0; i < SL_PROTO_NONCE_LEN; i++)
		nonce[i] = i * 7;
	assert_int_equal(sl_proto_put_challenge(buf, sizeof(buf), 2, nonce,
						&len), 0);
	assert_int_equal(len, SL_PROTO_HDR_LEN + SL_PROTO_NONCE_LEN);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_CHALLENGE);
	assert_memory_equal(m.challenge.nonce, nonce, sizeof(nonce));

	memset(mac, 0xa5, sizeof(mac));
	assert_int_equal(sl_proto_put_auth(buf, sizeof(buf), 3, mac, &len), 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_AUTH);
	assert_memory_equal(m.auth.mac, mac, sizeof(mac));

	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 4, 1000, 100,
					      &len), 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_AUTH_OK);
	assert_int_equal(m.auth_ok.ttl_ms, 1000);
	assert_int_equal(m.auth_ok.sync_ms, 100);

	assert_int_equal(sl_proto_put_error(buf, sizeof(buf), 0xffffffff,
					    SL_ERR_AUTH, &len), 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_ERROR);
	assert_int_equal(m.req_id, 0xffffffff);
	assert_int_equal(m.error.code, SL_ERR_AUTH);
}

static void test_roundtrip_sync_grants(void **state)
{
	struct sl_flow_report r[3] = {
		{1, 10, 5, 7},
		{0xffffffff, UINT64_MAX, 1ULL << 40, 3},
		{42, 0, 0, 0},
	}, got;
	struct sl_flow_grant g[2] = {
		{7, 1000, 123456789012ULL, 17, SL_GRANT_KEEP},
		{8, 0, 0, 0, SL_GRANT_UNKNOWN},
	}, gg;
	struct sl_msg m;
	size_t len;

	(void)state;
	assert_int_equal(sl_proto_put_sync(buf, sizeof(buf), 77, r, 3, &len),
			 0);
	assert_int_equal(len, SL_PROTO_HDR_LEN + SL_PROTO_SYNC_FIXED +
				      3 * SL_PROTO_REPORT_LEN);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_SYNC);
	assert_int_equal(m.req_id, 77);
	assert_int_equal(m.sync.n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		sl_proto_report(&m, i, &got);
		assert_int_equal(got.flow_id, r[i].flow_id);
		assert_true(got.demand == r[i].demand);
		assert_true(got.used == r[i].used);
		assert_true(got.held == r[i].held);
	}

	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 77, SL_SRV_KEEP,
					     1000, g, 2, &len), 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_GRANTS);
	assert_int_equal(m.grants.flags, SL_SRV_KEEP);
	assert_int_equal(m.grants.ttl_ms, 1000);
	assert_int_equal(m.grants.n, 2);
	for (uint32_t i = 0; i < 2; i++) {
		sl_proto_grant(&m, i, &gg);
		assert_int_equal(gg.flow_id, g[i].flow_id);
		assert_int_equal(gg.ttl_ms, g[i].ttl_ms);
		assert_true(gg.grant == g[i].grant);
		assert_int_equal(gg.holders, g[i].holders);
		assert_int_equal(gg.flags, g[i].flags);
	}

	/* An empty list is valid both ways. */
	assert_int_equal(sl_proto_put_sync(buf, sizeof(buf), 1, r, 0, &len),
			 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.sync.n, 0);
}

static void test_frame_len(void **state)
{
	uint32_t len = 0;

	(void)state;
	raw(SL_PROTO_HDR_LEN, 1, SL_MSG_ERROR, 0, 0, "", 0);
	/* short length prefix: wait for more */
	assert_int_equal(sl_proto_frame_len(buf, 3, &len), -EAGAIN);
	assert_int_equal(sl_proto_frame_len(buf, 0, &len), -EAGAIN);
	assert_int_equal(sl_proto_frame_len(buf, 4, &len), 0);
	assert_int_equal(len, SL_PROTO_HDR_LEN);
	/* shorter than a header */
	raw(SL_PROTO_HDR_LEN - 1, 1, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(sl_proto_frame_len(buf, 4, &len), -EBADMSG);
	raw(0, 1, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(sl_proto_frame_len(buf, 4, &len), -EBADMSG);
	/* oversize */
	raw(SL_PROTO_MAX_FRAME + 1, 1, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(sl_proto_frame_len(buf, 4, &len), -EMSGSIZE);
	raw(0xffffffff, 1, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(sl_proto_frame_len(buf, 4, &len), -EMSGSIZE);
	raw(SL_PROTO_MAX_FRAME, 1, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(sl_proto_frame_len(buf, 4, &len), 0);
}

static void test_malformed_header(void **state)
{
	static const uint8_t err_body[4] = {0, 1, 0, 0};
	size_t n;

	(void)state;
	/* the good frame, as a control */
	n = frame(SL_MSG_ERROR, err_body, 4);
	assert_int_equal(decode(n), 0);
	/* buffer shorter than the length field says (truncated) */
	assert_int_equal(decode(n - 1), -EBADMSG);
	/* length field shorter than the buffer (trailing bytes) */
	n = raw(SL_PROTO_HDR_LEN + 3, 1, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EBADMSG);
	/* fewer bytes than a length field, than a header */
	assert_int_equal(decode(2), -EBADMSG);
	n = raw(8, 1, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(decode(8), -EBADMSG);
	/* oversize */
	n = raw(SL_PROTO_MAX_FRAME + 4, 1, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(SL_PROTO_MAX_FRAME + 4), -EMSGSIZE);
	/* bad version */
	n = raw(SL_PROTO_HDR_LEN + 4, 2, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EPROTONOSUPPORT);
	n = raw(SL_PROTO_HDR_LEN + 4, 0, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EPROTONOSUPPORT);
	/* unknown types */
	n = frame(0, err_body, 4);
	assert_int_equal(decode(n), -EPROTO);
	n = frame(SL_MSG_ERROR + 1, err_body, 4);
	assert_int_equal(decode(n), -EPROTO);
	n = frame(0xff, "", 0);
	assert_int_equal(decode(n), -EPROTO);
	/* reserved header field */
	n = raw(SL_PROTO_HDR_LEN + 4, 1, SL_MSG_ERROR, 1, 0, err_body, 4);
	assert_int_equal(decode(n), -EBADMSG);
}

static void test_malformed_hello(void **state)
{
	static const struct {
		const char *what;
		const char *body;
		size_t len;
	} cases[] = {
		{"empty body", "", 0},
		{"namespace length past the end", "\x05web", 4},
		{"no node length", "\x03web", 4},
		{"node truncated", "\x03web\x04nod", 8},
		{"trailing byte", "\x03web\x01n!", 7},
		{"empty namespace", "\x00\x01n", 3},
		{"empty node", "\x03web\x00", 5},
		{"space in node", "\x03web\x02n ", 7},
		{"NUL in namespace", "\x03w\x00" "b\x01n", 6},
		{"newline in node", "\x03web\x02n\n", 7},
	};
	uint8_t body[80];
	size_t n;

	(void)state;
	n = frame(SL_MSG_HELLO, "\x03web\x01n", 6);
	assert_int_equal(decode(n), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = frame(SL_MSG_HELLO, cases[i].body, cases[i].len);
		if (decode(n) != -EBADMSG)
			fail_msg("HELLO %s: decoded as %d", cases[i].what,
				 decode(n));
	}
	/* 64-byte name: one over the limit */
	body[0] = 64;
	memset(body + 1, 'a', 64);
	body[65] = 1;
	body[66] = 'n';
	n = frame(SL_MSG_HELLO, body, 67);
	assert_int_equal(decode(n), -EBADMSG);
	body[0] = 63;
	body[64] = 1;
	body[65] = 'n';
	n = frame(SL_MSG_HELLO, body, 66);
	assert_int_equal(decode(n), 0);
}

static void test_malformed_fixed(void **state)
{
	uint8_t body[64] = {0};
	size_t n;

	(void)state;
	/* each fixed-size body one byte short and one byte long */
	static const struct {
		uint8_t type;
		size_t len;
	} fixed[] = {
		{SL_MSG_CHALLENGE, SL_PROTO_NONCE_LEN},
		{SL_MSG_AUTH, SL_PROTO_MAC_LEN},
		{SL_MSG_AUTH_OK, 8},
		{SL_MSG_ERROR, 4},
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		n = frame(fixed[i].type, body, fixed[i].len);
		assert_int_equal(decode(n), 0);
		n = frame(fixed[i].type, body, fixed[i].len - 1);
		assert_int_equal(decode(n), -EBADMSG);
		n = frame(fixed[i].type, body, fixed[i].len + 1);
		assert_int_equal(decode(n), -EBADMSG);
		n = frame(fixed[i].type, body, 0);
		assert_int_equal(decode(n), -EBADMSG);
	}
	/* ERROR's reserved half */
	body[3] = 1;
	n = frame(SL_MSG_ERROR, body, 4);
	assert_int_equal(decode(n), -EBADMSG);
}

/* SYNC body: count, then bytes entry bytes. */
static size_t sync_frame(uint32_t count, size_t entries_bytes)
{
	static uint8_t body[4 + 4 * SL_PROTO_REPORT_LEN];

	memset(body, 0, sizeof(body));
	body[0] = count >> 24;
	body[1] = count >> 16;
	body[2] = count >> 8;
	body[3] = count;
	return frame(SL_MSG_SYNC, body, 4 + entries_bytes);
}

static void test_malformed_sync(void **state)
{
	(void)state;
	assert_int_equal(decode(sync_frame(2, 2 * SL_PROTO_REPORT_LEN)), 0);
	/* count larger than the entries present */
	assert_int_equal(decode(sync_frame(3, 2 * SL_PROTO_REPORT_LEN)),
			 -EBADMSG);
	/* counts that would overflow size_t or u32 arithmetic */
	assert_int_equal(decode(sync_frame(0xffffffff, SL_PROTO_REPORT_LEN)),
			 -EBADMSG);
	assert_int_equal(decode(sync_frame(0x80000000, 0)), -EBADMSG);
	assert_int_equal(decode(sync_frame(0x92492493, SL_PROTO_REPORT_LEN)),
			 -EBADMSG);
	/* count smaller: trailing entries */
	assert_int_equal(decode(sync_frame(1, 2 * SL_PROTO_REPORT_LEN)),
			 -EBADMSG);
	/* truncated entry, trailing partial entry */
	assert_int_equal(decode(sync_frame(1, SL_PROTO_REPORT_LEN - 1)),
			 -EBADMSG);
	assert_int_equal(decode(sync_frame(1, SL_PROTO_REPORT_LEN + 1)),
			 -EBADMSG);
	/* no count at all */
	assert_int_equal(decode(frame(SL_MSG_SYNC, "\0\0\0", 3)), -EBADMSG);
}

static void test_malformed_grants(void **state)
{
	struct sl_flow_grant g = {1, 1000, 5, 1, 0};
	size_t len;

	(void)state;
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0, 1000, &g,
					     1, &len), 0);
	assert_int_equal(decode(len), 0);
	/* unknown server flag */
	buf[SL_PROTO_HDR_LEN + 1] = 0x80;
	assert_int_equal(decode(len), -EBADMSG);
	buf[SL_PROTO_HDR_LEN + 1] = 0;
	/* reserved */
	buf[SL_PROTO_HDR_LEN + 3] = 1;
	assert_int_equal(decode(len), -EBADMSG);
	buf[SL_PROTO_HDR_LEN + 3] = 0;
	/* unknown entry flag */
	buf[len - 1] = 0x80;
	assert_int_equal(decode(len), -EBADMSG);
	buf[len - 1] = 0;
	/* count overflow */
	buf[SL_PROTO_HDR_LEN + 8] = 0xff;
	assert_int_equal(decode(len), -EBADMSG);
	buf[SL_PROTO_HDR_LEN + 8] = 0;
	/* truncated fixed part */
	assert_int_equal(decode(frame(SL_MSG_GRANTS, buf + SL_PROTO_HDR_LEN,
				      SL_PROTO_GRANTS_FIXED - 1)), -EBADMSG);
}

static void test_encode_limits(void **state)
{
	static struct sl_flow_report r[SL_PROTO_MAX_REPORTS + 1];
	static struct sl_flow_grant g[SL_PROTO_MAX_REPORTS + 1];
	struct sl_msg m;
	size_t len;

	(void)state;
	/* the largest SYNC fits a frame; its answer too; one more does not */
	assert_int_equal(sl_proto_put_sync(buf, sizeof(buf), 1, r,
					   SL_PROTO_MAX_REPORTS, &len), 0);
	assert_true(len <= SL_PROTO_MAX_FRAME);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(sl_proto_put_sync(buf, sizeof(buf), 1, r,
					   SL_PROTO_MAX_REPORTS + 1, &len),
			 -EMSGSIZE);
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0, 0, g,
					     SL_PROTO_MAX_REPORTS, &len), 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	/* caller's buffer too small */
	assert_int_equal(sl_proto_put_sync(buf, 40, 1, r, 2, &len), -EMSGSIZE);
	assert_int_equal(sl_proto_put_error(buf, SL_PROTO_HDR_LEN + 3, 1, 1,
					    &len), -EMSGSIZE);
	/* values the decoder would refuse */
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "", "n",
					    &len), -EINVAL);
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "w b", "n",
					    &len), -EINVAL);
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0x10, 0, g,
					     0, &len), -EINVAL);
	g[0].flags = 0x100;
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0, 0, g, 1,
					     &len), -EINVAL);
}

static void test_auth_mac(void **state)
{
	/* HMAC-SHA256("sekrit", 00..1f || 3 "web" || 6 "node-a"), computed
	 * independently with Python's hmac module. */
	static const uint8_t want[SL_PROTO_MAC_LEN] = {
		0x0c, 0x00, 0xc4, 0xd8, 0x75, 0x7d, 0x4c, 0x1e,
		0xd4, 0xe8, 0x87, 0x14, 0x89, 0x5d, 0xf7, 0x74,
		0x0e, 0xc3, 0x8b, 0x47, 0x72, 0x8d, 0xa7, 0xed,
		0xa2, 0x59, 0xff, 0xe1, 0x36, 0x60, 0xa7, 0xe7,
	};
	uint8_t nonce[SL_PROTO_NONCE_LEN], mac[SL_PROTO_MAC_LEN];
	uint8_t n1[SL_PROTO_NONCE_LEN], n2[SL_PROTO_NONCE_LEN];

	(void)state;
	for (int i = 0; i < SL_PROTO_NONCE_LEN; i++)
		nonce[i] = i;
	assert_int_equal(sl_proto_auth_mac("sekrit", 6, nonce, "web", 3,
					   "node-a", 6, mac), 0);
	assert_memory_equal(mac, want, sizeof(want));
	assert_int_equal(sl_proto_auth_check("sekrit", 6, nonce, "web", 3,
					     "node-a", 6, mac), 0);
	/* wrong secret, other nonce, other namespace, shifted boundary */
	assert_int_equal(sl_proto_auth_check("sekriT", 6, nonce, "web", 3,
					     "node-a", 6, mac), -EACCES);
	nonce[31] ^= 1;
	assert_int_equal(sl_proto_auth_check("sekrit", 6, nonce, "web", 3,
					     "node-a", 6, mac), -EACCES);
	nonce[31] ^= 1;
	assert_int_equal(sl_proto_auth_check("sekrit", 6, nonce, "weB", 3,
					     "node-a", 6, mac), -EACCES);
	assert_int_equal(sl_proto_auth_mac("sekrit", 6, nonce, "webn", 4,
					   "ode-a", 5, n1), 0);
	assert_memory_not_equal(n1, mac, sizeof(mac));
	mac[0] ^= 0x80;
	assert_int_equal(sl_proto_auth_check("sekrit", 6, nonce, "web", 3,
					     "node-a", 6, mac), -EACCES);
	assert_int_equal(sl_proto_auth_mac("sekrit", 6, nonce, "", 0, "n", 1,
					   mac), -EINVAL);

	assert_int_equal(sl_proto_nonce(n1), 0);
	assert_int_equal(sl_proto_nonce(n2), 0);
	assert_memory_not_equal(n1, n2, sizeof(n1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_handshake),
		cmocka_unit_test(test_roundtrip_sync_grants),
		cmocka_unit_test(test_frame_len),
		cmocka_unit_test(test_malformed_header),
		cmocka_unit_test(test_malformed_hello),
		cmocka_unit_test(test_malformed_fixed),
		cmocka_unit_test(test_malformed_sync),
		cmocka_unit_test(test_malformed_grants),
		cmocka_unit_test(test_encode_limits),
		cmocka_unit_test(test_auth_mac),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
