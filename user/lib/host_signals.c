// SPDX-License-Identifier: GPL-2.0
/* The host's signals for adaptive protection (host_signals.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>

#include "host_signals.h"
#include "util.h"

#define PROC_FILE_MAX (1 << 20)

/* proc/path, whole, NUL-terminated; NULL when it cannot be read. */
static char *proc_read(const struct sl_host_reader *h, const char *path)
{
	char name[PATH_MAX];
	char *buf = NULL;
	size_t len;
	int fd;

	snprintf(name, sizeof(name), "%s/%s", h->proc, path);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (sl_read_fd(fd, PROC_FILE_MAX, &buf, &len))
		buf = NULL;
	close(fd);
	return buf;
}

int sl_host_reader_open(struct sl_host_reader *h, const char *proc)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	memset(h, 0, sizeof(*h));
	h->proc = proc;
	h->n_cpus = n > 0 ? n : 1;
	h->nl = mnl_socket_open(NETLINK_SOCK_DIAG);
	if (h->nl && mnl_socket_bind(h->nl, 0, MNL_SOCKET_AUTOPID)) {
		int err = -errno;

		mnl_socket_close(h->nl);
		h->nl = NULL;
		return err;
	}
	return h->nl ? 0 : -errno;
}

void sl_host_reader_close(struct sl_host_reader *h)
{
	if (h->nl)
		mnl_socket_close(h->nl);
	free(h->listeners);
	memset(h, 0, sizeof(*h));
}

/* "some ... total=N": microseconds some task waited for a CPU. */
static int psi_total(const char *text, uint64_t *us)
{
	const char *p = strstr(text ? text : "", "some ");
	const char *t = p ? strstr(p, "total=") : NULL;
	unsigned long long v;

	if (!t || sscanf(t, "total=%llu", &v) != 1)
		return -EINVAL;
	*us = v;
	return 0;
}

/* The "cpu" line of /proc/stat: all ticks, and softirq's. */
static int cpu_ticks(const char *text, uint64_t *total, uint64_t *softirq)
{
	unsigned long long v[10] = { 0 };
	int n;

	if (!text || strncmp(text, "cpu ", 4))
		return -EINVAL;
	n = sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu "
			     "%llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6], &v[7], &v[8], &v[9]);
	if (n < 7)
		return -EINVAL;
	/* guest time (8, 9) is counted in user time already */
	*total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
	*softirq = v[6];
	return 0;
}

/* TcpExt's ListenDrops in /proc/net/netstat: a header line of names,
 * then a line of values. */
static int listen_drops(const char *text, uint64_t *drops)
{
	const char *names = strstr(text ? text : "", "TcpExt: ");
	const char *vals = names ? strstr(names + 1, "\nTcpExt: ") : NULL;
	int col = -1, i = 0;

	if (!vals)
		return -EINVAL;
	for (const char *p = names + 8; *p && *p != '\n'; i++) {
		size_t len = strcspn(p, " \n");

		if (len == 11 && !strncmp(p, "ListenDrops", 11))
			col = i;
		p += len;
		p += *p == ' ';
	}
	vals += 9;
	for (i = 0; col >= 0 && i < col; i++) {
		vals = strchr(vals, ' ');
		if (!vals)
			return -EINVAL;
		vals++;
	}
	if (col < 0 || sscanf(vals, "%" SCNu64, drops) != 1)
		return -EINVAL;
	return 0;
}

static int add_listener(const struct nlmsghdr *nlh, void *arg)
{
	const struct inet_diag_msg *m = mnl_nlmsg_get_payload(nlh);
	struct sl_host_reader *h = arg;
	struct sl_listener *l;

	if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return MNL_CB_ERROR;
	if (h->n_listeners == h->cap_listeners) {
		size_t cap = h->cap_listeners ? 2 * h->cap_listeners : 64;

		l = realloc(h->listeners, cap * sizeof(*l));
		if (!l)
			return MNL_CB_ERROR;
		h->listeners = l;
		h->cap_listeners = cap;
	}
	l = &h->listeners[h->n_listeners++];
	l->port = ntohs(m->id.idiag_sport);
	l->queue = m->idiag_rqueue;
	l->backlog = m->idiag_wqueue;
	return MNL_CB_OK;
}

/* Every TCP listener of one family into h->listeners. */
static int dump_listeners(struct sl_host_reader *h, uint8_t family)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct inet_diag_req_v2 *req;
	struct nlmsghdr *nlh;
	unsigned int portid = mnl_socket_get_portid(h->nl);
	int ret;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = ++h->seq;
	req = mnl_nlmsg_put_extra_header(nlh, sizeof(*req));
	req->sdiag_family = family;
	req->sdiag_protocol = IPPROTO_TCP;
	req->idiag_states = 1 << TCP_LISTEN;
	if (mnl_socket_sendto(h->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	while ((ret = mnl_socket_recvfrom(h->nl, buf, sizeof(buf))) > 0) {
		ret = mnl_cb_run(buf, ret, h->seq, portid, add_listener, h);
		if (ret <= MNL_CB_STOP)
			break;
	}
	/* a family without TCP (IPv6 off) answers ENOENT: no listeners */
	return ret < 0 && errno != ENOENT ? -errno : 0;
}

int sl_host_read(struct sl_host_reader *h, uint64_t now_ns,
		 struct sl_sys_sample *s)
{
	char *psi = proc_read(h, "pressure/cpu");
	char *stat = proc_read(h, "stat");
	char *load = proc_read(h, "loadavg");
	char *netstat = proc_read(h, "net/netstat");
	uint64_t psi_us = 0, total = 0, softirq = 0;
	bool has_psi = !psi_total(psi, &psi_us);
	bool has_cpu = !cpu_ticks(stat, &total, &softirq);
	double avg;
	int err = 0;

	s->now_ns = now_ns;
	s->cpu_pressure = s->softirq = s->load = -1;
	if (has_psi && h->has_psi && now_ns > h->prev_ns)
		s->cpu_pressure = (double)(psi_us - h->psi_us) * 1000 /
				  (double)(now_ns - h->prev_ns);
	if (has_cpu && h->has_cpu && total > h->cpu_total)
		s->softirq = (double)(softirq - h->cpu_softirq) /
			     (double)(total - h->cpu_total);
	if (load && sscanf(load, "%lf", &avg) == 1)
		s->load = avg / h->n_cpus;
	if (listen_drops(netstat, &s->overflows))
		s->overflows = 0;
	if (!has_psi && !has_cpu && !load)
		err = -ENOENT;
	h->has_psi = has_psi;
	h->has_cpu = has_cpu;
	h->prev_ns = now_ns;
	h->psi_us = psi_us;
	h->cpu_total = total;
	h->cpu_softirq = softirq;
	free(psi);
	free(stat);
	free(load);
	free(netstat);

	h->n_listeners = 0;
	if (h->nl && !err)
		err = dump_listeners(h, AF_INET);
	if (h->nl && !err)
		err = dump_listeners(h, AF_INET6);
	return err;
}

int64_t sl_listen_queue(const struct sl_host_reader *h, uint16_t lo,
			uint16_t hi, uint64_t *backlog)
{
	int64_t queue = -1;

	*backlog = 0;
	for (size_t i = 0; i < h->n_listeners; i++) {
		const struct sl_listener *l = &h->listeners[i];

		if (l->port < lo || l->port > hi)
			continue;
		queue = (queue < 0 ? 0 : queue) + l->queue;
		*backlog += l->backlog;
	}
	return queue;
}
