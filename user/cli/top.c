// SPDX-License-Identifier: GPL-2.0
/*
 * `sluice top`: the rules as a live view, refreshed from the agent's
 * control socket, with the rates of rates.c. ncurses redraws only the cells that changed, so the screen
 * never blanks between frames.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ncurses.h>

#include "cli.h"
#include "ctl.h"
#include "log.h"
#include "rules.h"
#include "util.h"

#define MIN_INTERVAL_S 0.1
#define MAX_INTERVAL_S 3600.0
#define HEAD_LINES     4 /* above the table: agent, rules, cluster, blank */

enum col {
	C_RULE, C_MODE, C_LIMIT, C_SOURCE, C_OFFERED, C_ADMITTED, C_DROPPED,
	C_CLUSTER, C_SOURCES, C_TOP_SOURCE, N_COLS,
};

static const char *const col_heads[N_COLS] = {
	"RULE", "MODE", "LIMIT/s", "FROM", "OFFERED/s", "ADMITTED/s",
	"DROPPED/s", "CLUSTER", "SOURCES", "MOST DROPPED",
};

/* right-aligned columns: the numbers */
#define RIGHT_COLS (1u << C_LIMIT | 1u << C_OFFERED | 1u << C_ADMITTED | \
		    1u << C_DROPPED | 1u << C_SOURCES)

struct row {
	char name[SL_NAME_MAX + 1];
	bool shadow;
	/* per second: within the limit, and over it (dropped, or for a
	 * shadow rule would-drop and passed) */
	double passed_s, dropped_s;
	char cell[N_COLS][SL_NAME_MAX + 8];
};

struct frame {
	struct row *rows;
	size_t n;
};

struct top {
	const struct cli *c;
	struct frame shown; /* the last answer's, on screen */
	struct cli_rates rates; /* its totals, for the next one's rates */
	char head[HEAD_LINES - 1][256];
	char problem[256]; /* why the last refresh failed; "" when it did not */
	size_t scroll;
	double interval_s;
};

static const char *unit_of(const char *grade)
{
	if (!strcmp(grade, "bps"))
		return "B";
	if (!strcmp(grade, "cps"))
		return "SYN";
	return "pkt";
}

static void fill_row(struct row *r, const cJSON *j, const struct cli_rate *rt)
{
	const char *grade = cli_get_str(j, "grade", "pps");
	const char *state = cli_get_str(j, "cluster_state", NULL);
	char n[32];

	snprintf(r->name, sizeof(r->name), "%s", rt->name);
	r->shadow = !strcmp(cli_get_str(j, "mode", ""), "shadow");
	r->passed_s = rt->passed_s;
	r->dropped_s = rt->blocked_s;
	snprintf(r->cell[C_RULE], sizeof(r->cell[0]), "%s", r->name);
	/* a rule of a layer above 0 says so: which layer drops */
	if (cli_get_num(j, "layer", 0) > 0)
		snprintf(r->cell[C_MODE], sizeof(r->cell[0]), "%s L%.0f",
			 r->shadow ? "shadow" : "enforce",
			 cli_get_num(j, "layer", 0));
	else
		snprintf(r->cell[C_MODE], sizeof(r->cell[0]), "%s",
			 r->shadow ? "shadow" : "enforce");
	if (cli_is_limit(j) && !strcmp(grade, "conns")) {
		char m[32];

		/* connections open now, of the count */
		snprintf(r->cell[C_LIMIT], sizeof(r->cell[0]), "%s/%s conns",
			 cli_rate_cell(cli_get_num(j, "conns_open", -1), m,
				       sizeof(m)),
			 cli_rate_cell(cli_get_num(j, "threshold", -1), n,
				       sizeof(n)));
	} else if (cli_is_limit(j))
		snprintf(r->cell[C_LIMIT], sizeof(r->cell[0]), "%s %s",
			 cli_rate_cell(cli_get_num(j, "threshold", -1), n,
				       sizeof(n)),
			 unit_of(grade));
	else /* allow or deny: no limit */
		snprintf(r->cell[C_LIMIT], sizeof(r->cell[0]), "%s",
			 cli_get_str(j, "action", "?"));
	snprintf(r->cell[C_SOURCE], sizeof(r->cell[0]), "%s",
		 cli_get_str(j, "threshold_source", "-"));
	snprintf(r->cell[C_OFFERED], sizeof(r->cell[0]), "%s",
		 cli_rate_cell(r->passed_s + r->dropped_s, n, sizeof(n)));
	snprintf(r->cell[C_ADMITTED], sizeof(r->cell[0]), "%s",
		 cli_rate_cell(r->shadow ? r->passed_s + r->dropped_s
					 : r->passed_s,
			       n, sizeof(n)));
	/* a shadow rule drops nothing: what it would drop, in brackets */
	snprintf(r->cell[C_DROPPED], sizeof(r->cell[0]),
		 r->shadow ? "(%s)" : "%s",
		 cli_rate_cell(r->dropped_s, n, sizeof(n)));
	snprintf(r->cell[C_CLUSTER], sizeof(r->cell[0]), "%s",
		 state ? state : "-");
	if (cli_get_bool(j, "per_source")) {
		double used = cli_get_num(j, "sources", 0);
		double max = cli_get_num(j, "max_sources", 0);

		snprintf(r->cell[C_SOURCES], sizeof(r->cell[0]),
			 "%.0f/%.0f (%.0f%%)", used, max,
			 max > 0 ? 100 * used / max : 0);
	} else {
		snprintf(r->cell[C_SOURCES], sizeof(r->cell[0]), "-");
	}
	snprintf(r->cell[C_TOP_SOURCE], sizeof(r->cell[0]), "-");
}

/* The source each rule that drops now drops most (`sluice drops`), into
 * the frame's rows; an agent without sampled drops leaves them "-". */
static void take_drops(struct top *t)
{
	cJSON *req = cli_request("drops"), *resp = NULL;
	const cJSON *r, *src;

	if (!req || !cJSON_AddNumberToObject(req, "top", 1) ||
	    sl_ctl_call(t->c->sock, req, &resp, SL_CTL_TIMEOUT_MS)) {
		cJSON_Delete(req);
		cJSON_Delete(resp);
		return;
	}
	cJSON_ArrayForEach(r, cli_get(resp, "rules")) {
		src = cJSON_GetArrayItem(cli_get(r, "sources"), 0);
		if (!src)
			continue;
		/* only rules dropping now: the samples remember the last
		 * tens of seconds */
		for (size_t i = 0; i < t->shown.n; i++)
			if (t->shown.rows[i].dropped_s > 0 &&
			    !strcmp(t->shown.rows[i].name,
				    cli_get_str(r, "name", "")))
				snprintf(t->shown.rows[i].cell[C_TOP_SOURCE],
					 sizeof(t->shown.rows[i].cell[0]),
					 "%s %.0f%%", cli_get_str(src, "addr", "?"),
					 100 * cli_get_num(src, "share", 0));
	}
	cJSON_Delete(req);
	cJSON_Delete(resp);
}

/* Most dropped first; the name keeps rows of equal drops in place. */
static int by_drops(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->dropped_s != y->dropped_s)
		return x->dropped_s < y->dropped_s ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* The new frame from a stats answer; -ENOMEM or 0. */
static int take_stats(struct top *t, const cJSON *resp)
{
	const cJSON *j;
	struct frame f = { 0 };
	size_t k = 0;

	if (cli_rates_take(&t->rates, resp))
		return -ENOMEM;
	f.rows = calloc(t->rates.n ? t->rates.n : 1, sizeof(*f.rows));
	if (!f.rows)
		return -ENOMEM;
	/* rates.r[k] is the k-th rule object of the answer */
	cJSON_ArrayForEach(j, cli_get(resp, "rules"))
		if (cJSON_IsObject(j) && k < t->rates.n)
			fill_row(&f.rows[f.n++], j, &t->rates.r[k++]);
	qsort(f.rows, f.n, sizeof(*f.rows), by_drops);
	free(t->shown.rows);
	t->shown = f;
	return 0;
}

static void take_status(struct top *t, const cJSON *st)
{
	const cJSON *snap = cli_get(st, "snapshot"), *i, *reason;
	const cJSON *cluster = cli_get(st, "cluster");
	bool ready = cli_get_bool(st, "ready");
	char up[32], age[32], *h;
	size_t len, off;
	time_t now = time(NULL);
	char when[16];

	strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
	snprintf(t->head[0], sizeof(t->head[0]),
		 "sluice top  %s  every %gs  agent %s, pid %.0f, up %s%s",
		 when, t->interval_s, cli_get_str(st, "sluice_version", "?"),
		 cli_get_num(st, "pid", 0),
		 cli_dur_cell(cli_get_num(st, "uptime_s", -1), up, sizeof(up)),
		 ready ? "  READY" : "  NOT READY:");
	h = t->head[0];
	len = sizeof(t->head[0]);
	off = strlen(h);
	cJSON_ArrayForEach(reason, cli_get(st, "not_ready"))
		if (cJSON_IsString(reason) && off < len)
			off += snprintf(h + off, len - off, " %s;",
					reason->valuestring);

	h = t->head[1];
	len = sizeof(t->head[1]);
	off = snprintf(h, len,
		       "rules %.0f in force (version %.0f), snapshot %.0f "
		       "(version %.0f, %s old)  interfaces:",
		       cli_get_num(st, "rules_in_force", 0),
		       cli_get_num(st, "in_force_version", 0),
		       cli_get_num(snap, "rules", 0),
		       cli_get_num(snap, "version", 0),
		       cli_dur_cell(cli_get_num(snap, "age_s", -1), age,
				    sizeof(age)));
	cJSON_ArrayForEach(i, cli_get(st, "interfaces"))
		if (off < len)
			off += snprintf(h + off, len - off, " %s %s%s",
					cli_get_str(i, "name", "?"),
					cli_get_str(i, "mode", "?"),
					cli_get_bool(i, "attached")
						? ""
						: " DETACHED");

	h = t->head[2];
	len = sizeof(t->head[2]);
	if (!cluster) {
		snprintf(h, len, "cluster: none");
		return;
	}
	off = snprintf(h, len, "cluster: node %s;",
		       cli_get_str(cluster, "node_id", "?"));
	cJSON_ArrayForEach(i, cli_get(cluster, "sessions"))
		if (off < len)
			off += snprintf(h + off, len - off, " %s %s%s%s;",
					cli_get_str(i, "namespace", "?"),
					cli_get_str(i, "state", "?"),
					cli_get_str(i, "token_server", NULL)
						? " via "
						: "",
					cli_get_str(i, "token_server", ""));
}

/* What went wrong asking the agent, for the bottom line. */
static void set_problem(struct top *t, const char *cmd, int err,
			const cJSON *resp)
{
	if (err == -EREMOTEIO)
		snprintf(t->problem, sizeof(t->problem), "%s refused: %s", cmd,
			 cli_get_str(resp, "error", "?"));
	else
		snprintf(t->problem, sizeof(t->problem),
			 "the agent at %s does not answer: %s (retrying)",
			 t->c->sock, strerror(-err));
}

/* One request, quietly: the screen is ncurses', not stderr's. */
static int ask(struct top *t, const char *cmd, cJSON **resp)
{
	cJSON *req = cli_request(cmd);
	int err;

	*resp = NULL;
	if (!req)
		return -ENOMEM;
	err = sl_ctl_call(t->c->sock, req, resp, SL_CTL_TIMEOUT_MS);
	cJSON_Delete(req);
	if (!err && !cJSON_IsTrue(cli_get(*resp, "ok")))
		err = -EREMOTEIO;
	if (err && err != -ENOMEM)
		set_problem(t, cmd, err, *resp);
	return err;
}

/* Ask for both answers; on failure the last frame stays on screen. */
static int refresh_data(struct top *t)
{
	cJSON *stats, *status;
	int err = ask(t, "status", &status);

	if (!err)
		take_status(t, status);
	cJSON_Delete(status);
	if (err)
		return err;
	err = ask(t, "stats", &stats);
	if (!err)
		err = take_stats(t, stats);
	cJSON_Delete(stats);
	if (!err)
		take_drops(t);
	if (!err)
		t->problem[0] = '\0';
	return err;
}

static void draw(struct top *t)
{
	int width[N_COLS], rows_fit = LINES - HEAD_LINES - 2;
	const struct frame *f = &t->shown;
	size_t last;
	int y = 0;

	for (int k = 0; k < N_COLS; k++)
		width[k] = strlen(col_heads[k]);
	for (size_t i = 0; i < f->n; i++)
		for (int k = 0; k < N_COLS; k++)
			if ((int)strlen(f->rows[i].cell[k]) > width[k])
				width[k] = strlen(f->rows[i].cell[k]);
	if (rows_fit < 1)
		rows_fit = 1;
	if (t->scroll + rows_fit > f->n)
		t->scroll = f->n > (size_t)rows_fit ? f->n - rows_fit : 0;
	last = t->scroll + rows_fit < f->n ? t->scroll + rows_fit : f->n;

	erase();
	for (int k = 0; k < HEAD_LINES - 1; k++)
		mvaddnstr(y++, 0, t->head[k], COLS);
	y++;
	attron(A_REVERSE);
	move(y, 0);
	for (int k = 0, x = 0; k < N_COLS && x < COLS; x += width[k++] + 2)
		mvprintw(y, x, RIGHT_COLS & 1u << k ? "%*s" : "%-*s",
			 width[k], col_heads[k]);
	chgat(-1, A_REVERSE, 0, NULL);
	attroff(A_REVERSE);
	y++;
	for (size_t i = t->scroll; i < last; i++, y++) {
		const struct row *r = &f->rows[i];

		if (r->dropped_s > 0 && !r->shadow)
			attron(A_BOLD);
		for (int k = 0, x = 0; k < N_COLS && x < COLS;
		     x += width[k++] + 2)
			mvprintw(y, x, RIGHT_COLS & 1u << k ? "%*s" : "%-*s",
				 width[k], r->cell[k]);
		attroff(A_BOLD);
	}
	if (!f->n)
		mvaddstr(y, 0, "no rules in force");
	if (t->problem[0])
		attron(A_REVERSE);
	if (t->problem[0])
		mvaddnstr(LINES - 1, 0, t->problem, COLS);
	else
		mvprintw(LINES - 1, 0,
			 "q quit  up/down/PgUp/PgDn scroll  rules %zu-%zu of "
			 "%zu, most dropped first",
			 f->n ? t->scroll + 1 : 0, last, f->n);
	attroff(A_REVERSE);
	refresh();
}

/* Scroll for a key; false for q. */
static bool key(struct top *t, int ch)
{
	size_t page = LINES > HEAD_LINES + 3 ? LINES - HEAD_LINES - 2 : 1;

	switch (ch) {
	case 'q':
	case 'Q':
		return false;
	case KEY_UP:
		t->scroll -= t->scroll > 0;
		break;
	case KEY_DOWN:
		t->scroll++;
		break;
	case KEY_PPAGE:
		t->scroll = t->scroll > page ? t->scroll - page : 0;
		break;
	case KEY_NPAGE:
		t->scroll += page;
		break;
	case KEY_HOME:
		t->scroll = 0;
		break;
	case KEY_END:
		t->scroll = t->shown.n;
		break;
	}
	return true;
}

static int run_view(struct top *t)
{
	double next = sl_now_ns() / 1e9;
	int err = 0;

	for (;;) {
		double now = sl_now_ns() / 1e9;
		int ch;

		if (now >= next) {
			err = refresh_data(t);
			if (err == -ENOMEM)
				break;
			next = now + t->interval_s;
			draw(t);
		}
		timeout((int)ceil((next - sl_now_ns() / 1e9) * 1000));
		ch = getch();
		if (ch == ERR)
			continue;
		if (!key(t, ch))
			return 0;
		draw(t);
	}
	return err;
}

static int run_top(const struct sl_cmd *cmd, void *opts, int argc,
		   char **argv)
{
	struct cli *c = opts;
	struct top t = { .c = c };
	cJSON *req, *resp = NULL;
	SCREEN *screen;
	int err = cli_start(c, cmd, argc, argv);

	if (err)
		return err;
	t.interval_s = c->watch ? c->watch_s : 1;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		pr_err("top: needs a terminal; `sluice stats --watch` prints "
		       "tables for a log or a pipe");
		return SL_CLI_FAILED;
	}
	/* the first answer before the screen is taken: errors as for stats */
	req = cli_request("stats");
	if (!req) {
		pr_err("top: out of memory");
		return SL_CLI_FAILED;
	}
	err = cli_call(c, req, &resp);
	cJSON_Delete(req);
	cJSON_Delete(resp);
	if (err)
		return cli_exit_code(err);
	screen = newterm(NULL, stdout, stdin);
	if (!screen) {
		pr_err("top: cannot drive the terminal (TERM=%s)",
		       getenv("TERM") ? getenv("TERM") : "");
		return SL_CLI_FAILED;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	err = run_view(&t);
	endwin();
	delscreen(screen);
	free(t.shown.rows);
	cli_rates_free(&t.rates);
	if (err == -ENOMEM)
		pr_err("top: out of memory");
	return err == -ENOMEM ? SL_CLI_FAILED : SL_CLI_OK;
}

static const struct sl_opt top_opts[] = {
	{ .name = "interval", .short_name = 'd', .type = SL_OPT_SECONDS,
	  .field = SL_FIELD(struct cli, watch_s),
	  .given = SL_FIELD(struct cli, watch), .metavar = "SECONDS",
	  .fmin = MIN_INTERVAL_S, .fmax = MAX_INTERVAL_S,
	  .help = "refresh every SECONDS (1)" },
	CLI_OPT_STATE_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_top = {
	.name = "top",
	.opts = top_opts,
	CLI_VERB,
	.run = run_top,
	.summary = "a live view of the rules: offered, admitted and dropped "
		   "per second,\nthe threshold and where it comes from, most "
		   "dropped first; q quits",
};
