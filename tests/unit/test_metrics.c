/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the exposition text writer (user/lib/metrics.c). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics.h"
#include "process_metrics.h"
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

/* A comm with spaces and parentheses, as a process may name itself. */
static const char stat_text[] =
	"4242 (a) b (c) S 1 4242 4242 0 -1 4194560 1203 0 0 0 "
	"150 50 0 0 20 0 3 0 123400 24870912 2048 18446744073709551615 "
	"1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
static const char proc_stat_text[] =
	"cpu  1 2 3 4 5 6 7 0 0 0\nintr 1 2\nctxt 9\nbtime 1700000000\n"
	"processes 5\n";

static void test_process_parse(void **state)
{
	struct sl_process_stats st = { 0 };

	(void)state;
	assert_int_equal(sl_process_stats_parse(stat_text, proc_stat_text, 100,
						4096, &st),
			 0);
	assert_true(fabs(st.cpu_seconds - 2.0) < 1e-9); /* (150 + 50) / 100 */
	assert_true(fabs(st.start_time - 1700001234.0) < 1e-6);
	assert_int_equal(st.virtual_bytes, 24870912);
	assert_int_equal(st.resident_bytes, 2048 * 4096);
	/* not the kernel's text */
	assert_int_equal(sl_process_stats_parse("4242 (a) S 1 2", proc_stat_text,
						100, 4096, &st),
			 -EINVAL);
	assert_int_equal(sl_process_stats_parse("no comm", proc_stat_text, 100,
						4096, &st),
			 -EINVAL);
	assert_int_equal(sl_process_stats_parse(stat_text, "cpu 1\n", 100,
						4096, &st),
			 -EINVAL);
}

static void test_process_self(void **state)
{
	struct sl_process_stats st = { 0 };
	struct sl_text t = { 0 };
	struct sl_metrics m;
	double now = time(NULL);

	(void)state;
	assert_int_equal(sl_process_stats_read("/proc", &st), 0);
	/* this test started a moment ago, holds stdio, has some memory */
	assert_true(st.start_time <= now + 1 && st.start_time > now - 600);
	assert_true(st.open_fds >= 3 && st.open_fds < st.max_fds);
	assert_true(st.resident_bytes > 0);
	assert_true(st.virtual_bytes >= st.resident_bytes);
	assert_true(st.cpu_seconds >= 0 && st.cpu_seconds < 600);
	assert_int_equal(sl_process_stats_read("/nonexistent", &st), -ENOENT);

	sl_metrics_init(&m, &t);
	sl_metrics_process_self(&m);
	assert_non_null(t.buf);
	assert_non_null(strstr(t.buf, "# TYPE process_cpu_seconds_total "
				      "counter\nprocess_cpu_seconds_total "));
	for (const char *const *g = (const char *const[]){
		     "process_resident_memory_bytes",
		     "process_virtual_memory_bytes",
		     "process_start_time_seconds", "process_open_fds",
		     "process_max_fds", NULL };
	     *g; g++) {
		char want[96];

		snprintf(want, sizeof(want), "# TYPE %s gauge\n%s ", *g, *g);
		if (!strstr(t.buf, want))
			fail_msg("no %s in:\n%s", *g, t.buf);
	}
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
		cmocka_unit_test(test_process_parse),
		cmocka_unit_test(test_process_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
