// SPDX-License-Identifier: GPL-2.0
/* xdpflood: floods a device with BPF_PROG_TEST_RUN live frames.
 *
 * Each test_run call runs a tiny XDP program --repeat times on one frame;
 * the program redirects it out of --dev, whose veth peer must have an XDP
 * program attached in native mode. Prints {"sent","seconds","pps"}.
 */
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <linux/if_ether.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "frame.h"
#include "genutil.h"
#include "xdpflood.skel.h"

#define DEFAULT_REPEAT (1u << 20)

/* Each test_run call with repeat > 1 costs about 24 ms of set-up here
 * (the XDP dispatcher is swapped in and out), so calls must be long: with
 * --rate one call sends a tenth of a second's worth, and a flood starts
 * with a short call that measures the rate the remaining calls are sized by.
 */
#define RATE_CALLS_PER_SEC 10
#define CALIBRATION_FRAMES (1u << 16)

struct flood_opts {
	const char *dev;
	uint32_t repeat;
	double duration;
	uint32_t rate; /* 0: as fast as possible */
	int cpu;       /* -1: the CPU we start on */
};

static const char usage[] =
    "usage: xdpflood --dev IF --dst-mac MAC --duration S [options]\n"
    "Floods IF with BPF_PROG_TEST_RUN live frames (run it in the sender\n"
    "namespace). IF's veth peer must have an XDP program attached in\n"
    "native mode, or the frames are dropped without a trace.\n"
    "  --dev IF               device to send out of\n"
    "  --duration S           seconds to run (required, at most 60)\n"
    "  --repeat N             frames per test_run call (default 1048576)\n"
    "  --rate PPS             average rate: bursts of min(N, PPS/10)\n"
    "                         frames at full speed, sleeping in between\n"
    "  --cpu N                CPU to run on (default: the current one);\n"
    "                         the veth peer receives on queue\n"
    "                         CPU modulo its number of queues\n";

static const char caveats[] =
    "caveats: live frames are recycled pages: what a receiver writes into\n"
    "a frame shows up in later frames. xdpflood writes back the Ethernet\n"
    "header of tagged frames (the stack's VLAN untagging moves it) and\n"
    "the rewritten source; other in-place edits (forwarding, NAT) leak:\n"
    "use pktsend there, and for smooth rates. 'sent' counts frames\n"
    "redirected, not delivered: count at the receiver.\n"
    "Exit 77 when the kernel lacks live frames (Linux >= 5.18) or the host\n"
    "refuses them (EPERM).\n";

static void print_usage(FILE *f)
{
	fputs(usage, f);
	fputs(FRAME_USAGE, f);
	fputs(caveats, f);
}

static int parse_args(int argc, char **argv, struct flood_opts *o,
		      struct frame_spec *spec)
{
	static const struct option longopts[] = {
	    {"dev", required_argument, NULL, 'd'},
	    {"duration", required_argument, NULL, 't'},
	    {"repeat", required_argument, NULL, 'n'},
	    {"rate", required_argument, NULL, 'r'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    FRAME_LONG_OPTIONS,
	    {0},
	};
	int opt, idx = 0, err;
	uint32_t cpu;

	o->repeat = DEFAULT_REPEAT;
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
			err = sl_parse_u32(optarg, 1, INT32_MAX, &o->repeat);
			break;
		case 'r':
			err = sl_parse_u32(optarg, 1, INT32_MAX, &o->rate);
			break;
		case 'c':
			err = sl_parse_u32(optarg, 0, CPU_SETSIZE - 1, &cpu);
			o->cpu = cpu;
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
	if (!o->dev || o->duration < 0 || optind != argc) {
		print_usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static int test_run(int prog_fd, const struct frame *f, uint32_t repeat)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = f->data,
		    .data_size_in = f->len, .repeat = repeat,
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
	int err;

	/* A signal during the call would make it fail with -EINTR and
	 * lose the count of frames it sent.
	 */
	gen_block_signals(SIG_BLOCK);
	err = bpf_prog_test_run_opts(prog_fd, &opts);
	gen_block_signals(SIG_UNBLOCK);
	return err ? -errno : 0;
}

/* Next call's size: the whole --repeat, less when the remaining time or
 * the rate budget asks for fewer frames.
 */
static uint32_t next_repeat(const struct flood_opts *o, uint64_t sent,
			    uint64_t start, uint64_t now)
{
	double left = o->duration - (double) (now - start) / NSEC_PER_SEC;
	double n = o->repeat, fit;

	if (o->rate) {
		fit = (double) o->rate / RATE_CALLS_PER_SEC;
		n = fmin(n, fmax(1, fit));
		n = fmin(n, o->rate * o->duration - sent);
	} else if (!sent) {
		n = fmin(n, CALIBRATION_FRAMES);
	} else {
		/* as many as the rate so far fits in the time left */
		fit = sent / ((double) (now - start) / NSEC_PER_SEC) * left;
		n = fmin(n, fmax(1, fit));
	}
	return n < 1 ? 0 : (uint32_t) n;
}

static int flood(int prog_fd, const struct frame *f, const struct flood_opts *o,
		 uint64_t *sent, uint64_t *ns)
{
	uint64_t start = sl_now_ns(), end, now = start;
	uint32_t n;
	int err;

	end = start + (uint64_t) (o->duration * NSEC_PER_SEC);
	while (!gen_stop && now < end &&
	       (n = next_repeat(o, *sent, start, now))) {
		err = test_run(prog_fd, f, n);
		/* our arguments are valid, so a first refusal means the
		 * kernel does not know the flag (or batch_size)
		 */
		if ((err == -EINVAL || err == -EOPNOTSUPP) && !*sent)
			return -EOPNOTSUPP;
		/* a host may refuse live frames to root (a sandbox's policy) */
		if (err == -EPERM && !*sent)
			return -EPERM;
		if (err)
			return err;
		*sent += n;
		if (o->rate)
			gen_sleep_until(start +
					(uint64_t) ((double) *sent / o->rate *
						    NSEC_PER_SEC));
		now = sl_now_ns();
	}
	*ns = now - start;
	return 0;
}

int main(int argc, char **argv)
{
	struct flood_opts o = {0};
	struct xdpflood_bpf *skel;
	struct frame_spec spec;
	uint64_t sent = 0, ns = 0;
	struct frame f;
	int ifindex, err;

	frame_spec_init(&spec);
	if (parse_args(argc, argv, &o, &spec))
		return 2;
	ifindex = if_nametoindex(o.dev);
	if (!ifindex) {
		gen_log("no device %s in this namespace", o.dev);
		return 1;
	}
	if (frame_build(&spec, o.dev, &f))
		return 2;
	err = gen_pin_cpu(o.cpu);
	if (err) {
		gen_log("cannot pin to CPU %d: %s", o.cpu, strerror(-err));
		return 1;
	}
	skel = xdpflood_bpf__open();
	if (!skel) {
		gen_log("cannot open the BPF object: %s", strerror(errno));
		return 1;
	}
	skel->rodata->target_ifindex = ifindex;
	skel->rodata->rw = f.rw;
	if (f.l2_len > ETH_HLEN) {
		skel->rodata->l2_len = f.l2_len;
		memcpy((void *) skel->rodata->l2_hdr, f.data, f.l2_len);
	}
	err = xdpflood_bpf__load(skel);
	if (err) {
		gen_log("cannot load the XDP program: %s", strerror(-err));
		goto out;
	}
	err = gen_catch_signals();
	if (!err)
		err = flood(bpf_program__fd(skel->progs.xdpflood), &f, &o,
			    &sent, &ns);
	if (err == -EOPNOTSUPP || err == -EPERM) {
		gen_log(err == -EPERM
				? "this host refuses BPF_F_TEST_XDP_LIVE_FRAMES "
				  "(EPERM): use pktsend"
				: "kernel lacks BPF_F_TEST_XDP_LIVE_FRAMES "
				  "(Linux 5.18+)");
		xdpflood_bpf__destroy(skel);
		return EXIT_SKIP;
	}
	if (err)
		gen_log("test_run failed: %s", strerror(-err));
	printf("{\"sent\": %llu, \"seconds\": %.3f, \"pps\": %.0f}\n",
	       (unsigned long long) sent, (double) ns / NSEC_PER_SEC,
	       ns ? sent / ((double) ns / NSEC_PER_SEC) : 0.0);
out:
	xdpflood_bpf__destroy(skel);
	return err ? 1 : 0;
}
