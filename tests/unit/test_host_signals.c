/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's signals (user/lib/host_signals.c): /proc files of the test's
 * own making, read twice a known time apart; and the accept queue of a
 * real listener on loopback, with connections nobody accepts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host_signals.h"

#define MS 1000000ULL

static char dir[] = "/tmp/sluice-proc-XXXXXX";

static void put(const char *path, const char *fmt, ...)
{
	char name[256];
	va_list ap;
	FILE *f;

	snprintf(name, sizeof(name), "%s/%s", dir, path);
	f = fopen(name, "w");
	assert_non_null(f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* A /proc with PSI total T us, softirq S of 1000 ticks, drops D. */
static void proc_files(unsigned long long t, unsigned s, unsigned d)
{
	put("pressure/cpu", "some avg10=1.00 avg60=0.50 avg300=0.10 "
			    "total=%llu\nfull avg10=0.00 avg60=0.00 "
			    "avg300=0.00 total=0\n", t);
	put("stat", "cpu  %u 0 100 %u 0 0 %u 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 "
		    "10\nintr 1 2\n", 400 - s, 500, 100 + s);
	put("loadavg", "3.00 2.00 1.00 2/300 4242\n");
	put("net/netstat",
	    "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPHPHits\n"
	    "TcpExt: 1 %u %u 7\nIpExt: InNoRoutes\nIpExt: 0\n", d / 2, d);
}

static int setup(void **state)
{
	char sub[300];

	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/pressure", dir);
	mkdir(sub, 0700);
	snprintf(sub, sizeof(sub), "%s/net", dir);
	mkdir(sub, 0700);
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static void test_proc_signals(void **state)
{
	struct sl_host_reader h;
	struct sl_sys_sample s;

	assert_int_equal(sl_host_reader_open(&h, dir), 0);
	proc_files(1000000, 50, 10);
	assert_int_equal(sl_host_read(&h, 1000 * MS, &s), 0);
	/* shares need two readings */
	assert_true(s.cpu_pressure < 0);
	assert_true(s.softirq < 0);
	assert_true(s.load > 0);
	assert_int_equal(s.overflows, 10);

	/* 250 ms later: 100 ms of PSI stall, 150 of 1000 more ticks */
	proc_files(1100000, 50 + 150, 25);
	put("stat", "cpu  %u 0 100 %u 0 0 %u 0 0 0\n", 400 - 50 + 850,
	    500, 100 + 50 + 150);
	assert_int_equal(sl_host_read(&h, 1250 * MS, &s), 0);
	assert_float_equal(s.cpu_pressure, 0.4, 1e-9);
	assert_float_equal(s.softirq, 0.15, 1e-9);
	assert_float_equal(s.load, 3.0 / sysconf(_SC_NPROCESSORS_ONLN), 1e-9);
	assert_int_equal(s.overflows, 25);
	sl_host_reader_close(&h);
}

/* A host without PSI (psi=0) nor netstat: those signals are unknown. */
static void test_missing_files(void **state)
{
	struct sl_host_reader h;
	struct sl_sys_sample s;
	char name[300];

	proc_files(1000, 0, 0);
	snprintf(name, sizeof(name), "%s/pressure/cpu", dir);
	unlink(name);
	snprintf(name, sizeof(name), "%s/net/netstat", dir);
	unlink(name);
	assert_int_equal(sl_host_reader_open(&h, dir), 0);
	assert_int_equal(sl_host_read(&h, 100 * MS, &s), 0);
	put("stat", "cpu  400 0 100 900 0 0 120 0 0 0\n");
	assert_int_equal(sl_host_read(&h, 200 * MS, &s), 0);
	assert_true(s.cpu_pressure < 0);
	/* 20 of 420 more ticks in softirq */
	assert_float_equal(s.softirq, 20.0 / 420, 1e-9);
	assert_int_equal(s.overflows, 0);
	sl_host_reader_close(&h);

	/* no /proc at all is an error */
	assert_int_equal(sl_host_reader_open(&h, "/nonexistent"), 0);
	assert_int_equal(sl_host_read(&h, 100 * MS, &s), -ENOENT);
	sl_host_reader_close(&h);
}

/* A listener with backlog 8 and 3 connections nobody accepted. */
static void test_accept_queue(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	struct sl_host_reader h;
	struct sl_sys_sample s;
	uint64_t backlog;
	int lfd, cfd[3];
	uint16_t port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 8), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	for (int i = 0; i < 3; i++) {
		cfd[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(cfd[i], (struct sockaddr *)&a,
					 sizeof(a)), 0);
	}
	assert_int_equal(sl_host_reader_open(&h, "/proc"), 0);
	assert_int_equal(sl_host_read(&h, 100 * MS, &s), 0);
	assert_int_equal(sl_listen_queue(&h, port, port, &backlog), 3);
	assert_int_equal(backlog, 8);
	/* the range around it, and a range without listeners */
	assert_int_equal(sl_listen_queue(&h, port - 1, port + 1, &backlog)
				 >= 3, 1);
	close(cfd[0]);
	close(accept(lfd, NULL, NULL));
	assert_int_equal(sl_host_read(&h, 200 * MS, &s), 0);
	assert_int_equal(sl_listen_queue(&h, port, port, &backlog), 2);
	close(lfd);
	assert_int_equal(sl_host_read(&h, 300 * MS, &s), 0);
	assert_int_equal(sl_listen_queue(&h, port, port, &backlog), -1);
	sl_host_reader_close(&h);
	for (int i = 1; i < 3; i++)
		close(cfd[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_signals),
		cmocka_unit_test(test_missing_files),
		cmocka_unit_test(test_accept_queue),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
