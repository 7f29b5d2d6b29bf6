// SPDX-License-Identifier: GPL-2.0
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "util.h"

#define REPEAT_TEXT 160 /* of a repeated message, kept for its summary */

const char *const sl_log_level_names[] = { "error", "warn", "info", "debug",
					   NULL };
const char *const sl_log_format_names[] = { "text", "json", NULL };

/* as printed: "warning" reads better in a line than the option's "warn" */
static const char *const level_words[] = { "error", "warning", "info",
					   "debug" };
static const char *const sd_prefix[] = { SD_ERR, SD_WARNING, SD_INFO,
					 SD_DEBUG };

/* A message printed lately, and how often it came again since. */
struct seen {
	uint64_t hash;
	uint64_t first_ns; /* when it was printed */
	uint64_t order;	   /* of printing: the lowest gives its place */
	uint32_t repeats;
	enum sl_log_level level;
	char text[REPEAT_TEXT];
};

static struct {
	enum sl_log_level level;
	bool daemon, journal;
	enum sl_log_format format;
	FILE *out;
	uint64_t (*clock_ns)(void);
	struct seen seen[SL_LOG_REPEAT_SLOTS];
	uint64_t printed;
	pthread_mutex_t lock;
} lg = { .level = SL_LOG_INFO, .lock = PTHREAD_MUTEX_INITIALIZER };

/* Whether f is the journal's stream: JOURNAL_STREAM is its "dev:ino"
 * (systemd.exec(5)); inherited by a child whose stderr went elsewhere,
 * it no longer matches. */
static bool is_journal(FILE *f)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return env && sscanf(env, "%llu:%llu", &dev, &ino) == 2 &&
	       !fstat(fileno(f), &st) && st.st_dev == dev && st.st_ino == ino;
}

void sl_log_daemon(const struct sl_log_opts *o, FILE *out)
{
	pthread_mutex_lock(&lg.lock);
	lg.out = out ? out : stderr;
	lg.daemon = true;
	lg.journal = is_journal(lg.out);
	lg.level = o->level;
	lg.format = o->format;
	lg.clock_ns = o->clock_ns ? o->clock_ns : sl_now_ns;
	memset(lg.seen, 0, sizeof(lg.seen));
	pthread_mutex_unlock(&lg.lock);
}

/* One record; repeats > 0: the summary of a repeated message. */
static void emit(enum sl_log_level level, const char *msg, uint32_t repeats)
{
	FILE *f = lg.out ? lg.out : stderr;
	char when[SL_UTC_MS_LEN + 1] = "";
	const char *pre = lg.journal ? sd_prefix[level] : "";

	if (lg.daemon && !lg.journal)
		sl_format_utc(sl_wall_ms(), true, when);
	if (lg.format == SL_LOG_JSON) {
		cJSON *o = cJSON_CreateObject();
		char *text;

		if (when[0])
			cJSON_AddStringToObject(o, "time", when);
		cJSON_AddStringToObject(o, "level", level_words[level]);
		cJSON_AddStringToObject(o, "msg", msg);
		if (repeats)
			cJSON_AddNumberToObject(o, "repeated", repeats);
		text = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		fprintf(f, "%s%s\n", pre, text ? text : "{}");
		cJSON_free(text);
		return;
	}
	if (!lg.daemon) {
		fprintf(f, "sluice: %s: %s\n", level_words[level], msg);
		return;
	}
	/* every line of a message carries the prefix: the journal takes
	 * each as a record of its own */
	do {
		size_t n = strcspn(msg, "\n");

		fprintf(f, "%s%s%ssluice: %s: ", pre, when, when[0] ? " " : "",
			level_words[level]);
		if (repeats)
			fprintf(f, "last message repeated %u times: ", repeats);
		fprintf(f, "%.*s\n", (int)n, msg);
		msg += n + (msg[n] == '\n');
	} while (*msg);
}

/* The summaries of repeats whose window has passed. */
static void flush_repeats(uint64_t now)
{
	for (int i = 0; i < SL_LOG_REPEAT_SLOTS; i++) {
		struct seen *s = &lg.seen[i];

		if (!s->hash || now - s->first_ns < SL_LOG_REPEAT_S * NSEC_PER_SEC)
			continue;
		if (s->repeats)
			emit(s->level, s->text, s->repeats);
		s->hash = 0;
	}
}

/* True when msg came within the window: counted, not printed. */
static bool repeated(enum sl_log_level level, const char *msg, uint64_t now)
{
	uint64_t h = sl_fnv1a(sl_fnv1a_str(msg), &level, sizeof(level)) | 1;
	struct seen *s, *oldest = &lg.seen[0];

	flush_repeats(now);
	for (int i = 0; i < SL_LOG_REPEAT_SLOTS; i++) {
		s = &lg.seen[i];
		if (s->hash == h) {
			s->repeats++;
			return true;
		}
		if (!s->hash || (oldest->hash && s->order < oldest->order))
			oldest = s;
	}
	/* full of messages that repeat: the oldest gives its place */
	if (oldest->hash && oldest->repeats)
		emit(oldest->level, oldest->text, oldest->repeats);
	*oldest = (struct seen){ .hash = h, .first_ns = now,
				 .order = ++lg.printed, .level = level };
	snprintf(oldest->text, sizeof(oldest->text), "%s", msg);
	return false;
}

void sl_log(enum sl_log_level level, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int n;

	if (level > lg.level)
		return;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	pthread_mutex_lock(&lg.lock);
	/* errors and warnings repeat in a loop; info lines are changes */
	if (!lg.daemon || level > SL_LOG_WARN ||
	    !repeated(level, msg, lg.clock_ns()))
		emit(level, msg, 0);
	fflush(lg.out ? lg.out : stderr);
	pthread_mutex_unlock(&lg.lock);
	free(msg);
}
