// SPDX-License-Identifier: GPL-2.0
/*
 * `sluice push FILE --etcd URL --etcd-key KEY [--if-revision N]`: check
 * FILE as `sluice check` does and publish it as the value of KEY, which
 * agents started with --etcd-key KEY put in force (docs/fleet.md). It
 * talks to etcd, the config source, never to an agent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "compile.h"
#include "etcd.h"
#include "log.h"
#include "rules.h"
#include "rules_parse.h"
#include "ruleset.h"

#define ERRBUF 4096

struct push {
	const char *endpoints;
	struct sl_etcd_auth auth;
	const char *key;
	bool has_if_revision;
	uint64_t if_revision;
	bool dry_run;
};

/* --dry-run: what FILE would change of the key's rules; nothing sent. */
static int dry_run(struct push *p, struct sl_etcd *etcd, const char *file,
		   const struct sl_ruleset *rs)
{
	struct sl_ruleset cur = { 0 };
	struct sl_etcd_kv kv = { 0 };
	char err[ERRBUF];
	cJSON *diff;
	int ret;

	ret = sl_etcd_get(etcd, &kv, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "%s: cannot read %s: %s\n", file, p->key, err);
		return SL_CLI_FAILED;
	}
	/* no key yet, or a value agents refuse: everything is new */
	if (kv.exists &&
	    sl_rules_parse(kv.value, kv.len, &cur, err, sizeof(err)))
		fprintf(stderr, "%s: %s at revision %lld does not parse (%.200s)"
				": compared with no rules\n", file, p->key,
			(long long)kv.mod_revision, err);
	diff = sl_ruleset_diff_json(&cur, rs);
	if (diff) {
		printf("dry run, nothing published (%s at revision %lld): ",
		       p->key, (long long)kv.mod_revision);
		cli_print_diff(diff);
	} else {
		fprintf(stderr, "%s: out of memory\n", file);
	}
	cJSON_Delete(diff);
	sl_ruleset_free(&cur);
	sl_etcd_kv_free(&kv);
	return diff ? SL_CLI_OK : SL_CLI_FAILED;
}

static int run_push(const struct sl_cmd *cmd, void *opts, int argc,
		    char **argv)
{
	struct push *p = opts;
	const char *file = argv[0];
	struct sl_ruleset rs = { 0 };
	struct sl_compiled comp;
	struct sl_etcd etcd;
	char err[ERRBUF], *text;
	int64_t revision;
	size_t len;
	int ret;

	if (sl_etcd_init(&etcd, p->endpoints, &p->auth, p->key, err,
			 sizeof(err)))
		return sl_params_error(cmd, "%s", err);
	if (cli_check_rules(file, &text, &len, &rs, &comp)) {
		sl_etcd_free(&etcd);
		return SL_CLI_FAILED;
	}
	sl_compiled_free(&comp);
	/* every agent would refuse it: nothing is sent */
	if (!rs.n && !rs.allow_empty) {
		pr_err("%s: no rules; agents refuse an empty set unless the "
		       "document says \"allow_empty\": true; nothing sent",
		       file);
		ret = SL_CLI_FAILED;
		goto out;
	}
	if (p->dry_run) {
		ret = dry_run(p, &etcd, file, &rs);
		goto out;
	}
	ret = sl_etcd_put(&etcd, text, len, p->has_if_revision,
			  p->if_revision, &revision, err, sizeof(err));
	if (ret == -ECANCELED) {
		if (revision)
			pr_err("%s: not published: %s is at revision %lld, "
			       "not %llu", file, p->key, (long long)revision,
			       (unsigned long long)p->if_revision);
		else
			pr_err("%s: not published: %s does not exist, not at "
			       "revision %llu", file, p->key,
			       (unsigned long long)p->if_revision);
		ret = SL_CLI_FAILED;
	} else if (ret) {
		pr_err("%s: not published: %s", file, err);
		ret = SL_CLI_FAILED;
	} else {
		printf("%s: %zu rules published as %s at revision %lld\n",
		       file, rs.n, p->key, (long long)revision);
	}
out:
	free(text);
	sl_ruleset_free(&rs);
	sl_etcd_free(&etcd);
	return ret;
}

static const struct sl_opt push_opts[] = {
	{ .name = "etcd", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct push, endpoints), .metavar = "URL[,URL...]",
	  .required = true, .help = "etcd's client URLs" },
	{ .name = "etcd-key", .type = SL_OPT_STRING,
	  .field = SL_FIELD(struct push, key), .metavar = "KEY",
	  .required = true, .help = "the key the agents watch" },
	SL_ETCD_AUTH_OPTS(struct push, auth),
	{ .name = "if-revision", .type = SL_OPT_U64,
	  .field = SL_FIELD(struct push, if_revision),
	  .given = SL_FIELD(struct push, has_if_revision), .metavar = "N",
	  .max = INT64_MAX,
	  .help = "only if KEY is at revision N (0: only if it does not "
		  "exist)" },
	{ .name = "dry-run", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct push, dry_run),
	  .help = "show what would change of KEY's rules, publish nothing" },
	{ 0 },
};

const struct sl_cmd sl_cmd_push = {
	.name = "push",
	.args = "FILE",
	.min_args = 1,
	.max_args = 1,
	.missing = "FILE (a rule file)",
	.opts = push_opts,
	.opts_size = sizeof(struct push),
	.run = run_push,
	.summary = "check a rule file as `check` does and publish it to the "
		   "etcd key\nthat agents with --etcd-key take their rules "
		   "from",
};
