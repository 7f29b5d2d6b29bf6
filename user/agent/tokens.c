// SPDX-License-Identifier: GPL-2.0
/* `sluice agent`: its cluster side: the secrets, the cluster sync, the
 * embedded token server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_state.h"
#include "rules_json.h"
#include "rules_parse.h"

/*
 * SIGHUP or `sluice secrets reload`: read the secrets file again (a
 * rotation, docs/cluster.md). New sessions, and the embedded server's
 * new clients, use it; the sessions up stay. A file that does not load
 * changes nothing: -errno, the reason in a->err.
 */
int agent_reload_secrets(struct agent *a)
{
	struct sl_secrets *next;

	if (!a->secrets) {
		snprintf(a->err, sizeof(a->err),
			 "the agent runs without --secrets");
		return -ENOENT;
	}
	next = sl_secrets_load_new(a->secrets_file, a->err, sizeof(a->err));
	if (!next)
		return -EINVAL;
	if (a->cluster)
		sl_cluster_set_secrets(a->cluster, next);
	if (a->tokend)
		sl_tokend_set_secrets(a->tokend, next);
	sl_secrets_destroy(a->secrets);
	a->secrets = next;
	pr_info("secrets reloaded from %s: %zu namespaces", a->secrets_file,
		next->n);
	return 0;
}

static void *serve_tokens(void *arg)
{
	if (sl_tokend_run(arg))
		pr_err("the embedded token server stopped: epoll failed");
	return NULL;
}

/* --serve-tokens: the rules in force, served from a thread. */
int agent_start_tokend(struct agent *a)
{
	struct sl_tokend_cfg cfg;
	int err;

	err = sl_ruleset_copy(&a->snap.rules, 0, &a->served);
	if (err)
		return err;
	sl_tokend_cfg_default(&cfg);
	cfg.listen = a->serve_tokens;
	cfg.elected = a->election.name != NULL;
	err = sl_tokend_new(&cfg, &a->served, a->secrets, &a->tokend,
			    a->err, sizeof(a->err));
	if (err) {
		pr_err("--serve-tokens %s: %s", a->serve_tokens, a->err);
		return err;
	}
	err = pthread_create(&a->tokend_thread, NULL, serve_tokens,
			     a->tokend);
	if (err) {
		sl_tokend_free(a->tokend);
		a->tokend = NULL;
		return -err;
	}
	pr_info("serving tokens on %s (port %u)%s", a->serve_tokens,
		sl_tokend_port(a->tokend),
		a->election.name ? " once elected" : "");
	if (a->election.name &&
	    sl_election_start(a->tokend, &a->election, &a->el, a->err,
			      sizeof(a->err))) {
		pr_err("--election: %s", a->err);
		return -EINVAL;
	}
	return 0;
}

int agent_new_cluster(struct agent *a)
{
	struct sl_cluster_cfg cfg;
	int err;

	if (a->secrets_file) {
		a->secrets = sl_secrets_load_new(a->secrets_file, a->err,
						 sizeof(a->err));
		if (!a->secrets) {
			pr_err("--secrets %s", a->err);
			return -EINVAL;
		}
	}
	sl_cluster_cfg_default(&cfg);
	cfg.servers = a->token_servers;
	cfg.node_id = a->node_id;
	cfg.secrets = a->secrets;
	cfg.max_ttl_ms = a->max_ttl_ms;
	err = sl_cluster_new(&cfg, &a->dp, &a->dp_lock, &a->cluster, a->err,
			     sizeof(a->err));
	if (err)
		pr_err("cluster: %s", a->err);
	return err;
}
