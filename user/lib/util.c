// SPDX-License-Identifier: GPL-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

void sl_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

uint64_t sl_fnv1a_str(const char *s)
{
	return sl_fnv1a(SL_FNV1A_INIT, s, strlen(s));
}

/* ---- index ---- */

static int index_resize(struct sl_index *ix, size_t size)
{
	struct sl_index_slot *t = calloc(size, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < ix->size; i++) {
		size_t b;

		if (!ix->slot[i].item)
			continue;
		for (b = ix->slot[i].hash & (size - 1); t[b].item;
		     b = (b + 1) & (size - 1))
			;
		t[b] = ix->slot[i];
	}
	free(ix->slot);
	ix->slot = t;
	ix->size = size;
	return 0;
}

int sl_index_init(struct sl_index *ix, size_t expect)
{
	size_t size = 16;

	while (size < 2 * expect)
		size *= 2;
	*ix = (struct sl_index){ 0 };
	return index_resize(ix, size);
}

int sl_index_add(struct sl_index *ix, uint64_t hash, uint32_t item)
{
	size_t b;
	int err;

	if (2 * (ix->n + 1) > ix->size &&
	    (err = index_resize(ix, ix->size ? 2 * ix->size : 16)))
		return err;
	for (b = hash & (ix->size - 1); ix->slot[b].item;
	     b = (b + 1) & (ix->size - 1))
		;
	ix->slot[b] = (struct sl_index_slot){ .hash = hash, .item = item + 1 };
	ix->n++;
	return 0;
}

int64_t sl_index_next(const struct sl_index *ix, uint64_t hash,
		      size_t *cursor)
{
	size_t mask = ix->size - 1;

	if (!ix->size)
		return -1;
	/* the cursor counts the slots probed so far */
	for (size_t b = (hash + *cursor) & mask; ix->slot[b].item;
	     b = (b + 1) & mask) {
		++*cursor;
		if (ix->slot[b].hash == hash)
			return ix->slot[b].item - 1;
	}
	return -1;
}

int sl_index_del(struct sl_index *ix, uint64_t hash, uint32_t item)
{
	size_t mask = ix->size - 1, i, j;

	if (!ix->size)
		return -ENOENT;
	for (i = hash & mask; ix->slot[i].item; i = (i + 1) & mask)
		if (ix->slot[i].hash == hash && ix->slot[i].item == item + 1)
			break;
	if (!ix->slot[i].item)
		return -ENOENT;
	/* Backward shift: a later member of the probe run whose home is not
	 * between the hole and itself moves into the hole, so every lookup
	 * still finds it without tombstones. */
	for (j = i;;) {
		size_t home;

		j = (j + 1) & mask;
		if (!ix->slot[j].item)
			break;
		home = ix->slot[j].hash & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			ix->slot[i] = ix->slot[j];
			i = j;
		}
	}
	ix->slot[i] = (struct sl_index_slot){ 0 };
	ix->n--;
	return 0;
}

void sl_index_free(struct sl_index *ix)
{
	free(ix->slot);
	*ix = (struct sl_index){ 0 };
}

/* ---- arithmetic ---- */

uint64_t sl_mul_div(uint64_t a, uint64_t b, uint64_t c)
{
	unsigned __int128 q = (unsigned __int128)a * b / c;

	return q > UINT64_MAX ? UINT64_MAX : (uint64_t)q;
}

/* ---- parsers ---- */

int sl_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (*p - '0');
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int sl_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int err = sl_parse_u64(s, min, max, &v);

	if (!err)
		*out = v;
	return err;
}

int sl_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	/* strtod would take spaces, signs, hex, "inf" and "nan" */
	if (!s || !((*s >= '0' && *s <= '9') || *s == '.') ||
	    s[strspn(s, "0123456789.eE+-")])
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end)
		return -EINVAL;
	if (errno == ERANGE || !isfinite(v) || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

bool sl_list_next(const char **cursor, const char **item, size_t *len)
{
	const char *p = *cursor;

	if (!p)
		return false;
	*item = p;
	*len = strcspn(p, ",");
	/* past the comma, or NULL after the last item */
	*cursor = p[*len] ? p + *len + 1 : NULL;
	return true;
}

int sl_parse_hostport(const char *s, size_t len, struct sl_hostport *out)
{
	const char *end = s + len, *host = s, *colon;
	char port[8];
	size_t hlen, plen;
	uint32_t v;

	if (len && *s == '[') {
		const char *close = memchr(s, ']', len);

		if (!close || close + 1 == end || close[1] != ':')
			return -EINVAL;
		host = s + 1;
		hlen = close - host;
		colon = close + 1;
	} else {
		colon = memchr(s, ':', len);
		/* a bare IPv6 address needs its brackets */
		if (!colon || memchr(colon + 1, ':', end - colon - 1))
			return -EINVAL;
		hlen = colon - s;
	}
	plen = end - colon - 1;
	if (!hlen || hlen > SL_HOST_MAX || !plen || plen >= sizeof(port))
		return -EINVAL;
	memcpy(port, colon + 1, plen);
	port[plen] = '\0';
	if (sl_parse_u32(port, 0, 65535, &v))
		return -EINVAL;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	out->port = v;
	return 0;
}

int sl_parse_sockaddr(const char *s, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct sl_hostport hp;
	struct addrinfo *ai;
	char port[8];

	if (sl_parse_hostport(s, strlen(s), &hp))
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", hp.port);
	if (getaddrinfo(hp.host, port, &hints, &ai))
		return -EINVAL;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

bool sl_sockaddr_is_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET)
		return ntohl(in4->sin_addr.s_addr) >> 24 == 127;
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

int sl_parse_ifaces(const char *list, char (*names)[IF_NAMESIZE], int max,
		    int *n, char *err, size_t errlen)
{
	const char *cur = list, *it;
	size_t len;

	*n = 0;
	while (sl_list_next(&cur, &it, &len)) {
		if (!len) {
			snprintf(err, errlen, "empty interface name in '%s'",
				 list);
			return -EINVAL;
		}
		if (len >= IF_NAMESIZE) {
			snprintf(err, errlen,
				 "'%.*s' is longer than an interface name "
				 "(%d bytes)", (int)len, it, IF_NAMESIZE - 1);
			return -EINVAL;
		}
		if (*n == max) {
			snprintf(err, errlen, "more than %d interfaces in '%s'",
				 max, list);
			return -EINVAL;
		}
		memcpy(names[*n], it, len);
		names[*n][len] = '\0';
		for (int i = 0; i < *n; i++)
			if (!strcmp(names[i], names[*n])) {
				snprintf(err, errlen, "'%s' is given twice in "
					 "'%s'", names[i], list);
				return -EINVAL;
			}
		(*n)++;
	}
	return 0;
}

/*
 * Edit distance counting a swap of neighbours as one edit ("dprot" is one
 * from "dport", not two, so it is not mistaken for "proto"). Optimal
 * string alignment over three rolling rows.
 */
unsigned int sl_edit_distance(const char *a, const char *b)
{
	unsigned int rows[3][SL_EDIT_MAX + 1];
	unsigned int *pp, *prev, *cur;
	size_t la = strlen(a), lb = strlen(b), i, j;

	if (la > SL_EDIT_MAX || lb > SL_EDIT_MAX)
		return ~0u;
	/* Row i lives in rows[i % 3]. */
	for (j = 0; j <= lb; j++)
		rows[0][j] = j;
	for (i = 1; i <= la; i++) {
		cur = rows[i % 3];
		prev = rows[(i + 2) % 3];
		pp = rows[(i + 1) % 3];
		cur[0] = i;
		for (j = 1; j <= lb; j++) {
			unsigned int best =
			    prev[j - 1] + (a[i - 1] != b[j - 1]);

			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && pp[j - 2] + 1 < best)
				best = pp[j - 2] + 1;
			cur[j] = best;
		}
	}
	return rows[la % 3][lb];
}

/* ---- files ---- */

int sl_read_fd(int fd, size_t max, char **out, size_t *len)
{
	size_t used = 0, cap = 0;
	char *buf = NULL;

	for (;;) {
		ssize_t got;

		if (cap - used < 2) {
			size_t ncap = cap ? cap * 2 : 64 << 10;
			char *nbuf;

			if (ncap > max + 2)
				ncap = max + 2;
			nbuf = realloc(buf, ncap);
			if (!nbuf) {
				free(buf);
				return -ENOMEM;
			}
			buf = nbuf;
			cap = ncap;
		}
		got = read(fd, buf + used, cap - used - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = -errno;

			free(buf);
			return err;
		}
		if (got == 0)
			break;
		used += got;
		if (used > max) {
			free(buf);
			return -EFBIG;
		}
	}
	buf[used] = '\0';
	*out = buf;
	*len = used;
	return 0;
}

int sl_check_owner(const char *path, const struct stat *st, char *err,
		   size_t errlen)
{
	uid_t me = geteuid();

	if ((st->st_uid == me || st->st_uid == 0) && !(st->st_mode & 022))
		return 0;
	sl_set_err(err, errlen,
		   "%s: owner uid %u, mode %04o: it must be owned by uid %u "
		   "(this process) or root and not writable by group or "
		   "other", path, (unsigned int)st->st_uid,
		   (unsigned int)(st->st_mode & 07777), (unsigned int)me);
	return -EPERM;
}

int sl_check_owner_path(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st)) {
		int ret = -errno;

		sl_set_err(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	return sl_check_owner(path, &st, err, errlen);
}

/* ---- time ---- */

void sl_deadline_ts(clockid_t clk, uint64_t ms, struct timespec *ts)
{
	uint64_t ns;

	clock_gettime(clk, ts);
	ns = ts->tv_nsec + ms * NSEC_PER_MSEC;
	ts->tv_sec += ns / NSEC_PER_SEC;
	ts->tv_nsec = ns % NSEC_PER_SEC;
}

uint64_t sl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

void sl_format_utc(int64_t unix_ms, bool millis, char out[SL_UTC_MS_LEN + 1])
{
	time_t t = unix_ms / 1000;
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    strftime(out, SL_UTC_MS_LEN + 1, "%Y-%m-%dT%H:%M:%S", &tm) !=
		    SL_UTC_LEN - 1) {
		/* a year past 9999 or before 0: the epoch, not a garbled text */
		t = 0;
		gmtime_r(&t, &tm);
		strftime(out, SL_UTC_MS_LEN + 1, "%Y-%m-%dT%H:%M:%S", &tm);
		unix_ms = 0;
	}
	out += SL_UTC_LEN - 1;
	if (millis) {
		unsigned int ms = (unsigned int)(unix_ms % 1000);

		*out++ = '.';
		*out++ = '0' + ms / 100;
		*out++ = '0' + ms / 10 % 10;
		*out++ = '0' + ms % 10;
	}
	*out++ = 'Z';
	*out = '\0';
}

void sl_format_mono(uint64_t mono, uint64_t now, char out[SL_UTC_MS_LEN + 1])
{
	sl_format_utc(sl_wall_ms() - (int64_t)((now - mono) / NSEC_PER_MSEC),
		      true, out);
}

uint32_t sl_backoff_ms(uint32_t min_ms, uint32_t max_ms, uint32_t failures,
		       uint32_t rnd)
{
	uint64_t d = min_ms;

	for (uint32_t i = 1; i < failures && d < max_ms; i++)
		d *= 2;
	if (d > max_ms)
		d = max_ms;
	return d / 2 + (d - d / 2) * (uint64_t)rnd / UINT32_MAX;
}

uint32_t sl_xorshift32(uint32_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 17;
	*state ^= *state << 5;
	return *state;
}

int64_t sl_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}
