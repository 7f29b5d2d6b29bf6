/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sluice CLI: `rule`, `status`, `stats`, `explain` and `drops` ask the agent over its
 * control socket (ctl.h) and never touch the maps; `down` removes a pinned
 * data plane without an agent; `check` validates a rule file offline.
 * One file per verb, this header between them. The CLI is the edge: it
 * prints every error and maps it to an exit code. docs/cli.md describes
 * the verbs, their output and the exit codes.
 */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include <cjson/cJSON.h>

#include "params.h"
#include "rules.h"

#define SL_CLI_DEF_STATE_DIR "/var/lib/sluice"
#define SL_CLI_DEF_PIN_DIR   "/sys/fs/bpf/sluice"
#define SL_CLI_MAX_VERSION   ((1ULL << 53) - 1) /* exact as a JSON number */

/* Exit codes of the CLI verbs. */
enum sl_cli_exit {
	SL_CLI_OK = 0,		/* done (status --ready: the agent is ready) */
	SL_CLI_FAILED = 1,	/* refused or failed; the reason is on stderr */
	SL_CLI_USAGE = SL_EXIT_USAGE, /* bad command line, then the usage */
	SL_CLI_UNREACHABLE = 3, /* no agent answered on the control socket */
	/* status: no agent answered, but a data plane is pinned and
	 * enforcing the rules it shows */
	SL_CLI_NO_AGENT_ENFORCING = 4,
};

/* The options of every CLI verb; each verb's table names its own. */
struct cli {
	const struct sl_cmd *cmd;
	const char *state_dir;
	const char *pin_dir;
	struct sl_ifaces ifaces;
	bool json;
	bool ready;
	bool watch;
	double watch_s;
	bool has_if_version;
	uint64_t if_version;
	bool dry_run;
	uint32_t top;	/* drops: sources per rule */
	/* explain: the packet beyond PROTO SRC DST */
	uint32_t sport, dport, vlan, size;
	bool has_sport, has_dport, has_vlan, has_size, syn;
	char **args; /* positional arguments */
	int n_args;
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* The common options, for the verbs' tables. */
#define CLI_OPT_STATE_DIR                                                    \
	{ .name = "state-dir", .type = SL_OPT_STRING,                        \
	  .field = SL_FIELD(struct cli, state_dir), .metavar = "DIR",        \
	  .help = "the agent's state directory (" SL_CLI_DEF_STATE_DIR ")" }
#define CLI_OPT_PIN_DIR                                                      \
	{ .name = "pin-dir", .type = SL_OPT_STRING,                          \
	  .field = SL_FIELD(struct cli, pin_dir), .metavar = "DIR",          \
	  .help = "the agent's bpffs directory (" SL_CLI_DEF_PIN_DIR ")" }
#define CLI_OPT_JSON                                                         \
	{ .name = "json", .short_name = 'j', .type = SL_OPT_FLAG,            \
	  .field = SL_FIELD(struct cli, json),                               \
	  .help = "print the agent's answer as JSON" }

void cli_defaults(void *opts);

/* In each verb's struct sl_cmd: its options are a struct cli. */
#define CLI_VERB .opts_size = sizeof(struct cli), .defaults = cli_defaults

/*
 * The start of every verb that talks to the agent: keep cmd and the
 * arguments, check the state directory makes a socket path. Returns 0 or
 * SL_CLI_USAGE (the problem printed).
 */
int cli_start(struct cli *c, const struct sl_cmd *cmd, int argc, char **argv);

/* ---- talking to the agent (client.c) ---- */

/* A member of an answer, or the default when absent or of another type. */
const cJSON *cli_get(const cJSON *o, const char *key);
const char *cli_get_str(const cJSON *o, const char *key, const char *def);
double cli_get_num(const cJSON *o, const char *key, double def);
bool cli_get_bool(const cJSON *o, const char *key);

/* Whether a rule (its canonical form, or an answer about it) is a limit:
 * an allow or deny rule has no grade, count or threshold. */
bool cli_is_limit(const cJSON *rule);

/* {"cmd": cmd}, NULL when out of memory. */
cJSON *cli_request(const char *cmd);

/*
 * Send req and wait for the answer; *resp is set whenever one came back.
 * Returns 0 (ok: true), -EREMOTEIO (the agent said no), -EBADMSG (not a
 * sluice answer), or the transport's -errno. Prints the error.
 */
int cli_call(const struct cli *c, const cJSON *req, cJSON **resp);

/* -j: send req, print the answer without its "ok", exactly as the agent
 * wrote its numbers. Returns as cli_call() does. */
int cli_call_json(const struct cli *c, const cJSON *req);

/* Send req (consumed); -j prints any answer, otherwise human() prints a
 * good one. Returns the exit code. */
int cli_run(const struct cli *c, cJSON *req, void (*human)(const cJSON *resp));

/* The exit code for what cli_call() returned. */
int cli_exit_code(int err);

/* ---- rates between two stats answers (rates.c) ---- */

/* A rule's totals in one answer and its rates since the answer before. */
struct cli_rate {
	char name[SL_NAME_MAX + 1];
	bool bytes;		 /* a bps rule: bytes, otherwise packets */
	double passed, blocked;	 /* totals */
	double passed_s, blocked_s; /* per second */
};

/* The last answer's rules, in its order, and the agent's clock then. */
struct cli_rates {
	struct cli_rate *r;
	size_t n;
	uint64_t time_ns;
	struct sl_index by_name;
};

/*
 * Replace rs (zeroed at first) with resp's rules: r[k] is its k-th rule
 * object, its rates the counters' change since rs over the agent's clock;
 * the sliding window's estimate for the first answer and for a rule new
 * or reset since. -ENOMEM leaves rs as it was.
 */
int cli_rates_take(struct cli_rates *rs, const cJSON *resp);
void cli_rates_free(struct cli_rates *rs);

/* ---- tables (table.c) ---- */

/* Cells: "-" when absent; rates with k/M/G above 10000. */
const char *cli_cell(const cJSON *v, char *buf, size_t len);
const char *cli_num_cell(double v, char *buf, size_t len);
const char *cli_rate_cell(double v, char *buf, size_t len);
const char *cli_dur_cell(double s, char *buf, size_t len);

/*
 * A text table: cells are added row by row, column widths follow the
 * widest cell, numbers are right-aligned.
 */
struct table {
	size_t ncols;
	const char *const *heads;
	unsigned int right; /* bit i: column i is right-aligned */
	char *text;	    /* the cells, one after the other, NUL-ended */
	size_t len, size;
	size_t *cell;	    /* where each cell starts in text */
	size_t n, cap;
	int err;
};

void table_add(struct table *t, const char *s);
void table_addf(struct table *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Print and free. */
void table_done(struct table *t);

/* After a table of rules: a line per rule's breaker, system and cluster
 * settings ("breaker NAME: {...}"), which the columns leave out. */
void cli_print_settings(const cJSON *rules);

/* ---- checking a rule file (check.c) ---- */

struct sl_ruleset;
struct sl_compiled;

/*
 * FILE read, parsed and compiled as `sluice check` does; the error printed
 * on stderr. On success *rs and *comp are set (free both) and, unless
 * text is NULL, *text (malloc'd) and *len are the bytes checked.
 */
int cli_check_rules(const char *file, char **text, size_t *len,
		    struct sl_ruleset *rs, struct sl_compiled *comp);

/* ---- the verbs, for the command table (user/sluice.c) ---- */

/* "added a, b; removed c; changed d" of an answer's "diff" (the agent's,
 * or push's own), or "no rule changed". */
void cli_print_diff(const cJSON *diff);

extern const struct sl_cmd sl_cmd_rule_add, sl_cmd_rule_del,
	sl_cmd_rule_replace, sl_cmd_rule_list, sl_cmd_rule_save, sl_cmd_status,
	sl_cmd_stats, sl_cmd_top, sl_cmd_secrets_reload, sl_cmd_down, sl_cmd_check,
	sl_cmd_push, sl_cmd_explain, sl_cmd_drops;

#endif
