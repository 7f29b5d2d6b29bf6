// SPDX-License-Identifier: GPL-2.0
/* `sluice agent`: the start, in order: socket, rules, data plane,
 * threads, interfaces, services. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_state.h"
#include "util.h"

/* The agent's numbers for the metrics (agent_metrics.h), dp_lock held. */
static void metrics_status(void *arg, const bool *attached,
			   struct sl_agent_status *st)
{
	const struct agent *a = arg;

	st->snapshot_version = a->snap.version;
	st->snapshot_updated_at = a->snap.updated_at;
	st->snapshot_rules = a->snap.rules.n;
	st->snapshot_from_prev = a->snap_from_prev;
	st->ready = agent_check_ready(a, attached, NULL);
	st->has_config_source = a->etcd;
	if (a->etcd)
		sl_etcd_source_stats(a->etcd, &st->config_source);
}

/* Once everything it reads exists: the address was bound at the start. */
static int serve_metrics(struct agent *a)
{
	int err;

	a->metrics_src = (struct sl_agent_metrics_src){
		.dp = &a->dp,
		.dp_lock = &a->dp_lock,
		.cluster = a->cluster,
		.tokend = a->tokend,
		.guard = a->guard,
		.status = metrics_status,
		.arg = a,
	};
	err = sl_http_metrics_start(a->metrics_fd, sl_agent_metrics,
				    &a->metrics_src, &a->metrics);
	a->metrics_fd = -1;
	if (err) {
		pr_err("--metrics %s: cannot serve HTTP: %s", a->metrics_addr,
		       strerror(-err));
		return err;
	}
	pr_info("metrics on http://%s/metrics", a->metrics_addr);
	return 0;
}

/* A value of the etcd key waits: the control loop takes it at once. */
static void wake_control_loop(void *arg)
{
	struct agent *a = arg;

	sl_ctl_server_wake(a->ctl);
}

/* Before the boot: the options are checked, nothing asked of etcd yet. */
static int new_etcd_source(struct agent *a)
{
	const struct sl_snapshot_source *src = &a->snap.source;
	uint64_t applied = src->etcd_key && !strcmp(src->etcd_key, a->etcd_key)
				   ? src->revision
				   : 0;
	int err;

	err = sl_etcd_source_new(a->etcd_endpoints, &a->etcd_auth, a->etcd_key,
				 applied,
				 wake_control_loop, a, &a->etcd, a->err,
				 sizeof(a->err));
	if (err)
		pr_err("%s", a->err);
	return err;
}

int agent_start(struct agent *a)
{
	struct sl_dp_opts o = { .pass_unclassified = a->pass_unclassified,
				.tunnels_inner = a->tunnels == TUNNELS_INNER,
				.pin_dir = a->pin_dir };
	int err, fd;

	if (mkdir(a->state_dir, 0700) && errno != EEXIST) {
		pr_err("%s: %s", a->state_dir, strerror(errno));
		return -errno;
	}
	err = sl_check_owner_path(a->state_dir, a->err, sizeof(a->err));
	if (err) {
		pr_err("--state-dir %s", a->err);
		return err;
	}
	sl_ctl_path(a->state_dir, a->sock_path, sizeof(a->sock_path));
	fd = sl_ctl_listen(a->sock_path);
	if (fd == -EADDRINUSE) {
		pr_err("another agent answers on %s", a->sock_path);
		return fd;
	}
	if (fd < 0) {
		pr_err("%s: %s", a->sock_path, strerror(-fd));
		return fd;
	}
	err = sl_ctl_server_new(fd, SL_CTL_MAX_CLIENTS, SL_CTL_TIMEOUT_MS,
				agent_handle_request, a, &a->ctl);
	if (err) {
		close(fd);
		unlink(a->sock_path);
		pr_err("%s: %s", a->sock_path, strerror(-err));
		return err;
	}
	if (a->metrics_addr) {
		a->metrics_fd = sl_http_metrics_listen(a->metrics_addr);
		if (a->metrics_fd < 0) {
			pr_err("--metrics %s: %s", a->metrics_addr,
			       strerror(-a->metrics_fd));
			return a->metrics_fd;
		}
	}
	err = agent_boot_rules(a);
	if (err)
		return err;
	if (a->etcd_key) {
		err = new_etcd_source(a);
		if (err)
			return err;
	}

	for (int i = 0; i < a->ifaces.n; i++)
		o.frags |= sl_dp_iface_jumbo(a->ifaces.name[i]);
	err = sl_dp_load(&a->dp, &o);
	if (err) {
		pr_err("loading the XDP program (pins in %s): %s", a->pin_dir,
		       strerror(-err));
		return err;
	}
	if (a->dp.upgraded)
		pr_info("upgraded the running data plane in %s to layout "
			"%016llx (%zu rule slots in force)", a->pin_dir,
			(unsigned long long)a->dp.layout,
			sl_dp_slots_in_force(&a->dp));
	else if (a->dp.adopted)
		pr_info("adopting the running data plane in %s (%zu rule "
			"slots in force)", a->pin_dir,
			sl_dp_slots_in_force(&a->dp));
	/* before the apply: a cluster rule's fresh slot starts at its
	 * fallback, never at the cluster's count */
	if (a->token_servers) {
		err = agent_new_cluster(a);
		if (err)
			return err;
	}
	/* every map is filled before any attach: the first packet is
	 * already judged by the rules */
	if (sl_dp_apply(&a->dp, &a->snap.rules, a->err, sizeof(a->err))) {
		pr_err("refusing to start, cannot apply snapshot version %llu: "
		       "%s", (unsigned long long)a->snap.version, a->err);
		return -EINVAL;
	}
	a->in_force_version = a->snap.version;
	a->drops = sl_agent_drops_new(&a->dp);
	if (!a->drops)
		pr_warn("sampled drops unavailable (`sluice drops`): %s",
			strerror(errno));
	if (a->cluster)
		sl_cluster_rules_changed(a->cluster);
	if (a->serve_tokens) {
		err = agent_start_tokend(a);
		if (err)
			return err;
	}
	if (a->cluster) {
		err = sl_cluster_start(a->cluster);
		if (err)
			return err;
	}
	err = sl_guard_start(&a->dp, &a->dp_lock, "/proc", &a->guard);
	if (err) {
		pr_err("system rules: cannot start the thread: %s",
		       strerror(-err));
		return err;
	}

	for (int i = 0; i < a->ifaces.n; i++) {
		const char *name = a->ifaces.name[i];
		const struct sl_iface *ifc;

		err = sl_dp_attach(&a->dp, name, a->mode);
		if (err) {
			pr_err("%s: cannot attach XDP (%s mode): %s", name,
			       sl_xdp_mode_str(a->mode), strerror(-err));
			return err;
		}
		ifc = &a->dp.ifaces[a->dp.n_ifaces - 1];
		pr_info("%s: %s in %s mode%s, %zu rules in force (snapshot "
			"version %llu)", name,
			ifc->adopted ? "adopted" : "attached",
			sl_xdp_mode_str(ifc->mode),
			ifc->frags ? " (multi-buffer: frames in several "
				     "buffers)" : "",
			a->dp.rules.n, (unsigned long long)a->snap.version);
	}
	if (a->metrics_addr) {
		err = serve_metrics(a);
		if (err)
			return err;
	}
	/* only now: the snapshot is in force whatever etcd does */
	if (a->etcd) {
		err = sl_etcd_source_start(a->etcd);
		if (err) {
			pr_err("--etcd: cannot start the thread: %s",
			       strerror(-err));
			return err;
		}
	}
	agent_notify_status(a, true);
	return 0;
}
