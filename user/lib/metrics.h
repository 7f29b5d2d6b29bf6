/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prometheus' text exposition format, version 0.0.4, written into an
 * sl_text: one function per kind of sample, each printing its family's
 * HELP and TYPE before the family's first sample. A family's samples must
 * follow one another (the format requires it): loop over families, then
 * over rules, not the other way round. No I/O (http_metrics.h serves it).
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "json_text.h"

#define SL_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#define SL_METRIC_NAME_MAX 127

/* A metric family: its name and its HELP text. */
struct sl_metric {
	const char *name;
	const char *help;
};

struct sl_label {
	const char *name;
	const char *value; /* escaped as it is written */
};

/* An array of labels and its length: SL_LABELS({ "rule", name }, ...). */
#define SL_LABELS(...)                                                  \
	(const struct sl_label[]){ __VA_ARGS__ },                       \
		sizeof((const struct sl_label[]){ __VA_ARGS__ }) /      \
			sizeof(struct sl_label)

struct sl_metrics {
	struct sl_text *out;
	char family[SL_METRIC_NAME_MAX + 1]; /* the one being written */
};

void sl_metrics_init(struct sl_metrics *m, struct sl_text *out);

/* A counter's sample (name ends in _total): an integer, exact past 2^53. */
void sl_metrics_counter(struct sl_metrics *m, const struct sl_metric *f,
			const struct sl_label *labels, size_t n_labels,
			uint64_t v);

/* A counter of a quantity that is not a count (seconds of CPU). */
void sl_metrics_counter_real(struct sl_metrics *m, const struct sl_metric *f,
			     const struct sl_label *labels, size_t n_labels,
			     double v);

void sl_metrics_gauge(struct sl_metrics *m, const struct sl_metric *f,
		      const struct sl_label *labels, size_t n_labels, double v);

#define SL_HISTOGRAM_MAX_BUCKETS 16

/*
 * A histogram: bounds (ascending, at most SL_HISTOGRAM_MAX_BUCKETS, a
 * static array) are the buckets' upper bounds; +Inf is implied. Counts
 * per bucket, not cumulative; the writer sums them.
 */
struct sl_histogram {
	const double *bounds;
	size_t n_bounds;
	uint64_t bucket[SL_HISTOGRAM_MAX_BUCKETS + 1]; /* the last: +Inf */
	uint64_t count;
	double sum;
};

void sl_histogram_init(struct sl_histogram *h, const double *bounds,
		       size_t n_bounds);

void sl_histogram_observe(struct sl_histogram *h, double v);

/* NAME_bucket{...,le="B"} for each bound and +Inf, NAME_sum, NAME_count. */
void sl_metrics_histogram(struct sl_metrics *m, const struct sl_metric *f,
			  const struct sl_label *labels, size_t n_labels,
			  const struct sl_histogram *h);

/* sluice_build_info{version="..."} 1: which build answers. */
void sl_metrics_build_info(struct sl_metrics *m);

#endif
