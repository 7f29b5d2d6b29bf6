// SPDX-License-Identifier: GPL-2.0
/* The CLI's side of the control socket: requests, answers, errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "ctl.h"
#include "json_text.h"
#include "log.h"

void cli_defaults(void *opts)
{
	struct cli *c = opts;

	c->state_dir = SL_CLI_DEF_STATE_DIR;
	c->pin_dir = SL_CLI_DEF_PIN_DIR;
	c->top = 10;
}

int cli_start(struct cli *c, const struct sl_cmd *cmd, int argc, char **argv)
{
	c->cmd = cmd;
	c->args = argv;
	c->n_args = argc;
	if (strlen(c->state_dir) + sizeof("/sluice.sock") > sizeof(c->sock))
		return sl_params_error(cmd,
				       "--state-dir: '%s' is too long for a "
				       "socket path (at most %zu bytes)",
				       c->state_dir,
				       sizeof(c->sock) - sizeof("/sluice.sock"));
	sl_ctl_path(c->state_dir, c->sock, sizeof(c->sock));
	return 0;
}

const cJSON *cli_get(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

const char *cli_get_str(const cJSON *o, const char *key, const char *def)
{
	const cJSON *v = cli_get(o, key);

	return cJSON_IsString(v) ? v->valuestring : def;
}

double cli_get_num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cli_get(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

bool cli_get_bool(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(cli_get(o, key));
}

bool cli_is_limit(const cJSON *rule)
{
	return !strcmp(cli_get_str(rule, "action", "limit"), "limit");
}

/* Print why the agent could not be asked; returns err. */
static int call_failed(const struct cli *c, const char *cmd, int err)
{
	switch (err) {
	case -EBADMSG:
		pr_err("%s: the agent at %s sent an answer that is not a "
		       "JSON object", cmd, c->sock);
		break;
	case -EMSGSIZE:
		pr_err("%s: the answer of the agent at %s is larger than "
		       "%u MiB", cmd, c->sock, SL_CTL_MAX_MSG >> 20);
		break;
	case -ENOMEM:
		pr_err("%s: out of memory", cmd);
		break;
	case -EACCES:
	case -EPERM:
		pr_err("cannot reach the agent at %s: %s (the control socket "
		       "is for root only)", c->sock, strerror(-err));
		break;
	case -ETIMEDOUT:
		pr_err("the agent at %s did not answer within %d s — is it "
		       "stuck? (--state-dir DIR to reach another)",
		       c->sock, SL_CTL_TIMEOUT_MS / 1000);
		break;
	default:
		pr_err("cannot reach the agent at %s: %s — is `sluice agent` "
		       "running? (--state-dir DIR to reach another)",
		       c->sock, strerror(-err));
	}
	return err;
}

/* 0 when the answer says "ok": true; else prints the agent's reason. */
static int check_answer(const struct cli *c, const char *cmd,
			const cJSON *resp)
{
	const cJSON *ok = cli_get(resp, "ok");
	const char *code;
	bool failed;

	if (!cJSON_IsBool(ok)) {
		pr_err("%s: the agent at %s sent an answer without \"ok\"",
		       cmd, c->sock);
		return -EBADMSG;
	}
	if (cJSON_IsTrue(ok))
		return 0;
	code = cli_get_str(resp, "code", "?");
	failed = !strcmp(code, "apply") || !strcmp(code, "internal");
	pr_err("%s %s [%s]: %s", cmd, failed ? "failed" : "refused", code,
	       cli_get_str(resp, "error", "(the agent gave no reason)"));
	return -EREMOTEIO;
}

int cli_call(const struct cli *c, const cJSON *req, cJSON **resp)
{
	const char *cmd = cli_get_str(req, "cmd", "?");
	int err;

	*resp = NULL;
	err = sl_ctl_call(c->sock, req, resp, SL_CTL_TIMEOUT_MS);
	return err ? call_failed(c, cmd, err) : check_answer(c, cmd, *resp);
}

int cli_exit_code(int err)
{
	switch (err) {
	case 0:
		return SL_CLI_OK;
	case -EREMOTEIO:
	case -EBADMSG:
	case -EMSGSIZE:
	case -ENOMEM:
		return SL_CLI_FAILED;
	}
	return SL_CLI_UNREACHABLE;
}

/* -j: the answer without "ok", pretty-printed. */
static int print_json(cJSON *resp)
{
	char *text;

	cJSON_DeleteItemFromObjectCaseSensitive(resp, "ok");
	text = cJSON_Print(resp);
	if (!text)
		return -ENOMEM;
	puts(text);
	cJSON_free(text);
	fflush(stdout);
	return 0;
}

/*
 * Send req and read the answer as text. *ok is true when it is one JSON
 * object that says "ok": true; then out holds it indented without its
 * "ok", every number as the agent wrote it. Returns 0 or as call_failed()
 * does.
 */
static int call_text(const struct cli *c, const cJSON *req, const char *cmd,
		     struct sl_text *out, char **text, size_t *len, bool *ok)
{
	struct sl_json r = { .out = out };
	int err;

	*ok = false;
	err = sl_ctl_call_text(c->sock, req, text, len, SL_CTL_TIMEOUT_MS);
	if (err)
		return call_failed(c, cmd, err);
	r.p = *text;
	r.end = *text + *len;
	sl_json_ws(&r);
	if (r.p < r.end && *r.p == '{' && sl_json_object(&r, 0, true, ok)) {
		sl_json_ws(&r);
		*ok = *ok && r.p == r.end && !out->nomem;
	} else {
		*ok = false;
	}
	return 0;
}

/* A text that was not a good answer: parse it and say what is wrong. */
static int check_text(const struct cli *c, const char *cmd, char *text,
		      size_t len, cJSON **resp)
{
	int err = sl_ctl_parse(text, len, resp);

	return err ? call_failed(c, cmd, err) : check_answer(c, cmd, *resp);
}

/*
 * -j: send req, print the answer without its "ok". An answer that says
 * "ok": true is relayed; anything else takes the general path, which says
 * what is wrong. Returns as cli_call() does.
 */
int cli_call_json(const struct cli *c, const cJSON *req)
{
	const char *cmd = cli_get_str(req, "cmd", "?");
	struct sl_text out = { 0 };
	cJSON *resp = NULL;
	size_t len;
	char *text;
	bool ok;
	int err;

	err = call_text(c, req, cmd, &out, &text, &len, &ok);
	if (err)
		return err;
	if (ok) {
		sl_text_put(&out, "\n", 1);
		fwrite(out.buf, 1, out.len, stdout);
		fflush(stdout);
	}
	free(out.buf);
	if (ok) {
		free(text);
		return 0;
	}
	err = check_text(c, cmd, text, len, &resp);
	if (resp && (!err || err == -EREMOTEIO))
		print_json(resp);
	cJSON_Delete(resp);
	return err;
}

cJSON *cli_request(const char *cmd)
{
	cJSON *req = cJSON_CreateObject();

	if (req && !cJSON_AddStringToObject(req, "cmd", cmd)) {
		cJSON_Delete(req);
		return NULL;
	}
	return req;
}

int cli_run(const struct cli *c, cJSON *req, void (*human)(const cJSON *resp))
{
	cJSON *resp;
	int err;

	if (!req) {
		pr_err("%s: out of memory", c->cmd->name);
		return SL_CLI_FAILED;
	}
	if (c->json) {
		err = cli_call_json(c, req);
		cJSON_Delete(req);
		return cli_exit_code(err);
	}
	err = cli_call(c, req, &resp);
	cJSON_Delete(req);
	if (!err)
		human(resp);
	cJSON_Delete(resp);
	return cli_exit_code(err);
}
