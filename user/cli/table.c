// SPDX-License-Identifier: GPL-2.0
/* Text tables and their cells, for the CLI's human output. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"

static bool integral(double v)
{
	return v > -9e15 && v < 9e15 && v == (double)(long long)v;
}

/* A JSON value as a table cell: "-" when absent. */
const char *cli_cell(const cJSON *v, char *buf, size_t len)
{
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v) ? "yes" : "no";
	if (!cJSON_IsNumber(v))
		return "-";
	if (integral(v->valuedouble))
		snprintf(buf, len, "%lld", (long long)v->valuedouble);
	else
		snprintf(buf, len, "%.2f", v->valuedouble);
	return buf;
}

const char *cli_num_cell(double v, char *buf, size_t len)
{
	if (v != v || v < 0) /* absent or nonsense */
		return "-";
	if (integral(v))
		snprintf(buf, len, "%lld", (long long)v);
	else
		snprintf(buf, len, "%.2f", v);
	return buf;
}

/* A rate with k/M/G above 10000: the table stays narrow, -j is exact. */
const char *cli_rate_cell(double v, char *buf, size_t len)
{
	if (v != v || v < 0)
		return "-";
	if (v < 1e4 && integral(v)) /* the common case: no float printf */
		snprintf(buf, len, "%lld", (long long)v);
	else if (v < 1e4)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1e6)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else if (v < 1e9)
		snprintf(buf, len, "%.1fM", v / 1e6);
	else
		snprintf(buf, len, "%.1fG", v / 1e9);
	return buf;
}

const char *cli_dur_cell(double s, char *buf, size_t len)
{
	long long t;

	if (s != s || s < 0)
		return "-";
	t = (long long)s;
	if (t < 60)
		snprintf(buf, len, "%llds", t);
	else if (t < 3600)
		snprintf(buf, len, "%lldm%02llds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, len, "%lldh%02lldm", t / 3600, t % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
	return buf;
}


void table_add(struct table *t, const char *s)
{
	size_t l;

	if (t->err)
		return;
	s = s ? s : "-";
	l = strlen(s) + 1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		size_t *nc = realloc(t->cell, cap * sizeof(*nc));

		if (!nc) {
			t->err = -ENOMEM;
			return;
		}
		t->cell = nc;
		t->cap = cap;
	}
	if (t->len + l > t->size) {
		size_t size = 2 * (t->len + l) + 1024;
		char *nt = realloc(t->text, size);

		if (!nt) {
			t->err = -ENOMEM;
			return;
		}
		t->text = nt;
		t->size = size;
	}
	memcpy(t->text + t->len, s, l);
	t->cell[t->n++] = t->len;
	t->len += l;
}

void table_addf(struct table *t, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	table_add(t, buf);
}

static void pad(size_t n)
{
	static const char spaces[] = "                                ";

	while (n) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;

		fwrite(spaces, 1, k, stdout);
		n -= k;
	}
}

static void print_cell(const struct table *t, size_t col, const char *s,
		       const size_t *width)
{
	bool last = col + 1 == t->ncols;
	size_t l = strlen(s);

	if (t->right & (1u << col))
		pad(width[col] - l);
	fputs(s, stdout);
	if (!(t->right & (1u << col)) && !last)
		pad(width[col] - l);
	fputs(last ? "\n" : "  ", stdout);
}

static int table_print(struct table *t)
{
	size_t width[16] = { 0 }, i;

	if (t->err)
		return t->err;
	for (i = 0; i < t->ncols; i++)
		width[i] = strlen(t->heads[i]);
	for (i = 0; i < t->n; i++) {
		size_t l = strlen(t->text + t->cell[i]);

		if (l > width[i % t->ncols])
			width[i % t->ncols] = l;
	}
	for (i = 0; i < t->ncols; i++)
		print_cell(t, i, t->heads[i], width);
	for (i = 0; i < t->n; i++)
		print_cell(t, i % t->ncols, t->text + t->cell[i], width);
	return 0;
}

static void table_free(struct table *t)
{
	free(t->text);
	free(t->cell);
}

void table_done(struct table *t)
{
	if (table_print(t))
		pr_err("out of memory while printing a table");
	table_free(t);
}

void cli_print_settings(const cJSON *rules)
{
	static const char *const keys[] = { "breaker", "system", "cluster" };
	const cJSON *r;

	cJSON_ArrayForEach(r, rules) {
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			const cJSON *v = cli_get(r, keys[k]);
			char *text;

			if (!cJSON_IsObject(v))
				continue;
			text = cJSON_PrintUnformatted(v);
			printf("%s %s: %s\n", keys[k],
			       cli_get_str(r, "name", "?"),
			       text ? text : "(out of memory)");
			cJSON_free(text);
		}
	}
}
