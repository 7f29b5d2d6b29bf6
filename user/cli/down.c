// SPDX-License-Identifier: GPL-2.0
/* `sluice down`: detach and unpin what an agent left, without an agent. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "loader.h"
#include "log.h"

static int run_down(const struct sl_cmd *cmd, void *opts, int argc,
		    char **argv)
{
	struct cli *c = opts;
	bool any = false, maps_removed = false, removed;
	int ret = SL_CLI_OK, err;

	for (int i = 0; i < c->ifaces.n; i++) {
		const char *name = c->ifaces.name[i];

		err = sl_pins_down(c->pin_dir, name, &removed);
		maps_removed |= removed;
		if (!err) {
			printf("%s: detached, link unpinned from %s\n", name,
			       c->pin_dir);
			any = true;
		} else if (err == -ENOENT && removed) {
			printf("%s: no link pinned under %s\n", name,
			       c->pin_dir);
		} else if (err == -ENOENT) {
			pr_err("%s: nothing pinned under %s", name,
			       c->pin_dir);
			ret = SL_CLI_FAILED;
		} else {
			pr_err("%s: cannot take down the data plane pinned "
			       "under %s: %s", name, c->pin_dir,
			       strerror(-err));
			ret = SL_CLI_FAILED;
		}
	}
	if (maps_removed && !any)
		printf("%s: held maps but no link (a start that failed): "
		       "removed\n", c->pin_dir);
	else if (maps_removed)
		printf("%s: no link left, pinned maps removed\n", c->pin_dir);
	else if (any)
		printf("%s: links of other interfaces left, pinned maps "
		       "kept\n", c->pin_dir);
	fflush(stdout);
	return ret;
}

static const struct sl_opt down_opts[] = {
	{ .name = "iface", .type = SL_OPT_IFACES,
	  .field = SL_FIELD(struct cli, ifaces), .metavar = "IF[,IF...]",
	  .required = true, .help = "the interfaces to take down" },
	CLI_OPT_PIN_DIR,
	/* accepted like every verb's, though down needs no agent */
	{ .name = "state-dir", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct cli, state_dir), .metavar = "DIR",
	  .hidden = true },
	{ 0 },
};

const struct sl_cmd sl_cmd_down = {
	.name = "down",
	.opts = down_opts,
	CLI_VERB,
	.run = run_down,
	.summary = "detach and unpin the data plane an agent left on each IF; "
		   "the\npinned maps go with the last link (needs no agent)",
};
