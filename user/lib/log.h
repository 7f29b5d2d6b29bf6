/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One logging helper: levelled lines on stderr. The CLI's are "sluice:
 * LEVEL: message". A daemon (sl_log_daemon) adds what a log collector
 * needs: the sd-daemon priority prefix ("<3>") when stderr is the
 * journal, else an ISO-8601 UTC timestamp; optionally one JSON object a
 * line; and a message repeated within SL_LOG_REPEAT_S is printed once,
 * then "last message repeated K times".
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdint.h>
#include <stdio.h>

enum sl_log_level {
	SL_LOG_ERROR = 0,
	SL_LOG_WARN,
	SL_LOG_INFO,
	SL_LOG_DEBUG,
};

enum sl_log_format {
	SL_LOG_TEXT = 0,
	SL_LOG_JSON,
};

/* Seconds a repeated message stays quiet; the distinct messages kept. */
#ifndef SL_LOG_REPEAT_S
#define SL_LOG_REPEAT_S 10
#endif
#ifndef SL_LOG_REPEAT_SLOTS
#define SL_LOG_REPEAT_SLOTS 16
#endif

/* The options' values, in enum order, NULL-terminated. */
extern const char *const sl_log_level_names[];
extern const char *const sl_log_format_names[];

/* A daemon's --log-level and --log-format (SL_OPT_CHOICE indexes). */
struct sl_log_opts {
	int level;  /* enum sl_log_level; SL_LOG_INFO unless given */
	int format; /* enum sl_log_format */
	uint64_t (*clock_ns)(void); /* NULL: sl_now_ns(); tests inject */
};

/* The options of struct t's member m (a struct sl_log_opts), for the
 * option tables of agent and tokend (params.h). */
#define SL_LOG_OPTS(t, m)                                                     \
	{ .name = "log-level", .type = SL_OPT_CHOICE,                         \
	  .field = SL_FIELD(t, m.level), .metavar = "LEVEL",                  \
	  .choices = sl_log_level_names,                                      \
	  .help = "error, warn, info (the default) or debug" },             \
	{ .name = "log-format", .type = SL_OPT_CHOICE,                        \
	  .field = SL_FIELD(t, m.format), .metavar = "FORMAT",                \
	  .choices = sl_log_format_names,                                     \
	  .help = "text (the default) or json: one object a line" }

/* Log as a daemon to out (NULL: stderr) from now on. */
void sl_log_daemon(const struct sl_log_opts *o, FILE *out);

void sl_log(enum sl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define pr_err(...)   sl_log(SL_LOG_ERROR, __VA_ARGS__)
#define pr_warn(...)  sl_log(SL_LOG_WARN, __VA_ARGS__)
#define pr_info(...)  sl_log(SL_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)

#endif
