/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's signals for adaptive protection (adaptive.h): CPU pressure
 * (PSI, /proc/pressure/cpu), the softirq share of CPU time (/proc/stat),
 * the load average per CPU (/proc/loadavg), listen drops
 * (/proc/net/netstat) and the accept queues of TCP listeners (inet_diag
 * over netlink, through libmnl). /proc is a parameter, so tests read
 * files of their own; the listeners are those of the calling thread's
 * network namespace.
 */
#ifndef SLUICE_HOST_SIGNALS_H
#define SLUICE_HOST_SIGNALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adaptive.h"

struct sl_listener {
	uint16_t port;
	uint32_t queue;	  /* connections waiting for accept() */
	uint32_t backlog; /* the most it holds */
};

struct sl_host_reader {
	const char *proc;
	struct mnl_socket *nl; /* NULL: no inet_diag */
	uint32_t seq;
	int n_cpus;
	/* the previous reading of each file, if it was read */
	bool has_psi, has_cpu;
	uint64_t prev_ns;
	uint64_t psi_us;
	uint64_t cpu_total, cpu_softirq;
	/* the last dump */
	struct sl_listener *listeners;
	size_t n_listeners, cap_listeners;
};

/* proc: "/proc" or a directory laid out like it. 0 or -errno. */
int sl_host_reader_open(struct sl_host_reader *h, const char *proc);
void sl_host_reader_close(struct sl_host_reader *h);

/*
 * The host's part of a sample at now_ns: cpu_pressure and softirq over
 * the time since the previous call (-1 at the first, or where the host
 * lacks the file), load per CPU, overflows (ListenDrops). Also dumps the
 * TCP listeners for sl_listen_queue(). 0, or -errno when /proc cannot be
 * read at all.
 */
int sl_host_read(struct sl_host_reader *h, uint64_t now_ns,
		 struct sl_sys_sample *s);

/* The accept queues of the last dump's listeners on ports [lo, hi],
 * summed; -1 when none listens there. *backlog: their capacity. */
int64_t sl_listen_queue(const struct sl_host_reader *h, uint16_t lo,
			uint16_t hi, uint64_t *backlog);

#endif
