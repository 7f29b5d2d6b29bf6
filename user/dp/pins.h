/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pin directory: what an earlier agent pinned, read and removed. It
 * holds links/IF (each interface's XDP link, kept across upgrades) and
 * layout-ID/ (the maps, ID their layout's id). Before layouts had ids the
 * maps and link-IF lay in the directory itself (a flat layout).
 */
#ifndef SLUICE_PINS_H
#define SLUICE_PINS_H

#include <limits.h>
#include <net/if.h>

#include "dataplane.h"
#include "layout.h"

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

/* mkdir -p, mode 0700. 0 or -errno. */
int sl_pins_mkdir(const char *dir);

/* Unpin every map of a layout directory (or the flat layout's) and, for
 * a layout directory, remove it. Returns how many maps it unpinned. */
int sl_pins_remove_maps(const char *dir, bool flat);

/* Layout directories (and flat maps) in pin_dir other than keep (NULL:
 * none kept): what no link runs with. Returns how many maps went. */
int sl_pins_remove_other(const char *pin_dir, const char *keep);

/* Remove the pinned maps and the directory when no link is left in it;
 * true when there were maps to remove. */
bool sl_pins_remove_unlinked(const char *pin_dir);

/* What a pinned data plane enforces, read from its pins alone. */
struct sl_pins_view {
	int n_ifaces;
	struct {
		char name[IF_NAMESIZE];
		int ifindex; /* 0: the link's interface is gone */
	} ifaces[SL_MAX_IFACES];
	size_t n_rules; /* the rule set in force */
	struct sl_slot_state *rules; /* name and def_hash */
};

/* The links pinned in pin_dir and the rules their maps hold in force,
 * without loading anything (no agent needed). -ENOENT: no link pinned;
 * -ENODATA: links but no rules readable (the interfaces are set). Free
 * with sl_pins_view_free() whatever it returns. */
int sl_pins_view(const char *pin_dir, struct sl_pins_view *v);
void sl_pins_view_free(struct sl_pins_view *v);

#endif
