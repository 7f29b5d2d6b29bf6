// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "loader.h"
#include "log.h"
#include "sluice.skel.h"
#include "upgrade.h"

/* A verifier log's reason is at its end: its last lines are kept. */
#define VERIFIER_TAIL_LINES 24

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	enum sl_log_level to = level == LIBBPF_WARN ? SL_LOG_WARN
						    : SL_LOG_DEBUG;
	char *text, *line, *next, *from;
	int skip = 0;

	if (level == LIBBPF_DEBUG || vasprintf(&text, fmt, ap) < 0)
		return 0;
	from = text;
	if (strstr(text, "-- BEGIN PROG LOAD LOG --")) {
		int lines = 0;

		for (char *c = text; *c; c++)
			lines += *c == '\n';
		skip = lines > VERIFIER_TAIL_LINES + 1
			       ? lines - VERIFIER_TAIL_LINES - 1
			       : 0;
	}
	for (line = from; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (line != from && skip > 0) {
			if (!--skip)
				sl_log(to, "libbpf:   ... (the log's last %d "
				       "lines:)", VERIFIER_TAIL_LINES);
			continue;
		}
		sl_log(to, "libbpf: %s", line);
	}
	free(text);
	return 0;
}

/*
 * Pins only survive the process on a BPF filesystem. Checked on the
 * deepest part of dir that exists, before anything is created, so a
 * wrong --pin-dir leaves nothing behind.
 */
static int check_bpffs(const char *dir)
{
	char path[PATH_MAX], *slash;
	struct statfs st;

	snprintf(path, sizeof(path), "%s", dir);
	while (statfs(path, &st)) {
		if (errno != ENOENT)
			return -errno;
		slash = strrchr(path, '/');
		if (!slash || slash == path) {
			snprintf(path, sizeof(path), "/");
			continue;
		}
		*slash = '\0';
	}
	if (st.f_type != BPF_FS_MAGIC) {
		pr_err("%s is not on a bpf filesystem (%s is not one): mount "
		       "-t bpf bpf /sys/fs/bpf, or choose a --pin-dir on one",
		       dir, path);
		return -ENOTSUP;
	}
	return 0;
}

static int set_pin_paths(struct sl_dataplane *dp, const char *dir)
{
	char path[PATH_MAX], name[64];
	struct bpf_map *m;
	int err;

	bpf_object__for_each_map(m, dp->skel->obj) {
		/* read-only data is per program instance; a frozen map
		 * cannot be reopened for writing anyway */
		if (m == dp->skel->maps.rodata)
			continue;
		sl_layout_pin_name(bpf_map__name(m), name, sizeof(name));
		if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
		    (int)sizeof(path))
			return -ENAMETOOLONG;
		err = bpf_map__set_pin_path(m, path);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Which pinned maps the program takes: the running data plane's where the
 * layout is this build's (an agent restart), new ones beside them where it
 * is not (an upgrade, upgrade.h), and what no link runs with goes.
 */
static int choose_pins(struct sl_dataplane *dp, struct sl_pins *pins,
		       struct sl_layout *next, bool *upgrading)
{
	char probe[PATH_MAX + 16];
	int err, gone;

	*upgrading = false;
	err = check_bpffs(dp->pin_dir);
	if (!err)
		err = sl_pins_mkdir(dp->pin_dir);
	if (!err)
		err = sl_layout_of_object(dp->skel->obj, dp->skel->maps.rodata,
					  next);
	if (err)
		return err;
	dp->layout = next->id;
	sl_pins_maps_dir(dp->pin_dir, next->id, dp->maps_dir,
			 sizeof(dp->maps_dir));
	err = sl_pins_open(dp->pin_dir, dp->maps_dir, pins);
	if (err)
		return err;
	*upgrading = pins->maps.n && strcmp(pins->maps_dir, dp->maps_dir);
	/* the id leaves rule_cpu's size out; its shape does not */
	err = sl_rule_cpu_size(dp, dp->skel,
			       sl_rule_cpu_pinned_shift(dp, pins, *upgrading));
	sl_layout_free(next);
	if (!err)
		err = sl_layout_of_object(dp->skel->obj, dp->skel->maps.rodata,
					  next);
	if (err)
		return err;
	if (*upgrading) {
		/* an upgrade that stopped half-way left these */
		sl_pins_remove_maps(dp->maps_dir, false);
		err = sl_upgrade_prepare(next, pins);
	} else if (pins->n_links && !pins->maps.n) {
		pr_warn("the running program's maps are not pinned in %s: the "
			"rules start with fresh state", dp->pin_dir);
	}
	gone = sl_pins_remove_other(dp->pin_dir, *upgrading ? pins->maps_dir
							     : dp->maps_dir);
	if (gone)
		pr_info("%s: removed %d pinned maps no link runs with",
			dp->pin_dir, gone);
	if (!err)
		err = sl_pins_mkdir(dp->maps_dir);
	if (!err)
		err = set_pin_paths(dp, dp->maps_dir);
	snprintf(probe, sizeof(probe), "%s/rule_meta", dp->maps_dir);
	dp->adopted = *upgrading || !access(probe, F_OK);
	return err;
}

int sl_dp_load(struct sl_dataplane *dp, const struct sl_dp_opts *opts)
{
	struct sl_pins pins = { .prog_fd = -1 };
	struct sl_layout next = { 0 };
	bool reused_state, upgrading = false;
	int err;

	memset(dp, 0, sizeof(*dp));
	libbpf_set_print(libbpf_print);
	dp->n_cpus = libbpf_num_possible_cpus();
	if (dp->n_cpus <= 0)
		return dp->n_cpus ? dp->n_cpus : -EINVAL;
	if (opts->sized_cpus > dp->n_cpus)
		dp->n_cpus = opts->sized_cpus;
	dp->slot_state = calloc(SLUICE_MAX_RULE_SLOTS,
				sizeof(*dp->slot_state));
	if (!dp->slot_state)
		return -ENOMEM;
	dp->skel = sluice_bpf__open();
	if (!dp->skel) {
		err = -errno;
		goto fail;
	}
	dp->skel->rodata->nr_cpus = dp->n_cpus;
	/* without pins: the smallest class, grown by the applies */
	err = sl_rule_cpu_size(dp, dp->skel, SLUICE_RULE_CPU_MIN_SHIFT);
	if (!err)
		err = bpf_map__set_max_entries(dp->skel->maps.src_cache,
					       (uint32_t)dp->n_cpus
						       << SLUICE_SRC_CACHE_BITS);
	if (err)
		goto fail;
	dp->skel->rodata->test_clock = opts->test_clock;
	dp->skel->rodata->unclassified_verdict =
		opts->pass_unclassified ? XDP_PASS : XDP_DROP;
	dp->skel->rodata->tunnels_inner = opts->tunnels_inner;
	if (opts->frags && !sl_dp_frags_supported())
		pr_warn("this kernel has no multi-buffer XDP (5.18): an "
			"interface whose frames may not fit one buffer runs "
			"in generic mode");
	dp->frags = opts->frags && sl_dp_frags_supported();
	sl_dp_autoload(dp, dp->skel);
	if (opts->pin_dir) {
		snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", opts->pin_dir);
		err = choose_pins(dp, &pins, &next, &upgrading);
		if (err)
			goto fail;
	}
	reused_state = upgrading || sl_dp_slot_state_pinned(dp);
	/* libbpf reuses maps already pinned at their pin path, and pins
	 * the ones it creates */
	err = sluice_bpf__load(dp->skel);
	if (!err)
		err = sl_rule_cpu_map(dp);
	if (!err && opts->pin_dir)
		err = sl_layout_pin_btf(dp->skel->obj, dp->maps_dir);
	if (!err && upgrading)
		err = sl_upgrade_finish(dp, &next, &pins);
	if (err)
		goto fail;
	dp->upgraded = upgrading;
	/* created maps are all zeros */
	for (uint32_t slot = 0; slot < SLUICE_MAX_RULE_SLOTS; slot++)
		dp->slot_state[slot].clean = !reused_state;
	if (dp->adopted) {
		err = sl_dp_adopt(dp);
		if (err)
			goto fail;
	}
	sl_pins_close(&pins);
	sl_layout_free(&next);
	return 0;
fail:
	sl_rule_cpu_unmap(dp);
	sluice_bpf__destroy(dp->skel);
	/* the running data plane is as it was: only what we made goes */
	if (upgrading)
		sl_pins_remove_maps(dp->maps_dir, false);
	sl_pins_close(&pins);
	sl_layout_free(&next);
	free(dp->slot_state);
	memset(dp, 0, sizeof(*dp));
	return err;
}

void sl_dp_destroy(struct sl_dataplane *dp)
{
	if (dp->skel)
		sl_dp_retire(dp);
	for (int i = 0; i < dp->n_ifaces; i++) {
		/* a tc filter outlives the process: unpinned, it goes */
		if (!dp->pin_dir[0] && dp->ifaces[i].egress)
			sl_tc_detach(dp->ifaces[i].ifindex);
		close(dp->ifaces[i].link_fd);
	}
	sl_rule_cpu_unmap(dp);
	if (dp->skel)
		sluice_bpf__destroy(dp->skel);
	sl_ruleset_free(&dp->rules);
	free(dp->slots);
	free(dp->slot_state);
	free(dp->lpm);
	memset(dp, 0, sizeof(*dp));
}

void sl_dp_abandon(struct sl_dataplane *dp)
{
	char path[PATH_MAX];

	if (!dp->pin_dir[0])
		return;
	for (int i = 0; i < dp->n_ifaces; i++) {
		if (dp->ifaces[i].adopted)
			continue;
		if (dp->ifaces[i].egress)
			sl_tc_detach(dp->ifaces[i].ifindex);
		bpf_link_detach(dp->ifaces[i].link_fd);
		sl_pins_link_path(dp->pin_dir, dp->ifaces[i].name, path,
				  sizeof(path));
		unlink(path);
	}
	if (!dp->adopted)
		sl_pins_remove_unlinked(dp->pin_dir);
}
