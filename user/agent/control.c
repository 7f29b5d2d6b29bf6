// SPDX-License-Identifier: GPL-2.0
/* `sluice agent`: the control socket's requests, each to its handler. */
#include <string.h>

#include "agent_state.h"

static cJSON *do_reload_secrets(struct agent *a)
{
	cJSON *r;

	if (agent_reload_secrets(a))
		return sl_ctl_error("invalid", "secrets not reloaded, those "
					       "in use stay: %s", a->err);
	r = sl_ctl_ok();
	cJSON_AddNumberToObject(r, "namespaces", a->secrets->n);
	return r;
}

static cJSON *dispatch(struct agent *a, const struct sl_ctl_req *req)
{
	const char *cmd = req->cmd;

	if (!strcmp(cmd, "status"))
		return agent_do_status(a);
	if (!strcmp(cmd, "explain"))
		return agent_do_explain(a, req);
	if (!strcmp(cmd, "drops"))
		return agent_do_drops(a, req);
	if (a->etcd_key && !strncmp(cmd, "rule.", 5))
		return sl_ctl_error("managed",
				    "the rules of this agent come from etcd "
				    "key '%s' (--etcd-key): change them there, "
				    "with `sluice push FILE --etcd URL "
				    "--etcd-key %s`",
				    a->etcd_key, a->etcd_key);
	if (!strcmp(cmd, "rule.add"))
		return agent_do_change(a, CHANGE_ADD, req);
	if (!strcmp(cmd, "rule.del"))
		return agent_do_change(a, CHANGE_DEL, req);
	if (!strcmp(cmd, "rule.replace"))
		return agent_do_change(a, CHANGE_REPLACE, req);
	if (!strcmp(cmd, "secrets.reload"))
		return do_reload_secrets(a);
	return sl_ctl_error("invalid", "request: unknown cmd '%s'", cmd);
}

/* One request (ctl.h: the server hands them over one at a time, which
 * serialises changes); the answer as text. */
char *agent_handle_request(void *arg, const char *text, size_t len)
{
	struct agent *a = arg;
	struct sl_ctl_req req;
	char *answer;
	int err;

	err = sl_ctl_req_parse(text, len, &req, a->err, sizeof(a->err));
	if (err)
		return sl_ctl_answer_text(agent_request_error(a, err));
	if (!strcmp(req.cmd, "stats"))
		answer = agent_do_stats(a);
	else if (!strcmp(req.cmd, "rule.list"))
		answer = agent_do_list(a);
	else
		answer = sl_ctl_answer_text(dispatch(a, &req));
	sl_ctl_req_free(&req);
	return answer;
}
