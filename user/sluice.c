// SPDX-License-Identifier: GPL-2.0
/* Every command of the sluice binary, in the order `sluice help` lists. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
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
	&sl_cmd_secrets_reload,
	&sl_cmd_down,
	&sl_cmd_tokend,
	&sl_cmd_check,
	&sl_cmd_push,
	&sl_cmd_version,
	NULL,
};

int sl_main(int argc, char **argv)
{
	static char *version[] = { "version", NULL };

	if (argc == 1 && !strcmp(argv[0], "--version"))
		return sl_params_main(sl_commands, 1, version);
	return sl_params_main(sl_commands, argc, argv);
}
