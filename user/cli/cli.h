/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sluice CLI verbs that talk to the agent (`rule`, `status`, `stats`)
 * and `down`, which works on the pinned data plane without one.
 * docs/cli.md describes the verbs, their output and the exit codes.
 */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stdbool.h>

#define SL_CLI_DEF_STATE_DIR "/var/lib/sluice"
#define SL_CLI_DEF_PIN_DIR   "/sys/fs/bpf/sluice"

/* Exit codes of sl_cli_main(). */
enum sl_cli_exit {
	SL_CLI_OK = 0,		/* done (status --ready: the agent is ready) */
	SL_CLI_FAILED = 1,	/* refused or failed; the reason is on stderr */
	SL_CLI_USAGE = 2,	/* bad command line; the verb's usage follows */
	SL_CLI_UNREACHABLE = 3, /* no agent answered on the control socket */
};

/*
 * Run one verb: argv[0] is "rule", "status", "stats" or "down", the rest
 * its arguments (for "rule", argv[1] is add, del, replace or list).
 * Tables and JSON go to stdout, errors to stderr. Returns an sl_cli_exit
 * code. May be called more than once in a process (getopt is reset).
 */
int sl_cli_main(int argc, char **argv);

/* True when verb is one sl_cli_main() runs. */
bool sl_cli_is_verb(const char *verb);

#endif
