// SPDX-License-Identifier: GPL-2.0
/* Token protocol frames (docs/protocol.md): big-endian, no I/O. */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "proto.h"

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)p[0] << 8 | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

bool sl_proto_name_valid(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > SL_PROTO_NAME_MAX)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == ':' || c == '-'))
			return false;
	}
	return true;
}

bool sl_proto_addr_valid(const char *s, size_t n)
{
	if (n > SL_PROTO_ADDR_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == ':' ||
		      c == '[' || c == ']' || c == '-'))
			return false;
	}
	return true;
}

int sl_proto_frame_len(const void *buf, size_t avail, uint32_t *len)
{
	uint32_t n;

	if (avail < 4)
		return -EAGAIN;
	n = get32(buf);
	if (n < SL_PROTO_HDR_LEN)
		return -EBADMSG;
	if (n > SL_PROTO_MAX_FRAME)
		return -EMSGSIZE;
	*len = n;
	return 0;
}

/* A name as u8 length + bytes at *p; advances *p. */
static int get_name(const uint8_t **p, const uint8_t *end, const char **s,
		    uint8_t *n)
{
	if (end - *p < 1)
		return -EBADMSG;
	*n = **p;
	(*p)++;
	if (end - *p < *n || !sl_proto_name_valid((const char *)*p, *n))
		return -EBADMSG;
	*s = (const char *)*p;
	*p += *n;
	return 0;
}

static int decode_body(const uint8_t *p, const uint8_t *end, struct sl_msg *m)
{
	size_t left = end - p;
	int ret;

	switch (m->type) {
	case SL_MSG_HELLO:
		ret = get_name(&p, end, &m->hello.ns, &m->hello.ns_len);
		if (!ret)
			ret = get_name(&p, end, &m->hello.node,
				       &m->hello.node_len);
		if (ret)
			return ret;
		m->hello.nonce = p;
		return end - p == SL_PROTO_NONCE_LEN ? 0 : -EBADMSG;
	case SL_MSG_CHALLENGE:
		if (left != SL_PROTO_NONCE_LEN)
			return -EBADMSG;
		m->challenge.nonce = p;
		return 0;
	case SL_MSG_AUTH:
		return left ? -EBADMSG : 0;
	case SL_MSG_AUTH_OK:
		if (left != 16)
			return -EBADMSG;
		m->auth_ok.ttl_ms = get32(p);
		m->auth_ok.sync_ms = get32(p + 4);
		m->auth_ok.term = get64(p + 8);
		return 0;
	case SL_MSG_SYNC:
		if (left < SL_PROTO_SYNC_FIXED)
			return -EBADMSG;
		m->sync.n = get32(p);
		left -= SL_PROTO_SYNC_FIXED;
		/* Divide rather than multiply: n comes from the wire. */
		if (left % SL_PROTO_REPORT_LEN ||
		    left / SL_PROTO_REPORT_LEN != m->sync.n)
			return -EBADMSG;
		m->sync.raw = p + SL_PROTO_SYNC_FIXED;
		return 0;
	case SL_MSG_GRANTS:
		if (left < SL_PROTO_GRANTS_FIXED)
			return -EBADMSG;
		m->grants.flags = get16(p);
		if ((m->grants.flags & ~SL_SRV_FLAGS) || get16(p + 2))
			return -EBADMSG;
		m->grants.ttl_ms = get32(p + 4);
		m->grants.n = get32(p + 8);
		m->grants.term = get64(p + 12);
		left -= SL_PROTO_GRANTS_FIXED;
		if (left % SL_PROTO_GRANT_LEN ||
		    left / SL_PROTO_GRANT_LEN != m->grants.n)
			return -EBADMSG;
		m->grants.raw = p + SL_PROTO_GRANTS_FIXED;
		for (uint32_t i = 0; i < m->grants.n; i++) {
			const uint8_t *e = m->grants.raw +
					   (size_t)i * SL_PROTO_GRANT_LEN;

			if (get32(e + 20) & ~SL_GRANT_FLAGS)
				return -EBADMSG;
		}
		return 0;
	case SL_MSG_ERROR:
		if (left != 4 || get16(p + 2))
			return -EBADMSG;
		m->error.code = get16(p);
		return 0;
	case SL_MSG_REDIRECT:
		if (left < 9 || left != 9u + p[8] ||
		    !sl_proto_addr_valid((const char *)p + 9, p[8]))
			return -EBADMSG;
		m->redirect.term = get64(p);
		m->redirect.addr_len = p[8];
		m->redirect.addr = (const char *)p + 9;
		return 0;
	}
	return -EPROTO;
}

/* Which types travel sealed: all but the two frames before the keys,
 * and ERROR, which is sealed only once the keys exist. */
static bool seal_ok(uint8_t type, bool sealed)
{
	if (type == SL_MSG_HELLO || type == SL_MSG_CHALLENGE)
		return !sealed;
	return sealed || type == SL_MSG_ERROR;
}

int sl_proto_decode(const void *buf, size_t len, struct sl_msg *m)
{
	const uint8_t *p = buf, *end = p + len;
	uint16_t flags;
	uint32_t flen;
	int ret;

	ret = sl_proto_frame_len(buf, len, &flen);
	if (ret == -EAGAIN)
		return -EBADMSG;
	if (ret)
		return ret;
	if (flen != len || len < SL_PROTO_HDR_LEN)
		return -EBADMSG;
	if (p[4] != SL_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	flags = get16(p + 6);
	if (flags & ~SL_FRAME_SEALED)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	m->type = p[5];
	m->req_id = get32(p + 8);
	if (flags & SL_FRAME_SEALED) {
		if (len < SL_PROTO_HDR_LEN + SL_PROTO_SEAL_LEN)
			return -EBADMSG;
		end -= SL_PROTO_SEAL_LEN;
		m->sealed = true;
		m->seq = get64(end);
		m->mac = end + 8;
	}
	ret = decode_body(p + SL_PROTO_HDR_LEN, end, m);
	if (!ret && !seal_ok(m->type, m->sealed))
		return m->sealed ? -EBADMSG : -EPERM;
	return ret;
}

void sl_proto_report(const struct sl_msg *m, uint32_t i,
		     struct sl_flow_report *r)
{
	const uint8_t *e = m->sync.raw + (size_t)i * SL_PROTO_REPORT_LEN;

	r->flow_id = get32(e);
	r->demand = get64(e + 4);
	r->used = get64(e + 12);
	r->held = get64(e + 20);
}

void sl_proto_grant(const struct sl_msg *m, uint32_t i,
		    struct sl_flow_grant *g)
{
	const uint8_t *e = m->grants.raw + (size_t)i * SL_PROTO_GRANT_LEN;

	g->flow_id = get32(e);
	g->ttl_ms = get32(e + 4);
	g->grant = get64(e + 8);
	g->holders = get32(e + 16);
	g->flags = get32(e + 20);
}

/* Header for a body of body bytes; -EMSGSIZE when it does not fit. */
static int put_hdr(void *buf, size_t cap, uint8_t type, uint32_t req_id,
		   size_t body, size_t *len)
{
	uint8_t *p = buf;
	size_t n = SL_PROTO_HDR_LEN + body;

	if (body > SL_PROTO_MAX_FRAME - SL_PROTO_HDR_LEN || n > cap)
		return -EMSGSIZE;
	put32(p, n);
	p[4] = SL_PROTO_VERSION;
	p[5] = type;
	put16(p + 6, 0);
	put32(p + 8, req_id);
	*len = n;
	return 0;
}

int sl_proto_put_hello(void *buf, size_t cap, uint32_t req_id, const char *ns,
		       const char *node, const uint8_t nonce[SL_PROTO_NONCE_LEN],
		       size_t *len)
{
	size_t nl = strlen(ns), dl = strlen(node);
	uint8_t *p = (uint8_t *)buf + SL_PROTO_HDR_LEN;
	int ret;

	if (!sl_proto_name_valid(ns, nl) || !sl_proto_name_valid(node, dl))
		return -EINVAL;
	ret = put_hdr(buf, cap, SL_MSG_HELLO, req_id,
		      2 + nl + dl + SL_PROTO_NONCE_LEN, len);
	if (ret)
		return ret;
	p[0] = nl;
	memcpy(p + 1, ns, nl);
	p[1 + nl] = dl;
	memcpy(p + 2 + nl, node, dl);
	memcpy(p + 2 + nl + dl, nonce, SL_PROTO_NONCE_LEN);
	return 0;
}

int sl_proto_put_challenge(void *buf, size_t cap, uint32_t req_id,
			   const uint8_t nonce[SL_PROTO_NONCE_LEN], size_t *len)
{
	int ret = put_hdr(buf, cap, SL_MSG_CHALLENGE, req_id,
			  SL_PROTO_NONCE_LEN, len);

	if (!ret)
		memcpy((uint8_t *)buf + SL_PROTO_HDR_LEN, nonce,
		       SL_PROTO_NONCE_LEN);
	return ret;
}

int sl_proto_put_auth(void *buf, size_t cap, uint32_t req_id, size_t *len)
{
	return put_hdr(buf, cap, SL_MSG_AUTH, req_id, 0, len);
}

int sl_proto_put_auth_ok(void *buf, size_t cap, uint32_t req_id,
			 uint32_t ttl_ms, uint32_t sync_ms, uint64_t term,
			 size_t *len)
{
	uint8_t *p = (uint8_t *)buf + SL_PROTO_HDR_LEN;
	int ret = put_hdr(buf, cap, SL_MSG_AUTH_OK, req_id, 16, len);

	if (ret)
		return ret;
	put32(p, ttl_ms);
	put32(p + 4, sync_ms);
	put64(p + 8, term);
	return 0;
}

int sl_proto_put_redirect(void *buf, size_t cap, uint32_t req_id,
			  uint64_t term, const char *addr, size_t *len)
{
	uint8_t *p = (uint8_t *)buf + SL_PROTO_HDR_LEN;
	size_t n = strlen(addr);
	int ret;

	if (!sl_proto_addr_valid(addr, n))
		return -EINVAL;
	ret = put_hdr(buf, cap, SL_MSG_REDIRECT, req_id, 9 + n, len);
	if (ret)
		return ret;
	put64(p, term);
	p[8] = n;
	memcpy(p + 9, addr, n);
	return 0;
}

int sl_proto_put_sync(void *buf, size_t cap, uint32_t req_id,
		      const struct sl_flow_report *r, uint32_t n, size_t *len)
{
	uint8_t *p = (uint8_t *)buf + SL_PROTO_HDR_LEN;
	int ret;

	if (n > SL_PROTO_MAX_REPORTS)
		return -EMSGSIZE;
	ret = put_hdr(buf, cap, SL_MSG_SYNC, req_id,
		      SL_PROTO_SYNC_FIXED + (size_t)n * SL_PROTO_REPORT_LEN,
		      len);
	if (ret)
		return ret;
	put32(p, n);
	p += SL_PROTO_SYNC_FIXED;
	for (uint32_t i = 0; i < n; i++, p += SL_PROTO_REPORT_LEN) {
		put32(p, r[i].flow_id);
		put64(p + 4, r[i].demand);
		put64(p + 12, r[i].used);
		put64(p + 20, r[i].held);
	}
	return 0;
}

int sl_proto_put_grants(void *buf, size_t cap, uint32_t req_id, uint16_t flags,
			uint32_t ttl_ms, uint64_t term,
			const struct sl_flow_grant *g, uint32_t n, size_t *len)
{
	uint8_t *p = (uint8_t *)buf + SL_PROTO_HDR_LEN;
	uint32_t i;
	int ret;

	if (flags & ~SL_SRV_FLAGS)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (g[i].flags & ~SL_GRANT_FLAGS)
			return -EINVAL;
	}
	if (n > (SL_PROTO_MAX_FRAME - SL_PROTO_HDR_LEN -
		 SL_PROTO_GRANTS_FIXED) / SL_PROTO_GRANT_LEN)
		return -EMSGSIZE;
	ret = put_hdr(buf, cap, SL_MSG_GRANTS, req_id,
		      SL_PROTO_GRANTS_FIXED + (size_t)n * SL_PROTO_GRANT_LEN,
		      len);
	if (ret)
		return ret;
	put16(p, flags);
	put16(p + 2, 0);
	put32(p + 4, ttl_ms);
	put32(p + 8, n);
	put64(p + 12, term);
	p += SL_PROTO_GRANTS_FIXED;
	for (i = 0; i < n; i++, p += SL_PROTO_GRANT_LEN) {
		put32(p, g[i].flow_id);
		put32(p + 4, g[i].ttl_ms);
		put64(p + 8, g[i].grant);
		put32(p + 16, g[i].holders);
		put32(p + 20, g[i].flags);
	}
	return 0;
}

int sl_proto_put_error(void *buf, size_t cap, uint32_t req_id, uint16_t code,
		       size_t *len)
{
	uint8_t *p = (uint8_t *)buf + SL_PROTO_HDR_LEN;
	int ret = put_hdr(buf, cap, SL_MSG_ERROR, req_id, 4, len);

	if (ret)
		return ret;
	put16(p, code);
	put16(p + 2, 0);
	return 0;
}

int sl_proto_nonce(uint8_t nonce[SL_PROTO_NONCE_LEN])
{
	return RAND_bytes(nonce, SL_PROTO_NONCE_LEN) == 1 ? 0 : -EIO;
}

/* info for HKDF: a label, then the names as in HELLO */
static size_t key_info(uint8_t *info, const char *ns, size_t ns_len,
		       const char *node, size_t node_len)
{
	static const char label[] = "sluice token protocol 2";
	uint8_t *p = info;

	memcpy(p, label, sizeof(label) - 1);
	p += sizeof(label) - 1;
	*p++ = ns_len;
	memcpy(p, ns, ns_len);
	p += ns_len;
	*p++ = node_len;
	memcpy(p, node, node_len);
	return p + node_len - info;
}

int sl_proto_session_init(struct sl_proto_session *s, bool client,
			  const void *secret, size_t secret_len,
			  const uint8_t client_nonce[SL_PROTO_NONCE_LEN],
			  const uint8_t server_nonce[SL_PROTO_NONCE_LEN],
			  const char *ns, size_t ns_len, const char *node,
			  size_t node_len)
{
	uint8_t salt[2 * SL_PROTO_NONCE_LEN], info[64 + 2 + 2 * SL_PROTO_NAME_MAX];
	uint8_t okm[2 * SL_PROTO_KEY_LEN];
	/* HKDF needs a key: with no secrets (loopback only) there is none */
	static const uint8_t none[1];
	size_t okm_len = sizeof(okm), info_len;
	EVP_PKEY_CTX *kdf;
	int ok;

	if (!sl_proto_name_valid(ns, ns_len) ||
	    !sl_proto_name_valid(node, node_len))
		return -EINVAL;
	memcpy(salt, client_nonce, SL_PROTO_NONCE_LEN);
	memcpy(salt + SL_PROTO_NONCE_LEN, server_nonce, SL_PROTO_NONCE_LEN);
	info_len = key_info(info, ns, ns_len, node, node_len);
	if (!secret_len) {
		secret = none;
		secret_len = sizeof(none);
	}
	kdf = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	ok = kdf && EVP_PKEY_derive_init(kdf) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(kdf, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_salt(kdf, salt, sizeof(salt)) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(kdf, secret, (int)secret_len) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(kdf, info, (int)info_len) > 0 &&
	     EVP_PKEY_derive(kdf, okm, &okm_len) > 0 &&
	     okm_len == sizeof(okm);
	EVP_PKEY_CTX_free(kdf);
	if (!ok) {
		OPENSSL_cleanse(okm, sizeof(okm));
		return -EIO;
	}
	/* the first half sends from the client, the second from the server */
	memcpy(s->tx_key, okm + (client ? 0 : SL_PROTO_KEY_LEN),
	       SL_PROTO_KEY_LEN);
	memcpy(s->rx_key, okm + (client ? SL_PROTO_KEY_LEN : 0),
	       SL_PROTO_KEY_LEN);
	s->tx_seq = s->rx_seq = 0;
	OPENSSL_cleanse(okm, sizeof(okm));
	return 0;
}

void sl_proto_session_clear(struct sl_proto_session *s)
{
	OPENSSL_cleanse(s, sizeof(*s));
}

static int frame_mac(const uint8_t key[SL_PROTO_KEY_LEN], const uint8_t *p,
		     size_t n, uint8_t mac[SL_PROTO_MAC_LEN])
{
	unsigned int mac_len = 0;

	if (!HMAC(EVP_sha256(), key, SL_PROTO_KEY_LEN, p, n, mac, &mac_len) ||
	    mac_len != SL_PROTO_MAC_LEN)
		return -EIO;
	return 0;
}

int sl_proto_seal(struct sl_proto_session *s, void *buf, size_t cap,
		  size_t *len)
{
	uint8_t *p = buf;
	size_t n = *len + SL_PROTO_SEAL_LEN;
	int ret;

	if (n > cap || n > SL_PROTO_MAX_FRAME)
		return -EMSGSIZE;
	put32(p, n);
	put16(p + 6, get16(p + 6) | SL_FRAME_SEALED);
	put64(p + *len, s->tx_seq);
	ret = frame_mac(s->tx_key, p, n - SL_PROTO_MAC_LEN,
			p + n - SL_PROTO_MAC_LEN);
	if (ret)
		return ret;
	s->tx_seq++;
	*len = n;
	return 0;
}

int sl_proto_open(struct sl_proto_session *s, const void *frame, size_t len,
		  const struct sl_msg *m)
{
	uint8_t want[SL_PROTO_MAC_LEN];
	int ret;

	if (!m->sealed)
		return -EPERM;
	ret = frame_mac(s->rx_key, frame, len - SL_PROTO_MAC_LEN, want);
	if (!ret && CRYPTO_memcmp(want, m->mac, SL_PROTO_MAC_LEN))
		ret = -EACCES;
	OPENSSL_cleanse(want, sizeof(want));
	if (ret)
		return ret;
	if (m->seq != s->rx_seq)
		return -ESTALE;
	s->rx_seq++;
	return 0;
}

const char *sl_proto_err_str(uint16_t code)
{
	static const char *const names[] = {
		[SL_ERR_MALFORMED] = "malformed frame",
		[SL_ERR_VERSION] = "unsupported protocol version",
		[SL_ERR_UNEXPECTED] = "unexpected message",
		[SL_ERR_AUTH] = "authentication failed",
		[SL_ERR_BUSY] = "too many connections",
		[SL_ERR_TIMEOUT] = "handshake timeout",
		[SL_ERR_REPLACED] = "replaced by a newer connection",
		[SL_ERR_SHUTDOWN] = "server shutting down",
		[SL_ERR_INTEGRITY] = "frame failed its integrity check",
	};

	if (code < sizeof(names) / sizeof(names[0]) && names[code])
		return names[code];
	return "unknown error";
}
