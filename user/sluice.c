// SPDX-License-Identifier: GPL-2.0
/* Every command of the sluice binary, in the order `sluice help` lists. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
#include "sluice.h"
#include "tokend.h"

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
	&sl_cmd_secrets_reload,
	&sl_cmd_down,
	&sl_cmd_tokend,
	&sl_cmd_check,
	&sl_cmd_push,
	NULL,
};

int sl_main(int argc, char **argv)
{
	if (argc == 1 && (!strcmp(argv[0], "--version") ||
			  !strcmp(argv[0], "version"))) {
		printf("sluice %s\n", sl_version);
		return 0;
	}
	return sl_params_main(sl_commands, argc, argv);
}
