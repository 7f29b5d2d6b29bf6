/* SPDX-License-Identifier: GPL-2.0 */
/* One logging helper: levelled lines on stderr. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

enum sl_log_level {
	SL_LOG_ERROR = 0,
	SL_LOG_WARN,
	SL_LOG_INFO,
	SL_LOG_DEBUG,
};

void sl_log_set_level(enum sl_log_level level);
void sl_log(enum sl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define pr_err(...)   sl_log(SL_LOG_ERROR, __VA_ARGS__)
#define pr_warn(...)  sl_log(SL_LOG_WARN, __VA_ARGS__)
#define pr_info(...)  sl_log(SL_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)

#endif
