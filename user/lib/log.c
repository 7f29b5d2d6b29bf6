// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static enum sl_log_level log_level = SL_LOG_INFO;

void sl_log_set_level(enum sl_log_level level)
{
	log_level = level;
}

void sl_log(enum sl_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info",
					     "debug" };
	va_list ap;

	if (level > log_level)
		return;
	fprintf(stderr, "sluice: %s: ", names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
