// SPDX-License-Identifier: GPL-2.0
/* `sluice agent`: the rules, from the boot's snapshot to every change
 * (the CLI's, etcd's): written durable, then put in force, then handed to
 * the embedded token server and announced to systemd. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "agent_state.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "ruleset.h"

static bool same_rules(const struct sl_ruleset *x, const struct sl_ruleset *y)
{
	char *jx = sl_ruleset_to_json(x, false);
	char *jy = sl_ruleset_to_json(y, false);
	bool same = jx && jy && !strcmp(jx, jy);

	free(jx);
	free(jy);
	return same;
}

/*
 * The version after v. A current file that was damaged held v + 1 (each
 * write keeps its predecessor as .prev): skip it, so that a version number
 * never names two rule sets and --if-version cannot match the lost one.
 */
static uint64_t version_after(uint64_t v, bool from_prev)
{
	return v + (from_prev ? 2 : 1);
}

/* What turns old into new, for a log line (the names are cut). */
static void diff_text(const struct sl_ruleset *old, const struct sl_ruleset *new,
		      char *buf, size_t len)
{
	struct sl_ruleset_diff d;

	if (sl_ruleset_diff(old, new, &d))
		snprintf(buf, len, "(out of memory)");
	else
		sl_ruleset_diff_text(&d, buf, len);
	sl_ruleset_diff_free(&d);
}

/*
 * --rules FILE and the snapshot (docs/operations.md, "Where the rules come
 * from"): the file's rules become the snapshot, unless the CLI changed
 * the snapshot since the file was loaded. Then the snapshot stays if the
 * file did not change either, and a start that would drop the changes of
 * one of them is refused, unless --replace-snapshot lets the file win.
 * The snapshot records the file and its checksum to tell.
 */
static int rules_from_file(struct agent *a)
{
	struct sl_snapshot_source src = { .rule_file = (char *)a->rules_file };
	struct sl_snapshot cur = { 0 };
	struct sl_ruleset rs = { 0 };
	uint64_t version = 1;
	bool from_prev, same_file, same;
	char what[SL_LOG_CHANGES_LEN];

	if (sl_rules_load_file(a->rules_file, &rs, a->err, sizeof(a->err))) {
		pr_err("%s: refusing to start, the rule file is invalid:\n%s",
		       a->rules_file, a->err);
		return -EINVAL;
	}
	/* refuse before writing: a refused start leaves the snapshot alone */
	if (!rs.n && !a->allow_empty && !rs.allow_empty) {
		pr_err("%s holds no rules: refusing to start with nothing in "
		       "force (--allow-empty if that is intended); the "
		       "snapshot is left as it was",
		       a->rules_file);
		sl_ruleset_free(&rs);
		return -ENODATA;
	}
	sl_snapshot_checksum(&rs, src.file_checksum);
	/* versions only go up, even past a damaged current file */
	if (!sl_snapshot_load_boot(a->state_dir, &cur, &from_prev, a->err,
				   sizeof(a->err))) {
		const struct sl_snapshot_source *was = &cur.source;

		version = version_after(cur.version, from_prev);
		same_file = was->rule_file &&
			    !strcmp(was->rule_file, a->rules_file);
		same = !from_prev && same_rules(&cur.rules, &rs) &&
		       cur.rules.allow_empty == rs.allow_empty;
		/* the same rules from elsewhere: recorded as the file's */
		if (same && same_file &&
		    !strcmp(was->file_checksum, src.file_checksum)) {
			sl_ruleset_free(&rs);
			a->snap = cur;
			return 0;
		}
		diff_text(&cur.rules, &rs, what, sizeof(what));
		if (same_file && was->changed_by_cli &&
		    !strcmp(was->file_checksum, src.file_checksum) &&
		    !a->replace_snapshot) {
			pr_warn("keeping the snapshot (version %llu): the CLI "
				"changed the rules since %s was loaded, and "
				"the file did not change; the file would have "
				"%s (`sluice rule replace %s` puts the file "
				"in force, `sluice rule save FILE` saves the "
				"rules in force)",
				(unsigned long long)cur.version, a->rules_file,
				what, a->rules_file);
			sl_ruleset_free(&rs);
			a->snap = cur;
			return 0;
		}
		if (same_file && was->changed_by_cli && !a->replace_snapshot) {
			pr_err("%s changed since it was loaded, and the CLI "
			       "changed the snapshot (version %llu) since "
			       "too: refusing to drop the changes of either "
			       "(the file would have %s). The rules in force "
			       "stay in force. Fold the CLI's changes into "
			       "the file and start with --replace-snapshot, "
			       "or start without --rules to keep the snapshot",
			       a->rules_file, (unsigned long long)cur.version,
			       what);
			sl_ruleset_free(&rs);
			sl_snapshot_free(&cur);
			return -EEXIST;
		}
		if (!same && same_file && !was->changed_by_cli)
			pr_info("%s changed since version %llu: %s",
				a->rules_file, (unsigned long long)cur.version,
				what);
		else if (!same)
			pr_warn("%s replaces the snapshot (version %llu, %s): "
				"%s", a->rules_file,
				(unsigned long long)cur.version,
				was->changed_by_cli ? "changed by the CLI"
				: was->etcd_key	    ? "from etcd"
						    : "not from this file",
				what);
		sl_snapshot_free(&cur);
	}
	if (sl_snapshot_write_source(a->state_dir, &rs, version, true, &src,
				     &a->mark, a->err, sizeof(a->err))) {
		pr_err("cannot write the snapshot: %s", a->err);
		sl_ruleset_free(&rs);
		return -EIO;
	}
	if (sl_snapshot_source_copy(&a->snap.source, &src)) {
		pr_err("out of memory");
		sl_ruleset_free(&rs);
		return -ENOMEM;
	}
	a->snap.version = version;
	a->snap.updated_at = time(NULL);
	a->snap.rules = rs;
	pr_info("%s is now the snapshot (version %llu, %zu rules)",
		a->rules_file, (unsigned long long)version, rs.n);
	return 0;
}

int agent_boot_rules(struct agent *a)
{
	int err;

	if (a->rules_file) {
		err = rules_from_file(a);
		if (err)
			return err;
	} else {
		err = sl_snapshot_load_boot(a->state_dir, &a->snap,
					    &a->snap_from_prev, a->err,
					    sizeof(a->err));
		if (err == -ENOENT && a->allow_empty) {
			pr_warn("no snapshot in %s and no --rules: starting "
				"with no rules (--allow-empty)", a->state_dir);
			return 0;
		}
		if (err == -ENOENT) {
			pr_err("no snapshot (%s/%s) and no --rules: refusing to "
			       "start with no rules in force; give --rules "
			       "FILE, or --allow-empty if that is intended",
			       a->state_dir, SL_SNAPSHOT_FILE);
			return err;
		}
		if (err) {
			pr_err("refusing to start: %s", a->err);
			return err;
		}
		if (a->snap_from_prev)
			pr_warn("USING THE PREVIOUS SNAPSHOT %s/%s (version "
				"%llu): %s", a->state_dir, SL_SNAPSHOT_PREV,
				(unsigned long long)a->snap.version, a->err);
	}
	if (!a->snap.rules.n && !agent_empty_allowed(a)) {
		pr_err("the snapshot (version %llu) holds no rules: refusing to "
		       "start with nothing in force (--allow-empty if that is "
		       "intended)",
		       (unsigned long long)a->snap.version);
		return -ENODATA;
	}
	return 0;
}

/* The rule set a change asks for (ruleset.h); NULL answer on success. */
static cJSON *build_change(struct agent *a, enum change_op op,
			   const struct sl_ctl_req *req,
			   struct sl_ruleset *out)
{
	struct sl_ruleset in = { 0 };
	const char **names = NULL;
	size_t n_names;
	int err;

	err = op == CHANGE_DEL ? sl_ctl_req_names(req, &names, &n_names,
						  a->err, sizeof(a->err))
			       : sl_ctl_req_rules(req, &in, a->err,
						  sizeof(a->err));
	if (err)
		return agent_request_error(a, err);
	if (op == CHANGE_REPLACE) {
		sl_ruleset_replace(&in, out);
		return NULL;
	}
	err = op == CHANGE_ADD ? sl_ruleset_add(&a->snap.rules, &in, out,
						a->err, sizeof(a->err))
			       : sl_ruleset_del(&a->snap.rules, names, n_names,
						out, a->err, sizeof(a->err));
	sl_ruleset_free(&in);
	free(names);
	if (!err)
		return NULL;
	return sl_ctl_error(err == -EEXIST   ? "conflict"
			    : err == -ENOENT ? "not_found"
			    : err == -ENOMEM ? "internal"
					     : "invalid",
			    "%s", a->err);
}

/* A change in force reaches the embedded token server's flows too. */
static void serve_new_rules(struct agent *a)
{
	struct sl_ruleset next = { 0 };
	int err;

	if (!a->tokend)
		return;
	/* a copy: the token server keeps pointers into it while the
	 * agent's own set changes */
	err = sl_ruleset_copy(&a->snap.rules, 0, &next);
	if (err)
		snprintf(a->err, sizeof(a->err), "out of memory");
	if (err ||
	    sl_tokend_set_rules(a->tokend, &next, a->err, sizeof(a->err))) {
		pr_err("--serve-tokens: still serving the previous rules: %s",
		       a->err);
		sl_ruleset_free(&next);
		return;
	}
	sl_ruleset_free(&a->served);
	a->served = next;
}

void agent_notify_status(struct agent *a, bool ready)
{
	sd_notifyf(0, "%sSTATUS=snapshot version %llu, %zu rules in force on "
		      "%d interfaces",
		   ready ? "READY=1\n" : "",
		   (unsigned long long)a->in_force_version, a->dp.rules.n,
		   a->dp.n_ifaces);
}

/*
 * next (rules as the parser returned them, consumed) becomes the snapshot,
 * from source (NULL: none), then the rules in force: what every change
 * goes through.
 */
static cJSON *commit_rules(struct agent *a, struct sl_ruleset *next_in,
			   const struct sl_snapshot_source *source)
{
	uint64_t version = version_after(a->snap.version, a->snap_from_prev);
	struct sl_ruleset next = *next_in, old = { 0 };
	struct sl_snapshot_source src = { 0 };
	char what[SL_LOG_CHANGES_LEN];
	cJSON *r;
	int err;

	*next_in = (struct sl_ruleset){ 0 };
	if (source && sl_snapshot_source_copy(&src, source)) {
		sl_ruleset_free(&next);
		return sl_ctl_error("internal", "out of memory");
	}
	/* durable first: acknowledged means it survives a crash */
	if (sl_snapshot_write_source(a->state_dir, &next, version, true,
				     source, &a->mark, a->err,
				     sizeof(a->err))) {
		sl_snapshot_source_free(&src);
		sl_ruleset_free(&next);
		return sl_ctl_error("internal", "cannot write the snapshot: %s",
				    a->err);
	}
	pthread_mutex_lock(&a->dp_lock);
	err = sl_dp_apply(&a->dp, &next, a->err, sizeof(a->err));
	if (!err && a->cluster)
		sl_cluster_rules_changed(a->cluster);
	/* under the lock: the metrics read the snapshot's numbers */
	if (!err) {
		old = a->snap.rules;
		a->snap.rules = next;
		a->snap.version = version;
		a->snap.updated_at = time(NULL);
		a->snap_from_prev = false;
		a->in_force_version = version;
		sl_snapshot_source_free(&a->snap.source);
		a->snap.source = src;
		src = (struct sl_snapshot_source){ 0 };
	}
	pthread_mutex_unlock(&a->dp_lock);
	sl_snapshot_source_free(&src);
	if (err) {
		char rb[ERRBUF];

		r = sl_ctl_error("apply",
				 "cannot apply the rules, nothing changed: %s",
				 a->err);
		err = sl_snapshot_rollback(a->state_dir, rb, sizeof(rb));
		if (err == -ENOENT) {
			/* the first snapshot: nothing to go back to */
			snprintf(rb, sizeof(rb), "%s/%s", a->state_dir,
				 SL_SNAPSHOT_FILE);
			unlink(rb);
		} else if (err) {
			pr_err("rolling back the snapshot: %s", rb);
		}
		sl_ruleset_free(&next);
		return r;
	}
	diff_text(&old, &next, what, sizeof(what));
	sl_ruleset_free(&old);
	pr_info("rules at version %llu: %zu in force; %s",
		(unsigned long long)version, next.n, what);
	serve_new_rules(a);
	agent_notify_status(a, false);
	r = sl_ctl_ok();
	cJSON_AddNumberToObject(r, "version", version);
	cJSON_AddNumberToObject(r, "rules_in_force", a->dp.rules.n);
	return r;
}

cJSON *agent_do_change(struct agent *a, enum change_op op,
		       const struct sl_ctl_req *req)
{
	struct sl_snapshot_source src = { 0 };
	struct sl_ruleset next = { 0 };
	bool given, dry_run, unchanged;
	uint64_t ifv;
	cJSON *r;
	int err;

	err = sl_ctl_req_if_version(req, &given, &ifv, a->err, sizeof(a->err));
	if (err)
		return agent_request_error(a, err);
	if (given && ifv != a->snap.version)
		return sl_ctl_error("version",
				    "the snapshot is at version %llu, not %llu:"
				    " someone else changed the rules; "
				    "re-read them and retry",
				    (unsigned long long)a->snap.version,
				    (unsigned long long)ifv);
	err = sl_ctl_req_bool(req, "dry_run", &dry_run, a->err,
			      sizeof(a->err));
	if (err)
		return agent_request_error(a, err);
	r = build_change(a, op, req, &next);
	if (r)
		return r;
	if (!next.n && !a->allow_empty) {
		sl_ruleset_free(&next);
		return sl_ctl_error("invalid",
				    "refusing to leave no rules in force (the "
				    "agent runs without --allow-empty)");
	}
	unchanged = same_rules(&a->snap.rules, &next) &&
		    a->snap.rules.allow_empty == next.allow_empty;
	if (dry_run || unchanged) {
		r = sl_ctl_ok();
		cJSON_AddNumberToObject(r, "version", a->snap.version);
		cJSON_AddNumberToObject(r, "rules_in_force", a->dp.rules.n);
		cJSON_AddBoolToObject(r, "unchanged", unchanged);
		cJSON_AddBoolToObject(r, "dry_run", dry_run);
		cJSON_AddItemToObject(r, "diff",
				      sl_ruleset_diff_json(&a->snap.rules,
							   &next));
		sl_ruleset_free(&next);
		return r;
	}
	/* a change of the CLI over rules from --rules: the next start keeps
	 * it (rules_from_file) */
	if (a->snap.source.rule_file &&
	    sl_snapshot_source_copy(&src, &a->snap.source)) {
		sl_ruleset_free(&next);
		return sl_ctl_error("internal", "out of memory");
	}
	src.changed_by_cli = src.rule_file != NULL;
	r = commit_rules(a, &next, src.rule_file ? &src : NULL);
	sl_snapshot_source_free(&src);
	return r;
}

/*
 * A value of the etcd key: a rule document, checked as `sluice check`
 * does, applied as `rule replace` does; refused, the rules in force stay.
 */
void agent_apply_etcd_value(struct agent *a, struct sl_etcd_value *v)
{
	struct sl_snapshot_source src = { .etcd_key = (char *)a->etcd_key,
					  .revision = v->revision };
	struct sl_ruleset next = { 0 };
	const cJSON *why;
	cJSON *r = NULL;

	if (v->deleted)
		r = sl_ctl_error("invalid", "the key was deleted");
	else if (sl_rules_parse(v->text, v->len, &next, a->err,
				sizeof(a->err)))
		r = sl_ctl_error("invalid", "invalid rules:\n%s", a->err);
	else if (!next.n && !next.allow_empty && !a->allow_empty)
		r = sl_ctl_error("invalid",
				 "no rules: refusing to leave nothing in force "
				 "(a document meant to hold none says "
				 "\"allow_empty\": true)");
	if (r)
		sl_ruleset_free(&next);
	else
		r = commit_rules(a, &next, &src);
	why = cJSON_GetObjectItemCaseSensitive(r, "error");
	if (cJSON_IsString(why)) {
		pr_err("etcd: %s at revision %llu refused, the rules in force "
		       "stay (snapshot version %llu): %s",
		       a->etcd_key, (unsigned long long)v->revision,
		       (unsigned long long)a->snap.version, why->valuestring);
		sl_etcd_source_refused(a->etcd, v->revision, why->valuestring);
	} else {
		pr_info("etcd: %s at revision %llu in force (snapshot "
			"version %llu)",
			a->etcd_key, (unsigned long long)v->revision,
			(unsigned long long)a->snap.version);
		sl_etcd_source_applied(a->etcd, v->revision);
	}
	cJSON_Delete(r);
}
