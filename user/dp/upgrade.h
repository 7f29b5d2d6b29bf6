/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to the data plane: what an earlier agent pinned, and an
 * upgrade across a change of the pinned layout (docs/operations.md,
 * "Upgrading"). The new program is loaded beside the old one with maps of
 * its own where a map's shape changed and the old map where it did not;
 * the changed maps' state is carried, every pinned link is switched to
 * the new program at once (BPF_LINK_UPDATE), and the old pins go.
 *
 * The pin directory holds links/IF (each interface's XDP link, kept
 * across upgrades) and layout-ID/ (the maps, ID their layout's id). Before
 * layouts had ids the maps and link-IF lay in the directory itself (a
 * flat layout); they are upgraded the same way.
 */
#ifndef SLUICE_UPGRADE_H
#define SLUICE_UPGRADE_H

#include <limits.h>
#include <net/if.h>

#include "layout.h"
#include "loader.h"

struct sl_pinned_link {
	char ifname[IF_NAMESIZE];
	char path[PATH_MAX];
	int fd;
	bool flat;		/* pinned as link-IF beside flat maps */
};

struct sl_pins {
	int n_links;
	struct sl_pinned_link links[SL_MAX_IFACES];
	int prog_fd;		/* what the links run; -1: no link */
	struct sl_layout maps;	/* the maps it uses; n == 0: none pinned */
	char maps_dir[PATH_MAX];
	bool flat;		/* maps_dir is the pin directory itself */
	/* of the next layout's maps: the running map is taken as it is */
	bool shared[SL_LAYOUT_MAX_MAPS];
};

/* The links in pin_dir and the maps their program uses (prefer: where
 * this build's would be, taken when the program's map ids are not known). */
int sl_pins_open(const char *pin_dir, const char *prefer, struct sl_pins *p);
void sl_pins_close(struct sl_pins *p);

/* The link pin of ifname, and the maps directory of a layout. */
void sl_pins_link_path(const char *pin_dir, const char *ifname, char *out,
		       size_t len);
void sl_pins_maps_dir(const char *pin_dir, uint64_t layout, char *out,
		      size_t len);

/* Before the load: the maps of next whose shape did not change are the
 * running ones. */
int sl_upgrade_prepare(const struct sl_layout *next, struct sl_pins *p);

/*
 * After the load: carry the changed maps' state, switch every link to the
 * new program, and once the old one has stopped, add what it counted
 * meanwhile and remove its pins. Nothing has changed for the running data
 * plane when this fails.
 */
int sl_upgrade_finish(struct sl_dataplane *dp, const struct sl_layout *next,
		      struct sl_pins *p);

/* Unpin every map of a layout directory (or the flat layout's) and, for
 * a layout directory, remove it. Returns how many maps it unpinned. */
/* The counters an old element of rule_cpu gained from a to b, added to
 * rc with atomic adds (made on rc's CPU: see catch_up_counters()). */
struct sluice_rule_cpu;
void sl_rule_cpu_add_since(struct sluice_rule_cpu *rc,
			   const struct sluice_rule_cpu *a,
			   const struct sluice_rule_cpu *b);

int sl_pins_remove_maps(const char *dir, bool flat);

/* Layout directories (and flat maps) in pin_dir other than keep (NULL:
 * none kept): what no link runs with. Returns how many maps went. */
int sl_pins_remove_other(const char *pin_dir, const char *keep);

#endif
