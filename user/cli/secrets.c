// SPDX-License-Identifier: GPL-2.0
/* `sluice secrets reload`: the agent reads its --secrets file again. */
#include <stdio.h>

#include "cli.h"

static void print_reloaded(const cJSON *resp)
{
	printf("secrets reloaded: %.0f namespaces\n",
	       cli_get_num(resp, "namespaces", 0));
}

static int run_reload(const struct sl_cmd *cmd, void *opts, int argc,
		      char **argv)
{
	struct cli *c = opts;
	int err = cli_start(c, cmd, argc, argv);

	if (err)
		return err;
	return cli_run(c, cli_request("secrets.reload"), print_reloaded);
}

static const struct sl_opt reload_opts[] = {
	CLI_OPT_JSON,
	CLI_OPT_STATE_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_secrets_reload = {
	.name = "secrets reload",
	.opts = reload_opts,
	.run = run_reload,
	CLI_VERB,
	.summary = "make the agent read its --secrets file again (a "
		   "rotation); a file\nthat does not load changes nothing",
};
