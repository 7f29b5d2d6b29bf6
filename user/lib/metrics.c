// SPDX-License-Identifier: GPL-2.0
/* The text exposition format (metrics.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "util.h"

void sl_metrics_init(struct sl_metrics *m, struct sl_text *out)
{
	m->out = out;
	m->family[0] = '\0';
}

/* HELP escapes backslash and newline; a label value the double quote too. */
static void put_escaped(struct sl_text *t, const char *s, const char *special)
{
	const char *p;

	while (*s) {
		size_t n = strcspn(s, special);

		sl_text_put(t, s, n);
		p = s + n;
		if (!*p)
			return;
		sl_text_put(t, *p == '\n' ? "\\n" : *p == '"' ? "\\\"" : "\\\\",
			    2);
		s = p + 1;
	}
}

static void put_str(struct sl_text *t, const char *s)
{
	sl_text_put(t, s, strlen(s));
}

static void family(struct sl_metrics *m, const struct sl_metric *f,
		   const char *type)
{
	if (!strcmp(m->family, f->name))
		return;
	snprintf(m->family, sizeof(m->family), "%s", f->name);
	put_str(m->out, "# HELP ");
	put_str(m->out, f->name);
	sl_text_put(m->out, " ", 1);
	put_escaped(m->out, f->help, "\\\n");
	put_str(m->out, "\n# TYPE ");
	put_str(m->out, f->name);
	sl_text_put(m->out, " ", 1);
	put_str(m->out, type);
	sl_text_put(m->out, "\n", 1);
}

static void put_label(struct sl_text *t, bool first, const char *name,
		      const char *value)
{
	sl_text_put(t, first ? "{" : ",", 1);
	put_str(t, name);
	sl_text_put(t, "=\"", 2);
	put_escaped(t, value, "\\\"\n");
	sl_text_put(t, "\"", 1);
}

/* NAME[SUFFIX]{labels[,le="LE"]} and the space before the value. */
static void sample(struct sl_metrics *m, const char *name, const char *suffix,
		   const struct sl_label *labels, size_t n_labels,
		   const char *le)
{
	put_str(m->out, name);
	put_str(m->out, suffix);
	for (size_t i = 0; i < n_labels; i++)
		put_label(m->out, !i, labels[i].name, labels[i].value);
	if (le)
		put_label(m->out, !n_labels, "le", le);
	if (n_labels || le)
		sl_text_put(m->out, "}", 1);
	sl_text_put(m->out, " ", 1);
}

/* Integers as integers; otherwise the shortest text that reads back. */
static void put_double(struct sl_text *t, double v)
{
	char buf[32];

	if (isnan(v)) {
		put_str(t, "NaN");
		return;
	}
	if (isinf(v)) {
		put_str(t, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (fabs(v) < 1e15 && v == trunc(v))
		snprintf(buf, sizeof(buf), "%.0f", v);
	else
		for (int digits = 15; digits <= 17; digits++) {
			snprintf(buf, sizeof(buf), "%.*g", digits, v);
			if (strtod(buf, NULL) == v)
				break;
		}
	put_str(t, buf);
}

void sl_metrics_counter(struct sl_metrics *m, const struct sl_metric *f,
			const struct sl_label *labels, size_t n_labels,
			uint64_t v)
{
	family(m, f, "counter");
	sample(m, f->name, "", labels, n_labels, NULL);
	sl_text_u64(m->out, "", v);
	sl_text_put(m->out, "\n", 1);
}

void sl_metrics_counter_real(struct sl_metrics *m, const struct sl_metric *f,
			     const struct sl_label *labels, size_t n_labels,
			     double v)
{
	family(m, f, "counter");
	sample(m, f->name, "", labels, n_labels, NULL);
	put_double(m->out, v);
	sl_text_put(m->out, "\n", 1);
}

void sl_metrics_gauge(struct sl_metrics *m, const struct sl_metric *f,
		      const struct sl_label *labels, size_t n_labels, double v)
{
	family(m, f, "gauge");
	sample(m, f->name, "", labels, n_labels, NULL);
	put_double(m->out, v);
	sl_text_put(m->out, "\n", 1);
}

void sl_histogram_init(struct sl_histogram *h, const double *bounds,
		       size_t n_bounds)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n_bounds = n_bounds < SL_HISTOGRAM_MAX_BUCKETS
			      ? n_bounds
			      : SL_HISTOGRAM_MAX_BUCKETS;
}

void sl_histogram_observe(struct sl_histogram *h, double v)
{
	size_t b = 0;

	while (b < h->n_bounds && v > h->bounds[b])
		b++;
	h->bucket[b]++;
	h->count++;
	h->sum += v;
}

void sl_metrics_histogram(struct sl_metrics *m, const struct sl_metric *f,
			  const struct sl_label *labels, size_t n_labels,
			  const struct sl_histogram *h)
{
	const char *name = f->name;
	uint64_t cum = 0;
	char le[32];

	family(m, f, "histogram");
	for (size_t b = 0; b <= h->n_bounds; b++) {
		cum += h->bucket[b];
		if (b < h->n_bounds)
			snprintf(le, sizeof(le), "%g", h->bounds[b]);
		sample(m, name, "_bucket", labels, n_labels,
		       b < h->n_bounds ? le : "+Inf");
		sl_text_u64(m->out, "", cum);
		sl_text_put(m->out, "\n", 1);
	}
	sample(m, name, "_sum", labels, n_labels, NULL);
	put_double(m->out, h->sum);
	sl_text_put(m->out, "\n", 1);
	sample(m, name, "_count", labels, n_labels, NULL);
	sl_text_u64(m->out, "", h->count);
	sl_text_put(m->out, "\n", 1);
}

void sl_metrics_build_info(struct sl_metrics *m)
{
	static const struct sl_metric info = {
		"sluice_build_info", "Always 1: the version of this build."
	};

	sl_metrics_gauge(m, &info, SL_LABELS({ "version", sl_version }), 1);
}
