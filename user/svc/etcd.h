/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A client of one etcd key over etcd 3.4's JSON gateway (/v3/kv/range,
 * /v3/kv/txn, /v3/watch): read it, publish it (optionally compare-and-swap
 * on its mod_revision), watch it. libcurl for HTTP, cJSON for JSON,
 * OpenSSL for the base64 of keys and values. docs/fleet.md.
 */
#ifndef SLUICE_ETCD_H
#define SLUICE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define SL_ETCD_MAX_ENDPOINTS 8
#define SL_ETCD_URL_MAX	      256
/* A rule file (64 MiB) in base64 and its JSON frame. */
#define SL_ETCD_FRAME_MAX (96u << 20)
#define SL_ETCD_TIMEOUT_MS 5000 /* a range or a txn, connecting included */

/* The password of --etcd-user when there is no --etcd-password-file. */
#define SL_ETCD_PASSWORD_ENV "SLUICE_ETCD_PASSWORD"

/* TLS and a user to reach etcd with (docs/fleet.md); NULL: not given. */
struct sl_etcd_auth {
	const char *cacert;	   /* PEM CAs for etcd's certificate; NULL:
				    * the system's */
	const char *cert;	   /* a PEM client certificate */
	const char *cert_key;	   /* its key; NULL: in the cert's file */
	const char *user;
	const char *password_file; /* NULL: $SLUICE_ETCD_PASSWORD */
};

/* The options of a struct sl_etcd_auth, member m of the options struct t,
 * in a command's table (params.h): the same on every program. */
#define SL_ETCD_AUTH_OPTS(t, m)                                               \
	{ .name = "etcd-cacert", .type = SL_OPT_STRING,                       \
	  .field = SL_FIELD(t, m.cacert), .metavar = "FILE",                  \
	  .help = "CAs (PEM) to check etcd's certificate (the system's)" },  \
	{ .name = "etcd-cert", .type = SL_OPT_STRING,                         \
	  .field = SL_FIELD(t, m.cert), .metavar = "FILE",                    \
	  .help = "a client certificate (PEM), no CommonName" },            \
	{ .name = "etcd-cert-key", .type = SL_OPT_STRING,                     \
	  .field = SL_FIELD(t, m.cert_key), .metavar = "FILE",                \
	  .help = "its private key (else in --etcd-cert's file)" },         \
	{ .name = "etcd-user", .type = SL_OPT_STRING,                         \
	  .field = SL_FIELD(t, m.user), .metavar = "USER",                    \
	  .help = "an etcd user (etcd with auth enabled)" },                  \
	{ .name = "etcd-password-file", .type = SL_OPT_STRING,                \
	  .field = SL_FIELD(t, m.password_file), .metavar = "FILE",           \
	  .help = "the password of --etcd-user (else $" SL_ETCD_PASSWORD_ENV  \
		  ")" }

static inline bool sl_etcd_auth_given(const struct sl_etcd_auth *a)
{
	return a->cacert || a->cert || a->cert_key || a->user ||
	       a->password_file;
}

struct sl_etcd {
	char url[SL_ETCD_MAX_ENDPOINTS][SL_ETCD_URL_MAX]; /* no trailing / */
	int n_urls;
	int cur; /* the endpoint tried first: the last one that answered */
	char *key;
	unsigned int timeout_ms; /* of one request; SL_ETCD_TIMEOUT_MS */
	char *cacert, *cert, *cert_key, *user; /* struct sl_etcd_auth's */
	char *password;
	char *token; /* of the user, sent with every request; NULL: none yet */
};

/*
 * endpoints "URL[,URL...]" (http:// or https://), key not empty; auth
 * (NULL: none) is copied, its files checked and the password read.
 * -EINVAL (or -errno of a file) with the reason in err. Free with
 * sl_etcd_free().
 */
int sl_etcd_init(struct sl_etcd *e, const char *endpoints,
		 const struct sl_etcd_auth *auth, const char *key, char *err,
		 size_t errlen);
void sl_etcd_free(struct sl_etcd *e);

/* The endpoint last used, for messages. */
const char *sl_etcd_endpoint(const struct sl_etcd *e);

struct sl_etcd_kv {
	bool exists;
	int64_t mod_revision; /* 0 when the key does not exist */
	int64_t revision;     /* of the store when read */
	char *value;	      /* malloc'd, NUL-terminated; NULL if !exists */
	size_t len;
};

void sl_etcd_kv_free(struct sl_etcd_kv *kv);

/* Read the key. 0, or -errno with the reason (endpoint named) in err;
 * -EACCES: etcd refused the user (a wrong password). */
int sl_etcd_get(struct sl_etcd *e, struct sl_etcd_kv *out, char *err,
		size_t errlen);

/*
 * Publish value under the key; *revision is the revision it got. With
 * cas, only if the key's mod_revision is if_revision (0: the key must not
 * exist): -ECANCELED when it is not, *revision then the current
 * mod_revision (0: no key).
 */
int sl_etcd_put(struct sl_etcd *e, const char *value, size_t len, bool cas,
		int64_t if_revision, int64_t *revision, char *err,
		size_t errlen);

/*
 * The answers of sl_etcd_get() and sl_etcd_put(), parsed (exposed for the
 * fuzzer): a range answer's value of key; a txn answer's revision, or
 * -ECANCELED with the key's current mod_revision (0: none). -EPROTO for
 * what is not such an answer.
 */
int sl_etcd_range_answer(const cJSON *doc, const char *key,
			 struct sl_etcd_kv *out);
int sl_etcd_txn_answer(const cJSON *doc, int64_t *revision);

/*
 * GET url (a body server's, not etcd's: no token is sent; an https://
 * one is checked against --etcd-cacert if given, else the system's CAs)
 * into *out, malloc'd and NUL-terminated. size is the body's announced
 * size: the buffer is allocated for it at once, and a body that passes
 * it is cut off there (-EFBIG). -ENOENT: HTTP 404; -EIO: no answer or
 * another status; the reason in err.
 */
int sl_etcd_fetch_url(const struct sl_etcd *e, const char *url, size_t size,
		      char **out, size_t *len, char *err, size_t errlen);

/* ---- the watch ---- */

enum sl_etcd_event_type { SL_ETCD_PUT, SL_ETCD_DELETE };

struct sl_etcd_event {
	enum sl_etcd_event_type type;
	int64_t mod_revision; /* of a delete: the revision of the delete */
	char *value;	      /* decoded, NUL-terminated; NULL for a delete */
	size_t len;
	bool superseded; /* a later event of the key is in the same frame */
};

/* One frame of the watch stream ({"result": {...}} or {"error": ...}). */
struct sl_etcd_frame {
	bool created;
	bool canceled;
	int64_t compact_revision; /* > 0: the start revision was compacted */
	int64_t revision;	  /* of the header */
	char *cancel_reason;	  /* malloc'd; NULL: none given */
	struct sl_etcd_event *events;
	size_t n_events;
};

void sl_etcd_frame_free(struct sl_etcd_frame *f);

/*
 * Parse one watch frame; only events of key count. -EPROTO (with the
 * reason in err) for what is not a gateway frame, -EREMOTEIO for an error
 * frame (its message in err).
 */
int sl_etcd_parse_frame(const char *text, size_t len, const char *key,
			struct sl_etcd_frame *out, char *err, size_t errlen);

/* A growing buffer of received bytes, NUL-terminated. */
struct sl_etcd_buf {
	char *buf;
	size_t len, cap;
	bool fixed;   /* cap is all there is (the NUL's byte included) */
	bool too_big; /* it would have passed cap, or SL_ETCD_FRAME_MAX */
};

/*
 * The watch stream cut into its frames, one a line. A frame that comes in
 * many chunks is searched for its end once, not once a chunk: searched
 * counts the bytes searched since the start (tests).
 */
struct sl_etcd_stream {
	struct sl_etcd_buf pending; /* the frame not yet complete */
	size_t scanned;		    /* of pending, known to hold no newline */
	uint64_t searched;
};

/*
 * Append a chunk and call frame() with every line now complete (empty
 * lines skipped); the first non-zero return of frame() stops and is
 * returned. -EMSGSIZE: a frame larger than SL_ETCD_FRAME_MAX.
 */
int sl_etcd_stream_feed(struct sl_etcd_stream *s, const char *p, size_t n,
			int (*frame)(void *arg, const char *text, size_t len),
			void *arg);
void sl_etcd_stream_free(struct sl_etcd_stream *s);

/*
 * Called with every event in revision order; a non-zero return ends the
 * watch with that value. stop() is polled about once a second (libcurl's
 * progress callback); true ends the watch with 0.
 */
struct sl_etcd_watch_cb {
	int (*event)(void *arg, const struct sl_etcd_event *ev);
	void (*created)(void *arg); /* the watch is in place */
	bool (*stop)(void *arg);
	void *arg;
};

/*
 * Watch the key from start_revision until stopped, an event callback
 * fails, or the stream ends: 0 (stopped), the callback's value, -ESTALE
 * when start_revision was compacted (*compact_revision set), -EACCES when
 * etcd refuses the user, or -errno with the reason in err (connection
 * refused or lost, an error frame).
 */
int sl_etcd_watch(struct sl_etcd *e, int64_t start_revision,
		  const struct sl_etcd_watch_cb *cb, int64_t *compact_revision,
		  char *err, size_t errlen);

/* ---- leases and an election under the key (docs/cluster.md) ---- */

/* A lease of ttl_s seconds; *ttl_s becomes what etcd granted (it raises
 * TTLs below its minimum). */
int sl_etcd_lease_grant(struct sl_etcd *e, unsigned int *ttl_s, int64_t *id,
			char *err, size_t errlen);
/* Renew it for its TTL: 0, -ENOENT when it already ran out. */
int sl_etcd_lease_keepalive(struct sl_etcd *e, int64_t id, char *err,
			    size_t errlen);
/* End it, and the keys it holds, now. */
int sl_etcd_lease_revoke(struct sl_etcd *e, int64_t id, char *err,
			 size_t errlen);

/*
 * Stand in the election named by the key, as etcd's own election API
 * does: the key KEY/<lease in hex> = value under the lease, created once.
 * *rev is its create revision: the term it leads in, if it leads.
 */
int sl_etcd_campaign(struct sl_etcd *e, int64_t lease, const char *value,
		     int64_t *rev, char *err, size_t errlen);

/* The leader: the key under KEY/ created first, while its lease lasts. */
struct sl_etcd_leader {
	bool exists;
	int64_t lease;
	int64_t rev; /* its create revision: the term */
	char *value; /* malloc'd, NUL-terminated; NULL if !exists */
	size_t len;
};

int sl_etcd_leader(struct sl_etcd *e, struct sl_etcd_leader *out, char *err,
		   size_t errlen);
void sl_etcd_leader_free(struct sl_etcd_leader *l);

/* ---- base64, as the gateway spells keys and values ---- */

/* malloc'd, NUL-terminated; NULL when out of memory. */
char *sl_etcd_b64_encode(const char *data, size_t len);
/* -EINVAL when text is not base64; *out malloc'd, NUL-terminated. */
int sl_etcd_b64_decode(const char *text, char **out, size_t *len);

#endif
