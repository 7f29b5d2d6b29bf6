// SPDX-License-Identifier: GPL-2.0
/* xdppass: a receiver that does nothing. Attaches an XDP program that passes
 * (or with --drop drops) every frame, in native mode through a bpf_link,
 * and holds it until SIGINT/SIGTERM or --duration. The link dies with the
 * process, so nothing stays attached after a crash.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "genutil.h"
#include "xdppass.skel.h"

/* A baseline may outlive a generator run, but not a lost script. */
#define XDPPASS_MAX_SECONDS 3600.0

static const char usage[] =
    "usage: xdppass --dev IF [--drop] [--count] [--duration S]\n"
    "Attaches a bare XDP_PASS (or XDP_DROP) program to IF in native mode\n"
    "and prints \"ready\" on stderr once attached.\n"
    "  --dev IF       device\n"
    "  --drop         return XDP_DROP instead of XDP_PASS\n"
    "  --count        count the frames (a per-CPU counter); prints\n"
    "                 {\"packets\": N} on stdout when it detaches\n"
    "  --duration S   detach after S seconds (default and max 3600;\n"
    "                 0 attaches and detaches at once: a probe)\n"
    "Exit 77 when IF has no native XDP support.\n";

static void print_count(struct xdppass_bpf *skel)
{
	int ncpu = libbpf_num_possible_cpus();
	unsigned long long sum = 0;
	__u64 *v;
	__u32 k = 0;

	if (ncpu <= 0)
		return;
	v = calloc(ncpu, sizeof(*v));
	if (v && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.seen), &k, v))
		for (int i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	printf("{\"packets\": %llu}\n", sum);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"dev", required_argument, NULL, 'd'},
	    {"drop", no_argument, NULL, 'x'},
	    {"count", no_argument, NULL, 'c'},
	    {"duration", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	LIBBPF_OPTS(bpf_link_create_opts, lopts, .flags = XDP_FLAGS_DRV_MODE);
	double duration = XDPPASS_MAX_SECONDS;
	struct xdppass_bpf *skel;
	const char *dev = NULL;
	int opt, ifindex, link_fd, err;
	bool drop = false, count = false;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'x':
			drop = true;
			break;
		case 'c':
			count = true;
			break;
		case 't':
			if (sl_parse_double(optarg, 0, XDPPASS_MAX_SECONDS,
					      &duration)) {
				gen_log("bad value for --duration: %s", optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (!dev || optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	ifindex = if_nametoindex(dev);
	if (!ifindex) {
		gen_log("no device %s in this namespace", dev);
		return 1;
	}
	skel = xdppass_bpf__open();
	if (!skel) {
		gen_log("cannot open the BPF object: %s", strerror(errno));
		return 1;
	}
	skel->rodata->drop = drop;
	skel->rodata->count = count;
	err = xdppass_bpf__load(skel);
	if (err) {
		gen_log("cannot load the XDP program: %s", strerror(-err));
		goto out;
	}
	link_fd = bpf_link_create(bpf_program__fd(skel->progs.xdppass), ifindex,
				  BPF_XDP, &lopts);
	if (link_fd < 0) {
		err = -errno;
		gen_log("cannot attach to %s in native mode: %s", dev,
			strerror(-err));
		goto out;
	}
	err = gen_catch_signals();
	if (!err) {
		fputs("ready\n", stderr);
		gen_sleep_until(sl_now_ns() +
				(uint64_t) (duration * NSEC_PER_SEC));
	}
	close(link_fd);
	if (!err && count)
		print_count(skel);
out:
	xdppass_bpf__destroy(skel);
	if (err == -EOPNOTSUPP)
		return EXIT_SKIP;
	return err ? 1 : 0;
}
