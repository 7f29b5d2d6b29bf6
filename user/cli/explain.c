// SPDX-License-Identifier: GPL-2.0
/* `sluice explain`: which rule judges a packet, and what it would do now. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"

/* "name (mode, action)" or "name (mode, grade count)" */
static const char *rule_desc(const cJSON *r, char *buf, size_t len)
{
	char a[32];

	if (!cli_is_limit(r))
		snprintf(buf, len, "%s (%s, %s)", cli_get_str(r, "rule", "?"),
			 cli_get_str(r, "mode", "?"),
			 cli_get_str(r, "action", "?"));
	else
		snprintf(buf, len, "%s (%s, %s %s)",
			 cli_get_str(r, "rule", "?"),
			 cli_get_str(r, "mode", "?"),
			 cli_get_str(r, "grade", "?"),
			 cli_cell(cli_get(r, "count"), a, sizeof(a)));
	return buf;
}

static void print_explain(const cJSON *resp)
{
	const char *outcome = cli_get_str(resp, "outcome", "?");
	const char *rule = cli_get_str(resp, "rule", NULL);
	const cJSON *layer;
	char a[32], b[32], c[32], d[32], desc[160];

	if (rule)
		printf("rule:    %s\n", rule_desc(resp, desc, sizeof(desc)));
	else if (cli_get(resp, "reason"))
		printf("rule:    none: %s (%s)\n", outcome,
		       cli_get_str(resp, "reason", "?"));
	else
		printf("rule:    none\n");
	/* a chain: every layer's rule, in the order they judge */
	cJSON_ArrayForEach(layer, cli_get(resp, "layers"))
		printf("layer %s: %s: %s: %s\n",
		       cli_cell(cli_get(layer, "layer"), a, sizeof(a)),
		       rule_desc(layer, desc, sizeof(desc)),
		       cli_get_str(layer, "verdict", "?"),
		       cli_get_str(layer, "why", "?"));
	printf("verdict: %s: %s\n", cli_get_str(resp, "verdict", "?"),
	       cli_get_str(resp, "why", "?"));
	if (!rule || !cli_is_limit(resp))
		return;
	if (!strcmp(cli_get_str(resp, "grade", ""), "conns")) {
		printf("conns:   %s of %s open%s\n",
		       cli_cell(cli_get(resp, "used"), a, sizeof(a)),
		       cli_cell(cli_get(resp, "window"), b, sizeof(b)),
		       cli_get(resp, "source") ? " from its source" : "");
		return;
	}
	printf("budget:  %s of %s used in the window, pacing credit %s, "
	       "this packet costs %s",
	       cli_cell(cli_get(resp, "used"), a, sizeof(a)),
	       cli_cell(cli_get(resp, "window"), b, sizeof(b)),
	       cli_cell(cli_get(resp, "credit"), c, sizeof(c)),
	       cli_cell(cli_get(resp, "cost"), d, sizeof(d)));
	if (cli_get(resp, "cached"))
		printf("; %s cached on CPUs",
		       cli_cell(cli_get(resp, "cached"), a, sizeof(a)));
	if (cli_get(resp, "source"))
		printf("; its source is %s", cli_get_str(resp, "source", "?"));
	printf("\n");
}

static int run_explain(const struct sl_cmd *cmd, void *opts, int argc,
		       char **argv)
{
	struct cli *c = opts;
	cJSON *req;
	bool ok;

	if (cli_start(c, cmd, argc, argv))
		return SL_CLI_USAGE;
	req = cli_request("explain");
	ok = req && cJSON_AddStringToObject(req, "proto", c->args[0]) &&
	     cJSON_AddStringToObject(req, "src", c->args[1]) &&
	     cJSON_AddStringToObject(req, "dst", c->args[2]) &&
	     (!c->has_sport ||
	      cJSON_AddNumberToObject(req, "sport", c->sport)) &&
	     (!c->has_dport ||
	      cJSON_AddNumberToObject(req, "dport", c->dport)) &&
	     (!c->has_vlan || cJSON_AddNumberToObject(req, "vlan", c->vlan)) &&
	     (!c->has_size || cJSON_AddNumberToObject(req, "size", c->size)) &&
	     cJSON_AddBoolToObject(req, "syn", c->syn);
	if (!ok) {
		cJSON_Delete(req);
		req = NULL;
	}
	return cli_run(c, req, print_explain);
}

#define PORT_OPT(opt, member, what)                                          \
	{ .name = opt, .type = SL_OPT_U32,                                   \
	  .field = SL_FIELD(struct cli, member),                             \
	  .given = SL_FIELD(struct cli, has_##member), .metavar = "PORT",    \
	  .max = 65535, .help = what }

static const struct sl_opt explain_opts[] = {
	PORT_OPT("dport", dport, "destination port (tcp and udp: required)"),
	PORT_OPT("sport", sport, "source port (40000)"),
	{ .name = "syn", .type = SL_OPT_FLAG, .field = SL_FIELD(struct cli, syn),
	  .help = "tcp: a SYN, as a new connection sends (else an ACK)" },
	{ .name = "vlan", .type = SL_OPT_U32, .field = SL_FIELD(struct cli, vlan),
	  .given = SL_FIELD(struct cli, has_vlan), .metavar = "VID",
	  .max = 4094, .help = "one 802.1Q tag with this VID (untagged)" },
	{ .name = "size", .type = SL_OPT_U32, .field = SL_FIELD(struct cli, size),
	  .given = SL_FIELD(struct cli, has_size), .metavar = "BYTES",
	  .max = 1514, .help = "frame length, what bps rules count (the "
			       "headers alone)" },
	CLI_OPT_JSON,
	CLI_OPT_STATE_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_explain = {
	.name = "explain",
	.args = "tcp|udp|icmp SRC DST",
	.min_args = 3,
	.max_args = 3,
	.missing = "the protocol and the source and destination addresses",
	.opts = explain_opts,
	CLI_VERB,
	.run = run_explain,
	.summary = "which rule judges such a packet, and whether it would "
		   "pass now: the data\nplane's own classification, nothing "
		   "charged",
};
