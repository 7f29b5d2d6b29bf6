/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One copy of each small helper: hashing, an index for hash lookups, the
 * checked parsers for command-line and protocol values, the clock and time
 * formatting. Pure: no global state.
 */
#ifndef SLUICE_UTIL_H
#define SLUICE_UTIL_H

#include <net/if.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* This build's version: `git describe` of the tree it was built from. */
extern const char sl_version[];

/* An error text into err (errlen bytes) when err is given; NULL is fine. */
void sl_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- hashing ---- */

#define SL_FNV1A_INIT 0xcbf29ce484222325ULL /* FNV-1a 64 offset basis */

/* FNV-1a 64 of n bytes, continuing from h (SL_FNV1A_INIT to start). */
static inline uint64_t sl_fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL; /* FNV 64 prime */
	}
	return h;
}

uint64_t sl_fnv1a_str(const char *s);

/*
 * An index from 64-bit hashes to the items (0, 1, ...) of the caller's
 * array, which holds the keys: open addressing with linear probing, the
 * size a power of two kept at least twice the number of items. Equal
 * hashes are candidates the caller compares.
 */
struct sl_index {
	struct sl_index_slot {
		uint64_t hash;
		uint32_t item; /* + 1; 0: empty */
	} *slot;
	size_t size, n;
};

/* Room for expect items before it grows; -ENOMEM. */
int sl_index_init(struct sl_index *ix, size_t expect);

/* Add item under hash; -ENOMEM. */
int sl_index_add(struct sl_index *ix, uint64_t hash, uint32_t item);

/*
 * The items stored under hash, one per call: start with *cursor = 0;
 * returns the next item, or -1 when there is none.
 */
int64_t sl_index_next(const struct sl_index *ix, uint64_t hash,
		      size_t *cursor);

/* Remove item stored under hash (the others stay found); -ENOENT. */
int sl_index_del(struct sl_index *ix, uint64_t hash, uint32_t item);

void sl_index_free(struct sl_index *ix);

/* ---- arithmetic ---- */

/* a * b / c with a 128-bit product (quota x count / count of a bps rule
 * passes 2^64); UINT64_MAX when the quotient does not fit. c > 0. */
uint64_t sl_mul_div(uint64_t a, uint64_t b, uint64_t c);

/* a + b, UINT64_MAX when it does not fit. */
static inline uint64_t sl_add_sat(uint64_t a, uint64_t b)
{
	uint64_t sum;

	return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

/* ---- checked parsers ----
 * The whole text is the value: empty text, a leading space or sign,
 * trailing characters and overflow are errors. -EINVAL when it is not a
 * number, -ERANGE when it is one outside [min, max].
 */

/* A decimal integer. */
int sl_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int sl_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/* A decimal number, fractions and exponents allowed, finite. */
int sl_parse_double(const char *s, double min, double max, double *out);

/*
 * The items of a comma-separated list, one per call: *item and *len set,
 * false at the end. An empty item (",," or a trailing ',') comes back
 * with len 0 for the caller to refuse.
 */
bool sl_list_next(const char **cursor, const char **item, size_t *len);

#define SL_HOST_MAX 255

struct sl_hostport {
	char host[SL_HOST_MAX + 1]; /* an IPv6 address without brackets */
	uint16_t port;
};

/*
 * "HOST:PORT" or "[IPV6]:PORT" (len bytes of s), port 0 to 65535; -EINVAL
 * when it is not one.
 */
int sl_parse_hostport(const char *s, size_t len, struct sl_hostport *out);

/*
 * "ADDR:PORT" or "[ADDR6]:PORT" with a numeric address, as the socket
 * address to bind; -EINVAL when it is not one.
 */
int sl_parse_sockaddr(const char *s, struct sockaddr_storage *ss,
		      socklen_t *len);

/* 127.0.0.0/8 or ::1: where a peer without a secret may be trusted. */
bool sl_sockaddr_is_loopback(const struct sockaddr *sa);

#define SL_MAX_IFACES 16 /* interfaces one agent attaches to */

/*
 * A list of interface names, IF[,IF...], each 1 to IF_NAMESIZE - 1 bytes,
 * at most max of them. -EINVAL with the reason in err (which quotes the
 * list).
 */
int sl_parse_ifaces(const char *list, char (*names)[IF_NAMESIZE], int max, int *n,
		    char *err, size_t errlen);

/* ---- hashes ---- */

#define SL_SHA256_HEX_LEN 64

/* The SHA-256 of data in lower-case hex; '?'s (never equal to a hex
 * digest) if OpenSSL fails. In digest.c (libcrypto). */
void sl_sha256_hex(const char *data, size_t len,
		   char hex[SL_SHA256_HEX_LEN + 1]);

/* ---- files ---- */

/*
 * Read fd to EOF (not to st_size: pipes and procfs lie) into a malloc'd,
 * NUL-terminated buffer. -EFBIG past max bytes, -ENOMEM, or -errno.
 */
int sl_read_fd(int fd, size_t max, char **out, size_t *len);

/*
 * A state directory or secrets file that only this process's user and
 * root may change: owned by the euid or root, not group or other
 * writable. -EPERM with the path, the owner and mode found and what is
 * required in err.
 */
struct stat;
int sl_check_owner(const char *path, const struct stat *st, char *err,
		   size_t errlen);

/* The same for path itself (followed if a link); -errno when stat fails. */
int sl_check_owner_path(const char *path, char *err, size_t errlen);

/* ---- retrying ---- */

/*
 * The retry delay after `failures` failures in a row: min_ms doubled per
 * failure up to max_ms, then drawn from [d/2, d] by rnd (a uniform 32-bit
 * value) so that a fleet does not retry in step.
 */
uint32_t sl_backoff_ms(uint32_t min_ms, uint32_t max_ms, uint32_t failures,
		       uint32_t rnd);

/* xorshift32 of *state (not 0): jitter only, nothing secret. */
uint32_t sl_xorshift32(uint32_t *state);

/* ---- words ---- */

/* Edit distance of a and b, a swap of neighbours one edit, for "did you
 * mean"; ~0u when either is longer than SL_EDIT_MAX bytes. */
#define SL_EDIT_MAX 64
unsigned int sl_edit_distance(const char *a, const char *b);

/* ---- time ---- */

/* CLOCK_MONOTONIC in ns: what durations and deadlines are measured in. */
uint64_t sl_now_ns(void);

/* The time on clk ms from now, for a pthread_cond_timedwait() deadline. */
void sl_deadline_ts(clockid_t clk, uint64_t ms, struct timespec *ts);

/* CLOCK_REALTIME in ms since the epoch: what is shown as a UTC time. */
int64_t sl_wall_ms(void);

#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_SEC  1000000000ULL

static inline uint64_t sl_now_ms(void)
{
	return sl_now_ns() / NSEC_PER_MSEC;
}

/* "YYYY-MM-DDTHH:MM:SSZ", or with millis "YYYY-MM-DDTHH:MM:SS.mmmZ". */
#define SL_UTC_LEN	  20
#define SL_UTC_MS_LEN	  24
void sl_format_utc(int64_t unix_ms, bool millis, char out[SL_UTC_MS_LEN + 1]);

/* The UTC time, with millis, of sl_now_ns() value mono, now being now. */
void sl_format_mono(uint64_t mono, uint64_t now, char out[SL_UTC_MS_LEN + 1]);

#endif
