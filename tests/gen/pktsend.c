// SPDX-License-Identifier: GPL-2.0
/* pktsend: paced sender on an AF_PACKET raw socket, sendmmsg in batches
 * of 64. Unlike xdpflood every packet is a fresh skb, so receivers may
 * edit them (VLAN untagging) and the rate is smooth. Prints
 * {"sent","seconds","pps","skipped","stalls"}: with --rate, the packets
 * given up after stalls and when (stalls: [seconds from the start, packets
 * given up], the first MAX_STALLS), so a test can tell a dip the sender
 * made from one the receiver made.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/socket.h>
#include <linux/if_packet.h>

#include "frame.h"
#include "genutil.h"

#define BATCH 64

/* With --rate, wake up when about this many ns' worth of packets is due:
 * smooth at the scale of any sliding window a test measures, and cheap.
 */
#define PACE_STEP_NS 100000ull

/* After a stall (preemption) send at most 5 ms worth at once and give up
 * the rest: a catch-up burst would exceed the rate in a sliding window.
 */
#define MAX_BACKLOG_NS 5000000ull

#define MAX_STALLS 32

/* Keeps the pacing arithmetic (ns x pps) inside 64 bits over 60 s. */
#define MAX_RATE 100000000u

struct send_opts {
	const char *dev;
	double duration;
	uint64_t count; /* 0: no limit */
	uint32_t rate;	/* 0: as fast as possible */
	int cpu;
};

struct stall {
	uint64_t at_ns;
	uint64_t skipped;
};

struct sender {
	int fd;
	uint64_t skipped;
	unsigned int nr_stalls;
	struct stall stalls[MAX_STALLS];
	struct frame f;
	uint8_t buf[BATCH][FRAME_MAX_LEN];
	struct iovec iov[BATCH];
	struct mmsghdr msg[BATCH];
};

static const char usage[] =
    "usage: pktsend --dev IF --dst-mac MAC (--duration S | --count N)\n"
    "       [options]\n"
    "Sends packets out of IF from an AF_PACKET socket (run it in the\n"
    "sender namespace).\n"
    "  --dev IF               device to send out of\n"
    "  --duration S           seconds to run (at most 60; 60 if only\n"
    "                         --count is given)\n"
    "  --count N              stop after N packets\n"
    "  --rate PPS             smooth rate: sends when 100 us worth is\n"
    "                         due (default: as fast as possible)\n"
    "  --cpu N                CPU to run on (default: the current one)\n";

static void print_usage(FILE *f)
{
	fputs(usage, f);
	fputs(FRAME_USAGE, f);
}

static int parse_args(int argc, char **argv, struct send_opts *o,
		      struct frame_spec *spec)
{
	static const struct option longopts[] = {
	    {"dev", required_argument, NULL, 'd'},
	    {"duration", required_argument, NULL, 't'},
	    {"count", required_argument, NULL, 'n'},
	    {"rate", required_argument, NULL, 'r'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    FRAME_LONG_OPTIONS,
	    {0},
	};
	int opt, idx = 0, err;
	uint32_t v;

	o->duration = -1;
	o->cpu = -1;
	while ((opt = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
		switch (opt) {
		case 'd':
			o->dev = optarg;
			err = 0;
			break;
		case 't':
			err = sl_parse_double(optarg, 0, GEN_MAX_SECONDS,
						&o->duration);
			break;
		case 'n':
			err = sl_parse_u32(optarg, 1, UINT32_MAX, &v);
			o->count = v;
			break;
		case 'r':
			err = sl_parse_u32(optarg, 1, MAX_RATE, &o->rate);
			break;
		case 'c':
			err = sl_parse_u32(optarg, 0, CPU_SETSIZE - 1, &v);
			o->cpu = v;
			break;
		case 'h':
			print_usage(stdout);
			exit(0);
		case '?':
			return -EINVAL;
		default:
			err = frame_spec_opt(spec, opt, optarg);
			break;
		}
		if (err) {
			gen_log("bad value for --%s: %s", longopts[idx].name,
				optarg);
			return -EINVAL;
		}
	}
	if (!o->dev || (o->duration < 0 && !o->count) || optind != argc) {
		print_usage(stderr);
		return -EINVAL;
	}
	if (o->duration < 0)
		o->duration = GEN_MAX_SECONDS;
	return 0;
}

static int sender_open(struct sender *s, int ifindex)
{
	struct sockaddr_ll sll = {.sll_family = AF_PACKET,
				  .sll_ifindex = ifindex};
	int one = 1, i;

	/* protocol 0: this socket never receives */
	s->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -errno;
	if (bind(s->fd, (struct sockaddr *) &sll, sizeof(sll)) ||
	    setsockopt(s->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)))
		return -errno;
	for (i = 0; i < BATCH; i++) {
		memcpy(s->buf[i], s->f.data, s->f.len);
		s->iov[i].iov_base = s->buf[i];
		s->iov[i].iov_len = s->f.len;
		s->msg[i].msg_hdr.msg_iov = &s->iov[i];
		s->msg[i].msg_hdr.msg_iovlen = 1;
	}
	return 0;
}

/* Sends packets first .. first + n - 1; packet k carries source
 * k % sources. Returns how many went out, or -errno.
 */
static int send_batch(struct sender *s, uint64_t first, int n)
{
	int i, sent;

	if (s->f.rw.sources > 1)
		for (i = 0; i < n; i++)
			frame_set_source(&s->f, s->buf[i],
					 (first + i) % s->f.rw.sources);
	sent = sendmmsg(s->fd, s->msg, n, 0);
	return sent < 0 ? -errno : sent;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static int run(struct sender *s, const struct send_opts *o, uint64_t *sent,
	       uint64_t *ns)
{
	uint64_t start = sl_now_ns(), now = start, end, limit, due, need;
	uint64_t step, backlog, lost;
	int n;

	end = start + (uint64_t) (o->duration * NSEC_PER_SEC);
	limit = o->count ? o->count : UINT64_MAX;
	step = o->rate * PACE_STEP_NS / NSEC_PER_SEC;
	step = step < 1 ? 1 : step > BATCH ? BATCH : step;
	backlog = o->rate * MAX_BACKLOG_NS / NSEC_PER_SEC;
	backlog = backlog < step ? step : backlog;
	while (!gen_stop && now < end && *sent < limit) {
		due = limit;
		if (o->rate) {
			due = (now - start) * o->rate / NSEC_PER_SEC -
			      s->skipped;
			if (due > *sent + backlog) {
				lost = due - *sent - backlog;
				s->skipped += lost;
				if (s->nr_stalls < MAX_STALLS)
					s->stalls[s->nr_stalls++] =
					    (struct stall){now - start, lost};
				due = *sent + backlog;
			}
			due = min_u64(limit, due);
			need = min_u64(step, limit - *sent);
			if (due < *sent + need) {
				gen_sleep_until(start +
						(*sent + s->skipped + need) *
						    NSEC_PER_SEC / o->rate);
				now = sl_now_ns();
				continue;
			}
		}
		n = send_batch(s, *sent, min_u64(BATCH, due - *sent));
		if (n == -ENOBUFS || n == -EAGAIN || n == -EINTR) {
			sched_yield();
			n = 0;
		}
		if (n < 0)
			return n;
		*sent += n;
		now = sl_now_ns();
	}
	*ns = now - start;
	return 0;
}

int main(int argc, char **argv)
{
	static struct sender s;
	struct send_opts o = {0};
	struct frame_spec spec;
	uint64_t sent = 0, ns = 0;
	unsigned int i;
	int ifindex, err;

	frame_spec_init(&spec);
	if (parse_args(argc, argv, &o, &spec))
		return 2;
	ifindex = if_nametoindex(o.dev);
	if (!ifindex) {
		gen_log("no device %s in this namespace", o.dev);
		return 1;
	}
	if (frame_build(&spec, o.dev, &s.f))
		return 2;
	err = gen_pin_cpu(o.cpu);
	if (err) {
		gen_log("cannot pin to CPU %d: %s", o.cpu, strerror(-err));
		return 1;
	}
	err = sender_open(&s, ifindex);
	if (err) {
		gen_log("cannot open a packet socket on %s: %s", o.dev,
			strerror(-err));
		return 1;
	}
	err = gen_catch_signals();
	if (!err)
		err = run(&s, &o, &sent, &ns);
	if (err)
		gen_log("send failed: %s", strerror(-err));
	printf("{\"sent\": %llu, \"seconds\": %.3f, \"pps\": %.0f, "
	       "\"skipped\": %llu, \"stalls\": [",
	       (unsigned long long) sent, (double) ns / NSEC_PER_SEC,
	       ns ? sent / ((double) ns / NSEC_PER_SEC) : 0.0,
	       (unsigned long long) s.skipped);
	for (i = 0; i < s.nr_stalls; i++)
		printf("%s[%.3f, %llu]", i ? ", " : "",
		       (double) s.stalls[i].at_ns / NSEC_PER_SEC,
		       (unsigned long long) s.stalls[i].skipped);
	printf("]}\n");
	close(s.fd);
	return err ? 1 : 0;
}
