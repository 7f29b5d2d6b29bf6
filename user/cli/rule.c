// SPDX-License-Identifier: GPL-2.0
/* `sluice rule add|del|replace|list`. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "log.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "util.h"

#define ERRBUF 65536 /* parser errors: one line per problem */

void cli_print_diff(const cJSON *diff)
{
	static const char *const parts[] = { "added", "removed", "changed" };
	bool any = false;

	for (size_t p = 0; p < ARRAY_SIZE(parts); p++) {
		const cJSON *name;
		bool first = true;

		cJSON_ArrayForEach(name, cli_get(diff, parts[p])) {
			if (first)
				printf("%s%s ", any ? "; " : "", parts[p]);
			else
				printf(", ");
			printf("%s", cJSON_IsString(name) ? name->valuestring
							  : "?");
			first = false;
			any = true;
		}
	}
	printf("%s\n", any ? "" : "no rule changed");
}

static void print_change(const cJSON *resp)
{
	char v[32], n[32];

	cli_cell(cli_get(resp, "version"), v, sizeof(v));
	cli_cell(cli_get(resp, "rules_in_force"), n, sizeof(n));
	if (cli_get_bool(resp, "unchanged")) {
		printf("rules unchanged: version %s kept, %s in force\n", v, n);
	} else if (cli_get_bool(resp, "dry_run")) {
		printf("dry run, nothing changed (version %s): ", v);
		cli_print_diff(cli_get(resp, "diff"));
	} else {
		printf("rules at version %s: %s in force\n", v, n);
	}
}

/* The canonical rules of file ("-": stdin), validated like the agent
 * will; the errors are in err. */
static int load_rules(const char *file, char **rules, char *err,
		      size_t errlen)
{
	struct sl_ruleset rs = { 0 };
	char *arr;
	int ret = sl_rules_load_file(file, &rs, err, errlen);

	if (ret)
		return ret;
	arr = sl_rules_text(&rs);
	sl_ruleset_free(&rs);
	if (!arr) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*rules = arr;
	return 0;
}

/* rule.add, rule.del, rule.replace: the request, sent. */
static int change(struct cli *c, const char *cmd_name, bool names)
{
	cJSON *req = cli_request(cmd_name), *list = NULL;
	char *rules = NULL;
	int ret;

	if (!req)
		goto nomem;
	if (names) {
		list = cJSON_AddArrayToObject(req, "names");
		for (int i = 0; list && i < c->n_args; i++)
			if (!cJSON_AddItemToArray(
				    list, cJSON_CreateString(c->args[i])))
				list = NULL;
		if (!list)
			goto nomem;
	} else {
		const char *file = c->args[0];
		char *err = calloc(1, ERRBUF);

		if (!err)
			goto nomem;
		ret = load_rules(file, &rules, err, ERRBUF);
		if (ret == -EINVAL)
			pr_err("%s: invalid rule file, nothing sent to the "
			       "agent:\n%s",
			       strcmp(file, "-") ? file : "<stdin>", err);
		else if (ret)
			pr_err("%s", err);
		free(err);
		if (ret) {
			cJSON_Delete(req);
			return SL_CLI_FAILED;
		}
		/* the canonical text as it is: no tree to build and print */
		list = cJSON_AddRawToObject(req, "rules", rules);
		free(rules);
		if (!list)
			goto nomem;
	}
	if (c->has_if_version &&
	    !cJSON_AddNumberToObject(req, "if_version", (double)c->if_version))
		goto nomem;
	if (c->dry_run && !cJSON_AddTrueToObject(req, "dry_run"))
		goto nomem;
	return cli_run(c, req, print_change);
nomem:
	cJSON_Delete(req);
	pr_err("%s: out of memory", c->cmd->name);
	return SL_CLI_FAILED;
}

/* rule add, del and replace: the request is the verb's name, "rule.add" */
static int run_change(const struct sl_cmd *cmd, void *opts, int argc,
		      char **argv)
{
	struct cli *c = opts;
	char req[32];

	snprintf(req, sizeof(req), "rule.%s", cmd->name + strlen("rule "));
	return cli_start(c, cmd, argc, argv) ?:
		       change(c, req, cmd == &sl_cmd_rule_del);
}

static void list_row(struct table *t, const cJSON *r)
{
	const cJSON *m = cli_get(r, "match"), *w = cli_get(r, "window");
	const cJSON *ps = cli_get(r, "per_source"), *b = cli_get(r, "behavior");
	char buf[64], n1[32], n2[32], n3[32];

	table_add(t, cli_get_str(r, "name", "?"));
	table_add(t, cli_get_str(m, "proto", "any"));
	table_add(t, cli_get(m, "dport") ? cli_cell(cli_get(m, "dport"), n1, sizeof(n1))
				     : "any");
	table_add(t, cli_get(m, "vlan") ? cli_cell(cli_get(m, "vlan"), n1, sizeof(n1))
				     : "any");
	table_add(t, cli_get_str(m, "dst", "any"));
	table_add(t, cli_get_str(m, "src", "any"));
	/* an allow or deny rule has no grade, count or behavior */
	table_add(t, cli_is_limit(r) ? cli_get_str(r, "grade", "?")
				     : cli_get_str(r, "action", "?"));
	table_add(t, cli_cell(cli_get(r, "count"), n1, sizeof(n1)));
	table_addf(t, "%sms/%s", cli_cell(cli_get(w, "interval_ms"), n1, sizeof(n1)),
		   cli_cell(cli_get(w, "sample_count"), n2, sizeof(n2)));
	table_add(t, cli_get_str(r, "mode", "enforce"));
	table_add(t, cli_get(r, "layer") ? cli_cell(cli_get(r, "layer"), n1, sizeof(n1))
				      : "0");
	table_add(t, cli_cell(cli_get(r, "priority"), n1, sizeof(n1)));
	if (cJSON_IsObject(ps))
		table_addf(t, "/%s,/%s max %s",
			   cli_cell(cli_get(ps, "prefix_v4"), n1, sizeof(n1)),
			   cli_cell(cli_get(ps, "prefix_v6"), n2, sizeof(n2)),
			   cli_cell(cli_get(ps, "max_sources"), n3, sizeof(n3)));
	else
		table_add(t, "-");
	if (cJSON_IsObject(b)) {
		const cJSON *wu = cli_get(b, "warm_up");

		snprintf(buf, sizeof(buf), "warm_up %ss/%s",
			 cli_cell(cli_get(wu, "period_s"), n1, sizeof(n1)),
			 cli_cell(cli_get(wu, "cold_factor"), n2, sizeof(n2)));
		table_add(t, buf);
	} else {
		table_add(t, cli_get_str(r, "behavior",
					 cli_is_limit(r) ? "reject" : "-"));
	}
}

static void print_list(const cJSON *resp)
{
	static const char *const heads[] = {
		"name", "proto", "dport", "vlan", "dst", "src", "grade",
		"count", "window", "mode", "layer", "priority", "per_source",
		"behavior",
	};
	struct table t = {
		.ncols = 14, .heads = heads,
		.right = 1u << 7 | 1u << 10 | 1u << 11
	};
	const cJSON *rules = cli_get(resp, "rules"), *r;
	char v[32];

	printf("version %s, updated %s, %d rules\n",
	       cli_cell(cli_get(resp, "version"), v, sizeof(v)),
	       cli_get_str(resp, "updated_at", "-"), cJSON_GetArraySize(rules));
	if (!cJSON_GetArraySize(rules))
		return;
	cJSON_ArrayForEach(r, rules)
		if (cJSON_IsObject(r))
			list_row(&t, r);
	table_done(&t);
	cli_print_settings(rules);
}

static int run_list(const struct sl_cmd *cmd, void *opts, int argc,
		    char **argv)
{
	struct cli *c = opts;

	return cli_start(c, cmd, argc, argv) ?:
		       cli_run(c, cli_request("rule.list"), print_list);
}

/*
 * text to file, whole or not at all: a temporary file beside it, synced,
 * renamed over it. "-": stdout.
 */
static int write_whole(const char *file, const char *text)
{
	size_t len = strlen(text);
	char tmp[PATH_MAX];
	FILE *f;
	int ret = 0;

	if (!strcmp(file, "-"))
		return fwrite(text, 1, len, stdout) == len && !fflush(stdout)
			       ? 0 : -EIO;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", file) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	if (fwrite(text, 1, len, f) != len || fflush(f) || fsync(fileno(f)))
		ret = -errno ?: -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, file))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* rule save: the rules in force as a rule file, which `--rules`, `check`
 * and `rule replace` read back as they are. */
static int run_save(const struct sl_cmd *cmd, void *opts, int argc,
		    char **argv)
{
	struct cli *c = opts;
	struct sl_ruleset rs = { 0 };
	cJSON *req, *resp = NULL;
	char err[512], *text = NULL;
	int ret;

	ret = cli_start(c, cmd, argc, argv);
	if (ret)
		return ret;
	req = cli_request("rule.list");
	ret = req ? cli_call(c, req, &resp) : -ENOMEM;
	cJSON_Delete(req);
	if (ret) {
		cJSON_Delete(resp);
		return cli_exit_code(ret);
	}
	ret = sl_rules_from_array(cli_get(resp, "rules"), &rs, err,
				  sizeof(err));
	rs.allow_empty = cli_get_bool(resp, "allow_empty");
	cJSON_Delete(resp);
	if (ret) {
		pr_err("rule save: the agent's rules do not read back: %s",
		       err);
		return SL_CLI_FAILED;
	}
	text = sl_ruleset_to_json(&rs, true);
	ret = text ? write_whole(c->args[0], text) : -ENOMEM;
	if (ret)
		pr_err("rule save: %s: %s", c->args[0], strerror(-ret));
	else if (strcmp(c->args[0], "-"))
		printf("%zu rules saved to %s\n", rs.n, c->args[0]);
	free(text);
	sl_ruleset_free(&rs);
	return ret ? SL_CLI_FAILED : SL_CLI_OK;
}

#define OPT_IF_VERSION                                                       \
	{ .name = "if-version", .type = SL_OPT_U64,                         \
	  .field = SL_FIELD(struct cli, if_version),                        \
	  .given = SL_FIELD(struct cli, has_if_version), .metavar = "N",    \
	  .max = SL_CLI_MAX_VERSION,                                         \
	  .what = "a version number (an integer 0 to 9007199254740991)",    \
	  .help = "only if the rules are still at version N" }

static const struct sl_opt change_opts[] = {
	OPT_IF_VERSION,
	{ .name = "dry-run", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct cli, dry_run),
	  .help = "show what would change, change nothing" },
	CLI_OPT_JSON,
	CLI_OPT_STATE_DIR,
	{ 0 },
};

static const struct sl_opt list_opts[] = {
	CLI_OPT_JSON,
	CLI_OPT_STATE_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_rule_add = {
	.name = "rule add",
	.args = "FILE|-",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (a rule file, or - for stdin)",
	.opts = change_opts,
	.run = run_change,
	CLI_VERB,
	.summary = "add the rules in FILE (- reads stdin) to the rules in "
		   "force",
};

const struct sl_cmd sl_cmd_rule_del = {
	.name = "rule del",
	.args = "NAME [NAME...]",
	.min_args = 1,
	.max_args = -1,
	.missing = "NAME (the rule to delete)",
	.opts = change_opts,
	.run = run_change,
	CLI_VERB,
	.summary = "delete the named rules",
};

const struct sl_cmd sl_cmd_rule_replace = {
	.name = "rule replace",
	.args = "FILE|-",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (a rule file, or - for stdin)",
	.opts = change_opts,
	.run = run_change,
	CLI_VERB,
	.summary = "make the rules in FILE (- reads stdin) the whole rule set",
};

const struct sl_cmd sl_cmd_rule_save = {
	.name = "rule save",
	.args = "FILE|-",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (where to write, or - for stdout)",
	.opts = list_opts,
	.run = run_save,
	CLI_VERB,
	.summary = "write the rules in force as a rule file (- to stdout)",
};

const struct sl_cmd sl_cmd_rule_list = {
	.name = "rule list",
	.opts = list_opts,
	.run = run_list,
	CLI_VERB,
	.summary = "show the agent's rules",
};
