// SPDX-License-Identifier: GPL-2.0
/* `sluice drops`: who is being dropped, per rule, from sampled drops. */
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cli.h"

static void print_drops(const cJSON *resp)
{
	const cJSON *rules = cli_get(resp, "rules"), *r, *src;
	char a[32], b[32];

	if (!cJSON_GetArraySize(rules)) {
		printf("no drops sampled (rates decay with a %s s "
		       "half-life)\n",
		       cli_cell(cli_get(resp, "half_life_s"), a, sizeof(a)));
		return;
	}
	cJSON_ArrayForEach(r, rules) {
		struct table t = {
			.ncols = 3,
			.heads = (const char *const[]){ "source", "dropped/s",
							"share" },
			.right = 6,
		};

		printf("%s: %s dropped/s\n", cli_get_str(r, "name", "?"),
		       cli_rate_cell(cli_get_num(r, "dropped_per_s", 0), a,
				     sizeof(a)));
		cJSON_ArrayForEach(src, cli_get(r, "sources")) {
			table_add(&t, cli_get_str(src, "addr", "?"));
			table_add(&t, cli_rate_cell(cli_get_num(src,
								"dropped_per_s",
								0),
						    a, sizeof(a)));
			snprintf(b, sizeof(b), "%.0f%%",
				 100 * cli_get_num(src, "share", 0));
			table_add(&t, b);
		}
		table_done(&t);
	}
}

static int run_drops(const struct sl_cmd *cmd, void *opts, int argc,
		     char **argv)
{
	struct cli *c = opts;
	cJSON *req;

	if (cli_start(c, cmd, argc, argv))
		return SL_CLI_USAGE;
	req = cli_request("drops");
	if (req && ((c->n_args &&
		     !cJSON_AddStringToObject(req, "rule", c->args[0])) ||
		    !cJSON_AddNumberToObject(req, "top", c->top))) {
		cJSON_Delete(req);
		req = NULL;
	}
	return cli_run(c, req, print_drops);
}

static const struct sl_opt drops_opts[] = {
	{ .name = "top", .short_name = 'n', .type = SL_OPT_U32,
	  .field = SL_FIELD(struct cli, top), .metavar = "N", .min = 1,
	  .max = 32, .help = "sources per rule (10)" },
	CLI_OPT_JSON,
	CLI_OPT_STATE_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_drops = {
	.name = "drops",
	.args = "[RULE]",
	.min_args = 0,
	.max_args = 1,
	.opts = drops_opts,
	CLI_VERB,
	.run = run_drops,
	.summary = "the sources each rule drops most, most dropped first, "
		   "from sampled drops\n(rates decay with a 10 s half-life)",
};
