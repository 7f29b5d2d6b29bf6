// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attach.h"
#include "log.h"
#include "pins.h"
#include "sluice.skel.h"

static const char *dirname_of(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	if (strrchr(out, '/'))
		*strrchr(out, '/') = 0;
	return out;
}

const char *const sl_xdp_mode_names[] = {
	[SL_XDP_AUTO] = "auto",
	[SL_XDP_NATIVE] = "native",
	[SL_XDP_GENERIC] = "generic",
	NULL,
};

const char *sl_xdp_mode_str(enum sl_xdp_mode mode)
{
	return mode <= SL_XDP_GENERIC ? sl_xdp_mode_names[mode] : "auto";
}

/* The egress program hears the answers of breakers and the closes of
 * conns rules' connections. */
static bool wants_egress(const struct sl_ruleset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->rules[i].breaker.enabled ||
		    rs->rules[i].grade == SL_GRADE_CONNS)
			return true;
	return false;
}

static libbpf_print_fn_t tc_print;

/* The kernel's answers to a tc call whose failure is expected and handled
 * (no clsact qdisc to detach from: "Parent Qdisc doesn't exists"; one
 * there already: "Exclusivity flag on") are not worth a warning. */
static int tc_quiet(enum libbpf_print_level level, const char *fmt,
		    va_list ap)
{
	if (strstr(fmt, "Kernel error message"))
		return 0;
	return tc_print ? tc_print(level, fmt, ap) : 0;
}

int sl_tc_detach(int ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = SL_TC_HANDLE,
		    .priority = SL_TC_PRIO);
	int err;

	tc_print = libbpf_set_print(tc_quiet);
	err = bpf_tc_detach(&hook, &o);
	libbpf_set_print(tc_print);
	return err;
}

/* Our filter on ifc's clsact egress, replacing an earlier agent's. */
int sl_tc_attach(struct sl_dataplane *dp, struct sl_iface *ifc)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifc->ifindex,
		    .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = SL_TC_HANDLE,
		    .priority = SL_TC_PRIO, .flags = BPF_TC_F_REPLACE,
		    .prog_fd = bpf_program__fd(dp->skel->progs.sluice_egress));
	int err;

	tc_print = libbpf_set_print(tc_quiet);
	err = bpf_tc_hook_create(&hook);
	libbpf_set_print(tc_print);
	if (err && err != -EEXIST)
		return err;
	err = bpf_tc_attach(&hook, &o);
	if (!err)
		ifc->egress = true;
	return err;
}

/* Still there? Deleting a clsact qdisc (another tool's) takes it along. */
static bool tc_attached(const struct sl_iface *ifc)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifc->ifindex,
		    .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = SL_TC_HANDLE,
		    .priority = SL_TC_PRIO);

	return !bpf_tc_query(&hook, &o);
}

int sl_dp_sync_egress(struct sl_dataplane *dp)
{
	bool want = wants_egress(&dp->rules);
	int err = 0, e;

	for (int i = 0; i < dp->n_ifaces; i++) {
		struct sl_iface *ifc = &dp->ifaces[i];

		if (want && ifc->egress && !tc_attached(ifc)) {
			pr_warn("%s: the egress program was removed (with its "
				"clsact qdisc?): attaching it again", ifc->name);
			ifc->egress = false;
		}
		if (want && !ifc->egress) {
			e = sl_tc_attach(dp, ifc);
		} else if (!want && ifc->egress) {
			e = sl_tc_detach(ifc->ifindex);
			ifc->egress = false;
		} else {
			continue;
		}
		if (e) {
			pr_warn("%s: egress program: %s", ifc->name,
				strerror(-e));
			err = err ? err : e;
		}
	}
	return err;
}

/* skel's XDP program: the multi-buffer one or the other; -ENOENT when
 * it was not loaded */
static int xdp_prog_fd(const struct sluice_bpf *skel, bool frags)
{
	int fd = bpf_program__fd(frags ? skel->progs.sluice_xdp_frags
				       : skel->progs.sluice_xdp);

	return fd < 0 ? -ENOENT : fd;
}

/* sluice_xdp first: a driver refuses it where frames may come in several
 * buffers (its MTU), and then takes sluice_xdp_frags if loaded. The
 * first error is the one to report. */
static int link_xdp(struct sl_dataplane *dp, int ifindex, __u32 flags,
		    bool *frags)
{
	LIBBPF_OPTS(bpf_link_create_opts, lopts, .flags = flags);
	int fd = bpf_link_create(xdp_prog_fd(dp->skel, false), ifindex,
				 BPF_XDP, &lopts), err = -errno;

	*frags = false;
	if (fd >= 0)
		return fd;
	if (!dp->frags)
		return err;
	fd = bpf_link_create(xdp_prog_fd(dp->skel, true), ifindex, BPF_XDP,
			     &lopts);
	*frags = fd >= 0;
	return fd >= 0 ? fd : err;
}

int sl_dp_link_update(const struct sl_dataplane *dp,
		      const struct sluice_bpf *skel, int link_fd, bool *frags)
{
	int err;

	if (!bpf_link_update(link_fd, xdp_prog_fd(skel, false), NULL)) {
		*frags = false;
		return 0;
	}
	err = -errno;
	if (!dp->frags ||
	    bpf_link_update(link_fd, xdp_prog_fd(skel, true), NULL))
		return err;
	*frags = true;
	return 0;
}

bool sl_dp_iface_jumbo(const char *ifname)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool jumbo = false;

	if (fd < 0)
		return false;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (!ioctl(fd, SIOCGIFMTU, &ifr))
		jumbo = ifr.ifr_mtu > ETH_DATA_LEN;
	close(fd);
	return jumbo;
}

/*
 * Another program on ifname's XDP hook (not a link of ours to adopt):
 * the kernel would refuse ours with EBUSY or EEXIST, which say nothing
 * of why. -EBUSY after saying whose it is, or 0.
 */
static int foreign_xdp(int ifindex, const char *ifname)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info), id;
	int fd;

	if (bpf_xdp_query(ifindex, 0, &q))
		return 0;
	id = q.drv_prog_id ? q.drv_prog_id
			   : q.skb_prog_id ? q.skb_prog_id : q.hw_prog_id;
	if (!id)
		return 0;
	fd = bpf_prog_get_fd_by_id(id);
	if (fd >= 0) {
		bpf_obj_get_info_by_fd(fd, &info, &len);
		close(fd);
	}
	pr_err("%s: another XDP program is attached (id %u%s%s, %s mode): "
	       "sluice needs the interface's XDP hook to itself; detach it "
	       "(`ip link set dev %s xdp off`, or the tool that attached it) "
	       "first", ifname, id, info.name[0] ? ", " : "", info.name,
	       q.drv_prog_id ? "native" : q.skb_prog_id ? "generic" : "offload",
	       ifname);
	return -EBUSY;
}

static enum sl_xdp_mode attached_mode(int ifindex)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	if (bpf_xdp_query(ifindex, 0, &q))
		return SL_XDP_AUTO;
	return q.attach_mode == XDP_ATTACHED_SKB ? SL_XDP_GENERIC
						 : SL_XDP_NATIVE;
}

/*
 * A link pinned by an earlier agent on this interface: point it at our
 * program instance (same maps; one atomic swap, no gap) and keep it.
 * Returns the fd, or -ENOENT when there is none to adopt.
 */
static int adopt_link(struct sl_dataplane *dp, const char *path, int ifindex,
		      bool *frags)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(path), err;

	if (fd < 0)
		return -ENOENT;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    info.type != BPF_LINK_TYPE_XDP || info.xdp.ifindex != (__u32)ifindex) {
		/* the interface went away and came back: a stale pin */
		close(fd);
		unlink(path);
		return -ENOENT;
	}
	err = sl_dp_link_update(dp, dp->skel, fd, frags);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int sl_dp_attach(struct sl_dataplane *dp, const char *ifname,
		 enum sl_xdp_mode mode)
{
	char path[PATH_MAX] = "", dir[PATH_MAX];
	struct sl_iface *ifc;
	int ifindex, fd;

	if (dp->n_ifaces == SL_MAX_IFACES)
		return -E2BIG;
	ifindex = if_nametoindex(ifname);
	if (!ifindex)
		return -ENODEV;
	ifc = &dp->ifaces[dp->n_ifaces];
	memset(ifc, 0, sizeof(*ifc));
	snprintf(ifc->name, sizeof(ifc->name), "%s", ifname);
	ifc->ifindex = ifindex;

	if (dp->pin_dir[0]) {
		sl_pins_link_path(dp->pin_dir, ifname, path, sizeof(path));
		fd = adopt_link(dp, path, ifindex, &ifc->frags);
		if (fd >= 0) {
			ifc->link_fd = fd;
			ifc->adopted = true;
			ifc->mode = attached_mode(ifindex);
			if (mode != SL_XDP_AUTO && mode != ifc->mode)
				pr_warn("%s: kept the running data plane in %s "
					"mode although %s was asked; run "
					"`sluice down` first to change it",
					ifname, sl_xdp_mode_str(ifc->mode),
					sl_xdp_mode_str(mode));
			dp->n_ifaces++;
			/* an earlier agent's filter runs its program:
			 * ours replaces it */
			if (!wants_egress(&dp->rules))
				sl_tc_detach(ifindex);
			else if ((fd = sl_tc_attach(dp, ifc)))
				pr_warn("%s: egress program: %s", ifname,
					strerror(-fd));
			return 0;
		}
		if (fd != -ENOENT)
			return fd;
	}

	fd = foreign_xdp(ifindex, ifname);
	if (fd)
		return fd;
	fd = mode == SL_XDP_GENERIC
		     ? -EOPNOTSUPP
		     : link_xdp(dp, ifindex, XDP_FLAGS_DRV_MODE, &ifc->frags);
	if (fd >= 0) {
		ifc->mode = SL_XDP_NATIVE;
	} else if (mode == SL_XDP_NATIVE) {
		return fd;
	} else {
		if (mode == SL_XDP_AUTO)
			pr_warn("%s: native XDP unavailable (%s%s), using "
				"generic XDP: slower, runs after the kernel "
				"allocates an skb", ifname, strerror(-fd),
				!dp->frags && sl_dp_iface_jumbo(ifname)
					? "; its MTU may need multi-buffer "
					  "XDP, which this kernel lacks"
					: "");
		fd = link_xdp(dp, ifindex, XDP_FLAGS_SKB_MODE, &ifc->frags);
		if (fd < 0)
			return fd;
		ifc->mode = SL_XDP_GENERIC;
	}
	if (path[0] && (sl_pins_mkdir(dirname_of(path, dir, sizeof(dir))) ||
			bpf_obj_pin(fd, path))) {
		int err = -errno;

		close(fd);
		return err;
	}
	ifc->link_fd = fd;
	dp->n_ifaces++;
	/* without it the breakers see no answers; limits still hold */
	sl_dp_sync_egress(dp);
	return 0;
}

bool sl_dp_iface_attached(const struct sl_iface *ifc)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);

	return !bpf_obj_get_info_by_fd(ifc->link_fd, &info, &len) &&
	       info.xdp.ifindex == (__u32)ifc->ifindex;
}

int sl_pins_down(const char *pin_dir, const char *ifname, bool *maps_removed)
{
	char path[PATH_MAX];
	int fd, err = 0;

	*maps_removed = false;
	sl_pins_link_path(pin_dir, ifname, path, sizeof(path));
	fd = bpf_obj_get(path);
	if (fd < 0) {
		/* pinned before layouts had ids */
		snprintf(path, sizeof(path), "%s/link-%s", pin_dir, ifname);
		fd = bpf_obj_get(path);
	}
	if (fd < 0) {
		err = -errno;
		/* maps without any link: what a failed start left */
		if (err == -ENOENT)
			*maps_removed = sl_pins_remove_unlinked(pin_dir);
		return err;
	}
	/* detach even if some other process still holds the link */
	if (if_nametoindex(ifname))
		sl_tc_detach(if_nametoindex(ifname));
	if (bpf_link_detach(fd))
		err = -errno;
	close(fd);
	if (err)
		return err;
	unlink(path);
	*maps_removed = sl_pins_remove_unlinked(pin_dir);
	return 0;
}
