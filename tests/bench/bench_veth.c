// SPDX-License-Identifier: GPL-2.0
/*
 * bench_veth: the drop-path throughput over veth of sluice against a bare
 * XDP_DROP program and the parse-and-drop baseline (docs/benchmarks.md),
 * for tests/bench/veth_drop.sh.
 *
 * While a flood of live frames arrives on IF, the program on the agent's
 * bpf_link (pinned at PIN) is swapped every phase among bare XDP_DROP,
 * parse-and-drop and the link's own program with BPF_LINK_UPDATE, and
 * each phase's rate is read from IF's rx packet counter. Nothing restarts
 * between phases and neighbouring phases see the same machine, so a drift
 * of its speed cancels in the ratios: each receiver's to the bare phases
 * around it, and sluice's to the parse phases around it, with the ns a
 * packet sluice adds to the parse (the difference of their times per
 * packet on the receiving CPU, which the sender shares). The link gets its own program back
 * at the end, also after SIGINT or SIGTERM.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bare.skel.h"
#include "genutil.h"

#define VETH_MAX_SECONDS 600
#define VETH_SETTLE_US	 10000 /* after a swap, before a phase counts */

enum receiver { RX_BARE, RX_PARSE, RX_SLUICE, RX_MAX };

static const char *const rx_name[RX_MAX] = {"bare", "parse", "sluice"};

struct phase {
	double pps;
	unsigned long long packets;
};

#define die(...)                                                               \
	do {                                                                   \
		gen_log(__VA_ARGS__);                                          \
		exit(1);                                                       \
	} while (0)

static unsigned long long rx_packets(const char *path)
{
	unsigned long long v;
	FILE *f = fopen(path, "r");

	if (!f || fscanf(f, "%llu", &v) != 1)
		die("reading %s: %s", path, f ? "not a number" : strerror(errno));
	fclose(f);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (sorts v), by linear interpolation. */
static double quantile(double *v, int n, double q)
{
	double pos = q * (n - 1);
	int i = (int)pos;

	qsort(v, n, sizeof(*v), cmp_double);
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

/*
 * Each sluice phase against the mean of the parse phases just before and
 * just after it: the median ratio of their rates with its quartiles, and
 * the median of the ns a packet that sluice adds. The first cycle only
 * warms up.
 */
static void print_to_parse(const struct phase *ph, int n)
{
	double *ratio = calloc(n, sizeof(double));
	double *added = calloc(n, sizeof(double));
	int k = 0;

	if (!ratio || !added)
		die("out of memory");
	for (int i = RX_MAX + RX_SLUICE; i + RX_MAX - 1 < n; i += RX_MAX) {
		double parse = (ph[i - 1].pps + ph[i + RX_MAX - 1].pps) / 2;

		if (parse <= 0 || ph[i].pps <= 0)
			continue;
		ratio[k] = ph[i].pps / parse;
		added[k++] = 1e9 / ph[i].pps - 1e9 / parse;
	}
	if (k < 3)
		die("only %d full cycles: run longer", k);
	printf("{\"cycles\": %d, \"ratio\": %.4f, \"ratio_q1\": %.4f, "
	       "\"ratio_q3\": %.4f, \"added_ns\": %.2f, \"added_ns_q1\": "
	       "%.2f, \"added_ns_q3\": %.2f}",
	       k, quantile(ratio, k, 0.5), quantile(ratio, k, 0.25),
	       quantile(ratio, k, 0.75), quantile(added, k, 0.5),
	       quantile(added, k, 0.25), quantile(added, k, 0.75));
	free(ratio);
	free(added);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_veth --dev IF --link PIN [--seconds S] "
		"[--phase-ms MS]\n"
		"  --dev IF        the receiving interface (its rx counter)\n"
		"  --link PIN      the agent's bpf_link on IF, pinned\n"
		"  --seconds S     how long to alternate (default 30, max %d)\n"
		"  --phase-ms MS   one receiver's phase (default 100)\n"
		"Prints a JSON summary; the flood must run throughout.\n",
		VETH_MAX_SECONDS);
}

static uint32_t number(const char *arg, uint32_t lo, uint32_t hi,
		       const char *what)
{
	uint32_t v;

	if (sl_parse_u32(arg, lo, hi, &v))
		die("%s: %u to %u, not '%s'", what, lo, hi, arg);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dev", required_argument, NULL, 'd'},
	    {"link", required_argument, NULL, 'l'},
	    {"seconds", required_argument, NULL, 's'},
	    {"phase-ms", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *dev = NULL, *pin = NULL;
	uint32_t seconds = 30, phase_ms = 100;
	struct bpf_link_info info = {};
	__u32 info_len = sizeof(info);
	int prog_fd[RX_MAX], link_fd, c, n = 0, max_phases, err = 0;
	unsigned long long sluice_packets = 0;
	struct bare_bpf *bare;
	struct phase *ph;
	char counter[256];
	uint64_t start;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = optarg;
			break;
		case 'l':
			pin = optarg;
			break;
		case 's':
			seconds = number(optarg, 1, VETH_MAX_SECONDS,
					 "--seconds");
			break;
		case 'p':
			phase_ms = number(optarg, 20, 10000, "--phase-ms");
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!dev || !pin || optind != argc) {
		usage(stderr);
		return 2;
	}
	snprintf(counter, sizeof(counter),
		 "/sys/class/net/%s/statistics/rx_packets", dev);
	rx_packets(counter);

	link_fd = bpf_obj_get(pin);
	if (link_fd < 0)
		die("no bpf_link pinned at %s: %s", pin, strerror(errno));
	if (bpf_obj_get_info_by_fd(link_fd, &info, &info_len))
		die("link info: %s", strerror(errno));
	prog_fd[RX_SLUICE] = bpf_prog_get_fd_by_id(info.prog_id);
	if (prog_fd[RX_SLUICE] < 0)
		die("the link's program: %s", strerror(errno));
	bare = bare_bpf__open_and_load();
	if (!bare)
		die("loading the bare programs: %s", strerror(errno));
	prog_fd[RX_BARE] = bpf_program__fd(bare->progs.drop_only);
	prog_fd[RX_PARSE] = bpf_program__fd(bare->progs.bare_drop);

	max_phases = seconds * 1000 / phase_ms + 1;
	ph = calloc(max_phases, sizeof(*ph));
	if (!ph)
		die("out of memory");
	if (gen_catch_signals())
		die("signals: %s", strerror(errno));
	start = sl_now_ns();
	while (!gen_stop && n < max_phases &&
	       sl_now_ns() - start < seconds * NSEC_PER_SEC) {
		unsigned long long c0, c1;
		uint64_t t0, t1;

		if (bpf_link_update(link_fd, prog_fd[n % RX_MAX], NULL)) {
			err = errno;
			break;
		}
		usleep(VETH_SETTLE_US);
		t0 = sl_now_ns();
		c0 = rx_packets(counter);
		usleep(phase_ms * 1000);
		t1 = sl_now_ns();
		c1 = rx_packets(counter);
		ph[n].packets = c1 - c0;
		ph[n].pps = ph[n].packets * 1e9 / (t1 - t0);
		if (n % RX_MAX == RX_SLUICE)
			sluice_packets += ph[n].packets;
		n++;
	}
	if (bpf_link_update(link_fd, prog_fd[RX_SLUICE], NULL))
		die("giving the link its program back: %s", strerror(errno));
	if (err)
		die("swapping the link's program: %s", strerror(err));
	if (gen_stop)
		die("stopped by a signal");

	/* ratios of each phase to the mean of the bare phases around it;
	 * the first cycle only warms up */
	printf("{\"phase_ms\": %u, \"phases\": %d, \"sluice_packets\": %llu,"
	       " \"receivers\": [",
	       phase_ms, n, sluice_packets);
	for (int r = 0; r < RX_MAX; r++) {
		double *pps = calloc(n, sizeof(double));
		double *ratio = calloc(n, sizeof(double));
		int k = 0;

		if (!pps || !ratio)
			die("out of memory");
		for (int i = RX_MAX + r; i + RX_MAX - r < n; i += RX_MAX) {
			double bare_mean =
			    (ph[i - r].pps + ph[i - r + RX_MAX].pps) / 2;

			pps[k] = ph[i].pps;
			ratio[k++] = bare_mean > 0 ? ph[i].pps / bare_mean : 0;
		}
		if (k < 3)
			die("only %d full cycles: run longer", k);
		printf("%s{\"name\": \"%s\", \"cycles\": %d, \"median_pps\": "
		       "%.0f, \"ratio\": %.4f, \"ratio_q1\": %.4f, "
		       "\"ratio_q3\": %.4f}",
		       r ? ", " : "", rx_name[r], k, quantile(pps, k, 0.5),
		       quantile(ratio, k, 0.5), quantile(ratio, k, 0.25),
		       quantile(ratio, k, 0.75));
		free(pps);
		free(ratio);
	}
	printf("], \"sluice_to_parse\": ");
	print_to_parse(ph, n);
	printf("}\n");
	free(ph);
	bare_bpf__destroy(bare);
	close(link_fd);
	return 0;
}
