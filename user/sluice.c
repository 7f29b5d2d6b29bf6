// SPDX-License-Identifier: GPL-2.0
/* Every command of the sluice binary, in the order `sluice help` lists. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
#include "completion.h"
#include "sluice.h"
#include "tokend.h"

static int run_version(const struct sl_cmd *cmd, void *opts, int argc,
		       char **argv)
{
	printf("sluice %s\n", sl_version);
	return 0;
}

static const struct sl_cmd sl_cmd_version = {
	.name = "version",
	.run = run_version,
	.summary = "print the build's version (`git describe` of its tree); "
		   "also --version",
};

static int run_completion(const struct sl_cmd *cmd, void *opts, int argc,
			  char **argv)
{
	if (sl_completion_print(sl_commands, argv[0], stdout))
		return sl_params_error(cmd, "'%s' is not bash or zsh",
				       argv[0]);
	return 0;
}

static const struct sl_cmd sl_cmd_completion = {
	.name = "completion",
	.args = "bash|zsh",
	.min_args = 1,
	.max_args = 1,
	.missing = "the shell: bash or zsh",
	.run = run_completion,
	.summary = "print the shell's completion script, made from this "
		   "command table\n(`make install` installs both; "
		   "docs/cli.md)",
};

const struct sl_cmd *const sl_commands[] = {
	&sl_cmd_agent,
	&sl_cmd_rule_add,
	&sl_cmd_rule_del,
	&sl_cmd_rule_replace,
	&sl_cmd_rule_list,
	&sl_cmd_rule_save,
	&sl_cmd_status,
	&sl_cmd_stats,
	&sl_cmd_top,
	&sl_cmd_explain,
	&sl_cmd_drops,
	&sl_cmd_secrets_reload,
	&sl_cmd_down,
	&sl_cmd_tokend,
	&sl_cmd_check,
	&sl_cmd_push,
	&sl_cmd_version,
	&sl_cmd_completion,
	NULL,
};

int sl_main(int argc, char **argv)
{
	static char *version[] = { "version", NULL };

	if (argc == 1 && !strcmp(argv[0], "--version"))
		return sl_params_main(sl_commands, 1, version);
	return sl_params_main(sl_commands, argc, argv);
}
