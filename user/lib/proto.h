/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The token protocol between agents and tokend (docs/protocol.md): frame
 * encoding and decoding without I/O, and the challenge-response MAC.
 */
#ifndef SLUICE_PROTO_H
#define SLUICE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_PROTO_VERSION 2

/* Largest frame either side sends or accepts, header included. */
#ifndef SL_PROTO_MAX_FRAME
#define SL_PROTO_MAX_FRAME 65536u
#endif

#define SL_PROTO_HDR_LEN     12
#define SL_PROTO_NONCE_LEN   32
#define SL_PROTO_MAC_LEN     32 /* HMAC-SHA256 */
#define SL_PROTO_KEY_LEN     32 /* one direction's session key */
#define SL_PROTO_SEAL_LEN    40 /* sequence number and MAC */
#define SL_PROTO_NAME_MAX    63 /* namespace and node id */
#define SL_PROTO_REPORT_LEN  28 /* one SYNC entry */
#define SL_PROTO_GRANT_LEN   24 /* one GRANTS entry */
#define SL_PROTO_SYNC_FIXED  4  /* entry count */
#define SL_PROTO_GRANTS_FIXED 20 /* flags, reserved, ttl, entry count, term */
#define SL_PROTO_ADDR_MAX    255 /* a leader's HOST:PORT in REDIRECT */

/* Entries that fit one sealed frame; a client with more flows sends more
 * SYNCs. */
#define SL_PROTO_MAX_REPORTS \
	((SL_PROTO_MAX_FRAME - SL_PROTO_HDR_LEN - SL_PROTO_SYNC_FIXED - \
	  SL_PROTO_SEAL_LEN) / SL_PROTO_REPORT_LEN)

/* The answer to the largest SYNC always fits in one frame. */
_Static_assert(SL_PROTO_HDR_LEN + SL_PROTO_GRANTS_FIXED +
		       SL_PROTO_MAX_REPORTS * SL_PROTO_GRANT_LEN +
		       SL_PROTO_SEAL_LEN <= SL_PROTO_MAX_FRAME,
	       "GRANTS for a full SYNC must fit one frame");

/* Header flags. */
#define SL_FRAME_SEALED 0x1 /* sequence number and MAC follow the body */

enum sl_msg_type {
	SL_MSG_HELLO = 1,     /* client: namespace, node id, nonce */
	SL_MSG_CHALLENGE = 2, /* server: nonce */
	SL_MSG_AUTH = 3,      /* client: empty, sealed: proves the secret */
	SL_MSG_AUTH_OK = 4,   /* server: sealed: lease TTL, sync period */
	SL_MSG_SYNC = 5,      /* client: per-flow demand, used, held */
	SL_MSG_GRANTS = 6,    /* server: per-flow grant, TTL, holders */
	SL_MSG_ERROR = 7,     /* either: a code, then the sender closes */
	SL_MSG_REDIRECT = 8,  /* server: sealed: not the leader; who is */
};

enum sl_proto_err {
	SL_ERR_MALFORMED = 1,	/* a frame that does not decode */
	SL_ERR_VERSION = 2,	/* a protocol version the peer does not speak */
	SL_ERR_UNEXPECTED = 3,	/* a valid frame out of order */
	SL_ERR_AUTH = 4,	/* bad MAC or namespace unknown: one code */
	SL_ERR_BUSY = 5,	/* connection limit reached */
	SL_ERR_TIMEOUT = 6,	/* handshake not finished in time */
	SL_ERR_REPLACED = 7,	/* the same node connected again */
	SL_ERR_SHUTDOWN = 8,	/* server stopping */
	SL_ERR_INTEGRITY = 9,	/* a frame's MAC or sequence number is wrong */
};

/* A term: the leader's election revision in etcd (0: no election). */

/* GRANTS header flags. */
#define SL_SRV_KEEP  0x1 /* overloaded: keep current leases, ttl extends */
#define SL_SRV_DRAIN 0x2 /* stopping: every lease ends now (ttl 0) */
#define SL_SRV_FLAGS (SL_SRV_KEEP | SL_SRV_DRAIN)

/* GRANTS entry flags. */
#define SL_GRANT_UNKNOWN  0x1 /* no such flow in this namespace */
#define SL_GRANT_KEEP	  0x2 /* keep the grant you hold (learn period) */
#define SL_GRANT_LEARNING 0x4 /* server restarted, learning holdings */
#define SL_GRANT_FLAGS (SL_GRANT_UNKNOWN | SL_GRANT_KEEP | SL_GRANT_LEARNING)

/* One flow in a SYNC: what the client saw and what it holds. */
struct sl_flow_report {
	uint32_t flow_id;
	uint64_t demand; /* passed + dropped per second, in the rule's unit */
	uint64_t used;	 /* passed per second */
	uint64_t held;	 /* the grant in force now; 0 without a lease */
};

/* One flow in a GRANTS. */
struct sl_flow_grant {
	uint32_t flow_id;
	uint32_t ttl_ms;
	uint64_t grant; /* per second, in the rule's unit */
	uint32_t holders; /* live lease holders of the flow */
	uint32_t flags;	  /* SL_GRANT_* */
};

/*
 * A decoded frame. Names point into the frame, NUL-free and not
 * terminated; entry lists stay in the frame and are read with
 * sl_proto_report() / sl_proto_grant(), which cannot fail once decoded.
 */
struct sl_msg {
	uint8_t type;
	uint32_t req_id;
	bool sealed;	    /* seq and mac are set; sl_proto_open checks them */
	uint64_t seq;
	const uint8_t *mac;
	union {
		struct {
			const char *ns;
			const char *node;
			uint8_t ns_len;
			uint8_t node_len;
			const uint8_t *nonce;
		} hello;
		struct {
			const uint8_t *nonce;
		} challenge;
		struct {
			uint32_t ttl_ms;
			uint32_t sync_ms;
			uint64_t term;
		} auth_ok;
		struct {
			uint32_t n;
			const uint8_t *raw;
		} sync;
		struct {
			uint16_t flags; /* SL_SRV_* */
			uint32_t ttl_ms;
			uint32_t n;
			uint64_t term;
			const uint8_t *raw;
		} grants;
		struct {
			uint16_t code;
		} error;
		struct {
			uint64_t term;	  /* the leader's, 0 when none is known */
			const char *addr; /* HOST:PORT, not terminated */
			uint8_t addr_len; /* 0: no leader known */
		} redirect;
	};
};

/*
 * Length of the frame at buf from its first 4 bytes. -EAGAIN with fewer
 * than 4 bytes, -EBADMSG below the header size, -EMSGSIZE above
 * SL_PROTO_MAX_FRAME: a stream reader waits for *len bytes or gives up.
 */
int sl_proto_frame_len(const void *buf, size_t avail, uint32_t *len);

/*
 * Decode exactly one frame of len bytes. Returns 0, -EBADMSG (length,
 * truncated or trailing bytes, nonzero reserved field, bad name, count
 * larger than the frame, a HELLO or CHALLENGE sealed), -EPERM (a type
 * that travels sealed, all but those two and ERROR, without a seal),
 * -EMSGSIZE, -EPROTONOSUPPORT (version) or -EPROTO (unknown type). A
 * seal is parsed, not checked: see sl_proto_open().
 */
int sl_proto_decode(const void *buf, size_t len, struct sl_msg *m);

void sl_proto_report(const struct sl_msg *m, uint32_t i,
		     struct sl_flow_report *r);
void sl_proto_grant(const struct sl_msg *m, uint32_t i,
		    struct sl_flow_grant *g);

/*
 * Encoders write one frame into buf (cap bytes) and its length into *len.
 * -EMSGSIZE when it does not fit cap or SL_PROTO_MAX_FRAME, -EINVAL for
 * a value the decoder would refuse (bad name, unknown flag).
 */
int sl_proto_put_hello(void *buf, size_t cap, uint32_t req_id, const char *ns,
		       const char *node, const uint8_t nonce[SL_PROTO_NONCE_LEN],
		       size_t *len);
int sl_proto_put_challenge(void *buf, size_t cap, uint32_t req_id,
			   const uint8_t nonce[SL_PROTO_NONCE_LEN],
			   size_t *len);
/* AUTH has no body: the seal that sl_proto_seal() adds is the proof. */
int sl_proto_put_auth(void *buf, size_t cap, uint32_t req_id, size_t *len);
int sl_proto_put_auth_ok(void *buf, size_t cap, uint32_t req_id,
			 uint32_t ttl_ms, uint32_t sync_ms, uint64_t term,
			 size_t *len);
int sl_proto_put_sync(void *buf, size_t cap, uint32_t req_id,
		      const struct sl_flow_report *r, uint32_t n, size_t *len);
int sl_proto_put_grants(void *buf, size_t cap, uint32_t req_id, uint16_t flags,
			uint32_t ttl_ms, uint64_t term,
			const struct sl_flow_grant *g, uint32_t n, size_t *len);
/* addr: HOST:PORT of [A-Za-z0-9.:[]-], or "" when no leader is known. */
int sl_proto_put_redirect(void *buf, size_t cap, uint32_t req_id,
			  uint64_t term, const char *addr, size_t *len);
int sl_proto_put_error(void *buf, size_t cap, uint32_t req_id, uint16_t code,
		       size_t *len);

/* Namespace and node ids: 1-63 of [A-Za-z0-9_.:-]. */
bool sl_proto_name_valid(const char *s, size_t n);
/* A REDIRECT's address: 0-255 of [A-Za-z0-9.:[]-]. */
bool sl_proto_addr_valid(const char *s, size_t n);

/* A fresh random nonce (RAND_bytes); -EIO if the generator fails. */
int sl_proto_nonce(uint8_t nonce[SL_PROTO_NONCE_LEN]);

/*
 * One session's keys and sequence numbers (docs/protocol.md, "Sealed
 * frames"): each direction has its own key, so a frame cannot be
 * reflected back to its sender, and its own count from 0.
 */
struct sl_proto_session {
	uint8_t tx_key[SL_PROTO_KEY_LEN];
	uint8_t rx_key[SL_PROTO_KEY_LEN];
	uint64_t tx_seq, rx_seq;
};

/*
 * Keys for a session from the namespace secret and both nonces:
 * HKDF-SHA256(secret, salt = client nonce || server nonce, info = label,
 * namespace, node). The client sends with the client-to-server key. -EINVAL
 * for a bad name, -EIO if libcrypto fails.
 */
int sl_proto_session_init(struct sl_proto_session *s, bool client,
			  const void *secret, size_t secret_len,
			  const uint8_t client_nonce[SL_PROTO_NONCE_LEN],
			  const uint8_t server_nonce[SL_PROTO_NONCE_LEN],
			  const char *ns, size_t ns_len, const char *node,
			  size_t node_len);

/* Wipe the keys. */
void sl_proto_session_clear(struct sl_proto_session *s);

/*
 * Seal the frame of *len bytes at buf (cap bytes of room): set the SEALED
 * flag, append the next send sequence number and HMAC-SHA256 over the
 * whole frame before the MAC, update the length. -EMSGSIZE without room,
 * -EIO if libcrypto fails.
 */
int sl_proto_seal(struct sl_proto_session *s, void *buf, size_t cap,
		  size_t *len);

/*
 * Check a decoded frame's seal against the next receive sequence number:
 * 0 (and the number advances), -EPERM for a frame without a seal,
 * -EACCES for a wrong MAC (tampered, or another key), -ESTALE for a right
 * MAC on the wrong number (replayed, reordered or dropped).
 */
int sl_proto_open(struct sl_proto_session *s, const void *frame, size_t len,
		  const struct sl_msg *m);

const char *sl_proto_err_str(uint16_t code);

#endif
