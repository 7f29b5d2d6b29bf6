// SPDX-License-Identifier: GPL-2.0
/* The command line from the command table (params.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "params.h"

#define MAX_OPTS   32
#define USAGE_COLS 80
#define LONG_VAL   256 /* getopt values of long-only options: 256 + index */

#define PROGRAM "sluice"

static void *field_of(void *opts, size_t field)
{
	return (char *)opts + field - 1;
}

static int n_opts(const struct sl_cmd *cmd)
{
	int n = 0;

	while (cmd->opts && cmd->opts[n].name)
		n++;
	return n;
}

static bool takes_value(const struct sl_opt *o)
{
	return o->type != SL_OPT_FLAG;
}

/* ---- usage ---- */

/* "[-j]", "--iface IF[,IF...]", "[--watch [SECONDS]]" */
static void synopsis_word(const struct sl_opt *o, char *buf, size_t len)
{
	const char *open = o->required ? "" : "[", *close = o->required ? "" : "]";

	if (!takes_value(o) && o->short_name)
		snprintf(buf, len, "%s-%c%s", open, o->short_name, close);
	else if (!takes_value(o))
		snprintf(buf, len, "%s--%s%s", open, o->name, close);
	else if (o->optional_value)
		snprintf(buf, len, "%s--%s [%s]%s", open, o->name, o->metavar,
			 close);
	else
		snprintf(buf, len, "%s--%s %s%s", open, o->name, o->metavar,
			 close);
}

/* Words of the synopsis, wrapped under the first one after the name. */
static void put_word(FILE *f, const char *w, size_t *col, size_t indent)
{
	if (*col + 1 + strlen(w) > USAGE_COLS && *col > indent) {
		fprintf(f, "\n%*s", (int)indent, "");
		*col = indent;
	} else {
		fputc(' ', f);
		(*col)++;
	}
	fputs(w, f);
	*col += strlen(w);
}

static void print_synopsis(FILE *f, const char *lead, const struct sl_cmd *cmd)
{
	size_t col = strlen(lead) + strlen(PROGRAM) + 1 + strlen(cmd->name);
	size_t indent = col + 1;
	char w[128];

	fprintf(f, "%s%s %s", lead, PROGRAM, cmd->name);
	for (int pass = 0; pass < 3; pass++) {
		/* required options, the arguments, the optional options */
		if (pass == 1) {
			if (cmd->args)
				put_word(f, cmd->args, &col, indent);
			continue;
		}
		for (int i = 0; i < n_opts(cmd); i++) {
			const struct sl_opt *o = &cmd->opts[i];

			if (o->hidden || o->required != (pass == 0))
				continue;
			synopsis_word(o, w, sizeof(w));
			put_word(f, w, &col, indent);
		}
	}
	fputc('\n', f);
}

/* The summary, each line indented. */
static void print_indented(FILE *f, int indent, const char *text)
{
	while (text && *text) {
		size_t n = strcspn(text, "\n");

		fprintf(f, "%*s%.*s\n", indent, "", (int)n, text);
		text += n + (text[n] == '\n');
	}
}

/* "usage: sluice SYNOPSIS" and the summary; with options, every option
 * and its help. */
static void usage(FILE *f, const struct sl_cmd *cmd, bool options)
{
	print_synopsis(f, "usage: ", cmd);
	print_indented(f, 2, cmd->summary);
	if (!options || !n_opts(cmd))
		return;
	fprintf(f, "\noptions:\n");
	for (int i = 0; i < n_opts(cmd); i++) {
		const struct sl_opt *o = &cmd->opts[i];
		char w[128];
		int n;

		if (o->hidden)
			continue;
		n = snprintf(w, sizeof(w), "%s%c%s--%s%s%s%s%s",
			     o->short_name ? "-" : " ",
			     o->short_name ? o->short_name : ' ',
			     o->short_name ? ", " : "  ", o->name,
			     takes_value(o) ? " " : "",
			     o->optional_value ? "[" : "",
			     takes_value(o) ? o->metavar : "",
			     o->optional_value ? "]" : "");
		/* a long option word puts its help on the next line */
		if (n < 26)
			fprintf(f, "  %s%*s%s\n", w, 26 - n, "", o->help ?: "");
		else
			fprintf(f, "  %s\n%28s%s\n", w, "", o->help ?: "");
	}
}

/* The commands whose name starts with word and has a second word. */
static bool in_group(const struct sl_cmd *cmd, const char *word)
{
	size_t n = strlen(word);

	return !strncmp(cmd->name, word, n) && cmd->name[n] == ' ';
}

static void print_group(FILE *f, const struct sl_cmd *const *cmds,
			const char *word)
{
	fprintf(f, "usage:\n");
	for (; *cmds; cmds++)
		if (in_group(*cmds, word))
			print_synopsis(f, "  ", *cmds);
}

/* "add, del, replace or list" */
static void group_subs(const struct sl_cmd *const *cmds, const char *word,
		       char *buf, size_t len)
{
	size_t n = 0, k = 0, total = 0;

	for (const struct sl_cmd *const *c = cmds; *c; c++)
		total += in_group(*c, word);
	buf[0] = '\0';
	for (; *cmds; cmds++) {
		if (!in_group(*cmds, word))
			continue;
		k++;
		n += snprintf(buf + n, n < len ? len - n : 0, "%s%s",
			      k == 1 ? "" : k == total ? " or " : ", ",
			      (*cmds)->name + strlen(word) + 1);
	}
}

static void print_commands(FILE *f, const struct sl_cmd *const *cmds)
{
	fprintf(f, "usage: " PROGRAM " COMMAND [OPTIONS]\n\ncommands:\n");
	for (; *cmds; cmds++) {
		print_synopsis(f, "  ", *cmds);
		print_indented(f, 6, (*cmds)->summary);
	}
	fprintf(f, "\n`" PROGRAM " help COMMAND` shows its options; "
		   "docs/cli.md has the details.\n");
}

static int vusage_error(const struct sl_cmd *cmd, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	pr_err("%s: %s", cmd->name, msg);
	usage(stderr, cmd, false);
	return SL_EXIT_USAGE;
}

int sl_params_error(const struct sl_cmd *cmd, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vusage_error(cmd, fmt, ap);
	va_end(ap);
	return ret;
}

/* ---- parsing ---- */

/* The option named word (its long name exactly: a prefix of another
 * verb's option is only a typo here) or short_name among every command's,
 * for "does not apply here". */
static const struct sl_opt *find_anywhere(const struct sl_cmd *const *cmds,
					  const char *word, char short_name)
{
	size_t len = strcspn(word, "=");

	for (; *cmds; cmds++) {
		for (int i = 0; i < n_opts(*cmds); i++) {
			const struct sl_opt *o = &(*cmds)->opts[i];

			if (short_name ? o->short_name == short_name
				       : !strncmp(o->name, word, len) &&
						 strlen(o->name) == len)
				return o;
		}
	}
	return NULL;
}

/* The option of cmd closest to word (without "--"), for "did you mean";
 * NULL when none is near. */
static const char *closest_opt(const struct sl_cmd *cmd, const char *word)
{
	char w[SL_EDIT_MAX + 1];
	unsigned int best = 3;
	const char *name = NULL;

	snprintf(w, sizeof(w), "%.*s", (int)strcspn(word, "="), word);
	for (int i = 0; i < n_opts(cmd); i++) {
		unsigned int d = sl_edit_distance(w, cmd->opts[i].name);

		if (!cmd->opts[i].hidden && d < best) {
			best = d;
			name = cmd->opts[i].name;
		}
	}
	return name;
}

static const char *type_what(const struct sl_opt *o, char *buf, size_t len)
{
	if (o->what)
		return o->what;
	switch (o->type) {
	case SL_OPT_U32:
	case SL_OPT_U64:
		snprintf(buf, len, "an integer from %llu to %llu",
			 (unsigned long long)o->min,
			 (unsigned long long)o->max);
		break;
	case SL_OPT_SECONDS:
		snprintf(buf, len, "a number of seconds from %g to %g", o->fmin,
			 o->fmax);
		break;
	case SL_OPT_CHOICE: {
		size_t n = snprintf(buf, len, "one of");

		for (int i = 0; o->choices[i] && n < len; i++)
			n += snprintf(buf + n, len - n, "%s %s",
				      i ? "," : "", o->choices[i]);
		break;
	}
	default:
		snprintf(buf, len, "a value");
	}
	return buf;
}

static int set_value(const struct sl_cmd *cmd, const struct sl_opt *o,
		     const char *arg, void *opts)
{
	void *v = field_of(opts, o->field);
	char what[160], why[256];
	int err = 0;

	switch (o->type) {
	case SL_OPT_FLAG:
		*(bool *)v = true;
		break;
	case SL_OPT_STRING:
		if (!*arg)
			return sl_params_error(cmd, "--%s: empty value",
					       o->name);
		*(const char **)v = arg;
		break;
	case SL_OPT_U32:
		err = sl_parse_u32(arg, o->min, o->max, v);
		break;
	case SL_OPT_U64:
		err = sl_parse_u64(arg, o->min, o->max, v);
		break;
	case SL_OPT_SECONDS:
		err = sl_parse_double(arg, o->fmin, o->fmax, v);
		break;
	case SL_OPT_CHOICE:
		err = -EINVAL;
		for (int i = 0; o->choices[i]; i++)
			if (!strcmp(o->choices[i], arg)) {
				*(int *)v = i;
				err = 0;
			}
		break;
	case SL_OPT_IFACES: {
		struct sl_ifaces *l = v;

		if (sl_parse_ifaces(arg, l->name, SL_MAX_IFACES, &l->n, why,
				    sizeof(why)))
			return sl_params_error(cmd, "--%s: %s", o->name, why);
		break;
	}
	}
	if (err)
		return sl_params_error(cmd, "--%s: '%s' is not %s", o->name,
				       arg, type_what(o, what, sizeof(what)));
	if (o->given)
		*(bool *)field_of(opts, o->given) = true;
	return 0;
}

/* The word after an option whose value is optional is its value unless
 * it is an option itself (a negative number is not: it is a bad value). */
static bool value_follows(const char *s)
{
	return s && (s[0] != '-' || (s[1] >= '0' && s[1] <= '9') ||
		     s[1] == '.');
}

/* "--name=value" given to an option that takes none (getopt's '?'). */
static bool value_given(const char *word, const struct sl_opt *o)
{
	size_t len = strcspn(word, "=");

	return o && !strncmp(word, "--", 2) && word[len] &&
	       !strncmp(o->name, word + 2, len - 2);
}

static int bad_option(const struct sl_cmd *cmd, const struct sl_cmd *const *all,
		      const char *word, const struct sl_opt *mine)
{
	const struct sl_opt *other;

	if (mine && value_given(word, mine))
		return sl_params_error(cmd, "option '--%s' takes no value",
				       mine->name);
	/* getopt steps over an unknown long option; a short one is in
	 * optopt */
	if (!optopt && !strncmp(word, "--", 2)) {
		const char *near = closest_opt(cmd, word + 2);

		other = find_anywhere(all, word + 2, 0);
		if (other)
			return sl_params_error(cmd, "option '--%s' does not "
						    "apply here", other->name);
		if (near)
			return sl_params_error(cmd, "unknown or ambiguous "
						    "option '%s' (did you mean "
						    "'--%s'?)", word, near);
		return sl_params_error(cmd, "unknown or ambiguous option '%s'",
				       word);
	}
	other = find_anywhere(all, "", optopt);
	if (other)
		return sl_params_error(cmd, "option '--%s' does not apply here",
				       other->name);
	return sl_params_error(cmd, "unknown option '-%c'", optopt);
}

/* Parse into opts; 1 when --help was asked for, SL_EXIT_USAGE on error. */
static int parse(const struct sl_cmd *cmd, const struct sl_cmd *const *all,
		 int argc, char **argv, void *opts)
{
	struct option longopts[MAX_OPTS + 2] = { 0 };
	char shorts[2 * MAX_OPTS + 4] = ":h", *sp = shorts + 2;
	int n = n_opts(cmd), c, err;
	bool seen[MAX_OPTS] = { 0 };

	for (int i = 0; i < n && i < MAX_OPTS; i++) {
		const struct sl_opt *o = &cmd->opts[i];

		longopts[i] = (struct option){
			.name = o->name,
			.has_arg = !takes_value(o)	? no_argument
				   : o->optional_value ? optional_argument
						       : required_argument,
			.val = o->short_name ? o->short_name : LONG_VAL + i,
		};
		if (o->short_name) {
			*sp++ = o->short_name;
			if (takes_value(o))
				*sp++ = ':';
		}
	}
	longopts[n] = (struct option){ "help", no_argument, NULL, 'h' };
	optind = 0; /* glibc: a full reset, the table may run again */
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
		const char *word = argv[optind - 1], *arg = optarg;
		const struct sl_opt *o = NULL;
		int i;

		if (c == 'h')
			return 1;
		if (c == '?' || c == ':') {
			for (i = 0; i < n; i++)
				if (longopts[i].val == optopt)
					o = &cmd->opts[i];
			if (c == ':')
				return sl_params_error(cmd, "option '%s' needs "
							    "a value", word);
			return bad_option(cmd, all, word, o);
		}
		for (i = 0; i < n && longopts[i].val != c; i++)
			;
		o = &cmd->opts[i];
		seen[i] = true;
		if (o->optional_value && !arg && optind < argc &&
		    value_follows(argv[optind]))
			arg = argv[optind++];
		if (o->optional_value && !arg) {
			if (o->given)
				*(bool *)field_of(opts, o->given) = true;
			continue;
		}
		err = set_value(cmd, o, arg, opts);
		if (err)
			return err;
	}
	for (int i = 0; i < n; i++)
		if (cmd->opts[i].required && !seen[i])
			return sl_params_error(cmd, "missing --%s %s%s%s",
					       cmd->opts[i].name,
					       cmd->opts[i].metavar,
					       cmd->opts[i].help ? ": " : "",
					       cmd->opts[i].help ?: "");
	argc -= optind;
	if (argc < cmd->min_args)
		return sl_params_error(cmd, "missing %s", cmd->missing);
	if (cmd->max_args >= 0 && argc > cmd->max_args)
		return sl_params_error(cmd, "unexpected argument '%s'",
				       argv[optind + cmd->max_args]);
	return 0;
}

static int run(const struct sl_cmd *cmd, const struct sl_cmd *const *all,
	       int argc, char **argv)
{
	void *opts = calloc(1, cmd->opts_size ? cmd->opts_size : 1);
	int ret;

	if (!opts) {
		pr_err("%s: out of memory", cmd->name);
		return 1;
	}
	if (cmd->defaults)
		cmd->defaults(opts);
	ret = parse(cmd, all, argc, argv, opts);
	if (ret == 1) {
		usage(stdout, cmd, true);
		ret = 0;
	} else if (!ret) {
		ret = cmd->run(cmd, opts, argc - optind, argv + optind);
	}
	free(opts);
	return ret;
}

static const struct sl_cmd *find(const struct sl_cmd *const *cmds,
				 const char *name)
{
	for (; *cmds; cmds++)
		if (!strcmp((*cmds)->name, name))
			return *cmds;
	return NULL;
}

static bool is_group(const struct sl_cmd *const *cmds, const char *word)
{
	for (; *cmds; cmds++)
		if (in_group(*cmds, word))
			return true;
	return false;
}

/* The command (or group) closest to word; NULL when none is near. */
static const char *closest_cmd(const struct sl_cmd *const *cmds,
			       const char *word)
{
	static char best_name[64];
	unsigned int best = 3;
	const char *found = NULL;

	for (; *cmds; cmds++) {
		char first[64];
		unsigned int d;

		snprintf(first, sizeof(first), "%.*s",
			 (int)strcspn((*cmds)->name, " "), (*cmds)->name);
		d = sl_edit_distance(word, first);
		if (d < best) {
			best = d;
			snprintf(best_name, sizeof(best_name), "%s", first);
			found = best_name;
		}
	}
	return found;
}

static bool is_help(const char *s)
{
	return !strcmp(s, "-h") || !strcmp(s, "--help");
}

/* `help`, `help COMMAND`, `help GROUP`, `help GROUP SUB` */
static int help(const struct sl_cmd *const *cmds, int argc, char **argv)
{
	char name[64];

	if (argc == 1) {
		print_commands(stdout, cmds);
		return 0;
	}
	snprintf(name, sizeof(name), "%s%s%s", argv[1], argc > 2 ? " " : "",
		 argc > 2 ? argv[2] : "");
	if (argc <= 3 && find(cmds, name)) {
		usage(stdout, find(cmds, name), true);
		return 0;
	}
	if (argc == 2 && is_group(cmds, argv[1])) {
		print_group(stdout, cmds, argv[1]);
		return 0;
	}
	pr_err("help: no command '%s'", name);
	print_commands(stderr, cmds);
	return SL_EXIT_USAGE;
}

int sl_params_main(const struct sl_cmd *const *cmds, int argc, char **argv)
{
	const struct sl_cmd *cmd;
	char name[64], subs[128];

	if (argc < 1) {
		print_commands(stderr, cmds);
		return SL_EXIT_USAGE;
	}
	if (!strcmp(argv[0], "help") || is_help(argv[0]))
		return help(cmds, strcmp(argv[0], "help") ? 1 : argc, argv);
	cmd = find(cmds, argv[0]);
	if (cmd)
		return run(cmd, cmds, argc, argv);
	if (!is_group(cmds, argv[0])) {
		const char *near = closest_cmd(cmds, argv[0]);

		/* one line, not the whole list: `help` is there for that */
		pr_err("unknown command '%s'%s%s%s; `" PROGRAM " help` lists "
		       "the commands", argv[0], near ? " (did you mean '" : "",
		       near ? near : "", near ? "'?)" : "");
		return SL_EXIT_USAGE;
	}
	group_subs(cmds, argv[0], subs, sizeof(subs));
	if (argc >= 2 && is_help(argv[1])) {
		print_group(stdout, cmds, argv[0]);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		pr_err("%s: %s (%s)%s", argv[0],
		       argc < 2 ? "missing subcommand" : "the subcommand",
		       subs, argc < 2 ? "" : " comes before the options");
		print_group(stderr, cmds, argv[0]);
		return SL_EXIT_USAGE;
	}
	snprintf(name, sizeof(name), "%s %s", argv[0], argv[1]);
	cmd = find(cmds, name);
	if (!cmd) {
		pr_err("%s: unknown subcommand '%s' (%s)", argv[0], argv[1],
		       subs);
		print_group(stderr, cmds, argv[0]);
		return SL_EXIT_USAGE;
	}
	return run(cmd, cmds, argc - 1, argv + 1);
}
