// SPDX-License-Identifier: GPL-2.0
/* rxcount: an independent count of the packets that survive XDP on the
 * receiving side. Attaches a tc clsact ingress program to --dev, samples
 * its per-CPU counters every --tick-ms and, at the end, prints one JSON
 * object with the total, the mean rate, the largest count in any 1 s
 * window and per-second bins. Prints "ready" on stderr once attached.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "genutil.h"
#include "rxcount.h"
#include "rxcount.skel.h"

struct count_opts {
	const char *dev;
	const char *csv;
	double duration;
	uint32_t tick_ms;
	uint32_t window_ms; /* 0: only the 1 s figures */
	uint8_t proto;
	uint16_t dport;
	int family; /* of --dst; 0: any destination */
	struct rx_addr dst;
	bool drop;
	bool distinct_src;
};

/* Cumulative counts at time t (ns since just before the attach). */
struct sample {
	uint64_t t;
	uint64_t packets;
	uint64_t bytes;
};

struct series {
	struct sample *s;
	size_t n;
	size_t cap;
};

static const char usage[] =
    "usage: rxcount --dev IF [options]\n"
    "Counts packets reaching tc ingress on IF (after XDP), until\n"
    "SIGINT/SIGTERM or --duration. Prints \"ready\" on stderr once\n"
    "attached and one JSON object on stdout at the end:\n"
    "  packets, bytes, seconds, pps (mean), max_1s (largest count in a\n"
    "  sliding 1 s window at tick resolution), max_1s_pkt (the same\n"
    "  from packet arrival times in 1 ms bins: exact to 1 ms, whatever\n"
    "  the sampling), max_1s_aligned,\n"
    "  per_second (aligned 1 s bins, the last one partial), per_cpu,\n"
    "  and with the options below window_ms, max_window,\n"
    "  max_window_aligned, distinct_src.\n"
    "  --dev IF          device\n"
    "  --proto P         count only udp, tcp, icmp or icmpv6\n"
    "  --dport N         count only this UDP/TCP destination port\n"
    "  --dst ADDR        count only this destination address\n"
    "  --drop            drop what is counted (TC_ACT_SHOT), so the\n"
    "                    stack does no further work\n"
    "  --tick-ms N       sampling period (default 10)\n"
    "  --duration S      seconds (at most 60, the default)\n"
    "  --window-ms W     also report the largest count in W ms\n"
    "  --csv FILE        write the samples: t_ms,packets,bytes\n"
    "  --distinct-src    count distinct source addresses (test use;\n"
    "                    remembers up to 65536)\n"
    "Without a filter every packet counts, ARP and neighbour discovery\n"
    "included.\n";

static int parse_proto(const char *arg, uint8_t *proto)
{
	static const struct {
		const char *name;
		uint8_t proto;
	} protos[] = {{"udp", IPPROTO_UDP},
		      {"tcp", IPPROTO_TCP},
		      {"icmp", IPPROTO_ICMP},
		      {"icmpv6", IPPROTO_ICMPV6}};
	size_t i;

	for (i = 0; i < sizeof(protos) / sizeof(protos[0]); i++) {
		if (!strcmp(arg, protos[i].name)) {
			*proto = protos[i].proto;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_dst(const char *arg, struct count_opts *o)
{
	struct in_addr v4;

	if (inet_pton(AF_INET, arg, &v4) == 1) {
		memset(&o->dst, 0, sizeof(o->dst));
		o->dst.b[10] = 0xff;
		o->dst.b[11] = 0xff;
		memcpy(&o->dst.b[12], &v4, 4);
		o->family = 4;
		return 0;
	}
	if (inet_pton(AF_INET6, arg, &o->dst) == 1) {
		o->family = 6;
		return 0;
	}
	return -EINVAL;
}

static int parse_args(int argc, char **argv, struct count_opts *o)
{
	static const struct option longopts[] = {
	    {"dev", required_argument, NULL, 'd'},
	    {"proto", required_argument, NULL, 'p'},
	    {"dport", required_argument, NULL, 'P'},
	    {"dst", required_argument, NULL, 'a'},
	    {"drop", no_argument, NULL, 'x'},
	    {"tick-ms", required_argument, NULL, 'k'},
	    {"duration", required_argument, NULL, 't'},
	    {"window-ms", required_argument, NULL, 'w'},
	    {"csv", required_argument, NULL, 'o'},
	    {"distinct-src", no_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int opt, idx = 0, err;
	uint32_t v;

	o->duration = GEN_MAX_SECONDS;
	o->tick_ms = 10;
	while ((opt = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
		err = 0;
		switch (opt) {
		case 'd':
			o->dev = optarg;
			break;
		case 'p':
			err = parse_proto(optarg, &o->proto);
			break;
		case 'P':
			err = sl_parse_u32(optarg, 1, 65535, &v);
			o->dport = v;
			break;
		case 'a':
			err = parse_dst(optarg, o);
			break;
		case 'x':
			o->drop = true;
			break;
		case 'k':
			err = sl_parse_u32(optarg, 1, 1000, &o->tick_ms);
			break;
		case 't':
			err = sl_parse_double(optarg, 0, GEN_MAX_SECONDS,
						&o->duration);
			break;
		case 'w':
			err = sl_parse_u32(optarg, 1, 60000, &o->window_ms);
			break;
		case 'o':
			o->csv = optarg;
			break;
		case 's':
			o->distinct_src = true;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			fputs(usage, stderr);
			return -EINVAL;
		}
		if (err) {
			gen_log("bad value for --%s: %s", longopts[idx].name,
				optarg);
			return -EINVAL;
		}
	}
	if (!o->dev || optind != argc) {
		fputs(usage, stderr);
		return -EINVAL;
	}
	return 0;
}

/* Sums the per-CPU counters; per_cpu (may be NULL) gets each CPU's
 * packets.
 */
static int read_counts(int map_fd, struct rx_count *vals, int ncpus,
		       struct sample *out, uint64_t *per_cpu)
{
	uint32_t key = 0;
	int i;

	if (bpf_map_lookup_elem(map_fd, &key, vals))
		return -errno;
	out->packets = 0;
	out->bytes = 0;
	for (i = 0; i < ncpus; i++) {
		out->packets += vals[i].packets;
		out->bytes += vals[i].bytes;
		if (per_cpu)
			per_cpu[i] = vals[i].packets;
	}
	return 0;
}

/* Count at the sample nearest to time t (samples are sorted by t). */
static uint64_t count_at(const struct series *ser, uint64_t t)
{
	size_t lo = 0, hi = ser->n - 1, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (ser->s[mid].t < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && t - ser->s[lo - 1].t < ser->s[lo].t - t)
		lo--;
	return ser->s[lo].packets;
}

/* Largest count in a window of w ns ending at any sample. */
static uint64_t max_sliding(const struct series *ser, uint64_t w)
{
	uint64_t best = 0, c;
	size_t i;

	for (i = 0; i < ser->n; i++) {
		c = ser->s[i].packets -
		    (ser->s[i].t > w ? count_at(ser, ser->s[i].t - w) : 0);
		if (c > best)
			best = c;
	}
	return best;
}

/* Counts in bins of w ns from the start; the last bin may be partial. */
static uint64_t bin_count(const struct series *ser, uint64_t w, size_t k)
{
	uint64_t t_end = ser->s[ser->n - 1].t;
	uint64_t from = k * w, to = (k + 1) * w;

	return count_at(ser, to < t_end ? to : t_end) - count_at(ser, from);
}

static size_t nr_bins(const struct series *ser, uint64_t w)
{
	return (ser->s[ser->n - 1].t + w - 1) / w;
}

static uint64_t max_aligned(const struct series *ser, uint64_t w)
{
	uint64_t best = 0, c;
	size_t k;

	for (k = 0; k < nr_bins(ser, w); k++) {
		c = bin_count(ser, w, k);
		if (c > best)
			best = c;
	}
	return best;
}

static int write_csv(const char *path, const struct series *ser)
{
	FILE *f = fopen(path, "w");
	size_t i;

	if (!f)
		return -errno;
	fputs("t_ms,packets,bytes\n", f);
	for (i = 0; i < ser->n; i++)
		fprintf(f, "%.3f,%llu,%llu\n", ser->s[i].t / 1e6,
			(unsigned long long) ser->s[i].packets,
			(unsigned long long) ser->s[i].bytes);
	return fclose(f) ? -errno : 0;
}

static int count_distinct(int map_fd, uint64_t *n)
{
	struct rx_addr key, next;
	void *prev = NULL;

	*n = 0;
	while (!bpf_map_get_next_key(map_fd, prev, &next)) {
		key = next;
		prev = &key;
		(*n)++;
	}
	return errno == ENOENT ? 0 : -errno;
}

/* The largest count in any window_ms consecutive millisecond bins. */
static uint64_t max_bins(const uint64_t *bins, size_t n, size_t window_ms)
{
	uint64_t sum = 0, best = 0;

	for (size_t i = 0; i < n; i++) {
		sum += bins[i];
		if (i >= window_ms)
			sum -= bins[i - window_ms];
		if (sum > best)
			best = sum;
	}
	return best;
}

static int read_bins(int fd, uint64_t *bins, size_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if (bpf_map_lookup_elem(fd, &k, &bins[k]))
			return -errno;
	return 0;
}

static void print_json(const struct count_opts *o, const struct series *ser,
		       const uint64_t *per_cpu, int ncpus, uint64_t distinct,
		       const uint64_t *bins, size_t nbins)
{
	const struct sample *last = &ser->s[ser->n - 1];
	double secs = last->t / 1e9;
	size_t k;
	int i;

	printf("{\"packets\": %llu, \"bytes\": %llu, \"seconds\": %.3f, "
	       "\"pps\": %.0f, \"max_1s\": %llu, \"max_1s_aligned\": %llu",
	       (unsigned long long) last->packets,
	       (unsigned long long) last->bytes, secs,
	       secs > 0 ? last->packets / secs : 0.0,
	       (unsigned long long) max_sliding(ser, NSEC_PER_SEC),
	       (unsigned long long) max_aligned(ser, NSEC_PER_SEC));
	printf(", \"max_1s_pkt\": %llu",
	       (unsigned long long) max_bins(bins, nbins, 1000));
	if (o->window_ms)
		printf(", \"max_window_pkt\": %llu",
		       (unsigned long long) max_bins(bins, nbins, o->window_ms));
	if (o->window_ms)
		printf(", \"window_ms\": %u, \"max_window\": %llu, "
		       "\"max_window_aligned\": %llu",
		       o->window_ms,
		       (unsigned long long) max_sliding(ser, o->window_ms *
								 NSEC_PER_MSEC),
		       (unsigned long long) max_aligned(
			   ser, o->window_ms * NSEC_PER_MSEC));
	if (o->distinct_src)
		printf(", \"distinct_src\": %llu",
		       (unsigned long long) distinct);
	printf(", \"per_second\": [");
	for (k = 0; k < nr_bins(ser, NSEC_PER_SEC); k++)
		printf("%s%llu", k ? ", " : "",
		       (unsigned long long) bin_count(ser, NSEC_PER_SEC, k));
	printf("], \"per_cpu\": [");
	for (i = 0; i < ncpus; i++)
		printf("%s%llu", i ? ", " : "",
		       (unsigned long long) per_cpu[i]);
	printf("]}\n");
}

static int series_add(struct series *ser, const struct sample *smp)
{
	struct sample *s;

	if (ser->n == ser->cap) {
		s = realloc(ser->s, 2 * ser->cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		ser->s = s;
		ser->cap *= 2;
	}
	ser->s[ser->n++] = *smp;
	return 0;
}

/* Samples every tick until the deadline or a signal; the first sample is
 * the zero at t0, taken before the program was attached.
 */
static int sample_loop(int map_fd, const struct count_opts *o, uint64_t t0,
		       struct series *ser, struct rx_count *vals, int ncpus)
{
	uint64_t tick = o->tick_ms * NSEC_PER_MSEC, next = t0 + tick, now;
	uint64_t end = t0 + (uint64_t) (o->duration * NSEC_PER_SEC);
	struct sample smp;
	int err;

	do {
		gen_sleep_until(next < end ? next : end);
		now = sl_now_ns();
		err = read_counts(map_fd, vals, ncpus, &smp, NULL);
		if (err)
			return err;
		smp.t = now - t0;
		err = series_add(ser, &smp);
		if (err)
			return err;
		while (next <= now)
			next += tick; /* a late wake-up skips ticks */
	} while (!gen_stop && now < end);
	return 0;
}

static int attach(struct bpf_tc_hook *hook, struct bpf_tc_opts *opts,
		  bool *created)
{
	int err;

	err = bpf_tc_hook_create(hook);
	if (err && err != -EEXIST)
		return err;
	*created = !err;
	err = bpf_tc_attach(hook, opts);
	if (err && *created) {
		hook->attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(hook);
	}
	return err;
}

/* Removes our filter, and the clsact qdisc if we created it. */
static void detach(struct bpf_tc_hook *hook, struct bpf_tc_opts *opts,
		   bool created)
{
	opts->prog_fd = 0;
	opts->prog_id = 0;
	opts->flags = 0;
	bpf_tc_detach(hook, opts);
	if (created) {
		hook->attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(hook);
	}
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts);
	struct count_opts o = {0};
	struct series ser = {0};
	struct rxcount_bpf *skel;
	struct rx_count *vals = NULL;
	uint64_t *per_cpu = NULL, *bins = NULL, distinct = 0, t0;
	size_t nbins = 0;
	struct sample final;
	bool created = false;
	int ifindex, ncpus, map_fd, err;

	if (parse_args(argc, argv, &o))
		return 2;
	ifindex = if_nametoindex(o.dev);
	if (!ifindex) {
		gen_log("no device %s in this namespace", o.dev);
		return 1;
	}
	ncpus = libbpf_num_possible_cpus();
	if (ncpus < 0) {
		gen_log("cannot count CPUs: %s", strerror(-ncpus));
		return 1;
	}
	vals = calloc(ncpus, sizeof(*vals));
	per_cpu = calloc(ncpus, sizeof(*per_cpu));
	ser.cap = 64;
	ser.s = calloc(ser.cap, sizeof(*ser.s));
	if (!vals || !per_cpu || !ser.s) {
		gen_log("out of memory");
		return 1;
	}

	skel = rxcount_bpf__open();
	if (!skel) {
		gen_log("cannot open the BPF object: %s", strerror(errno));
		return 1;
	}
	skel->rodata->filter_proto = o.proto;
	skel->rodata->filter_dport = o.dport;
	skel->rodata->filter_family = o.family;
	skel->rodata->filter_dst = o.dst;
	skel->rodata->drop = o.drop;
	skel->rodata->distinct_src = o.distinct_src;
	if (!o.distinct_src)
		bpf_map__set_max_entries(skel->maps.sources, 1);
	err = rxcount_bpf__load(skel);
	if (err) {
		gen_log("cannot load the tc program: %s", strerror(-err));
		goto out;
	}
	map_fd = bpf_map__fd(skel->maps.counts);
	hook.ifindex = ifindex;
	opts.prog_fd = bpf_program__fd(skel->progs.rxcount);
	err = gen_catch_signals();
	if (err)
		goto out;
	t0 = sl_now_ns();
	skel->bss->start_ns = t0;
	ser.s[ser.n++] = (struct sample){0};
	err = attach(&hook, &opts, &created);
	if (err) {
		gen_log("cannot attach to tc ingress of %s: %s", o.dev,
			strerror(-err));
		goto out;
	}
	fputs("ready\n", stderr);
	err = sample_loop(map_fd, &o, t0, &ser, vals, ncpus);
	detach(&hook, &opts, created);
	/* the final sample, after detaching, holds every packet counted */
	if (!err)
		err = read_counts(map_fd, vals, ncpus, &final, per_cpu);
	if (!err) {
		final.t = sl_now_ns() - t0;
		err = series_add(&ser, &final);
	}
	if (!err && o.distinct_src)
		err =
		    count_distinct(bpf_map__fd(skel->maps.sources), &distinct);
	if (!err) {
		nbins = final.t / NSEC_PER_MSEC + 1;
		if (nbins > RXCOUNT_MAX_MS)
			nbins = RXCOUNT_MAX_MS;
		bins = calloc(nbins, sizeof(*bins));
		err = bins ? read_bins(bpf_map__fd(skel->maps.ms_bins), bins,
				       nbins)
			   : -ENOMEM;
	}
	if (!err && o.csv)
		err = write_csv(o.csv, &ser);
	if (err) {
		gen_log("cannot report: %s", strerror(-err));
		goto out;
	}
	print_json(&o, &ser, per_cpu, ncpus, distinct, bins, nbins);
out:
	free(bins);
	rxcount_bpf__destroy(skel);
	free(ser.s);
	free(per_cpu);
	free(vals);
	return err ? 1 : 0;
}
