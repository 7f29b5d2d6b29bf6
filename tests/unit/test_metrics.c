/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the exposition text writer (user/lib/metrics.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"
#include "util.h"

static const struct sl_metric pkts = { "t_packets_total", "Packets." },
			      level = { "t_level", "A level." },
			      rtt = { "t_rtt_seconds", "Round trips." };

static void test_help_type_once(void **state)
{
	struct sl_text t = { 0 };
	struct sl_metrics m;

	(void)state;
	sl_metrics_init(&m, &t);
	sl_metrics_counter(&m, &pkts, SL_LABELS({ "rule", "a" }), 1);
	sl_metrics_counter(&m, &pkts, SL_LABELS({ "rule", "b" }), 2);
	sl_metrics_gauge(&m, &level, NULL, 0, 3);
	assert_string_equal(t.buf, "# HELP t_packets_total Packets.\n"
				   "# TYPE t_packets_total counter\n"
				   "t_packets_total{rule=\"a\"} 1\n"
				   "t_packets_total{rule=\"b\"} 2\n"
				   "# HELP t_level A level.\n"
				   "# TYPE t_level gauge\n"
				   "t_level 3\n");
	free(t.buf);
}

static void test_label_escaping(void **state)
{
	static const struct sl_metric odd = {
		"t_odd", "Help with a \\ and a\nnewline; \"quotes\" stay."
	};
	struct sl_text t = { 0 };
	struct sl_metrics m;

	(void)state;
	sl_metrics_init(&m, &t);
	sl_metrics_gauge(&m, &odd,
			 SL_LABELS({ "a", "back\\slash" },
				   { "b", "a \"quoted\" word" },
				   { "c", "two\nlines" }, { "d", "" }),
			 1);
	assert_string_equal(
		t.buf,
		"# HELP t_odd Help with a \\\\ and a\\nnewline; \"quotes\" "
		"stay.\n"
		"# TYPE t_odd gauge\n"
		"t_odd{a=\"back\\\\slash\",b=\"a \\\"quoted\\\" word\","
		"c=\"two\\nlines\",d=\"\"} 1\n");
	free(t.buf);
}

static void test_values(void **state)
{
	struct sl_text t = { 0 };
	struct sl_metrics m;

	(void)state;
	sl_metrics_init(&m, &t);
	/* a counter is exact past 2^53, where a double is not */
	sl_metrics_counter(&m, &pkts, NULL, 0, UINT64_MAX);
	sl_metrics_gauge(&m, &level, SL_LABELS({ "v", "int" }), 1e11);
	sl_metrics_gauge(&m, &level, SL_LABELS({ "v", "frac" }), 0.1);
	sl_metrics_gauge(&m, &level, SL_LABELS({ "v", "third" }), 1.0 / 3);
	sl_metrics_gauge(&m, &level, SL_LABELS({ "v", "neg" }), -2.5);
	sl_metrics_gauge(&m, &level, SL_LABELS({ "v", "inf" }), INFINITY);
	sl_metrics_gauge(&m, &level, SL_LABELS({ "v", "nan" }), NAN);
	assert_non_null(
		strstr(t.buf, "t_packets_total 18446744073709551615\n"));
	assert_non_null(strstr(t.buf, "t_level{v=\"int\"} 100000000000\n"));
	assert_non_null(strstr(t.buf, "t_level{v=\"frac\"} 0.1\n"));
	/* the shortest text that reads back as the same double */
	assert_non_null(
		strstr(t.buf, "t_level{v=\"third\"} 0.3333333333333333\n"));
	assert_non_null(strstr(t.buf, "t_level{v=\"neg\"} -2.5\n"));
	assert_non_null(strstr(t.buf, "t_level{v=\"inf\"} +Inf\n"));
	assert_non_null(strstr(t.buf, "t_level{v=\"nan\"} NaN\n"));
	free(t.buf);
}

static void test_histogram(void **state)
{
	static const double bounds[] = { 0.001, 0.01, 0.1 };
	struct sl_text t = { 0 };
	struct sl_histogram h;
	struct sl_metrics m;

	(void)state;
	sl_histogram_init(&h, bounds, ARRAY_SIZE(bounds));
	sl_histogram_observe(&h, 0.0005);
	sl_histogram_observe(&h, 0.001); /* on a bound: in that bucket */
	sl_histogram_observe(&h, 0.05);
	sl_histogram_observe(&h, 2);
	sl_metrics_init(&m, &t);
	sl_metrics_histogram(&m, &rtt, SL_LABELS({ "namespace", "web" }), &h);
	sl_metrics_histogram(&m, &rtt, SL_LABELS({ "namespace", "db" }),
			     &(struct sl_histogram){ .bounds = bounds,
						     .n_bounds = 1 });
	assert_string_equal(
		t.buf,
		"# HELP t_rtt_seconds Round trips.\n"
		"# TYPE t_rtt_seconds histogram\n"
		"t_rtt_seconds_bucket{namespace=\"web\",le=\"0.001\"} 2\n"
		"t_rtt_seconds_bucket{namespace=\"web\",le=\"0.01\"} 2\n"
		"t_rtt_seconds_bucket{namespace=\"web\",le=\"0.1\"} 3\n"
		"t_rtt_seconds_bucket{namespace=\"web\",le=\"+Inf\"} 4\n"
		"t_rtt_seconds_sum{namespace=\"web\"} 2.0515\n"
		"t_rtt_seconds_count{namespace=\"web\"} 4\n"
		"t_rtt_seconds_bucket{namespace=\"db\",le=\"0.001\"} 0\n"
		"t_rtt_seconds_bucket{namespace=\"db\",le=\"+Inf\"} 0\n"
		"t_rtt_seconds_sum{namespace=\"db\"} 0\n"
		"t_rtt_seconds_count{namespace=\"db\"} 0\n");
	free(t.buf);
}

static void test_histogram_no_labels(void **state)
{
	static const double bounds[] = { 1 };
	struct sl_text t = { 0 };
	struct sl_histogram h;
	struct sl_metrics m;

	(void)state;
	sl_histogram_init(&h, bounds, ARRAY_SIZE(bounds));
	sl_histogram_observe(&h, 0.5);
	sl_metrics_init(&m, &t);
	sl_metrics_histogram(&m, &rtt, NULL, 0, &h);
	assert_non_null(strstr(t.buf, "t_rtt_seconds_bucket{le=\"1\"} 1\n"
				      "t_rtt_seconds_bucket{le=\"+Inf\"} 1\n"
				      "t_rtt_seconds_sum 0.5\n"
				      "t_rtt_seconds_count 1\n"));
	free(t.buf);
}

static void test_build_info(void **state)
{
	struct sl_text t = { 0 };
	struct sl_metrics m;
	char want[128];

	(void)state;
	sl_metrics_init(&m, &t);
	sl_metrics_build_info(&m);
	snprintf(want, sizeof(want), "sluice_build_info{version=\"%s\"} 1\n",
		 sl_version);
	assert_non_null(strstr(t.buf, "# TYPE sluice_build_info gauge\n"));
	assert_non_null(strstr(t.buf, want));
	free(t.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_help_type_once),
		cmocka_unit_test(test_label_escaping),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_histogram_no_labels),
		cmocka_unit_test(test_build_info),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
