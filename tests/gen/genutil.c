// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "genutil.h"

volatile sig_atomic_t gen_stop;

void gen_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void on_stop_signal(int sig)
{
	(void) sig;
	gen_stop = 1;
}

/* No SA_RESTART: a signal must cut a sleep short. */
int gen_catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal};

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL))
		return -errno;
	return 0;
}

/* how is SIG_BLOCK or SIG_UNBLOCK, applied to SIGINT and SIGTERM. */
int gen_block_signals(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(how, &set, NULL))
		return -errno;
	return 0;
}

/* Sleeps in steps of at most 100 ms, so a signal that lands just before a
 * step is noticed at the next one. Returns -EINTR once gen_stop is set.
 */
int gen_sleep_until(uint64_t deadline_ns)
{
	const uint64_t step = 100 * NSEC_PER_MSEC;
	struct timespec ts;
	uint64_t now, t;

	while (!gen_stop && (now = sl_now_ns()) < deadline_ns) {
		t = deadline_ns - now > step ? now + step : deadline_ns;
		ts.tv_sec = t / NSEC_PER_SEC;
		ts.tv_nsec = t % NSEC_PER_SEC;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	return gen_stop ? -EINTR : 0;
}

/* cpu < 0 pins to the CPU we are running on now. */
int gen_pin_cpu(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		cpu = sched_getcpu();
	if (cpu < 0)
		return -errno;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return -errno;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double gen_median(const double *v, int n, double *min, double *max)
{
	double *s = malloc(n * sizeof(*s)), m;

	if (!s)
		return NAN;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	if (min)
		*min = s[0];
	if (max)
		*max = s[n - 1];
	m = n & 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}
