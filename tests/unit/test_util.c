/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the shared helpers (user/lib/util.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"

static void test_fnv1a(void **state)
{
	(void)state;
	/* the published FNV-1a 64 test vectors */
	assert_true(sl_fnv1a_str("") == 0xcbf29ce484222325ULL);
	assert_true(sl_fnv1a_str("a") == 0xaf63dc4c8601ec8cULL);
	assert_true(sl_fnv1a_str("foobar") == 0x85944171f73967e8ULL);
	/* continuing a hash is hashing the concatenation */
	assert_true(sl_fnv1a(sl_fnv1a_str("foo"), "bar", 3) ==
		    sl_fnv1a_str("foobar"));
}

static void test_parse_u64(void **state)
{
	static const char *const bad[] = { "", " 5", "+5", "-5", "5 ", "5x",
					   "0x10", "1e3", "5.0" };
	uint64_t v = 42;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (sl_parse_u64(bad[i], 0, UINT64_MAX, &v) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
		assert_int_equal(v, 42); /* untouched */
	}
	assert_int_equal(sl_parse_u64(NULL, 0, 1, &v), -EINVAL);
	assert_int_equal(sl_parse_u64("18446744073709551615", 0, UINT64_MAX,
				      &v),
			 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(sl_parse_u64("18446744073709551616", 0, UINT64_MAX,
				      &v),
			 -ERANGE);
	assert_int_equal(sl_parse_u64("99999999999999999999999", 0,
				      UINT64_MAX, &v),
			 -ERANGE);
	assert_int_equal(sl_parse_u64("007", 0, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(sl_parse_u64("11", 0, 10, &v), -ERANGE);
	assert_int_equal(sl_parse_u64("0", 1, 10, &v), -ERANGE);
}

static void test_parse_u32(void **state)
{
	uint32_t v = 9;

	(void)state;
	assert_int_equal(sl_parse_u32("4294967295", 0, UINT32_MAX, &v), 0);
	assert_true(v == UINT32_MAX);
	assert_int_equal(sl_parse_u32("4294967296", 0, UINT32_MAX, &v),
			 -ERANGE);
	assert_int_equal(sl_parse_u32("", 0, UINT32_MAX, &v), -EINVAL);
	assert_true(v == UINT32_MAX);
}

static void test_parse_double(void **state)
{
	static const char *const bad[] = { "", " 1", "+1", "-1", "1s", "nan",
					   "inf", "0x1p3", "1,5", "e5" };
	double v = 3;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (sl_parse_double(bad[i], -1e9, 1e9, &v) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
	assert_true(v == 3);
	assert_int_equal(sl_parse_double("0.25", 0.1, 10, &v), 0);
	assert_true(v == 0.25);
	assert_int_equal(sl_parse_double(".5", 0.1, 10, &v), 0);
	assert_true(v == 0.5);
	assert_int_equal(sl_parse_double("1e1", 0.1, 10, &v), 0);
	assert_true(v == 10);
	assert_int_equal(sl_parse_double("0", 0.1, 10, &v), -ERANGE);
	assert_int_equal(sl_parse_double("1e999", 0, 1e300, &v), -ERANGE);
}

static void test_list(void **state)
{
	const char *cur = "a,,bc,", *it;
	char got[64] = "";
	size_t len;

	(void)state;
	while (sl_list_next(&cur, &it, &len))
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "[%.*s]",
			 (int)len, it);
	/* empty items come back for the caller to refuse */
	assert_string_equal(got, "[a][][bc][]");
}

static void test_hostport(void **state)
{
	static const char *const bad[] = {
		"", "host", "host:", ":80", "host:http", "host:65536",
		"host:+80", "::1:80", "[::1]", "[::1]80", "[]:80", "h:80:90",
	};
	struct sl_hostport hp;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (sl_parse_hostport(bad[i], strlen(bad[i]), &hp) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
	assert_int_equal(sl_parse_hostport("198.18.0.1:7070", 15, &hp), 0);
	assert_string_equal(hp.host, "198.18.0.1");
	assert_int_equal(hp.port, 7070);
	assert_int_equal(sl_parse_hostport("[2001:db8::1]:0", 15, &hp), 0);
	assert_string_equal(hp.host, "2001:db8::1");
	assert_int_equal(hp.port, 0);
	/* len bounds the text: the rest of a list is not read */
	assert_int_equal(sl_parse_hostport("tokend:7070,x", 11, &hp), 0);
	assert_string_equal(hp.host, "tokend");
}

static void test_sockaddr(void **state)
{
	static const char *const bad[] = { "tokend:7070", "198.18.0.1",
					   "198.18.0.300:1", "[::1]:x" };
	struct sockaddr_storage ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	socklen_t len;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (sl_parse_sockaddr(bad[i], &ss, &len) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
	assert_int_equal(sl_parse_sockaddr("198.18.0.1:7070", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(*in4));
	assert_int_equal(ntohs(in4->sin_port), 7070);
	assert_int_equal(ntohl(in4->sin_addr.s_addr), 0xc6120001);
	assert_int_equal(sl_parse_sockaddr("[2001:db8::1]:0", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(*in6));
	assert_int_equal(in6->sin6_addr.s6_addr[15], 1);
}

static void test_ifaces(void **state)
{
	char names[SL_MAX_IFACES][IF_NAMESIZE], err[256];
	char many[SL_MAX_IFACES * 4 + 8] = "e0";
	int n;

	(void)state;
	assert_int_equal(sl_parse_ifaces("eth0,veth-rx", names, SL_MAX_IFACES,
					 &n, err, sizeof(err)),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[1], "veth-rx");
	assert_int_equal(sl_parse_ifaces("eth0,,eth1", names, SL_MAX_IFACES,
					 &n, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "empty interface name in 'eth0,,eth1'");
	assert_int_equal(sl_parse_ifaces("a-very-long-interface-name", names,
					 SL_MAX_IFACES, &n, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "longer than an interface name (15"));
	for (int i = 1; i <= SL_MAX_IFACES; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
			 ",e%d", i);
	assert_int_equal(sl_parse_ifaces(many, names, SL_MAX_IFACES, &n, err,
					 sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "more than 16 interfaces"));
	/* the same interface twice would be attached twice */
	assert_int_equal(sl_parse_ifaces("v0,v1,v0", names, SL_MAX_IFACES, &n,
					 err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "'v0' is given twice in 'v0,v1,v0'");
}

static void test_edit_distance(void **state)
{
	(void)state;
	assert_int_equal(sl_edit_distance("dport", "dport"), 0);
	/* a swap of neighbours is one edit: "dprot" is near "dport" */
	assert_int_equal(sl_edit_distance("dprot", "dport"), 1);
	assert_int_equal(sl_edit_distance("stauts", "status"), 1);
	assert_int_equal(sl_edit_distance("", "abc"), 3);
	assert_int_equal(sl_edit_distance("wat", "watch"), 2);
}

/* Colliding hashes come back one by one; other hashes never. */
static void test_index(void **state)
{
	struct sl_index ix;
	size_t cursor = 0;
	int64_t item;
	int found = 0;

	(void)state;
	assert_int_equal(sl_index_init(&ix, 4), 0);
	/* past the initial size: it must grow and keep every entry */
	for (uint32_t i = 0; i < 1000; i++)
		assert_int_equal(sl_index_add(&ix, i % 10 == 3 ? 77777 : i, i), 0);
	while ((item = sl_index_next(&ix, 77777, &cursor)) >= 0) {
		assert_int_equal(item % 10, 3);
		found++;
	}
	assert_int_equal(found, 100);
	cursor = 0;
	assert_int_equal(sl_index_next(&ix, 500, &cursor), 500);
	assert_int_equal(sl_index_next(&ix, 500, &cursor), -1);
	cursor = 0;
	assert_int_equal(sl_index_next(&ix, 5000, &cursor), -1);
	sl_index_free(&ix);
}

/* Deleted items are gone; every other one is still found, colliding
 * runs and wrapping past the end included. */
static void test_index_del(void **state)
{
	struct sl_index ix;
	size_t cursor;
	int64_t item;

	(void)state;
	assert_int_equal(sl_index_init(&ix, 4), 0);
	for (uint32_t i = 0; i < 1000; i++)
		assert_int_equal(sl_index_add(&ix, i % 7 ? i * 0x9e3779b9ULL
							    : UINT64_MAX - i % 3,
					      i), 0);
	for (uint32_t i = 0; i < 1000; i += 2)
		assert_int_equal(sl_index_del(&ix, i % 7 ? i * 0x9e3779b9ULL
							 : UINT64_MAX - i % 3,
					      i), 0);
	assert_int_equal(sl_index_del(&ix, 0, 0), -ENOENT);
	assert_int_equal(ix.n, 500);
	for (uint32_t i = 0; i < 1000; i++) {
		uint64_t h = i % 7 ? i * 0x9e3779b9ULL : UINT64_MAX - i % 3;
		bool found = false;

		cursor = 0;
		while ((item = sl_index_next(&ix, h, &cursor)) >= 0)
			found |= item == i;
		assert_int_equal(found, i % 2);
	}
	sl_index_free(&ix);
}

static void test_read_fd(void **state)
{
	char name[] = "/tmp/sluice-util-XXXXXX", *buf;
	int fd = mkstemp(name);
	size_t len;

	(void)state;
	assert_true(fd >= 0);
	unlink(name);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(sl_read_fd(fd, 10, &buf, &len), 0);
	assert_int_equal(len, 10);
	assert_string_equal(buf, "0123456789");
	free(buf);
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(sl_read_fd(fd, 9, &buf, &len), -EFBIG);
	close(fd);
}

static void test_format_utc(void **state)
{
	char buf[SL_UTC_MS_LEN + 1];

	(void)state;
	sl_format_utc(1764612000123LL, false, buf);
	assert_string_equal(buf, "2025-12-01T18:00:00Z");
	assert_int_equal(strlen(buf), SL_UTC_LEN);
	sl_format_utc(1764612000123LL, true, buf);
	assert_string_equal(buf, "2025-12-01T18:00:00.123Z");
	assert_int_equal(strlen(buf), SL_UTC_MS_LEN);
	sl_format_utc(5, true, buf);
	assert_string_equal(buf, "1970-01-01T00:00:00.005Z");
}

static void test_mul_div(void **state)
{
	(void)state;
	/* a manual quota of a 10 Gbit/s-scale bps rule: 5e9 x 1e10 > 2^64 */
	assert_int_equal(sl_mul_div(5000000000ULL, 10000000000ULL,
				    10000000000ULL), 5000000000ULL);
	assert_int_equal(sl_mul_div(5000000000ULL, 7500000000ULL,
				    10000000000ULL), 3750000000ULL);
	assert_int_equal(sl_mul_div(7, 3, 2), 10);
	assert_int_equal(sl_mul_div(UINT64_MAX, UINT64_MAX, UINT64_MAX),
			 UINT64_MAX);
	assert_int_equal(sl_mul_div(UINT64_MAX, 2, 1), UINT64_MAX);
	assert_int_equal(sl_mul_div(0, UINT64_MAX, 1), 0);
}

static void test_check_owner(void **state)
{
	char dir[] = "/tmp/sluice-owner-XXXXXX", err[512];

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(sl_check_owner_path(dir, err, sizeof(err)), 0);
	chmod(dir, 0707);
	assert_int_equal(sl_check_owner_path(dir, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, dir));
	assert_non_null(strstr(err, "mode 0707"));
	assert_non_null(strstr(err, "not writable by group or other"));
	chmod(dir, 0755);
	assert_int_equal(sl_check_owner_path(dir, err, sizeof(err)), 0);
	/* another user's: only root's or our own is trusted */
	if (geteuid() == 0) {
		assert_int_equal(chown(dir, 65534, 65534), 0);
		assert_int_equal(sl_check_owner_path(dir, err, sizeof(err)),
				 -EPERM);
		assert_non_null(strstr(err, "owner uid 65534"));
	}
	rmdir(dir);
	assert_int_equal(sl_check_owner_path(dir, err, sizeof(err)), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_parse_u64),
		cmocka_unit_test(test_parse_u32),
		cmocka_unit_test(test_parse_double),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_hostport),
		cmocka_unit_test(test_sockaddr),
		cmocka_unit_test(test_ifaces),
		cmocka_unit_test(test_edit_distance),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_index_del),
		cmocka_unit_test(test_read_fd),
		cmocka_unit_test(test_format_utc),
		cmocka_unit_test(test_mul_div),
		cmocka_unit_test(test_check_owner),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
