// SPDX-License-Identifier: GPL-2.0
/* `sluice status`: readiness, snapshot, interfaces, cluster flows. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "loader.h"
#include "log.h"
#include "rules_json.h"
#include "snapshot.h"

static void print_ifaces(const cJSON *ifs, const char *snap_rules)
{
	static const char *const heads[] = {
		"interface", "ifindex", "mode", "attached", "adopted", "rules",
	};
	struct table t = { .ncols = 6, .heads = heads, .right = 1u << 1 };
	const cJSON *i;
	char n[32];

	cJSON_ArrayForEach(i, ifs) {
		table_add(&t, cli_get_str(i, "name", "?"));
		table_add(&t, cli_cell(cli_get(i, "ifindex"), n, sizeof(n)));
		if (cli_get_bool(i, "multi_buffer"))
			table_addf(&t, "%s (multi-buffer)",
				   cli_get_str(i, "mode", "-"));
		else
			table_add(&t, cli_get_str(i, "mode", "-"));
		table_add(&t, cli_cell(cli_get(i, "attached"), n, sizeof(n)));
		table_add(&t, cli_cell(cli_get(i, "adopted"), n, sizeof(n)));
		table_addf(&t, "%s/%s",
			   cli_cell(cli_get(i, "rules_in_force"), n, sizeof(n)),
			   snap_rules);
	}
	table_done(&t);
}

/* One row per cluster flow, then sessions that are not syncing. */
static void print_cluster(const cJSON *cl)
{
	static const char *const heads[] = {
		"flow", "ns/id", "state", "since", "limit", "grant",
		"lease ms", "token server", "rtt us", "holders",
	};
	struct table t = { .ncols = 10, .heads = heads, .right = 0x3f0 };
	const cJSON *f, *s;
	char n[32];

	printf("\ncluster:   node %s\n", cli_get_str(cl, "node_id", "?"));
	cJSON_ArrayForEach(f, cli_get(cl, "flows")) {
		table_add(&t, cli_get_str(f, "name", "?"));
		table_addf(&t, "%s/%s", cli_get_str(f, "namespace", "?"),
			   cli_cell(cli_get(f, "flow_id"), n, sizeof(n)));
		table_add(&t, cli_get_str(f, "state", "?"));
		table_add(&t, cli_get_str(f, "since", "-"));
		table_add(&t, cli_cell(cli_get(f, "limit"), n, sizeof(n)));
		table_add(&t, cli_cell(cli_get(f, "grant"), n, sizeof(n)));
		table_add(&t, cli_cell(cli_get(f, "lease_expires_in_ms"), n,
				   sizeof(n)));
		table_add(&t, cli_get_str(f, "token_server", "-"));
		table_add(&t, cli_cell(cli_get(f, "last_sync_rtt_us"), n, sizeof(n)));
		table_add(&t, cli_cell(cli_get(f, "holders"), n, sizeof(n)));
	}
	table_done(&t);
	cJSON_ArrayForEach(s, cli_get(cl, "sessions"))
		if (*cli_get_str(s, "last_error", ""))
			printf("namespace %s: %s (%s)\n",
			       cli_get_str(s, "namespace", "?"),
			       cli_get_str(s, "state", "?"),
			       cli_get_str(s, "last_error", ""));
}

/* One line: where the rules come from and how that goes. */
static void print_source(const cJSON *cs)
{
	const cJSON *ref = cli_get(cs, "last_refused");
	char rev[32], dur[32];

	if (!cJSON_IsObject(cs))
		return;
	printf("source:    etcd %s, revision %s, %s",
	       cli_get_str(cs, "key", "?"),
	       cli_cell(cli_get(cs, "revision"), rev, sizeof(rev)),
	       cli_get_str(cs, "state", "?"));
	if (cJSON_IsString(cli_get(cs, "unreachable_since")))
		printf(" since %s (%s): %s",
		       cli_get_str(cs, "unreachable_since", "-"),
		       cli_dur_cell(cli_get_num(cs, "unreachable_for_s", -1),
				    dur, sizeof(dur)),
		       cli_get_str(cs, "last_error", "-"));
	if (cJSON_IsObject(ref))
		printf("; refused revision %s",
		       cli_cell(cli_get(ref, "revision"), rev, sizeof(rev)));
	putchar('\n');
}

/* A line per rule with a "system": its state and what it sees. */
static void print_system(const cJSON *arr)
{
	const cJSON *o;
	char a[32], b[32];

	cJSON_ArrayForEach(o, arr) {
		const cJSON *q = cli_get(o, "accept_queue");
		bool shed = !strcmp(cli_get_str(o, "state", ""), "shedding");

		printf("system %s: %s", cli_get_str(o, "name", "?"),
		       cli_get_str(o, "state", "?"));
		if (shed)
			printf(" (%s) since %s, threshold %s of %s",
			       cli_get_str(o, "signal", "?"),
			       cli_get_str(o, "since", "-"),
			       cli_cell(cli_get(o, "threshold"), a, sizeof(a)),
			       cli_cell(cli_get(o, "count"), b, sizeof(b)));
		if (shed && cli_get(o, "service_rate"))
			printf(", listeners take %s/s",
			       cli_cell(cli_get(o, "service_rate"), a,
					sizeof(a)));
		if (cJSON_IsNumber(q))
			printf(", accept queue %s of backlog %s",
			       cli_cell(q, a, sizeof(a)),
			       cli_cell(cli_get(o, "backlog"), b, sizeof(b)));
		else if (q)
			printf(", no listener");
		putchar('\n');
	}
}

static void print_status(const cJSON *resp)
{
	const cJSON *snap = cli_get(resp, "snapshot"), *ifs, *why;
	char a[32], b[32], snap_rules[32] = "-";

	if (cli_get_bool(resp, "ready")) {
		printf("ready\n");
	} else {
		printf("NOT READY\n");
		cJSON_ArrayForEach(why, cli_get(resp, "not_ready"))
			if (cJSON_IsString(why))
				printf("  - %s\n", why->valuestring);
	}
	printf("agent:     pid %s, up %s%s%s\n",
	       cli_cell(cli_get(resp, "pid"), a, sizeof(a)),
	       cli_dur_cell(cli_get_num(resp, "uptime_s", -1), b, sizeof(b)),
	       cli_get_bool(resp, "upgraded")
		       ? ", took over a running data plane of another layout"
	       : cli_get_bool(resp, "adopted") ? ", took over a running data plane"
					       : "",
	       cli_get_bool(resp, "allow_empty") ? ", --allow-empty" : "");
	if (cJSON_IsObject(snap) && !cli_get_num(snap, "version", 0)) {
		/* versions start at 1: nothing has been written yet */
		printf("snapshot:  none yet (%s)\n",
		       cli_get_str(snap, "path", "-"));
	} else if (cJSON_IsObject(snap)) {
		cli_cell(cli_get(snap, "rules"), snap_rules, sizeof(snap_rules));
		printf("snapshot:  version %s, %s rules, updated %s (%s ago)\n",
		       cli_cell(cli_get(snap, "version"), a, sizeof(a)), snap_rules,
		       cli_get_str(snap, "updated_at", "-"),
		       cli_dur_cell(cli_get_num(snap, "age_s", -1), b, sizeof(b)));
		printf("           %s%s\n", cli_get_str(snap, "path", "-"),
		       cli_get_bool(snap, "from_prev")
			       ? " (read from the .prev copy: the current "
				 "file was unusable)"
			       : "");
	} else {
		printf("snapshot:  none\n");
	}
	printf("in force:  %s rules, version %s (the snapshot holds %s)\n",
	       cli_cell(cli_get(resp, "rules_in_force"), a, sizeof(a)),
	       cli_cell(cli_get(resp, "in_force_version"), b, sizeof(b)), snap_rules);
	print_source(cli_get(resp, "config_source"));
	ifs = cli_get(resp, "interfaces");
	if (cJSON_GetArraySize(ifs)) {
		putchar('\n');
		print_ifaces(ifs, snap_rules);
	} else {
		printf("interfaces: none\n");
	}
	if (cJSON_GetArraySize(cli_get(resp, "breakers"))) {
		const cJSON *b;

		printf("breakers: ");
		cJSON_ArrayForEach(b, cli_get(resp, "breakers"))
			printf("%s %s%s", b->string,
			       cJSON_IsString(b) ? b->valuestring : "?",
			       b->next ? ", " : "\n");
	}
	print_system(cli_get(resp, "system"));
	if (cJSON_IsObject(cli_get(resp, "cluster")))
		print_cluster(cli_get(resp, "cluster"));
}

/* Whether the snapshot's rules are exactly the pinned ones (by name and
 * identity, or the text hash an earlier agent pinned): then the version
 * in force is the snapshot's. */
static bool snapshot_in_force(const struct sl_snapshot *snap,
			      const struct sl_pins_view *v)
{
	const struct sl_ruleset *rs = &snap->rules;
	uint64_t *h = calloc(rs->n + 1, sizeof(*h));
	bool same = h && rs->n == v->n_rules;

	if (same)
		sl_rule_def_hashes(rs, h);
	for (size_t i = 0; same && i < v->n_rules; i++) {
		size_t j = 0;

		while (j < rs->n && (strcmp(rs->rules[j].name,
					    v->rules[i].name) ||
				     !sl_rule_pinned_as(&rs->rules[j], h[j],
							v->rules[i].def_hash)))
			j++;
		same = j < rs->n;
	}
	free(h);
	return same;
}

/* The pinned data plane as JSON: interfaces, rules, the version. */
static cJSON *pinned_json(const struct cli *c, const struct sl_pins_view *v,
			  int err)
{
	cJSON *o = cJSON_CreateObject(), *ifs, *rules, *i;
	struct sl_snapshot snap = { 0 };
	char path[PATH_MAX], why[512];
	bool known;

	snprintf(path, sizeof(path), "%s/" SL_SNAPSHOT_FILE, c->state_dir);
	known = !err && !sl_snapshot_read(path, &snap, why, sizeof(why)) &&
		snapshot_in_force(&snap, v);
	cJSON_AddBoolToObject(o, "agent", false);
	cJSON_AddStringToObject(o, "pin_dir", c->pin_dir);
	ifs = cJSON_AddArrayToObject(o, "interfaces");
	for (int k = 0; k < v->n_ifaces; k++) {
		i = cJSON_CreateObject();
		cJSON_AddStringToObject(i, "name", v->ifaces[k].name);
		cJSON_AddNumberToObject(i, "ifindex", v->ifaces[k].ifindex);
		cJSON_AddBoolToObject(i, "attached", v->ifaces[k].ifindex > 0);
		cJSON_AddItemToArray(ifs, i);
	}
	if (err) {
		cJSON_AddNullToObject(o, "rules_in_force");
	} else {
		cJSON_AddNumberToObject(o, "rules_in_force", v->n_rules);
		rules = cJSON_AddArrayToObject(o, "rules");
		for (size_t k = 0; k < v->n_rules; k++)
			cJSON_AddItemToArray(rules, cJSON_CreateString(
							    v->rules[k].name));
	}
	if (known)
		cJSON_AddNumberToObject(o, "in_force_version", snap.version);
	else
		cJSON_AddNullToObject(o, "in_force_version");
	cJSON_AddStringToObject(o, "snapshot", path);
	sl_snapshot_free(&snap);
	return o;
}

static void print_pinned(const cJSON *o)
{
	const cJSON *i, *r;
	char n[32], ver[32];

	printf("NO AGENT: the data plane pinned under %s is enforcing\n",
	       cli_get_str(o, "pin_dir", "?"));
	printf("interfaces:");
	cJSON_ArrayForEach(i, cli_get(o, "interfaces"))
		printf(" %s%s", cli_get_str(i, "name", "?"),
		       cli_get_bool(i, "attached") ? "" : " (gone)");
	putchar('\n');
	if (!cJSON_IsNumber(cli_get(o, "rules_in_force"))) {
		printf("in force:  unknown (the pinned maps cannot be read)\n");
		return;
	}
	printf("in force:  %s rules, version %s\n",
	       cli_cell(cli_get(o, "rules_in_force"), n, sizeof(n)),
	       cJSON_IsNumber(cli_get(o, "in_force_version"))
		       ? cli_cell(cli_get(o, "in_force_version"), ver,
				  sizeof(ver))
		       : "unknown (not the snapshot's rules)");
	printf("rules:    ");
	cJSON_ArrayForEach(r, cli_get(o, "rules"))
		printf(" %s", r->valuestring);
	putchar('\n');
}

/*
 * No agent answered: what the pinned data plane enforces, from the pins.
 * SL_CLI_NO_AGENT_ENFORCING when a link is pinned, else unreachable.
 */
static int status_pinned(const struct cli *c)
{
	struct sl_pins_view v;
	int err = sl_pins_view(c->pin_dir, &v);
	cJSON *o = NULL;
	char *text;

	if (err != -ENOENT)
		o = pinned_json(c, &v, err);
	sl_pins_view_free(&v);
	if (err == -ENOENT) {
		pr_err("no data plane pinned under %s either", c->pin_dir);
		return SL_CLI_UNREACHABLE;
	}
	if (!o) {
		pr_err("status: out of memory");
		return SL_CLI_FAILED;
	}
	if (c->json && (text = cJSON_Print(o))) {
		puts(text);
		cJSON_free(text);
	} else if (!c->json) {
		print_pinned(o);
	}
	cJSON_Delete(o);
	fflush(stdout);
	return SL_CLI_NO_AGENT_ENFORCING;
}

static int status(const struct cli *c)
{
	cJSON *req = cli_request("status"), *resp;
	const cJSON *why;
	int err;

	if (!c->ready) {
		err = cli_run(c, req, print_status);
		return err == SL_CLI_UNREACHABLE ? status_pinned(c) : err;
	}
	if (!req) {
		pr_err("status: out of memory");
		return SL_CLI_FAILED;
	}
	/* a probe: silent when ready, the reasons on stderr when not */
	err = cli_call(c, req, &resp);
	cJSON_Delete(req);
	if (!err && !cli_get_bool(resp, "ready")) {
		err = -EREMOTEIO;
		pr_err("the agent is not ready");
		cJSON_ArrayForEach(why, cli_get(resp, "not_ready"))
			if (cJSON_IsString(why))
				fprintf(stderr, "  - %s\n", why->valuestring);
	}
	cJSON_Delete(resp);
	return cli_exit_code(err);
}


static int run_status(const struct sl_cmd *cmd, void *opts, int argc,
		      char **argv)
{
	struct cli *c = opts;

	return cli_start(c, cmd, argc, argv) ?: status(c);
}

static const struct sl_opt status_opts[] = {
	CLI_OPT_JSON,
	{ .name = "ready", .type = SL_OPT_FLAG,
	  .field = SL_FIELD(struct cli, ready),
	  .help = "print nothing, exit 0 only if the agent is ready" },
	CLI_OPT_STATE_DIR,
	CLI_OPT_PIN_DIR,
	{ 0 },
};

const struct sl_cmd sl_cmd_status = {
	.name = "status",
	.opts = status_opts,
	CLI_VERB,
	.run = run_status,
	.summary = "show the agent's state; with --ready print nothing and "
		   "exit 0\nonly if the agent is ready (1 if not, with the "
		   "reasons); without an agent,\nwhat the pinned data plane "
		   "enforces (exit 4)",
};
