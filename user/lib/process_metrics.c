// SPDX-License-Identifier: GPL-2.0
/* The process_* metrics from /proc/self (process_metrics.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "process_metrics.h"
#include "util.h"

#define PROC_STAT_MAX (1 << 20) /* /proc/stat: a line per CPU */

/* Fields of /proc/PID/stat after "(comm)", counted from state (field 3). */
#define F_UTIME	    (14 - 3)
#define F_STIME	    (15 - 3)
#define F_STARTTIME (22 - 3)
#define F_VSIZE	    (23 - 3)
#define F_RSS	    (24 - 3)

int sl_process_stats_parse(const char *stat, const char *proc_stat,
			   long ticks, long page_size,
			   struct sl_process_stats *out)
{
	unsigned long long f[F_RSS + 1], btime;
	const char *p = strrchr(stat, ')'), *b;
	char *end;

	/* comm may hold spaces and parentheses: it ends at the last ')' */
	if (!p || p[1] != ' ' || !p[2] || ticks <= 0 || page_size <= 0)
		return -EINVAL;
	p += 2;
	p += strcspn(p, " "); /* state, a letter */
	for (int i = 1; i <= F_RSS; i++) {
		if (*p != ' ')
			return -EINVAL;
		p++;
		/* some fields are signed (tpgid -1); those we read are not */
		errno = 0;
		f[i] = *p == '-' ? 0 : strtoull(p, &end, 10);
		if (*p == '-')
			strtoll(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		p = end;
	}
	b = strstr(proc_stat, "\nbtime ");
	if (!b)
		return -EINVAL;
	btime = strtoull(b + 7, &end, 10);
	if (end == b + 7)
		return -EINVAL;
	out->cpu_seconds = (double)(f[F_UTIME] + f[F_STIME]) / ticks;
	out->start_time = btime + (double)f[F_STARTTIME] / ticks;
	out->virtual_bytes = f[F_VSIZE];
	out->resident_bytes = f[F_RSS] * (unsigned long long)page_size;
	return 0;
}

static char *read_file(const char *proc, const char *name, size_t max)
{
	char path[256], *buf = NULL;
	size_t len;
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s", proc, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	err = sl_read_fd(fd, max, &buf, &len);
	close(fd);
	errno = -err;
	return err ? NULL : buf;
}

int sl_process_stats_read(const char *proc, struct sl_process_stats *out)
{
	char *stat, *proc_stat, path[256];
	struct rlimit rl;
	struct dirent *e;
	DIR *d;
	int err;

	stat = read_file(proc, "self/stat", 4096);
	if (!stat)
		return -errno;
	proc_stat = read_file(proc, "stat", PROC_STAT_MAX);
	if (!proc_stat) {
		err = -errno;
		free(stat);
		return err;
	}
	err = sl_process_stats_parse(stat, proc_stat, sysconf(_SC_CLK_TCK),
				     sysconf(_SC_PAGESIZE), out);
	free(stat);
	free(proc_stat);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/self/fd", proc);
	d = opendir(path);
	if (!d)
		return -errno;
	out->open_fds = 0;
	while ((e = readdir(d)))
		out->open_fds += e->d_name[0] != '.';
	out->open_fds--; /* the directory's own */
	closedir(d);
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	out->max_fds = rl.rlim_cur;
	return 0;
}

void sl_metrics_process(struct sl_metrics *m,
			const struct sl_process_stats *st)
{
	static const struct sl_metric cpu = {
		"process_cpu_seconds_total",
		"Total user and system CPU time spent in seconds."
	};
	static const struct sl_metric rss = {
		"process_resident_memory_bytes", "Resident memory size in bytes."
	};
	static const struct sl_metric vsz = {
		"process_virtual_memory_bytes", "Virtual memory size in bytes."
	};
	static const struct sl_metric start = {
		"process_start_time_seconds",
		"Start time of the process since unix epoch in seconds."
	};
	static const struct sl_metric fds = {
		"process_open_fds", "Number of open file descriptors."
	};
	static const struct sl_metric max_fds = {
		"process_max_fds", "Maximum number of open file descriptors."
	};

	sl_metrics_counter_real(m, &cpu, NULL, 0, st->cpu_seconds);
	sl_metrics_gauge(m, &rss, NULL, 0, st->resident_bytes);
	sl_metrics_gauge(m, &vsz, NULL, 0, st->virtual_bytes);
	sl_metrics_gauge(m, &start, NULL, 0, st->start_time);
	sl_metrics_gauge(m, &fds, NULL, 0, st->open_fds);
	sl_metrics_gauge(m, &max_fds, NULL, 0, st->max_fds);
}

void sl_metrics_process_self(struct sl_metrics *m)
{
	struct sl_process_stats st;

	if (!sl_process_stats_read("/proc", &st))
		sl_metrics_process(m, &st);
}
