/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One table of commands and their options, from which the command line is
 * parsed and the usage and help are printed, so the three cannot drift
 * apart (after xdp-tools' lib/util/params.c). Each program declares its
 * commands (struct sl_cmd); user/sluice.c lists them all.
 */
#ifndef SLUICE_PARAMS_H
#define SLUICE_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* Exit status of a command line that could not be parsed. */
#define SL_EXIT_USAGE 2

enum sl_opt_type {
	SL_OPT_FLAG,	/* bool */
	SL_OPT_STRING,	/* const char *, not empty */
	SL_OPT_U32,	/* uint32_t in [min, max] */
	SL_OPT_U64,	/* uint64_t in [min, max] */
	SL_OPT_SECONDS, /* double in [fmin, fmax] */
	SL_OPT_CHOICE,	/* int: the index of the value in choices */
	SL_OPT_IFACES,	/* struct sl_ifaces: IF[,IF...] */
};

struct sl_ifaces {
	char name[SL_MAX_IFACES][IF_NAMESIZE];
	int n;
};

struct sl_opt {
	const char *name; /* long name, without "--" */
	char short_name;  /* 0: none */
	enum sl_opt_type type;
	size_t field;	  /* SL_FIELD(): where the value goes */
	size_t given;	  /* SL_FIELD() of a bool set when given; 0: none */
	const char *metavar;
	const char *help;
	bool required;
	bool optional_value; /* --watch [SECONDS]: the next word if it fits */
	bool hidden;	     /* accepted, not shown: kept for old scripts */
	uint64_t min, max;   /* U32, U64 */
	double fmin, fmax;   /* SECONDS */
	const char *const *choices; /* CHOICE, NULL-terminated */
	const char *what;    /* "is not WHAT" in errors; NULL: from the type */
};

/* The offset of a member of a command's options, 0 meaning "none". */
#define SL_FIELD(type, member) (offsetof(type, member) + 1)

struct sl_cmd {
	const char *name;    /* as typed: "status", "rule add" */
	const char *args;    /* positional arguments in the synopsis */
	int min_args, max_args; /* max -1: any number */
	const char *missing; /* what a missing argument is, for the error */
	const struct sl_opt *opts; /* ends with an entry without a name */
	size_t opts_size;    /* the options struct the fields are in */
	void (*defaults)(void *opts);
	/* runs with the parsed options and the positional arguments;
	 * returns the exit status */
	int (*run)(const struct sl_cmd *cmd, void *opts, int argc,
		   char **argv);
	const char *summary; /* what it does, one line or a few */
};

/*
 * Run the command line (argv[0] is the first word after the program's
 * name): find the command in cmds (NULL-terminated), parse its options,
 * run it. `help [COMMAND]`, `--help` and `-h` print usage on stdout and
 * exit 0; a command line that cannot be parsed prints the problem and the
 * command's usage on stderr and exits SL_EXIT_USAGE.
 */
int sl_params_main(const struct sl_cmd *const *cmds, int argc, char **argv);

/* A problem found after parsing: "CMD: problem", the usage; returns
 * SL_EXIT_USAGE. */
int sl_params_error(const struct sl_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
