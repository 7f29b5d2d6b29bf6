/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the token protocol frames and seals (user/lib/proto.c). */
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

static struct sl_proto_session test_keys;

/* Seal the frame of len bytes in buf as the next of a session. */
static size_t seal(size_t len)
{
	assert_int_equal(sl_proto_seal(&test_keys, buf, sizeof(buf), &len), 0);
	return len;
}

/* Types that travel sealed (the decoder reads a seal, does not check it). */
static bool sealed_type(uint8_t type)
{
	return type >= SL_MSG_AUTH && type != SL_MSG_ERROR;
}

/* A well-formed frame of type with body: length field matches, sealed
 * where the type must be. */
static size_t frame(uint8_t type, const void *body, size_t body_len)
{
	size_t n = raw(SL_PROTO_HDR_LEN + body_len, SL_PROTO_VERSION, type, 0,
		       9, body, body_len);

	return sealed_type(type) ? seal(n) : n;
}

static int decode(size_t len)
{
	struct sl_msg m;

	return sl_proto_decode(buf, len, &m);
}

static void test_roundtrip_handshake(void **state)
{
	uint8_t nonce[SL_PROTO_NONCE_LEN];
	struct sl_msg m;
	size_t len;

	(void)state;
	for (int i = 0; i < SL_PROTO_NONCE_LEN; i++)
		nonce[i] = i * 7;
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "web",
					    "node-A.example:1", nonce, &len),
			 0);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_HELLO);
	assert_int_equal(m.req_id, 1);
	assert_false(m.sealed);
	assert_int_equal(m.hello.ns_len, 3);
	assert_memory_equal(m.hello.ns, "web", 3);
	assert_int_equal(m.hello.node_len, 16);
	assert_memory_equal(m.hello.node, "node-A.example:1", 16);
	assert_memory_equal(m.hello.nonce, nonce, sizeof(nonce));

	assert_int_equal(sl_proto_put_challenge(buf, sizeof(buf), 2, nonce,
						&len), 0);
	assert_int_equal(len, SL_PROTO_HDR_LEN + SL_PROTO_NONCE_LEN);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_CHALLENGE);
	assert_memory_equal(m.challenge.nonce, nonce, sizeof(nonce));

	assert_int_equal(sl_proto_put_auth(buf, sizeof(buf), 3, &len), 0);
	assert_int_equal(len, SL_PROTO_HDR_LEN);
	len = seal(len);
	assert_int_equal(len, SL_PROTO_HDR_LEN + SL_PROTO_SEAL_LEN);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(m.type, SL_MSG_AUTH);
	assert_true(m.sealed);

	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 4, 1000, 100,
					      0x0102030405060708ULL, &len), 0);
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
	assert_true(m.auth_ok.term == 0x0102030405060708ULL);
	assert_int_equal(m.type, SL_MSG_AUTH_OK);
	assert_int_equal(m.auth_ok.ttl_ms, 1000);
	assert_int_equal(m.auth_ok.sync_ms, 100);

	assert_int_equal(sl_proto_put_redirect(buf, sizeof(buf), 5, 42,
					       "[2001:db8::7]:7070", &len), 0);
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
	assert_int_equal(m.type, SL_MSG_REDIRECT);
	assert_true(m.redirect.term == 42);
	assert_int_equal(m.redirect.addr_len, 18);
	assert_memory_equal(m.redirect.addr, "[2001:db8::7]:7070", 18);
	/* no leader known: an empty address */
	assert_int_equal(sl_proto_put_redirect(buf, sizeof(buf), 5, 0, "",
					       &len), 0);
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
	assert_int_equal(m.redirect.addr_len, 0);
	assert_int_equal(sl_proto_put_redirect(buf, sizeof(buf), 5, 0,
					       "a b:1", &len), -EINVAL);

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
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
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
					     1000, 99, g, 2, &len), 0);
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
	assert_int_equal(m.type, SL_MSG_GRANTS);
	assert_true(m.grants.term == 99);
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
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
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
	n = raw(SL_PROTO_HDR_LEN + 3, 2, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EBADMSG);
	/* fewer bytes than a length field, than a header */
	assert_int_equal(decode(2), -EBADMSG);
	n = raw(8, 2, SL_MSG_ERROR, 0, 0, "", 0);
	assert_int_equal(decode(8), -EBADMSG);
	/* oversize */
	n = raw(SL_PROTO_MAX_FRAME + 4, 2, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(SL_PROTO_MAX_FRAME + 4), -EMSGSIZE);
	/* bad version: 1 had no seals, 3 is not yet */
	n = raw(SL_PROTO_HDR_LEN + 4, 1, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EPROTONOSUPPORT);
	n = raw(SL_PROTO_HDR_LEN + 4, 3, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EPROTONOSUPPORT);
	n = raw(SL_PROTO_HDR_LEN + 4, 0, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), -EPROTONOSUPPORT);
	/* unknown types */
	n = frame(0, err_body, 4);
	assert_int_equal(decode(n), -EPROTO);
	n = frame(SL_MSG_REDIRECT + 1, err_body, 4);
	assert_int_equal(decode(n), -EPROTO);
	n = frame(0xff, "", 0);
	assert_int_equal(decode(n), -EPROTO);
	/* unknown header flag */
	n = raw(SL_PROTO_HDR_LEN + 4, 2, SL_MSG_ERROR, 2, 0, err_body, 4);
	assert_int_equal(decode(n), -EBADMSG);
}

/* Which types must be sealed, and a seal's own bounds. */
static void test_malformed_seal(void **state)
{
	static const uint8_t err_body[4] = {0, 1, 0, 0};
	uint8_t nonce[SL_PROTO_NONCE_LEN] = {0};
	struct sl_msg m;
	size_t n;

	(void)state;
	/* HELLO and CHALLENGE come before the keys: never sealed */
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "w", "n",
					    nonce, &n), 0);
	assert_int_equal(decode(n), 0);
	assert_int_equal(decode(seal(n)), -EBADMSG);
	assert_int_equal(sl_proto_put_challenge(buf, sizeof(buf), 1, nonce,
						&n), 0);
	assert_int_equal(decode(seal(n)), -EBADMSG);
	/* the others after them: always */
	for (uint8_t t = SL_MSG_AUTH; t <= SL_MSG_GRANTS; t++) {
		size_t body = t == SL_MSG_AUTH_OK ? 16 : t == SL_MSG_SYNC ? 4
			    : t == SL_MSG_GRANTS ? SL_PROTO_GRANTS_FIXED : 0;
		uint8_t zero[SL_PROTO_GRANTS_FIXED] = {0};

		n = raw(SL_PROTO_HDR_LEN + body, 2, t, 0, 1, zero, body);
		if (decode(n) != -EPERM)
			fail_msg("type %u unsealed: not refused as unsealed", t);
		if (decode(seal(n)) != 0)
			fail_msg("type %u sealed: refused", t);
	}
	/* ERROR either way: before the keys it cannot be sealed */
	n = raw(SL_PROTO_HDR_LEN + 4, 2, SL_MSG_ERROR, 0, 0, err_body, 4);
	assert_int_equal(decode(n), 0);
	assert_int_equal(sl_proto_decode(buf, seal(n), &m), 0);
	assert_true(m.sealed);
	assert_int_equal(m.error.code, 1);
	/* the flag set, fewer bytes than a seal */
	n = raw(SL_PROTO_HDR_LEN + 39, 2, SL_MSG_AUTH, SL_FRAME_SEALED, 0,
		nonce, 32);
	memset(buf + SL_PROTO_HDR_LEN + 32, 0, 7);
	assert_int_equal(decode(SL_PROTO_HDR_LEN + 39), -EBADMSG);
	/* a body that is one byte off once the seal is taken away */
	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 1, 1, 1, 0, &n),
			 0);
	n = seal(n);
	buf[3]++;
	assert_int_equal(decode(n + 1), -EBADMSG);
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
	uint8_t body[80 + SL_PROTO_NONCE_LEN] = {0};
	size_t n;

	(void)state;
	/* every case ends in a nonce; the control decodes */
	memcpy(body, "\x03web\x01n", 6);
	assert_int_equal(decode(frame(SL_MSG_HELLO, body,
				      6 + SL_PROTO_NONCE_LEN)), 0);
	/* the nonce one byte short, one byte long */
	assert_int_equal(decode(frame(SL_MSG_HELLO, body,
				      5 + SL_PROTO_NONCE_LEN)), -EBADMSG);
	assert_int_equal(decode(frame(SL_MSG_HELLO, body,
				      7 + SL_PROTO_NONCE_LEN)), -EBADMSG);
	assert_int_equal(decode(frame(SL_MSG_HELLO, body, 6)), -EBADMSG);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(body, 0, sizeof(body));
		memcpy(body, cases[i].body, cases[i].len);
		n = frame(SL_MSG_HELLO, body,
			  cases[i].len + SL_PROTO_NONCE_LEN);
		if (decode(n) != -EBADMSG)
			fail_msg("HELLO %s: decoded as %d", cases[i].what,
				 decode(n));
	}
	/* 64-byte name: one over the limit */
	memset(body, 0, sizeof(body));
	body[0] = 64;
	memset(body + 1, 'a', 64);
	body[65] = 1;
	body[66] = 'n';
	n = frame(SL_MSG_HELLO, body, 67 + SL_PROTO_NONCE_LEN);
	assert_int_equal(decode(n), -EBADMSG);
	memset(body, 0, sizeof(body));
	body[0] = 63;
	memset(body + 1, 'a', 63);
	body[64] = 1;
	body[65] = 'n';
	n = frame(SL_MSG_HELLO, body, 66 + SL_PROTO_NONCE_LEN);
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
		{SL_MSG_AUTH_OK, 16},
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
	/* AUTH has no body at all */
	assert_int_equal(decode(frame(SL_MSG_AUTH, body, 0)), 0);
	assert_int_equal(decode(frame(SL_MSG_AUTH, body, 1)), -EBADMSG);
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
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0, 1000, 0, &g,
					     1, &len), 0);
	len = seal(len);
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
	buf[len - SL_PROTO_SEAL_LEN - 1] = 0x80;
	assert_int_equal(decode(len), -EBADMSG);
	buf[len - SL_PROTO_SEAL_LEN - 1] = 0;
	/* count overflow */
	buf[SL_PROTO_HDR_LEN + 8] = 0xff;
	assert_int_equal(decode(len), -EBADMSG);
	buf[SL_PROTO_HDR_LEN + 8] = 0;
	/* truncated fixed part */
	assert_int_equal(decode(frame(SL_MSG_GRANTS, buf + SL_PROTO_HDR_LEN,
				      SL_PROTO_GRANTS_FIXED - 1)), -EBADMSG);
}

static void test_malformed_redirect(void **state)
{
	uint8_t body[16 + SL_PROTO_ADDR_MAX] = {0};

	(void)state;
	body[8] = 6;
	memcpy(body + 9, "h:7070", 6);
	assert_int_equal(decode(frame(SL_MSG_REDIRECT, body, 15)), 0);
	/* the address longer, shorter than its length says */
	assert_int_equal(decode(frame(SL_MSG_REDIRECT, body, 14)), -EBADMSG);
	assert_int_equal(decode(frame(SL_MSG_REDIRECT, body, 16)), -EBADMSG);
	/* no room for the term and length */
	assert_int_equal(decode(frame(SL_MSG_REDIRECT, body, 8)), -EBADMSG);
	/* a character no address has */
	body[10] = '/';
	assert_int_equal(decode(frame(SL_MSG_REDIRECT, body, 15)), -EBADMSG);
	/* the longest address */
	body[8] = SL_PROTO_ADDR_MAX;
	memset(body + 9, 'a', SL_PROTO_ADDR_MAX);
	assert_int_equal(decode(frame(SL_MSG_REDIRECT, body,
				      9 + SL_PROTO_ADDR_MAX)), 0);
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
	len = seal(len);
	assert_true(len <= SL_PROTO_MAX_FRAME);
	assert_int_equal(sl_proto_decode(buf, len, &m), 0);
	assert_int_equal(sl_proto_put_sync(buf, sizeof(buf), 1, r,
					   SL_PROTO_MAX_REPORTS + 1, &len),
			 -EMSGSIZE);
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0, 0, 0, g,
					     SL_PROTO_MAX_REPORTS, &len), 0);
	assert_int_equal(sl_proto_decode(buf, seal(len), &m), 0);
	/* no room for a seal: the frame stays as it was */
	assert_int_equal(sl_proto_put_error(buf, sizeof(buf), 1, 1, &len), 0);
	assert_int_equal(sl_proto_seal(&test_keys, buf, len + 39, &len),
			 -EMSGSIZE);
	assert_int_equal(len, SL_PROTO_HDR_LEN + 4);
	assert_int_equal(decode(len), 0);
	/* caller's buffer too small */
	assert_int_equal(sl_proto_put_sync(buf, 40, 1, r, 2, &len), -EMSGSIZE);
	assert_int_equal(sl_proto_put_error(buf, SL_PROTO_HDR_LEN + 3, 1, 1,
					    &len), -EMSGSIZE);
	/* values the decoder would refuse */
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "", "n",
					    buf, &len), -EINVAL);
	assert_int_equal(sl_proto_put_hello(buf, sizeof(buf), 1, "w b", "n",
					    buf, &len), -EINVAL);
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0x10, 0, 0, g,
					     0, &len), -EINVAL);
	g[0].flags = 0x100;
	assert_int_equal(sl_proto_put_grants(buf, sizeof(buf), 1, 0, 0, 0, g, 1,
					     &len), -EINVAL);
}

/* Both sides of one session, and a frame from one to the other. */
struct pair {
	struct sl_proto_session cli, srv;
};

static void pair_init(struct pair *p, const char *secret, const char *node)
{
	uint8_t cn[SL_PROTO_NONCE_LEN], sn[SL_PROTO_NONCE_LEN];

	for (int i = 0; i < SL_PROTO_NONCE_LEN; i++) {
		cn[i] = i;
		sn[i] = 0x20 + i;
	}
	assert_int_equal(sl_proto_session_init(&p->cli, true, secret,
					       strlen(secret), cn, sn, "web", 3,
					       "node-a", 6), 0);
	assert_int_equal(sl_proto_session_init(&p->srv, false, secret,
					       strlen(secret), cn, sn, "web", 3,
					       node, strlen(node)), 0);
}

static int open_buf(struct sl_proto_session *s, size_t len)
{
	struct sl_msg m;
	int ret = sl_proto_decode(buf, len, &m);

	return ret ? ret : sl_proto_open(s, buf, len, &m);
}

static void test_session(void **state)
{
	/* HKDF-SHA256(ikm "sekrit", salt 00..3f, info "sluice token protocol
	 * 2" 03 "web" 06 "node-a"): the client's key, then the AUTH frame
	 * (request 3) it seals first; computed independently with Python's
	 * hmac and hashlib (RFC 5869 by hand). */
	static const uint8_t want_key[SL_PROTO_KEY_LEN] = {
		0x25, 0x0a, 0xd1, 0x13, 0x4d, 0x24, 0x3f, 0x93, 0x0b, 0x6e, 0x64, 0x59, 0x83, 0xd9, 0x0e, 0x02, 0x57, 0x99, 0xae, 0xa6, 0xdd, 0xec, 0x28, 0x6d, 0x5b, 0xad, 0x48, 0xee, 0x10, 0x16, 0xf2, 0x4c
	};
	static const uint8_t want_auth[SL_PROTO_HDR_LEN + SL_PROTO_SEAL_LEN] = {
		0x00, 0x00, 0x00, 0x34, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe6, 0x02, 0xe5, 0x94, 0x91, 0xb8, 0xcb, 0xd7, 0xed, 0xa5, 0x95, 0x5f, 0xda, 0xc6, 0xdb, 0x8f, 0x6f, 0x66, 0x5d, 0x12, 0x8e, 0xb1, 0x9b, 0xa5, 0xe3, 0xb5, 0x99, 0xc3, 0x21, 0xbf, 0xe0, 0x9d
	};
	struct pair p, q;
	size_t len;

	(void)state;
	pair_init(&p, "sekrit", "node-a");
	assert_memory_equal(p.cli.tx_key, want_key, sizeof(want_key));
	assert_memory_equal(p.srv.rx_key, want_key, sizeof(want_key));
	assert_memory_not_equal(p.cli.tx_key, p.cli.rx_key, SL_PROTO_KEY_LEN);
	assert_int_equal(sl_proto_put_auth(buf, sizeof(buf), 3, &len), 0);
	assert_int_equal(sl_proto_seal(&p.cli, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, sizeof(want_auth));
	assert_memory_equal(buf, want_auth, sizeof(want_auth));
	assert_int_equal(open_buf(&p.srv, len), 0);

	/* replayed: the MAC is right, the number is not */
	assert_int_equal(open_buf(&p.srv, len), -ESTALE);
	/* every byte but the MAC's own tampered with, and a MAC bit */
	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 4, 1000, 100, 0,
					      &len), 0);
	assert_int_equal(sl_proto_seal(&p.cli, buf, sizeof(buf), &len), 0);
	for (size_t i = 0; i < len; i++) {
		struct sl_msg m;

		buf[i] ^= 0x01;
		if (!sl_proto_decode(buf, len, &m) &&
		    sl_proto_open(&p.srv, buf, len, &m) != -EACCES)
			fail_msg("byte %zu flipped: not refused", i);
		buf[i] ^= 0x01;
	}
	assert_int_equal(open_buf(&p.srv, len), 0);
	/* a frame sent back to its sender does not open (keys per side) */
	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 5, 1, 1, 0, &len),
			 0);
	assert_int_equal(sl_proto_seal(&p.srv, buf, sizeof(buf), &len), 0);
	assert_int_equal(open_buf(&p.srv, len), -EACCES);
	assert_int_equal(open_buf(&p.cli, len), 0);
	/* a dropped frame: the next does not open either */
	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 6, 1, 1, 0, &len),
			 0);
	assert_int_equal(sl_proto_seal(&p.srv, buf, sizeof(buf), &len), 0);
	assert_int_equal(sl_proto_put_auth_ok(buf, sizeof(buf), 7, 1, 1, 0, &len),
			 0);
	assert_int_equal(sl_proto_seal(&p.srv, buf, sizeof(buf), &len), 0);
	assert_int_equal(open_buf(&p.cli, len), -ESTALE);
	/* not sealed */
	assert_int_equal(sl_proto_put_error(buf, sizeof(buf), 1, 1, &len), 0);
	assert_int_equal(open_buf(&p.cli, len), -EPERM);

	/* another secret, another node: other keys */
	pair_init(&q, "sekriT", "node-a");
	assert_memory_not_equal(q.cli.tx_key, p.cli.tx_key, SL_PROTO_KEY_LEN);
	assert_int_equal(sl_proto_put_auth(buf, sizeof(buf), 3, &len), 0);
	assert_int_equal(sl_proto_seal(&q.cli, buf, sizeof(buf), &len), 0);
	pair_init(&p, "sekrit", "node-a");
	assert_int_equal(open_buf(&p.srv, len), -EACCES);
	pair_init(&q, "sekrit", "node-b");
	assert_int_equal(sl_proto_put_auth(buf, sizeof(buf), 3, &len), 0);
	assert_int_equal(sl_proto_seal(&q.cli, buf, sizeof(buf), &len), 0);
	assert_int_equal(open_buf(&q.srv, len), -EACCES);
	/* no secrets (loopback only): keys still derive */
	assert_int_equal(sl_proto_session_init(&q.cli, true, NULL, 0, buf, buf,
					       "web", 3, "n", 1), 0);
	assert_int_equal(sl_proto_session_init(&q.cli, true, "", 0, buf, buf,
					       "", 0, "n", 1), -EINVAL);
	sl_proto_session_clear(&p.cli);
	assert_memory_equal(p.cli.tx_key, (uint8_t[SL_PROTO_KEY_LEN]){0},
			    SL_PROTO_KEY_LEN);
}

static void test_nonce(void **state)
{
	uint8_t n1[SL_PROTO_NONCE_LEN], n2[SL_PROTO_NONCE_LEN];

	(void)state;
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
		cmocka_unit_test(test_malformed_redirect),
		cmocka_unit_test(test_encode_limits),
		cmocka_unit_test(test_malformed_seal),
		cmocka_unit_test(test_session),
		cmocka_unit_test(test_nonce),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
