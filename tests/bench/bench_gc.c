// SPDX-License-Identifier: GPL-2.0
/*
 * bench_gc: the cost of collecting idle per_source entries, and how long
 * it holds the agent's data-plane lock, against the walk of one syscall
 * per entry (get_next_key, lookup, the rule's interval; a delete and the
 * freed counter per victim) measured in the same run. The table is filled
 * from user space with N sources of one rule, all seen just now (a scan
 * that deletes nothing, as on most seconds) or all idle for three
 * intervals (everything goes, as after a churn of forged sources).
 * Prints medians (min-max) over --runs and the ratios. Needs root.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "genutil.h"
#include "loader.h"
#include "log.h"
#include "rules_parse.h"
#include "sluice.skel.h"

#define MAX_RUNS 31

static const uint32_t sizes[] = { 10000, 100000, 260000 };

static uint64_t now_ns = 1000ULL * 1000000000ULL;

static int apply_rule(struct sl_dataplane *dp)
{
	static const char json[] =
		"{\"rules\":[{\"name\":\"ps\",\"match\":{\"proto\":\"udp\","
		"\"dport\":9000},\"grade\":\"pps\",\"count\":100,"
		"\"per_source\":{\"max_sources\":262143}}]}";
	struct sl_ruleset rs = { 0 };
	char err[256];
	int ret = sl_rules_parse(json, strlen(json), &rs, err, sizeof(err));

	if (!ret)
		ret = sl_dp_apply(dp, &rs, err, sizeof(err));
	if (ret)
		fprintf(stderr, "bench_gc: rule: %s\n", err);
	sl_ruleset_free(&rs);
	return ret;
}

/* n sources of slot, last seen at seen_ns. */
static int fill(struct sl_dataplane *dp, uint32_t slot, uint32_t n,
		uint64_t seen_ns)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
	int fd = bpf_map__fd(dp->skel->maps.src_table);
	struct sluice_src_key *keys = calloc(n, sizeof(*keys));
	struct sluice_src_state *vals = calloc(n, sizeof(*vals));
	__u32 count = n;
	int err = 0;

	if (!keys || !vals) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		keys[i].rule = slot;
		keys[i].family = 4;
		memcpy(keys[i].addr, &i, sizeof(i));
		vals[i].last_seen_ns = seen_ns;
	}
	if (bpf_map_update_batch(fd, keys, vals, &count, &opts))
		err = -errno;
out:
	free(keys);
	free(vals);
	return err;
}

/* The walk the batched collection replaced; returns the entries deleted. */
static int walk_per_entry(struct sl_dataplane *dp, uint64_t now)
{
	int fd = bpf_map__fd(dp->skel->maps.src_table);
	int cfg_fd = bpf_map__fd(dp->skel->maps.rule_cfg);
	int freed_fd = bpf_map__fd(dp->skel->maps.rule_src_freed);
	struct sluice_src_key key, *prev = NULL, *victims = NULL;
	size_t n = 0, cap = 0;
	int deleted = 0;

	while (!bpf_map_get_next_key(fd, prev, &key)) {
		struct sluice_src_state st;
		struct sluice_rule_cfg cfg;

		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &st) ||
		    bpf_map_lookup_elem(cfg_fd, &key.rule, &cfg) ||
		    st.last_seen_ns + 2 * cfg.interval_ns > now)
			continue;
		if (n == cap) {
			void *p;

			cap = cap ? cap * 2 : 1024;
			p = realloc(victims, cap * sizeof(*victims));
			if (!p)
				break;
			victims = p;
		}
		victims[n++] = key;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t freed;

		if (bpf_map_delete_elem(fd, &victims[i]))
			continue;
		deleted++;
		if (!bpf_map_lookup_elem(freed_fd, &victims[i].rule, &freed)) {
			freed++;
			bpf_map_update_elem(freed_fd, &victims[i].rule, &freed,
					    BPF_ANY);
		}
	}
	free(victims);
	return deleted;
}

/* Bytes of the kernel's slab objects in use, all caches (where the
 * table's entries live); objects freed earlier and reused count too. */
static long long slab_bytes(void)
{
	FILE *f = fopen("/proc/slabinfo", "r");
	long long total = 0, active, objsize;
	char line[512], name[64];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lld %*d %lld", name, &active,
			   &objsize) == 3 && name[0] != '#')
			total += active * objsize;
	fclose(f);
	return total;
}

static double ms_since(uint64_t t0)
{
	return (sl_now_ns() - t0) / 1e6;
}

struct figures {
	double walk[MAX_RUNS], batched[MAX_RUNS], locked[MAX_RUNS];
};

/* One round of both ways on n entries; false on a miscount. */
static bool round_of(struct sl_dataplane *dp, uint32_t slot, uint32_t n,
		     bool idle, int r, struct figures *f)
{
	uint64_t seen = idle ? now_ns - 3 * 1000000000ULL : now_ns;
	struct sl_src_victims v = { 0 };
	int want = idle ? (int)n : 0, got;
	uint64_t t0;

	if (fill(dp, slot, n, seen))
		return false;
	t0 = sl_now_ns();
	got = walk_per_entry(dp, now_ns);
	f->walk[r] = ms_since(t0);
	if (got != want) {
		fprintf(stderr, "bench_gc: the walk deleted %d of %d\n", got,
			want);
		return false;
	}
	if (fill(dp, slot, n, seen))
		return false;
	t0 = sl_now_ns();
	got = sl_dp_gc_scan(dp, &v) ? -1 : 0;
	f->locked[r] = 0;
	while (got >= 0 && v.next < v.n) {
		uint64_t t1 = sl_now_ns();
		int chunk = sl_dp_gc_collect(dp, &v);
		double ms = ms_since(t1);

		if (ms > f->locked[r])
			f->locked[r] = ms;
		got = chunk < 0 ? -1 : got + chunk;
	}
	f->batched[r] = ms_since(t0);
	sl_src_victims_free(&v);
	if (got != want) {
		fprintf(stderr, "bench_gc: batched collection: %d of %d\n",
			got, want);
		return false;
	}
	return true;
}

/* The largest table's kernel memory, measured first (on an empty one). */
static void memory(struct sl_dataplane *dp, uint32_t slot)
{
	uint32_t n = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	long long before = slab_bytes(), after;

	if (before < 0 || fill(dp, slot, n, now_ns) ||
	    (after = slab_bytes()) < 0) {
		printf("kernel memory: not measured (/proc/slabinfo)\n");
		return;
	}
	printf("kernel memory of %u sources: %.1f MiB, %lld bytes per "
	       "source (slab objects in use)\n", n,
	       (after - before) / 1048576.0, (after - before) / n);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_gc [--runs N] (N odd, 1-%d; default 5)\n",
		MAX_RUNS);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ 0 },
	};
	struct sl_dp_opts o = { .test_clock = true };
	struct sl_dataplane dp;
	int c, runs = 5, err;
	uint32_t slot;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint32_t v;

		if (c != 'r' || sl_parse_u32(optarg, 1, MAX_RUNS, &v) ||
		    !(v & 1))
			usage();
		runs = v;
	}
	if (optind != argc)
		usage();
	sl_log_daemon(&(struct sl_log_opts){ .level = SL_LOG_WARN }, NULL);
	err = sl_dp_load(&dp, &o);
	if (err) {
		fprintf(stderr, "bench_gc: load the data plane: %s\n",
			strerror(-err));
		return 1;
	}
	sl_dp_set_test_time(&dp, now_ns);
	if (apply_rule(&dp)) {
		sl_dp_destroy(&dp);
		return 1;
	}
	slot = dp.slots[0];
	memory(&dp, slot);
	printf("per_source garbage collection, median (min-max) of %d runs, "
	       "ms; batched / per-entry walk; the longest lock hold\n"
	       "%-8s %-5s %-22s %-22s %-7s %s\n", runs, "sources", "state",
	       "per-entry walk", "batched", "ratio", "lock held at once");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int idle = 0; idle < 2; idle++) {
			struct figures f;
			double w, wmin, wmax, b, bmin, bmax, l, lmin, lmax;
			char ws[32], bs[32];

			for (int r = 0; r < runs; r++)
				if (!round_of(&dp, slot, sizes[i], idle, r,
					      &f)) {
					sl_dp_destroy(&dp);
					return 1;
				}
			w = gen_median(f.walk, runs, &wmin, &wmax);
			b = gen_median(f.batched, runs, &bmin, &bmax);
			l = gen_median(f.locked, runs, &lmin, &lmax);
			snprintf(ws, sizeof(ws), "%.1f (%.1f-%.1f)", w, wmin,
				 wmax);
			snprintf(bs, sizeof(bs), "%.1f (%.1f-%.1f)", b, bmin,
				 bmax);
			printf("%-8u %-5s %-22s %-22s %-7.3f %.2f (%.2f-%.2f)\n",
			       sizes[i], idle ? "idle" : "fresh", ws, bs, b / w,
			       l, lmin, lmax);
		}
	}
	printf("(the per-entry walk held the lock for all of its time)\n");
	sl_dp_destroy(&dp);
	return 0;
}
